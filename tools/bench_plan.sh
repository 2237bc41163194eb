#!/bin/sh
# bench_plan.sh BLOCKC — time of `grad` and `run` against the graph's size
# (issue 20, item 3: the memory planner was about N^4).  Not a test: for
# graphs/residual.blk at D=64, H=2, T=8 and N = 50 ... 800 layers it prints
# the node count, the median wall time of three runs, the median CPU time
# (user + sys: steadier on a shared machine) and the microseconds of CPU
# per node, so a step that grows faster than the graph shows up as a
# growing last column.  RUNS=5 takes more runs; SIZES="50 100" other sizes.
set -e
B=${1:-build/blockc}
RUNS=${RUNS:-3}
SIZES=${SIZES:-50 100 200 400 800}
G=graphs/residual.blk
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# "WALL CPU": the medians over RUNS runs of "$@"
median() {
  : > "$dir/times"
  i=0
  while [ $i -lt "$RUNS" ]; do
    /usr/bin/time -o "$dir/t" -f '%e %U %S' "$@" >/dev/null 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }
    tail -1 "$dir/t" | awk '{ print $1, $2 + $3 }' >> "$dir/times"
    i=$((i + 1))
  done
  w=$(sort -n -k1 "$dir/times" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  c=$(sort -n -k2 "$dir/times" | awk '{ v[NR] = $2 } END { print v[int((NR + 1) / 2)] }')
  echo "$w $c"
}
printf '%-5s %5s %7s %8s %8s %12s\n' cmd N nodes wall_s cpu_s cpu_us/node
for n in $SIZES; do
  defs="-D N=$n -D D=64 -D H=2 -D T=8"
  nodes=$("$B" check $G $defs | sed -n 's/.* \([0-9]*\) nodes,.*/\1/p')
  for cmd in grad run; do
    if [ $cmd = grad ]; then s=$(median "$B" grad $G $defs -o "$dir/g.safetensors")
    else s=$(median "$B" run $G $defs); fi
    set -- $s
    printf '%-5s %5s %7s %8s %8s %12.1f\n' $cmd "$n" "$nodes" "$1" "$2" \
      "$(awk -v s="$2" -v n="$nodes" 'BEGIN { print s * 1e6 / n }')"
  done
done
