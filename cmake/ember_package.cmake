# How other projects find ember, from this build tree and from an install:
#   find_package(ember)  targets ember::ember (libember, ember.h) and, when
#                        cli/ is built, ember::ember_lua (ember_lua.h, LuaJIT);
#                        ember_DIR=<build> or <prefix>/lib/cmake/ember
#   pkg-config ember / ember_lua   PKG_CONFIG_PATH=<build>/pkgconfig (the
#                        -uninstalled files below, which pkg-config prefers) or
#                        <prefix>/lib/pkgconfig (cmake/ember_install.cmake)
# Included at the end of the root CMakeLists.txt, after cli/.
include(CMakePackageConfigHelpers)

set(ember_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
configure_file(${CMAKE_SOURCE_DIR}/cmake/emberConfig.cmake.in ${CMAKE_BINARY_DIR}/emberConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/emberConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
# the build tree: ember_DIR=<build> uses the targets where they were built
export(EXPORT ember NAMESPACE ember:: FILE ${CMAKE_BINARY_DIR}/emberTargets.cmake)
# an install (not a rock: LuaRocks moves the libraries out of lib/)
if(NOT EMBER_LUAROCKS)
  install(EXPORT ember NAMESPACE ember:: DESTINATION ${ember_cmake_dir} FILE emberTargets.cmake)
  install(FILES ${CMAKE_BINARY_DIR}/emberConfig.cmake ${CMAKE_BINARY_DIR}/emberConfigVersion.cmake
    DESTINATION ${ember_cmake_dir})
endif()

# pkg-config files for the build tree, named <name>-uninstalled.pc, which
# pkg-config takes in place of <name>.pc when both are on its path
set(ember_pc_common "Version: ${PROJECT_VERSION}\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/pkgconfig/ember-uninstalled.pc CONTENT "\
# ember's C API from the build tree ${CMAKE_BINARY_DIR} (written by cmake)
libdir=$<TARGET_FILE_DIR:ember>
includedir=${CMAKE_SOURCE_DIR}/core/include
luadir=${CMAKE_SOURCE_DIR}/lua

Name: ember
Description: ember's tensor and autograd core (C API), uninstalled
${ember_pc_common}Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lember
Cflags: -I\${includedir}
")
if(TARGET ember_lua)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/pkgconfig/ember_lua-uninstalled.pc CONTENT "\
# libember_lua (embedding ember's LuaJIT layer) from the build tree ${CMAKE_BINARY_DIR}
libdir=$<TARGET_FILE_DIR:ember_lua>
emberlibdir=$<TARGET_FILE_DIR:ember>
includedir=${CMAKE_SOURCE_DIR}/cli/include
luadir=${CMAKE_SOURCE_DIR}/lua

Name: ember_lua
Description: A LuaJIT state with ember loaded, for C hosts, uninstalled
${ember_pc_common}Requires: luajit
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -L\${emberlibdir} -Wl,-rpath,\${emberlibdir} -lember_lua -lember
Cflags: -I\${includedir} -I${CMAKE_SOURCE_DIR}/core/include
")
endif()
