#!/bin/sh
# run.sh BIN... — runs each cmocka suite and sums the results, so one line at
# the end says how the whole suite went. Exit status is non-zero if any
# suite failed or crashed.
passed=0; failed=0; bad=""
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out"
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ $rc -ne 0 ] || [ -z "$p" ]; then bad="$bad $(basename "$t")"; [ -z "$f" ] && failed=$((failed + 1)); fi
done
echo
[ -n "$bad" ] && echo "failing suites:$bad"
echo "tests: $passed passed, $failed failed"
[ -z "$bad" ]
