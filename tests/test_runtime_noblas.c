// test_runtime_noblas.c — the portable cblas_sgemm that blockc_rt.c defines
// under -DBLOCKC_NO_BLAS (a wrapper over bcrt_sgemm), against a naive triple
// loop in double; here compiled with the test flags (no -march=native), so
// this is the generic build vendoring users get.
//
// The runtime is #included with BLOCKC_NO_BLAS set, so this object defines
// cblas_sgemm and every bcrt_* itself; the linker then takes neither from
// build/libblockc.a's blockc_rt.o nor cblas_sgemm from OpenBLAS (an
// executable's own definition wins over a shared library's; were the
// archive's blockc_rt.o pulled in as well, the link would fail on duplicate
// symbols rather than silently test OpenBLAS).
#define BLOCKC_NO_BLAS
#include "../runtime/blockc_rt.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "testutil.h"

#define COL_MAJOR 102

// Element (r, c) of op(M) for a row-major (or, with col, column-major) M.
static double at(const float *m, int ld, int trans, int col, int r, int c) {
  if (col) trans = !trans; // column-major M is row-major M^T
  return trans ? m[(size_t)c * ld + r] : m[(size_t)r * ld + c];
}

// Runs one sgemm and checks every element of C, and that C's padding
// (columns n..ldc) is untouched.  Error bound: each product and sum rounds
// once in float, so |err| <= 2 k eps sum|alpha a b| + eps |beta c| (+ slack).
static void check_gemm(tu_rng *r, int col, int ta, int tb, int m, int n, int k, float alpha,
                       float beta, int pad) {
  int ar = ta ? k : m, ac = ta ? m : k; // op(A) is m x k; A itself is ar x ac
  int br = tb ? n : k, bc = tb ? k : n;
  int cr = m, cc = n;
  if (col) { // column-major: the stored leading dimension runs over rows
    int t;
    t = ar, ar = ac, ac = t;
    t = br, br = bc, bc = t;
    t = cr, cr = cc, cc = t;
  }
  int lda = ac + pad, ldb = bc + pad, ldc = cc + pad;
  float *a = malloc((size_t)ar * lda * sizeof *a + 4), *b = malloc((size_t)br * ldb * sizeof *b + 4);
  float *c = malloc((size_t)cr * ldc * sizeof *c + 4), *c0 = malloc((size_t)cr * ldc * sizeof *c0 + 4);
  assert_true(a && b && c && c0);
  for (size_t i = 0; i < (size_t)ar * lda; i++) a[i] = tu_rnd(r);
  for (size_t i = 0; i < (size_t)br * ldb; i++) b[i] = tu_rnd(r);
  for (size_t i = 0; i < (size_t)cr * ldc; i++) c[i] = beta == 0 ? NAN : tu_rnd(r); // beta 0: C unread
  memcpy(c0, c, (size_t)cr * ldc * sizeof *c);
  cblas_sgemm(col ? COL_MAJOR : BCRT_ROW_MAJOR, ta ? BCRT_TRANS : BCRT_NO_TRANS,
              tb ? BCRT_TRANS : BCRT_NO_TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = at(a, lda, ta, col, i, p) * at(b, ldb, tb, col, p, j);
        sum += t;
        mag += fabs(t);
      }
      size_t ci = col ? (size_t)j * ldc + i : (size_t)i * ldc + j;
      double old = beta == 0 ? 0 : c0[ci];
      double want = alpha * sum + beta * old;
      double tol = 2.0 * (k + 2) * FLT_EPSILON * (fabs(alpha) * mag + fabs(beta * old)) + 1e-30;
      if (!(fabs(c[ci] - want) <= tol)) {
        print_error("sgemm col=%d ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g pad=%d: "
                    "C[%d,%d] = %.9g, want %.9g\n",
                    col, ta, tb, m, n, k, alpha, beta, pad, i, j, c[ci], want);
        fail();
      }
    }
  for (int i = 0; i < cr; i++)
    for (int j = cc; j < ldc; j++) {
      size_t ci = (size_t)i * ldc + j;
      assert_true(memcmp(&c[ci], &c0[ci], sizeof *c) == 0);
    }
  free(a);
  free(b);
  free(c);
  free(c0);
}

// 2x3 . 3x2 by hand, so the test does not only compare us with a loop we
// also wrote.
static void test_sgemm_hand(void **state) {
  (void)state;
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
  float c[4] = {NAN, NAN, NAN, NAN};
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c,
              2);
  assert_true(c[0] == 58 && c[1] == 64 && c[2] == 139 && c[3] == 154);
  float d[4] = {1, 1, 1, 1};
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_TRANS, BCRT_NO_TRANS, 2, 2, 3, 2.0f, b, 2, b, 2, 0.5f, d, 2);
  // 2 B^T B + 0.5: B^T B = [[7*7+9*9+11*11, ...]] = [[251, 278], [278, 308]]
  assert_true(d[0] == 502.5f && d[1] == 556.5f && d[2] == 556.5f && d[3] == 616.5f);
}

static void test_sgemm_shapes(void **state) {
  (void)state;
  tu_rng r = {0x9e3779b97f4a7c15ull};
  static const int sizes[] = {1, 2, 3, 17, 64, 65, 130};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  int iter = 0;
  for (int mi = 0; mi < NS; mi++)
    for (int ni = 0; ni < NS; ni++)
      for (int ki = 0; ki < NS; ki++) {
        // Every transpose/order combination on a rotating subset of shapes
        // keeps this well under a second.
        int t = iter++;
        int ta = t & 1, tb = (t >> 1) & 1, col = (t % 7) == 3, pad = (t % 3) * 3;
        float alpha = (t % 5) == 0 ? -2.0f : (t % 5) == 1 ? 0.5f : 1.0f;
        float beta = (t % 4) == 0 ? 0.0f : (t % 4) == 1 ? 1.0f : 0.25f;
        check_gemm(&r, col, ta, tb, sizes[mi], sizes[ni], sizes[ki], alpha, beta, pad);
      }
  // Blocking edges: m across GM_MC row blocks, n across GM_NR micro-panels,
  // k across GM_KC blocks (column-major swaps m and n).
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check_gemm(&r, 0, ta, tb, GM_MC + 9, 2 * GM_NR + 5, GM_KC + 1, 1.0f, 0.0f, 1);
      check_gemm(&r, 1, ta, tb, 2 * GM_NR + 1, GM_MC + 3, GM_KC - 1, -1.0f, 1.0f, 0);
    }
}

// alpha == 0 or k == 0: C = beta C, and A, B are not read (NaNs there must
// not leak); beta == 0 ignores C's NaNs.
static void test_sgemm_degenerate(void **state) {
  (void)state;
  float a[4] = {NAN, NAN, NAN, NAN}, b[4] = {NAN, NAN, NAN, NAN};
  float c[4] = {1, 2, 3, 4};
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 2, 0.0f, a, 2, b, 2, 3.0f, c,
              2);
  assert_true(c[0] == 3 && c[1] == 6 && c[2] == 9 && c[3] == 12);
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 0, 1.0f, a, 2, b, 2, 0.0f, c,
              2);
  assert_true(c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0);
  float one[1] = {2}, x[1] = {NAN};
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, 1, 1, 1, 1.0f, one, 1, one, 1, 0.0f,
              x, 1);
  assert_true(x[0] == 4);
  // m or n == 0: nothing touched.
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, 0, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c,
              2);
  assert_true(c[0] == 0);
}

// The fallback bcrt_sgemm takes when its packing buffers cannot be
// allocated, called directly (it is static; this file includes the .c).
static void test_sgemm_fallback(void **state) {
  (void)state;
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
  float c[4] = {NAN, NAN, NAN, NAN};
  gm_plain(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  assert_true(c[0] == 58 && c[1] == 64 && c[2] == 139 && c[3] == 154);
  float d[4] = {1, 1, 1, 1};
  gm_plain(1, 0, 2, 2, 3, 2.0f, b, 2, b, 2, 0.5f, d, 2);
  assert_true(d[0] == 502.5f && d[1] == 556.5f && d[2] == 556.5f && d[3] == 616.5f);
  float e[4] = {NAN, NAN, NAN, NAN}; // A^T B^T = (B A)^T: [[76, 103], [100, 136]]
  gm_plain(1, 1, 2, 2, 3, 1.0f, a, 2, b, 3, 0.0f, e, 2);
  assert_true(e[0] == 1 * 7 + 3 * 8 + 5 * 9 && e[1] == 1 * 10 + 3 * 11 + 5 * 12);
  assert_true(e[2] == 2 * 7 + 4 * 8 + 6 * 9 && e[3] == 2 * 10 + 4 * 11 + 6 * 12);
}

// bcrt_gemm_small above 32 rows takes the blocked path; if its buffer
// cannot be allocated it runs the 32-row-group path instead.  Both must
// agree (to rounding: they sum in different orders) on the same call.
static void test_small_many_rows_fallback(void **state) {
  (void)state;
  tu_rng r = {0x3c6ef372fe94f82bull};
  enum { M = 70, N = 45, K = 300 };
  float *x = malloc(M * K * sizeof *x), *w = malloc(N * K * sizeof *w), *bias = malloc(N * 4);
  float *p = malloc(bcrt_pack_nt_size(N, K) * sizeof *p);
  float *y1 = malloc(M * N * sizeof *y1), *y2 = malloc(M * N * sizeof *y2);
  assert_true(x && w && bias && p && y1 && y2);
  for (int i = 0; i < M * K; i++) x[i] = tu_rnd(&r);
  for (int i = 0; i < N * K; i++) w[i] = tu_rnd(&r);
  for (int i = 0; i < N; i++) bias[i] = tu_rnd(&r);
  bcrt_pack_nt(N, K, w, p);
  bcrt_gemm_small(M, N, K, x, K, p, bias, 0.0f, y1, N);
  sg_panels_many(0, 0, (N + SG_NR - 1) / SG_NR, M, N, K, x, K, p, bias, 0.0f, y2, N);
  for (int i = 0; i < M * N; i++) {
    double mag = fabs(bias[i % N]);
    for (int k = 0; k < K; k++) mag += fabs((double)x[(i / N) * K + k] * w[(i % N) * K + k]);
    assert_true(fabs((double)y1[i] - y2[i]) <= 4.0 * (K + 2) * FLT_EPSILON * mag);
  }
  free(x), free(w), free(bias), free(p), free(y1), free(y2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sgemm_hand),
    cmocka_unit_test(test_sgemm_shapes),
    cmocka_unit_test(test_sgemm_degenerate),
    cmocka_unit_test(test_sgemm_fallback),
    cmocka_unit_test(test_small_many_rows_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
