# Source with the unpacked folder as argument: sets PATH, libraries and Lua
# paths so that `luajit`, `luajit "$D/usr/bin/busted"` and OpenBLAS resolve.
D=$(cd "${1:-.devdeps}" && pwd)
export PATH="$D/usr/bin:$PATH"
export LD_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUA_PATH="$D/usr/share/lua/5.1/?.lua;$D/usr/share/lua/5.1/?/init.lua;./?.lua;;"
export LUA_CPATH="$D/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;./?.so;;"
# pkg-config reads only the unpacked .pc files (OpenBLAS's sit in its
# alternative's folder) and puts $D before the /usr paths they name
export PKG_CONFIG_LIBDIR="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$D/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$D"
unset PKG_CONFIG_PATH
export CPATH="$D/usr/include:$D/usr/include/luajit-2.1:$D/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}"
export LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
