#!/bin/sh
# bench_parse.sh BLOCKC — parse time and peak memory on pathological graph
# files at the parser's limits (issue 12, item 3).  Not a test: it prints
# seconds and max RSS per case so a regression to superlinear time or
# memory shows up as numbers, measured on this machine.
set -e
B=${1:-build/blockc}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen() { python3 -c "$2" > "$dir/$1.blk"; }
gen loopdim 'print("model m\ndim D = 4\ninput x : [1, 2, D]\nfor i in 0..100000 { dim Z = i + 1 }\noutput x")'
gen nested 'print("model m\ndim D = 4\ninput x : [1, 2, D]\nfor i in 0..1000 { for j in 0..999 { dim W = j + 1 } }\noutput x")'
gen dims 'print("model m"); [print("dim A%d = 1" % i) for i in range(4000)]; print("dim D = 4\ninput x : [1, 2, D]\noutput x")'
gen binds 'print("model m\ndim D = 4\ninput x : [1, 2, D]"); [print("x%d = Add(x%s, x)" % (i, i - 1 if i else "")) for i in range(199990)]; print("x = x199989"); print("output x")'
gen stmts 'print("model m\ndim D = 4\ninput x : [1, 2, D]\nfor i in 0..100000 { y = x\n z = y\n w = z\n x = w }\noutput x")'
printf '%-10s %10s %8s %12s  %s\n' case bytes seconds max_rss_kb result
for c in loopdim nested dims binds stmts; do
  f="$dir/$c.blk"
  /usr/bin/time -o "$dir/time" -f '%e %M' "$B" check "$f" >/dev/null 2>"$dir/err" || true
  out=$(cat "$dir/time" | tail -1)
  res=$(if grep -q error "$dir/err"; then head -1 "$dir/err" | sed 's/.*error: //' | cut -c1-50; else echo ok; fi)
  printf '%-10s %10s %8s %12s  %s\n' "$c" "$(wc -c < "$f")" $out "$res"
done
