# Turns a Lua source file into a C header holding it as bytes:
#   cmake -DIN=boot.lua -DOUT=boot_lua.h -DNAME=boot_lua -P embed_lua.cmake
# gives `static const unsigned char boot_lua[]` and `boot_lua_len`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR nbytes "${nhex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
get_filename_component(src "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* generated from ${src} by cli/cmake/embed_lua.cmake; do not edit */\n"
  "static const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "static const size_t ${NAME}_len = ${nbytes};\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
