// fuzz_gguf.c — libFuzzer target for THE GGUF reader (runtime/blockc_rt.c:
// bcrt_gguf_open_source, bcrt_gguf_read_f32, bcrt_gguf_array_*), which
// blockc's loader (compiler/gguf.c) reads through.
//
// Each input is read by:
//   1. the runtime's reader, from memory: on success the table must hold
//      what the rules promise, checked here independently (names unique,
//      sorted and findable, 1..4 dims, bytes = blocks of the type, aligned
//      offsets inside the file, no two tensors sharing a byte; every
//      metadata key findable); every tensor the reader converts is read
//      into a buffer of exactly numel floats (ASan sees any overrun), every
//      numeric array element and every string of a string array read.  On
//      failure: a status, a known rule and a message.
//   2. blockc's layer (bcS_open) through a memfd path: the same verdict,
//      and on failure exactly "path: error: " + the runtime's message;
//      on success every tensor of the view (mapped names, un-permuted or
//      transposed matrices) read as float, and the dims bcF_gguf_defs
//      would take for graphs/llama_lm.blk's dims all in range.
//   3. the tokenizer the file carries (cli_gguf_tokenizer: tokenizer.ggml.*
//      through blockc_tokenizer_load_ggml): a tokenizer, or a message that
//      names the file; a tokenizer encodes and decodes a short text.
#define _GNU_SOURCE
#include <string.h>

#include "fuzz_memfile.h"
#include "blockc_tok.h"
#include "cli.h"

static fuzz_memfile mem;  // one memfd reused across inputs

static int cmp_off(const void *a, const void *b) {
  const bcrt_gguf_tensor *x = *(const bcrt_gguf_tensor *const *)a, *y = *(const bcrt_gguf_tensor *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

static int count_strings(void *ud, unsigned long long i, const char *s, unsigned long len) {
  (void)i;
  if (strlen(s) > len) abort();
  ++*(unsigned long long *)ud;
  return 0;
}

static void check_file(const bcrt_gguf_file *f, uint64_t size) {
  int n = bcrt_gguf_count(f);
  const bcrt_gguf_tensor **by = malloc((size_t)(n ? n : 1) * sizeof *by);
  if (!by) return;
  for (int i = 0; i < n; i++) {
    const bcrt_gguf_tensor *t = bcrt_gguf_tensor_at(f, i);
    if (!t || bcrt_gguf_find(f, t->name) != t || t->rank < 1 || t->rank > 4 || !t->name[0]) abort();
    if (i && strcmp(bcrt_gguf_tensor_at(f, i - 1)->name, t->name) >= 0) abort();
    uint64_t numel = 1;
    for (int k = 0; k < 4; k++) numel *= t->ne[k];
    if (numel != t->numel || !bcrt_gguf_type_name(t->type) || t->offset > size || t->bytes > size - t->offset) abort();
    by[i] = t;
  }
  qsort(by, (size_t)n, sizeof *by, cmp_off);
  for (int i = 1; i < n; i++)
    if (by[i - 1]->offset + by[i - 1]->bytes > by[i]->offset) abort();
  free(by);
  for (int i = 0; i < bcrt_gguf_kv_count(f); i++) {
    const bcrt_gguf_kv *kv = bcrt_gguf_kv_at(f, i);
    if (!kv || bcrt_gguf_get(f, kv->key) != kv) abort();
    if (kv->type == BCRT_GGUF_ARRAY && kv->elem_type == BCRT_GGUF_STRING) {
      unsigned long long got = 0;
      if (bcrt_gguf_array_strings(f, kv, count_strings, &got) != BCRT_OK || got != kv->count) abort();
    } else if (kv->type == BCRT_GGUF_ARRAY) {
      double v;
      for (unsigned long long k = 0; k < kv->count && k < 4096; k++)
        if (bcrt_gguf_array_num(f, kv, k, &v) != BCRT_OK) abort();
    }
  }
  for (int i = 0; i < n; i++) {
    const bcrt_gguf_tensor *t = bcrt_gguf_tensor_at(f, i);
    if (t->numel > (1u << 22)) continue;
    float *dst = malloc((size_t)t->numel * sizeof(float));
    if (!dst) continue;
    bcrt_error e;
    int st = bcrt_gguf_read_f32(f, t, dst, &e);
    if ((st == BCRT_OK) != (bcrt_gguf_can_read(t->type) != 0)) abort();
    if (st) fuzz_check_error(st, &e);
    free(dst);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
  bcrt_source src = fuzz_mem_source(bytes, size);
  bcrt_gguf_file *f = (bcrt_gguf_file *)1;
  bcrt_error e;
  int rt = bcrt_gguf_open_source(&src, &f, &e);
  if (rt == BCRT_OK) check_file(f, size);
  else if (f != NULL) abort();
  else fuzz_check_error(rt, &e);

  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz.gguf", bytes, size);
  if (!ctx) abort();
  fuzz_errors errs = {{0}};
  bc_set_error_fn(ctx, &errs, fuzz_keep);
  bc_st_file *bf = NULL;
  // bcS_open takes a GGUF file by its magic; anything else goes to the
  // safetensors reader, whose verdicts fuzz_safetensors checks
  bool gguf = size >= 4 && !memcmp(bytes, "GGUF", 4);
  int bc = bcS_open(ctx, mem.path, &bf);
  if ((bc == BC_OK) != (bf != NULL)) abort();
  if (gguf && rt != BCRT_OK) {  // the runtime's verdict, word for word
    if (bc == BC_OK) abort();
    fuzz_check_layer(mem.path, errs.first, &e);
  } else if (gguf && bc != BC_OK && !strstr(errs.first, "cannot be un-permuted for rope") &&
             !strstr(errs.first, "two tensors map to")) {
    abort();  // the view refuses an accepted file only for its own two reasons
  }
  if (bc == BC_OK && bf->gg) {
    for (int i = 0; i < bf->ntensors; i++) {
      const bc_st_tensor *t = &bf->tensors[i];
      int64_t numel = 1;
      for (int k = 0; k < t->rank; k++) numel *= t->shape[k];
      if (t->dtype != BC_DT_F32 || numel > (1 << 22)) continue;
      float *dst = malloc((size_t)numel * sizeof(float));
      if (dst && bcS_find(bf, t->name) != t) abort();
      if (dst && bcS_read_f32(ctx, bf, t, dst) != BC_OK) abort();
      free(dst);
    }
  }
  bcS_close(bf);
  char terr[1024] = "";
  int none = 0;
  blockc_tokenizer *tk = cli_gguf_tokenizer(mem.path, terr, sizeof terr, NULL, 0, &none);
  // none: no tokenizer.ggml.model, or the string "none" (a file that says
  // it has no vocabulary, as blockc's writer does without a tokenizer)
  const bcrt_gguf_kv *model = gguf && rt == BCRT_OK ? bcrt_gguf_get(f, "tokenizer.ggml.model") : NULL;
  int want_none = !model || (model->type == BCRT_GGUF_STRING && model->str && !strcmp(model->str, "none"));
  if (!tk && (strncmp(terr, mem.path, strlen(mem.path)) || (gguf && rt == BCRT_OK && none != want_none)))
    abort();
  if (tk) {
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *text = NULL;
    if (!blockc_tokenizer_encode(tk, "Hello w\xc3\xb6rld <s>  12", 20, 1, &ids, &n, terr, sizeof terr) &&
        blockc_tokenizer_decode(tk, ids, n, 1, &text, &len, terr, sizeof terr))
      abort();  // its own ids decode
    free(ids), free(text);
    blockc_tokenizer_free(tk);
  }
  if (rt == BCRT_OK) bcrt_gguf_close(f);
  bc_ctx_free(ctx);
  return 0;
}
