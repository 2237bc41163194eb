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
 * Only the header's contract is used: <MODEL>_IN_RANK, _IN_SHAPE, _IN_RT,
 * _OUT_RANK, _OUT_SHAPE, _OUT_RT, _OUT_NUMEL, _NINPUTS, _NOUTPUTS, _NRT,
 * _WORKSPACE_BYTES, _WORKSPACE_ALIGN, _NPARAMS, _OK, <model>_params,
 * <model>_slots and <model>_run_abi.  x is the model's first input; its
 * shape gives the run-time dims (an axis of x that is `dim T <= N` may be
 * 1..N, a fixed one must match).  Other inputs are passed as NULL, which
 * suits lengths inputs (NULL = full lengths); a model needing a second float
 * input (a decoder's memory) is refused with a message, as is one with
 * several outputs. */
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

static const long in_shape[U(_IN_RANK)] = U(_IN_SHAPE), out_shape[U(_OUT_RANK)] = U(_OUT_SHAPE);
static const int in_rt[U(_IN_RANK)] = U(_IN_RT), out_rt[U(_OUT_RANK)] = U(_OUT_RT);

/* Reads x (or makes the smoke-test input at the bounds) and takes the
 * run-time dims from its shape.  0 on success. */
static int read_input(const char *path, float **x, long *rt, char *err, size_t n) {
  long shape[BCRT_NPY_MAX_RANK], numel = 1;
  int i, rank = U(_IN_RANK);
  if (path[0] == '-' && !path[1]) {
    for (i = 0; i < rank; i++) numel *= shape[i] = in_shape[i];
    *x = (float *)malloc((size_t)numel * sizeof(float)); /* bcrt_free is free */
    if (!*x) return snprintf(err, n, "out of memory"), 1;
    for (i = 0; i < numel; i++) (*x)[i] = (float)sin((double)i);
  } else if (bcrt_npy_read(path, x, shape, &rank, err, n) != BCRT_OK) {
    return 1;
  }
  if (rank != U(_IN_RANK))
    return snprintf(err, n, "%s: the model takes a rank-%d array, got rank %d", path, U(_IN_RANK), rank), 1;
  for (i = 0; i < rank; i++) {
    if (in_rt[i] < 0 && shape[i] != in_shape[i])
      return snprintf(err, n, "%s: axis %d is %ld; the model was built for %ld", path, i, shape[i],
                      in_shape[i]), 1;
    if (in_rt[i] >= 0 && (shape[i] < 1 || shape[i] > in_shape[i]))
      return snprintf(err, n, "%s: axis %d is %ld; the model takes 1..%ld", path, i, shape[i],
                      in_shape[i]), 1;
    if (in_rt[i] >= 0) rt[in_rt[i]] = shape[i];
  }
  return 0;
}

/* y's shape: the output's, with run-time dims at the values x gave. */
static int output_shape(const long *rt, long *ys) {
  int i;
  for (i = 0; i < U(_OUT_RANK); i++) ys[i] = out_rt[i] < 0 ? out_shape[i] : rt[out_rt[i]];
  return U(_OUT_RANK);
}

int main(int argc, char **argv) {
  char err[4096];
  M(_slots) w; /* the weights struct, fillable by index */
  void *storage = NULL, *ws = NULL, *io[U(_NINPUTS) + U(_NOUTPUTS)] = {0};
  float *x = NULL, *y = NULL;
  long rt[U(_NRT) + 1] = {0}, ys[BCRT_NPY_MAX_RANK];
  int yr, st = 1;
  if (argc != 4) {
    fprintf(stderr, "usage: %s WEIGHTS.safetensors X.npy|- Y.npy\n", argv[0]);
    return 2;
  }
  if (U(_NOUTPUTS) != 1) {
    fprintf(stderr, "this example writes one output; the model has %d\n", U(_NOUTPUTS));
    return 1;
  }
  if (bcrt_st_load(argv[1], M(_params), U(_NPARAMS), w.slots, &storage, err, sizeof err) != BCRT_OK ||
      read_input(argv[2], &x, rt, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    goto done;
  }
  y = (float *)malloc(U(_OUT_NUMEL) * sizeof(float));
  ws = bcrt_aligned_alloc(U(_WORKSPACE_ALIGN), U(_WORKSPACE_BYTES));
  if (!y || !ws) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  io[0] = x;                /* inputs 1.. stay NULL: full lengths */
  io[U(_NINPUTS)] = y;
  st = M(_run_abi)(&w.w, io, rt, ws);
  if (st != U(_OK)) {
    fprintf(stderr, "the model returned status %d%s\n", st,
            st == 1 && U(_NINPUTS) > 1 ? " (it needs a float input this example does not read)" : "");
    st = 1;
    goto done;
  }
  yr = output_shape(rt, ys);
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
