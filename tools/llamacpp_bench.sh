#!/bin/sh
# llamacpp_bench.sh - blockc's decoding and prefill against llama.cpp's on
# this machine: the same model (graphs/llama_lm.blk at its defaults, D=512
# H=8 KV=2 F=1376 N=6 V=32000, seeded random weights), the same weight types,
# one and two threads (issue 25's bar; results in docs/weight-types.md,
# "Against llama.cpp").
#
#   tools/llamacpp_bench.sh            # from the repo root, after make -j2
#
# Environment (defaults in brackets):
#   MIRROR   a llama.cpp git directory [/work/.mirror/Cebtenzzre+llama.cpp/repo]
#   LCPP     where its tree is extracted and built [/work/llamacpp/full]
#   OUT      scratch dir for the weights and the raw results [/tmp/llamacpp_bench]
#   PAUSE    a pgrep -f pattern of processes stopped (SIGSTOP) while measuring,
#            resumed (SIGCONT) after each type and thread count (under 3 minutes), by a trap on exit and by a
#            watchdog after 230 s whatever happens [/work/main/build/blockc train];
#            empty: pause nothing
#   REPS     runs per measurement; the table shows medians [3]
#   CHECK_ONLY  set: stop after step 2b
#
# Steps:
#  1. the tree without models/ (an LFS object there is missing from the
#     mirror), built with cmake: Release, LLAMA_NATIVE=ON, no BLAS, targets
#     main and llama-bench;
#  2. `blockc weights graphs/llama_lm.blk --seed 1` as safetensors, written as
#     GGUF F32 / F16 / Q8_0 / Q4_0 by tools/llamacpp_gguf.py with the tree's
#     gguf-py (a dummy SentencePiece vocab so llama.cpp's loader takes it);
#  2b. the same model: blockc on the safetensors and llama.cpp on the F32 GGUF
#     generate the same 8 greedy tokens (the script stops if not);
#  3. per type and thread count, REPS times, alternating the two:
#     - decode at context 512: llama.cpp's `main` on a 512-token prompt
#       (<s> + 3 byte tokens of the leading "▁" + 508 "a"), --ignore-eos -n 64:
#       its "eval time ... ms per token" line, the 63 steps at context
#       512..574; blockc `bench --decode --context 512 --iters 64`:
#       decode_ms_per_token, the 64 steps at context 512..575;
#     - prefill 128 tokens: llama-bench -p 128 -n 0 (REPS samples, after its
#       warm-up run); blockc bench --decode --context 128: prefill_ms;
#     - llama-bench -p 0 -n 64 (decode from an empty context, for reference).
#     f16 runs blockc's f16 against llama.cpp's (BF16=1 runs blockc's bf16
#     there instead, the comparison before blockc had f16).
# Prints a markdown table; the raw numbers are in $OUT/raw.tsv (main's log,
# main.log, too).
set -eu
MIRROR=${MIRROR:-/work/.mirror/Cebtenzzre+llama.cpp/repo}
LCPP=${LCPP:-/work/llamacpp/full}
OUT=${OUT:-/tmp/llamacpp_bench}
PAUSE=${PAUSE-/work/main/build/blockc train}
REPS=${REPS:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BLOCKC=$ROOT/build/blockc
PY=/usr/bin/python3

# 1. llama.cpp
if [ ! -x "$LCPP/build/bin/main" ] || [ ! -x "$LCPP/build/bin/llama-bench" ]; then
    if [ ! -f "$LCPP/llama.cpp" ]; then
        mkdir -p "$LCPP"
        git --git-dir="$MIRROR" archive HEAD -- . ':(exclude)models' | tar -x -C "$LCPP"
    fi
    cmake -S "$LCPP" -B "$LCPP/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_NATIVE=ON \
        -DLLAMA_BLAS=OFF -DLLAMA_CUBLAS=OFF >/dev/null
    cmake --build "$LCPP/build" -j2 --target llama-bench main >/dev/null
fi
MAIN=$LCPP/build/bin/main
LBENCH=$LCPP/build/bin/llama-bench

# 2. the model
mkdir -p "$OUT"
"$BLOCKC" weights "$ROOT/graphs/llama_lm.blk" --seed 1 -o "$OUT/w.safetensors" >/dev/null
for t in f32 f16 q8_0 q4_0; do
    PYTHONPATH="$LCPP/gguf-py" $PY "$ROOT/tools/llamacpp_gguf.py" "$OUT/w.safetensors" $t "$OUT/m-$t.gguf" \
        -D H=8 -D KV=2 -D T=1024 2>/dev/null
done
PROMPT=$($PY -c "print('a' * 508)")

# 2b. the same model: both pick the same 8 greedy tokens after "abc" (<s>, the
# 3 byte tokens of "▁", a b c; llama.cpp prints filler id i + 259 as
# "[filleri]")
B_IDS=$("$BLOCKC" generate "$ROOT/graphs/llama_lm.blk" --weights "$OUT/w.safetensors" \
    --prompt-ids 1,229,153,132,100,101,102 --max-new-tokens 8 --ids 2>/dev/null | tr -s ' \n' ' ' | sed 's/ $//')
L_IDS=$(cd "$OUT" && "$MAIN" -m "$OUT/m-f32.gguf" -p abc --temp 0 --repeat-penalty 1.0 -n 8 -t 1 2>/dev/null \
    | $PY -c 'import re,sys; print(" ".join(str(int(n) + 259) for n in re.findall(r"\[filler(\d+)\]", sys.stdin.read())))')
if [ "$B_IDS" != "$L_IDS" ]; then
    echo "llamacpp_bench: greedy ids differ: blockc [$B_IDS], llama.cpp [$L_IDS]" >&2
    exit 1
fi
echo "same greedy ids (f32): $B_IDS"
[ -n "${CHECK_ONLY:-}" ] && exit 0

# 3. measure, the paused processes resumed whatever happens
PIDS=""
WATCH=""
resume() {
    if [ -n "$PIDS" ]; then kill -CONT $PIDS 2>/dev/null || true; fi
    if [ -n "$WATCH" ]; then kill "$WATCH" 2>/dev/null || true; fi
    PIDS=""
    WATCH=""
}
trap resume EXIT
trap 'resume; exit 1' INT TERM HUP
pause() {
    if [ -n "$PAUSE" ]; then
        PIDS=$(pgrep -f "$PAUSE" | tr '\n' ' ' || true)
        if [ -n "$PIDS" ]; then
            kill -STOP $PIDS
            # shellcheck disable=SC2086
            (sleep 230; kill -CONT $PIDS 2>/dev/null) &
            WATCH=$!
        fi
    fi
    sleep 1
}

# Other users of the cores (a compiler run elsewhere) wreck a run - llama.cpp's
# threads spin at their barriers, so one preempted thread stalls the others:
# before each run wait (up to 10 s) for the cores to be 90% idle over half a
# second; the busy percentage seen last is kept in the raw file's 6th column.
busy() {
    a=$(head -1 /proc/stat)
    sleep 0.5
    b=$(head -1 /proc/stat)
    printf '%s\n%s\n' "$a" "$b" | awk '{ idle = $5 + $6; tot = 0; for (i = 2; i <= NF; i++) tot += $i;
        if (NR == 1) { i0 = idle; t0 = tot } else printf "%d\n", 100 * (1 - (idle - i0) / (tot - t0)) }'
}
quiet() {
    n=0
    B=$(busy)
    while [ "$B" -gt 10 ] && [ $n -lt 20 ]; do
        B=$(busy)
        n=$((n + 1))
    done
}

RAW=$OUT/raw.tsv
: >"$RAW"
jnum() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
for t in f32 f16 q8_0 q4_0; do
    bt=$t
    [ $t = f16 ] && [ "${BF16:-0}" = 1 ] && bt=bf16
    for th in 1 2; do
        pause
        r=0
        while [ $r -lt "$REPS" ]; do
            quiet
            ms=$(cd "$OUT" && "$MAIN" -m "$OUT/m-$t.gguf" -p "$PROMPT" --ignore-eos -n 64 -c 1024 -t $th --temp 0 2>&1 \
                | grep 'llama_print_timings: *eval time' | sed 's/.*( *\([0-9.]*\) ms per token.*/\1/')
            printf 'llamacpp\t%s\t%s\tdecode512\t%s\t%s\n' $t $th "$ms" "$B" >>"$RAW"
            quiet
            ms=$("$BLOCKC" bench "$ROOT/graphs/llama_lm.blk" --decode --context 512 --iters 64 --threads $th \
                --weight-dtype $bt --json | jnum decode_ms_per_token)
            printf 'blockc\t%s\t%s\tdecode512\t%s\t%s\n' $t $th "$ms" "$B" >>"$RAW"
            quiet
            ms=$("$BLOCKC" bench "$ROOT/graphs/llama_lm.blk" --decode --context 128 --iters 4 --threads $th \
                --weight-dtype $bt --json | jnum prefill_ms)
            printf 'blockc\t%s\t%s\tprefill128\t%s\t%s\n' $t $th "$ms" "$B" >>"$RAW"
            r=$((r + 1))
        done
        quiet
        "$LBENCH" -m "$OUT/m-$t.gguf" -p 128 -n 0 -t $th -r "$REPS" -o json 2>/dev/null \
            | $PY -c 'import json,sys; [print(s / 1e6) for s in json.load(sys.stdin)[0]["samples_ns"]]' \
            | sed "s/^/llamacpp\t$t\t$th\tprefill128\t/; s/$/\t$B/" >>"$RAW"
        quiet
        "$LBENCH" -m "$OUT/m-$t.gguf" -p 0 -n 64 -t $th -r "$REPS" -o json 2>/dev/null \
            | $PY -c 'import json,sys; [print(s / 1e6 / 64) for s in json.load(sys.stdin)[0]["samples_ns"]]' \
            | sed "s/^/llamacpp\t$t\t$th\tdecode0\t/; s/$/\t$B/" >>"$RAW"
        resume
        sleep 20
    done
done

$PY - "$RAW" <<'EOF'
import os, statistics, sys
v = {}
for line in open(sys.argv[1]):
    who, t, th, what, ms, _ = line.split("\t")
    v.setdefault((who, t, int(th), what), []).append(float(ms))
med = lambda k: statistics.median(v[k])
print("| type (blockc / llama.cpp) | threads | decode @512 ms/token: blockc | llama.cpp | blockc / llama.cpp "
      "| prefill 128 ms: blockc | llama.cpp | blockc / llama.cpp | llama.cpp decode @0 ms/token |")
print("|---|---|---|---|---|---|---|---|---|")
for t in ("f32", "f16", "q8_0", "q4_0"):
    for th in (1, 2):
        bd, ld = med(("blockc", t, th, "decode512")), med(("llamacpp", t, th, "decode512"))
        bp, lp = med(("blockc", t, th, "prefill128")), med(("llamacpp", t, th, "prefill128"))
        l0 = med(("llamacpp", t, th, "decode0"))
        print("| %s | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f |" % (
            "bf16 / f16" if t == "f16" and os.environ.get("BF16") == "1" else t, th, bd, ld, bd / ld, bp, lp, bp / lp, l0))
EOF
