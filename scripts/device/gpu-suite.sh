#!/usr/bin/env bash
# The whole GPU check in one command, for a lent GPU machine (the `device`
# tool's `run`, from the repository root, with .devdeps carried; see
# scripts/device/pack-deps.sh). Builds ember with the CUDA backend for the
# machine's GPU, then runs the C tests, the device suite against the CPU, the
# whole Lua suite and the GPU benchmarks, keeping every log under $OUT:
#
#   run  carry=[".devdeps"]  command="bash scripts/device/gpu-suite.sh"
#
# Each step's last lines are printed; the exit status is non-zero when any
# step failed. EMBER_GPU_ARCH overrides the CUDA architecture (default: the
# first GPU's, from nvidia-smi; 90 for H100 and H200).
set -uo pipefail
out=${OUT:-/tmp/ember-gpu}
mkdir -p "$out"
# shellcheck source=/dev/null
source .devdeps/env.sh .devdeps
busted=(luajit .devdeps/usr/bin/busted)
failed=0

step() {   # step NAME COMMAND...: runs it into $out/NAME.log, prints its tail
  local name=$1; shift
  echo "== $name"
  if "$@" > "$out/$name.log" 2>&1; then tail -n 3 "$out/$name.log"
  else echo "FAILED (exit $?)"; tail -n 30 "$out/$name.log"; failed=1; fi
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1
arch=${EMBER_GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
                         head -n1 | tr -d '. ')}
step configure cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA_ARCHITECTURES="${arch:-90}-real"
step build cmake --build build-gpu -j "$(nproc)"
[ "$failed" = 0 ] || exit 1
step ctest bash -c "cd build-gpu && ctest --output-on-failure"
export EMBER_BUILD_DIR=build-gpu
step device_specs env EMBER_TEST_DEVICE=cuda "${busted[@]}" --pattern='^device' spec/
step cuda_spec "${busted[@]}" spec/cuda_spec.lua
step suite "${busted[@]}"
for b in bench/gpu_*.lua; do
  [ -e "$b" ] || continue
  step "$(basename "$b" .lua)" luajit "$b"
done
exit "$failed"
