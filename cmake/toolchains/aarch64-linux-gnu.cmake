# Cross-building ember for 64-bit ARM Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu) against Debian's arm64 packages installed beside the
# host's (multiarch: `dpkg --add-architecture arm64`, then libopenblas-dev:arm64,
# libluajit-5.1-dev:arm64, zlib1g-dev:arm64, ...). The programs it builds (the
# C tests, the embed examples, the build-time op-list generator) run under
# qemu-aarch64-static. docs/platforms.md; scripts/cross_test.sh arm64.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# the target's libraries: the cross toolchain's libc, then the multiarch ones
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# pkg-config reads the arm64 .pc files only
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# nothing MPI of the host's (x86-64 Open MPI) may be taken for the target's
set(CMAKE_DISABLE_FIND_PACKAGE_MPI ON)
# libc6:arm64 (multiarch, which libluajit-5.1-dev:arm64 pulls in) puts the
# dynamic loader at /lib/ld-linux-aarch64.so.1, where QEMU finds it with the
# rest of the arm64 libraries. (-L /usr/aarch64-linux-gnu, the cross
# toolchain's copy of libc, mixes two copies of it: programs hang at exit.)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
