#!/usr/bin/env bash
# The whole test suite: set-up and build, the C tests under ctest (release and
# ASan+UBSan), then every busted spec under LuaJIT, also against the sanitized
# library. The last line is "N passed, N failed, N skipped" for all of it; the
# exit status is non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --asan || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

passed=0; failed=0; skipped=0
count() {   # adds the "N passed, N failed, N skipped" line of a log to the totals
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  set -- $line
  passed=$((passed + $1)); failed=$((failed + $3)); skipped=$((skipped + ${5:-0}))
}
ctest_count() {   # turns ctest's summary into the same counts
  local line total nfail
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of' "$1" | tail -n 1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  nfail=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* tests failed out of ([0-9]+).*/\1/')
  passed=$((passed + total - nfail)); failed=$((failed + nfail))
}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== C tests (release)"
(cd build && ctest --output-on-failure) 2>&1 | tee "$log/c.txt"; ctest_count "$log/c.txt"
echo "== C tests (ASan + UBSan)"
(cd build-asan && ASAN_OPTIONS=allocator_may_return_null=1 ctest --output-on-failure) 2>&1 | tee "$log/casan.txt"; ctest_count "$log/casan.txt"

echo "== C thread test under ThreadSanitizer"
# OpenBLAS on one thread: its own pool is not instrumented, ember's is; nor is
# libgomp, which oneDNN runs on, so this build leaves oneDNN out
{ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_TSAN=ON -DEMBER_CUDA=OFF -DEMBER_DNNL=OFF >/dev/null &&
  cmake --build build-tsan -j "$(nproc 2>/dev/null || echo 2)" --target test_threads >/dev/null &&
  OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/test_threads 8 200; } 2>&1 | tee "$log/tsan.txt"
if grep -q "^test_threads: .* ok$" "$log/tsan.txt" && ! grep -q "WARNING: ThreadSanitizer" "$log/tsan.txt"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

echo "== the file parsers under libFuzzer (scripts/fuzz.sh, 30 s each)"
if scripts/fuzz.sh 30 2>&1 | tee "$log/fuzz.txt"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

echo "== Lua specs"
EMBER_BUILD_DIR=build luajit /usr/bin/busted 2>&1 | tee "$log/lua.txt"; count "$log/lua.txt"

echo "== Lua specs against the ASan + UBSan library"
# LuaJIT itself is not instrumented, so the runtime is preloaded; leaks are not
# checked here (LuaJIT's own allocations would drown them), memory errors are.
ASAN_LIB=$(gcc -print-file-name=libasan.so)
EMBER_LIB="$PWD/build-asan/libember.so" EMBER_BUILD_DIR=build-asan LD_PRELOAD="$ASAN_LIB" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  luajit /usr/bin/busted --exclude-tags=noasan 2>&1 | tee "$log/luaasan.txt"
count "$log/luaasan.txt"

echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
