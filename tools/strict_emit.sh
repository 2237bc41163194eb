#!/bin/sh
# strict_emit.sh BLOCKC DIR — checks that the generated model files pass the
# strict warnings firmware builds use (issue 25), as the runtime does
# (tools/freestanding.sh, which calls this): blockc emits a representative
# set of AOT pairs into DIR, and each .c is compiled with -Wpedantic
# -Wconversion -Wdouble-promotion -Wcast-qual -Wshadow as errors, by $CC and
# by clang when present, with OpenBLAS and with -DBLOCKC_NO_BLAS.  The pairs:
# an encoder (bert), a decoder with run-time T and the step entry (llama),
# an encoder-decoder (transformer), whole LMs from token ids (gpt2_lm with
# --main generate's generate.c; gemma2_lm's sliding window and soft-cap),
# the backward (pre_ln --backward), the training step (gpt2_lm and
# gemma2_lm --train) and quantized weights (llama_lm --weight-dtype q8_0).
# The model files (not generate.c, which reads files) are also compiled
# freestanding for a Cortex-M4F (clang --target=thumbv7em-none-eabihf,
# -DBLOCKC_NO_IO -DBLOCKC_NO_BLAS) when clang has the target: a 32-bit
# long.  Run from the project root; a few seconds.
set -e
blockc=${1:-build/blockc}
dir=${2:-build/strict_emit}
CC=${CC:-cc}
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Wconversion -Wdouble-promotion -Wcast-qual -Wshadow
        -Werror -O2 -Iruntime"
rm -rf "$dir"
mkdir -p "$dir"
emit() { # NAME GRAPH [ARGS...]: DIR/NAME/<model>.{c,h}
  name=$1
  shift
  "$blockc" emit "$@" -o "$dir/$name" >/dev/null
}
emit bert graphs/bert.blk
emit llama graphs/llama.blk
emit transformer graphs/transformer.blk
emit gpt2_lm graphs/gpt2_lm.blk --main generate
emit gemma2_lm graphs/gemma2_lm.blk
emit pre_ln-backward graphs/pre_ln.blk --backward
emit gpt2_lm-train graphs/gpt2_lm.blk --train
emit gemma2_lm-train graphs/gemma2_lm.blk --train
emit llama_lm-q8_0 graphs/llama_lm.blk --weight-dtype q8_0
grep -q '_step_abi(' "$dir/llama/llama.c" || { echo "strict_emit: llama has no step entry" >&2; exit 1; }
thumb=""
if command -v clang >/dev/null 2>&1 &&
   echo 'int f(void);' | clang --target=thumbv7em-none-eabihf -ffreestanding -x c -c - -o "$dir/probe.o" 2>/dev/null; then
  thumb=1
fi
ccs=$CC
if [ "$CC" != clang ] && command -v clang >/dev/null 2>&1; then ccs="$CC clang"; fi
n=0
files=0
for c in "$dir"/*/*.c; do
  d=$(dirname "$c")
  files=$((files + 1))
  for cc in $ccs; do
    for nb in "" -DBLOCKC_NO_BLAS; do
      # shellcheck disable=SC2086
      $cc $STRICT $nb -I"$d" -c "$c" -o "$d/strict.o"
      n=$((n + 1))
    done
  done
  case "$c" in */generate.c) continue ;; esac
  if [ -n "$thumb" ]; then
    # shellcheck disable=SC2086
    clang --target=thumbv7em-none-eabihf -mfloat-abi=hard -ffreestanding -DBLOCKC_NO_IO -DBLOCKC_NO_BLAS \
      $STRICT -I"$d" -c "$c" -o "$d/thumbv7em.o"
    n=$((n + 1))
  fi
done
rm -f "$dir"/*/strict.o "$dir"/*/thumbv7em.o "$dir/probe.o"
[ -n "$thumb" ] && ccs="$ccs, clang --target=thumbv7em-none-eabihf"
echo "strict_emit: $files generated files pass the strict warnings ($n compiles: $ccs)"
