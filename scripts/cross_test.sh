#!/usr/bin/env bash
# Cross-builds ember for another platform and runs its tests under an emulator
# (docs/platforms.md). The last line is "N passed, N failed, N skipped", as
# scripts/test.sh counts it; the exit status is non-zero on any failure.
#   scripts/cross_test.sh arm64     # aarch64 Linux: build-arm64/, tests under qemu-aarch64-static
#   scripts/cross_test.sh windows   # x86_64 Windows (mingw-w64): build-windows/, tests under wine64
# scripts/setup.sh installs the toolchains (as root, when online); the Windows
# LuaJIT is built from Debian's sources on the first run (scripts/windows_lua.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
JOBS=$(nproc 2>/dev/null || echo 2)
WERROR=OFF
[ "${CI:-}" = "true" ] && WERROR=ON
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
source scripts/counts.sh   # passed, failed, skipped; count, ctest_count
finish() {
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit
}
build() {   # $1: build folder, $2: toolchain file, then CMake options
  local dir=$1 tc=$2; shift 2
  echo "== configure and build $dir ($(basename "$tc" .cmake))"
  local t0=$SECONDS
  if ! { cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$tc" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=OFF \
           -DEMBER_WERROR=$WERROR "$@" >/dev/null && cmake --build "$dir" -j "$JOBS"; } >"$log/build.txt" 2>&1; then
    tail -n 40 "$log/build.txt"
    failed=$((failed + 1)); finish
  fi
  echo "built in $((SECONDS - t0)) s"
}

case "$target" in
arm64)
  command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64-static >/dev/null || {
    echo "cross_test: the aarch64 cross toolchain or qemu-user-static is missing (scripts/setup.sh)"; failed=1; finish; }
  build build-arm64 cmake/toolchains/aarch64-linux-gnu.cmake
  # an x86 core name means nothing to OpenBLAS on ARM: its own choice runs
  unset OPENBLAS_CORETYPE
  # Left out, each over 10 minutes under QEMU on a loaded 2-core machine:
  # test_fast_math (2^32/prime float32 patterns against libm in double) and
  # embed_frame_budget (frames of training in a wall-clock budget); also the
  # Lua half of save_weights/load_weights, which trains through the ember
  # command (the Lua specs below train under QEMU instead).
  echo "== C tests under qemu-aarch64-static"
  t0=$SECONDS
  (cd build-arm64 && ctest --output-on-failure -j "$JOBS" --timeout 900 \
     -E '^(c_test_fast_math|embed_frame_budget|embed_save_weights|embed_load_weights)$') 2>&1 | tee "$log/c.txt"
  ctest_count "$log/c.txt"
  echo "C tests in $((SECONDS - t0)) s"
  # LuaJIT for arm64 (Debian's luajit:arm64, which cannot be installed beside
  # the host's luajit) and lua-term (busted's, likewise) unpacked into the build
  root=build-arm64/root
  if [ ! -x "$root/usr/bin/luajit" ]; then
    mkdir -p "$root/debs"
    (cd "$root/debs" && apt-get download luajit:arm64 lua-term:arm64) >/dev/null 2>&1 &&
      for d in "$root"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
  fi
  if [ ! -x "$root/usr/bin/luajit" ]; then
    echo "cross_test: no luajit:arm64 to unpack (offline?): the Lua specs are not run"; failed=$((failed + 1)); finish
  fi
  # The Lua subset: the tensor library, autograd, layers, optimisers and file
  # formats, chosen for coverage per minute under QEMU (the whole suite runs
  # over an hour there; host-, device-, install- and timing-specific specs say
  # nothing new about ARM).
  specs=(tensor_spec shape_spec reduce_spec values_spec autograd_spec gradcheck_spec nn_spec layers_spec
         optim_spec io_spec safetensors_c_spec linalg_spec random_spec rnn_spec errors_spec bad_input_spec
         loss_spec tensorlib_spec tensorlib_gaps_spec inplace_spec factories_spec functional_spec indexing_spec
         index_ops_spec batch_norm_spec jacobian_spec init_spec more_layers_spec nn_kernels_spec
         iter_layout_spec optim_more_spec schedulers_spec amp_spec print_spec checkpoint_spec)
  echo "== Lua specs under qemu-aarch64-static (LuaJIT 2.1 arm64): ${specs[*]}"
  t0=$SECONDS
  files=()
  for s in "${specs[@]}"; do files+=("spec/$s.lua"); done
  EMBER_LIB="$PWD/build-arm64/libember.so" EMBER_BUILD_DIR=build-arm64 LUA_CPATH="$PWD/$root/usr/lib/aarch64-linux-gnu/lua/5.1/?.so;;" \
    qemu-aarch64-static "$root/usr/bin/luajit" /usr/bin/busted "${files[@]}" 2>&1 | tee "$log/lua.txt"
  count "$log/lua.txt"
  echo "Lua specs in $((SECONDS - t0)) s"
  finish
  ;;
windows)
  wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
  command -v x86_64-w64-mingw32-gcc >/dev/null && [ -x "$wine" ] || {
    echo "cross_test: mingw-w64 or wine64 is missing (scripts/setup.sh)"; failed=1; finish; }
  # a Wine prefix of its own, made once, in the build folder; Wine's debug chatter off
  export WINEPREFIX="$PWD/build-windows/wineprefix" WINEDEBUG=-all
  mkdir -p build-windows
  build build-windows cmake/toolchains/x86_64-w64-mingw32.cmake -DEMBER_BLAS=OFF -DEMBER_DNNL=OFF
  # zlib1.dll, which ember.dll loads, beside the programs
  cp -f /usr/x86_64-w64-mingw32/lib/zlib1.dll build-windows/ 2>/dev/null
  cp -f /usr/x86_64-w64-mingw32/lib/zlib1.dll build-windows/examples/embed/ 2>/dev/null
  cp -f build-windows/ember.dll build-windows/examples/embed/ 2>/dev/null
  echo "== C tests under wine64"
  t0=$SECONDS
  (cd build-windows && ctest --output-on-failure -j "$JOBS" --timeout 900) 2>&1 | tee "$log/c.txt"
  ctest_count "$log/c.txt"
  echo "C tests in $((SECONDS - t0)) s"
  # The Lua package on a Windows LuaJIT with busted: scripts/windows_lua.sh
  # builds LuaJIT, lfs and lua-term for Windows from Debian's sources, once,
  # into build-windows/lua (busted's Lua files are the host's, read through
  # Wine's Z: drive; scripts/windows_system.lua stands in for luasystem)
  lua=build-windows/lua
  if [ ! -f "$lua/luajit.exe" ] || [ ! -f "$lua/clib/term/core.dll" ]; then
    echo "== a Windows LuaJIT (scripts/windows_lua.sh)"
    t0=$SECONDS
    if ! scripts/windows_lua.sh "$lua" >"$log/wlua.txt" 2>&1; then
      tail -n 20 "$log/wlua.txt"
      echo "cross_test: no Windows LuaJIT (offline?): the Lua specs are not run"; failed=$((failed + 1)); finish
    fi
    echo "built in $((SECONDS - t0)) s"
  fi
  winpath() { echo "Z:$(realpath "$1" | tr / '\\')"; }   # a path as Wine's Z: drive names it
  # the first sixteen specs of the ARM64 subset but linalg_spec, whose cases
  # need LAPACK (this build has none; test_bad_args checks that those calls
  # say so)
  specs=(tensor_spec shape_spec reduce_spec values_spec autograd_spec gradcheck_spec nn_spec layers_spec
         optim_spec io_spec safetensors_c_spec random_spec rnn_spec errors_spec bad_input_spec)
  echo "== Lua specs under wine64 (LuaJIT 2.1 for Windows): ${specs[*]}"
  t0=$SECONDS
  files=()
  for s in "${specs[@]}"; do files+=("spec/$s.lua"); done
  EMBER_LIB="$(winpath build-windows/ember.dll)" WINEPATH="$(winpath build-windows)" \
    LUA_PATH="$(winpath /usr/share/lua/5.1)\\?.lua;$(winpath /usr/share/lua/5.1)\\?\\init.lua;;" \
    LUA_CPATH="$(winpath "$lua/clib")\\?.dll;;" \
    "$wine" "$lua/luajit.exe" -e "package.preload.system = function() return dofile('scripts/windows_system.lua') end" \
    /usr/bin/busted "${files[@]}" 2>&1 | tee "$log/lua.txt"
  count "$log/lua.txt"
  echo "Lua specs in $((SECONDS - t0)) s"
  finish
  ;;
*)
  echo "usage: scripts/cross_test.sh arm64|windows"; exit 2 ;;
esac
