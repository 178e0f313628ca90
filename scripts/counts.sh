# Sourced by scripts/test.sh and scripts/cross_test.sh: the totals of a test
# run, from its logs. Each function adds to the caller's passed, failed and
# skipped; a log without its summary line counts as one failure.
passed=0; failed=0; skipped=0
count() {   # adds the "N passed, N failed, N skipped" line of a log to the totals
  local line
  line=$(grep -aE '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  set -- $line
  passed=$((passed + $1)); failed=$((failed + $3)); skipped=$((skipped + ${5:-0}))
}
ctest_count() {   # turns ctest's summary into the same counts (a test that exits 77 is skipped)
  local line total nfail nskip
  line=$(grep -aE 'tests passed, [0-9]+ tests failed out of' "$1" | tail -n 1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  nfail=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* tests failed out of ([0-9]+).*/\1/')
  nskip=$(grep -acE '\*\*\*Skipped' "$1")
  passed=$((passed + total - nfail - nskip)); failed=$((failed + nfail)); skipped=$((skipped + nskip))
}
