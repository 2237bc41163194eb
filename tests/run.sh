#!/bin/sh
# run.sh BIN... — runs each cmocka suite and prints one line per suite
# ("ok   test_parse       42 passed"), then one line for the whole run.
# A suite's own output (cmocka's per-test lines, and the error messages its
# negative tests provoke on purpose) is shown only when the suite fails or
# crashes; VERBOSE=1 shows it always.  Exit status is non-zero if any suite
# failed or crashed.
passed=0; failed=0; bad=""
for t in "$@"; do
  name=$(basename "$t")
  out=$("$t" 2>&1); rc=$?
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ $rc -ne 0 ] || [ -z "$p" ]; then
    bad="$bad $name"
    [ -z "$f" ] && failed=$((failed + 1))
    printf '%s\n' "$out"
    printf 'FAIL %-20s %s passed, %s failed, exit status %d\n' "$name" "${p:-0}" "${f:-?}" "$rc"
  else
    [ "${VERBOSE:-0}" = 1 ] && printf '%s\n' "$out"
    printf 'ok   %-20s %s passed\n' "$name" "$p"
  fi
done
echo
[ -n "$bad" ] && echo "failing suites:$bad"
echo "tests: $passed passed, $failed failed"
[ -z "$bad" ]
