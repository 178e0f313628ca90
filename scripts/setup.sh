#!/usr/bin/env bash
# Installs the Debian packages ember needs (only those missing), then
# configures and builds into build/. Idempotent: run it as often as you like.
#   scripts/setup.sh            # release build in build/
#   scripts/setup.sh --asan     # also an ASan+UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(cmake gcc make pkg-config luajit libluajit-5.1-dev libopenblas-dev lua-busted zlib1g-dev
      libdnnl-dev libedit-dev luarocks dataset-fashion-mnist bible-kjv clang libclang-rt-14-dev openmpi-bin libopenmpi-dev)
# real hosts for spec/hosts_spec.lua (docs/hosts.md): LÖVE 11.4 run headless under
# Xvfb (xvfb-run needs xauth; Mesa's software OpenGL draws there), Neovim, and zip for a .love
PKGS+=(love xvfb xauth libgl1-mesa-dri neovim zip)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# installs those of the packages "$@" that dpkg does not have installed
install_missing() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
install_missing "${PKGS[@]}"

# Cross builds (scripts/cross_test.sh, docs/platforms.md): aarch64 Linux under
# QEMU, against Debian's arm64 packages beside the host's (multiarch), and
# Windows with mingw-w64 under Wine. Best effort: without root or a network
# they are left out, and scripts/cross_test.sh says what is missing.
# dpkg-dev unpacks the source packages scripts/windows_lua.sh builds a Windows LuaJIT from.
CROSS=(qemu-user-static gcc-aarch64-linux-gnu gcc-mingw-w64-x86-64 libz-mingw-w64-dev wine64 dpkg-dev)
ARM64=(libc6:arm64 libluajit-5.1-dev:arm64 libopenblas-dev:arm64 zlib1g-dev:arm64 libedit-dev:arm64
       lua-filesystem:arm64 lua-system:arm64)
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "setup: adding the arm64 architecture (multiarch) for the ARM64 cross build"
    $SUDO dpkg --add-architecture arm64 && $SUDO apt-get update -qq || true
  fi
  dpkg --print-foreign-architectures | grep -qx arm64 && CROSS+=("${ARM64[@]}")
  install_missing "${CROSS[@]}" ||
    echo "setup: the cross tools could not be installed: scripts/cross_test.sh will say what is missing"
fi

JOBS=$(nproc 2>/dev/null || echo 2)
WERROR=OFF
[ "${CI:-}" = "true" ] && WERROR=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEMBER_WERROR=$WERROR >/dev/null
cmake --build build -j "$JOBS"
if [ "${1:-}" = "--asan" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON -DEMBER_CUDA=OFF \
    -DEMBER_WERROR=$WERROR >/dev/null
  cmake --build build-asan -j "$JOBS"
fi
