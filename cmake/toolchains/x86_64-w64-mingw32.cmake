# Cross-building ember for 64-bit Windows with Debian's mingw-w64 (the
# gcc-mingw-w64-x86-64 compilers, libz-mingw-w64-dev); the programs it builds
# run under wine64. No OpenBLAS, oneDNN or LuaJIT for Windows is at hand here:
# configure with -DEMBER_BLAS=OFF -DEMBER_DNNL=OFF -DEMBER_CUDA=OFF (ember's own
# reference products; the CLI and the Lua hosts are left out without LuaJIT).
# docs/platforms.md; scripts/cross_test.sh windows.
#   cmake -S . -B build-windows -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-w64-mingw32.cmake \
#         -DEMBER_BLAS=OFF -DEMBER_DNNL=OFF -DEMBER_CUDA=OFF
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} /usr/x86_64-w64-mingw32/lib/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# nothing MPI of the host's may be taken for the target's
set(CMAKE_DISABLE_FIND_PACKAGE_MPI ON)
# Debian's wine64 puts its loader in /usr/lib/wine (the wine package adds /usr/bin/wine)
find_program(EMBER_WINE NAMES wine64 wine PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
set(CMAKE_CROSSCOMPILING_EMULATOR ${EMBER_WINE})
