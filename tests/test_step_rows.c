// test_step_rows.c — the step entry with a position per batch row (issue
// 26): `<model>_step_rows(w, io, rt, pos[B], cache, ...)` and
// blockc_step_rows, batched decoding of sequences of different lengths.
//
// The oracle is the same graph compiled with B = 1 (the same seeded
// weights: no parameter depends on B) and stepped one sequence at a time
// through the shared-pos entry `<model>_step`: row b of every batched call
// must equal that row's own single-row call at pos[b].  The schedule puts
// the rows at different positions (0 included): a prefill of all rows, then
// one row restarting at 0 while another rewinds and a third goes on, then
// steps of 1 and 2 positions, B = 3 and T = 9 (odd sizes).
//
// Tolerance, not bit equality: the batched call runs every projection as
// one GEMM of B*t rows where the oracle runs t rows; the small-M packed
// kernel and OpenBLAS may pick other blockings (and vector tails) for
// other M, so float32 sums can be taken in another order.  The attention
// of a row (its scores against its own cache rows) is the same code.  The
// check allows 2e-5 * (1 + max|y|), as test_step.c does; the measured
// difference is printed (at these sizes every product takes the small-M
// packed path, which computes each row alone: 0, every value equal).
//
// Hostile positions (a row past the cache, a row skipping ahead of what its
// cache row holds, a negative row, a row past a learned Positions table)
// give ECACHE / ESEQ / EINVAL / EPOS with nothing written (the cache and
// outputs are compared before and after), and through the API
// BLOCKC_EINPUT / BLOCKC_EUSAGE with a message naming the row.
//
// Long tier (make check): the AOT module's <model>_step_rows_abi (cc -O3)
// through the same schedule.
//
// Paths are relative to the project root (make test runs from there).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "blockc.h"
#include "cli.h"

enum { R = 3, TMAX = 9, V = 50 };

typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_compiled c;
  void *ws, *cache;
  int seq_rt;  // index in rt of T
  bc_aot_step_rows_fn aot_rows;  // the AOT module's <model>_step_rows_abi, used when set
} model;

static model *model_new(const char *path, const bc_define *defs, int ndefs) {
  model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->ctx = tu_ctx(&m->errs);
  m->g = bcP_parse_file(m->ctx, path, defs, ndefs);
  if (!m->g) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcW_init_random(m->ctx, m->g, 11, &m->w), BC_OK);
  if (bcD_compile(m->ctx, m->g, NULL, &m->c)) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcD_pack(m->ctx, &m->c, &m->w), BC_OK);
  m->ws = cli_workspace(m->ctx, m->g);
  assert_non_null(m->ws);
  m->seq_rt = -1;
  for (int d = 0; d < m->g->ndims; d++)
    if (!strcmp(m->g->dims[d].name, "T")) m->seq_rt = m->g->dims[d].rt;
  assert_true(m->seq_rt >= 0);
  if (!m->c.step || !m->c.step_rows) fail_msg("%s: no step entry: %s", path, m->errs.buf);
  m->cache = aligned_alloc(64, (size_t)m->c.cache_bytes);
  assert_non_null(m->cache);
  return m;
}

static void model_free(model *m) {
  free(m->cache);
  free(m->ws);
  bcD_free(&m->c);
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
  free(m);
}

// The token id of row r's sequence s (a restart begins another) at position p.
static int32_t token(int r, int s, long p) { return (int32_t)((r * 17 + s * 29 + p * 7 + 3) % V); }

// One batched call: row b's t new positions from pos[b] (ids of its
// sequence seq[b]) through step_rows; logits [R, t, V] into y.
static int call_rows(model *m, const long *pos, const int *seq, long t, float *y) {
  int32_t ids[R * TMAX];
  for (int b = 0; b < R; b++)
    for (long i = 0; i < t; i++) ids[b * t + i] = token(b, seq[b], pos[b] + i);
  void *io[3] = {ids, NULL, y};
  long rt[1] = {t};
  return m->c.step_rows((const float *const *)m->w.p, io, rt, pos, m->cache,
                        (size_t)m->c.cache_bytes, m->ws);
}

// Row r alone on the B = 1 model with its own cache: logits [1, t, V] into y.
static int call_one(model *m1, void *cache, int r, long pos, int seq, long t, float *y) {
  int32_t ids[TMAX];
  for (long i = 0; i < t; i++) ids[i] = token(r, seq, pos + i);
  void *io[3] = {ids, NULL, y};
  long rt[1] = {t};
  return m1->c.step((const float *const *)m1->w.p, io, rt, pos, cache, (size_t)m1->c.cache_bytes,
                    m1->ws);
}

// The weights of the B = R model and the B = 1 one are the same (seeded,
// no parameter depends on B).
static void expect_same_weights(const model *a, const model *b) {
  assert_int_equal(a->w.n, b->w.n);
  for (int i = 0; i < a->w.n; i++) {
    int64_t n = bc_shape_numel(&a->g->params[i].shape);
    assert_int_equal(n, bc_shape_numel(&b->g->params[i].shape));
    assert_memory_equal(a->w.p[i], b->w.p[i], (size_t)n * sizeof(float));
  }
}

// The schedule: (pos of each row, the sequence each row is in, t).
typedef struct {
  long pos[R];
  int seq[R];
  long t;
} call;

static const call schedule[] = {
    {{0, 0, 0}, {0, 0, 0}, 3},  // prefill: every row at 0..2
    {{3, 0, 2}, {0, 1, 0}, 1},  // row 1 restarts a new sequence, row 2 rewinds to 2
    {{4, 1, 3}, {0, 1, 0}, 2},  // rows at 4, 1 and 3
    {{6, 3, 5}, {0, 1, 0}, 1},
    {{7, 4, 0}, {0, 1, 2}, 2},  // row 2 restarts; row 0 reaches the bound (7 + 2 = 9)
    {{5, 6, 2}, {0, 1, 2}, 1},  // row 0 rewinds
};

// Row b of every batched call equals that row's own single-row stepping.
static void check_rows(const char *path, const bc_define *defs, int ndefs) {
  bc_define d1[16], dr[16];
  assert_true(ndefs + 1 <= 16);
  memcpy(d1, defs, (size_t)ndefs * sizeof *defs);
  memcpy(dr, defs, (size_t)ndefs * sizeof *defs);
  d1[ndefs] = (bc_define){"B", 1};
  dr[ndefs] = (bc_define){"B", R};
  model *m = model_new(path, dr, ndefs + 1), *m1 = model_new(path, d1, ndefs + 1);
  expect_same_weights(m, m1);
  void *c1[R];
  for (int r = 0; r < R; r++) {
    c1[r] = aligned_alloc(64, (size_t)m1->c.cache_bytes);
    assert_non_null(c1[r]);
  }
  float y[R * TMAX * V], y1[TMAX * V];
  double worst = 0;
  long exact = 0, total = 0;
  for (size_t k = 0; k < sizeof schedule / sizeof schedule[0]; k++) {
    const call *c = &schedule[k];
    int rc = call_rows(m, c->pos, c->seq, c->t, y);
    if (rc) fail_msg("%s call %zu: step_rows returned %d", path, k, rc);
    for (int r = 0; r < R; r++) {
      rc = call_one(m1, c1[r], r, c->pos[r], c->seq[r], c->t, y1);
      if (rc) fail_msg("%s call %zu row %d: step returned %d", path, k, r, rc);
      const float *yr = y + (size_t)r * (size_t)(c->t * V);
      double mx = 0;
      for (long i = 0; i < c->t * V; i++) {
        mx = fmax(mx, fabs(y1[i]));
        exact += yr[i] == y1[i];
      }
      total += c->t * V;
      double d = tu_max_abs_diff(y1, yr, (size_t)(c->t * V));
      worst = fmax(worst, d / (1 + mx));
      if (!(d <= 2e-5 * (1 + mx)))
        fail_msg("%s call %zu row %d (pos %ld): differs by %g (max|y| %g)", path, k, r,
                 c->pos[r], d, mx);
    }
  }
  printf("  %s: B=%d rows vs single rows: max diff %.3g * (1 + max|y|), %ld of %ld equal\n",
         path, R, worst, exact, total);
  // The rows hold 6, 7 and 3 positions: the shared-pos entry on the same
  // cache goes on at 3 (every row holds >= 3), not at 5 (row 2 would skip).
  int32_t ids[R] = {1, 2, 3};
  void *io[3] = {ids, NULL, y};
  long rt[1] = {1};
  assert_int_equal(m->c.step((const float *const *)m->w.p, io, rt, 5, m->cache,
                             (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_ESEQ);
  assert_int_equal(m->c.step((const float *const *)m->w.p, io, rt, 3, m->cache,
                             (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_OK);
  for (int r = 0; r < R; r++) free(c1[r]);
  model_free(m1);
  model_free(m);
}

// --- any graph: float, tokens and memory inputs, a run-time batch -------------
enum { SLEN = 5 };

static float value(int r, int s, long p, long c) {
  return (float)((r * 131 + s * 71 + p * 37 + c * 13) % 97) / 48.5f - 1.0f;
}

// One call of m's step entry (per row when rows, else every row at pos[0])
// with nrows batch rows; batch row b is sequence seq[b] of row rowid[b]
// (its inputs are functions of those and the position).  y: the one
// output, [nrows, t, width].
static int gcall(model *m, bool rows, long nrows, const long *pos, const int *rowid,
                 const int *seq, long t, float *y, void *cache) {
  const bc_graph *g = m->g;
  void *io[16] = {0};
  long rt[8] = {0};
  assert_true(g->ninputs + g->noutputs <= 16 && g->nrt <= 8 && g->noutputs == 1);
  for (int d = 0; d < g->ndims; d++) {
    int k = g->dims[d].rt;
    if (k < 0) continue;
    const char *nm = g->dims[d].name;
    rt[k] = !strcmp(nm, "T") ? t : !strcmp(nm, "B") ? nrows : !strcmp(nm, "S") ? SLEN
                                                              : (long)g->dims[d].value;
  }
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (bcI_is_lengths(g, v)) continue;
    bc_shape sh = bcI_shape_at(g, &g->vals[v].shape, rt);
    int64_t n = bc_shape_numel(&sh);
    assert_int_equal(sh.d[0], nrows);
    bool stepped = g->vals[v].shape.sym[1] && g->dims[g->vals[v].shape.sym[1] - 1].rt == m->seq_rt;
    int64_t L = sh.d[1], W = sh.rank == 3 ? sh.d[2] : 1;
    if (bcI_is_tokens(g, v)) {
      int32_t *ids = malloc((size_t)n * sizeof *ids);
      assert_non_null(ids);
      for (long b = 0; b < nrows; b++)
        for (long j = 0; j < L; j++) ids[b * L + j] = token(rowid[b], seq[b], pos[b] + j);
      io[i] = ids;
      continue;
    }
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (long b = 0; b < nrows; b++)
      for (long j = 0; j < L; j++)
        for (long c = 0; c < W; c++)
          // a memory (not stepped) counts at a row's start only: past it,
          // other values, which a model must not read (its cache holds the
          // memory's projection)
          x[(b * L + j) * W + c] = stepped ? value(rowid[b], seq[b], pos[b] + j, c)
                                   : value(rowid[b], pos[b] ? seq[b] + 17 : seq[b], 1000 + j, c);
    io[i] = x;
  }
  io[g->ninputs] = y;
  const float *const *w = (const float *const *)m->w.p;
  size_t cb = (size_t)m->c.cache_bytes;
  int rc = rows && m->aot_rows ? m->aot_rows((const void *)w, io, g->nrt ? rt : NULL, pos, cache,
                                              cb, m->ws)
           : rows ? m->c.step_rows(w, io, g->nrt ? rt : NULL, pos, cache, cb, m->ws)
                : m->c.step(w, io, g->nrt ? rt : NULL, pos[0], cache, cb, m->ws);
  for (int i = 0; i < g->ninputs; i++) free(io[i]);
  return rc;
}

static int64_t out_width(const model *m) {
  const bc_shape *s = &m->g->vals[m->g->outputs[0]].shape;
  return s->d[s->rank - 1];
}

// The schedule through a batched model mb (nrows rows per call) against
// each row alone on m1 (one row per call, own caches).
static void check_rows_any(const char *what, model *mb, model *m1, long nrows) {
  int64_t W = out_width(mb);
  assert_int_equal(W, out_width(m1));
  void *c1[R];
  for (int r = 0; r < R; r++) assert_non_null(c1[r] = aligned_alloc(64, (size_t)m1->c.cache_bytes));
  float *y = malloc((size_t)(R * TMAX * W) * sizeof *y), *y1 = malloc((size_t)(TMAX * W) * sizeof *y1);
  assert_non_null(y);
  assert_non_null(y1);
  const int ids[R] = {0, 1, 2};
  double worst = 0;
  assert_true(nrows == R);
  for (size_t k = 0; k < sizeof schedule / sizeof schedule[0]; k++) {
    const call *c = &schedule[k];
    int rc = gcall(mb, true, nrows, c->pos, ids, c->seq, c->t, y, mb->cache);
    if (rc) fail_msg("%s call %zu: step_rows returned %d", what, k, rc);
    for (int r = 0; r < R; r++) {
      rc = gcall(m1, false, 1, &c->pos[r], &ids[r], &c->seq[r], c->t, y1, c1[r]);
      if (rc) fail_msg("%s call %zu row %d: step returned %d", what, k, r, rc);
      const float *yr = y + (size_t)r * (size_t)(c->t * W);
      double mx = 0;
      for (long i = 0; i < c->t * W; i++) mx = fmax(mx, fabs(y1[i]));
      double d = tu_max_abs_diff(y1, yr, (size_t)(c->t * W));
      worst = fmax(worst, d / (1 + mx));
      if (!(d <= 2e-5 * (1 + mx)))
        fail_msg("%s call %zu row %d (pos %ld): differs by %g (max|y| %g)", what, k, r, c->pos[r],
                 d, mx);
    }
  }
  printf("  %s: B=%d rows vs single rows: max diff %.3g * (1 + max|y|)\n", what, R, worst);
  for (int r = 0; r < R; r++) free(c1[r]);
  free(y);
  free(y1);
}

// A decoder (cross-attention over a memory [B, S, D], float inputs): a
// row's memory is projected into the cache at the call where that row
// starts, and only then: the memory inputs of the rows going on hold other
// values at every later call (gcall), which must not reach their outputs.
static void test_rows_decoder(void **state) {
  (void)state;
  const bc_define d3[] = {{"B", R}, {"D", 16}, {"H", 2}, {"N", 3}, {"T", TMAX}, {"S", 6}};
  const bc_define d1[] = {{"B", 1}, {"D", 16}, {"H", 2}, {"N", 3}, {"T", TMAX}, {"S", 6}};
  model *mb = model_new("graphs/decoder_pre_ln.blk", d3, 6);
  model *m1 = model_new("graphs/decoder_pre_ln.blk", d1, 6);
  expect_same_weights(mb, m1);
  check_rows_any("graphs/decoder_pre_ln.blk", mb, m1, R);
  model_free(m1);
  model_free(mb);
}

// Sinusoidal positions per row, and a run-time batch (dim B <= 4, 3 rows
// at run time): the oracle is the same compiled model at B = 1.
static const char sin_graph[] =
    "model sinlm\n"
    "dim B <= 4\n"
    "dim T <= 9\n"
    "dim D = 32\n"
    "dim H = 4\n"
    "dim V = 50\n"
    "input ids : tokens[B, T]\n"
    "x = Positions(Embedding(ids, vocab=V, dim=D, params=emb), kind=sinusoidal)\n"
    "for i in 0..3 as layers.{i} {\n"
    "    x = Add(x, Attention(LayerNorm(x, params=ln1), heads=H, causal=true, params=attn))\n"
    "    x = Add(x, FFN(LayerNorm(x, params=ln2), hidden=64, act=gelu, params=(fc1, fc2)))\n"
    "}\n"
    "logits = Linear(LayerNorm(x, params=lnf), out=V, bias=false, params=head)\n"
    "output logits\n";

static void test_rows_sinusoid_rt_batch(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".blk");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(sin_graph, f);
  fclose(f);
  model *m = model_new(path, NULL, 0), *m1 = model_new(path, NULL, 0);
  check_rows_any("sinlm (run-time B)", m, m1, R);
  // The batch is kept by the sequence: another B with a row going on is ESEQ.
  float y[4 * TMAX * V];
  const long pos[4] = {1, 0, 0, 0};
  const int ids[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0};
  assert_int_equal(gcall(m, true, 4, pos, ids, seq, 1, y, m->cache), BC_RUN_ESEQ);
  const long zero[4] = {0, 0, 0, 0};
  assert_int_equal(gcall(m, true, 4, zero, ids, seq, 1, y, m->cache), BC_RUN_OK);
  model_free(m1);
  model_free(m);
  remove(path);
}

#define SMALL_LM {"D", 32}, {"H", 4}, {"N", 3}, {"T", TMAX}, {"V", V}

// The AOT module's <model>_step_rows_abi (cc -O3): llama_lm at B = 3
// against single rows on the JIT, and its refusals.
static void test_rows_aot(void **state) {
  (void)state;
  const bc_define d3[] = {SMALL_LM, {"KV", 2}, {"B", R}}, d1[] = {SMALL_LM, {"KV", 2}, {"B", 1}};
  model *mb = model_new("graphs/llama_lm.blk", d3, 7), *m1 = model_new("graphs/llama_lm.blk", d1, 7);
  bc_graph *g;
  char *c, *h, dir[256];
  if (tu_aot_pair(mb->ctx, "graphs/llama_lm.blk", d3, 7, false, &g, &c, &h))
    fail_msg("%s", mb->errs.buf);
  assert_non_null(strstr(h, "int llama_lm_step_rows(const llama_lm_weights *w, const llama_lm_io "
                            "*io, const long *pos,"));
  assert_non_null(strstr(h, "int llama_lm_step_rows_abi("));
  assert_non_null(strstr(h, "int llama_lm_step_rows_pool("));
  tu_mktmpdir(dir, sizeof dir, "rows");
  bc_aot *a;
  tu_aot_build(mb->ctx, &mb->errs, g, c, h, dir, &a);
  assert_non_null(mb->aot_rows = bcA_step_rows(a));
  const float *const *aw = bcA_args(mb->ctx, a, g, &mb->w);  // the module's llama_lm_pack
  assert_non_null(aw);
  mb->w.p[mb->w.n] = (float *)aw[mb->w.n];
  check_rows_any("graphs/llama_lm.blk (aot)", mb, m1, R);
  // The rows hold 6, 7 and 3 positions (the schedule's end).
  float y[R * V];
  const int ids[R] = {0, 1, 2}, seq[R] = {0, 1, 2};
  assert_int_equal(gcall(mb, true, R, (const long[R]){6, 7, 4}, ids, seq, 1, y, mb->cache),
                   BC_RUN_ESEQ);
  assert_int_equal(gcall(mb, true, R, (const long[R]){6, 9, 3}, ids, seq, 1, y, mb->cache),
                   BC_RUN_ECACHE);
  assert_int_equal(gcall(mb, true, R, (const long[R]){6, -1, 3}, ids, seq, 1, y, mb->cache),
                   BC_RUN_EINVAL);
  assert_int_equal(gcall(mb, true, R, (const long[R]){6, 7, 3}, ids, seq, 1, y, mb->cache),
                   BC_RUN_OK);
  model_free(m1);
  model_free(mb);
  bcA_free(a);
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_rows_gpt2(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL_LM, {"P", TMAX}};
  check_rows("graphs/gpt2_lm.blk", defs, 6);
}

// LLaMA: rotary positions per row, grouped-query K/V (H=4, KV=2), the layer
// loop (N=3: the layer function takes the rows' pos).
static void test_rows_llama(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL_LM, {"KV", 2}};
  check_rows("graphs/llama_lm.blk", defs, 6);
}

// A hostile row: the status, and neither the cache nor the outputs written.
static void expect_refused(model *m, const long *pos, long t, int want, const char *what) {
  size_t cb = (size_t)m->c.cache_bytes;
  unsigned char *before = malloc(cb);
  assert_non_null(before);
  memcpy(before, m->cache, cb);
  float y[R * TMAX * V];
  for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) y[i] = 12345.0f;
  int seq[R] = {0, 0, 0};
  int rc = call_rows(m, pos, seq, t, y);
  if (rc != want) fail_msg("%s: status %d, want %d", what, rc, want);
  if (memcmp(before, m->cache, cb)) fail_msg("%s: the cache was written", what);
  for (size_t i = 0; i < sizeof y / sizeof y[0]; i++)
    if (y[i] != 12345.0f) fail_msg("%s: the outputs were written", what);
  free(before);
}

static void test_rows_hostile(void **state) {
  (void)state;
  // P = 7 < T = 9: a row past the learned table is EPOS.
  const bc_define defs[] = {SMALL_LM, {"P", 7}, {"B", R}};
  model *m = model_new("graphs/gpt2_lm.blk", defs, 7);
  float y[R * TMAX * V];
  long p0[R] = {0, 0, 0};
  int s0[R] = {0, 0, 0};
  assert_int_equal(call_rows(m, p0, s0, 3, y), 0);  // every row holds 3
  long p1[R] = {3, 0, 1};
  assert_int_equal(call_rows(m, p1, s0, 1, y), 0);  // rows hold 4, 1, 2
  expect_refused(m, (const long[R]){4, 1, 3}, 1, BC_RUN_ESEQ, "row 2 skips ahead (3 > 2)");
  expect_refused(m, (const long[R]){5, 1, 2}, 1, BC_RUN_ESEQ, "row 0 skips ahead (5 > 4)");
  expect_refused(m, (const long[R]){4, 9, 2}, 1, BC_RUN_ECACHE, "row 1 past the cache");
  expect_refused(m, (const long[R]){4, 1, 8}, 2, BC_RUN_ECACHE, "row 2: 8 + 2 > 9");
  expect_refused(m, (const long[R]){4, 1, 1L << 40}, 1, BC_RUN_ECACHE, "row 2 at 2^40");
  expect_refused(m, (const long[R]){4, -1, 2}, 1, BC_RUN_EINVAL, "row 1 negative");
  expect_refused(m, (const long[R]){-(1L << 40), 1, 2}, 1, BC_RUN_EINVAL, "row 0 at -2^40");
  expect_refused(m, (const long[R]){4, 1, 2}, 4, BC_RUN_EPOS, "row 0: 4 + 4 > P = 7");
  // NULL pos: EINVAL, nothing written.
  void *io[3] = {(int32_t[R]){1, 2, 3}, NULL, y};
  long rt[1] = {1};
  assert_int_equal(m->c.step_rows((const float *const *)m->w.p, io, rt, NULL, m->cache,
                                  (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_EINVAL);
  // Another model's cache: a row going on is ESEQ; every row at 0 starts afresh.
  memset(m->cache, 0, (size_t)m->c.cache_bytes);
  expect_refused(m, (const long[R]){0, 1, 0}, 1, BC_RUN_ESEQ, "a zeroed cache, row 1 at 1");
  assert_int_equal(call_rows(m, p0, s0, 1, y), 0);
  // The rows still accepted go on: row 1 at 1 (it holds 1).
  long p2[R] = {1, 1, 0};
  assert_int_equal(call_rows(m, p2, s0, 1, y), 0);
  model_free(m);
}

static void on_error(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  size_t n = strlen(msg);
  if (e->len + n + 2 < sizeof e->buf) {
    memcpy(e->buf + e->len, msg, n);
    e->len += n;
    e->buf[e->len++] = '\n';
    e->buf[e->len] = '\0';
  }
}

// blockc_step_rows (on a pool of 2 threads): the rows equal blockc_step of
// each row alone (a B = 1 model, no pool), and hostile rows are errors
// naming the row.
static void test_api_step_rows(void **state) {
  (void)state;
  tu_errors errs, errs1;
  blockc_model *m = blockc_new(), *m1 = blockc_new();
  assert_non_null(m);
  assert_non_null(m1);
  memset(&errs, 0, sizeof errs);
  memset(&errs1, 0, sizeof errs1);
  blockc_set_error_func(m, &errs, on_error);
  blockc_set_error_func(m1, &errs1, on_error);
  const char *dn[] = {"D", "H", "KV", "N", "T", "V"};
  const long long dv[] = {32, 4, 2, 3, TMAX, V};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(blockc_set_dim(m, dn[i], dv[i]), BLOCKC_OK);
    assert_int_equal(blockc_set_dim(m1, dn[i], dv[i]), BLOCKC_OK);
  }
  assert_int_equal(blockc_set_dim(m, "B", R), BLOCKC_OK);
  if (blockc_load_graph(m, "graphs/llama_lm.blk") || blockc_init_weights(m, 4) ||
      blockc_compile(m))
    fail_msg("%s", errs.buf);
  // The batched model's products over a pool of 2 threads (bit-identical to none).
  assert_int_equal(blockc_set_threads(m, 2), BLOCKC_OK);
  if (blockc_load_graph(m1, "graphs/llama_lm.blk") || blockc_init_weights(m1, 4) ||
      blockc_compile(m1))
    fail_msg("%s", errs1.buf);
  size_t cb = blockc_cache_size(m), wb = blockc_workspace_size(m);
  size_t cb1 = blockc_cache_size(m1), wb1 = blockc_workspace_size(m1);
  void *cache = aligned_alloc(64, cb), *ws = aligned_alloc(64, wb), *ws1 = aligned_alloc(64, wb1);
  void *c1[R];
  assert_non_null(cache);
  assert_non_null(ws);
  assert_non_null(ws1);
  for (int r = 0; r < R; r++) assert_non_null(c1[r] = aligned_alloc(64, cb1));
  float y[R * TMAX * V], y1[TMAX * V];
  for (size_t k = 0; k < sizeof schedule / sizeof schedule[0]; k++) {
    const call *c = &schedule[k];
    int32_t ids[R * TMAX];
    long long pos[R];
    for (int b = 0; b < R; b++) {
      pos[b] = c->pos[b];
      for (long i = 0; i < c->t; i++) ids[b * c->t + i] = token(b, c->seq[b], c->pos[b] + i);
    }
    const void *in[2] = {ids, NULL};
    void *out[1] = {y};
    long long dims[1] = {c->t};
    if (blockc_step_rows(m, in, out, dims, pos, cache, cb, ws, wb))
      fail_msg("call %zu: %s", k, errs.buf);
    for (int r = 0; r < R; r++) {
      const void *in1[2] = {ids + r * c->t, NULL};
      void *out1[1] = {y1};
      if (blockc_step(m1, in1, out1, dims, pos[r], c1[r], cb1, ws1, wb1))
        fail_msg("call %zu row %d: %s", k, r, errs1.buf);
      double mx = 0;
      for (long i = 0; i < c->t * V; i++) mx = fmax(mx, fabs(y1[i]));
      double d = tu_max_abs_diff(y1, y + (size_t)r * (size_t)(c->t * V), (size_t)(c->t * V));
      if (!(d <= 2e-5 * (1 + mx))) fail_msg("call %zu row %d: differs by %g", k, r, d);
    }
  }
  // The rows now hold 6, 7, 3 positions.
  int32_t ids[R * TMAX] = {0};
  const void *in[2] = {ids, NULL};
  void *out[1] = {y};
  long long one[1] = {1}, two[1] = {2};
  struct {
    long long pos[R];
    long long *dims;
    int want;
    const char *msg;
  } bad[] = {
      {{6, 7, 4}, one, BLOCKC_EUSAGE, "row 2: pos 4 skips ahead of the 3 positions"},
      {{6, 8, 3}, two, BLOCKC_EINPUT, "row 1: pos 8 + 2 new positions exceed the cache's 9"},
      {{6, -2, 3}, one, BLOCKC_EUSAGE, "row 1: pos = -2 is negative"},
      {{6, 7, 1LL << 62}, one, BLOCKC_EINPUT, "row 2: pos 4611686018427387904 + 1 new"},
      {{5, 5, 5}, one, BLOCKC_EUSAGE, "pos 5 skips ahead of the 3 positions"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errs.len = 0;
    errs.buf[0] = '\0';
    int rc = blockc_step_rows(m, in, out, bad[i].dims, bad[i].pos, cache, cb, ws, wb);
    if (rc != bad[i].want || !strstr(errs.buf, bad[i].msg))
      fail_msg("case %zu: status %d (want %d), message: %s", i, rc, bad[i].want, errs.buf);
  }
  errs.len = 0;
  assert_int_equal(blockc_step_rows(m, in, out, one, NULL, cache, cb, ws, wb), BLOCKC_EUSAGE);
  assert_non_null(strstr(errs.buf, "pos is NULL"));
  // The shared pos through blockc_step on the same cache: every row holds >= 3.
  assert_int_equal(blockc_step(m, in, out, one, 3, cache, cb, ws, wb), BLOCKC_OK);
  for (int r = 0; r < R; r++) free(c1[r]);
  free(cache);
  free(ws);
  free(ws1);
  blockc_delete(m1);
  blockc_delete(m);
}

// bench --decode --batch B: B rows per step through the per-row entry; the
// JSON keeps its keys and adds batch and tokens_per_s; --batch without
// --decode, or against a -D of the batch dim, is a usage error.
static void test_cli_bench_batch(void **state) {
  (void)state;
  static tu_run_result r;
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--batch", "3", "--iters", "3",
         "--json");
  tu_expect_run(&r, 0, "\"batch\": 3, \"tokens_per_s\": ", NULL);
  const char *keys[] = {"\"context\": 9,", "\"prefill_ms\"", "\"decode_ms_per_token\"",
                        "\"read_floor_ms\"", "\"decode_over_floor\"", "\"threads\": 1"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strstr(r.out, keys[i])) fail_msg("no %s in %s", keys[i], r.out);
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--iters", "3");
  tu_expect_run(&r, 0, "tokens/s", NULL);
  // on 2 threads: the read floor split over them too (text and JSON)
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--iters", "3", "--threads", "2");
  tu_expect_run(&r, 0, "floor x2 ", NULL);
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--iters", "3", "--threads", "2",
         "--json");
  tu_expect_run(&r, 0, "\"threads\": 2,", NULL);
  double ft = -1;
  const char *k = strstr(r.out, "\"read_floor_threads_ms\": ");
  if (!k || sscanf(k + strlen("\"read_floor_threads_ms\": "), "%lf", &ft) != 1 || !(ft > 0))
    fail_msg("no positive read_floor_threads_ms in %s", r.out);
  assert_non_null(strstr(r.out, "\"decode_over_floor_threads\": "));
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "N=1", "-D", "V=50",
         "-D", "T=16", "--batch", "2");
  tu_expect_run(&r, 2, NULL, "--batch needs --decode");
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "N=1", "-D", "V=50",
         "-D", "T=16", "-D", "B=2", "--decode", "--batch", "3");
  tu_expect_run(&r, 2, NULL, "disagree");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_gpt2),
      cmocka_unit_test(test_rows_llama),
      cmocka_unit_test(test_rows_decoder),
      cmocka_unit_test(test_rows_sinusoid_rt_batch),
      cmocka_unit_test(test_rows_hostile),
      cmocka_unit_test(test_api_step_rows),
      cmocka_unit_test(test_cli_bench_batch),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_rows_aot),  // an AOT build of llama_lm at -O3
  };
  return tu_run_tiers(tests, long_tests);
}
