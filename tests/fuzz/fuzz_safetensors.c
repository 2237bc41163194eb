// fuzz_safetensors.c — libFuzzer target for the safetensors reader.
//
// The bytes go into an anonymous in-memory file (memfd_create) which is
// opened through /proc/self/fd/N, so the library is exercised exactly as
// the CLI uses it (by path) without touching the disk.  When bcS_open
// accepts the file, every tensor is looked up by name and, if its dtype
// converts, read into a float buffer of exactly numel elements — ASan then
// catches any read past the file or write past the buffer.
#define _GNU_SOURCE
#include <string.h>

#include "fuzz_memfile.h"

static fuzz_memfile mem;  // one memfd reused across inputs

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz.safetensors", data, size);
  if (!ctx) return 0;
  bc_st_file *f = NULL;
  int rc = bcS_open(ctx, mem.path, &f);
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
