#!/bin/sh
# run.sh BIN... — runs the cmocka suites, JOBS at a time (default: the
# number of processors), and prints one line per suite in the order given
# ("ok   test_parse           42 passed  (1.3 s, 0.4 s CPU)": wall time, and
# the CPU time of the suite and the processes it ran), then one line for
# the whole run.  A suite's own output (cmocka's per-test lines, and the error
# messages its negative tests provoke on purpose) is shown only when the
# suite fails or crashes; VERBOSE=1 shows it always.  A suite's long cases
# (tu_run_tiers, testutil.h) run only in `make check`; in the quick tier
# its line says how many it left to `make check`.  Exit status is non-zero
# if any suite failed or crashed.
#
# TEST_TIMES=FILE: each suite's seconds are kept there, and the next run
# starts the slowest suites first (the order of the lines does not change).
if [ "$1" = --one ]; then  # internal: run one suite into DIR
  d=$2 t=$3
  name=$(basename "$t")
  start=$(date +%s.%N)
  "$t" > "$d/$name.out" 2>&1
  echo $? > "$d/$name.rc"
  end=$(date +%s.%N)
  # wall seconds, then the suite's CPU seconds (user + sys of this shell's
  # children: the suite and every process it waited for), from `times`
  times > "$d/$name.tms"  # in this shell: a pipe or $(...) would fork a child with none
  awk -v a="$start" -v b="$end" 'function s(x) { split(x, p, "m"); return p[1] * 60 + p[2] }
    NR == 2 { printf "%.1f %.1f\n", b - a, s($1) + s($2) }' "$d/$name.tms" > "$d/$name.time"
  exit 0
fi

jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
dir=$(mktemp -d "${TMPDIR:-/tmp}/blockc-tests.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# The order to start them: slowest first by the last run's times, if known.
order=$(for t in "$@"; do
  s=0
  [ -n "$TEST_TIMES" ] && [ -f "$TEST_TIMES" ] &&
    s=$(awk -v n="$(basename "$t")" '$1 == n { print $2 }' "$TEST_TIMES")
  printf '%s %s\n' "${s:-0}" "$t"
done | sort -s -k1,1 -rn | cut -d' ' -f2-)
printf '%s\n' $order | xargs -P "$jobs" -n 1 sh "$0" --one "$dir"

passed=0; failed=0; long=0; bad=""; cpus=0
for t in "$@"; do
  name=$(basename "$t")
  out=$(cat "$dir/$name.out" 2>/dev/null); rc=$(cat "$dir/$name.rc" 2>/dev/null || echo 127)
  set -- $(cat "$dir/$name.time" 2>/dev/null) 0 0
  secs=$1 cpu=$2
  cpus=$(awk -v a="$cpus" -v b="$cpu" 'BEGIN { print a + b }')
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
  l=$(printf '%s\n' "$out" | sed -n 's/^\[  LONG    \] \([0-9]*\) test.*/\1/p' | tail -n1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); long=$((long + ${l:-0}))
  more=${l:+, $l long in make check}
  if [ "$rc" -ne 0 ] || [ -z "$p" ]; then
    bad="$bad $name"
    [ -z "$f" ] && failed=$((failed + 1))
    printf '%s\n' "$out"
    printf 'FAIL %-20s %s passed, %s failed, exit status %d  (%s s, %s s CPU)\n' "$name" \
      "${p:-0}" "${f:-?}" "$rc" "$secs" "$cpu"
  else
    [ "${VERBOSE:-0}" = 1 ] && printf '%s\n' "$out"
    printf 'ok   %-20s %s passed%s  (%s s, %s s CPU)\n' "$name" "$p" "$more" "$secs" "$cpu"
  fi
  [ -n "$TEST_TIMES" ] && printf '%s %s\n' "$name" "$secs" >> "$dir/times"
done
[ -n "$TEST_TIMES" ] && cp "$dir/times" "$TEST_TIMES"
# No suite may touch the machine's /dev/null (a compiler that unlinks its -o
# output did, as root): it must still be the character device.
if [ ! -c /dev/null ]; then
  echo "FAIL /dev/null is no longer a character device: a suite replaced it"
  bad="$bad /dev/null"; failed=$((failed + 1))
fi
echo
[ -n "$bad" ] && echo "failing suites:$bad"
[ "$long" -gt 0 ] && echo "long cases: $long more in make check"
echo "suites: $cpus s CPU"
echo "tests: $passed passed, $failed failed"
[ -z "$bad" ]
