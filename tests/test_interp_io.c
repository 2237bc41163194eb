// test_interp_io.c — the reference interpreter on graphs with several
// inputs and outputs: cross-attention, padding masks and run-time dims.
//
// Each case is either computed by hand (tiny sizes, identity projections,
// so the expected softmax weights can be written down) or is an equality the
// semantics promise: a padded batch's valid rows equal the unpadded
// single-sequence runs, and a model with a run-time dim run at length L
// equals the model compiled for L.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Cross-attention with identity projections and zero biases: q = x,
// k = v = mem, so y = softmax(x mem^T / sqrt(dh)) mem, written out here.
// kv_lengths=1 then gives exactly mem's first row.
static void test_cross_attention_by_hand(void **state) {
  (void)state;
  tu_model *m = tu_model_new("model m\ninput x : [1, 1, 2]\ninput mem : [1, 3, 2]\n"
                       "input ml : lengths[1]\n"
                       "y = Attention(x, kv=mem, heads=1, params=ca)\n"
                       "z = Attention(x, kv=mem, heads=1, kv_lengths=ml, params=ca)\n"
                       "output y\noutput z\n",
                       NULL, 0, 7);
  float in_w[12] = {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}, out_w[4] = {1, 0, 0, 1};
  float zero[6] = {0};
  tu_set_param(m, "ca.in_proj_weight", in_w);
  tu_set_param(m, "ca.in_proj_bias", zero);
  tu_set_param(m, "ca.out_proj.weight", out_w);
  tu_set_param(m, "ca.out_proj.bias", zero);
  float x[2] = {0.5f, -1.0f}, mem[6] = {1, 2, -1, 0.25f, 3, -2};
  int32_t ml[1] = {1};
  float y[2], z[2];
  void *io[5] = {x, mem, ml, y, z};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, NULL), BC_OK);
  double s[3], p[3], zsum = 0, want[2] = {0, 0};
  for (int j = 0; j < 3; j++) {
    s[j] = (x[0] * mem[2 * j] + x[1] * mem[2 * j + 1]) / sqrt(2.0);
    zsum += exp(s[j]);
  }
  for (int j = 0; j < 3; j++) {
    p[j] = exp(s[j]) / zsum;
    want[0] += p[j] * mem[2 * j];
    want[1] += p[j] * mem[2 * j + 1];
  }
  assert_true(fabs(y[0] - want[0]) < 1e-6 && fabs(y[1] - want[1]) < 1e-6);
  assert_true(z[0] == mem[0] && z[1] == mem[1]);
  tu_model_free(m);
}

#define SELF                                                          \
  "model m\ndim B = 2\ndim T <= 5\ndim D = 6\n"                       \
  "input x : [B, T, D]\ninput len : lengths[B]\n"                     \
  "for i in 0..2 as layers.{i} {\n"                                   \
  "  a = Attention(x, heads=2, causal=%s, lengths=len, params=sa)\n"  \
  "  x = LayerNorm(Add(x, a), params=n1)\n"                           \
  "  f = FFN(x, hidden=7, act=gelu, params=(l1, l2))\n"               \
  "  x = LayerNorm(Add(x, f), params=n2)\n}\noutput x\n"

// A padded batch: rows past a sequence's length never influence the valid
// rows, which equal the single-sequence run at that length (a run-time T);
// the Attention output is exactly zero on padded rows.
static void check_padding(const char *causal) {
  char text[1024];
  snprintf(text, sizeof text, SELF, causal);
  tu_model *m = tu_model_new(text, NULL, 0, 7);
  const int T = 5, D = 6;
  float x[2 * 5 * 6], y[2 * 5 * 6], x2[2 * 5 * 6], y2[2 * 5 * 6];
  tu_fill(x, 2 * T * D, 3);
  memcpy(x2, x, sizeof x);
  // Garbage in the padded positions of row 0 (length 3).
  for (int i = 3 * D; i < T * D; i++) x2[i] = 100.0f * (float)i;
  int32_t len[2] = {3, 5};
  long rt[1] = {T};
  void *io[3] = {x, len, y}, *io2[3] = {x2, len, y2};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_OK);
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io2, rt), BC_OK);
  tu_expect_close(y, y2, 3 * D, 0);                   // row 0's valid positions
  tu_expect_close(y + T * D, y2 + T * D, T * D, 0);   // row 1 is full length
  // Row 0 alone at T=3 (B is fixed at 2: give both rows length 3).
  float xs[2 * 3 * 6], ys[2 * 3 * 6];
  memcpy(xs, x, 3 * D * sizeof(float));
  memcpy(xs + 3 * D, x, 3 * D * sizeof(float));
  int32_t len3[2] = {3, 3};
  long rt3[1] = {3};
  void *io3[3] = {xs, len3, ys};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io3, rt3), BC_OK);
  tu_expect_close(y, ys, 3 * D, 1e-6);
  tu_expect_close(y, ys + 3 * D, 3 * D, 1e-6);
  tu_model_free(m);
}

static void test_padding_self_attention(void **state) {
  (void)state;
  check_padding("false");
  check_padding("true");
}

// x : [B, T <= 4, 4] with lengths through one two-head Attention (seed 7).
static tu_model *attention_model(int B) {
  char text[256];
  snprintf(text, sizeof text,
           "model m\ndim T <= 4\ninput x : [%d, T, 4]\ninput len : lengths[%d]\n"
           "a = Attention(x, heads=2, lengths=len, params=sa)\noutput a\n", B, B);
  return tu_model_new(text, NULL, 0, 7);
}

static void test_padded_attention_rows_are_zero(void **state) {
  (void)state;
  tu_model *m = attention_model(1);
  float x[16], y[16];
  tu_fill(x, 16, 5);
  int32_t len[1] = {2};
  long rt[1] = {4};
  void *io[3] = {x, len, y};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_OK);
  for (int i = 8; i < 16; i++) assert_true(y[i] == 0.0f);
  bool nonzero = false;
  for (int i = 0; i < 8; i++) nonzero |= y[i] != 0.0f;
  assert_true(nonzero);
  // NULL lengths: full lengths.
  void *iof[3] = {x, NULL, y};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, iof, rt), BC_OK);
  nonzero = false;
  for (int i = 8; i < 16; i++) nonzero |= y[i] != 0.0f;
  assert_true(nonzero);
  tu_model_free(m);
}

// A model with a run-time dim equals the model built for that length.
static void test_runtime_dim_equals_fixed(void **state) {
  (void)state;
  const char *bounded = "model m\ndim T <= 9\ndim S <= 6\ninput x : [2, T, 8]\n"
                        "input mem : [2, S, 8]\n"
                        "a = Attention(x, heads=2, causal=true, params=sa)\n"
                        "c = Attention(Add(x, a), kv=mem, heads=4, params=ca)\noutput c\n";
  const char *fixed = "model m\ndim T = 7\ndim S = 4\ninput x : [2, T, 8]\n"
                      "input mem : [2, S, 8]\n"
                      "a = Attention(x, heads=2, causal=true, params=sa)\n"
                      "c = Attention(Add(x, a), kv=mem, heads=4, params=ca)\noutput c\n";
  tu_model *mb = tu_model_new(bounded, NULL, 0, 7), *mf = tu_model_new(fixed, NULL, 0, 7);
  float x[2 * 7 * 8], mem[2 * 4 * 8], yb[2 * 7 * 8], yf[2 * 7 * 8];
  tu_fill(x, 2 * 7 * 8, 1);
  tu_fill(mem, 2 * 4 * 8, 2);
  long rt[2] = {7, 4};
  void *iob[3] = {x, mem, yb}, *iof[3] = {x, mem, yf};
  assert_int_equal(bcR_run_io(mb->ctx, mb->g, &mb->w, iob, rt), BC_OK);
  assert_int_equal(bcR_run_io(mf->ctx, mf->g, &mf->w, iof, NULL), BC_OK);
  tu_expect_close(yb, yf, 2 * 7 * 8, 0);  // same weights (same seed, same names), same sums
  tu_model_free(mb);
  tu_model_free(mf);
}

static void test_bad_runtime_values(void **state) {
  (void)state;
  tu_model *m = attention_model(2);
  float x[32], y[32];
  tu_fill(x, 32, 9);
  int32_t len[2] = {2, 0};
  long rt[1] = {3};
  void *io[3] = {x, len, y};
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "len[1] = 0: batch row 1 has no valid position"));
  len[1] = 4;  // > T = 3
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "len[1] = 4 is outside 1..3"));
  len[1] = 3;
  rt[0] = 5;
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "run-time dim T = 5 is outside 1..4"));
  rt[0] = 0;
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, NULL), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "no values were given"));
  tu_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cross_attention_by_hand),
      cmocka_unit_test(test_padding_self_attention),
      cmocka_unit_test(test_padded_attention_rows_are_zero),
      cmocka_unit_test(test_runtime_dim_equals_fixed),
      cmocka_unit_test(test_bad_runtime_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
