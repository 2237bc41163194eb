// test_runtime.c — the precompiled kernels (runtime/blockc_rt.c) against
// their double-precision references and against libm.
//
// The fast kernels are built with -O3 -march=native and linked from
// build/libblockc.a, so this exercises the code the JIT actually binds.
// Each comparison states its tolerance and why; every tolerance is a few
// times the error measured on this build, far below what a real bug (wrong
// variance, eps outside the sqrt, a dropped bias, an off-by-one mask) gives.
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blockc_rt.h"
#include "rt_ref.h"
#include "testutil.h"

// Strict C11 has no PI_ & co.
#define E_ 2.71828182845904523536
#define PI_ 3.14159265358979323846
#define LN2_ 0.69314718055994530942

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

// xorshift64*: deterministic data without libc rand's global state.
typedef struct { uint64_t s; } rng;
static float rnd(rng *r, float lo, float hi) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  uint64_t v = r->s * 2685821657736338717ull;
  return lo + (hi - lo) * (float)((double)(v >> 40) / 16777216.0);
}

static float *rand_buf(rng *r, size_t n, float lo, float hi) {
  float *p = malloc(n * sizeof *p);
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) p[i] = rnd(r, lo, hi);
  return p;
}

static bool same_nan(double a, double b) { return isnan(a) && isnan(b); }

// Fails (with the index and values) unless |got - want| <= atol + rtol*|want|
// everywhere; NaN must match NaN, infinities must match exactly.
static void expect_close(const char *what, const float *got, const float *want, size_t n,
                         double atol, double rtol) {
  for (size_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    if (same_nan(g, w) || g == w) continue;
    if (isnan(g) || isnan(w) || isinf(g) || isinf(w) || fabs(g - w) > atol + rtol * fabs(w)) {
      print_error("%s: element %zu: got %.9g, want %.9g (diff %.3g)\n", what, i, g, w,
                  fabs(g - w));
      fail();
    }
  }
}

static void expect_equal(const char *what, const float *got, const float *want, size_t n) {
  expect_close(what, got, want, n, 0, 0);
}

// Spacing of floats at |v| (subnormal spacing at the bottom).
static double ulp_at(double v) {
  int e;
  if (v == 0) return ldexp(1, -149);
  frexp(fabs(v), &e);
  return fmax(ldexp(1, e - 24), ldexp(1, -149));
}

static const int widths[] = {1, 3, 7, 64, 513};
static const int rows[] = {1, 5};
#define NW (int)(sizeof widths / sizeof widths[0])
#define NR (int)(sizeof rows / sizeof rows[0])

// ---------------------------------------------------------------------------
// Vector math vs libm (double)
// ---------------------------------------------------------------------------

// exp: <= 2 ulp of the correctly rounded result (measured max 1.0 ulp),
// over [-110, 95] (normal, subnormal, underflow and overflow ranges).
static void test_exp_accuracy(void **state) {
  (void)state;
  enum { N = 400001 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (int i = 0; i < N; i++) x[i] = -110.0f + 205.0f * (float)i / (N - 1);
  bcrt_exp(N, x, y);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double want = exp((double)x[i]);
    if (want > FLT_MAX) {
      assert_true(isinf(y[i]) || y[i] == FLT_MAX);
      continue;
    }
    double e = fabs(y[i] - want) / ulp_at(want);
    if (e > worst) worst = e;
  }
  print_message("exp: max error %.3f ulp\n", worst);
  assert_true(worst <= 2.0);
  free(x);
  free(y);
}

static void test_exp_specials(void **state) {
  (void)state;
  float x[] = {0.0f, -0.0f, 1.0f, (float)INFINITY, -(float)INFINITY, NAN, 88.7f, 88.8f,
               -87.5f, -103.0f, -105.0f, 1e30f, -1e30f};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  bcrt_exp(N, x, y);
  assert_true(y[0] == 1.0f && y[1] == 1.0f);
  assert_true(fabs(y[2] - E_) <= 2 * ulp_at(E_));
  assert_true(isinf(y[3]) && y[3] > 0);
  assert_true(y[4] == 0.0f);
  assert_true(isnan(y[5]));
  assert_true(isfinite(y[6]) && y[6] > 3e38f);
  assert_true(isinf(y[7]));
  assert_true(y[8] > 0 && y[8] < FLT_MIN); // subnormal, not flushed
  assert_true(y[9] > 0);
  assert_true(y[10] == 0.0f && isinf(y[11]) && y[12] == 0.0f);
}

// erf: absolute error <= 1e-7 (the requirement; measured 5.9e-8 with FMA,
// 7.4e-8 without) on a dense sweep of [-7, 7], plus the tails.
static void test_erf_accuracy(void **state) {
  (void)state;
  enum { N = 200001 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (int i = 0; i < N; i++) x[i] = -7.0f + 14.0f * (float)i / (N - 1);
  bcrt_erf(N, x, y);
  double worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(y[i] - erf((double)x[i])));
  print_message("erf: max abs error %.3g\n", worst);
  assert_true(worst <= 1e-7);
  // Tiny arguments: erf(x) ~ 1.128 x, so the relative error must stay small.
  float t[] = {1e-30f, -3e-20f, 1e-8f, 0.0f, -0.0f, 30.0f, -1e30f, (float)INFINITY, NAN};
  enum { M = sizeof t / sizeof t[0] };
  float u[M];
  bcrt_erf(M, t, u);
  for (int i = 0; i < 3; i++) assert_true(fabs(u[i] - erf(t[i])) <= 2 * ulp_at(erf(t[i])));
  assert_true(u[3] == 0.0f && !signbit(u[3]) && u[4] == 0.0f && signbit(u[4]));
  assert_true(u[5] == 1.0f && u[6] == -1.0f && u[7] == 1.0f && isnan(u[8]));
  free(x);
  free(y);
}

static double gelu_ref(double x) {
  // Phi via erfc for x < 0, so the reference itself has no cancellation.
  return x < 0 ? 0.5 * x * erfc(-x / sqrt(2.0)) : 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double gelu_tanh_ref(double x) {
  double u = sqrt(2.0 / PI_) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(u));
}

// GELU (both forms) over a dense sweep of [-12, 12] and some huge values:
// |err| <= 3e-7 * max(1, |ref|).  Requirement 1e-6; measured 1.2e-7 for
// erf-GELU and 1.4e-7 for tanh-GELU.  (Relative error where |GELU| is tiny,
// x < -4, is ~3e-6: the exponent -z^2 carries float rounding.)
static void test_gelu_accuracy(void **state) {
  (void)state;
  enum { N = 240001, EXTRA = 8 };
  static const float extra[EXTRA] = {1e3f, -1e3f, 1e20f, -1e20f, 3e38f, -3e38f, 0.0f, -0.0f};
  float *x = malloc((N + EXTRA) * sizeof *x);
  assert_non_null(x);
  for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * (float)i / (N - 1);
  memcpy(x + N, extra, sizeof extra);
  for (int act = BCRT_ACT_GELU; act <= BCRT_ACT_GELU_TANH; act++) {
    float *y = tu_dup(x, N + EXTRA);
    bcrt_bias_act(1, N + EXTRA, NULL, act, y);
    double worst = 0;
    for (int i = 0; i < N + EXTRA; i++) {
      double want = act == BCRT_ACT_GELU ? gelu_ref(x[i]) : gelu_tanh_ref(x[i]);
      if (isnan(want)) want = x[i] > 0 ? x[i] : 0; // tanh form: inf*0 at 3e38
      double e = fabs(y[i] - want) / fmax(1.0, fabs(want));
      if (e > worst) worst = e;
    }
    print_message("%s: max error %.3g\n", act == BCRT_ACT_GELU ? "gelu" : "gelu_tanh", worst);
    assert_true(worst <= 3e-7);
    free(y);
  }
  free(x);
}

static void test_act_specials(void **state) {
  (void)state;
  float x[] = {NAN, (float)INFINITY, -0.0f, -5.0f, 2.5f};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  memcpy(y, x, sizeof y);
  bcrt_bias_act(1, N, NULL, BCRT_ACT_RELU, y);
  assert_true(isnan(y[0]) && isinf(y[1]) && y[2] == 0.0f && y[3] == 0.0f && y[4] == 2.5f);
  for (int act = BCRT_ACT_GELU; act <= BCRT_ACT_GELU_TANH; act++) {
    memcpy(y, x, sizeof y);
    bcrt_bias_act(1, N, NULL, act, y);
    assert_true(isnan(y[0]));
    assert_true(isinf(y[1]) && y[1] > 0);
    assert_true(y[2] == 0.0f);
  }
  // An unknown activation only adds the bias.
  float b[N] = {1, 1, 1, 1, 1};
  memcpy(y, x, sizeof y);
  bcrt_bias_act(1, N, b, 99, y);
  assert_true(y[3] == -4.0f && y[4] == 3.5f);
}

// ---------------------------------------------------------------------------
// bias + activation vs reference
// ---------------------------------------------------------------------------

static void test_bias_act_vs_ref(void **state) {
  (void)state;
  rng r = {0x1234};
  for (int wi = 0; wi < NW; wi++)
    for (int ri = 0; ri < NR; ri++)
      for (int act = 0; act < 3; act++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
          int n = rows[ri], d = widths[wi];
          size_t nd = (size_t)n * d;
          float *y = rand_buf(&r, nd, -6, 6), *bias = rand_buf(&r, (size_t)d, -1, 1);
          float *want = tu_dup(y, nd);
          const float *b = with_bias ? bias : NULL;
          bcrt_bias_act(n, d, b, act, y);
          bcrt_ref_bias_act(n, d, b, act, want);
          // ReLU is exact; GELUs as in test_gelu_accuracy.
          expect_close("bias_act", y, want, nd, act == BCRT_ACT_RELU ? 0 : 3e-7,
                       act == BCRT_ACT_RELU ? 0 : 3e-7);
          free(y);
          free(bias);
          free(want);
        }
}

// ---------------------------------------------------------------------------
// fill_rows, copy, add
// ---------------------------------------------------------------------------

static void test_fill_copy_add(void **state) {
  (void)state;
  rng r = {77};
  float bias[7] = {1, 2, 3, 4, 5, 6, 7};
  float y[21];
  bcrt_fill_rows(3, 7, bias, y);
  for (int i = 0; i < 21; i++) assert_true(y[i] == bias[i % 7]);
  bcrt_fill_rows(3, 7, NULL, y);
  for (int i = 0; i < 21; i++) assert_true(y[i] == 0.0f);

  enum { N = 1031 };
  float *a = rand_buf(&r, N, -3, 3), *b = rand_buf(&r, N, -3, 3), *out = rand_buf(&r, N, 0, 1);
  bcrt_copy(N, a, out);
  expect_equal("copy", out, a, N);
  bcrt_copy(N, out, out); // self-copy is a no-op

  // y = 0.5 a - 2 b, into a fresh buffer and aliased onto a and onto b.
  float want[N];
  for (int i = 0; i < N; i++) want[i] = (float)(0.5 * a[i] - 2.0 * b[i]);
  bcrt_add(N, 0.5f, a, -2.0f, b, out);
  expect_equal("add", out, want, N); // both products exact, one rounding
  float *a2 = tu_dup(a, N), *b2 = tu_dup(b, N);
  bcrt_add(N, 0.5f, a2, -2.0f, b, a2);
  expect_equal("add y=a", a2, want, N);
  bcrt_add(N, 0.5f, a, -2.0f, b2, b2);
  expect_equal("add y=b", b2, want, N);
  memcpy(a2, a, sizeof want);
  bcrt_add(N, 1.0f, a2, 1.0f, a2, a2);
  for (int i = 0; i < N; i++) assert_true(a2[i] == 2 * a[i]);
  free(a);
  free(b);
  free(out);
  free(a2);
  free(b2);
}

// ---------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------

// The oracle itself, on a case worked by hand: x = [1 2 3], mean 2, biased
// variance 2/3, eps inside the square root.
static void test_layernorm_hand(void **state) {
  (void)state;
  const float x[3] = {1, 2, 3}, w[3] = {1, 2, 1}, b[3] = {0, 0, 10};
  float eps = 0.25f;
  double rs = 1.0 / sqrt(2.0 / 3.0 + 0.25);
  float want[3] = {(float)-rs, 0.0f, (float)(rs + 10)};
  float y[3], yr[3];
  bcrt_layernorm(1, 3, x, w, b, eps, y);
  bcrt_ref_layernorm(1, 3, x, w, b, eps, yr);
  expect_close("ln hand (ref)", yr, want, 3, 0, 1e-7);
  expect_close("ln hand", y, want, 3, 1e-7, 1e-6);
}

// |y - ref| <= 1e-6 (1 + |ref|), measured < 5e-7: the outputs are O(1) and
// the kernel keeps them to a few ulp, including rows whose mean is large
// against their spread (mean 1, std 1e-3: the kernel centres on a sample,
// so it does not lose the digits a float mean would).  A wrong variance or
// eps placement is off by 1e-2 or more.
static void ln_case(rng *r, int n, int d, int affine, int alias, float lo, float hi, float eps) {
  size_t nd = (size_t)n * d;
  float *x = rand_buf(r, nd, lo, hi), *w = rand_buf(r, (size_t)d, 0.5f, 2),
        *b = rand_buf(r, (size_t)d, -1, 1);
  const float *wp = affine & 1 ? w : NULL, *bp = affine & 2 ? b : NULL;
  float *want = malloc(nd * sizeof *want);
  assert_non_null(want);
  bcrt_ref_layernorm(n, d, x, wp, bp, eps, want);
  float *y = alias ? x : malloc(nd * sizeof *y);
  assert_non_null(y);
  bcrt_layernorm(n, d, x, wp, bp, eps, y);
  expect_close("layernorm", y, want, nd, 1e-6, 1e-6);
  if (!alias) free(y);
  free(x);
  free(w);
  free(b);
  free(want);
}

static void test_layernorm_vs_ref(void **state) {
  (void)state;
  rng r = {99};
  for (int wi = 0; wi < NW; wi++)
    for (int ri = 0; ri < NR; ri++)
      for (int affine = 0; affine < 4; affine++)
        for (int alias = 0; alias < 2; alias++) {
          ln_case(&r, rows[ri], widths[wi], affine, alias, -3, 3, 1e-5f);
          ln_case(&r, rows[ri], widths[wi], affine, alias, 5, 15, 1e-5f);
          // Variance ~1e-6 against eps = 1e-5: eps placement matters.
          ln_case(&r, rows[ri], widths[wi], affine, alias, 1, 1.003f, 1e-5f);
        }
}

// A constant row has variance 0: the output is exactly the bias (or 0).
static void test_layernorm_constant_rows(void **state) {
  (void)state;
  rng r = {5};
  const int d = 513;
  float *x = malloc(2 * d * sizeof *x), *y = malloc(2 * d * sizeof *y);
  float *w = rand_buf(&r, d, -2, 2), *b = rand_buf(&r, d, -2, 2);
  assert_non_null(x);
  assert_non_null(y);
  for (int j = 0; j < d; j++) x[j] = 0.1f, x[d + j] = -12345.678f;
  bcrt_layernorm(2, d, x, w, b, 1e-5f, y);
  for (int j = 0; j < 2 * d; j++) assert_true(y[j] == b[j % d]);
  bcrt_layernorm(2, d, x, NULL, NULL, 1e-5f, y);
  for (int j = 0; j < 2 * d; j++) assert_true(y[j] == 0.0f);
  // Same through the fused add: 0.05 + 0.05 is constant too.
  bcrt_add_layernorm(1, d, 0.5f, x, 0.5f, x, w, b, 1e-5f, NULL, y);
  for (int j = 0; j < d; j++) assert_true(y[j] == b[j]);
  free(x);
  free(y);
  free(w);
  free(b);
}

// add_layernorm against add-then-reference-LayerNorm, with sum kept or not
// and y aliased onto a or b.
static void test_add_layernorm(void **state) {
  (void)state;
  rng r = {2024};
  for (int wi = 0; wi < NW; wi++)
    for (int ri = 0; ri < NR; ri++)
      for (int mode = 0; mode < 4; mode++) { // 0 fresh y, 1 y=a, 2 y=b, 3 +sum
        int n = rows[ri], d = widths[wi];
        size_t nd = (size_t)n * d;
        float *a = rand_buf(&r, nd, -2, 2), *b = rand_buf(&r, nd, -2, 2);
        float *w = rand_buf(&r, (size_t)d, 0.5f, 2), *bias = rand_buf(&r, (size_t)d, -1, 1);
        float *s_want = malloc(nd * sizeof *s_want), *want = malloc(nd * sizeof *want);
        assert_non_null(s_want);
        assert_non_null(want);
        for (size_t i = 0; i < nd; i++) s_want[i] = 1.0f * a[i] + 0.75f * b[i];
        bcrt_ref_layernorm(n, d, s_want, w, bias, 1e-5f, want);
        float *sum = mode == 3 ? malloc(nd * sizeof *sum) : NULL;
        float *y = mode == 1 ? a : mode == 2 ? b : malloc(nd * sizeof *y);
        assert_non_null(y);
        bcrt_add_layernorm(n, d, 1.0f, a, 0.75f, b, w, bias, 1e-5f, sum, y);
        expect_close("add_layernorm", y, want, nd, 1e-6, 1e-6);
        if (sum) expect_close("add_layernorm sum", sum, s_want, nd, 0, 2 * FLT_EPSILON);
        if (mode == 0 || mode == 3) free(y);
        free(sum);
        free(a);
        free(b);
        free(w);
        free(bias);
        free(s_want);
        free(want);
      }
}

static void test_dual_add_layernorm(void **state) {
  (void)state;
  rng r = {31337};
  for (int wi = 0; wi < NW; wi++)
    for (int ri = 0; ri < NR; ri++)
      for (int alias = 0; alias < 2; alias++)
        for (int affine = 0; affine < 2; affine++) {
          int n = rows[ri], d = widths[wi];
          size_t nd = (size_t)n * d;
          float *xd = rand_buf(&r, nd, -2, 2), *xa = rand_buf(&r, nd, -2, 2),
                *u = rand_buf(&r, nd, -2, 2);
          float *w = rand_buf(&r, (size_t)d, 0.5f, 2), *b = rand_buf(&r, (size_t)d, -1, 1);
          float *xd_want = malloc(nd * sizeof *xd_want), *s = malloc(nd * sizeof *s),
                *xa_want = malloc(nd * sizeof *xa_want);
          assert_non_null(xd_want);
          assert_non_null(s);
          assert_non_null(xa_want);
          for (size_t i = 0; i < nd; i++) {
            xd_want[i] = 1.0f * xd[i] + 0.5f * u[i];
            s[i] = 0.25f * xa[i] + 1.0f * u[i];
          }
          const float *wp = affine ? w : NULL, *bp = affine ? b : NULL;
          bcrt_ref_layernorm(n, d, s, wp, bp, 1e-5f, xa_want);
          float *xd_out = alias ? xd : malloc(nd * sizeof *xd_out);
          float *xa_out = alias ? xa : malloc(nd * sizeof *xa_out);
          assert_non_null(xd_out);
          assert_non_null(xa_out);
          bcrt_dual_add_layernorm(n, d, 1.0f, xd, 0.5f, 0.25f, xa, 1.0f, u, wp, bp, 1e-5f,
                                  xd_out, xa_out);
          expect_close("dual xd", xd_out, xd_want, nd, 0, 2 * FLT_EPSILON);
          expect_close("dual xa", xa_out, xa_want, nd, 1e-6, 1e-6);
          if (!alias) {
            free(xd_out);
            free(xa_out);
          }
          free(xd);
          free(xa);
          free(u);
          free(w);
          free(b);
          free(xd_want);
          free(s);
          free(xa_want);
        }
}

// ---------------------------------------------------------------------------
// Softmax
// ---------------------------------------------------------------------------

static void test_softmax_hand(void **state) {
  (void)state;
  // [0, ln 2, -inf] -> [1/3, 2/3, 0]; the reference agrees.
  float s[3] = {0.0f, (float)LN2_, -(float)INFINITY}, t[3];
  memcpy(t, s, sizeof s);
  bcrt_softmax(1, 3, 3, 0, 0, s);
  bcrt_ref_softmax(1, 3, 3, 0, 0, t);
  float want[3] = {1.0f / 3, 2.0f / 3, 0.0f};
  expect_close("softmax hand", s, want, 3, 0, 3e-7);
  expect_close("softmax hand (ref)", t, want, 3, 0, 1.5e-7);
  assert_true(s[2] == 0.0f);
}

// Element error <= 1e-6 relative + 1e-12 absolute: softmax outputs are
// computed to a few ulp (measured < 5e-7 relative; rows span [-20, 20], so
// exp's inputs cover [-40, 0]).  Checks that causal
// masking gives exact zeros, that the padding between d and ld is never
// touched, and that every row sums to 1.
static void softmax_case(rng *r, int n, int d, int ld, int causal, int row0) {
  size_t sz = (size_t)n * ld;
  float *s = rand_buf(r, sz, -20, 20);
  for (int i = 0; i < n; i++)
    for (int j = d; j < ld; j++) s[(size_t)i * ld + j] = 12345.0f; // padding
  float *want = tu_dup(s, sz);
  bcrt_softmax(n, d, ld, causal, row0, s);
  bcrt_ref_softmax(n, d, ld, causal, row0, want);
  expect_close("softmax", s, want, sz, 1e-12, 1e-6);
  for (int i = 0; i < n; i++) {
    const float *row = s + (size_t)i * ld;
    long len = causal ? (long)i + 1 + row0 : d;
    double sum = 0;
    for (int j = 0; j < d; j++) {
      if (j >= len) assert_true(row[j] == 0.0f && !signbit(row[j]));
      sum += row[j];
    }
    if (len > 0) assert_true(fabs(sum - 1.0) < 1e-5);
    for (int j = d; j < ld; j++) assert_true(row[j] == 12345.0f);
  }
  free(s);
  free(want);
}

static void test_softmax_vs_ref(void **state) {
  (void)state;
  rng r = {4242};
  for (int wi = 0; wi < NW; wi++)
    for (int ri = 0; ri < NR; ri++) {
      int n = rows[ri], d = widths[wi];
      softmax_case(&r, n, d, d, 0, 0);
      softmax_case(&r, n, d, d + 3, 0, 0);
      softmax_case(&r, n, d, d, 1, 0);
      softmax_case(&r, n, d, d + 5, 1, 2);
      softmax_case(&r, n, d, d, 1, d);   // every row complete (row0 past d)
      softmax_case(&r, n, d, d, 1, -2);  // first rows empty: all zeros
    }
  softmax_case(&r, 128, 128, 128, 1, 0); // attention-sized, causal
  softmax_case(&r, 33, 100, 128, 1, 40); // a row block of a larger matrix
}

static void test_softmax_specials(void **state) {
  (void)state;
  const float inf = (float)INFINITY;
  enum { D = 37 };
  float s[4 * D];
  for (int j = 0; j < D; j++) {
    s[j] = -inf;                                    // row 0: all -inf
    s[D + j] = j % 3 ? -inf : (float)j;             // row 1: some -inf
    s[2 * D + j] = j == 5 ? 1e30f : -1e30f;         // row 2: huge values
    s[3 * D + j] = j == 7 ? NAN : 1.0f;             // row 3: a NaN
  }
  float want[4 * D];
  memcpy(want, s, sizeof s);
  bcrt_softmax(4, D, D, 0, 0, s);
  bcrt_ref_softmax(4, D, D, 0, 0, want);
  for (int j = 0; j < D; j++) {
    assert_true(s[j] == 0.0f); // defined: an all -inf row is zeros, not NaN
    if (j % 3) assert_true(s[D + j] == 0.0f);
    assert_true(s[2 * D + j] == (j == 5 ? 1.0f : 0.0f));
    assert_true(isnan(s[3 * D + j])); // NaN poisons its row, as in PyTorch
  }
  expect_close("softmax specials", s, want, 3 * D, 1e-12, 1e-6);
}

// ---------------------------------------------------------------------------
// The amalgamation: runtime/blockc_rt.c is tools/amalgamate.sh's output over
// runtime/src/ (run from the project root, as make test does).
// ---------------------------------------------------------------------------

static void test_amalgamation_is_current(void **state) {
  (void)state;
  char out[256], cmd[512];
  tu_tmp_path(out, sizeof out, ".c");
  snprintf(cmd, sizeof cmd, "sh tools/amalgamate.sh '%s'", out);
  assert_int_equal(system(cmd), 0);
  size_t n_new = 0, n_old = 0;
  char *fresh = tu_slurp(out, &n_new), *committed = tu_slurp("runtime/blockc_rt.c", &n_old);
  assert_non_null(fresh);
  assert_non_null(committed);
  if (n_new != n_old || memcmp(fresh, committed, n_new))
    fail_msg("runtime/blockc_rt.c is stale: run `make runtime` and commit it");
  // Every part is in it, between its markers.
  static const char *parts[] = {"prelude.c", "vecmath.c", "kernels.c", "kernels_bwd.c",
                                "gemm_small.c", "sgemm.c", "io.c", "json.c",
                                "safetensors.c", "npy.c"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    char mark[128];
    snprintf(mark, sizeof mark, "begin runtime/src/%s ***", parts[i]);
    if (!strstr(committed, mark)) fail_msg("no part %s in runtime/blockc_rt.c", parts[i]);
  }
  remove(out);
  free(fresh);
  free(committed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exp_accuracy),
    cmocka_unit_test(test_exp_specials),
    cmocka_unit_test(test_erf_accuracy),
    cmocka_unit_test(test_gelu_accuracy),
    cmocka_unit_test(test_act_specials),
    cmocka_unit_test(test_bias_act_vs_ref),
    cmocka_unit_test(test_fill_copy_add),
    cmocka_unit_test(test_layernorm_hand),
    cmocka_unit_test(test_layernorm_vs_ref),
    cmocka_unit_test(test_layernorm_constant_rows),
    cmocka_unit_test(test_add_layernorm),
    cmocka_unit_test(test_dual_add_layernorm),
    cmocka_unit_test(test_softmax_hand),
    cmocka_unit_test(test_softmax_vs_ref),
    cmocka_unit_test(test_softmax_specials),
    cmocka_unit_test(test_amalgamation_is_current),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
