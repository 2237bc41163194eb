// fuzz_rt_npy.c — libFuzzer target for the runtime's own .npy reader
// (bcrt_npy_read in runtime/blockc_rt.c, shipped with vendored AOT code).
//
// On success the shape must be rank 0..BCRT_NPY_MAX_RANK with non-negative
// dims and the buffer must hold their product of floats (every element is
// touched so ASan sees a short allocation); on failure nothing is returned
// and err says why.  Where blockc's reader (bcN_read) accepts a file, the
// runtime must accept it too with the same shape and bytes (the runtime is
// the more permissive of the two: ranks 0 and 5..8).  The same bytes go
// through bcrt_npy_read_i32 (lengths), checked the same way against
// bcN_read_i32.
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
  // The lengths reader on the same bytes: rank 1 of '<i4'/'<i8' only, and
  // it agrees with blockc's (bcN_read_i32) wherever that accepts rank 1.
  int *li = (int *)1;
  long ln = -1;
  int rl = bcrt_npy_read_i32(mem.path, &li, &ln, err, sizeof err);
  if (rl == BCRT_OK) {
    if (!li || ln < 0 || (size_t)ln * 4 > size) abort();
    volatile long sink = 0;
    for (long i = 0; i < ln; i++) sink += li[i];
    (void)sink;
  } else if (li != NULL || !err[0]) {
    abort();
  }
  int32_t *lb = NULL;
  if (bcN_read_i32(ctx, mem.path, &s, &lb) == BC_OK && s.rank == 1) {
    if (rl != BCRT_OK || ln != s.d[0]) abort();
    for (long i = 0; i < ln; i++)
      if (li[i] != lb[i]) abort();
  }
  free(lb);
  if (rl == BCRT_OK) bcrt_free(li);
  bc_ctx_free(ctx);
  return 0;
}
