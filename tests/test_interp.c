// test_interp.c — the reference interpreter against numbers worked out by
// hand.
//
// The interpreter is the oracle for everything else, so its own tests may
// not lean on another implementation of the same loops: each op is checked
// on cases small enough that the expected values are derived in a comment
// and written as literals.  Then the fused ops are checked against their
// unfused compositions (bit for bit), batches against single sequences,
// and one whole Post-LN layer against a deliberately naive float
// computation written below (the -inf mask, the textbook formulas).
// Graphs are built by hand with the IR builder, not parsed.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------------------
// A tiny graph builder: values, params with their data, one-call nodes.
// ---------------------------------------------------------------------------

#define TB_MAX_PARAMS 128

typedef struct tb {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  float *wp[TB_MAX_PARAMS];  // weights by param id (borrowed, not owned)
  int nparam_names;
} tb;

static bc_shape shp2(int64_t t, int64_t d) { return (bc_shape){.rank = 2, .d = {t, d}}; }
static bc_shape shp3(int64_t b, int64_t t, int64_t d) {
  return (bc_shape){.rank = 3, .d = {b, t, d}};
}

static tb *tb_new(bc_shape in_shape) {
  tb *t = calloc(1, sizeof *t);
  assert_non_null(t);
  t->ctx = tu_ctx(&t->errs);
  t->g = bcI_new(t->ctx);
  assert_non_null(t->g);
  t->g->input = bcI_add_value(t->g, "x", in_shape, BC_VAL_INPUT);
  t->g->output = t->g->input;
  return t;
}

static void tb_free(tb *t) {
  bc_ctx_free(t->ctx);
  free(t);
}

static int tb_val(tb *t, bc_shape s) {
  int v = bcI_add_value(t->g, "", s, BC_VAL_TEMP);
  assert_true(v >= 0);
  return v;
}

// A parameter of rank 1 ([d0], d1 == 0) or 2; NULL data means "absent" (-1).
static int tb_param(tb *t, int64_t d0, int64_t d1, float *data) {
  if (!data) return -1;
  char name[32];
  snprintf(name, sizeof name, "p%d", t->nparam_names++);
  bc_shape s = {.rank = d1 ? 2 : 1, .d = {d0, d1}};
  int id = bcI_add_param(t->g, name, s, (bc_loc){0});
  assert_true(id >= 0 && id < TB_MAX_PARAMS);
  t->wp[id] = data;
  return id;
}

// A node with the given inputs and nout new output values of in0's shape.  Returns the node id.
static int tb_node(tb *t, bc_op op, int nin, int in0, int in1, int in2, int nout) {
  int id = bcI_add_node(t->g, op, (bc_loc){0});
  assert_true(id >= 0);
  bc_shape s = t->g->vals[in0].shape;
  bc_node *n = &t->g->nodes[id];
  int ins[3] = {in0, in1, in2};
  n->nin = nin;
  for (int k = 0; k < nin; k++) n->in[k] = ins[k];
  n->nout = nout;
  for (int k = 0; k < nout; k++) n->out[k] = tb_val(t, s);
  return id;
}

static bc_node *N(tb *t, int id) { return &t->g->nodes[id]; }
static int64_t D_of(tb *t, int v) {
  const bc_shape *s = &t->g->vals[v].shape;
  return s->d[s->rank - 1];
}

static int tb_add(tb *t, int a, int b, double alpha, double beta) {
  int id = tb_node(t, BC_OP_ADD, 2, a, b, -1, 1);
  N(t, id)->alpha = alpha;
  N(t, id)->beta = beta;
  return N(t, id)->out[0];
}

static int tb_ln(tb *t, int x, float *w, float *b, double eps) {
  int64_t d = D_of(t, x);
  int pw = tb_param(t, d, 0, w), pb = tb_param(t, d, 0, b);
  int id = tb_node(t, BC_OP_LAYERNORM, 1, x, -1, -1, 1);
  N(t, id)->param[0] = pw;
  N(t, id)->param[1] = pb;
  N(t, id)->eps = eps;
  return N(t, id)->out[0];
}

static int tb_attn(tb *t, int x, int64_t heads, bool causal, float *w_in, float *b_in,
                   float *w_out, float *b_out) {
  int64_t d = D_of(t, x);
  int p0 = tb_param(t, 3 * d, d, w_in), p1 = tb_param(t, 3 * d, 0, b_in);
  int p2 = tb_param(t, d, d, w_out), p3 = tb_param(t, d, 0, b_out);
  int id = tb_node(t, BC_OP_ATTENTION, 1, x, -1, -1, 1);
  bc_node *n = N(t, id);
  n->heads = heads;
  n->causal = causal;
  n->param[0] = p0, n->param[1] = p1, n->param[2] = p2, n->param[3] = p3;
  return n->out[0];
}

static int tb_ffn(tb *t, int x, int64_t f, bc_act act, float *w1, float *b1, float *w2,
                  float *b2) {
  int64_t d = D_of(t, x);
  int p0 = tb_param(t, f, d, w1), p1 = tb_param(t, f, 0, b1);
  int p2 = tb_param(t, d, f, w2), p3 = tb_param(t, d, 0, b2);
  int id = tb_node(t, BC_OP_FFN, 1, x, -1, -1, 1);
  bc_node *n = N(t, id);
  n->hidden = f;
  n->act = act;
  n->param[0] = p0, n->param[1] = p1, n->param[2] = p2, n->param[3] = p3;
  return n->out[0];
}

// Fused s = alpha*a + beta*b; LN(s). *sum gets out1 (the sum) or -1.
static int tb_add_ln(tb *t, int a, int b, double alpha, double beta, float *w, float *bias,
                     double eps, bool want_sum, int *sum) {
  int64_t d = D_of(t, a);
  int pw = tb_param(t, d, 0, w), pb = tb_param(t, d, 0, bias);
  int id = tb_node(t, BC_OP_ADD_LN, 2, a, b, -1, want_sum ? 2 : 1);
  bc_node *n = N(t, id);
  n->alpha = alpha, n->beta = beta, n->eps = eps;
  n->param[0] = pw, n->param[1] = pb;
  if (sum) *sum = want_sum ? n->out[1] : -1;
  return n->out[0];
}

// ResiDual: *xd_out = alpha*xd + beta*u; *xa_out = LN(alpha2*xa + beta2*u).
static void tb_dual(tb *t, int xd, int xa, int u, double alpha, double beta, double alpha2,
                    double beta2, float *w, float *bias, double eps, int *xd_out, int *xa_out) {
  int64_t d = D_of(t, xd);
  int pw = tb_param(t, d, 0, w), pb = tb_param(t, d, 0, bias);
  int id = tb_node(t, BC_OP_DUAL_ADD_LN, 3, xd, xa, u, 2);
  bc_node *n = N(t, id);
  n->alpha = alpha, n->beta = beta, n->alpha2 = alpha2, n->beta2 = beta2, n->eps = eps;
  n->param[0] = pw, n->param[1] = pb;
  *xd_out = n->out[0];
  *xa_out = n->out[1];
}

// Verifies the graph, runs the interpreter with output `out`, expects OK.
// Makes `out` the graph's only output (the lists are re-derived by verify).
static void tb_set_output(tb *t, int out) {
  t->g->noutputs = 0;
  t->g->output = out;
}

static void tb_run(tb *t, int out, const float *x, float *y) {
  tb_set_output(t, out);
  t->g->vals[out].is_output = true;
  assert_int_equal(bcI_verify(t->g), BC_OK);
  bc_weights w = {.n = t->g->nparams, .p = t->wp};
  int st = bcR_run(t->ctx, t->g, &w, x, y);
  if (st != BC_OK) print_error("bcR_run: %s\n", t->errs.buf);
  assert_int_equal(st, BC_OK);
}

// Runs without verifying (for graphs bcI_verify would reject) and returns
// the status.
static int tb_try(tb *t, int out, const float *x, float *y) {
  tb_set_output(t, out);
  bc_weights w = {.n = t->g->nparams, .p = t->wp};
  return bcR_run(t->ctx, t->g, &w, x, y);
}

static void expect_near(const float *got, const double *want, int n, double tol) {
  for (int i = 0; i < n; i++) {
    if (!(fabs((double)got[i] - want[i]) <= tol)) {
      print_error("element %d: got %.9g, want %.17g (tol %g)\n", i, got[i], want[i], tol);
      fail();
    }
  }
}

static void expect_same(const float *a, const float *b, int64_t n) {
  if (memcmp(a, b, (size_t)n * sizeof(float)) != 0) {
    for (int64_t i = 0; i < n; i++)
      if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
        print_error("first difference at %lld: %.9g vs %.9g\n", (long long)i, a[i], b[i]);
    fail();
  }
}

// Deterministic "random" floats in [-1, 1) (a 32-bit LCG; tests only).
static void fill(float *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 8) / 8388608.0 - 1.0);
  }
}

// ---------------------------------------------------------------------------
// Add and LayerNorm
// ---------------------------------------------------------------------------

static void test_add_alpha_beta(void **state) {
  (void)state;
  // x2 = Add(x, x) = 2x, then y = Add(x2, x, alpha = 2, beta = -0.5)
  // = 2*2x - 0.5*x = 3.5x.  Swapping alpha and beta would give
  // -0.5*2x + 2*x = x instead, so the order of the scales is pinned down.
  // x = [[1, 2, 3], [-4, 0.5, 10]] -> [[3.5, 7, 10.5], [-14, 1.75, 35]].
  tb *t = tb_new(shp2(2, 3));
  int x = t->g->input;
  int x2 = tb_add(t, x, x, 1, 1);
  int y = tb_add(t, x2, x, 2, -0.5);
  float in[6] = {1, 2, 3, -4, 0.5f, 10};
  float out[6];
  tb_run(t, y, in, out);
  double want[6] = {3.5, 7, 10.5, -14, 1.75, 35};
  expect_near(out, want, 6, 0);
  tb_free(t);
}

static void test_layernorm_1234(void **state) {
  (void)state;
  // Row [1, 2, 3, 4]: mean 2.5, deviations -1.5 -0.5 0.5 1.5, biased
  // variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.  With eps = 0:
  // -1.5/sqrt(1.25) = -1.3416407864998738, -0.5/sqrt(1.25) = -0.4472135954999579.
  // No affine parameters (slots -1).
  tb *t = tb_new(shp2(1, 4));
  int y = tb_ln(t, t->g->input, NULL, NULL, 0.0);
  float in[4] = {1, 2, 3, 4}, out[4];
  tb_run(t, y, in, out);
  double want[4] = {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579,
                    1.3416407864998738};
  expect_near(out, want, 4, 1e-7);
  tb_free(t);
}

static void test_layernorm_eps_affine(void **state) {
  (void)state;
  // Same row, eps = 1e-5 inside the sqrt: d/sqrt(1.25001) gives
  // -1.3416354199689269, -0.447211806656309, ... Then * w + b with
  // w = [2, 1, -1, 0.5], b = [0, 1, 2, 3]:
  //   -2.6832708399378538, 0.552788193343691, 1.552788193343691, 3.6708177099844635
  tb *t = tb_new(shp2(1, 4));
  float w[4] = {2, 1, -1, 0.5f}, b[4] = {0, 1, 2, 3};
  int y = tb_ln(t, t->g->input, w, b, 1e-5);
  float in[4] = {1, 2, 3, 4}, out[4];
  tb_run(t, y, in, out);
  double want[4] = {-2.6832708399378538, 0.552788193343691, 1.552788193343691,
                    3.6708177099844635};
  expect_near(out, want, 4, 1e-6);
  tb_free(t);
}

static void test_layernorm_weight_only_and_bias_only(void **state) {
  (void)state;
  // Either affine slot may be absent on its own. Row [1, 2, 3, 4], eps 0:
  // weight only, w = 2: 2 * [-1.3416..., -0.4472..., 0.4472..., 1.3416...];
  // then bias only, b = 1 on that: LN of the doubled row is the same unit
  // row again (LN is scale invariant), plus 1.
  tb *t = tb_new(shp2(1, 4));
  float w[4] = {2, 2, 2, 2}, b[4] = {1, 1, 1, 1};
  int y1 = tb_ln(t, t->g->input, w, NULL, 0.0);
  int y2 = tb_ln(t, y1, NULL, b, 0.0);
  float in[4] = {1, 2, 3, 4}, out[4];
  tb_run(t, y1, in, out);
  double want1[4] = {-2.6832815729997477, -0.8944271909999159, 0.8944271909999159,
                     2.6832815729997477};
  expect_near(out, want1, 4, 1e-6);
  tb_run(t, y2, in, out);
  double want2[4] = {1 - 1.3416407864998738, 1 - 0.4472135954999579, 1 + 0.4472135954999579,
                     1 + 1.3416407864998738};
  expect_near(out, want2, 4, 1e-6);
  tb_free(t);
}

static void test_layernorm_constant_row_is_bias(void **state) {
  (void)state;
  // A constant row has zero deviation, so the output is exactly the bias,
  // whatever the weight and the constant (bitwise, not approximately).
  // Rank 3 [2, 2, 4] so it also covers B > 1 rows.
  tb *t = tb_new(shp3(2, 2, 4));
  float w[4] = {3, -7, 0.1f, 1e6f}, b[4] = {0.1f, -0.2f, 0.3f, 1e-3f};
  int y = tb_ln(t, t->g->input, w, b, 1e-5);
  float in[16], out[16];
  float consts[4] = {-3.25f, 0.1f, 12345.678f, 1e-20f};
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < 4; i++) in[r * 4 + i] = consts[r];
  tb_run(t, y, in, out);
  for (int r = 0; r < 4; r++) expect_same(out + r * 4, b, 4);
  tb_free(t);
}

static void test_layernorm_nonfinite_propagates(void **state) {
  (void)state;
  // A row holding inf or NaN becomes NaN (the mean is non-finite), without
  // crashing or touching the other rows: row 1 is [1, 2, 3, 4] again.
  tb *t = tb_new(shp2(3, 4));
  int y = tb_ln(t, t->g->input, NULL, NULL, 0.0);
  float in[12] = {1, INFINITY, 3, 4, 1, 2, 3, 4, NAN, 0, 0, 0}, out[12];
  tb_run(t, y, in, out);
  for (int i = 0; i < 4; i++) assert_true(isnan(out[i]));
  for (int i = 8; i < 12; i++) assert_true(isnan(out[i]));
  double want[4] = {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579,
                    1.3416407864998738};
  expect_near(out + 4, want, 4, 1e-7);
  tb_free(t);
}

// ---------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------

// [Wq; Wk; Wv] = [I; I; I] for D = 2, and identity out projection.
static float eye3x2[12] = {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1};
static float eye2[4] = {1, 0, 0, 1};

static void test_attention_one_head(void **state) {
  (void)state;
  // D = 2, H = 1, T = 2, all projections identity, no biases: q = k = v = x
  // with x = [[1, 0], [0, 1]].  scores = x x^T / sqrt(2) = [[s, 0], [0, s]]
  // with s = 1/sqrt(2).  Row 0's softmax: [p, 1-p] with
  // p = e^s / (e^s + 1) = sigmoid(1/sqrt 2) = 0.6697615493266569; out row 0
  // = p*[1,0] + (1-p)*[0,1] = [p, 1-p]; row 1 by symmetry [1-p, p].
  // Causal: row 0 sees only key 0, so it is exactly v0 = [1, 0]; row 1 is
  // unchanged.
  for (int causal = 0; causal <= 1; causal++) {
    tb *t = tb_new(shp2(2, 2));
    int y = tb_attn(t, t->g->input, 1, causal, eye3x2, NULL, eye2, NULL);
    float in[4] = {1, 0, 0, 1}, out[4];
    tb_run(t, y, in, out);
    double p = 0.6697615493266569, q = 0.3302384506733431;
    double want[2][4] = {{p, q, q, p}, {1, 0, q, p}};
    expect_near(out, want[causal], 4, 1e-7);
    if (causal) assert_true(out[0] == 1.0f && out[1] == 0.0f);  // exactly zero weight on key 1
    tb_free(t);
  }
}

static void test_attention_qkv_row_order(void **state) {
  (void)state;
  // in_proj_weight rows are [Wq; Wk; Wv]. Take Wq = [[1,0],[0,0]],
  // Wk = [[0,1],[0,0]], Wv = I, x = [[1,0],[0,1]]:
  //   q0 = [1,0], q1 = [0,0];  k0 = [0,0], k1 = [1,0];  v = x.
  //   scores/sqrt2: row 0 = [0, 1/sqrt2], row 1 = [0, 0].
  // Row 0: weights [1-p, p] with p = 0.6697615493266569 -> out [1-p, p];
  // row 1: uniform -> [0.5, 0.5].  Swapping q and k would make row 0
  // uniform instead, and computing k_i . q_j would move the peak.
  float w_in[12] = {1, 0, 0, 0, /* Wk */ 0, 1, 0, 0, /* Wv */ 1, 0, 0, 1};
  tb *t = tb_new(shp2(2, 2));
  int y = tb_attn(t, t->g->input, 1, false, w_in, NULL, eye2, NULL);
  float in[4] = {1, 0, 0, 1}, out[4];
  tb_run(t, y, in, out);
  double want[4] = {0.3302384506733431, 0.6697615493266569, 0.5, 0.5};
  expect_near(out, want, 4, 1e-7);
  tb_free(t);
}

static void test_attention_two_heads_biases(void **state) {
  (void)state;
  // D = 2, H = 2 so dh = 1 and the scale is 1/sqrt(1) = 1. Identity
  // in-projection with bias [0,0 | 0,0 | 1,1] (only v is shifted), out
  // projection swaps the two columns and adds [10, 20].  x = [[1,2],[3,4]].
  // Head 0 sees column 0: q = k = [1, 3], v = [2, 4] (v shifted by 1).
  //   row 0 scores [1, 3]: weights sigmoid(-2), sigmoid(2) = 0.8807970779778823
  //     out = 2 + 2*0.8807970779778823 = 3.7615941559557644
  //   row 1 scores [3, 9]: out = 2 + 2*sigmoid(6) = 3.9950547536867305
  // Head 1 sees column 1: q = k = [2, 4], v = [3, 5].
  //   row 0 scores [4, 8]:  out = 3 + 2*sigmoid(4) = 4.964027580075817
  //   row 1 scores [8, 16]: out = 3 + 2*sigmoid(8) = 4.9993292997390673
  // y = [cat1 + 10, cat0 + 20].
  // Causal: row 0 = v0 = [2, 3] per head, row 1 unchanged.
  float b_in[6] = {0, 0, 0, 0, 1, 1}, w_out[4] = {0, 1, 1, 0}, b_out[2] = {10, 20};
  for (int causal = 0; causal <= 1; causal++) {
    tb *t = tb_new(shp2(2, 2));
    int y = tb_attn(t, t->g->input, 2, causal, eye3x2, b_in, w_out, b_out);
    float in[4] = {1, 2, 3, 4}, out[4];
    tb_run(t, y, in, out);
    double want[2][4] = {
        {14.964027580075817, 23.7615941559557644, 14.9993292997390673, 23.9950547536867305},
        {13, 22, 14.9993292997390673, 23.9950547536867305}};
    expect_near(out, want[causal], 4, 1e-5);
    tb_free(t);
  }
}

static void test_attention_batches_independent(void **state) {
  (void)state;
  // B = 3 sequences through one attention: each batch's output must equal
  // the same graph run on that sequence alone (rank 2, B = 1) — bit for bit,
  // since the same loops run in the same order.
  enum { B = 3, T = 4, D = 6, H = 3 };
  float w_in[3 * D * D], b_in[3 * D], w_out[D * D], b_out[D], x[B * T * D];
  fill(w_in, 3 * D * D, 1), fill(b_in, 3 * D, 2), fill(w_out, D * D, 3), fill(b_out, D, 4);
  fill(x, B * T * D, 5);
  for (int causal = 0; causal <= 1; causal++) {
    tb *tbig = tb_new(shp3(B, T, D));
    int y = tb_attn(tbig, tbig->g->input, H, causal, w_in, b_in, w_out, b_out);
    float big[B * T * D];
    tb_run(tbig, y, x, big);
    tb *tone = tb_new(shp2(T, D));
    int y1 = tb_attn(tone, tone->g->input, H, causal, w_in, b_in, w_out, b_out);
    for (int b = 0; b < B; b++) {
      float one[T * D];
      tb_run(tone, y1, x + b * T * D, one);
      expect_same(big + b * T * D, one, T * D);
    }
    tb_free(tbig);
    tb_free(tone);
  }
}

// ---------------------------------------------------------------------------
// FFN
// ---------------------------------------------------------------------------

static void test_ffn_activations(void **state) {
  (void)state;
  // D = 1, F = 2, T = 3, x = [-1, 1, 2]. W1 = [[1], [-1]], b1 = [0, 0.5]
  // gives hidden [x, 0.5 - x]; W2 = [[1, 2]], b2 = [0.25] gives
  //   y = act(x) + 2*act(0.5 - x) + 0.25.
  // relu:  x=-1: 0 + 2*1.5 + 0.25 = 3.25;  x=1: 1 + 0 + 0.25 = 1.25;  x=2: 2.25.
  // gelu (exact, gelu(v) = v*Phi(v)): gelu(1) = 0.8413447460685429,
  //   gelu(-1) = gelu(1) - 1 = -0.15865525393145707, gelu(1.5) = 1.399789198096713,
  //   gelu(-0.5) = -0.15426876936299344, gelu(2) = 1.9544997361036416,
  //   gelu(-1.5) = -0.10021080190328713, so
  //   y = [2.890923142261969, 0.782807207342556, 2.0040781322970673].
  // gelu_tanh: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), e.g.
  //   gelu_tanh(1) = 0.8411919906082768, giving
  //   y = [2.890335144568742, 0.7826200102585646, 2.003740848048241].
  float w1[2] = {1, -1}, b1[2] = {0, 0.5f}, w2[2] = {1, 2}, b2[1] = {0.25f};
  double want[BC_ACT_COUNT][3] = {
      [BC_ACT_RELU] = {3.25, 1.25, 2.25},
      [BC_ACT_GELU] = {2.890923142261969, 0.782807207342556, 2.0040781322970673},
      [BC_ACT_GELU_TANH] = {2.890335144568742, 0.7826200102585646, 2.003740848048241},
  };
  for (int act = 0; act <= BC_ACT_GELU_TANH; act++) {  // the ungated ones
    tb *t = tb_new(shp2(3, 1));
    int y = tb_ffn(t, t->g->input, 2, (bc_act)act, w1, b1, w2, b2);
    float in[3] = {-1, 1, 2}, out[3];
    tb_run(t, y, in, out);
    expect_near(out, want[act], 3, 1e-6);
    tb_free(t);
  }
}

static void test_ffn_gelu_at_one_no_bias(void **state) {
  (void)state;
  // Identity-ish FFN without biases: D = F = 1, W1 = W2 = [[1]]:
  // y = gelu(x), so gelu(1) = 0.8413447460685429 and gelu(0) = 0,
  // gelu(-1) = -0.15865525393145707.  B = 3 so batches are also walked.
  float one[1] = {1};
  tb *t = tb_new(shp3(3, 1, 1));
  int y = tb_ffn(t, t->g->input, 1, BC_ACT_GELU, one, NULL, one, NULL);
  float in[3] = {1, 0, -1}, out[3];
  tb_run(t, y, in, out);
  double want[3] = {0.8413447460685429, 0, -0.15865525393145707};
  expect_near(out, want, 3, 1e-7);
  tb_free(t);
}

// ---------------------------------------------------------------------------
// Fused ops
// ---------------------------------------------------------------------------

static void test_add_ln_by_hand(void **state) {
  (void)state;
  // s = 2*a - 1*b with a = [1, 2, 3, 4], b = [1, 2, 3, 4] -> s = a =
  // [1, 2, 3, 4]; LN (eps 0, no affine) -> the familiar
  // [-1.3416..., -0.4472..., 0.4472..., 1.3416...]; out1 is s itself.
  tb *t = tb_new(shp2(1, 4));
  int sum;
  int y = tb_add_ln(t, t->g->input, t->g->input, 2, -1, NULL, NULL, 0.0, true, &sum);
  float in[4] = {1, 2, 3, 4}, out[4];
  tb_run(t, y, in, out);
  double want[4] = {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579,
                    1.3416407864998738};
  expect_near(out, want, 4, 1e-7);
  tb_run(t, sum, in, out);
  expect_same(out, in, 4);
  tb_free(t);
}

static void test_add_ln_equals_add_then_ln(void **state) {
  (void)state;
  // Fused AddLayerNorm == Add followed by LayerNorm, bit for bit, for the
  // normalized output and for the optional sum output; with and without
  // the sum output.  The second operand is the input passed through an
  // FFN so the two addends differ.
  enum { B = 2, T = 3, D = 8, F = 5 };
  float w1[F * D], b1[F], w2[D * F], b2[D], lw[D], lb[D], x[B * T * D];
  fill(w1, F * D, 11), fill(b1, F, 12), fill(w2, D * F, 13), fill(b2, D, 14);
  fill(lw, D, 15), fill(lb, D, 16), fill(x, B * T * D, 17);
  float ref_y[B * T * D], ref_s[B * T * D], got[B * T * D];

  tb *t = tb_new(shp3(B, T, D));
  int u = tb_ffn(t, t->g->input, F, BC_ACT_GELU, w1, b1, w2, b2);
  int s = tb_add(t, t->g->input, u, 0.7, 1.3);
  int y = tb_ln(t, s, lw, lb, 1e-5);
  tb_run(t, y, x, ref_y);
  tb_run(t, s, x, ref_s);
  tb_free(t);

  for (int want_sum = 0; want_sum <= 1; want_sum++) {
    t = tb_new(shp3(B, T, D));
    u = tb_ffn(t, t->g->input, F, BC_ACT_GELU, w1, b1, w2, b2);
    int sum;
    y = tb_add_ln(t, t->g->input, u, 0.7, 1.3, lw, lb, 1e-5, want_sum, &sum);
    tb_run(t, y, x, got);
    expect_same(got, ref_y, B * T * D);
    if (want_sum) {
      tb_run(t, sum, x, got);
      expect_same(got, ref_s, B * T * D);
    }
    tb_free(t);
  }
}

static void test_dual_add_ln_by_hand(void **state) {
  (void)state;
  // The three operands are made from the input by Adds with known
  // coefficients, so every number below is exact.
  // x = [1, 2]. xd = x, xa = Add(x, x, 1, -1) = [0, 0], u = Add(x, x, 1, 0.5)
  // = [1.5, 3].  alpha = 2, beta = 0.5: out0 = 2*[1,2] + 0.5*[1.5,3]
  // = [2.75, 5.5].  alpha2 = 1, beta2 = 2: 1*[0,0] + 2*[1.5,3] = [3, 6];
  // LN with eps 0: mean 4.5, deviations -1.5, 1.5, variance 2.25, sd 1.5
  // -> [-1, 1]; affine w = [2, 3], b = [0.5, -0.5] -> [-1.5, 2.5].
  tb *t = tb_new(shp2(1, 2));
  int x = t->g->input;
  int xa = tb_add(t, x, x, 1, -1);
  int u = tb_add(t, x, x, 1, 0.5);
  float w[2] = {2, 3}, b[2] = {0.5f, -0.5f};
  int o0, o1;
  tb_dual(t, x, xa, u, 2, 0.5, 1, 2, w, b, 0.0, &o0, &o1);
  float in[2] = {1, 2}, out[2];
  tb_run(t, o0, in, out);
  double want0[2] = {2.75, 5.5};
  expect_near(out, want0, 2, 0);
  tb_run(t, o1, in, out);
  double want1[2] = {-1.5, 2.5};
  expect_near(out, want1, 2, 1e-7);
  tb_free(t);
}

static void test_dual_add_ln_equals_unfused(void **state) {
  (void)state;
  // DualAddLayerNorm(xd, xa, u) == (Add(xd, u, alpha, beta),
  // LayerNorm(Add(xa, u, alpha2, beta2))) bit for bit, with all four
  // scales distinct so any mix-up shows.
  enum { B = 2, T = 3, D = 8, F = 6 };
  float w1[F * D], b1[F], w2[D * F], b2[D], lw[D], lb[D], x[B * T * D];
  fill(w1, F * D, 21), fill(b1, F, 22), fill(w2, D * F, 23), fill(b2, D, 24);
  fill(lw, D, 25), fill(lb, D, 26), fill(x, B * T * D, 27);
  const double al = 1.0, be = 0.05, al2 = 0.9, be2 = 1.7;
  float ref0[B * T * D], ref1[B * T * D], got[B * T * D];

  // xd = 0.05 * x (ResiDual's scaled stream), xa = x, u = FFN(x).
  tb *t = tb_new(shp3(B, T, D));
  int x0 = t->g->input;
  int xd = tb_add(t, x0, x0, 0.05, 0);
  int u = tb_ffn(t, x0, F, BC_ACT_RELU, w1, b1, w2, b2);
  int d_out = tb_add(t, xd, u, al, be);
  int s = tb_add(t, x0, u, al2, be2);
  int a_out = tb_ln(t, s, lw, lb, 1e-5);
  tb_run(t, d_out, x, ref0);
  tb_run(t, a_out, x, ref1);
  tb_free(t);

  t = tb_new(shp3(B, T, D));
  x0 = t->g->input;
  xd = tb_add(t, x0, x0, 0.05, 0);
  u = tb_ffn(t, x0, F, BC_ACT_RELU, w1, b1, w2, b2);
  int o0, o1;
  tb_dual(t, xd, x0, u, al, be, al2, be2, lw, lb, 1e-5, &o0, &o1);
  tb_run(t, o0, x, got);
  expect_same(got, ref0, B * T * D);
  tb_run(t, o1, x, got);
  expect_same(got, ref1, B * T * D);
  tb_free(t);
}

// ---------------------------------------------------------------------------
// Whole graphs
// ---------------------------------------------------------------------------

static void test_identity_graph(void **state) {
  (void)state;
  // No nodes; the output is the input value itself.
  tb *t = tb_new(shp3(2, 2, 3));
  float in[12], out[12];
  fill(in, 12, 31);
  tb_run(t, t->g->input, in, out);
  expect_same(out, in, 12);
  tb_free(t);
}

static void test_ignores_memory_plan(void **state) {
  (void)state;
  // The interpreter must not look at offsets or aliases: a nonsense plan
  // (everything at offset 0, aliased to the input) changes nothing.
  enum { T = 3, D = 4 };
  float lw[D], lb[D], x[T * D], a[T * D], b[T * D];
  fill(lw, D, 41), fill(lb, D, 42), fill(x, T * D, 43);
  tb *t = tb_new(shp2(T, D));
  int s = tb_add(t, t->g->input, t->g->input, 1, 2);
  int y = tb_ln(t, s, lw, lb, 1e-5);
  tb_run(t, y, x, a);
  for (int v = 0; v < t->g->nvals; v++) {
    t->g->vals[v].offset = 0;
    t->g->vals[v].alias = t->g->input;
  }
  t->g->planned = true;
  t->g->arena_floats = 1;
  tb_run(t, y, x, b);
  expect_same(a, b, T * D);
  tb_free(t);
}

// A deliberately naive Post-LN layer, written from the PyTorch formulas
// (nn.TransformerEncoderLayer, norm_first=False, batch_first=True) with
// no code shared with the interpreter: float storage everywhere, the causal
// mask as -inf added to the scores, relu.
//   x1 = LN1(x + SA(x));  y = LN2(x1 + W2 relu(W1 x1 + b1) + b2)
typedef struct naive_layer {
  int B, T, D, H, F;
  const float *w_in, *b_in, *w_out, *b_out, *w1, *b1, *w2, *b2, *g1, *be1, *g2, *be2;
} naive_layer;

static void naive_ln(int rows, int d, float *x, const float *g, const float *b) {
  for (int r = 0; r < rows; r++) {
    float *v = x + r * d;
    double mean = 0, var = 0;
    for (int i = 0; i < d; i++) mean += v[i];
    mean /= d;
    for (int i = 0; i < d; i++) var += (v[i] - mean) * (v[i] - mean);
    var /= d;
    for (int i = 0; i < d; i++) v[i] = (float)((v[i] - mean) / sqrt(var + 1e-5) * g[i] + b[i]);
  }
}

static void naive_post_ln(const naive_layer *L, const float *x, float *y) {
  int B = L->B, T = L->T, D = L->D, H = L->H, F = L->F, dh = D / H;
  float *q = calloc((size_t)T * D, 4), *k = calloc((size_t)T * D, 4), *v = calloc((size_t)T * D, 4);
  float *cat = calloc((size_t)T * D, 4), *x1 = calloc((size_t)B * T * D, 4);
  float *h = calloc((size_t)F, 4), *sc = calloc((size_t)T, 4);
  assert_true(q && k && v && cat && x1 && h && sc);
  for (int b = 0; b < B; b++) {
    const float *xb = x + b * T * D;
    for (int t = 0; t < T; t++)
      for (int o = 0; o < D; o++) {
        double aq = L->b_in[o], ak = L->b_in[D + o], av = L->b_in[2 * D + o];
        for (int c = 0; c < D; c++) {
          aq += (double)xb[t * D + c] * L->w_in[o * D + c];
          ak += (double)xb[t * D + c] * L->w_in[(D + o) * D + c];
          av += (double)xb[t * D + c] * L->w_in[(2 * D + o) * D + c];
        }
        q[t * D + o] = (float)aq, k[t * D + o] = (float)ak, v[t * D + o] = (float)av;
      }
    for (int hd = 0; hd < H; hd++)
      for (int i = 0; i < T; i++) {
        float mx = -INFINITY;
        for (int j = 0; j < T; j++) {
          double s = 0;
          for (int c = 0; c < dh; c++) s += (double)q[i * D + hd * dh + c] * k[j * D + hd * dh + c];
          sc[j] = (float)(s / sqrt((double)dh)) + (j > i ? -INFINITY : 0.0f);  // causal mask
          if (sc[j] > mx) mx = sc[j];
        }
        double z = 0;
        for (int j = 0; j < T; j++) z += exp((double)sc[j] - mx);
        for (int c = 0; c < dh; c++) {
          double acc = 0;
          for (int j = 0; j < T; j++) acc += exp((double)sc[j] - mx) / z * v[j * D + hd * dh + c];
          cat[i * D + hd * dh + c] = (float)acc;
        }
      }
    for (int t = 0; t < T; t++)
      for (int o = 0; o < D; o++) {
        double a = L->b_out[o];
        for (int c = 0; c < D; c++) a += (double)cat[t * D + c] * L->w_out[o * D + c];
        x1[(b * T + t) * D + o] = xb[t * D + o] + (float)a;  // residual
      }
  }
  naive_ln(B * T, D, x1, L->g1, L->be1);
  for (int r = 0; r < B * T; r++) {
    for (int f = 0; f < F; f++) {
      double a = L->b1[f];
      for (int c = 0; c < D; c++) a += (double)x1[r * D + c] * L->w1[f * D + c];
      h[f] = a > 0 ? (float)a : 0.0f;
    }
    for (int o = 0; o < D; o++) {
      double a = L->b2[o];
      for (int f = 0; f < F; f++) a += (double)h[f] * L->w2[o * F + f];
      y[r * D + o] = x1[r * D + o] + (float)a;
    }
  }
  naive_ln(B * T, D, y, L->g2, L->be2);
  free(q), free(k), free(v), free(cat), free(x1), free(h), free(sc);
}

static void test_post_ln_layer_matches_naive(void **state) {
  (void)state;
  enum { B = 2, T = 5, D = 8, H = 2, F = 16 };
  static float w_in[3 * D * D], b_in[3 * D], w_out[D * D], b_out[D], w1[F * D], b1[F],
      w2[D * F], b2[D], g1[D], be1[D], g2[D], be2[D], x[B * T * D], got[B * T * D],
      want[B * T * D];
  fill(w_in, 3 * D * D, 51), fill(b_in, 3 * D, 52), fill(w_out, D * D, 53), fill(b_out, D, 54);
  fill(w1, F * D, 55), fill(b1, F, 56), fill(w2, D * F, 57), fill(b2, D, 58);
  fill(g1, D, 59), fill(be1, D, 60), fill(g2, D, 61), fill(be2, D, 62);
  fill(x, B * T * D, 63);
  for (int i = 0; i < B * T * D; i++) x[i] *= 3;  // larger scores: a peakier softmax

  // The graph a parser would build for the layer, unfused.
  tb *t = tb_new(shp3(B, T, D));
  int x0 = t->g->input;
  int a = tb_attn(t, x0, H, true, w_in, b_in, w_out, b_out);
  int x1 = tb_ln(t, tb_add(t, x0, a, 1, 1), g1, be1, 1e-5);
  int f = tb_ffn(t, x1, F, BC_ACT_RELU, w1, b1, w2, b2);
  int y = tb_ln(t, tb_add(t, x1, f, 1, 1), g2, be2, 1e-5);
  tb_run(t, y, x, got);
  tb_free(t);

  naive_layer L = {B, T, D, H, F, w_in, b_in, w_out, b_out, w1, b1, w2, b2, g1, be1, g2, be2};
  naive_post_ln(&L, x, want);
  double diff = tu_max_abs_diff(got, want, B * T * D);
  if (!(diff < 1e-5)) print_error("max |interp - naive| = %g\n", diff);
  assert_true(diff < 1e-5);

  // The same layer with its Add+LayerNorm pairs fused gives the same bits.
  t = tb_new(shp3(B, T, D));
  x0 = t->g->input;
  a = tb_attn(t, x0, H, true, w_in, b_in, w_out, b_out);
  x1 = tb_add_ln(t, x0, a, 1, 1, g1, be1, 1e-5, false, NULL);
  f = tb_ffn(t, x1, F, BC_ACT_RELU, w1, b1, w2, b2);
  y = tb_add_ln(t, x1, f, 1, 1, g2, be2, 1e-5, false, NULL);
  float fused[B * T * D];
  tb_run(t, y, x, fused);
  expect_same(fused, got, B * T * D);
  tb_free(t);
}

// N Post-LN layers at D = 512, T = 128 must interpret quickly (the brief
// says well under 5 s); this also exercises the 4-wide linear on large
// shapes.  Weights are scaled down so activations stay in range.  Set
// BLOCKC_TEST_QUICK=1 to skip it (e.g. under valgrind, ~50x slower).
static void test_speed_post_ln_512(void **state) {
  (void)state;
  if (getenv("BLOCKC_TEST_QUICK")) skip();
  enum { T = 128, D = 512, H = 8, F = 2048, NL = 6 };
  size_t nin = 3 * D * D + 3 * D + D * D + D, nff = 2 * (size_t)F * D + F + D;
  float *wa = malloc(nin * 4), *wf = malloc(nff * 4), *g = malloc(D * 4), *bz = calloc(D, 4);
  float *x = malloc(T * D * 4), *y = malloc(T * D * 4);
  assert_true(wa && wf && g && bz && x && y);
  fill(wa, (int64_t)nin, 71), fill(wf, (int64_t)nff, 72), fill(x, T * D, 73);
  for (size_t i = 0; i < nin; i++) wa[i] *= 0.05f;
  for (size_t i = 0; i < nff; i++) wf[i] *= 0.03f;
  for (int i = 0; i < D; i++) g[i] = 1;
  float *w_in = wa, *b_in = w_in + 3 * D * D, *w_out = b_in + 3 * D, *b_out = w_out + D * D;
  float *w1 = wf, *b1 = w1 + (size_t)F * D, *w2 = b1 + F, *b2 = w2 + (size_t)D * F;

  tb *t = tb_new(shp3(1, T, D));
  int h = t->g->input;
  for (int l = 0; l < NL; l++) {  // layers share weights: fine for timing
    int a = tb_attn(t, h, H, false, w_in, b_in, w_out, b_out);
    h = tb_ln(t, tb_add(t, h, a, 1, 1), g, bz, 1e-5);
    int f = tb_ffn(t, h, F, BC_ACT_GELU, w1, b1, w2, b2);
    h = tb_ln(t, tb_add(t, h, f, 1, 1), g, bz, 1e-5);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tb_run(t, h, x, y);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  print_message("interpreted %d Post-LN layers (T=%d, D=%d, F=%d) in %.2f s\n", NL, T, D, F, secs);
  for (int i = 0; i < T * D; i++) assert_true(isfinite(y[i]));
  tb_free(t);
  free(wa), free(wf), free(g), free(bz), free(x), free(y);
}

// ---------------------------------------------------------------------------
// Inconsistent graphs are reported, not trusted
// ---------------------------------------------------------------------------

static void test_rejects_shape_mismatch(void **state) {
  (void)state;
  // An Add whose output value has the wrong shape (a pass bug): Add
  // broadcasts its inputs to its output, so the inputs are what disagree.
  tb *t = tb_new(shp2(2, 4));
  int y = tb_add(t, t->g->input, t->g->input, 1, 1);
  t->g->vals[y].shape = shp2(2, 3);
  float in[8] = {0}, out[8];
  assert_int_equal(tb_try(t, y, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "has shape [2, 4], expected [2, 3]"));
  tb_free(t);
}

static void test_rejects_bad_params(void **state) {
  (void)state;
  float w[12] = {0};
  float in[4] = {1, 2, 3, 4}, out[4];
  // heads not dividing D.
  tb *t = tb_new(shp2(2, 2));
  int y = tb_attn(t, t->g->input, 3, false, eye3x2, NULL, eye2, NULL);
  assert_int_equal(tb_try(t, y, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "heads=3"));
  tb_free(t);
  // A LayerNorm weight of the wrong length.
  t = tb_new(shp2(1, 4));
  y = tb_ln(t, t->g->input, w, NULL, 1e-5);
  t->g->params[N(t, 0)->param[0]].shape = (bc_shape){.rank = 1, .d = {3}};
  assert_int_equal(tb_try(t, y, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "expected [4]"));
  tb_free(t);
  // Weights not loaded.
  t = tb_new(shp2(1, 4));
  y = tb_ln(t, t->g->input, w, NULL, 1e-5);
  t->wp[0] = NULL;
  assert_int_equal(tb_try(t, y, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "no weights loaded"));
  tb_free(t);
  // FFN missing its first weight.
  t = tb_new(shp2(1, 4));
  y = tb_ffn(t, t->g->input, 2, BC_ACT_RELU, NULL, NULL, w, NULL);
  assert_int_equal(tb_try(t, y, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "slot 0 is missing"));
  tb_free(t);
}

static void test_rejects_use_before_def(void **state) {
  (void)state;
  // Nodes out of order: node 0 reads the value node 1 defines.
  tb *t = tb_new(shp2(1, 2));
  int a = tb_add(t, t->g->input, t->g->input, 1, 1);
  int b = tb_add(t, a, a, 1, 1);
  bc_node tmp = t->g->nodes[0];
  t->g->nodes[0] = t->g->nodes[1];
  t->g->nodes[1] = tmp;
  t->g->nodes[0].id = 0, t->g->nodes[1].id = 1;
  float in[2] = {1, 2}, out[2];
  assert_int_equal(tb_try(t, b, in, out), BC_EINTERNAL);
  assert_non_null(strstr(t->errs.buf, "before it is computed"));
  tb_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_alpha_beta),
      cmocka_unit_test(test_layernorm_1234),
      cmocka_unit_test(test_layernorm_eps_affine),
      cmocka_unit_test(test_layernorm_weight_only_and_bias_only),
      cmocka_unit_test(test_layernorm_constant_row_is_bias),
      cmocka_unit_test(test_layernorm_nonfinite_propagates),
      cmocka_unit_test(test_attention_one_head),
      cmocka_unit_test(test_attention_qkv_row_order),
      cmocka_unit_test(test_attention_two_heads_biases),
      cmocka_unit_test(test_attention_batches_independent),
      cmocka_unit_test(test_ffn_activations),
      cmocka_unit_test(test_ffn_gelu_at_one_no_bias),
      cmocka_unit_test(test_add_ln_by_hand),
      cmocka_unit_test(test_add_ln_equals_add_then_ln),
      cmocka_unit_test(test_dual_add_ln_by_hand),
      cmocka_unit_test(test_dual_add_ln_equals_unfused),
      cmocka_unit_test(test_identity_graph),
      cmocka_unit_test(test_ignores_memory_plan),
      cmocka_unit_test(test_post_ln_layer_matches_naive),
      cmocka_unit_test(test_speed_post_ln_512),
      cmocka_unit_test(test_rejects_shape_mismatch),
      cmocka_unit_test(test_rejects_bad_params),
      cmocka_unit_test(test_rejects_use_before_def),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
