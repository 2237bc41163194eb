/* main.c -- a complete program around any blockc AOT model, as a user would
 * vendor it: the `blockc emit` pair <model>.{c,h} plus runtime/blockc_rt.{c,h},
 * nothing else (OpenBLAS, or none with -DBLOCKC_NO_BLAS).
 *
 *   ./residual WEIGHTS.safetensors [NAME=]FILE.npy ...
 *   ./residual w.safetensors x.npy y.npy               (bare files, in order)
 *   ./dec w.safetensors x=x.npy mem=m.npy len=len.npy y=y.npy c=c.npy
 *
 * NAME=FILE binds any input, lengths input or output by its name in the
 * graph (a '/' before the '=' makes it a bare FILE: ./a=b.npy; an output
 * named like an input, `output x`, is the second x=FILE); bare FILEs
 * go to the float inputs not yet bound, in order, then to the outputs not
 * yet bound.  FILE `-` is a synthetic float input x[i] = sin(i) (a smoke
 * test), full lengths, or an output not written.  Lengths inputs not given
 * are NULL (every row full length); outputs not given are computed but not
 * written.
 * Run-time dims (`dim T <= 128`) take their values from the input arrays'
 * shapes: fixed axes must match, a run-time axis must be 1..its bound and
 * the same in every input that has it.  Outputs are written at the actual
 * sizes.  Exit status 0, 1 with a message (a bad file, weights that do not
 * fit, a status from the model), or 2 for bad usage.
 *
 * Which model: nothing here names one.  Compile with
 *   -DBLOCKC_MODEL=tiny -DBLOCKC_MODEL_UC=TINY
 * (the model name as in `model NAME`, and the same in capitals, the prefix of
 * the header's macros) to build around tiny.{c,h}; the default is residual.
 * Only the header's contract is used: <MODEL>_NINPUTS, _NOUTPUTS, _NRT,
 * _NPARAMS, _WORKSPACE_BYTES, _WORKSPACE_ALIGN, _PACKED_BYTES, _PACKED_ALIGN,
 * _OK, _EINVAL, _EDIM, _ELEN, <model>_params, <model>_slots, <model>_io_info,
 * <model>_rt_info, <model>_pack and <model>_run_abi, which every model has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

#ifndef BLOCKC_MODEL
#define BLOCKC_MODEL residual
#define BLOCKC_MODEL_UC RESIDUAL
#endif
#define BV_CAT_(a, b) a##b
#define BV_CAT(a, b) BV_CAT_(a, b)
#define BV_STR_(x) #x
#define BV_STR(x) BV_STR_(x)
#define M(name) BV_CAT(BLOCKC_MODEL, name)     /* M(_run_abi): residual_run_abi */
#define U(name) BV_CAT(BLOCKC_MODEL_UC, name)  /* U(_NRT): RESIDUAL_NRT */
#include BV_STR(BLOCKC_MODEL.h)

#define NIO (U(_NINPUTS) + U(_NOUTPUTS))
#define NRT (U(_NRT) ? U(_NRT) : 1)

/* The model reads lengths as int32_t; bcrt_npy_read_i32 gives int. */
typedef char bv_int_is_int32[sizeof(int) == sizeof(int32_t) ? 1 : -1];

/* One entry of the io array: the file bound to it and its data. */
typedef struct {
  const char *file; /* NULL: not given */
  void *data;       /* float * (inputs, outputs) or int * (lengths) */
  long shape[BCRT_NPY_MAX_RANK];
  int rank;
} bv_arg;

/* Everything main owns, released once at the end. */
typedef struct {
  bv_arg arg[NIO];
  long rt[NRT];
  int rt_from[NRT]; /* the input that set rt[k], -1: none yet */
  M(_slots) w;      /* the weights struct, fillable by index */
  void *storage, *ws;
  float *packed;    /* M(_pack)'s copy of the weights for small-M products */
  char err[4096];
} bv_run;

/* "[1, T<=128, 512]" for io entry i at its bounds. */
static const char *bounds_str(int i, char *buf, size_t n) {
  const bcrt_io_info *io = &M(_io_info)[i];
  size_t k = (size_t)snprintf(buf, n, "[");
  int a;
  for (a = 0; a < io->rank && k < n; a++) {
    if (io->rt[a] >= 0)
      k += (size_t)snprintf(buf + k, n - k, "%s%s<=%ld", a ? ", " : "", M(_rt_info)[io->rt[a]].name,
                            io->dims[a]);
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%ld", a ? ", " : "", io->dims[a]);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static const char *kind_str(int kind) {
  return kind == BCRT_IO_LENGTHS ? "int32 lengths (optional)"
         : kind == BCRT_IO_TOKENS ? "int32 token ids (not read by this program)"
         : kind == BCRT_IO_OUTPUT ? "output float32" : "input float32";
}

static int usage(const char *prog, FILE *to, int status) {
  char b[160];
  int i;
  fprintf(to, "usage: %s WEIGHTS.safetensors [NAME=]FILE.npy ...\n"
              "NAME=FILE binds by name; bare FILEs go to the float inputs, then to the outputs,\n"
              "in order.  `-`: a synthetic input x[i] = sin(i), full lengths, an output not\n"
              "written.  Model " BV_STR(BLOCKC_MODEL) ":\n",
          prog);
  for (i = 0; i < NIO; i++)
    fprintf(to, "  %-10s %s %s\n", M(_io_info)[i].name, kind_str(M(_io_info)[i].kind),
            bounds_str(i, b, sizeof b));
  for (i = 0; i < U(_NRT); i++)
    fprintf(to, "  run-time dim %s: 1..%ld, from the inputs' shapes\n", M(_rt_info)[i].name,
            M(_rt_info)[i].bound);
  return status;
}

/* The first io entry named name (len bytes) not bound yet, else the first
 * of that name (then it is given twice), or -1.  An output may have its
 * input's name (`output x` of an input x): x=A.npy binds the input, a
 * second x=B.npy the output. */
static int find_io(const bv_run *r, const char *name, size_t len) {
  int i, first = -1;
  for (i = 0; i < NIO; i++)
    if (strlen(M(_io_info)[i].name) == len && !memcmp(M(_io_info)[i].name, name, len)) {
      if (!r->arg[i].file) return i;
      if (first < 0) first = i;
    }
  return first;
}

/* The length of NAME in a NAME=FILE argument, or -1 for a bare FILE (no
 * '=', or a '/' before it: write ./a=b.npy for a file named a=b.npy). */
static long name_len(const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || memchr(arg, '/', (size_t)(eq - arg))) return -1;
  return (long)(eq - arg);
}

/* Binds argv[2..] to io entries: NAME=FILE first, then the bare FILEs. */
static int bind_args(bv_run *r, int argc, char **argv) {
  int a, next = 0;
  for (a = 2; a < argc; a++) {
    long n = name_len(argv[a]);
    int i = n < 0 ? -1 : find_io(r, argv[a], (size_t)n);
    if (n < 0) continue;
    if (i < 0)
      return fprintf(stderr, "%s: the model has no input or output named '%.*s'\n", argv[a], (int)n,
                     argv[a]), 2;
    if (r->arg[i].file) return fprintf(stderr, "%s is given twice\n", M(_io_info)[i].name), 2;
    r->arg[i].file = argv[a] + n + 1;
  }
  for (a = 2; a < argc; a++) {
    if (name_len(argv[a]) >= 0) continue;
    while (next < NIO && (r->arg[next].file || M(_io_info)[next].kind == BCRT_IO_LENGTHS)) next++;
    if (next == NIO)
      return fprintf(stderr, "%s: one file too many (every float input and output is bound)\n", argv[a]), 2;
    r->arg[next].file = argv[a];
  }
  for (a = 0; a < U(_NINPUTS); a++)
    if (M(_io_info)[a].kind == BCRT_IO_TOKENS)
      return fprintf(stderr, "input '%s' holds token ids: this program reads float inputs only "
                     "(run token models with `blockc run` or the generator example)\n",
                     M(_io_info)[a].name), 1;
  for (a = 0; a < U(_NINPUTS); a++)
    if (M(_io_info)[a].kind == BCRT_IO_INPUT && !r->arg[a].file)
      return fprintf(stderr, "no file for input '%s' (give %s=FILE.npy)\n", M(_io_info)[a].name,
                     M(_io_info)[a].name), 2;
  return 0;
}

/* Checks the shape read for input i against the model (fixed axes equal,
 * run-time axes 1..bound and consistent) and sets the run-time dims. */
static int check_shape(bv_run *r, int i) {
  const bcrt_io_info *io = &M(_io_info)[i];
  const bv_arg *g = &r->arg[i];
  char b[160];
  int a;
  if (g->rank != io->rank)
    return fprintf(stderr, "%s: input '%s' must have rank %d %s, not %d\n", g->file, io->name,
                   io->rank, bounds_str(i, b, sizeof b), g->rank), 1;
  for (a = 0; a < io->rank; a++) {
    int k = io->rt[a];
    long v = g->shape[a];
    if (k < 0 && v != io->dims[a])
      return fprintf(stderr, "%s: input '%s' %s: axis %d is %ld, the model needs %ld\n", g->file,
                     io->name, bounds_str(i, b, sizeof b), a, v, io->dims[a]), 1;
    if (k < 0) continue;
    if (v < 1 || v > io->dims[a])
      return fprintf(stderr, "%s: input '%s' %s: axis %d (%s) is %ld, outside 1..%ld\n", g->file,
                     io->name, bounds_str(i, b, sizeof b), a, M(_rt_info)[k].name, v, io->dims[a]), 1;
    if (r->rt_from[k] >= 0 && r->rt[k] != v)
      return fprintf(stderr, "%s: input '%s' has %s = %ld on axis %d, but input '%s' has %s = %ld\n",
                     g->file, io->name, M(_rt_info)[k].name, v, a, M(_io_info)[r->rt_from[k]].name,
                     M(_rt_info)[k].name, r->rt[k]), 1;
    r->rt[k] = v;
    r->rt_from[k] = i;
  }
  return 0;
}

/* Reads every given input file (not `-`) and checks it. */
static int read_inputs(bv_run *r) {
  int i;
  for (i = 0; i < U(_NINPUTS); i++) {
    bv_arg *g = &r->arg[i];
    if (!g->file || !strcmp(g->file, "-")) continue;
    int rc;
    if (M(_io_info)[i].kind == BCRT_IO_LENGTHS) {
      int *len = NULL;
      g->rank = 1;
      rc = bcrt_npy_read_i32(g->file, &len, &g->shape[0], r->err, sizeof r->err);
      g->data = len;
    } else {
      float *x = NULL;
      rc = bcrt_npy_read(g->file, &x, g->shape, &g->rank, r->err, sizeof r->err);
      g->data = x;
    }
    if (rc != BCRT_OK) return fprintf(stderr, "%s\n", r->err), 1;
    if (check_shape(r, i)) return 1;
  }
  return 0;
}

/* Entry i's shape at the actual run-time dims (a dim no input set: its
 * bound); returns the element count. */
static long actual_shape(const bv_run *r, int i, long *shape) {
  const bcrt_io_info *io = &M(_io_info)[i];
  long numel = 1;
  int a;
  for (a = 0; a < io->rank; a++) {
    int k = io->rt[a];
    shape[a] = k >= 0 && r->rt_from[k] >= 0 ? r->rt[k] : io->dims[a];
    numel *= shape[a];
  }
  return numel;
}

/* Synthetic `-` inputs and the output buffers, at the actual sizes. */
static int allocate(bv_run *r) {
  int i, k;
  for (k = 0; k < U(_NRT); k++)
    if (r->rt_from[k] < 0) r->rt[k] = M(_rt_info)[k].bound;
  for (i = 0; i < NIO; i++) {
    bv_arg *g = &r->arg[i];
    long j, numel;
    if (g->data || M(_io_info)[i].kind == BCRT_IO_LENGTHS) continue;
    g->rank = M(_io_info)[i].rank;
    numel = actual_shape(r, i, g->shape);
    g->data = malloc((size_t)(numel ? numel : 1) * sizeof(float)); /* bcrt_free is free */
    if (!g->data) return fprintf(stderr, "out of memory\n"), 1;
    if (i < U(_NINPUTS))
      for (j = 0; j < numel; j++) ((float *)g->data)[j] = (float)sin((double)j);
  }
  return 0;
}

static int run_model(bv_run *r) {
  void *io[NIO];
  int i, st;
  for (i = 0; i < NIO; i++) io[i] = r->arg[i].data;
  r->ws = bcrt_aligned_alloc(U(_WORKSPACE_ALIGN), U(_WORKSPACE_BYTES));
  r->packed = (float *)bcrt_aligned_alloc(U(_PACKED_ALIGN), U(_PACKED_BYTES));
  if (!r->ws || !r->packed) return fprintf(stderr, "out of memory\n"), 1;
  M(_pack)(&r->w.w, r->packed); /* once per set of weights */
  r->w.w.packed = r->packed;
  st = M(_run_abi)(&r->w.w, io, U(_NRT) ? r->rt : NULL, r->ws);
  if (st == U(_OK)) return 0;
  fprintf(stderr, "the model refused the call (status %d): %s\n", st,
          st == U(_ELEN)   ? "a length is outside 1..its axis"
          : st == U(_EDIM) ? "a run-time dim is outside 1..its bound"
          : st == U(_EINVAL) ? "a NULL pointer or weight, or a misaligned workspace"
                             : "unknown status");
  return 1;
}

/* Writes each output given a FILE (not `-`) and prints a summary line. */
static int write_outputs(bv_run *r) {
  int i;
  for (i = U(_NINPUTS); i < NIO; i++) {
    const bv_arg *g = &r->arg[i];
    const float *y = (const float *)g->data;
    int write = g->file && strcmp(g->file, "-") != 0, a;
    long numel = 1;
    for (a = 0; a < g->rank; a++) numel *= g->shape[a];
    if (write && bcrt_npy_write(g->file, y, g->shape, g->rank, r->err, sizeof r->err) != BCRT_OK)
      return fprintf(stderr, "%s\n", r->err), 1;
    printf("%s [", M(_io_info)[i].name);
    for (a = 0; a < g->rank; a++) printf("%s%ld", a ? ", " : "", g->shape[a]);
    printf("]%s%s: first %.6f %.6f %.6f\n", write ? " -> " : " (not written)", write ? g->file : "",
           numel > 0 ? y[0] : 0.0, numel > 1 ? y[1] : 0.0, numel > 2 ? y[2] : 0.0);
  }
  return 0;
}

int main(int argc, char **argv) {
  bv_run *r;
  int i, st;
  if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
    return usage(argv[0], stdout, 0);
  if (argc < 3) return usage(argv[0], stderr, 2);
  r = (bv_run *)calloc(1, sizeof *r);
  if (!r) return fprintf(stderr, "out of memory\n"), 1;
  for (i = 0; i < NRT; i++) r->rt_from[i] = -1;
  st = bind_args(r, argc, argv);
  if (st == 2) usage(argv[0], stderr, 2);
  if (!st && bcrt_st_load(argv[1], M(_params), U(_NPARAMS), r->w.slots, &r->storage, r->err,
                          sizeof r->err) != BCRT_OK) {
    fprintf(stderr, "%s\n", r->err);
    st = 1;
  }
  if (!st) st = read_inputs(r) || allocate(r) || run_model(r) || write_outputs(r);
  for (i = 0; i < NIO; i++) bcrt_free(r->arg[i].data);
  bcrt_aligned_free(r->ws);
  bcrt_aligned_free(r->packed);
  bcrt_st_free(r->storage);
  free(r);
  return st;
}
