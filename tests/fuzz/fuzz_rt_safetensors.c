// fuzz_rt_safetensors.c — libFuzzer target for the runtime's own
// safetensors loader (bcrt_st_load in runtime/blockc_rt.c, the one vendored
// AOT programs ship), and a differential check against blockc's reader.
//
// Each input is loaded twice by the runtime: with no parameters (the file
// must be well-formed as a whole) and with the two parameters of
// tests/bad/ln.blk (ln.weight [4], ln.bias [4]); on success every slot is
// read (ASan sees any short block).  Then blockc's reader (bcS_open) opens
// the same bytes: both must accept or both reject the file, since the two
// implement the same format rules (known dtypes, exact sizes, tiling, no
// NUL in names, UTF-8, __metadata__ an object of strings).
#define _GNU_SOURCE
#include <string.h>

#include "blockc_rt.h"
#include "fuzz_memfile.h"

static fuzz_memfile mem;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bc_ctx *ctx = fuzz_memfile_fill(&mem, "fuzz_rt.safetensors", data, size);
  if (!ctx) return 0;
  char err[4096];
  void *storage = (void *)1;
  int rt0 = bcrt_st_load(mem.path, NULL, 0, NULL, &storage, err, sizeof err);
  if (rt0 == BCRT_OK) bcrt_st_free(storage);
  else if (storage != NULL || !err[0]) abort();  // failure: nothing allocated, a message
  static const bcrt_param_info params[2] = {{"ln.weight", 1, {4, 0, 0, 0}},
                                            {"ln.bias", 1, {4, 0, 0, 0}}};
  const float *slots[2] = {NULL, NULL};
  int rt2 = bcrt_st_load(mem.path, params, 2, slots, &storage, err, sizeof err);
  if (rt2 == BCRT_OK) {
    volatile float sink = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) sink += slots[i][k];
    (void)sink;
    bcrt_st_free(storage);
  } else if (storage != NULL || slots[0] || slots[1] || !err[0]) {
    abort();
  }
  if (rt2 == BCRT_OK && rt0 != BCRT_OK) abort();  // a subset of the whole-file check
  bc_st_file *f = NULL;
  int bc = bcS_open(ctx, mem.path, &f);
  bcS_close(f);
  if ((bc == BC_OK) != (rt0 == BCRT_OK)) {
    fprintf(stderr, "disagreement: blockc %s, runtime %s (%s)\n", bc == BC_OK ? "accepts" : "rejects",
            rt0 == BCRT_OK ? "accepts" : "rejects", rt0 == BCRT_OK ? "" : err);
    abort();
  }
  bc_ctx_free(ctx);
  return 0;
}
