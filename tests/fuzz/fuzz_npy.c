// fuzz_npy.c — libFuzzer target for the .npy reader (bcN_read).
//
// Same memfd technique as fuzz_safetensors.c (fuzz_memfile.h).  On success the returned
// shape must be rank 1..BC_MAX_RANK and the buffer must hold numel floats
// (every element is touched so ASan sees a short allocation).
#define _GNU_SOURCE
#include <string.h>

#include "fuzz_memfile.h"

static fuzz_memfile mem;  // one memfd reused across inputs

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz.npy", data, size);
  if (!ctx) return 0;
  bc_shape s;
  float *x = NULL;
  int rc = bcN_read(ctx, mem.path, &s, &x);
  if (rc == BC_OK) {
    if (!x || s.rank < 1 || s.rank > BC_MAX_RANK) abort();
    int64_t n = bc_shape_numel(&s);
    if (n < 0 || (uint64_t)n * 4 > size) abort();
    volatile float sink = 0;
    for (int64_t i = 0; i < n; i++) sink += x[i];
    (void)sink;
    free(x);
  } else if (x != NULL || ctx->nerrors == 0) {
    abort();
  }
  bc_ctx_free(ctx);
  return 0;
}
