#!/usr/bin/env bash
# Fuzzes ember's file parsers (safetensors, IDX, plans) with libFuzzer under ASan
# and UBSan: the core is built with clang into build-fuzz/, then each harness
# (core/tests/fuzz/fuzz_*.c) runs for SECONDS (default 40) from its committed
# seed corpus. Exits non-zero if a harness finds a crash, a leak or undefined
# behaviour; the input that did it is left in build-fuzz/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-40}
out=build-fuzz
mkdir -p "$out/obj"
# objects are reused across runs; a changed header makes them all stale
headers=$(cat $(find core/src core/include -name '*.h' | sort) | md5sum | cut -d' ' -f1)
if [ "$(cat "$out/headers.md5" 2>/dev/null)" != "$headers" ]; then
  rm -f "$out"/obj/*.o
  echo "$headers" > "$out/headers.md5"
fi
flags=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -D_POSIX_C_SOURCE=200809L -DEMBER_VERSION='"fuzz"' -DEMBER_NO_CACHE=1 -Icore/include -Icore/src)
objs=()
for src in $(find core/src -name '*.c' | sort); do
  obj="$out/obj/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
    clang "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
    while [ "$(jobs -r | wc -l)" -ge "$(nproc 2>/dev/null || echo 2)" ]; do wait -n; done
  fi
  objs+=("$obj")
done
wait
status=0
for h in safetensors idx plan; do
  clang "${flags[@]}" -fsanitize=fuzzer "core/tests/fuzz/fuzz_$h.c" "${objs[@]}" -lz -lm -lpthread -ldl \
    -o "$out/fuzz_$h"
  mkdir -p "$out/corpus_$h"
  echo "== fuzz_$h: ${secs} s"
  # the plan seeds (a training step's graph and weights) are 5 to 11 KB: cut to 4096 bytes they no longer
  # parse, and the fuzzer stays in the safetensors header (coverage 248 against 1826)
  maxlen=4096
  [ "$h" = plan ] && maxlen=16384
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 ./"fuzz_$h" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 "corpus_$h" "../core/tests/fuzz/${h}_corpus") 2>&1 |
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY|crash-|leak-|timeout-" || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
