#!/bin/sh
# bench_llamacpp.sh - blockc against a llama.cpp build on this machine: the same
# model (graphs/llama_lm.blk at its defaults, D=512 H=8 KV=2 F=1376 N=6
# V=32000), the same seeded weights in the same GGUF file, the same weight
# types, one and two threads (issues 25 and 26; results in docs/threads.md,
# "Side by side with llama.cpp").
#
#   tools/bench_llamacpp.sh LLAMA_BUILD_DIR        # from anywhere, after make -j2
#
# LLAMA_BUILD_DIR is an existing llama.cpp cmake build directory holding
# llama-bench (bin/llama-bench or llama-bench).  This script fetches and
# builds nothing: it stops with a message if llama-bench is not there.
#
# Environment (defaults in brackets):
#   REPS     runs per measurement, alternating the two programs; medians [5]
#   TYPES    weight types [f32 f16 bf16 q8_0 q4_0]
#   THREADS  thread counts [1 2]
#   GGUF_PY  llama.cpp's gguf-py directory, needed only if llama.cpp refuses
#            blockc's GGUF [<llama.cpp source dir from CMakeCache.txt>/gguf-py]
#   IDLE     a run is clean when the cores were at most IDLE% busy over half
#            a second just before it and just after it [15]
#   WAIT     seconds each run waits for that before it starts anyway [120]
#   TRIES    runs of a measurement that was not clean, at most [3]
#   BUDGET   seconds after which no run waits or is done again [unlimited]
#   KEEP     set: keep the temporary directory (GGUFs, raw.tsv) and print it
#
# Steps:
#  1. `blockc weights graphs/llama_lm.blk --seed 1 --weight-dtype T -o m-T.gguf`
#     per type T into a temporary directory;
#  2. llama-bench loads m-f32.gguf or says why not; blockc writes no tokenizer,
#     and llama.cpp's loader requires the key tokenizer.ggml.model, so then
#     every file is copied by llama.cpp's gguf-py with that one key added
#     ("none": llama.cpp makes llama.vocab_size dummy tokens); tensors and
#     the other keys are copied byte for byte.  Both programs then read the
#     same file;
#  3. per type, thread count and repetition, the two alternately (the first
#     of the pair alternates too):
#     - llama.cpp: llama-bench -m F -p 0 -n 64 -d 0,512 -r 1 -t N -o json
#       (tg64 after a 512-token context: mean ms/token of steps 512..575;
#       tg64 from an empty context for reference), then
#       llama-bench -m F -p 128 -n 0 -r 1 -t N -o json (pp128);
#     - blockc: bench graphs/llama_lm.blk --decode --context 512 --iters 64
#       --weight-dtype T --threads N --weights F --json (decode_ms_per_token:
#       the median of the 64 steps at 512..575; read_floor_ms,
#       decode_over_floor), then the same with --context 128 --iters 5
#       (prefill_last_ms: one call of the last-position step entry on 128
#       positions, the logits of the last one only, as llama-bench's pp128
#       computes, median of 5; prefill_ms, every position's logits, beside it);
#     each of the four runs waits for quiet cores, and is done again (TRIES)
#     when the cores were busy just before or after it;
#  4. a markdown table of medians over the clean runs (ratio = blockc ms /
#     llama.cpp ms: under 1, blockc is faster), and one of the minima over
#     every run; raw.tsv has every run.
set -eu

die() {
    echo "bench_llamacpp.sh: $*" >&2
    exit 2
}

[ $# -eq 1 ] || die "usage: tools/bench_llamacpp.sh LLAMA_BUILD_DIR (a llama.cpp cmake build directory with llama-bench)"
LDIR=$1
[ -d "$LDIR" ] || die "$LDIR: no such directory (give the path of a llama.cpp build directory; this script builds nothing)"
LBENCH=
for c in "$LDIR/bin/llama-bench" "$LDIR/llama-bench"; do
    if [ -x "$c" ]; then LBENCH=$c; break; fi
done
[ -n "$LBENCH" ] || die "$LDIR: no llama-bench in it (looked for $LDIR/bin/llama-bench and $LDIR/llama-bench); build llama.cpp there first (cmake --build DIR --target llama-bench), this script builds nothing"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BLOCKC=$ROOT/build/blockc
GRAPH=$ROOT/graphs/llama_lm.blk
[ -x "$BLOCKC" ] || die "$BLOCKC missing: run make -j2 in $ROOT first"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
REPS=${REPS:-5}
TYPES=${TYPES:-f32 f16 bf16 q8_0 q4_0}
THREADS=${THREADS:-1 2}
IDLE=${IDLE:-15}
WAIT=${WAIT:-120}
TRIES=${TRIES:-3}
BUDGET=${BUDGET:-}

OUT=$(mktemp -d /tmp/bench_llamacpp.XXXXXX)
cleanup() {
    if [ -n "${KEEP:-}" ]; then echo "kept: $OUT" >&2; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# 1. the weights, as blockc writes them
for t in $TYPES; do
    "$BLOCKC" weights "$GRAPH" --seed 1 --weight-dtype "$t" -o "$OUT/m-$t.gguf" >/dev/null
done

# 2. does llama.cpp load blockc's file as it is?
first=$(echo "$TYPES" | awk '{print $1}')
if "$LBENCH" -m "$OUT/m-$first.gguf" -p 8 -n 0 -r 1 -t 1 --no-warmup -v -o json >"$OUT/probe.json" 2>"$OUT/probe.err"; then
    echo "llama.cpp loads blockc's GGUF as written" >&2
    for t in $TYPES; do ln -s "m-$t.gguf" "$OUT/l-$t.gguf"; done
else
    why=$(grep -m1 'error loading model' "$OUT/probe.err" || tail -1 "$OUT/probe.err")
    echo "llama.cpp refuses blockc's GGUF: $why" >&2
    if [ -z "${GGUF_PY:-}" ]; then
        src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LDIR/CMakeCache.txt" 2>/dev/null || true)
        GGUF_PY=$src/gguf-py
    fi
    [ -f "$GGUF_PY/gguf/__init__.py" ] || die "no llama.cpp gguf-py at '$GGUF_PY' (set GGUF_PY) to add the missing key"
    for t in $TYPES; do
        PYTHONPATH=$GGUF_PY $PY - "$OUT/m-$t.gguf" "$OUT/l-$t.gguf" <<'EOF'
import sys
import gguf
r = gguf.GGUFReader(sys.argv[1])
w = gguf.GGUFWriter(sys.argv[2], r.fields["general.architecture"].contents())
for f in r.fields.values():
    if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
        continue
    vt = f.types[0]
    w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
if "tokenizer.ggml.model" not in r.fields:
    w.add_tokenizer_model("none")  # llama.cpp: llama.vocab_size dummy tokens
for t in r.tensors:
    w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
for t in r.tensors:
    w.write_tensor_data(t.data, tensor_endianess=r.endianess)
w.close()
EOF
    done
    "$LBENCH" -m "$OUT/l-$first.gguf" -p 8 -n 0 -r 1 -t 1 --no-warmup -o json >"$OUT/probe.json" 2>"$OUT/probe.err" \
        || die "llama.cpp refuses the file with tokenizer.ggml.model added too: $(grep -m1 'error' "$OUT/probe.err")"
    echo "added tokenizer.ggml.model = \"none\" (gguf-py); llama.cpp loads that, and blockc reads the same file" >&2
fi

# 3. measure.  Other processes on the cores wreck a run (llama.cpp's threads
# spin at their barriers, so one preempted thread stalls the rest): each run
# waits for quiet cores first, and counts as clean when the cores were quiet
# (at most IDLE% busy over 0.5 s) just before and just after it; a run that is
# not clean is done again, up to TRIES times, and the table takes the clean
# runs only (all of them, marked *, where none was clean).
busy() {
    a=$(head -1 /proc/stat)
    sleep 0.5
    b=$(head -1 /proc/stat)
    printf '%s\n%s\n' "$a" "$b" | awk '{ idle = $5 + $6; tot = 0; for (i = 2; i <= NF; i++) tot += $i;
        if (NR == 1) { i0 = idle; t0 = tot } else printf "%d\n", 100 * (1 - (idle - i0) / (tot - t0)) }'
}
T0=$(date +%s)
late() { [ -n "$BUDGET" ] && [ $(($(date +%s) - T0)) -ge "$BUDGET" ]; }
quiet() {  # sets B (busy % just before) and LA (1-minute load)
    n=0
    if late; then n=$((WAIT * 2)); fi
    B=$(busy)
    while [ "$B" -gt "$IDLE" ] && [ $n -lt $((WAIT * 2)) ]; do
        B=$(busy)
        n=$((n + 1))
    done
    LA=$(cut -d' ' -f1 /proc/loadavg)
}
RAW=$OUT/raw.tsv
: >"$RAW"
# raw.tsv: program type threads what value busy%-before busy%-after load clean
measure() {  # program fn type threads; fn prints "what<TAB>value" lines
    try=1
    while :; do
        quiet
        "$2" "$3" "$4" >"$OUT/rows" || die "$1 failed on $3, $4 threads (KEEP=1 keeps $OUT: llama-bench.err, blockc.err)"
        B2=$(busy)
        clean=0
        if [ "$B" -le "$IDLE" ] && [ "$B2" -le "$IDLE" ]; then clean=1; fi
        awk -v p="$1" -v t="$3" -v th="$4" -v b="$B" -v b2="$B2" -v la="$LA" -v c=$clean \
            'BEGIN { OFS = "\t" } { print p, t, th, $1, $2, b, b2, la, c }' "$OUT/rows" >>"$RAW"
        [ $clean = 1 ] && break
        [ $try -ge "$TRIES" ] && break
        late && break
        try=$((try + 1))
    done
}
lc_decode() {
    "$LBENCH" -m "$OUT/l-$1.gguf" -p 0 -n 64 -d 0,512 -r 1 -t "$2" -o json 2>>"$OUT/llama-bench.err" >"$OUT/lb.json" || return 1
    $PY -c 'import json, sys
for o in json.load(open(sys.argv[1])):
    print("decode%d\t%.4f" % (o["n_depth"], o["avg_ns"] / 1e6 / o["n_gen"]))' "$OUT/lb.json"
}
lc_prefill() {
    "$LBENCH" -m "$OUT/l-$1.gguf" -p 128 -n 0 -r 1 -t "$2" -o json 2>>"$OUT/llama-bench.err" >"$OUT/lb.json" || return 1
    $PY -c 'import json, sys; print("prefill128\t%.4f" % (json.load(open(sys.argv[1]))[0]["avg_ns"] / 1e6))' "$OUT/lb.json"
}
bc_json() {  # context iters type threads keys...
    c=$1 i=$2 t=$3 th=$4
    shift 4
    "$BLOCKC" bench "$GRAPH" --decode --context "$c" --iters "$i" --weight-dtype "$t" --threads "$th" \
        --weights "$OUT/l-$t.gguf" --json 2>>"$OUT/blockc.err" >"$OUT/bc.json" || return 1
    $PY -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    n, key = k.split("=")
    if d.get(key) is not None:
        print("%s\t%s" % (n, d[key]))' "$OUT/bc.json" "$@"
}
bc_decode() { bc_json 512 64 "$1" "$2" decode512=decode_ms_per_token floor=read_floor_ms over_floor=decode_over_floor; }
# prefill128: the 128 positions with the logits of the last one only
# (prefill_last_ms, <model>_step_last), what llama-bench's pp128 computes;
# prefill128all: with every position's logits (prefill_ms)
bc_prefill() { bc_json 128 5 "$1" "$2" prefill128=prefill_last_ms prefill128all=prefill_ms; }

echo "measuring: types $TYPES, threads $THREADS, $REPS repetitions; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for t in $TYPES; do
    for th in $THREADS; do
        r=0
        while [ $r -lt "$REPS" ]; do
            if [ $((r % 2)) -eq 0 ]; then
                measure llama.cpp lc_decode "$t" "$th"; measure blockc bc_decode "$t" "$th"
                measure llama.cpp lc_prefill "$t" "$th"; measure blockc bc_prefill "$t" "$th"
            else
                measure blockc bc_decode "$t" "$th"; measure llama.cpp lc_decode "$t" "$th"
                measure blockc bc_prefill "$t" "$th"; measure llama.cpp lc_prefill "$t" "$th"
            fi
            r=$((r + 1))
        done
        echo "  $t, $th thread(s) done; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ -n "${KEEP:-}" ]; then echo "raw: $RAW" >&2; fi

# 4. the table
$PY - "$RAW" "$REPS" "$IDLE" <<'EOF2'
import statistics, sys
runs = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
v, allv, load, clean_runs, nruns = {}, {}, [], 0, 0
for who, t, th, what, x, b, b2, la, c in runs:
    k = (who, t, int(th), what)
    allv.setdefault(k, []).append(float(x))
    one = what in ("decode512", "prefill128")  # one row of each run
    nruns += one
    if c == "1":
        v.setdefault(k, []).append(float(x))
        if one:
            load.append(float(la))
            clean_runs += 1
types = list(dict.fromkeys(r[1] for r in runs))
ths = sorted(set(int(r[2]) for r in runs))
def med(*k):
    if k in v:
        return statistics.median(v[k]), ""
    return statistics.median(allv[k]), "*"
def f(fmt, *k):
    x, mark = med(*k)
    return fmt % x + mark, x
print("%d of %d runs clean (cores at most %s%% busy just before and after); medians of the clean runs "
      "(%s wanted a cell); 1-minute load average at their starts: median %.2f, max %.2f"
      % (clean_runs, nruns, sys.argv[3] if len(sys.argv) > 3 else "IDLE", sys.argv[2],
         statistics.median(load) if load else float("nan"), max(load) if load else float("nan")))
print()
print("| type | threads | decode @512 ms/token: blockc | llama.cpp | ratio | tokens/s: blockc | llama.cpp "
      "| prefill 128 ms: blockc | llama.cpp | ratio | tokens/s: blockc | llama.cpp "
      "| blockc read_floor_ms | decode_over_floor | llama.cpp decode @0 ms/token "
      "| blockc prefill 128, every position's logits | clean runs b / l |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in types:
    for th in ths:
        bd, bdx = f("%.3f", "blockc", t, th, "decode512")
        ld, ldx = f("%.3f", "llama.cpp", t, th, "decode512")
        bp, bpx = f("%.1f", "blockc", t, th, "prefill128")
        lp, lpx = f("%.1f", "llama.cpp", t, th, "prefill128")
        nb = len(v.get(("blockc", t, th, "decode512"), []))
        nl = len(v.get(("llama.cpp", t, th, "decode512"), []))
        ball = f("%.1f", "blockc", t, th, "prefill128all")[0] if ("blockc", t, th, "prefill128all") in allv else "-"
        print("| %s | %d | %s | %s | %.2f | %.0f | %.0f | %s | %s | %.2f | %.0f | %.0f | %s | %s | %s | %s | %d / %d |" % (
            t, th, bd, ld, bdx / ldx, 1e3 / bdx, 1e3 / ldx, bp, lp, bpx / lpx, 128e3 / bpx, 128e3 / lpx,
            f("%.3f", "blockc", t, th, "floor")[0], f("%.2f", "blockc", t, th, "over_floor")[0],
            f("%.3f", "llama.cpp", t, th, "decode0")[0], ball, nb, nl))
print()
print("Best (minimum) of every run, clean or not - what a run with the cores to itself comes close to:")
print()
print("| type | threads | decode @512 ms/token: blockc | llama.cpp | ratio | prefill 128 ms: blockc | llama.cpp | ratio | runs b / l |")
print("|---|---|---|---|---|---|---|---|---|")
for t in types:
    for th in ths:
        mn = lambda who, what: min(allv[(who, t, th, what)])
        bd, ld = mn("blockc", "decode512"), mn("llama.cpp", "decode512")
        bp, lp = mn("blockc", "prefill128"), mn("llama.cpp", "prefill128")
        print("| %s | %d | %.3f | %.3f | %.2f | %.1f | %.1f | %.2f | %d / %d |" % (
            t, th, bd, ld, bd / ld, bp, lp, bp / lp, len(allv[("blockc", t, th, "decode512")]),
            len(allv[("llama.cpp", t, th, "decode512")])))
EOF2
