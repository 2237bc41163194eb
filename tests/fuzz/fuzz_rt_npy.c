// fuzz_rt_npy.c — libFuzzer target for the runtime's own .npy reader
// (bcrt_npy_read in runtime/blockc_rt.c, shipped with vendored AOT code).
//
// On success the shape must be rank 0..BCRT_NPY_MAX_RANK with non-negative
// dims and the buffer must hold their product of floats (every element is
// touched so ASan sees a short allocation); on failure nothing is returned
// and err says why.  Where blockc's reader (bcN_read) accepts a file, the
// runtime must accept it too with the same shape and bytes (the runtime is
// the more permissive of the two: ranks 0 and 5..8).
#define _GNU_SOURCE
#include <string.h>

#include "blockc_rt.h"
#include "fuzz_memfile.h"

static fuzz_memfile mem;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz_rt.npy", data, size);
  if (!ctx) return 0;
  char err[512];
  float *x = (float *)1;
  long shape[BCRT_NPY_MAX_RANK];
  int rank = -1;
  int rt = bcrt_npy_read(mem.path, &x, shape, &rank, err, sizeof err);
  size_t n = 1;
  if (rt == BCRT_OK) {
    if (!x || rank < 0 || rank > BCRT_NPY_MAX_RANK) abort();
    for (int i = 0; i < rank; i++) {
      if (shape[i] < 0) abort();
      n *= (size_t)shape[i];
    }
    if (n * 4 > size) abort();
    volatile float sink = 0;
    for (size_t i = 0; i < n; i++) sink += x[i];
    (void)sink;
  } else if (x != NULL || !err[0]) {
    abort();
  }
  bc_shape s;
  float *y = NULL;
  if (bcN_read(ctx, mem.path, &s, &y) == BC_OK) {
    if (rt != BCRT_OK || rank != s.rank) abort();
    for (int i = 0; i < rank; i++)
      if (shape[i] != s.d[i]) abort();
    if (n && memcmp(x, y, n * 4) != 0) abort();
    free(y);
  }
  if (rt == BCRT_OK) bcrt_free(x);
  bc_ctx_free(ctx);
  return 0;
}
