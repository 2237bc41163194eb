// fuzz_tokenizer.c — libFuzzer target over the tokenizer (runtime/blockc_tok.c):
// the input as a tokenizer.json (blockc_tokenizer_load_mem); when it loads,
// a few texts and the input's own bytes (often not UTF-8) are encoded with
// and without special tokens, the ids decoded (with and without skipping
// special tokens) and streamed one at a time, and ids outside the
// vocabulary must be refused.  Any crash, leak or sanitizer report fails.
// Seeds: tests/fuzz/corpus/tokenizer/ (the fixtures of tests/data/tok/).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const blockc_tokenizer *t, const char *s, size_t n) {
  char err[256];
  for (int sp = 0; sp < 2; sp++) {
    int32_t *ids;
    size_t k;
    if (blockc_tokenizer_encode(t, s, n, sp, &ids, &k, err, sizeof err)) continue;
    char *text;
    size_t len;
    if (!blockc_tokenizer_decode(t, ids, k, sp, &text, &len, err, sizeof err)) free(text);
    blockc_tokenizer_stream *st = blockc_tokenizer_stream_new(t, sp);
    const char *o;
    size_t on;
    for (size_t i = 0; st && i < k; i++) blockc_tokenizer_stream_push(st, ids[i], &o, &on);
    if (st) blockc_tokenizer_stream_finish(st, &o, &on);
    blockc_tokenizer_stream_free(st);
    free(ids);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  blockc_tokenizer *t = blockc_tokenizer_load_mem((const char *)data, size, "fuzz.json", err, sizeof err);
  if (!t) {
    if (!err[0]) abort();  // a refusal always says why
    return 0;
  }
  static const char *const texts[] = {"", "hi", " a b  c\n\t", "<s>hi</s>", "\xe6\x97\xa5\xff\xc3", "1234 x-y"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) roundtrip(t, texts[i], strlen(texts[i]));
  roundtrip(t, (const char *)data, size < 512 ? size : 512);
  int32_t bad[2] = {-1, (int32_t)blockc_tokenizer_vocab_size(t)};
  char *text;
  size_t len;
  if (!blockc_tokenizer_decode(t, bad, 2, 0, &text, &len, err, sizeof err)) abort();
  blockc_tokenizer_free(t);
  return 0;
}
