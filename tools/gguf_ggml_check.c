// gguf_ggml_check.c — blockc's GGUF block decoding against ggml's own code
// (issue 25; `make gguf-ggml-check`).  Built against ggml-quants.c of a
// llama.cpp snapshot (build/llamacpp/src or LLAMACPP_SRC; nothing of it is
// committed, docs/checkpoints.md says how to get one): for each block type,
// random rows are quantized with ggml's reference quantizer
// (quantize_row_<type>_reference), put in a GGUF file, read back with
// bcrt_gguf_read_f32 and compared bit for bit with ggml's
// dequantize_row_<type>; the test suite's Q8_0 / Q4_0 quantizers
// (tests/gguf_writer.h) must give ggml's bytes, and the small-M kernel's
// Q8_0 / Q4_0 panels (bcrt_pack_nt_wt) ggml's dequantized weights, which
// must pack back to the same bytes.  ggml's half-to-float table
// is filled with the F16C instruction, so no conversion of ours is involved
// on ggml's side.  Prints one line per type and exits non-zero on any
// difference.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"
#include "ggml-quants.h"
#include "gguf_writer.h"

float ggml_table_f32_f16[1 << 16];

typedef void (*quant_fn)(const float *, void *, int);
typedef void (*dequant_fn)(const void *, float *, int);

int main(void) {
  for (int i = 0; i < 1 << 16; i++) ggml_table_f32_f16[i] = _cvtsh_ss((unsigned short)i);
  const struct {
    const char *name;
    int type, blck, size;
    quant_fn q;
    dequant_fn dq;
  } ty[] = {
      {"Q8_0", 8, 32, sizeof(block_q8_0), (quant_fn)quantize_row_q8_0_reference, (dequant_fn)dequantize_row_q8_0},
      {"Q4_0", 2, 32, sizeof(block_q4_0), (quant_fn)quantize_row_q4_0_reference, (dequant_fn)dequantize_row_q4_0},
      {"Q4_1", 3, 32, sizeof(block_q4_1), (quant_fn)quantize_row_q4_1_reference, (dequant_fn)dequantize_row_q4_1},
      {"Q5_0", 6, 32, sizeof(block_q5_0), (quant_fn)quantize_row_q5_0_reference, (dequant_fn)dequantize_row_q5_0},
      {"Q5_1", 7, 32, sizeof(block_q5_1), (quant_fn)quantize_row_q5_1_reference, (dequant_fn)dequantize_row_q5_1},
      {"Q4_K", 12, 256, sizeof(block_q4_K), (quant_fn)quantize_row_q4_K_reference, (dequant_fn)dequantize_row_q4_K},
      {"Q6_K", 14, 256, sizeof(block_q6_K), (quant_fn)quantize_row_q6_K_reference, (dequant_fn)dequantize_row_q6_K},
  };
  int bad = 0;
  unsigned s = 1;
  for (size_t k = 0; k < sizeof ty / sizeof ty[0]; k++) {
    int n = 64 * 256;
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    unsigned char *blocks = malloc((size_t)n / ty[k].blck * ty[k].size), *mine = malloc((size_t)n / 32 * 34);
    for (int i = 0; i < n; i++) {  // mixed scales, some all-zero and some constant blocks
      s = s * 1664525u + 1013904223u;
      float u = (float)(s >> 8) / 16777216.0f * 2 - 1;
      int blk = i / 256;
      x[i] = blk % 7 == 3 ? 0 : blk % 11 == 5 ? 0.25f : u * (blk % 5 == 0 ? 1e-3f : blk % 3 == 0 ? 40.0f : 1.0f);
    }
    ty[k].q(x, blocks, n);
    ty[k].dq(blocks, want, n);
    gw_buf kv = {0}, f = {0};
    gw_tensor t = {"t", ty[k].type, 1, {(uint64_t)n}, blocks, (size_t)n / ty[k].blck * ty[k].size};
    gw_file(&f, 3, 0, &kv, &t, 1, 32);
    bcrt_gguf_file *g;
    bcrt_error e;
    int diff = -1;
    if (gw_open(&f, &g, &e) || bcrt_gguf_read_f32(g, bcrt_gguf_find(g, "t"), got, &e)) {
      printf("%s: blockc cannot read it: %s\n", ty[k].name, e.msg);
      bad++;
    } else {
      diff = 0;
      for (int i = 0; i < n; i++) diff += memcmp(&got[i], &want[i], 4) != 0;
      bcrt_gguf_close(g);
    }
    int qdiff = -1, pdiff = -1, repack = -1;
    if (ty[k].type == 8 || ty[k].type == 2) {
      if (ty[k].type == 8) gw_q8_0(x, (size_t)n, mine);
      else gw_q4_0(x, (size_t)n, mine);
      qdiff = memcmp(mine, blocks, (size_t)n / 32 * ty[k].size) != 0;
      /* The small-M kernel's panels (bcrt_pack_nt_wt, 64 rows of 256): their
       * weights are ggml's dequantized ones bit for bit, and packing those
       * (what the GGUF loader hands over) gives the same bytes. */
      int wt = ty[k].type == 8 ? BCRT_WT_Q8_0 : BCRT_WT_Q4_0, rows = 64, cols = n / rows;
      size_t pb = bcrt_pack_wt_bytes(wt, rows, cols);
      unsigned char *pk = malloc(pb), *pk2 = malloc(pb);
      float *eff = malloc(n * sizeof *eff);
      bcrt_pack_nt_wt(wt, rows, cols, x, pk);
      bcrt_unpack_wt(wt, rows, cols, pk, eff);
      bcrt_pack_nt_wt(wt, rows, cols, want, pk2);
      pdiff = 0;
      for (int i = 0; i < n; i++) pdiff += memcmp(&eff[i], &want[i], 4) != 0;
      repack = memcmp(pk, pk2, pb) != 0;
      free(pk), free(pk2), free(eff);
    }
    printf("%-5s %6d weights: %d differ from ggml's dequantize_row%s", ty[k].name, n, diff,
           qdiff < 0 ? "" : qdiff ? "; tests/gguf_writer.h's quantizer DIFFERS from ggml's" : "; the test quantizer's bytes = ggml's");
    if (pdiff >= 0)
      printf("; bcrt_pack_nt_wt panels: %d weights differ%s", pdiff,
             repack ? ", repacking ggml's weights CHANGES bytes" : ", ggml's weights repack to the same bytes");
    printf("\n");
    bad += diff != 0 || qdiff > 0 || pdiff > 0 || repack > 0;
    free(x), free(want), free(got), free(blocks), free(mine), free(kv.p), free(f.p);
  }
  printf(bad ? "gguf-ggml-check: FAILED\n" : "gguf-ggml-check: every type bit-identical to ggml\n");
  return bad != 0;
}
