// fuzz_npy.c — libFuzzer target for the .npy reader (bcN_read).
//
// Same memfd technique as fuzz_safetensors.c.  On success the returned
// shape must be rank 1..BC_MAX_RANK and the buffer must hold numel floats
// (every element is touched so ASan sees a short allocation).
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bc.h"

static int fd = -1;
static char path[64];

static void quiet(void *opaque, const char *msg) {
  (void)opaque;
  if (!msg || !msg[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fd < 0) {
    fd = memfd_create("fuzz.npy", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0) abort();
  if (size && pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 0;
  bc_set_error_fn(ctx, NULL, quiet);
  bc_shape s;
  float *x = NULL;
  int rc = bcN_read(ctx, path, &s, &x);
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
