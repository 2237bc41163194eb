// test_interp_ops.c — the reference interpreter on the nodes real
// checkpoints need (issue 10): RMSNorm, rotary positions, grouped-query
// attention, gated FFNs, (in, out) weight layouts and bias=false; and Mul
// with broadcasting (issue 23).
//
// Every expected value is either written down by hand from the definition
// (tiny sizes, chosen weights) or is an identity the definitions imply:
// GQA with kv_heads == heads is plain multi-head attention, a layout=in_out
// graph with transposed weights equals the out_in one, separate q/k/v equal
// the packed projection cut into its row blocks.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void run(tu_model *m, float *x, float *y) {
  assert_int_equal(bcR_run(m->ctx, m->g, &m->w, x, y), BC_OK);
}

// RMSNorm([3, 4], w = [1, 2]) = x / sqrt((9 + 16)/2 + eps) * w.
static void test_rmsnorm_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new("model m\ninput x : [1, 2]\ny = RMSNorm(x, eps=0.5, params=n)\noutput y\n", NULL, 0, 11);
  float w[2] = {1, 2};
  memcpy(tu_param(m, "n.weight"), w, sizeof w);
  assert_int_equal(bcI_find_param(m->g, "n.bias"), -1);
  float x[2] = {3, 4}, y[2];
  run(m, x, y);
  double r = sqrt((9.0 + 16.0) / 2.0 + 0.5);
  assert_true(fabs(y[0] - 3 / r) < 1e-6 && fabs(y[1] - 8 / r) < 1e-6);
  tu_model_free(m);
}

// Add then RMSNorm fuses into one AddLayerNorm with rms; the result is
// bit-identical to the unfused graph.
static void test_rmsnorm_fuses(void **state) {
  (void)state;
  const char *text = "model m\ninput x : [2, 3, 8]\na = Linear(x, out=8, params=l)\n"
                     "y = RMSNorm(Add(x, a), params=n)\noutput y\n";
  tu_model *m = tu_model_new(text, NULL, 0, 11);
  float x[48], y0[48], y1[48];
  tu_fill(x, 48, 1);
  run(m, x, y0);
  assert_int_equal(bcO_run_until(m->g, "fuse-add-ln"), BC_OK);
  bool fused = false;
  for (int i = 0; i < m->g->nnodes; i++)
    fused |= m->g->nodes[i].op == BC_OP_ADD_LN && m->g->nodes[i].rms;
  assert_true(fused);
  run(m, x, y1);
  assert_memory_equal(y0, y1, sizeof y0);
  tu_model_free(m);
}

// One head of width 2, identity projections: RoPE rotates q and k at
// position p by p * theta^0 = p radians; the score of query 1 against key 0
// is q1 . k0 rotated by 1 radian.  T = 2, D = 2: y row 1 = softmax over the
// two keys of the rotated scores, times v (v is not rotated).
static void test_rope_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new("model m\ninput x : [1, 2, 2]\n"
                       "y = Attention(x, heads=1, causal=true, rope=true, q=q, k=k, v=v, o=o, "
                       "bias=false)\noutput y\n", NULL, 0, 11);
  float I[4] = {1, 0, 0, 1};
  memcpy(tu_param(m, "q.weight"), I, sizeof I);
  memcpy(tu_param(m, "k.weight"), I, sizeof I);
  memcpy(tu_param(m, "v.weight"), I, sizeof I);
  memcpy(tu_param(m, "o.weight"), I, sizeof I);
  float x[4] = {1, 0.5f, -0.25f, 2}, y[4];
  run(m, x, y);
  // Row 0 attends to itself only: y0 = v0 = x0.
  assert_true(fabs(y[0] - 1) < 1e-6 && fabs(y[1] - 0.5) < 1e-6);
  // Position 1 rotates by 1 radian: (a, b) -> (a cos - b sin, b cos + a sin).
  double c = cos(1.0), s = sin(1.0);
  double q1[2] = {x[2] * c - x[3] * s, x[3] * c + x[2] * s};
  double k1[2] = {q1[0], q1[1]}, k0[2] = {x[0], x[1]};
  double s0 = (q1[0] * k0[0] + q1[1] * k0[1]) / sqrt(2.0);
  double s1 = (q1[0] * k1[0] + q1[1] * k1[1]) / sqrt(2.0);
  double p0 = exp(s0) / (exp(s0) + exp(s1)), p1 = 1 - p0;
  assert_true(fabs(y[2] - (p0 * x[0] + p1 * x[2])) < 1e-6);
  assert_true(fabs(y[3] - (p0 * x[1] + p1 * x[3])) < 1e-6);
  tu_model_free(m);
}

// Grouped-query attention with kv_heads = heads equals plain multi-head
// attention with the same weights; with kv_heads = 1, every query head
// reads the one key/value head: equal to MHA whose K and V heads are copies.
static void test_gqa(void **state) {
  (void)state;
  const char *gqa = "model m\ninput x : [2, 5, 8]\n"
                    "y = Attention(x, heads=4, kv_heads=1, q=q, k=k, v=v, o=o)\noutput y\n";
  const char *mha = "model m\ninput x : [2, 5, 8]\n"
                    "y = Attention(x, heads=4, q=q, k=k, v=v, o=o)\noutput y\n";
  tu_model *g = tu_model_new(gqa, NULL, 0, 11), *h = tu_model_new(mha, NULL, 0, 11);
  assert_int_equal(tu_param_numel(g, "k.weight"), 2 * 8);  // kv_heads * dh rows
  const char *same[] = {"q.weight", "q.bias", "o.weight", "o.bias"};
  for (int i = 0; i < 4; i++) {
    tu_fill(tu_param(g, same[i]), tu_param_numel(g, same[i]), 20 + (unsigned)i);
    memcpy(tu_param(h, same[i]), tu_param(g, same[i]), (size_t)tu_param_numel(g, same[i]) * sizeof(float));
  }
  const char *kv[] = {"k", "v"};
  for (int i = 0; i < 2; i++) {
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "%s.weight", kv[i]);
    snprintf(bn, sizeof bn, "%s.bias", kv[i]);
    tu_fill(tu_param(g, wn), 16, 30 + (unsigned)i);
    tu_fill(tu_param(g, bn), 2, 40 + (unsigned)i);
    for (int head = 0; head < 4; head++) {  // MHA: 4 copies of the one head
      memcpy(tu_param(h, wn) + head * 16, tu_param(g, wn), 16 * sizeof(float));
      memcpy(tu_param(h, bn) + head * 2, tu_param(g, bn), 2 * sizeof(float));
    }
  }
  float x[80], yg[80], yh[80];
  tu_fill(x, 80, 3);
  run(g, x, yg);
  run(h, x, yh);
  tu_expect_close(yg, yh, 80, 1e-6);
  tu_model_free(g);
  tu_model_free(h);
}

// SwiGLU with D = 1, F = 1, no biases: y = wd * silu(wg x) * (wu x).
static void test_swiglu_and_geglu_by_hand(void **state) {
  (void)state;
  const char *acts[2] = {"swiglu", "geglu"};
  for (int a = 0; a < 2; a++) {
    char text[256];
    snprintf(text, sizeof text,
             "model m\ninput x : [1, 1]\ny = FFN(x, hidden=1, act=%s, gate=g, up=u, down=d, "
             "bias=false)\noutput y\n", acts[a]);
    tu_model *m = tu_model_new(text, NULL, 0, 11);
    tu_param(m, "g.weight")[0] = 0.5f;
    tu_param(m, "u.weight")[0] = -2.0f;
    tu_param(m, "d.weight")[0] = 3.0f;
    float x[1] = {1.5f}, y[1];
    run(m, x, y);
    double gx = 0.5 * 1.5;
    double act = a == 0 ? gx / (1 + exp(-gx)) : 0.5 * gx * (1 + erf(gx / sqrt(2.0)));
    double want = 3.0 * act * (-2.0 * 1.5);
    assert_true(fabs(y[0] - want) < 1e-6);
    tu_model_free(m);
  }
}

// layout=in_out with every matrix transposed equals the out_in graph; a
// packed qkv= equals separate q=, k=, v= cut from it.
static void test_layouts_and_packing(void **state) {
  (void)state;
  tu_model *a = tu_model_new("model m\ninput x : [1, 3, 6]\n"
                       "h = Attention(x, heads=2, qkv=c, o=p)\n"
                       "y = FFN(h, hidden=5, act=gelu_tanh, up=u, down=d)\noutput y\n", NULL, 0, 11);
  tu_model *b = tu_model_new("model m\ninput x : [1, 3, 6]\n"
                       "h = Attention(x, heads=2, qkv=c, o=p, layout=in_out)\n"
                       "y = FFN(h, hidden=5, act=gelu_tanh, up=u, down=d, layout=in_out)\n"
                       "output y\n", NULL, 0, 11);
  tu_model *c = tu_model_new("model m\ninput x : [1, 3, 6]\n"
                       "h = Attention(x, heads=2, q=q, k=k, v=v, o=p)\n"
                       "y = FFN(h, hidden=5, act=gelu_tanh, up=u, down=d)\noutput y\n", NULL, 0, 11);
  struct { const char *name; int rows, cols; } mats[] = {
      {"c.weight", 18, 6}, {"p.weight", 6, 6}, {"u.weight", 5, 6}, {"d.weight", 6, 5}};
  for (int i = 0; i < 4; i++) {
    float *wa = tu_param(a, mats[i].name), *wb = tu_param(b, mats[i].name);
    int r = mats[i].rows, k = mats[i].cols;
    tu_fill(wa, r * k, 50 + (unsigned)i);
    for (int o = 0; o < r; o++)
      for (int j = 0; j < k; j++) wb[j * r + o] = wa[o * k + j];  // (in, out)
  }
  const char *vecs[] = {"c.bias", "p.bias", "u.bias", "d.bias"};
  for (int i = 0; i < 4; i++) {
    tu_fill(tu_param(a, vecs[i]), tu_param_numel(a, vecs[i]), 60 + (unsigned)i);
    memcpy(tu_param(b, vecs[i]), tu_param(a, vecs[i]), (size_t)tu_param_numel(a, vecs[i]) * sizeof(float));
  }
  const char *cnames[] = {"p.weight", "p.bias", "u.weight", "u.bias", "d.weight", "d.bias"};
  for (int i = 0; i < 6; i++)
    memcpy(tu_param(c, cnames[i]), tu_param(a, cnames[i]), (size_t)tu_param_numel(a, cnames[i]) * sizeof(float));
  const char *sep[] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "%s.weight", sep[i]);
    snprintf(bn, sizeof bn, "%s.bias", sep[i]);
    memcpy(tu_param(c, wn), tu_param(a, "c.weight") + i * 36, 36 * sizeof(float));
    memcpy(tu_param(c, bn), tu_param(a, "c.bias") + i * 6, 6 * sizeof(float));
  }
  float x[18], ya[18], yb[18], yc[18];
  tu_fill(x, 18, 9);
  run(a, x, ya);
  run(b, x, yb);
  run(c, x, yc);
  tu_expect_close(ya, yb, 18, 0);  // same sums in the same order
  tu_expect_close(ya, yc, 18, 0);
  tu_model_free(a);
  tu_model_free(b);
  tu_model_free(c);
}

// bias=false: no bias tensors exist, and the result equals zero biases.
static void test_bias_false(void **state) {
  (void)state;
  tu_model *a = tu_model_new("model m\ninput x : [1, 2, 4]\ny = Linear(x, out=3, params=l, bias=false)\n"
                       "z = LayerNorm(y, params=n, bias=false)\noutput z\n", NULL, 0, 11);
  tu_model *b = tu_model_new("model m\ninput x : [1, 2, 4]\ny = Linear(x, out=3, params=l)\n"
                       "z = LayerNorm(y, params=n)\noutput z\n", NULL, 0, 11);
  assert_int_equal(a->g->nparams, 2);
  assert_int_equal(bcI_find_param(a->g, "l.bias"), -1);
  assert_int_equal(bcI_find_param(a->g, "n.bias"), -1);
  tu_fill(tu_param(a, "l.weight"), 12, 70);
  memcpy(tu_param(b, "l.weight"), tu_param(a, "l.weight"), 12 * sizeof(float));
  tu_fill(tu_param(a, "n.weight"), 3, 71);
  memcpy(tu_param(b, "n.weight"), tu_param(a, "n.weight"), 3 * sizeof(float));
  memset(tu_param(b, "l.bias"), 0, 3 * sizeof(float));
  memset(tu_param(b, "n.bias"), 0, 3 * sizeof(float));
  float x[8], ya[6], yb[6];
  tu_fill(x, 8, 72);
  run(a, x, ya);
  run(b, x, yb);
  tu_expect_close(ya, yb, 6, 0);
  tu_model_free(a);
  tu_model_free(b);
}

// Mul by hand: [2, 2, 3] * [2, 3] repeats g over the batch, in either
// argument order; the same-shape product, and Mul(x, x), are elementwise.
static void test_mul_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new("model m\ninput x : [2, 2, 3]\ninput g : [2, 3]\n"
                             "a = Mul(x, g)\nb = Mul(g, x)\nc = Mul(g, g)\noutput a\noutput b\n"
                             "output c\n",
                             NULL, 0, 1);
  float x[12], g[6] = {0.5f, -1, 2, 3, 0.25f, -2}, a[12], b[12], c[6];
  for (int i = 0; i < 12; i++) x[i] = (float)(i + 1);
  void *io[5] = {x, g, a, b, c};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, NULL), BC_OK);
  static const float want[12] = {0.5f, -2, 6, 12, 1.25f, -12, 3.5f, -8, 18, 30, 2.75f, -24};
  static const float want_c[6] = {0.25f, 1, 4, 9, 0.0625f, 4};
  tu_expect_close(a, want, 12, 0);
  tu_expect_close(b, want, 12, 0);
  tu_expect_close(c, want_c, 6, 0);
  tu_model_free(m);
}

// Param, broadcasting Add and Act by hand: a [D] Param read as a value,
// Add(x, p) and Add(p, x) with alpha/beta (the coefficients stay with
// their operands), a [1] Param, and each activation at chosen points.
static void test_param_add_act_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new(
      "model m\ninput x : [2, 3]\n"
      "p = Param(shape=[3], params=p)\n"
      "a = Add(x, p, alpha=2, beta=-1)\nb = Add(p, x, alpha=0.5, beta=3)\n"
      "c = Add(x, Param(shape=[1], params=s))\n"
      "r = Act(x, act=relu)\ng = Act(x, act=gelu)\nh = Act(x, act=gelu_tanh)\n"
      "si = Act(x, act=silu)\nsg = Act(x, act=sigmoid)\nth = Act(x, act=tanh)\n"
      "output a\noutput b\noutput c\noutput r\noutput g\noutput h\noutput si\noutput sg\n"
      "output th\n",
      NULL, 0, 1);
  static const float pv[3] = {1, -2, 0.5f}, sv[1] = {4};
  assert_int_equal(tu_param_numel(m, "p"), 3);
  assert_true(tu_param(m, "p")[0] == 1.0f && tu_param(m, "s")[0] == 1.0f);  // seeded: ones
  tu_set_param(m, "p", pv);
  tu_set_param(m, "s", sv);
  float x[6] = {-2, -0.5f, 0, 0.5f, 1, 3}, y[9][6];
  void *io[10] = {x};
  for (int k = 0; k < 9; k++) io[k + 1] = y[k];
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, NULL), BC_OK);
  float want_a[6], want_b[6], want_c[6];
  for (int i = 0; i < 6; i++) {
    want_a[i] = 2 * x[i] - pv[i % 3];
    want_b[i] = 0.5f * pv[i % 3] + 3 * x[i];
    want_c[i] = x[i] + 4;
  }
  tu_expect_close(y[0], want_a, 6, 0);
  tu_expect_close(y[1], want_b, 6, 0);
  tu_expect_close(y[2], want_c, 6, 0);
  // torch.nn.functional at x = -2, -0.5, 0, 0.5, 1, 3 (float64, rounded to float)
  static const float relu[6] = {0, 0, 0, 0.5f, 1, 3};
  static const float gelu[6] = {-0.0455002639f, -0.154268769f, 0, 0.345731231f, 0.841344746f,
                                2.99595031f};
  static const float gelu_t[6] = {-0.0454023059f, -0.154285990f, 0, 0.345714010f, 0.841191990f,
                                  2.99636261f};
  static const float silu[6] = {-0.238405844f, -0.188770334f, 0, 0.311229666f, 0.731058579f,
                                2.85772238f};
  static const float sigm[6] = {0.119202922f, 0.377540669f, 0.5f, 0.622459331f, 0.731058579f,
                                0.952574127f};
  static const float tanh_[6] = {-0.964027580f, -0.462117157f, 0, 0.462117157f, 0.761594156f,
                                 0.995054754f};
  tu_expect_close(y[3], relu, 6, 0);
  tu_expect_close(y[4], gelu, 6, 2e-7);
  tu_expect_close(y[5], gelu_t, 6, 2e-7);
  tu_expect_close(y[6], silu, 6, 2e-7);
  tu_expect_close(y[7], sigm, 6, 2e-7);
  tu_expect_close(y[8], tanh_, 6, 2e-7);
  tu_model_free(m);
}

#define PRE "model m\ndim D = 8\ninput x : [1, 4, D]\n"

// Issue 23 by hand.  One head of width 1 with identity projections (q = k =
// v = x), scale=0.5, softcap=1, window=2, causal: query i sees keys i-1 and
// i with scores tanh(0.5 x_i x_j); y_i = sum_j p_j x_j.  Softcap(x, cap=2)
// and RMSNorm(offset=1) from their definitions.
static void test_attention_options_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new("model m\ninput x : [1, 4, 1]\n"
                             "y = Attention(x, heads=1, causal=true, q=q, k=k, v=v, o=o, bias=false, "
                             "scale=0.5, softcap=1.0, window=2)\noutput y\n", NULL, 0, 11);
  const char *names[] = {"q.weight", "k.weight", "v.weight", "o.weight"};
  for (int k = 0; k < 4; k++) tu_param(m, names[k])[0] = 1.0f;
  float x[4] = {1, 2, -1.5f, 3}, y[4];
  run(m, x, y);
  assert_true(fabs(y[0] - 1) < 1e-6);  // row 0 sees only itself
  for (int i = 1; i < 4; i++) {
    double s0 = tanh(0.5 * x[i] * x[i - 1]), s1 = tanh(0.5 * x[i] * x[i]);
    double p0 = exp(s0) / (exp(s0) + exp(s1));
    double want = p0 * x[i - 1] + (1 - p0) * x[i];
    if (!(fabs(y[i] - want) < 1e-6)) fail_msg("row %d: %g, want %g", i, y[i], want);
  }
  tu_model_free(m);
  m = tu_model_new("model m\ninput x : [1, 2]\ny = Softcap(RMSNorm(x, eps=0.5, offset=1, params=n), "
                   "cap=2)\noutput y\n", NULL, 0, 11);
  float w[2] = {1, -0.5f}, x2[2] = {3, 4}, y2[2];
  memcpy(tu_param(m, "n.weight"), w, sizeof w);
  run(m, x2, y2);
  double r = sqrt((9.0 + 16.0) / 2.0 + 0.5);
  assert_true(fabs(y2[0] - 2 * tanh(3 / r * 2 / 2)) < 1e-6);
  assert_true(fabs(y2[1] - 2 * tanh(4 / r * 0.5 / 2)) < 1e-6);
  tu_model_free(m);
}

// QK-norm makes the scores independent of the projections' scale (q and k
// are normalised before the product), per head and over the projection;
// head_scale=0 silences a head: with both heads at 0 the output is 0.
static void test_qk_norm_and_head_scale(void **state) {
  (void)state;
  const char *texts[] = {
      "model m\ninput x : [1, 5, 8]\ny = Attention(x, heads=2, causal=true, q=q, k=k, v=v, o=o, "
      "qk_norm=rms, qk_norm_eps=1e-12, head_scale=true)\noutput y\n",
      "model m\ninput x : [1, 5, 8]\ny = Attention(x, heads=2, causal=true, q=q, k=k, v=v, o=o, "
      "qk_norm=layernorm, qk_norm_per_head=false, qk_norm_eps=1e-12, head_scale=true)\n"
      "output y\n"};
  for (int t = 0; t < 2; t++) {
    tu_model *m = tu_model_new(texts[t], NULL, 0, 11);
    float *hs = tu_param(m, "head_scale");
    hs[0] = 1.5f, hs[1] = -0.5f;
    float x[40], y0[40], y1[40];
    tu_fill(x, 40, 3);
    run(m, x, y0);
    float *wq = tu_param(m, "q.weight"), *wk = tu_param(m, "k.weight");
    for (int k = 0; k < 64; k++) wq[k] *= 8.0f, wk[k] *= 0.25f;
    float *bq = tu_param(m, "q.bias"), *bk = tu_param(m, "k.bias");
    for (int k = 0; k < 8; k++) bq[k] *= 8.0f, bk[k] *= 0.25f;
    run(m, x, y1);
    double err = tu_max_abs_diff(y0, y1, 40);
    if (!(err < 1e-4)) fail_msg("graph %d: the scores changed with the projections' scale (%g)", t, err);
    hs[0] = hs[1] = 0.0f;
    memset(tu_param(m, "o.bias"), 0, 8 * sizeof(float));
    run(m, x, y1);
    for (int k = 0; k < 40; k++) assert_true(y1[k] == 0.0f);
    tu_model_free(m);
  }
}

static void test_errors(void **state) {
  (void)state;
  tu_expect_error(PRE "y = Attention(x, heads=4, kv_heads=3, q=q, k=k, v=v, o=o)\noutput y\n", 4,
                  36, "heads=4 is not divisible by kv_heads=3");
  tu_expect_error("model m\ndim D = 8\ninput x : [1, 4, D]\ninput m : [1, 3, D]\n"
                  "y = Attention(x, kv=m, heads=2, rope=true, q=q, k=k, v=v, o=o)\noutput y\n",
                  5, 38, "rope=true with kv=");
  tu_expect_error(PRE "y = LayerNorm(x, params=n, layout=in_out)\noutput y\n", 4, 28,
                  "unknown attribute 'layout' for LayerNorm");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=a, q=q)\noutput y\n", 4, 5,
                  "not a mix of them");
  tu_expect_error(PRE "y = Attention(x, heads=2, q=q, k=k, v=v)\noutput y\n", 4, 5,
                  "Attention needs o=NAME");
  tu_expect_error(PRE "y = Attention(x, heads=2, q=q, v=v, o=o)\noutput y\n", 4, 5,
                  "(k= is missing)");
  tu_expect_error(PRE "y = FFN(x, hidden=4, act=swiglu, up=u, down=d)\noutput y\n", 4, 26,
                  "act=swiglu is gated: FFN needs gate=G");
  tu_expect_error(PRE "y = FFN(x, hidden=4, gate=g, up=u, down=d)\noutput y\n", 4, 27,
                  "gate= needs a gated activation");
  tu_expect_error(PRE "y = FFN(x, hidden=4, params=(a, b), up=u)\noutput y\n", 4, 5, "not both");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=a, layout=in_out)\noutput y\n", 4, 44,
                  "layout=in_out does not apply to params=");
  tu_expect_error(PRE "y = Attention(x, heads=8, rope=true, q=q, k=k, v=v, o=o)\noutput y\n", 4, 32,
                  "rope=true needs an even head width");
  tu_expect_error(PRE "y = Linear(x, out=4, params=l, layout=sideways)\noutput y\n", 4, 39,
                  "layout must be out_in");
  tu_expect_error(PRE "y = Attention(x, heads=2, rope_theta=500.0, q=q, k=k, v=v, o=o)\noutput y\n",
                  4, 38, "rope_theta= needs rope=true");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm_by_hand),
      cmocka_unit_test(test_rmsnorm_fuses),
      cmocka_unit_test(test_rope_by_hand),
      cmocka_unit_test(test_gqa),
      cmocka_unit_test(test_swiglu_and_geglu_by_hand),
      cmocka_unit_test(test_layouts_and_packing),
      cmocka_unit_test(test_bias_false),
      cmocka_unit_test(test_mul_by_hand),
      cmocka_unit_test(test_param_add_act_by_hand),
      cmocka_unit_test(test_attention_options_by_hand),
      cmocka_unit_test(test_qk_norm_and_head_scale),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
