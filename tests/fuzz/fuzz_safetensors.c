// fuzz_safetensors.c — libFuzzer target for the safetensors reader.
//
// The bytes go into an anonymous in-memory file (memfd_create) which is
// opened through /proc/self/fd/N, so the library is exercised exactly as
// the CLI uses it (by path) without touching the disk.  When bcS_open
// accepts the file, every tensor is looked up by name and, if its dtype
// converts, read into a float buffer of exactly numel elements — ASan then
// catches any read past the file or write past the buffer.
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
    fd = memfd_create("fuzz.safetensors", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0) abort();
  if (size && pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 0;
  bc_set_error_fn(ctx, NULL, quiet);
  bc_st_file *f = NULL;
  int rc = bcS_open(ctx, path, &f);
  if (rc == BC_OK) {
    if (!f) abort();
    for (int i = 0; i < f->ntensors; i++) {
      const bc_st_tensor *t = &f->tensors[i];
      if (bcS_find(f, t->name) == NULL) abort();   // names must be findable
      if (t->end < t->begin || t->end > f->data_len) abort();
      if (t->dtype == BC_DT_OTHER) continue;
      uint64_t n = 1;
      for (int k = 0; k < t->rank; k++) n *= (uint64_t)t->shape[k];
      if (n > (1u << 24)) continue;  // bounded by the file size anyway
      float *dst = malloc(n ? n * sizeof(float) : 1);
      if (!dst) continue;
      bcS_read_f32(ctx, f, t, dst);
      free(dst);
    }
    bcS_close(f);
  } else if (f != NULL || ctx->nerrors == 0) {
    abort();
  }
  bc_ctx_free(ctx);
  return 0;
}
