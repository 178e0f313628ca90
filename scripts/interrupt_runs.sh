#!/usr/bin/env bash
# Issue 25's Ctrl-C runs (docs/hardening.md, "Ctrl-C"): the ember command runs
# `a = (a:matmul(a) + 0.5):tanh()` forever on a 64x64 matrix (on an AVX-512
# machine its products go through oneDNN's dnnl_sgemm, in blocks on ember's
# team), gets one SIGINT `delay` seconds after it started, and must end with
# "interrupted" on stderr and exit status 1. Prints one line per run that did
# not, then the runs counted by exit status and what stderr said.
#   scripts/interrupt_runs.sh [ember binary (build/cli/ember)] [runs (100)] [delay s (1.5)] [at a time (2)]
# An ASan build's command (build-asan/cli/ember) runs with leak checking on,
# as scripts/test.sh runs it. A run still alive 60 s after its SIGINT is
# killed (exit 137).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/cli/ember}
runs=${2:-100}
delay=${3:-1.5}
jobs=${4:-2}
[ -x "$bin" ] || { echo "interrupt_runs.sh: $bin is not built" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/loop.lua" <<'EOF'
local ember = ember or require("ember")
local a = ember.randn({64, 64}) * 0.1
while true do
  a = (a:matmul(a) + 0.5):tanh()
end
EOF
export BIN="$bin" DIR="$dir" DELAY="$delay"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0" UBSAN_OPTIONS=print_stacktrace=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
unset EMBER_LIB LD_PRELOAD
one_run() {
  local i=$1 out="$DIR/$1"
  # a background job of a script starts with SIGINT ignored: give it the default
  env --default-signal=INT "$BIN" "$DIR/loop.lua" > "$out.out" 2> "$out.err" &
  local pid=$! n=0
  sleep "$DELAY"
  kill -INT "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ $n -lt 1200 ]; do sleep 0.05; n=$((n + 1)); done
  kill -KILL "$pid" 2>/dev/null || true
  local rc=0
  wait "$pid" || rc=$?
  local what
  if grep -q -E 'corrupted|double free|free\(\)|malloc\(\)' "$out.err"; then what="glibc heap report"
  elif grep -q 'AddressSanitizer' "$out.err"; then what="AddressSanitizer report"
  elif grep -q 'LeakSanitizer' "$out.err"; then what="LeakSanitizer report"
  elif grep -q 'runtime error' "$out.err"; then what="UBSan report"
  elif grep -q 'interrupted' "$out.err"; then what="interrupted"
  elif [ ! -s "$out.err" ]; then what="(nothing on stderr)"
  else what="other: $(head -c 120 "$out.err" | tr '\n' ' ')"
  fi
  echo "$rc	$what" > "$out.result"
  if [ "$rc" != 1 ] || [ "$what" != interrupted ]; then
    echo "run $i: exit $rc, $what"; head -c 2000 "$out.err"; echo
  fi
}
export -f one_run
seq 1 "$runs" | xargs -P "$jobs" -I{} bash -c 'one_run {}'
echo "== $runs runs of $bin, SIGINT ${delay} s after start, $jobs at a time: count, exit status, stderr"
cat "$dir"/*.result | sort | uniq -c
