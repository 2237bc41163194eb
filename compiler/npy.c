// npy.c — blockc's layer over the runtime's .npy reader, and the writer.
//
// The format: the magic "\x93NUMPY", a major and minor version byte, the
// header length (u16 for version 1.0, u32 for 2.0 and 3.0), then a header
// that is a Python dict literal such as
//
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 128, 512), }
//
// padded with spaces and ending in '\n', then the raw array bytes.
//
// The bytes are parsed in one place: runtime/blockc_rt.c
// (bcrt_npy_open_source, bcrt_npy_read_source), the reader vendored
// programs ship.  blockc passes its limits (rank 1..BC_MAX_RANK, dims up to
// BC_MAX_DIM, BC_MAX_ELEMS elements) and compares the header's shape with
// the one the graph expects (bcN_read_expect) between the two steps, so
// before any data is read or allocated.  Only little-endian float32 in C
// order is accepted (and, for lengths inputs, '<i4' or '<i8' narrowed to
// int32 with a range check: bcN_read_i32).  Arrays arrive from Python
// scripts, where the dtype is easy to get wrong (float64 is numpy's
// default), so every rejection says what the file holds and how to fix it
// on the numpy side.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "blockc_rt.h"

#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static bool host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

static void swap32(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &p[i], 4);
    u = (u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24);
    memcpy(&p[i], &u, 4);
  }
}

// "(2, 3)", "(5,)": a shape as Python prints it (for the writer).
static const char *tuple_str(const int64_t *d, int rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
  return buf;
}

// ---------------------------------------------------------------------------
// Reading, through the runtime
// ---------------------------------------------------------------------------

// What a reader is asked for: the element type, and optionally the shape
// the caller expects, compared with the header before any data is read.
typedef struct {
  int type;                 // BCRT_NPY_F32 or BCRT_NPY_INT
  const bc_shape *expect;   // NULL: any shape
  const char *who;          // for the mismatch message: "g.blk"
} npy_req;

// Run-time dims (sym) accept 1..their bound; fixed dims must be equal.
static bool expect_matches(const bc_shape *got, const bc_shape *e) {
  if (got->rank != e->rank) return false;
  for (int i = 0; i < e->rank; i++)
    if (e->sym[i] ? (got->d[i] < 1 || got->d[i] > e->d[i]) : got->d[i] != e->d[i]) return false;
  return true;
}

static int check_expect(bc_ctx *ctx, const char *path, const bc_shape *got, const npy_req *rq) {
  if (!rq->expect || expect_matches(got, rq->expect)) return BC_OK;
  char a[96], b[96];
  return bc_error(ctx, BC_EINPUT, "%s: error: input has shape %s but %s expects %s%s", path,
                  bc_shape_str(got, a, sizeof a), rq->who ? rq->who : "the graph",
                  bc_shape_str(rq->expect, b, sizeof b),
                  " (set the graph's dims with -D NAME=VALUE)");
}

static int read_npy(bc_ctx *ctx, const char *path, const npy_req *rq, bc_shape *shape,
                    void **data) {
  static const bcrt_npy_limits lim = {BC_MAX_RANK, (long)BC_MAX_DIM, BC_MAX_ELEMS};
  *data = NULL;
  memset(shape, 0, sizeof *shape);
  bcrt_source src;
  FILE *fp = bcS_open_source(ctx, path, &src);
  if (!fp) return BC_EIO;
  bcrt_npy_info info;
  bcrt_error e;
  int rc = bcrt_npy_open_source(&src, rq->type, &lim, &info, &e) ? bcS_rt_error(ctx, path, &e) : BC_OK;
  bc_shape got = {.rank = info.rank};
  for (int i = 0; rc == BC_OK && i < info.rank; i++) got.d[i] = info.shape[i];
  if (rc == BC_OK) rc = check_expect(ctx, path, &got, rq);
  if (rc == BC_OK && bcrt_npy_read_source(&src, &info, data, &e)) rc = bcS_rt_error(ctx, path, &e);
  fclose(fp);
  if (rc == BC_OK) *shape = got;
  return rc;
}

int bcN_read(bc_ctx *ctx, const char *path, bc_shape *shape, float **data) {
  return bcN_read_expect(ctx, path, NULL, NULL, shape, data);
}

int bcN_read_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                    bc_shape *shape, float **data) {
  npy_req rq = {.type = BCRT_NPY_F32, .expect = expect, .who = who};
  void *p;
  int rc = read_npy(ctx, path, &rq, shape, &p);
  *data = p;
  return rc;
}

int bcN_read_i32(bc_ctx *ctx, const char *path, bc_shape *shape, int32_t **data) {
  return bcN_read_i32_expect(ctx, path, NULL, NULL, shape, data);
}

int bcN_read_i32_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                        bc_shape *shape, int32_t **data) {
  npy_req rq = {.type = BCRT_NPY_INT, .expect = expect, .who = who};
  void *p;
  int rc = read_npy(ctx, path, &rq, shape, &p);
  *data = p;
  return rc;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

// Version 1.0, '<f4', C order, with the header padded so the data starts at
// a multiple of 64 bytes, exactly as numpy.save lays it out.
int bcN_write(bc_ctx *ctx, const char *path, const bc_shape *shape, const float *data) {
  bool ok = shape->rank >= 0 && shape->rank <= BC_MAX_RANK;  // rank 0: a scalar (a loss), shape ()
  for (int i = 0; ok && i < shape->rank; i++) ok = shape->d[i] >= 0 && shape->d[i] <= BC_MAX_DIM;
  if (!ok || bc_shape_numel(shape) > BC_MAX_ELEMS)
    return bc_error(ctx, BC_EINPUT, "%s: error: cannot write an array of rank %d with this shape",
                    path, shape->rank);
  char s[256], head[384];
  tuple_str(shape->d, shape->rank, s, sizeof s);
  int n = snprintf(head + 10, sizeof head - 10,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", s);
  size_t total = (10 + (size_t)n + 1 + 63) & ~(size_t)63;  // + '\n', rounded up to 64
  memcpy(head, npy_magic, 6);
  head[6] = 1, head[7] = 0;
  head[8] = (char)((total - 10) & 0xFF), head[9] = (char)((total - 10) >> 8);
  memset(head + 10 + n, ' ', total - 10 - (size_t)n - 1);
  head[total - 1] = '\n';
  size_t numel = (size_t)bc_shape_numel(shape);
  float *copy = NULL;
  if (!host_is_le() && numel) {
    if (!(copy = malloc(numel * 4))) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
    memcpy(copy, data, numel * 4);
    swap32(copy, numel);
    data = copy;
  }
  const void *parts[2] = {head, data};
  size_t lens[2] = {total, numel * 4};
  int rc = bc_write_file_atomic(ctx, path, 2, parts, lens);
  free(copy);
  return rc;
}
