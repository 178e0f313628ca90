# Copies the region between "/* ffi:begin */" and "/* ffi:end */" of a header
# (ember.h, or FROM: dist/'s headers) into a Lua module returning it as a
# string (EMBER_API stripped).
if(NOT DEFINED FROM)
  set(FROM core/include/ember.h)
endif()
file(READ ${HEADER} text)
string(FIND "${text}" "/* ffi:begin */" b)
string(FIND "${text}" "/* ffi:end */" e)
if(b EQUAL -1 OR e EQUAL -1)
  message(FATAL_ERROR "ffi markers not found in ${HEADER}")
endif()
math(EXPR b "${b} + 15")
math(EXPR len "${e} - ${b}")
string(SUBSTRING "${text}" ${b} ${len} region)
string(REPLACE "EMBER_API " "" region "${region}")
file(WRITE ${OUT}.tmp "-- Generated from ${FROM} by cmake/make_cdef.cmake; do not edit.\nreturn [==[\n${region}\n]==]\n")
file(RENAME ${OUT}.tmp ${OUT})
