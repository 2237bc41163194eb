/* main.c -- a model on a microcontroller: no heap, no file system, no libc
 * beyond memcpy/memset and the float libm.  (examples/firmware/README.md)
 *
 * The model is graphs/pre_ln.blk emitted with its weights as C arrays, the
 * matrices as q8_0 (1.125 bytes a weight, in flash):
 *
 *   blockc emit graphs/pre_ln.blk -D D=32 -D N=2 -D F=64 -D H=4 -D T=8 -o out \
 *       --weights-c --weights w.safetensors --weight-dtype q8_0
 *
 * Everything the forward touches is static: the weights (const, .rodata),
 * the workspace (PRE_LN_WORKSPACE_BYTES, .bss, 64-byte aligned) and the
 * input and output arrays.  pre_ln_run allocates nothing; build the runtime
 * with -DBLOCKC_NO_IO -DBLOCKC_NO_BLAS (kernels only, the portable GEMM)
 * and, on a single-precision FPU, -DBLOCKC_FLOAT_ONLY.
 *
 * firmware_forward() is what a device calls; the main() below (left out
 * with -DFIRMWARE_NO_MAIN) runs it once on a fixed input and prints the
 * output, one value per line, for tests/test_weights_c.c to compare with
 * `blockc run`. */
#include "pre_ln.h"

static _Alignas(64) unsigned char workspace[PRE_LN_WORKSPACE_BYTES];
static float x[PRE_LN_IN_NUMEL], y[PRE_LN_OUT_NUMEL];

/* y = model(x) over T positions (1..PRE_LN_T_MAX); PRE_LN_OK on success. */
int firmware_forward(long T);
int firmware_forward(long T) {
  pre_ln_io io = {0};
  io.x = x;
  io.y = y;
  io.T = T;
  return pre_ln_run(&pre_ln_embedded.w, &io, workspace);
}

#ifndef FIRMWARE_NO_MAIN
#include <stdio.h>
int main(void) {
  for (int i = 0; i < PRE_LN_IN_NUMEL; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
  int st = firmware_forward(PRE_LN_T_MAX);
  if (st != PRE_LN_OK) {
    printf("pre_ln_run: status %d\n", st);
    return 1;
  }
  for (int i = 0; i < PRE_LN_OUT_NUMEL; i++) printf("%.9g\n", (double)y[i]);
  return 0;
}
#endif
