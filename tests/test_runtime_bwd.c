// test_runtime_bwd.c — the backward kernels of runtime/blockc_rt.c (and
// bcrt_mul with its backward)
// against their naive double references, at odd sizes (rows 1, 3, 7;
// widths 1, 5, 12, 17, 33 so the LANES blocks have tails), plus hand
// values that pin each formula (a bug in the reference would otherwise
// pass both).
//
// Tolerances: every kernel is a few float operations per element plus one
// or two row reductions of d products; float rounding of a d-term sum is
// ~d * 6e-8 relative to the sum of magnitudes, so 2e-5 absolute +
// 2e-5 relative (inputs O(1), d <= 33) is ~10x the worst seen, while a
// dropped term (the LayerNorm mean term, the softmax row dot) is O(0.1).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blockc_rt.h"
#include "rt_ref.h"
#include "testutil.h"

typedef struct { unsigned s; } rng;

// n floats uniform in [lo, hi): tu_fill with a fresh seed per buffer.
static float *buf(rng *r, size_t n, float lo, float hi) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  tu_fill(p, (int64_t)n, r->s++);
  for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (p[i] + 1.0f) * 0.5f;
  return p;
}

#define dup tu_dup

static void close_to(const char *what, const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= 2e-5 + 2e-5 * fabs((double)want[i]))) {
      print_error("%s: element %zu: got %.9g, want %.9g\n", what, i, got[i], want[i]);
      fail();
    }
}

static const int rows[] = {1, 3, 7};
static const int widths[] = {1, 5, 12, 17, 33};
#define NR (int)(sizeof rows / sizeof rows[0])
#define NW (int)(sizeof widths / sizeof widths[0])

static void norm_case(rng *r, int n, int d, int rms, int affine) {
  size_t nel = (size_t)n * (size_t)d;
  float *x = buf(r, nel, -2, 3), *dy = buf(r, nel, -1, 1), *w = buf(r, (size_t)d, 0.5f, 1.5f);
  float *dx = buf(r, nel, -1, 1), *dw = buf(r, (size_t)d, -1, 1), *db = buf(r, (size_t)d, -1, 1);
  float *rdx = dup(dx, nel), *rdw = dup(dw, (size_t)d), *rdb = dup(db, (size_t)d);
  const float *wp = affine ? w : NULL;
  if (rms)
    bcrt_rmsnorm_bwd(n, d, x, wp, 1e-5f, dy, dx, affine ? dw : NULL);
  else
    bcrt_layernorm_bwd(n, d, x, wp, 1e-5f, dy, dx, affine ? dw : NULL, affine ? db : NULL);
  bcrt_ref_norm_bwd(n, d, rms, x, wp, 1e-5f, dy, rdx, affine ? rdw : NULL,
                    affine && !rms ? rdb : NULL);
  close_to("norm dx", dx, rdx, nel);
  close_to("norm dw", dw, rdw, (size_t)d);
  close_to("norm db", db, rdb, (size_t)d);
  free(x); free(dy); free(w); free(dx); free(dw); free(db); free(rdx); free(rdw); free(rdb);
}

static void test_norm_bwd_vs_ref(void **state) {
  (void)state;
  rng r = {7};
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NW; j++)
      for (int rms = 0; rms < 2; rms++)
        for (int affine = 0; affine < 2; affine++) norm_case(&r, rows[i], widths[j], rms, affine);
}

// x = [1, 3]: mean 2, xhat = [-1, 1]; dy = [1, 0], no affine, eps ~ 0:
// mean(g) = 0.5, mean(g xhat) = -0.5, so dx = rstd (g - 0.5 + 0.5 xhat)
// = [1 - 0.5 - 0.5, 0 - 0.5 + 0.5] = [0, 0]: a shift of one element of a
// two-element row only moves the mean; the normalised output cannot change.
// dy = [1, -1]: mean(g) = 0, mean(g xhat) = -1: dx = [1 - 1, -1 + 1] = 0 too
// (scale invariance).  A LayerNorm without the mean term gives dx = [0.5, -0.5].
static void test_layernorm_bwd_hand(void **state) {
  (void)state;
  const float x[3] = {1, 3, 2}, dy[3] = {1, 0, 0};
  float dx[3] = {0, 0, 0}, db[3] = {0, 0, 0}, dw[3] = {0, 0, 0};
  bcrt_layernorm_bwd(1, 2, x, NULL, 0.0f, dy, dx, dw, db);
  assert_true(fabsf(dx[0]) < 1e-6f && fabsf(dx[1]) < 1e-6f);
  assert_true(dx[2] == 0.0f);  // only d = 2 columns
  assert_true(fabsf(dw[0] + 1.0f) < 1e-6f && dw[1] == 0.0f);  // dy * xhat
  assert_true(db[0] == 1.0f && db[1] == 0.0f);
  // RMSNorm of [3, 4]: rms = sqrt(12.5), xhat = x / rms; dy = xhat gives
  // g - xhat mean(g xhat) = xhat - xhat * 1 = 0.
  const float xr[2] = {3, 4};
  float rr = sqrtf(12.5f), dyr[2] = {3 / rr, 4 / rr}, dxr[2] = {0, 0};
  bcrt_rmsnorm_bwd(1, 2, xr, NULL, 0.0f, dyr, dxr, NULL);
  assert_true(fabsf(dxr[0]) < 1e-6f && fabsf(dxr[1]) < 1e-6f);
}

static void test_softmax_bwd(void **state) {
  (void)state;
  rng r = {11};
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NW; j++) {
      int n = rows[i], d = widths[j], ld = d + 3;
      size_t nel = (size_t)n * (size_t)ld;
      float *p = buf(&r, nel, 0, 1), *dp = buf(&r, nel, -1, 1);
      for (int k = 0; k < n; k++) {  // rows of a softmax: sum 1
        double s = 0;
        for (int c = 0; c < d; c++) s += p[k * ld + c];
        for (int c = 0; c < d; c++) p[k * ld + c] = (float)(p[k * ld + c] / s);
      }
      float *want = dup(dp, nel);
      bcrt_softmax_bwd(n, d, ld, p, dp);
      bcrt_ref_softmax_bwd(n, d, ld, p, want);
      close_to("softmax_bwd", dp, want, nel);  // the padding columns too: untouched
      free(p); free(dp); free(want);
    }
  // p = [0.25, 0.75], dp = [1, 0]: dot = 0.25, ds = [0.25 * 0.75, 0.75 * -0.25].
  float p2[2] = {0.25f, 0.75f}, g2[2] = {1, 0};
  bcrt_softmax_bwd(1, 2, 2, p2, g2);
  assert_true(fabsf(g2[0] - 0.1875f) < 1e-7f && fabsf(g2[1] + 0.1875f) < 1e-7f);
}

static void test_act_bwd(void **state) {
  (void)state;
  rng r = {13};
  const int acts[] = {BCRT_ACT_RELU, BCRT_ACT_GELU, BCRT_ACT_GELU_TANH};
  for (int a = 0; a < 3; a++)
    for (int j = 0; j < NW; j++) {
      int n = 7, d = widths[j];
      size_t nel = (size_t)n * (size_t)d;
      float *h = buf(&r, nel, -6, 6), *g = buf(&r, nel, -1, 1), *want = dup(g, nel);
      bcrt_act_bwd(n, d, acts[a], h, g);
      bcrt_ref_act_bwd(n, d, acts[a], h, want);
      close_to("act_bwd", g, want, nel);
      // bcrt_act is the forward epilogue without a bias.
      float *y = dup(h, nel), *y2 = buf(&r, nel, 0, 1);
      bcrt_ref_bias_act(n, d, NULL, acts[a], y);
      bcrt_act(n, d, acts[a], h, y2);
      close_to("act", y2, y, nel);
      free(h); free(g); free(want); free(y); free(y2);
    }
  // Hand values: relu'(0) = 0 (torch), gelu'(0) = 0.5, gelu'(large) = 1.
  float h[3] = {0, 0, 30}, g[3] = {1, 1, 1};
  bcrt_act_bwd(1, 1, BCRT_ACT_RELU, h, g);
  assert_true(g[0] == 0.0f);
  bcrt_act_bwd(1, 3, BCRT_ACT_GELU, h, g + 0);
  assert_true(g[1] == 0.5f && fabsf(g[2] - 1.0f) < 1e-6f);
}

static void test_colsum_add(void **state) {
  (void)state;
  rng r = {17};
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NW; j++) {
      int n = rows[i], d = widths[j], ld = 2 * d + 1;
      float *dy = buf(&r, (size_t)n * (size_t)ld, -1, 1), *db = buf(&r, (size_t)d, -1, 1);
      float *want = dup(db, (size_t)d);
      for (int c = 0; c < d; c++) {
        double s = want[c];
        for (int k = 0; k < n; k++) s += dy[k * ld + c];
        want[c] = (float)s;
      }
      bcrt_colsum_add(n, d, ld, dy, db);
      close_to("colsum_add", db, want, (size_t)d);
      free(dy); free(db); free(want);
    }
}

// bcrt_mul and bcrt_mul_bwd for every broadcast: nb = 1 ([1]), a width
// ([D]), a row block ([T, D]) and nb = n (same shape); y over a in place;
// da == db (Mul(x, x)) at nb = n.  Against double loops.
static void mul_case(rng *r, int n, int nb, bool same) {
  size_t N = (size_t)n, B = (size_t)nb;
  float *a = buf(r, N, -2, 2), *b = same ? dup(a, N) : buf(r, B, -2, 2), *dy = buf(r, N, -1, 1);
  float *da = buf(r, N, -1, 1), *db = same ? da : buf(r, B, -1, 1);
  float *y = buf(r, N, -1, 1), *wy = dup(y, N), *wda = dup(da, N), *wdb = dup(db, B);
  for (size_t i = 0; i < N; i++) {
    wy[i] = (float)((double)a[i] * b[i % B]);
    wda[i] = (float)(wda[i] + (double)dy[i] * b[i % B]);
  }
  for (size_t i = 0; i < N; i++)
    (same ? wda : wdb)[i % B] = (float)((same ? wda : wdb)[i % B] + (double)dy[i] * a[i]);
  bcrt_mul_bwd(n, dy, a, nb, b, da, db);
  close_to("mul_bwd da", da, wda, N);
  if (!same) close_to("mul_bwd db", db, wdb, B);
  float *ac = dup(a, N);
  bcrt_mul(n, ac, nb, b, ac);  // in place over a
  close_to("mul in place", ac, wy, N);
  bcrt_mul(n, a, nb, b, y);
  close_to("mul", y, wy, N);
  free(a); free(b); free(dy); free(da); free(y); free(wy); free(wda); free(wdb); free(ac);
  if (!same) free(db);
}

// bcrt_pos_learned (in place and not, at pos0 > 0), bcrt_pos_sinusoid
// (in place, at an odd and an even width) and bcrt_pos_learned_bwd against
// double loops: rows pos0 .. pos0 + t - 1 of the table, summed over b.
static void test_positions(void **state) {
  (void)state;
  rng r = {29};
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NW; j++) {
      long b = 2, t = rows[i], d = widths[j], pos0 = 3, P = pos0 + t + 1;
      size_t N = (size_t)(b * t * d);
      float *x = buf(&r, N, -2, 2), *wpe = buf(&r, (size_t)(P * d), -1, 1), *y = buf(&r, N, 0, 1);
      float *want = dup(y, N), *dy = buf(&r, N, -1, 1), *dw = buf(&r, (size_t)(P * d), -1, 1);
      float *wdw = dup(dw, (size_t)(P * d)), *xc = dup(x, N);
      for (long bb = 0; bb < b; bb++)
        for (long tt = 0; tt < t; tt++)
          for (long c = 0; c < d; c++) {
            size_t k = (size_t)((bb * t + tt) * d + c), w = (size_t)((pos0 + tt) * d + c);
            want[k] = (float)((double)x[k] + wpe[w]);
            wdw[w] = (float)((double)wdw[w] + dy[k]);
          }
      bcrt_pos_learned(b, t, d, pos0, x, wpe, y);
      close_to("pos_learned", y, want, N);
      bcrt_pos_learned(b, t, d, pos0, xc, wpe, xc);
      close_to("pos_learned in place", xc, want, N);
      bcrt_pos_learned_bwd(b, t, d, pos0, dy, dw);
      close_to("pos_learned_bwd", dw, wdw, (size_t)(P * d));
      memcpy(xc, x, N * sizeof *x);
      for (long bb = 0; bb < b; bb++)
        for (long tt = 0; tt < t; tt++)
          for (long c = 0; c < d; c++) {
            size_t k = (size_t)((bb * t + tt) * d + c);
            double a = (double)(pos0 + tt) / pow(10000.0, (double)(c - c % 2) / (double)d);
            want[k] = (float)((double)x[k] + (c % 2 ? cos(a) : sin(a)));
          }
      bcrt_pos_sinusoid(b, t, d, pos0, xc, xc);
      close_to("pos_sinusoid in place", xc, want, N);
      free(x); free(wpe); free(y); free(want); free(dy); free(dw); free(wdw); free(xc);
    }
  float x[3] = {1, 2, 3}, wpe[6] = {10, 20, 30, 40, 50, 60}, y[3];
  bcrt_pos_learned(1, 1, 3, 1, x, wpe, y);  // position 1: the second row
  assert_true(y[0] == 41 && y[1] == 52 && y[2] == 63);
}

static void test_mul(void **state) {
  (void)state;
  rng r = {23};
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NW; j++) {
      int t = rows[i], d = widths[j], n = 2 * t * d;
      mul_case(&r, n, 1, false);
      mul_case(&r, n, d, false);
      mul_case(&r, n, t * d, false);
      mul_case(&r, n, n, false);
      mul_case(&r, n, n, true);
    }
  float a[4] = {1, 2, 3, 4}, b[2] = {10, -1}, y[4], dy[4] = {1, 1, 2, 0.5f};
  float da[4] = {0}, db[2] = {0};
  bcrt_mul(4, a, 2, b, y);
  assert_true(y[0] == 10 && y[1] == -2 && y[2] == 30 && y[3] == -4);
  bcrt_mul_bwd(4, dy, a, 2, b, da, db);
  assert_true(da[0] == 10 && da[1] == -1 && da[2] == 20 && da[3] == -0.5f);
  assert_true(db[0] == 1 + 6 && db[1] == 2 + 2);
}

static void test_glu(void **state) {
  (void)state;
  rng r = {19};
  const int acts[] = {BCRT_ACT_SWIGLU, BCRT_ACT_GEGLU};
  for (int a = 0; a < 2; a++)
    for (int j = 0; j < NW; j++) {
      int n = 3, d = widths[j];
      size_t nel = (size_t)n * (size_t)d;
      float *u = buf(&r, nel, -3, 3), *g = buf(&r, nel, -6, 6), *da = buf(&r, nel, -1, 1);
      float *dg = buf(&r, nel, -1, 1), *rda = dup(da, nel), *rdg = dup(dg, nel);
      bcrt_glu_bwd(n, d, acts[a], u, g, da, dg);
      bcrt_ref_glu_bwd(n, d, acts[a], u, g, rda, rdg);
      close_to("glu_bwd du", da, rda, nel);
      close_to("glu_bwd dg", dg, rdg, nel);
      // bcrt_glu_act is bcrt_glu (the forward epilogue) without biases.
      float *h = dup(u, nel), *y = buf(&r, nel, 0, 1);
      bcrt_glu(n, d, NULL, NULL, acts[a], h, g);
      bcrt_glu_act(n, d, acts[a], u, g, y);
      close_to("glu_act", y, h, nel);
      free(u); free(g); free(da); free(dg); free(rda); free(rdg); free(h); free(y);
    }
  // silu'(0) = 0.5: da = 1, u = 2, g = 0 -> dg = 1, du = silu(0) = 0.
  float u1 = 2, g1 = 0, da1 = 1, dg1 = 7;
  bcrt_glu_bwd(1, 1, BCRT_ACT_SWIGLU, &u1, &g1, &da1, &dg1);
  assert_true(dg1 == 1.0f && da1 == 0.0f);
}

// bcrt_rope_bwd is the transpose (here: the inverse) of bcrt_rope: applied
// after it, every row comes back; and <rope(x), y> = <x, rope_bwd(y)>.
static void test_rope_bwd(void **state) {
  (void)state;
  rng r = {23};
  int n = 14, t = 7, nh = 3, dh = 6, ld = 20;
  size_t nel = (size_t)n * (size_t)ld;
  float *x = buf(&r, nel, -1, 1), *y = buf(&r, nel, -1, 1), *x0 = dup(x, nel), *y0 = dup(y, nel);
  bcrt_rope(n, t, 2, nh, dh, ld, 10000.0f, x);
  bcrt_rope_bwd(n, t, 2, nh, dh, ld, 10000.0f, y);
  double a = 0, b = 0;
  for (size_t i = 0; i < nel; i++) {
    a += (double)x[i] * y0[i];
    b += (double)x0[i] * y[i];
  }
  assert_true(fabs(a - b) < 1e-4);
  bcrt_rope_bwd(n, t, 2, nh, dh, ld, 10000.0f, x);
  close_to("rope_bwd(rope(x))", x, x0, nel);
  free(x); free(y); free(x0); free(y0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_norm_bwd_vs_ref),
      cmocka_unit_test(test_layernorm_bwd_hand),
      cmocka_unit_test(test_softmax_bwd),
      cmocka_unit_test(test_act_bwd),
      cmocka_unit_test(test_colsum_add),
      cmocka_unit_test(test_glu),
      cmocka_unit_test(test_mul),
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_rope_bwd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
