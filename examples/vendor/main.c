/* main.c -- a complete program around a blockc AOT model, as a user would
 * vendor it: generated residual.{c,h} plus runtime/blockc_rt.{c,h}, nothing
 * else (OpenBLAS, or none with -DBLOCKC_NO_BLAS).
 *
 *   ./residual WEIGHTS.safetensors X.npy Y.npy
 *
 * Loads the weights by name (shapes and dtypes checked against the header's
 * table), reads x (float32 .npy [B, T, D] with any T from 1 to the bound
 * RESIDUAL_T_MAX: T is a run-time dim), runs the model once through the
 * named entry residual_run (no lengths: every row is full length) and writes
 * y [B, T, D].  Exit status 0, or 1 with a message. */
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

  /* The input must be [B, T, D] with B and D as built and 1 <= T <= the bound. */
  long want[RESIDUAL_IN_RANK] = {RESIDUAL_B, 0, RESIDUAL_D};
  long shape[BCRT_NPY_MAX_RANK];
  int rank, ok;
  float *x = NULL;
  if (bcrt_npy_read(argv[2], &x, shape, &rank, err, sizeof err) != BCRT_OK) {
    fprintf(stderr, "%s\n", err);
    bcrt_st_free(storage);
    return 1;
  }
  ok = rank == RESIDUAL_IN_RANK && shape[1] >= 1 && shape[1] <= RESIDUAL_T_MAX;
  if (ok) want[1] = shape[1];
  for (int i = 0; ok && i < rank; i++) ok = shape[i] == want[i];
  if (!ok) {
    fprintf(stderr, "%s: expected shape (%ld, 1..%ld, %ld)\n", argv[2], want[0], (long)RESIDUAL_T_MAX,
            want[2]);
    bcrt_free(x);
    bcrt_st_free(storage);
    return 1;
  }

  float *y = malloc((size_t)(want[0] * want[1] * want[2]) * sizeof(float));
  void *ws = bcrt_aligned_alloc(RESIDUAL_WORKSPACE_ALIGN, RESIDUAL_WORKSPACE_BYTES);
  residual_io io = {.x = x, .len = NULL, .y = y, .T = want[1]};
  int st = y && ws ? residual_run(&w.w, &io, ws) : -1;
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
