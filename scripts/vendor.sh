#!/usr/bin/env bash
# Copies ember into a host's own tree, the way a game or plugin ships it:
#   scripts/vendor.sh DEST [BUILD]      # BUILD defaults to build/
# writes DEST/ember/: the Lua package (with the files the build generates:
# cdef.lua, optable.lua, ...), libember.so and, when it was built,
# libember_cuda.so beside it. require("ember") finds the library there with
# no environment variable (lua/ember/loader.lua; docs/hosts.md). Run the
# build first (scripts/setup.sh). An existing DEST/ember is replaced.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: scripts/vendor.sh DEST [BUILD]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$1"
build="${2:-$root/build}"
lib="$build/libember.so"
if [ ! -e "$lib" ]; then
  echo "vendor: $lib is missing; build first (scripts/setup.sh)" >&2
  exit 1
fi
for gen in cdef optable; do
  if [ ! -e "$root/lua/ember/$gen.lua" ]; then
    echo "vendor: lua/ember/$gen.lua is missing; build first (scripts/setup.sh)" >&2
    exit 1
  fi
done
mkdir -p "$dest"
out="$dest/ember"
rm -rf "$out"
mkdir -p "$out"
# every Lua file of the package but an install's config.lua (it names the
# install's library)
(cd "$root/lua/ember" && find . -name '*.lua' ! -path ./config.lua -print0 |
  while IFS= read -r -d '' f; do
    mkdir -p "$out/$(dirname "$f")"
    cp "$f" "$out/$f"
  done)
# the libraries as single files under the names the loader and the core look for
cp -L "$lib" "$out/libember.so"
if [ -e "$build/cuda/libember_cuda.so" ]; then
  cp -L "$build/cuda/libember_cuda.so" "$out/libember_cuda.so"
elif [ -e "$build/libember_cuda.so" ]; then
  cp -L "$build/libember_cuda.so" "$out/libember_cuda.so"
fi
echo "vendor: ember copied into $out"
