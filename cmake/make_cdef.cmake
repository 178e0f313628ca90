# Copies the FFI declarations of a header, the region between
# "/* ffi:begin */" and "/* ffi:end */" (EMBER_API stripped), into Lua
# modules that return it as a string. HEADER: the header; OUT: the module to
# write; FROM: the header's name in the generated comment.
#   - A header with its own region (dist/'s) gives the one module OUT.
#   - ember.h has none: it includes its parts, `#include "ember/<part>.h"`.
#     Each part's region becomes <OUT's folder>/<OUT's name>/<part>.lua
#     (module <package>.<name>.<part>), and OUT joins them in include order.
#     Modules of parts no longer included are removed.
cmake_policy(SET CMP0057 NEW)   # if(IN_LIST)
if(NOT DEFINED FROM)
  set(FROM core/include/ember.h)
endif()

function(ffi_region path var)
  file(READ ${path} text)
  string(FIND "${text}" "/* ffi:begin */" b)
  string(FIND "${text}" "/* ffi:end */" e)
  if(b EQUAL -1 OR e EQUAL -1)
    message(FATAL_ERROR "ffi markers not found in ${path}")
  endif()
  math(EXPR b "${b} + 15")
  math(EXPR len "${e} - ${b}")
  string(SUBSTRING "${text}" ${b} ${len} region)
  string(REPLACE "EMBER_API " "" region "${region}")
  set(${var} "${region}" PARENT_SCOPE)
endfunction()

function(write_module out from body)
  file(WRITE ${out}.tmp "-- Generated from ${from} by cmake/make_cdef.cmake; do not edit.\n${body}")
  file(RENAME ${out}.tmp ${out})
endfunction()

file(READ ${HEADER} text)
string(REGEX MATCHALL "#include \"ember/[a-z0-9_]+\\.h\"" includes "${text}")
if(NOT includes)
  ffi_region(${HEADER} region)
  write_module(${OUT} ${FROM} "return [==[\n${region}\n]==]\n")
  return()
endif()

get_filename_component(header_dir ${HEADER} DIRECTORY)
get_filename_component(from_dir ${FROM} DIRECTORY)
get_filename_component(out_dir ${OUT} DIRECTORY)
get_filename_component(package ${out_dir} NAME)
get_filename_component(stem ${OUT} NAME_WE)
file(MAKE_DIRECTORY ${out_dir}/${stem})
set(parts "")
set(written "")
foreach(line ${includes})
  string(REGEX REPLACE "#include \"ember/([a-z0-9_]+)\\.h\"" "\\1" part "${line}")
  ffi_region(${header_dir}/ember/${part}.h region)
  set(module ${out_dir}/${stem}/${part}.lua)
  write_module(${module} ${from_dir}/ember/${part}.h "return [==[\n${region}\n]==]\n")
  list(APPEND written ${module})
  string(APPEND parts "  require(\"${package}.${stem}.${part}\"),\n")
endforeach()
file(GLOB old ${out_dir}/${stem}/*.lua)
foreach(module ${old})
  if(NOT module IN_LIST written)
    file(REMOVE ${module})
  endif()
endforeach()
write_module(${OUT} ${FROM} "-- The FFI declarations of ember.h's parts, in its order.\nreturn table.concat({\n${parts}})\n")
