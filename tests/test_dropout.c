// test_dropout.c — dropout: Dropout(x, p), Attention's and FFN's dropout=,
// active only in training and reproducible bit for bit.
//
//   - the generator is the documented function (runtime/src/rng.c), here
//     written again from its comment: key = mix64(mix64(mix64(seed) + step)
//     + node), h = mix64(key + (e/2 + 1) golden), u(e) = (h >> 40) / 2^24 for
//     even e, ((h >> 16) & 0xFFFFFF) / 2^24 for odd e;
//   - the rate and the 1/(1-p) scaling over 2^20 draws at fixed seeds (a
//     6-sigma bound on a fixed sample: it cannot flake, and a wrong
//     threshold, say p*2^23, misses it by hundreds of sigmas);
//   - determinism: the same (seed, step) gives the same masks, another
//     step, seed or node other masks;
//   - every backend draws the same masks: the reference backward (double),
//     the JIT's and the AOT module's <model>_backward_ex on a graph that is
//     just Dropout (and on one whose passes renumber the nodes: the key is
//     the node's creation index);
//   - gradient checks with a fixed mask: central differences of the
//     reference's double loss against its backward with dropout active,
//     then the emitted backward against the reference (Dropout, FFN and
//     Attention dropout=, a padded batch, a layer stack);
//   - inference never drops: the interpreter, <model>_run, <model>_backward
//     and blockc_backward; blockc_backward_ex; the parser's errors for p
//     outside [0, 1); `blockc grad --dropout-seed --step` on every backend.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "blockc.h"
#include "blockc_rt.h"

// --- the documented generator, written again -------------------------------------
static uint64_t doc_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double doc_u(uint64_t seed, uint64_t step, uint64_t node, uint64_t e) {
  uint64_t key = doc_mix64(doc_mix64(doc_mix64(seed) + step) + node);
  uint64_t h = doc_mix64(key + (e / 2 + 1) * 0x9E3779B97F4A7C15ull);
  return (double)(e % 2 ? (h >> 16) & 0xFFFFFF : h >> 40) / 16777216.0;
}

static void test_generator_is_documented(void **state) {
  (void)state;
  const uint64_t seeds[] = {0, 1, 42, 0xFFFFFFFFFFFFFFFFull};
  for (int si = 0; si < 4; si++)
    for (uint64_t step = 0; step < 3; step++)
      for (long node = 0; node < 3; node++) {
        unsigned long long key = bcrt_drop_key(seeds[si], step, node);
        for (long e = 0; e < 200; e += 7) {
          double u = bcrt_drop_uniform(key, e);
          assert_true(u >= 0 && u < 1);
          assert_true(u == doc_u(seeds[si], step, (uint64_t)node, (uint64_t)e));
        }
      }
  assert_int_equal(bcrt_drop_threshold(0), 0);
  assert_int_equal(bcrt_drop_threshold(0.5), 1u << 23);
  assert_int_equal(bcrt_drop_threshold(0.1), 1677722u);  // ceil(0.1 * 2^24 = 1677721.6)
  assert_int_equal(bcrt_drop_threshold(0.25), 1u << 22);  // exact: not rounded up
  // The kernels keep exactly the elements with u >= p.
  enum { N = 4095 };  // 65 rows of 63: odd lengths and odd first elements
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_true(x && y);
  tu_fill(x, N, 3);
  const double ps[] = {0.1, 0.25, 0.5, 0.9};
  for (int k = 0; k < 4; k++) {
    double p = ps[k];
    float sc = (float)(1.0 / (1.0 - p));
    unsigned long long key = bcrt_drop_key(9, 4, 2);
    bcrt_dropout(N, x, y, key, 101, bcrt_drop_threshold(p), sc);
    for (long i = 0; i < N; i++) {
      bool keep = doc_u(9, 4, 2, (uint64_t)(101 + i)) >= p;
      if (y[i] != (keep ? x[i] * sc : 0.0f)) fail_msg("p=%g element %ld: %g", p, i, (double)y[i]);
    }
    // Its backward: dx += mask * scale * dy; the rows form numbers r*d + j.
    float *dx = calloc(N, sizeof *dx);
    assert_non_null(dx);
    bcrt_dropout_acc(N, x, dx, key, 101, bcrt_drop_threshold(p), sc);
    assert_memory_equal(dx, y, N * sizeof *y);
    memcpy(dx, x, N * sizeof *x);
    bcrt_dropout_rows(65, 63, 63, dx, key, 101, bcrt_drop_threshold(p), sc);
    assert_memory_equal(dx, y, N * sizeof *y);
    for (long i = 0; i < N; i++)  // the reference's view: one element at a time
      assert_true((y[i] != 0) == (bcrt_drop_uniform(key, 101 + i) >= p));
    free(dx);
  }
  free(x);
  free(y);
}

// --- rate and scaling ------------------------------------------------------------
static void test_rate_and_scale(void **state) {
  (void)state;
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_true(x && y);
  for (long i = 0; i < N; i++) x[i] = 1.0f;
  const double ps[] = {0.05, 0.1, 0.3, 0.5, 0.9};
  for (int k = 0; k < 5; k++) {
    double p = ps[k];
    float sc = (float)(1.0 / (1.0 - p));
    bcrt_dropout(N, x, y, bcrt_drop_key(1234, 7, 3), 0, bcrt_drop_threshold(p), sc);
    long zeros = 0;
    double sum = 0;
    for (long i = 0; i < N; i++) {
      if (y[i] == 0) zeros++;
      else if (y[i] != sc) fail_msg("p=%g: kept value %g is not 1/(1-p) = %g", p, y[i], sc);
      sum += y[i];
    }
    double sd = sqrt(N * p * (1 - p));
    printf("  p=%.2f: dropped %ld of %d (expected %.0f, %.1f sigma)\n", p, zeros, N, N * p,
           fabs(zeros - N * p) / sd);
    if (!(fabs(zeros - N * p) <= 6 * sd)) fail_msg("p=%g: %ld zeros, expected %.0f", p, zeros, N * p);
    // Unbiased: E[y] = x.  sd of the mean: sqrt(p/(1-p)/N).
    double mean = sum / N, msd = sqrt(p / (1 - p) / N);
    if (!(fabs(mean - 1) <= 6 * msd)) fail_msg("p=%g: mean %g, expected 1", p, mean);
    // Two elements of one hash (2i, 2i+1) and neighbours of two (2i+1,
    // 2i+2) are independent: both dropped with probability p^2.
    for (int shift = 0; shift < 2; shift++) {
      long both = 0, pairs = N / 2 - 1;
      for (long i = 0; i < pairs; i++) both += y[2 * i + shift] == 0 && y[2 * i + shift + 1] == 0;
      double q = p * p, qsd = sqrt(pairs * q * (1 - q));
      if (!(fabs(both - pairs * q) <= 6 * qsd))
        fail_msg("p=%g: %ld of %ld pairs (shift %d) both dropped, expected %.0f", p, both, pairs,
                 shift, pairs * q);
    }
  }
  free(x);
  free(y);
}

// --- determinism -------------------------------------------------------------------
static long mask_diff(unsigned long long k1, unsigned long long k2, double p, long n) {
  unsigned thr = bcrt_drop_threshold(p);
  long d = 0;
  for (long i = 0; i < n; i++)
    d += (bcrt_drop_uniform(k1, i) * 16777216.0f >= (float)thr) !=
         (bcrt_drop_uniform(k2, i) * 16777216.0f >= (float)thr);
  return d;
}

static void test_determinism(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  double p = 0.5;
  unsigned long long k = bcrt_drop_key(5, 10, 4);
  assert_true(k == bcrt_drop_key(5, 10, 4));
  assert_int_equal(mask_diff(k, bcrt_drop_key(5, 10, 4), p, N), 0);
  // Independent masks differ at 2 p (1-p) = 1/2 of the positions (sd 128).
  const unsigned long long other[] = {bcrt_drop_key(5, 11, 4), bcrt_drop_key(6, 10, 4),
                                      bcrt_drop_key(5, 10, 5), bcrt_drop_key(5, 9, 4)};
  for (int i = 0; i < 4; i++) {
    long d = mask_diff(k, other[i], p, N);
    if (!(labs(d - N / 2) <= 6 * 128)) fail_msg("case %d: masks differ at %ld of %d", i, d, N);
  }
}

// --- a graph, its reference and its compiled backward --------------------------------
typedef struct dcase {
  tu_errors e;
  bc_ctx *ctx;
  bc_graph *g;   // as parsed: the reference runs on it
  bc_graph *gc;  // parsed again and compiled (passes, plan)
  bc_compiled cc;
  bc_weights w;
  int nin;
  float *x[4];     // float inputs (NULL where the input is lengths)
  int64_t nx[4];
  int64_t ny;
  float *dy;
  long rt[2];
  const long *rtp;
  int32_t lens[2];
} dcase;

static float *fbuf(int64_t n) {
  float *p = calloc((size_t)(n ? n : 1), sizeof *p);
  assert_non_null(p);
  return p;
}

static int64_t numel_at(const dcase *c, int v) {
  bc_shape s = bcI_shape_at(c->g, &c->g->vals[v].shape, c->rtp);
  return bc_shape_numel(&s);
}

// One float input (plus a lengths input when the graph has one), one output;
// run-time dims at rt.
static dcase *case_new(const char *text, long rt) {
  dcase *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->ctx = tu_ctx(&c->e);
  c->g = bcP_parse_string(c->ctx, "t.blk", text, NULL, 0);
  c->gc = bcP_parse_string(c->ctx, "t.blk", text, NULL, 0);
  if (!c->g || !c->gc) fail_msg("parse: %s", c->e.buf);
  assert_int_equal(c->g->noutputs, 1);
  assert_true(c->g->ninputs <= 4);
  for (int i = 0; i < c->g->nrt; i++) c->rt[i] = rt;
  c->rtp = c->g->nrt ? c->rt : NULL;
  c->lens[0] = (int32_t)(rt > 1 ? rt - 1 : 1);
  c->lens[1] = (int32_t)rt;
  tu_grad_weights(c->ctx, c->g, 11, &c->w);
  c->nin = c->g->ninputs;
  tu_rng r = {77};
  for (int i = 0; i < c->nin; i++) {
    int v = c->g->inputs[i];
    if (c->g->vals[v].type != BC_VT_F32) continue;
    c->nx[i] = numel_at(c, v);
    c->x[i] = fbuf(c->nx[i]);
    for (int64_t k = 0; k < c->nx[i]; k++) c->x[i][k] = tu_rnd(&r) + 0.05f;  // nonzero
  }
  c->ny = numel_at(c, c->g->outputs[0]);
  c->dy = fbuf(c->ny);
  for (int64_t k = 0; k < c->ny; k++) c->dy[k] = tu_rnd(&r);
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(c->ctx, c->gc, &eo, &c->cc)) fail_msg("compile: %s", c->e.buf);
  return c;
}

static void case_free(dcase *c) {
  for (int i = 0; i < 4; i++) free(c->x[i]);
  free(c->dy);
  bcD_free(&c->cc);
  bcW_free(&c->w);
  bc_ctx_free(c->ctx);
  free(c);
}

static void case_io(dcase *c, float *y, void **io) {
  for (int i = 0; i < c->nin; i++) io[i] = c->x[i] ? (void *)c->x[i] : (void *)c->lens;
  io[c->nin] = y;
}

// The gradients of one run: y, dw (one array per parameter), dx of input 0.
typedef struct { float *y; bc_weights dw; float *dx; } grads;

static grads grads_new(const dcase *c) {
  grads r = {fbuf(c->ny), {.n = c->g->nparams, .p = calloc((size_t)c->g->nparams + 1, sizeof(float *))},
             fbuf(c->nx[0])};
  assert_non_null(r.dw.p);
  for (int p = 0; p < c->g->nparams; p++) r.dw.p[p] = fbuf(bc_shape_numel(&c->g->params[p].shape));
  return r;
}

static void grads_free(grads *r) {
  free(r->y);
  free(r->dx);
  bcW_free(&r->dw);
}

// The reference backward (double) with rng (NULL: none).
static grads ref_grads(dcase *c, const bc_train_rng *rng) {
  grads r = {fbuf(c->ny), {0}, fbuf(c->nx[0])};
  void *io[5];
  case_io(c, r.y, io);
  float *dx[4] = {r.dx, NULL, NULL, NULL};
  const float *dy[1] = {c->dy};
  if (bcR_grad_ex(c->ctx, c->g, &c->w, io, c->rtp, rng, dy, &r.dw, dx))
    fail_msg("bcR_grad_ex: %s", c->e.buf);
  return r;
}

// The JIT's emitted backward: _backward_ex(training, seed, step), or
// _backward when ex is false.
static grads jit_grads(dcase *c, bool ex, int training, unsigned long long seed,
                       unsigned long long step) {
  grads r = grads_new(c);
  void *io[5];
  case_io(c, r.y, io);
  float *dx[4] = {r.dx, NULL, NULL, NULL};
  const float *dy[1] = {c->dy};
  void *ws = aligned_alloc(64, (size_t)c->cc.bwd_ws_bytes);
  assert_non_null(ws);
  memset(ws, 0xff, (size_t)c->cc.bwd_ws_bytes);  // NaN: nothing read before written
  const float *const *w = (const float *const *)c->w.p;
  int rc;
  if (ex) {
    assert_non_null(c->cc.backward_ex);
    rc = c->cc.backward_ex(w, io, c->rtp, dy, r.dw.p, dx, training, seed, step, ws);
  } else {
    rc = c->cc.backward(w, io, c->rtp, dy, r.dw.p, dx, ws);
  }
  assert_int_equal(rc, 0);
  free(ws);
  return r;
}

// max |a - b| / max(max |b|, floor).
static double rel_err(const float *a, const float *b, int64_t n, double floor) {
  double e = 0, m = floor;
  for (int64_t k = 0; k < n; k++) {
    double d = fabs((double)a[k] - b[k]);
    if (!(d <= e)) e = d;
    if (fabs((double)b[k]) > m) m = fabs((double)b[k]);
  }
  return m > 0 ? e / m : e;
}

// a and b agree to tol (relative to the largest parameter gradient as a floor).
static double compare(const dcase *c, const grads *a, const grads *b, double tol, const char *what) {
  double worst = rel_err(a->y, b->y, c->ny, 0);
  if (!(worst <= tol)) fail_msg("%s: y: rel err %.3g", what, worst);
  double gmax = 0;
  for (int p = 0; p < c->g->nparams; p++) {
    double m = tu_max_abs(b->dw.p[p], (size_t)bc_shape_numel(&c->g->params[p].shape));
    gmax = m > gmax ? m : gmax;
  }
  for (int p = 0; p < c->g->nparams; p++) {
    double e = rel_err(a->dw.p[p], b->dw.p[p], bc_shape_numel(&c->g->params[p].shape), 1e-2 * gmax);
    if (!(e <= tol)) fail_msg("%s: d %s: rel err %.3g", what, c->g->params[p].name, e);
    worst = e > worst ? e : worst;
  }
  double e = rel_err(a->dx, b->dx, c->nx[0], 0);
  if (!(e <= tol)) fail_msg("%s: dx: rel err %.3g", what, e);
  return e > worst ? e : worst;
}

static bool same_zeros(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if ((a[i] == 0) != (b[i] == 0)) return false;
  return true;
}

// --- every backend draws the same masks --------------------------------------------------
#define DROP_ONLY                                                                            \
  "model md\ndim B = 2\ndim T = 5\ndim D = 16\ninput x : [B, T, D]\n"                        \
  "y = Dropout(x, p=0.4)\noutput y\n"
// The passes fuse Add + LayerNorm (n1, n2 become one node): the Dropout
// node moves from index 3 to 2, its key stays 3.
#define DROP_FUSED                                                                           \
  "model mf\ndim B = 2\ndim T = 5\ndim D = 16\ninput x : [B, T, D]\n"                        \
  "h = Linear(x, out=D, params=lin)\ns = Add(x, h)\nn = LayerNorm(s, params=ln)\n"            \
  "y = Dropout(n, p=0.3)\noutput y\n"

static void test_every_backend_same_mask(void **state) {
  (void)state;
  dcase *c = case_new(DROP_ONLY, 0);
  bc_train_rng rng = {21, 4, 1};
  grads ref = ref_grads(c, &rng), jit = jit_grads(c, true, 1, 21, 4);
  // The mask is the documented function's with node 0, element = flat index.
  for (int64_t i = 0; i < c->ny; i++) {
    bool keep = doc_u(21, 4, 0, (uint64_t)i) >= 0.4;
    if ((jit.y[i] != 0) != keep) fail_msg("jit element %lld", (long long)i);
    if (jit.y[i] != (keep ? c->x[0][i] * (float)(1 / 0.6) : 0.0f))
      fail_msg("jit element %lld: %g", (long long)i, (double)jit.y[i]);
    if (jit.dx[i] != (keep ? c->dy[i] * (float)(1 / 0.6) : 0.0f))
      fail_msg("jit dx %lld: %g", (long long)i, (double)jit.dx[i]);
  }
  assert_true(same_zeros(ref.y, jit.y, c->ny));
  assert_true(same_zeros(ref.dx, jit.dx, c->nx[0]));
  compare(c, &jit, &ref, 1e-6, "jit vs reference (Dropout only)");
  // The AOT module: bit-identical to the JIT's (the same runtime kernels).
  char dir[256], path[400];
  tu_mktmpdir(dir, sizeof dir, "dropout");
  snprintf(path, sizeof path, "%s/md.blk", dir);
  tu_write_bytes(path, DROP_ONLY, strlen(DROP_ONLY));
  bc_graph *g;
  char *csrc, *h;
  if (tu_aot_pair(c->ctx, path, NULL, 0, true, &g, &csrc, &h)) fail_msg("aot: %s", c->e.buf);
  assert_non_null(strstr(h, "md_backward_ex("));
  bc_aot *a;
  tu_aot_build(c->ctx, &c->e, g, csrc, h, dir, &a);
  assert_non_null(bcA_backward_ex(a));
  grads aot = grads_new(c);
  void *io[2];
  case_io(c, aot.y, io);
  float *dx[1] = {aot.dx};
  const float *dy[1] = {c->dy};
  void *ws = aligned_alloc(64, (size_t)c->cc.bwd_ws_bytes);
  assert_non_null(ws);
  assert_int_equal(bcA_backward_ex(a)((const float *const *)c->w.p, io, NULL, dy, aot.dw.p, dx, 1,
                                      21, 4, ws), 0);
  assert_memory_equal(aot.y, jit.y, (size_t)c->ny * sizeof(float));
  assert_memory_equal(aot.dx, jit.dx, (size_t)c->nx[0] * sizeof(float));
  free(ws);
  bcA_free(a);
  tu_rm_rf(dir);
  grads_free(&aot);
  grads_free(&ref);
  grads_free(&jit);
  case_free(c);

  // Renumbered by the passes: the reference (unfused) and the JIT (fused) agree.
  c = case_new(DROP_FUSED, 0);
  assert_int_equal(c->g->nnodes, 4);
  assert_int_equal(c->gc->nnodes, 3);
  ref = ref_grads(c, &rng);
  jit = jit_grads(c, true, 1, 21, 4);
  assert_true(same_zeros(ref.y, jit.y, c->ny));
  for (int64_t i = 0; i < c->ny; i++)
    if ((jit.y[i] != 0) != (doc_u(21, 4, 3, (uint64_t)i) >= 0.3)) fail_msg("fused: element %lld", (long long)i);
  compare(c, &jit, &ref, 1e-4, "jit vs reference (fused graph)");
  grads_free(&ref);
  grads_free(&jit);
  case_free(c);
}

// --- inference never drops -------------------------------------------------------------
static void test_inference_never_drops(void **state) {
  (void)state;
  dcase *c = case_new(DROP_ONLY, 0);
  float *y = fbuf(c->ny);
  void *io[2];
  case_io(c, y, io);
  assert_int_equal(bcR_run_io(c->ctx, c->g, &c->w, io, NULL), BC_OK);  // the interpreter
  assert_memory_equal(y, c->x[0], (size_t)c->ny * sizeof(float));
  memset(y, 0, (size_t)c->ny * sizeof(float));
  void *ws = aligned_alloc(64, (size_t)c->cc.ws_bytes + 64);
  assert_non_null(ws);
  assert_int_equal(c->cc.run((const float *const *)c->w.p, io, NULL, ws), 0);  // <model>_run
  assert_memory_equal(y, c->x[0], (size_t)c->ny * sizeof(float));
  free(ws);
  free(y);
  // <model>_backward, _backward_ex with training 0, the reference without rng
  // or with training 0: identity, dx = dy.
  grads b = jit_grads(c, false, 0, 0, 0), bx = jit_grads(c, true, 0, 99, 99);
  bc_train_rng off = {99, 99, 0};
  grads r0 = ref_grads(c, NULL), r1 = ref_grads(c, &off);
  const grads *all[] = {&b, &bx, &r0, &r1};
  for (int k = 0; k < 4; k++) {
    assert_memory_equal(all[k]->y, c->x[0], (size_t)c->ny * sizeof(float));
    assert_memory_equal(all[k]->dx, c->dy, (size_t)c->ny * sizeof(float));
  }
  for (int k = 0; k < 4; k++) grads_free((grads *)all[k]);
  case_free(c);
}

// --- gradient checks with a fixed mask -------------------------------------------------------
// Dropout in the middle, FFN and Attention dropout=, a padded batch (T a
// run-time dim, lengths): every kind of mask.
#define DROP_NET                                                                              \
  "model mn\ndim B = 2\ndim T <= 6\ndim D = 8\ninput x : [B, T, D]\ninput len : lengths[B]\n" \
  "h = FFN(x, hidden=16, act=gelu, params=(l1, l2), dropout=0.3)\n"                           \
  "d = Dropout(Add(x, h), p=0.2)\n"                                                           \
  "a = Attention(d, heads=2, causal=true, lengths=len, params=att, dropout=0.25)\n"           \
  "y = FFN(LayerNorm(Add(d, a), params=ln), hidden=16, act=relu, params=(m1, m2))\noutput y\n"

// loss = sum(y * dy) in double from the reference's tape, with rng.
static double ref_loss(dcase *c, const bc_train_rng *rng) {
  float *y = fbuf(c->ny);
  void *io[5];
  case_io(c, y, io);
  bc_tape *tp;
  if (bcR_tape_forward_ex(c->ctx, c->g, &c->w, io, c->rtp, rng, &tp)) fail_msg("%s", c->e.buf);
  bc_shape s;
  const double *yd = bcR_tape_value(tp, c->g->outputs[0], &s);
  assert_non_null(yd);
  double l = 0;
  for (int64_t k = 0; k < c->ny; k++) l += yd[k] * c->dy[k];
  bcR_tape_free(tp);
  free(y);
  return l;
}

// Central differences at element k of p (a weight or the input), against g.
static void fd_check(dcase *c, const bc_train_rng *rng, float *p, int64_t k, double g,
                     double scale, const char *what) {
  float keep = p[k];
  double h = 1e-3;
  p[k] = (float)(keep + h);
  double lp = ref_loss(c, rng), hp = (double)p[k] - keep;
  p[k] = (float)(keep - h);
  double lm = ref_loss(c, rng), hm = keep - (double)p[k];
  p[k] = keep;
  double fd = (lp - lm) / (hp + hm);
  if (!(fabs(fd - g) <= 1e-4 * scale + 1e-4 * fabs(g)))
    fail_msg("%s[%lld]: finite difference %.9g, backward %.9g", what, (long long)k, fd, g);
}

static void test_gradcheck_fixed_mask(void **state) {
  (void)state;
  dcase *c = case_new(DROP_NET, 5);
  bc_train_rng rng = {3, 17, 1};
  grads r = ref_grads(c, &rng), r0 = ref_grads(c, NULL);
  // The masks are active: the loss differs from the no-dropout one's.
  assert_true(fabs(ref_loss(c, &rng) - ref_loss(c, NULL)) > 1e-3);
  double gmax = 0;
  for (int p = 0; p < c->g->nparams; p++) {
    double m = tu_max_abs(r.dw.p[p], (size_t)bc_shape_numel(&c->g->params[p].shape));
    gmax = m > gmax ? m : gmax;
  }
  int checked = 0;
  for (int p = 0; p < c->g->nparams; p++) {
    int64_t n = bc_shape_numel(&c->g->params[p].shape);
    for (int64_t k = 0; k < n; k += n / 5 + 1, checked++)
      fd_check(c, &rng, c->w.p[p], k, r.dw.p[p][k], gmax, c->g->params[p].name);
  }
  double xmax = tu_max_abs(r.dx, (size_t)c->nx[0]);
  for (int64_t k = 0; k < c->nx[0]; k += 7, checked++) fd_check(c, &rng, c->x[0], k, r.dx[k], xmax, "x");
  printf("  %d finite differences agree with the reference backward (dropout active)\n", checked);
  // The emitted backward against the reference, same masks; another step
  // gives other gradients.
  grads j = jit_grads(c, true, 1, 3, 17);
  double e = compare(c, &j, &r, 1e-4, "jit vs reference (FFN, Dropout, Attention dropout)");
  printf("  emitted vs reference, dropout active: worst rel err %.2e\n", e);
  grads j2 = jit_grads(c, true, 1, 3, 18);
  assert_true(rel_err(j2.dx, r.dx, c->nx[0], 0) > 1e-2);
  grads j0 = jit_grads(c, false, 0, 0, 0);
  compare(c, &j0, &r0, 1e-4, "jit vs reference (no dropout)");
  grads_free(&r);
  grads_free(&r0);
  grads_free(&j);
  grads_free(&j2);
  grads_free(&j0);
  case_free(c);
}

// A layer stack with dropout: each layer's nodes draw their own masks; the
// emitted backward loops over the layers, keys computed from the trip.
static void test_layers(void **state) {
  (void)state;
  const char *text =
      "model ml\ndim B = 2\ndim T = 4\ndim D = 8\ndim N = 3\ninput x : [B, T, D]\nxa = x\n"
      "for i in 0..N as layers.{i} {\n"
      "  a = Attention(xa, heads=2, causal=true, params=self_attn, dropout=0.1)\n"
      "  xa = LayerNorm(Add(xa, Dropout(a, p=0.2)), params=norm1)\n"
      "  f = FFN(xa, hidden=16, act=gelu, params=(linear1, linear2), dropout=0.15)\n"
      "  xa = LayerNorm(Add(xa, Dropout(f, p=0.2)), params=norm2)\n"
      "}\ny = xa\noutput y\n";
  dcase *c = case_new(text, 0);
  assert_true(c->gc->layers.count >= 2);
  const char *note = bcG_layer_note(c->ctx, c->gc);
  assert_non_null(note);
  if (*note) fail_msg("the layers are not looped: %s", note);
  assert_non_null(strstr(c->cc.csrc, "bcrt_drop_key(BC_seed, BC_step, "));
  assert_non_null(strstr(c->cc.csrc, "*(l - 1))"));  // the keys of trip l
  bc_train_rng rng = {8, 2, 1};
  grads r = ref_grads(c, &rng), j = jit_grads(c, true, 1, 8, 2);
  double e = compare(c, &j, &r, 1e-4, "jit vs reference (layers)");
  printf("  layer stack with dropout: worst rel err %.2e\n", e);
  grads_free(&r);
  grads_free(&j);
  case_free(c);
}

// Cross-attention (kv=, kv_lengths=) and grouped-query heads with rotary
// positions, each with dropout=: the emitted backward against the reference.
static void test_attention_variants(void **state) {
  (void)state;
  const char *text =
      "model mx\ndim B = 2\ndim T <= 5\ndim S = 7\ndim D = 8\ninput x : [B, T, D]\n"
      "input mem : [B, S, D]\ninput ml : lengths[B]\n"
      "a = Attention(x, heads=4, kv_heads=2, rope=true, causal=true, q=q, k=k, v=v, o=o, dropout=0.2)\n"
      "c = Attention(Add(x, a), kv=mem, kv_lengths=ml, heads=2, params=xa, dropout=0.3)\n"
      "y = Add(a, c)\noutput y\n";
  dcase *c = case_new(text, 4);
  c->lens[0] = 5;  // kv_lengths over S = 7
  c->lens[1] = 7;
  bc_train_rng rng = {4, 1, 1};
  grads r = ref_grads(c, &rng), r0 = ref_grads(c, NULL), j = jit_grads(c, true, 1, 4, 1);
  assert_true(rel_err(r.y, r0.y, c->ny, 0) > 1e-2);  // the masks act
  double e = compare(c, &j, &r, 1e-4, "jit vs reference (cross, GQA, rope)");
  printf("  cross-attention, GQA + rope with dropout: worst rel err %.2e\n", e);
  grads_free(&r);
  grads_free(&r0);
  grads_free(&j);
  case_free(c);
}

// --- parser errors ----------------------------------------------------------------
static void test_parse_errors(void **state) {
  (void)state;
  tu_expect_error(TU_PRE "y = Dropout(x, p=1)\noutput y\n", 6, 18, "Dropout p=1 is outside [0, 1)");
  tu_expect_error(TU_PRE "y = Dropout(x, p=-0.5)\noutput y\n", 6, 18, "outside [0, 1)");
  tu_expect_error(TU_PRE "y = Dropout(x, p=2.5)\noutput y\n", 6, 18, "outside [0, 1)");
  tu_expect_error(TU_PRE "y = FFN(x, hidden=8, params=(a, b), dropout=1)\noutput y\n", 6, 45,
                  "FFN dropout=1 is outside [0, 1)");
  tu_expect_error(TU_PRE "y = Attention(x, heads=2, params=at, dropout=-0.1)\noutput y\n", 6, 46,
                  "Attention dropout=-0.1 is outside [0, 1)");
  // p = 0 is the identity everywhere; the default is 0.1.
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, TU_PRE "y = Dropout(Dropout(x), p=0)\noutput y\n");
  assert_non_null(g);
  assert_true(g->nodes[0].dropout == 0.1 && g->nodes[1].dropout == 0);
  assert_true(bcI_has_dropout(g));
  g = tu_parse(ctx, TU_PRE "y = Dropout(x, p=0)\noutput y\n");
  assert_non_null(g);
  assert_false(bcI_has_dropout(g));
  bc_ctx_free(ctx);
}

// --- the API ------------------------------------------------------------------------
static void test_api(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  assert_int_equal(blockc_load_graph_string(m, "t.blk", DROP_ONLY), 0);
  assert_int_equal(blockc_init_weights(m, 1), 0);
  assert_int_equal(blockc_compile_backward(m), 0);
  size_t n = blockc_backward_workspace_size(m), ne = 2 * 5 * 16;
  void *ws = aligned_alloc(64, n);
  float *x = fbuf((int64_t)ne), *y = fbuf((int64_t)ne), *dy = fbuf((int64_t)ne),
        *dx = fbuf((int64_t)ne);
  assert_non_null(ws);
  tu_fill(x, (int64_t)ne, 4);
  tu_fill(dy, (int64_t)ne, 5);
  const void *ins[1] = {x};
  void *outs[1] = {y};
  const float *dys[1] = {dy};
  float *dxs[1] = {dx};
  float *dp[1] = {NULL};
  assert_int_equal(blockc_backward(m, ins, outs, dys, dp, dxs, NULL, ws, n), 0);
  assert_memory_equal(y, x, ne * sizeof(float));
  blockc_train_rng off = {5, 6, 0}, on = {5, 6, 1};
  assert_int_equal(blockc_backward_ex(m, ins, outs, dys, dp, dxs, NULL, &off, ws, n), 0);
  assert_memory_equal(y, x, ne * sizeof(float));
  assert_int_equal(blockc_backward_ex(m, ins, outs, dys, dp, dxs, NULL, NULL, ws, n), 0);
  assert_memory_equal(y, x, ne * sizeof(float));
  assert_int_equal(blockc_backward_ex(m, ins, outs, dys, dp, dxs, NULL, &on, ws, n), 0);
  long zeros = 0;
  for (size_t i = 0; i < ne; i++) {
    bool keep = doc_u(5, 6, 0, i) >= 0.4;
    assert_true(y[i] == (keep ? x[i] * (float)(1 / 0.6) : 0.0f));
    assert_true(dx[i] == (keep ? dy[i] * (float)(1 / 0.6) : 0.0f));
    zeros += !keep;
  }
  assert_true(zeros > 0 && zeros < (long)ne);
  assert_int_equal(blockc_backward_ex(NULL, ins, outs, dys, dp, dxs, NULL, &on, ws, n), BLOCKC_EUSAGE);
  free(ws);
  free(x);
  free(y);
  free(dy);
  free(dx);
  blockc_delete(m);
}

// --- the CLI: blockc grad --dropout-seed S --step K on every backend ---------------------
// The reference (interp) and one other backend write the same gradients (the same masks).
static void cli_grad(const char *other) {
  char dir[256], graph[400], gout[2][400], out[8192], err[8192];
  tu_mktmpdir(dir, sizeof dir, "dropcli");
  snprintf(graph, sizeof graph, "%s/md.blk", dir);
  tu_write_bytes(graph, DROP_NET, strlen(DROP_NET));
  const char *backends[2] = {"interp", other};
  for (int b = 0; b < 2; b++) {
    snprintf(gout[b], sizeof gout[b], "%s/g_%s.safetensors", dir, backends[b]);
    char *argv[] = {(char *)tu_blockc(), "grad", graph, "-o", gout[b], "--backend",
                    (char *)backends[b], "--dropout-seed", "12", "--step", "3", "--length", "T=5",
                    NULL};
    int rc = tu_spawn(argv, out, sizeof out, err, sizeof err);
    if (rc) fail_msg("blockc grad --backend %s: %s", backends[b], err);
    assert_non_null(strstr(out, "dropout: active, seed 12 step 3"));
  }
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, DROP_NET);
  assert_non_null(g);
  bc_st_file *f[2];
  for (int b = 0; b < 2; b++) assert_int_equal(bcS_open(ctx, gout[b], &f[b]), BC_OK);
  for (int p = 0; p < g->nparams; p++) {
    int64_t n = bc_shape_numel(&g->params[p].shape);
    float *a[2] = {fbuf(n), fbuf(n)};
    for (int b = 0; b < 2; b++) {
      const bc_st_tensor *t = bcS_find(f[b], g->params[p].name);
      assert_non_null(t);
      assert_int_equal(bcS_read_f32(ctx, f[b], t, a[b]), BC_OK);
    }
    double m = tu_max_abs(a[0], (size_t)n);
    if (!(tu_max_abs_diff(a[0], a[1], (size_t)n) <= 1e-4 * (m > 1e-3 ? m : 1e-3)))
      fail_msg("%s: d %s differs from interp's", other, g->params[p].name);
    free(a[0]);
    free(a[1]);
  }
  for (int b = 0; b < 2; b++) bcS_close(f[b]);
  // Without the flags: no dropout, and another loss.
  char *argv[] = {(char *)tu_blockc(), "grad", graph, "-o", gout[0], "--backend", "interp",
                  "--length", "T=5", NULL};
  assert_int_equal(tu_spawn(argv, out, sizeof out, err, sizeof err), 0);
  assert_null(strstr(out, "dropout: active"));
  bc_ctx_free(ctx);
  tu_rm_rf(dir);
}

static void test_cli_grad_jit(void **state) {
  (void)state;
  cli_grad("jit");
}

static void test_cli_grad_aot(void **state) {
  (void)state;
  cli_grad("aot");
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_generator_is_documented),
      cmocka_unit_test(test_rate_and_scale),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_every_backend_same_mask),
      cmocka_unit_test(test_inference_never_drops),
      cmocka_unit_test(test_gradcheck_fixed_mask),
      cmocka_unit_test(test_layers),
      cmocka_unit_test(test_attention_variants),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_api),
      cmocka_unit_test(test_cli_grad_jit),
  };
  const struct CMUnitTest lng[] = {cmocka_unit_test(test_cli_grad_aot)};
  return tu_run_tiers(quick, lng);
}
