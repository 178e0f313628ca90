# Run by `cmake --install` (see the install section at the end of
# CMakeLists.txt), so that what it writes names the prefix given at install
# time: ember/config.lua (where libember is, which lua/ember/init.lua reads)
# and the pkg-config files ember.pc and ember_lua.pc.
# In: EMBER_LUADIR, EMBER_LIBDIR, EMBER_INCLUDEDIR (relative to the prefix, or
# absolute), EMBER_LIBFILE (libember's SONAME file), EMBER_VERSION,
# EMBER_SOURCE_DIR, EMBER_LUAROCKS (a rock: no pkg-config files, since LuaRocks
# moves the libraries out of the libdir they would name).
foreach(kind LUADIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${EMBER_${kind}}")
    set(${kind} "${EMBER_${kind}}")
  else()
    set(${kind} "${CMAKE_INSTALL_PREFIX}/${EMBER_${kind}}")
  endif()
endforeach()

# config.lua: the absolute path, and the same path relative to this file for
# a tree that was moved after install (and LuaRocks' lib/lua/5.1 layout).
file(RELATIVE_PATH rel "${LUADIR}/ember" "${LIBDIR}")
set(config "$ENV{DESTDIR}${LUADIR}/ember/config.lua")
message(STATUS "Installing: ${config}")
file(WRITE "${config}" "\
-- ember/config.lua: written by `cmake --install`; lua/ember/init.lua reads
-- libpath. If the tree has moved since, libember is looked for relative to
-- this file.
local libpath = \"${LIBDIR}/${EMBER_LIBFILE}\"
local function exists(p)
  local f = io.open(p, \"rb\")
  if f then f:close() end
  return f ~= nil
end
if not exists(libpath) then
  local dir = debug.getinfo(1, \"S\").source:match(\"^@(.*)/[^/]*$\") or \".\"
  for _, rel in ipairs({ \"${rel}\", \"../../../../lib/lua/5.1\" }) do
    local p = dir .. \"/\" .. rel .. \"/${EMBER_LIBFILE}\"
    if exists(p) then
      libpath = p
      break
    end
  end
end
return { libpath = libpath, version = \"${EMBER_VERSION}\", prefix = \"${CMAKE_INSTALL_PREFIX}\" }
")

set(PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(kind LIBDIR INCLUDEDIR LUADIR)
  string(REPLACE "${CMAKE_INSTALL_PREFIX}/" "\${prefix}/" PC_${kind} "${${kind}}")
endforeach()
set(written "${config}")
foreach(pc "cmake/ember.pc.in" "cli/ember_lua.pc.in")
  if(NOT EMBER_LUAROCKS AND EXISTS "${EMBER_SOURCE_DIR}/${pc}")
    get_filename_component(name "${pc}" NAME_WE)
    set(out "$ENV{DESTDIR}${LIBDIR}/pkgconfig/${name}.pc")
    message(STATUS "Installing: ${out}")
    configure_file("${EMBER_SOURCE_DIR}/${pc}" "${out}" @ONLY)
    list(APPEND written "${out}")
  endif()
endforeach()
# into install_manifest.txt, like the files install() copies
list(APPEND CMAKE_INSTALL_MANIFEST_FILES ${written})
