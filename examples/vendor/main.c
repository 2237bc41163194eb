/* main.c -- a complete program around any blockc AOT model, as a user would
 * vendor it: the `blockc emit` pair <model>.{c,h} plus runtime/blockc_rt.{c,h},
 * nothing else (OpenBLAS, or none with -DBLOCKC_NO_BLAS).
 *
 *   ./residual WEIGHTS.safetensors X.npy Y.npy
 *   ./residual WEIGHTS.safetensors - Y.npy      (x[i] = sin(i): a smoke test)
 *
 * Loads the weights by name (shapes and dtypes checked against the header's
 * table), reads x (float32 .npy with the model's input rank and size), runs
 * the forward pass once and writes y.  Exit status 0, 1 with a message, or
 * 2 for bad usage.
 *
 * Which model: nothing here names one.  Compile with
 *   -DBLOCKC_MODEL=tiny -DBLOCKC_MODEL_UC=TINY
 * (the model name as in `model NAME`, and the same in capitals, the prefix of
 * the header's macros) to build around tiny.{c,h}; the default is residual.
 * Only the header's contract is used: <MODEL>_IN_RANK, _IN_NUMEL, _OUT_RANK,
 * _OUT_NUMEL, _WORKSPACE_BYTES, _WORKSPACE_ALIGN, _NPARAMS, _OK,
 * <model>_params, <model>_slots and <model>_forward.  The header states the
 * rank and size of x but not its dims, so x is checked by rank and element
 * count; y gets x's shape with the last dim rescaled to _OUT_NUMEL (a flat
 * vector when the ranks differ). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "blockc_rt.h"

#ifndef BLOCKC_MODEL
#define BLOCKC_MODEL residual
#define BLOCKC_MODEL_UC RESIDUAL
#endif
#define BV_CAT_(a, b) a##b
#define BV_CAT(a, b) BV_CAT_(a, b)
#define BV_STR_(x) #x
#define BV_STR(x) BV_STR_(x)
#define M(name) BV_CAT(BLOCKC_MODEL, name)     /* M(_forward): residual_forward */
#define U(name) BV_CAT(BLOCKC_MODEL_UC, name)  /* U(_IN_NUMEL): RESIDUAL_IN_NUMEL */
#include BV_STR(BLOCKC_MODEL.h)

/* Reads x (or makes the smoke-test input); fills its shape.  0 on success. */
static int read_input(const char *path, float **x, long *shape, int *rank, char *err, size_t n) {
  long i, numel = 1;
  if (path[0] == '-' && !path[1]) {
    *x = (float *)malloc(U(_IN_NUMEL) * sizeof(float)); /* bcrt_free is free */
    if (!*x) return snprintf(err, n, "out of memory"), 1;
    for (i = 0; i < U(_IN_NUMEL); i++) (*x)[i] = (float)sin((double)i);
    *rank = 1;
    shape[0] = U(_IN_NUMEL);
    return 0;
  }
  if (bcrt_npy_read(path, x, shape, rank, err, n) != BCRT_OK) return 1;
  for (i = 0; i < *rank; i++) numel *= shape[i];
  if (*rank != U(_IN_RANK) || numel != U(_IN_NUMEL))
    return snprintf(err, n, "%s: the model takes a rank-%d array of %ld floats, got rank %d with %ld",
                    path, U(_IN_RANK), (long)U(_IN_NUMEL), *rank, numel), 1;
  return 0;
}

/* y's shape: x's, last dim rescaled; flat when that does not work. */
static int output_shape(const long *xs, int xr, long *ys) {
  int i;
  long rest = 1;
  for (i = 0; i + 1 < xr; i++) rest *= ys[i] = xs[i];
  if (xr == U(_OUT_RANK) && rest > 0 && U(_OUT_NUMEL) % rest == 0) {
    ys[xr - 1] = U(_OUT_NUMEL) / rest;
    return xr;
  }
  ys[0] = U(_OUT_NUMEL);
  return 1;
}

int main(int argc, char **argv) {
  char err[4096];
  M(_slots) w; /* the weights struct, fillable by index */
  void *storage = NULL, *ws = NULL;
  float *x = NULL, *y = NULL;
  long xs[BCRT_NPY_MAX_RANK], ys[BCRT_NPY_MAX_RANK];
  int xr = 0, yr, st = 1;
  if (argc != 4) {
    fprintf(stderr, "usage: %s WEIGHTS.safetensors X.npy|- Y.npy\n", argv[0]);
    return 2;
  }
  if (bcrt_st_load(argv[1], M(_params), U(_NPARAMS), w.slots, &storage, err, sizeof err) != BCRT_OK ||
      read_input(argv[2], &x, xs, &xr, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    goto done;
  }
  y = (float *)malloc(U(_OUT_NUMEL) * sizeof(float));
  ws = bcrt_aligned_alloc(U(_WORKSPACE_ALIGN), U(_WORKSPACE_BYTES));
  if (!y || !ws) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  st = M(_forward)(&w.w, x, y, ws);
  if (st != U(_OK)) {
    fprintf(stderr, "forward failed (status %d)\n", st);
    st = 1;
    goto done;
  }
  yr = output_shape(xs, xr, ys);
  if (bcrt_npy_write(argv[3], y, ys, yr, err, sizeof err) != BCRT_OK) {
    fprintf(stderr, "%s\n", err);
    st = 1;
    goto done;
  }
  printf("wrote %s: first %.6f %.6f %.6f\n", argv[3], y[0], U(_OUT_NUMEL) > 1 ? y[1] : 0.0,
         U(_OUT_NUMEL) > 2 ? y[2] : 0.0);
done:
  bcrt_aligned_free(ws);
  free(y);
  bcrt_free(x);
  bcrt_st_free(storage);
  return st;
}
