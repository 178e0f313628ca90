#!/usr/bin/env bash
# Builds a Windows LuaJIT and the C modules busted needs, with the mingw-w64
# cross toolchain, from Debian's source packages (docs/platforms.md), into
# DIR (default build-windows/lua):
#   DIR/luajit.exe, DIR/lua51.dll, DIR/lua/jit/*.lua     LuaJIT 2.1 (Debian's luajit source)
#   DIR/clib/lfs.dll, DIR/clib/term/core.dll             lua-filesystem, lua-term
# busted's third C module, luasystem, has no source on Debian's mirror here;
# scripts/windows_system.lua stands in for the three functions busted takes
# from it. The sources come through apt-get with a list of Debian's deb-src
# entries of its own (under DIR/apt; the system's apt settings are left as
# they are), so no root is needed, but a network is. Exit status non-zero
# when anything is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-windows/lua}
JOBS=$(nproc 2>/dev/null || echo 2)
cross=x86_64-w64-mingw32-
command -v ${cross}gcc >/dev/null || { echo "windows_lua: mingw-w64 is missing (scripts/setup.sh)"; exit 1; }
mkdir -p "$dir/apt/lists/partial" "$dir/src" "$dir/clib/term" "$dir/lua/jit"
dir=$(cd "$dir" && pwd)
src=$dir/src

if [ ! -f "$src/luajit/src/luajit.c" ]; then
  # Debian 12's sources (the suite the host's packages come from)
  suite=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-bookworm}")
  cat >"$dir/apt/sources.list" <<EOF
deb-src http://deb.debian.org/debian $suite main
deb-src http://deb.debian.org/debian-security $suite-security main
EOF
  apt_opts=(-o Dir::Etc::SourceList="$dir/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
            -o Dir::State::Lists="$dir/apt/lists" -o Debug::NoLocking=1)
  apt-get "${apt_opts[@]}" update -qq
  # one package at a time: the mirror may lack a part of one (lua-term's
  # Debian patches, which only package it), and the others still come
  for name in luajit lua-filesystem lua-term; do
    (cd "$src" && apt-get "${apt_opts[@]}" source --download-only -qq "$name" 2>&1) || true
  done
  for name in luajit lua-filesystem lua-term; do
    rm -rf "${src:?}/$name"
    dsc=$(ls "$src"/${name}_*.dsc 2>/dev/null | head -n 1)
    # Debian's patches applied where the whole source package came; else the
    # upstream tarball as it is
    if [ -z "$dsc" ] || ! dpkg-source --no-check -x "$dsc" "$src/$name" >/dev/null 2>&1; then
      orig=$(ls "$src"/${name}_*.orig.tar.* 2>/dev/null | head -n 1)
      [ -n "$orig" ] || { echo "windows_lua: no source of $name"; exit 1; }
      mkdir -p "$src/$name" && tar -xf "$orig" -C "$src/$name" --strip-components=1
      echo "windows_lua: $name from its upstream tarball (no Debian patches)"
    fi
  done
fi

echo "windows_lua: LuaJIT for x86_64 Windows"
make -C "$src/luajit" -j "$JOBS" HOST_CC=gcc CROSS=$cross TARGET_SYS=Windows BUILDMODE=dynamic >"$dir/luajit_build.log" 2>&1 ||
  { tail -n 30 "$dir/luajit_build.log"; exit 1; }
cp "$src/luajit/src/luajit.exe" "$src/luajit/src/lua51.dll" "$dir/"
cp "$src/luajit/src/jit/"*.lua "$dir/lua/jit/"
echo "windows_lua: lfs.dll and term/core.dll"
lj=$src/luajit/src
${cross}gcc -O2 -shared -I"$lj" "$src/lua-filesystem/src/lfs.c" -o "$dir/clib/lfs.dll" -L"$lj" -llua51
${cross}gcc -O2 -shared -I"$lj" "$src/lua-term/core.c" -o "$dir/clib/term/core.dll" -L"$lj" -llua51
echo "windows_lua: done ($dir)"
