/* main.c -- a complete program around a blockc AOT model, as a user would
 * vendor it: generated residual.{c,h} plus runtime/blockc_rt.{c,h}, nothing
 * else (OpenBLAS, or none with -DBLOCKC_NO_BLAS).
 *
 *   ./residual WEIGHTS.safetensors X.npy Y.npy
 *
 * Loads the weights by name (shapes and dtypes checked against the header's
 * table), reads x (float32 .npy of the model's input shape), runs the
 * forward pass once and writes y.  Exit status 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>

#include "blockc_rt.h"
#include "residual.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s WEIGHTS.safetensors X.npy Y.npy\n", argv[0]);
    return 2;
  }
  char err[4096];
  residual_slots w; /* the weights struct, fillable by index */
  void *storage = NULL;
  if (bcrt_st_load(argv[1], residual_params, RESIDUAL_NPARAMS, w.slots, &storage, err,
                   sizeof err) != BCRT_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }

  /* The input must have exactly the shape this build was specialised to. */
  static const long want[RESIDUAL_IN_RANK] = {RESIDUAL_B, RESIDUAL_T, RESIDUAL_D};
  long shape[BCRT_NPY_MAX_RANK];
  int rank, ok;
  float *x = NULL;
  if (bcrt_npy_read(argv[2], &x, shape, &rank, err, sizeof err) != BCRT_OK) {
    fprintf(stderr, "%s\n", err);
    bcrt_st_free(storage);
    return 1;
  }
  ok = rank == RESIDUAL_IN_RANK;
  for (int i = 0; ok && i < rank; i++) ok = shape[i] == want[i];
  if (!ok) {
    fprintf(stderr, "%s: expected shape (%ld, %ld, %ld)\n", argv[2], want[0], want[1], want[2]);
    bcrt_free(x);
    bcrt_st_free(storage);
    return 1;
  }

  float *y = malloc(RESIDUAL_OUT_NUMEL * sizeof(float));
  void *ws = bcrt_aligned_alloc(RESIDUAL_WORKSPACE_ALIGN, RESIDUAL_WORKSPACE_BYTES);
  int st = y && ws ? residual_forward(&w.w, x, y, ws) : -1;
  if (st != RESIDUAL_OK) fprintf(stderr, "forward failed (status %d)\n", st);
  else if (bcrt_npy_write(argv[3], y, want, RESIDUAL_OUT_RANK, err, sizeof err) != BCRT_OK) {
    fprintf(stderr, "%s\n", err);
    st = -1;
  }
  if (st == RESIDUAL_OK) printf("wrote %s: first %.6f %.6f %.6f\n", argv[3], y[0], y[1], y[2]);
  bcrt_aligned_free(ws);
  free(y);
  bcrt_free(x);
  bcrt_st_free(storage);
  return st == RESIDUAL_OK ? 0 : 1;
}
