// fuzz_npy.c — libFuzzer target for THE .npy reader (runtime/blockc_rt.c:
// bcrt_npy_open_source, bcrt_npy_read_source and the path functions
// bcrt_npy_read / bcrt_npy_read_i32), which blockc and vendored programs
// share.
//
// Each input is read, for floats and for lengths (ints):
//   1. by the runtime's reader from memory, with its default limits and
//      with blockc's: on success the shape is within the limits and the
//      data exactly fills the file after the header; every element is
//      touched (ASan sees a short buffer).  On failure: a status, a known
//      rule and a message.
//   2. by blockc's layer (bcN_read, bcN_read_i32) through a memfd path:
//      the same verdict and data as the runtime with blockc's limits, and
//      on failure exactly "path: error: " + the runtime's first line.
//   3. by the vendored functions: the same verdict and data as the runtime
//      with its default limits ("path: " + the runtime's message).
//   4. accepted floats make a round trip through both writers (bcN_write,
//      bcrt_npy_write): the reader gives back the same shape and bytes.
#define _GNU_SOURCE
#include <string.h>

#include "fuzz_memfile.h"

static fuzz_memfile mem;  // one memfd reused across inputs

// One reading from memory: status, info and data (NULL on failure).
typedef struct {
  int st, header_st;     // the whole reading's status; the header's
  bcrt_npy_info info;
  bcrt_error e;
  void *data;
  size_t numel;
} reading;

static reading read_mem(const bcrt_source *src, int type, const bcrt_npy_limits *lim) {
  reading r = {0};
  r.st = r.header_st = bcrt_npy_open_source(src, type, lim, &r.info, &r.e);
  if (!r.st) r.st = bcrt_npy_read_source(src, &r.info, &r.data, &r.e);
  if (r.st) {
    fuzz_check_error(r.st, &r.e);
    if (r.data) abort();
    return r;
  }
  int max_rank = lim ? lim->max_rank : BCRT_NPY_MAX_RANK;
  if (r.info.rank < 1 || r.info.rank > max_rank || !r.data) abort();
  r.numel = 1;
  for (int i = 0; i < r.info.rank; i++) {
    if (r.info.shape[i] < 0 || (lim && r.info.shape[i] > lim->max_dim)) abort();
    r.numel *= (size_t)r.info.shape[i];
  }
  if (r.info.data_offset + r.numel * (size_t)r.info.esize != src->size) abort();
  volatile uint32_t sink = 0;
  for (size_t i = 0; i < r.numel; i++) sink += ((const uint32_t *)r.data)[i];  // floats or ints: 4 bytes
  (void)sink;
  return r;
}

// The same verdict, shape and data as a memory reading.
static void same(const reading *r, int ok, int rank, const long *shape, const int64_t *d, const void *data) {
  if (ok != (r->st == BCRT_OK)) abort();
  if (!ok) return;
  if (rank != r->info.rank) abort();
  for (int i = 0; i < rank; i++)
    if ((shape ? shape[i] : d[i]) != r->info.shape[i]) abort();
  if (r->numel && memcmp(data, r->data, r->numel * 4)) abort();
}

// blockc's reader on the memfd, against the runtime with blockc's limits.
static void check_blockc(const reading *r, int ints) {
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) abort();
  fuzz_errors errs = {{0}};
  bc_set_error_fn(ctx, &errs, fuzz_keep);
  bc_shape s;
  void *p = NULL;
  int bc = ints ? bcN_read_i32(ctx, mem.path, &s, (int32_t **)&p) : bcN_read(ctx, mem.path, &s, (float **)&p);
  same(r, bc == BC_OK, s.rank, NULL, s.d, p);
  if (bc != BC_OK) fuzz_check_layer(mem.path, errs.first, &r->e);
  free(p);
  bc_ctx_free(ctx);
}

// The vendored path functions, against the runtime with its defaults.
static void check_vendored(const reading *r, int ints) {
  char err[2048], want[2048];
  long shape[BCRT_NPY_MAX_RANK], n = 0;
  int rank = 1, st;
  void *p = (void *)1;
  if (ints) {
    st = bcrt_npy_read_i32(mem.path, (int **)&p, &n, err, sizeof err);
    shape[0] = n;
    if (r->header_st == BCRT_OK && r->info.rank != 1) {  // lengths are rank 1, checked before the data
      if (st != BCRT_EFORMAT || p || !strstr(err, "rank-1")) abort();
      return;
    }
  } else {
    st = bcrt_npy_read(mem.path, (float **)&p, shape, &rank, err, sizeof err);
  }
  same(r, st == BCRT_OK, rank, shape, NULL, p);
  snprintf(want, sizeof want, "%s: %s", mem.path, r->e.msg);
  if (st != BCRT_OK && (p || strcmp(err, want))) {
    fprintf(stderr, "vendored: '%s'\nruntime:  '%s'\n", err, want);
    abort();
  }
  bcrt_free(st == BCRT_OK ? p : NULL);
}

// Both writers, then the reader: the same shape and bytes come back.
static void round_trip(const reading *r) {
  const char *path = fuzz_tmp_path("rt.npy");
  bc_shape s = {.rank = r->info.rank <= BC_MAX_RANK ? r->info.rank : -1};  // -1: bcN_write refuses
  for (int i = 0; i < s.rank; i++) s.d[i] = r->info.shape[i];
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) abort();
  bc_set_error_fn(ctx, NULL, fuzz_quiet);
  char err[512];
  for (int w = 0; w < 2; w++) {
    int ok = w == 0 ? bcN_write(ctx, path, &s, r->data) == BC_OK
                    : bcrt_npy_write(path, r->data, r->info.shape, r->info.rank, err, sizeof err) == BCRT_OK;
    if (!ok) continue;  // a full /dev/shm is not the reader's fault
    float *x = NULL;
    long shape[BCRT_NPY_MAX_RANK];
    int rank = 0;
    if (bcrt_npy_read(path, &x, shape, &rank, err, sizeof err) != BCRT_OK) {
      fprintf(stderr, "round trip %d: %s\n", w, err);
      abort();
    }
    same(r, 1, rank, shape, NULL, x);
    bcrt_free(x);
    unlink(path);
  }
  bc_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
  bcrt_source src = fuzz_mem_source(bytes, size);
  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz.npy", bytes, size);
  if (!ctx) abort();
  bc_ctx_free(ctx);
  static const bcrt_npy_limits blockc = {BC_MAX_RANK, (long)BC_MAX_DIM, BC_MAX_ELEMS};
  for (int ints = 0; ints < 2; ints++) {
    int type = ints ? BCRT_NPY_INT : BCRT_NPY_F32;
    reading def = read_mem(&src, type, NULL), bcl = read_mem(&src, type, &blockc);
    if (bcl.st == BCRT_OK && def.st != BCRT_OK) abort();  // blockc's limits are the tighter
    check_blockc(&bcl, ints);
    check_vendored(&def, ints);
    if (!ints && def.st == BCRT_OK) round_trip(&def);
    bcrt_free(def.data);
    bcrt_free(bcl.data);
  }
  return 0;
}
