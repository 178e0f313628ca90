#!/usr/bin/env bash
# Unpacks, into the folder given (default .devdeps/ at the repository root),
# the Debian packages ember needs at run time on a machine that has no
# package registry (the lent GPU machine has CUDA, cmake and a compiler, but
# no LuaJIT, OpenBLAS or busted). Run it here, then carry the folder.
#
#   echo /.devdeps/ >> .git/info/exclude     # keep it out of git
#   scripts/device/pack-deps.sh              # -> .devdeps/ (about 50 MB)
#   then, in the command run there:  source .devdeps/env.sh .devdeps
# scripts/device/gpu-suite.sh runs the whole device suite there in one call.
# oneDNN (libdnnl2 and its OpenCL loader, about 40 MB) does not fit beside the
# rest in what may travel (64 MiB): the build there runs convolutions on the
# CPU through ember's own kernels, which only the CPU-side timings would see.
set -euo pipefail
dest=${1:-.devdeps}
pkgs=(luajit libluajit-5.1-2 libluajit-5.1-common libluajit-5.1-dev
      libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev libgfortran5
      lua-busted lua-cliargs lua-dkjson lua-filesystem lua-luassert lua-mediator
      lua-penlight lua-say lua-system lua-term zlib1g-dev
      pkgconf pkgconf-bin libpkgconf3 libedit-dev libedit2 libbsd0 libmd0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"
( cd "$tmp" && apt-get download "${pkgs[@]}" >/dev/null )
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dest"; done
# OpenBLAS is installed through Debian's alternatives; make the plain names resolve.
lib="$dest/usr/lib/x86_64-linux-gnu"
for f in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  src=$(find "$lib/openblas-pthread" -name "$f" 2>/dev/null | head -n1)
  [ -n "$src" ] && ln -sf "openblas-pthread/$f" "$lib/$f"
done
# Static archives, docs and man pages are not needed there and would push the
# folder past what can travel (64 MiB).
find "$dest" -name '*.a' -delete
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/usr/share/lintian"
cp "$(dirname "$0")/env.sh" "$dest/env.sh"
du -sh "$dest"
