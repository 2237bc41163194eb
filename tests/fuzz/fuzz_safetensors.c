// fuzz_safetensors.c — libFuzzer target for THE safetensors reader
// (runtime/blockc_rt.c: bcrt_st_open_source, bcrt_st_read_f32,
// bcrt_st_load), which blockc and vendored programs share.
//
// Each input is read by:
//   1. the runtime's reader, from memory: on success the table must hold
//      what the rules promise, checked here independently (names unique,
//      sorted and findable, known dtypes, offsets holding exactly each
//      shape's bytes, the tensors tiling the data section); every readable
//      tensor is read into a buffer of exactly its size (ASan sees any
//      overrun).  On failure: a status, a known rule and a message.
//   2. blockc's layer (bcS_open) through a memfd path: the same verdict,
//      and on failure exactly "path: error: " + the runtime's message.
//   3. the vendored loader (bcrt_st_load) with the two parameters of
//      tests/bad/ln.blk: it can only succeed on a file that opened; on
//      failure nothing is allocated and every slot is NULL.
//   4. a round trip, when the file opened and blockc's writer can write
//      its tensors (F32, rank <= 4): bcS_write, then the reader gives back
//      the same names, shapes and bytes.
#define _GNU_SOURCE
#include <string.h>

#include "fuzz_memfile.h"

static fuzz_memfile mem;  // one memfd reused across inputs

static int cmp_begin(const void *a, const void *b) {
  const bcrt_st_tensor *x = *(const bcrt_st_tensor *const *)a, *y = *(const bcrt_st_tensor *const *)b;
  return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

// The rules, re-checked on an accepted file, then every tensor read.
static void check_table(const bcrt_st_file *f, uint64_t size) {
  int n = bcrt_st_count(f);
  uint64_t off = bcrt_st_data_offset(f), data_len = size - off;
  if (off < 8 || off > size) abort();
  const bcrt_st_tensor **by = malloc((size_t)(n ? n : 1) * sizeof *by);
  if (!by) return;
  for (int i = 0; i < n; i++) {
    const bcrt_st_tensor *t = bcrt_st_tensor_at(f, i);
    if (!t || bcrt_st_find(f, t->name) != t || t->rank < 0 || t->rank > 8 || t->esize < 1) abort();
    if (i && strcmp(bcrt_st_tensor_at(f, i - 1)->name, t->name) >= 0) abort();  // sorted, unique
    uint64_t bytes = (uint64_t)t->esize;
    for (int k = 0; k < t->rank; k++) bytes *= t->shape[k];
    if (t->end < t->begin || t->end - t->begin != bytes || t->end > data_len) abort();
    by[i] = t;
  }
  qsort(by, (size_t)n, sizeof *by, cmp_begin);
  uint64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (by[i]->begin != at) abort();  // no gap, no overlap
    at = by[i]->end;
  }
  if (at != data_len) abort();  // no trailing bytes
  free(by);
  for (int i = 0; i < n; i++) {
    const bcrt_st_tensor *t = bcrt_st_tensor_at(f, i);
    size_t numel = (size_t)((t->end - t->begin) / (uint64_t)t->esize);
    float *dst = malloc(numel ? numel * sizeof(float) : 1);
    if (!dst) continue;
    bcrt_error e;
    int st = bcrt_st_read_f32(f, t, dst, &e);
    int convertible = !strcmp(t->dtype, "F32") || !strcmp(t->dtype, "F16") || !strcmp(t->dtype, "BF16");
    if (convertible != (st == BCRT_OK)) abort();
    if (st) fuzz_check_error(st, &e);
    free(dst);
  }
}

// blockc's writer -> the reader: names, shapes and bytes come back.
static void round_trip(bc_ctx *ctx, const bcrt_st_file *f) {
  int n = bcrt_st_count(f);
  if (n > 16) return;
  const char *names[16];
  bc_shape shapes[16];
  float *data[16] = {0};
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    const bcrt_st_tensor *t = bcrt_st_tensor_at(f, i);
    ok = !strcmp(t->dtype, "F32") && t->rank <= BC_MAX_RANK && t->name[0];
    names[i] = t->name;
    shapes[i] = (bc_shape){.rank = t->rank};
    for (int k = 0; ok && k < t->rank; k++) ok = t->shape[k] <= (uint64_t)BC_MAX_DIM, shapes[i].d[k] = (int64_t)t->shape[k];
    size_t numel = (size_t)((t->end - t->begin) / 4);
    bcrt_error e;
    ok = ok && (data[i] = malloc(numel ? numel * 4 : 4)) && bcrt_st_read_f32(f, t, data[i], &e) == BCRT_OK;
  }
  const char *path = fuzz_tmp_path("rt.safetensors");
  if (ok && bcS_write(ctx, path, n, names, shapes, (const float *const *)data) == BC_OK) {
    bcrt_st_file *g;
    bcrt_error e;
    if (bcrt_st_open(path, &g, &e) != BCRT_OK || bcrt_st_count(g) != n) {
      fprintf(stderr, "round trip: %s\n", e.msg);
      abort();
    }
    for (int i = 0; i < n; i++) {
      const bcrt_st_tensor *a = bcrt_st_tensor_at(f, i), *b = bcrt_st_find(g, a->name);
      if (!b || b->rank != a->rank || memcmp(b->shape, a->shape, sizeof a->shape[0] * (size_t)a->rank)) abort();
      size_t bytes = (size_t)(a->end - a->begin);
      float *back = malloc(bytes ? bytes : 4);
      if (back && (bcrt_st_read_f32(g, b, back, &e) != BCRT_OK || memcmp(back, data[i], bytes))) abort();
      free(back);
    }
    bcrt_st_close(g);
  }
  fuzz_tmp_done();
  for (int i = 0; i < n; i++) free(data[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
  bcrt_source src = fuzz_mem_source(bytes, size);
  bcrt_st_file *f = (bcrt_st_file *)1;
  bcrt_error e;
  int rt = bcrt_st_open_source(&src, &f, &e);
  if (rt == BCRT_OK) check_table(f, size);
  else if (f != NULL) abort();
  else fuzz_check_error(rt, &e);

  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz.safetensors", bytes, size);
  if (!ctx) abort();
  fuzz_errors errs = {{0}};
  bc_set_error_fn(ctx, &errs, fuzz_keep);
  bc_st_file *bf = NULL;
  // bcS_open reads a file that starts with GGUF's magic as GGUF (fuzz_gguf
  // checks those verdicts); every other file must get the runtime's
  bool gguf = size >= 4 && !memcmp(bytes, "GGUF", 4);
  int bc = gguf ? BC_OK : bcS_open(ctx, mem.path, &bf);
  if (!gguf && ((bc == BC_OK) != (rt == BCRT_OK) || (bc == BC_OK) != (bf != NULL))) abort();
  if (!gguf && bc != BC_OK) fuzz_check_layer(mem.path, errs.first, &e);
  else if (!gguf && bf->ntensors != bcrt_st_count(f)) abort();
  bcS_close(bf);

  static const bcrt_param_info params[2] = {{"ln.weight", 1, {4, 0, 0, 0}}, {"ln.bias", 1, {4, 0, 0, 0}}};
  const float *slots[2] = {(const float *)1, (const float *)1};
  void *storage = (void *)1;
  char err[4096];
  int ld = bcrt_st_load(mem.path, params, 2, slots, &storage, err, sizeof err);
  if (ld == BCRT_OK) {
    if (rt != BCRT_OK || !storage) abort();
    volatile float sink = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) sink += slots[i][k];
    (void)sink;
    bcrt_st_free(storage);
  } else if (storage != NULL || slots[0] || slots[1] || !err[0]) {
    abort();
  }

  if (rt == BCRT_OK) {
    round_trip(ctx, f);
    bcrt_st_close(f);
  }
  bc_ctx_free(ctx);
  return 0;
}
