// test_gemm.c — the matrix products (packed small-M, blocked, portable) of runtime/blockc_rt.c
// (bcrt_pack_nt + bcrt_gemm_small[_part|_mt], its BF16-weight variant, and
// the portable bcrt_sgemm)
// against a naive triple loop in double, at odd sizes.
//
// Linked from build/libblockc.a, so this checks the -O3 -march=native build
// the JIT binds (tests/test_runtime_noblas.c checks the same GEMM compiled
// with the test flags, through cblas_sgemm under -DBLOCKC_NO_BLAS).
//
// Tolerance, for every element: each product and each sum rounds once in
// float (FMA: once per step), the blocked sums reassociate, so
//   |got - want| <= 2 (k + 2) eps (sum_p |a_ip b_pj| |alpha| + |bias| + |beta c|)
// where want is the double-precision result; a wrong element (a dropped
// k chunk, a bias added twice, a stray row) misses this by orders of
// magnitude.  Padding columns of C (ld > n) must be untouched, and
// beta == 0 must not read C (C is filled with NaN then).
#define _DEFAULT_SOURCE  // MAP_ANONYMOUS
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blockc_rt.h"
#include "testutil.h"

static float *rand_buf(tu_rng *r, size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) p[i] = tu_rnd(r);
  return p;
}

// Compares C (m x n, row stride ldc) with the double-precision reference
//   want = alpha sum_p op(A)[i,p] op(B)[p,j] + bias[j] + beta c0
// and checks C's padding against c0.  Elements are fetched through at().
typedef struct {
  int ta, tb;
  const float *a, *b;
  int lda, ldb;
  int view; // C is a column slice of a wider matrix: padding checked by the caller
} operands;

static double op_at(const float *m, int ld, int trans, int r, int c) {
  return trans ? m[(size_t)c * ld + r] : m[(size_t)r * ld + c];
}

static void expect_product(const char *what, const operands *o, int m, int n, int k,
                           float alpha, const float *bias, float beta, const float *c0,
                           const float *c, int ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double t = op_at(o->a, o->lda, o->ta, i, p) * op_at(o->b, o->ldb, o->tb, p, j);
        sum += t;
        mag += fabs(t);
      }
      size_t ci = (size_t)i * ldc + j;
      double old = beta == 0 ? 0 : c0[ci], bj = bias ? bias[j] : 0;
      double want = alpha * sum + bj + beta * old;
      double tol = 2.0 * (k + 2) * FLT_EPSILON * (fabs(alpha) * mag + fabs(bj) + fabs(beta * old)) +
                   1e-30;
      if (!(fabs(c[ci] - want) <= tol)) {
        print_error("%s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g bias=%d: C[%d,%d] = %.9g, "
                    "want %.9g (tol %.3g)\n",
                    what, m, n, k, o->ta, o->tb, alpha, beta, bias != NULL, i, j, c[ci], want,
                    tol);
        fail();
      }
    }
  for (int i = 0; i < m && !o->view; i++)
    for (int j = n; j < ldc; j++) {
      size_t ci = (size_t)i * ldc + j;
      if (memcmp(&c[ci], &c0[ci], sizeof *c)) {
        print_error("%s m=%d n=%d k=%d: padding C[%d,%d] changed\n", what, m, n, k, i, j);
        fail();
      }
    }
}

// ---------------------------------------------------------------------------
// Small-M kernel
// ---------------------------------------------------------------------------

// The packed layout, element by element, on a case small enough to state:
// W is 33 x 2 (two panels), W[j, kk] = 10 j + kk.
static void test_pack_layout(void **state) {
  (void)state;
  enum { N = 33, K = 2 };
  assert_int_equal(BCRT_PACK_NR, 32);
  assert_int_equal(bcrt_pack_nt_size(N, K), 64 * K);
  assert_int_equal(bcrt_pack_nt_size(32, 5), 32 * 5);
  assert_int_equal(bcrt_pack_nt_size(0, 5), 0);
  assert_int_equal(bcrt_pack_nt_size(5, 0), 0);
  float w[N * K], p[64 * K];
  for (int j = 0; j < N; j++)
    for (int kk = 0; kk < K; kk++) w[j * K + kk] = (float)(10 * j + kk);
  memset(p, 0xff, sizeof p); // NaN pattern: padding must be written as zeros
  bcrt_pack_nt(N, K, w, p);
  for (int j = 0; j < 32; j++) {
    assert_true(p[0 * 32 + j] == (float)(10 * j));     // panel 0, kk = 0
    assert_true(p[1 * 32 + j] == (float)(10 * j + 1)); // panel 0, kk = 1
  }
  assert_true(p[64 + 0] == 320.0f && p[64 + 32] == 321.0f); // panel 1: row 32
  for (int j = 1; j < 32; j++) assert_true(p[64 + j] == 0.0f && p[64 + 32 + j] == 0.0f);
}

// An m x n output with row stride ldy, random; NaN where beta == 0 means
// it must not be read.
static float *out_buf(tu_rng *r, int m, int n, int ldy, float beta) {
  float *y = rand_buf(r, (size_t)m * ldy);
  if (beta == 0)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) y[(size_t)i * ldy + j] = NAN;
  return y;
}

// One bcrt_gemm_small call checked against the reference; returns nothing,
// fails the test on any bad element.  pad > 0 gives ldx > k and ldy > n.
static void small_case(tu_rng *r, int m, int n, int k, int use_bias, float beta, int pad) {
  int ldx = k + pad, ldy = n + pad;
  float *x = rand_buf(r, (size_t)m * ldx), *w = rand_buf(r, (size_t)n * k);
  float *bias = use_bias ? rand_buf(r, (size_t)n) : NULL;
  float *y = out_buf(r, m, n, ldy, beta), *y0 = tu_dup(y, (size_t)m * ldy);
  float *p = malloc((bcrt_pack_nt_size(n, k) + 1) * sizeof *p);
  assert_non_null(p);
  bcrt_pack_nt(n, k, w, p);
  bcrt_gemm_small(m, n, k, x, ldx, p, bias, beta, y, ldy);
  operands o = {.ta = 0, .tb = 1, .a = x, .b = w, .lda = ldx, .ldb = k};
  expect_product("gemm_small", &o, m, n, k, 1.0f, bias, beta, y0, y, ldy);
  free(x), free(w), free(bias), free(y), free(y0), free(p);
}

// M = 1..33 (every register-tile remainder, one and several row blocks),
// then the one-group rows up to BCRT_SMALL_M (k in chunks of 128 there) and
// the first blocked row count; N and K not multiples of 16 or 32, K across
// the 128- and 256-step chunks.
static void test_small_vs_ref(void **state) {
  (void)state;
  tu_rng r = {0x243f6a8885a308d3ull};
  static const int nk[][2] = {{1, 1}, {7, 5}, {33, 17}, {65, 300}, {100, 513}};
  static const int more[] = {34, 40, 47, 57, BCRT_SMALL_M - 1, BCRT_SMALL_M, BCRT_SMALL_M + 1};
  int t = 0;
  for (int i = 0; i < 33 + (int)(sizeof more / sizeof more[0]); i++)
    for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++, t++) {
      int m = i < 33 ? i + 1 : more[i - 33];
      float beta = t % 3 == 0 ? 0.0f : t % 3 == 1 ? 1.0f : 0.5f;
      small_case(&r, m, nk[s][0], nk[s][1], t % 2, beta, t % 4 == 3 ? 3 : 0);
    }
  // The emitter's shapes, once each with bias (beta 0) and accumulating.
  small_case(&r, 1, 1536, 512, 1, 0.0f, 0);
  small_case(&r, 9, 512, 2048, 0, 1.0f, 0);
  // BCRT_SMALL_M rows in one group, then many rows (the blocked path):
  // across the 128-row and 256-k blocks.
  small_case(&r, 64, 70, 300, 1, 0.0f, 2);
  small_case(&r, 130, 33, 513, 1, 0.5f, 0);
  small_case(&r, 200, 5, 7, 0, 1.0f, 1);
  small_case(&r, 40, 65, 0, 1, 0.5f, 0);
}

// bcrt_pack_nn (W stored (in, out), a column block of a wider matrix) gives
// the same panels as bcrt_pack_nt of the transpose, bit for bit.
static void test_pack_nn(void **state) {
  (void)state;
  tu_rng r = {0x9e3779b97f4a7c15ull};
  static const int nk[][3] = {{1, 1, 0}, {7, 5, 3}, {33, 17, 0}, {65, 300, 31}, {32, 2, 1}};
  for (size_t s2 = 0; s2 < sizeof nk / sizeof nk[0]; s2++) {
    int n = nk[s2][0], k = nk[s2][1], col0 = nk[s2][2], ldw = n + col0 + 2;
    float *wio = rand_buf(&r, (size_t)k * ldw), *wt = malloc((size_t)n * k * sizeof *wt);
    assert_non_null(wt);
    for (int j = 0; j < n; j++)
      for (int kk = 0; kk < k; kk++) wt[(size_t)j * k + kk] = wio[(size_t)kk * ldw + col0 + j];
    size_t np = bcrt_pack_nt_size(n, k);
    float *a = malloc(np * sizeof *a), *b = malloc(np * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 0xff, np * sizeof *a);  // NaN pattern: padding must be written
    bcrt_pack_nt(n, k, wt, b);
    bcrt_pack_nn(n, k, wio + col0, ldw, a);
    assert_memory_equal(a, b, np * sizeof *a);
    free(wio), free(wt), free(a), free(b);
  }
}

// bcrt_linear, the call generated code makes: with a packed copy (at an
// offset) and m <= BCRT_SMALL_M the small-M kernel, else cblas on W; both
// layouts, bias, beta and a column block of a wider y; the same result
// with or without the packed copy (within the tolerance).
static void linear_case(tu_rng *r, int m, int n, int k, int in_out, int use_bias, float beta,
                        int pad, int packed) {
  int ldx = k, ldy = n + pad, ldw = in_out ? n + pad : k;
  float *x = rand_buf(r, (size_t)m * ldx);
  float *w = rand_buf(r, in_out ? (size_t)k * ldw : (size_t)n * ldw);
  float *bias = use_bias ? rand_buf(r, (size_t)n) : NULL;
  float *y = out_buf(r, m, n, ldy, beta), *y0 = tu_dup(y, (size_t)m * ldy);
  enum { OFF = 48 };  // the block's offset in the packed buffer
  float *p = malloc((bcrt_pack_nt_size(n, k) + OFF + 1) * sizeof *p);
  assert_non_null(p);
  if (in_out) bcrt_pack_nn(n, k, w, ldw, p + OFF);
  else bcrt_pack_nt(n, k, w, p + OFF);
  bcrt_linear(m, n, k, x, ldx, w, ldw, in_out ? BCRT_NO_TRANS : BCRT_TRANS, packed ? p : NULL,
              OFF, bias, beta, y, ldy);
  operands o = {.ta = 0, .tb = !in_out, .a = x, .b = w, .lda = ldx, .ldb = ldw};
  expect_product("linear", &o, m, n, k, 1.0f, bias, beta, y0, y, ldy);
  free(x), free(w), free(bias), free(y), free(y0), free(p);
}

static void test_linear(void **state) {
  (void)state;
  tu_rng r = {0x452821e638d01377ull};
  int t = 0;
  static const int ms[] = {1, 2, 5, 8, 9, 17, 32, 33, 63, BCRT_SMALL_M, BCRT_SMALL_M + 1, 100};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (int in_out = 0; in_out < 2; in_out++)
      for (int packed = 0; packed < 2; packed++, t++) {
        float beta = t % 3 == 0 ? 0.0f : t % 3 == 1 ? 1.0f : 0.5f;
        linear_case(&r, ms[i], 37 + t % 5, 19 + 2 * (t % 7), in_out, t % 2 == 0, beta,
                    t % 4 == 3 ? 3 : 0, packed);
      }
  // Degenerate: m = 0 or n = 0 leave y alone, with and without a copy.
  float y[2] = {5, 6}, w[2] = {1, 1}, x[2] = {1, 1};
  bcrt_linear(0, 2, 1, x, 1, w, 1, BCRT_TRANS, w, 0, NULL, 0.0f, y, 2);
  bcrt_linear(1, 0, 1, x, 1, w, 1, BCRT_TRANS, NULL, 0, NULL, 0.0f, y, 2);
  assert_true(y[0] == 5 && y[1] == 6);
}

// bcrt_gemm_rows_nt / _nn (attention against the KV cache) against the
// reference: M = 1..33 (their own loops up to BCRT_ROWS_M, cblas above), K
// and N odd, strided operands (a head inside a K|V row), y a column block;
// N = 48, 50, 80 with K a multiple of 16: nt's blocks of 16 keys and a key
// tail, nn's passes of 4 (2) column blocks and a block tail.
static void rows_case(tu_rng *r, int nn, int m, int n, int k) {
  int ldx = k + 3, ldb = (nn ? n : k) + 5, ldy = n + 2;
  float *x = rand_buf(r, (size_t)m * ldx);
  float *b = rand_buf(r, nn ? (size_t)k * ldb : (size_t)n * ldb);
  float *y = out_buf(r, m, n, ldy, 0.0f), *y0 = tu_dup(y, (size_t)m * ldy);  // never read
  float alpha = nn ? 1.0f : 0.125f;
  if (nn) bcrt_gemm_rows_nn(m, n, k, alpha, x, ldx, b, ldb, y, ldy);
  else bcrt_gemm_rows_nt(m, n, k, alpha, x, ldx, b, ldb, y, ldy);
  operands o = {.ta = 0, .tb = !nn, .a = x, .b = b, .lda = ldx, .ldb = ldb};
  expect_product(nn ? "rows_nn" : "rows_nt", &o, m, n, k, alpha, NULL, 0.0f, y0, y, ldy);
  free(x), free(b), free(y), free(y0);
}

static void test_gemm_rows(void **state) {
  (void)state;
  tu_rng r = {0xa4093822299f31d0ull};
  static const int nk[][2] = {{1, 1}, {7, 5}, {33, 17}, {64, 64}, {65, 300}, {513, 63},
                                   {80, 48}, {48, 16}, {50, 32}};
  for (int m = 1; m <= 33; m++)
    for (size_t s2 = 0; s2 < sizeof nk / sizeof nk[0]; s2++)
      for (int nn = 0; nn < 2; nn++) rows_case(&r, nn, m, nk[s2][0], nk[s2][1]);
  rows_case(&r, 1, 2, 9000, 3);  // m * n past the nn stack tile: cblas
  // a row's scores do not depend on the rows beside it (nt's pairs of rows
  // and its single rows sum alike): rows together = one row at a time, bytes
  for (int m = 1; m <= 5; m++) {
    enum { N = 87, K = 64, LD = 80 };
    float *x = rand_buf(&r, (size_t)m * K), *b = rand_buf(&r, (size_t)N * LD);
    float *ya = out_buf(&r, m, N, N, 0.0f), *yb = tu_dup(ya, (size_t)m * N);
    bcrt_gemm_rows_nt(m, N, K, 0.125f, x, K, b, LD, ya, N);
    for (int i = 0; i < m; i++)
      bcrt_gemm_rows_nt(1, N, K, 0.125f, x + (size_t)i * K, K, b, LD, yb + (size_t)i * N, N);
    assert_memory_equal(ya, yb, sizeof(float) * (size_t)m * N);
    free(x), free(b), free(ya), free(yb);
  }
  float y[1] = {7};
  bcrt_gemm_rows_nt(0, 1, 1, 1.0f, y, 1, y, 1, y, 1);
  bcrt_gemm_rows_nn(1, 0, 1, 1.0f, y, 1, y, 1, y, 1);
  assert_true(y[0] == 7);
}

// The read floor's sum: exact on small integers, any n, with and without
// the prefetch, and it reads every element (a changed last one shows).
static void test_stream_sum(void **state) {
  (void)state;
  static const long ns[] = {0, 1, 63, 64, 65, 1000, 4099};
  float *x = malloc(4099 * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    long n = ns[i];
    for (long j = 0; j < n; j++) x[j] = (float)(j % 7);
    double want = 0;
    for (long j = 0; j < n; j++) want += x[j];
    for (int pf = 0; pf < 2; pf++) assert_true(bcrt_stream_sum(n, x, pf) == (float)want);
    if (n) {
      x[n - 1] += 100.0f;
      assert_true(bcrt_stream_sum(n, x, 1) == (float)(want + 100.0));
    }
  }
  free(x);
}

// k == 0: y = bias + beta y; m or n == 0: y untouched.
static void test_small_degenerate(void **state) {
  (void)state;
  float bias[3] = {1, 2, 3}, y[6] = {NAN, NAN, NAN, 10, 20, 30};
  float p[1] = {NAN}, none[1] = {NAN};
  bcrt_gemm_small(1, 3, 0, none, 0, p, bias, 0.0f, y, 3);
  assert_true(y[0] == 1 && y[1] == 2 && y[2] == 3);
  bcrt_gemm_small(1, 3, 0, none, 0, p, bias, 2.0f, y + 3, 3);
  assert_true(y[3] == 21 && y[4] == 42 && y[5] == 63);
  bcrt_gemm_small(0, 3, 4, none, 4, p, bias, 0.0f, y, 3);
  bcrt_gemm_small(2, 0, 4, none, 4, p, bias, 0.0f, y, 3);
  assert_true(y[0] == 1 && y[3] == 21);
  // Hand-checked: x = [1 2], W = [[1 0], [0 1], [3 4]], bias = [1 2 3].
  float x[2] = {1, 2}, w[6] = {1, 0, 0, 1, 3, 4}, pk[64], out[3] = {NAN, NAN, NAN};
  bcrt_pack_nt(3, 2, w, pk);
  bcrt_gemm_small(1, 3, 2, x, 2, pk, bias, 0.0f, out, 3);
  assert_true(out[0] == 2 && out[1] == 4 && out[2] == 14);
}

// Any split into parts, on threads or not, gives bitwise the same result
// as one call (each column is computed the same way whoever computes it).
static void test_small_parts_and_threads(void **state) {
  (void)state;
  tu_rng r = {0x13198a2e03707344ull};
  enum { M = 11, N = 200, K = 300 };
  float *x = rand_buf(&r, (size_t)M * K), *w = rand_buf(&r, (size_t)N * K);
  float *bias = rand_buf(&r, N), *y0 = rand_buf(&r, (size_t)M * N);
  float *p = malloc(bcrt_pack_nt_size(N, K) * sizeof *p);
  assert_non_null(p);
  bcrt_pack_nt(N, K, w, p);
  float *want = tu_dup(y0, (size_t)M * N), *got = tu_dup(y0, (size_t)M * N);
  bcrt_gemm_small(M, N, K, x, K, p, bias, 0.5f, want, N);
  for (int parts = 1; parts <= 9; parts += 2) {
    memcpy(got, y0, (size_t)M * N * sizeof *got);
    for (int q = parts - 1; q >= 0; q--) // any order
      bcrt_gemm_small_part(q, parts, M, N, K, x, K, p, bias, 0.5f, got, N);
    assert_memory_equal(got, want, (size_t)M * N * sizeof *got);
  }
  static const int threads[] = {0, 1, 2, 3, 7, 100};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
    memcpy(got, y0, (size_t)M * N * sizeof *got);
    bcrt_gemm_small_mt(threads[t], M, N, K, x, K, p, bias, 0.5f, got, N);
    assert_memory_equal(got, want, (size_t)M * N * sizeof *got);
  }
  // Bad part numbers do nothing.
  memcpy(got, y0, (size_t)M * N * sizeof *got);
  bcrt_gemm_small_part(3, 3, M, N, K, x, K, p, bias, 0.5f, got, N);
  bcrt_gemm_small_part(-1, 3, M, N, K, x, K, p, bias, 0.5f, got, N);
  bcrt_gemm_small_part(0, 0, M, N, K, x, K, p, bias, 0.5f, got, N);
  assert_memory_equal(got, y0, (size_t)M * N * sizeof *got);
  free(x), free(w), free(bias), free(y0), free(p), free(want), free(got);
}

// ---------------------------------------------------------------------------
// Portable GEMM
// ---------------------------------------------------------------------------

static void sgemm_case(tu_rng *r, int ta, int tb, int m, int n, int k, float alpha, float beta,
                       int pad) {
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int lda = ac + pad, ldb = bc + pad, ldc = n + pad;
  float *a = rand_buf(r, (size_t)ar * lda), *b = rand_buf(r, (size_t)br * ldb);
  float *c = rand_buf(r, (size_t)m * ldc);
  if (beta == 0)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] = NAN;
  float *c0 = tu_dup(c, (size_t)m * ldc);
  bcrt_sgemm(ta ? BCRT_TRANS : BCRT_NO_TRANS, tb ? BCRT_TRANS : BCRT_NO_TRANS, m, n, k, alpha, a,
             lda, b, ldb, beta, c, ldc);
  operands o = {.ta = ta, .tb = tb, .a = a, .b = b, .lda = lda, .ldb = ldb};
  expect_product("bcrt_sgemm", &o, m, n, k, alpha, NULL, beta, c0, c, ldc);
  free(a), free(b), free(c), free(c0);
}

// Every transpose pair, padded leading dimensions, alpha/beta as the
// emitter uses them (1, the attention scale, beta 0 and 1) and others,
// sizes across the register tile (8 x 32), the k block (256) and the row
// block (128).
static void test_sgemm_vs_ref(void **state) {
  (void)state;
  tu_rng r = {0xa4093822299f31d0ull};
  static const int ms[] = {1, 7, 9, 33, 130}, ns[] = {1, 31, 33, 65}, ks[] = {1, 17, 257};
  static const float alphas[] = {1.0f, 0.125f, -2.0f}, betas[] = {0.0f, 1.0f, 0.25f};
  int t = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++, t++)
        sgemm_case(&r, t & 1, (t >> 1) & 1, ms[mi], ns[ni], ks[ki], alphas[t % 3],
                   betas[(t / 3) % 3], t % 5 == 2 ? 5 : 0);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) sgemm_case(&r, ta, tb, 131, 70, 600, 1.0f, 0.0f, 1);
}

// The emitter's attention calls: heads as strided views of qkv [T, 3D].
static void test_sgemm_attention_views(void **state) {
  (void)state;
  tu_rng r = {0x082efa98ec4e6c89ull};
  enum { T = 37, D = 48, H = 4, DH = D / H };
  float *qkv = rand_buf(&r, (size_t)T * 3 * D), *s = rand_buf(&r, (size_t)T * T);
  float *o = rand_buf(&r, (size_t)T * D);
  for (int h = 0; h < H; h++) {
    const float *q = qkv + h * DH, *kk = q + D, *v = q + 2 * D;
    float *s0 = tu_dup(s, (size_t)T * T);
    for (size_t i = 0; i < (size_t)T * T; i++) s[i] = NAN;
    bcrt_sgemm(BCRT_NO_TRANS, BCRT_TRANS, T, T, DH, 0.25f, q, 3 * D, kk, 3 * D, 0.0f, s, T);
    operands qk = {.ta = 0, .tb = 1, .a = q, .b = kk, .lda = 3 * D, .ldb = 3 * D};
    expect_product("S = Q K^T", &qk, T, T, DH, 0.25f, NULL, 0.0f, s0, s, T);
    float *o0 = tu_dup(o, (size_t)T * D);
    bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, T, DH, T, 1.0f, s, T, v, 3 * D, 0.0f, o + h * DH, D);
    operands pv = {.ta = 0, .tb = 0, .a = s, .b = v, .lda = T, .ldb = 3 * D, .view = 1};
    expect_product("O = P V", &pv, T, DH, T, 1.0f, NULL, 0.0f, o0 + h * DH, o + h * DH, D);
    // Columns of other heads (between this head's slices) are untouched.
    for (int i = 0; i < T; i++)
      for (int j = 0; j < D; j++)
        if (j < h * DH || j >= (h + 1) * DH)
          assert_memory_equal(&o[(size_t)i * D + j], &o0[(size_t)i * D + j], sizeof(float));
    free(s0), free(o0);
  }
  free(qkv), free(s), free(o);
}

// bcrt_sgemm_mt: the bits of bcrt_sgemm for every thread count (columns
// split in whole register tiles), every transpose pair, n not a multiple
// of the tile, more threads than column tiles, padded leading dimensions,
// beta 0 (C never read: NaN stays out) and 1; products above the one-thread
// threshold (4 M multiply-adds) and one below it.
static void test_sgemm_mt_bits(void **state) {
  (void)state;
  tu_rng r = {0x5be0cd19137e2179ull};
  static const int shp[][3] = {{130, 200, 170}, {64, 1000, 80}, {300, 40, 400}, {9, 33, 7}};
  static const int threads[] = {1, 2, 3, 5, 64};
  for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++)
    for (int t = 0; t < 4; t++) {
      int ta = t & 1, tb = t >> 1, m = shp[s][0], n = shp[s][1], k = shp[s][2], pad = (int)s;
      int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
      int lda = ac + pad, ldb = bc + pad, ldc = n + pad;
      float beta = (float)(t & 1);
      float *a = rand_buf(&r, (size_t)ar * lda), *b = rand_buf(&r, (size_t)br * ldb);
      float *c0 = rand_buf(&r, (size_t)m * ldc);
      if (beta == 0)
        for (size_t i = 0; i < (size_t)m * ldc; i++) c0[i] = NAN;
      float *want = tu_dup(c0, (size_t)m * ldc);
      bcrt_sgemm(ta ? BCRT_TRANS : BCRT_NO_TRANS, tb ? BCRT_TRANS : BCRT_NO_TRANS, m, n, k, 0.5f,
                 a, lda, b, ldb, beta, want, ldc);
      for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        float *c = tu_dup(c0, (size_t)m * ldc);
        bcrt_sgemm_mt(threads[i], ta ? BCRT_TRANS : BCRT_NO_TRANS, tb ? BCRT_TRANS : BCRT_NO_TRANS,
                      m, n, k, 0.5f, a, lda, b, ldb, beta, c, ldc);
        for (int row = 0; row < m; row++)  // the valid columns equal; padding untouched too
          assert_memory_equal(c + (size_t)row * ldc, want + (size_t)row * ldc,
                              sizeof(float) * (size_t)ldc);
        free(c);
      }
      free(a), free(b), free(c0), free(want);
    }
}

static void test_sgemm_degenerate(void **state) {
  (void)state;
  float a[4] = {NAN, NAN, NAN, NAN}, b[4] = {NAN, NAN, NAN, NAN}, c[4] = {1, 2, 3, 4};
  bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 2, 0.0f, a, 2, b, 2, 3.0f, c, 2);
  assert_true(c[0] == 3 && c[1] == 6 && c[2] == 9 && c[3] == 12);
  bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 0, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  assert_true(c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0);
  c[0] = 5;
  bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, 0, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 0, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  assert_true(c[0] == 5);
  // 2x3 . 3x2 by hand.
  const float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {7, 8, 9, 10, 11, 12};
  float z[4] = {NAN, NAN, NAN, NAN};
  bcrt_sgemm(BCRT_NO_TRANS, BCRT_NO_TRANS, 2, 2, 3, 1.0f, x, 3, y, 2, 0.0f, z, 2);
  assert_true(z[0] == 58 && z[1] == 64 && z[2] == 139 && z[3] == 154);
}

// ---------------------------------------------------------------------------
// BF16 weights
// ---------------------------------------------------------------------------

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// Round to BF16 written independently of the runtime: the two BF16
// neighbours of w, the nearer in double, ties to the even one.
static float bf16_round(float w) {
  float lo = from_bits(bits(w) & 0xffff0000u), hi = from_bits((bits(w) & 0xffff0000u) + 0x10000u);
  double dl = fabs((double)w - lo), dh = fabs((double)hi - w);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (bits(lo) >> 16) & 1 ? hi : lo;
}

static void test_bf16_pack(void **state) {
  (void)state;
  const float w[8] = {1.0f, from_bits(0x3f808000u), from_bits(0x3f818000u),
                      from_bits(0x3f808001u), -3.14159265f, (float)INFINITY, NAN, FLT_MAX};
  unsigned short p[32 * 8];
  bcrt_pack_nt_bf16(8, 1, w, p); // k = 1: packed[j] is row j's only weight
  assert_int_equal(p[0], 0x3f80);
  assert_int_equal(p[1], 0x3f80); // tie, to even
  assert_int_equal(p[2], 0x3f82); // tie, to even (up)
  assert_int_equal(p[3], 0x3f81); // above the tie
  assert_int_equal(p[4], bits(bf16_round(-3.14159265f)) >> 16);
  assert_int_equal(p[5], 0x7f80);
  assert_true((p[6] & 0x7f80) == 0x7f80 && (p[6] & 0x7f) != 0); // still a NaN
  assert_int_equal(p[7], 0x7f80);                               // rounds up to inf
  for (int j = 8; j < 32; j++) assert_int_equal(p[j], 0);      // padding rows
  for (int i = 0; i < 6; i++) // |w - bf16(w)| <= 2^-8 |w| (half an ulp of 8 bits)
    assert_true(fabs((double)from_bits((uint32_t)p[i] << 16) - w[i]) <=
                ldexp(fabs(w[i]), -8) || isinf(w[i]));
}

// ---------------------------------------------------------------------------
// F16 (IEEE binary16) conversion, against references written here
// ---------------------------------------------------------------------------

// The value of half h, decoded from its fields in double (NaN: NAN).
static double f16_value(unsigned h) {
  int e = (int)(h >> 10) & 31, m = (int)(h & 0x3ff);
  double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}

// f rounded to a half's value in double: the multiple of the ulp at f's
// binade (2^-24 below 2^-14) nearest f, ties to even (nearbyint in the
// default rounding mode), +-Inf from 65520 on.
static double f16_round_ref(float f) {
  double a = fabs((double)f);
  if (isnan(f)) return NAN;
  int e;
  frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  double ulp = a < 0x1p-14 ? 0x1p-24 : ldexp(1.0, e - 11);
  double q = nearbyint(a / ulp) * ulp;
  if (q >= 65520.0) q = INFINITY;
  return f < 0 || (f == 0 && signbit(f)) ? -q : q;
}

static void test_f16_convert(void **state) {
  (void)state;
  // every half: decoded exactly, and back to its own bits (NaN stays NaN)
  for (unsigned h = 0; h < 65536; h++) {
    float f = bcrt_f16_to_f32((unsigned short)h);
    double want = f16_value(h);
    if (isnan(want)) {
      assert_true(isnan(f) && (signbit(f) != 0) == ((h & 0x8000) != 0));
      assert_true((bcrt_f32_to_f16(f) & 0x7c00) == 0x7c00 && (bcrt_f32_to_f16(f) & 0x3ff));
      continue;
    }
    if ((double)f != want || (signbit(f) != 0) != ((h & 0x8000) != 0))
      fail_msg("half %#x decodes to %a, want %a", h, f, want);
    if (bcrt_f32_to_f16(f) != h) fail_msg("half %#x: %a encodes to %#x", h, f, bcrt_f32_to_f16(f));
  }
  // edge cases by hand
  static const struct { float f; unsigned h; } cases[] = {
      {65504.0f, 0x7bff},                  {65519.99609375f, 0x7bff}, // below the tie: the largest
      {65520.0f, 0x7c00},                  {-65520.0f, 0xfc00},       // the tie at 65520 overflows
      {1e9f, 0x7c00},                      {(float)INFINITY, 0x7c00}, {-(float)INFINITY, 0xfc00},
      {1.0f + 0x1p-11f, 0x3c00},           {1.0f + 3 * 0x1p-11f, 0x3c02},  // ties to even
      {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, {-2.0f - 0x1p-10f, 0xc000},
      {0x1p-24f, 0x0001},                  {0x1p-25f, 0x0000},        // the smallest; a tie to 0
      {0x1p-25f + 0x1p-48f, 0x0001},       {3 * 0x1p-25f, 0x0002},    // above the tie; a tie to 2
      {1023 * 0x1p-24f, 0x03ff},           {0x1p-14f - 0x1p-25f, 0x0400},  // largest subnormal; tie up
      {0x1p-14f, 0x0400},                  {-0.0f, 0x8000},           {0.0f, 0x0000},
      {0x1p-26f, 0x0000},                  {-0x1p-26f, 0x8000},       {0.1f, 0x2e66},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (bcrt_f32_to_f16(cases[i].f) != cases[i].h)
      fail_msg("%a: %#x, want %#x", cases[i].f, bcrt_f32_to_f16(cases[i].f), cases[i].h);
  assert_true((bcrt_f32_to_f16(NAN) & 0x7e00) == 0x7e00);  // a quiet NaN
  // random floats over every magnitude a half has, and some beyond
  tu_rng r = {0x3c6ef372fe94f82bull};
  for (int t = 0; t < 200000; t++) {
    float f = ldexpf(1.0f + fabsf(tu_rnd(&r)), -30 + t % 48) * (t & 1 ? -1.0f : 1.0f);
    if (t % 7 == 0) f = ldexpf((float)(t % 4096) + 0.5f, -24 + t % 20);  // ties and near-ties
    double want = f16_round_ref(f), got = bcrt_f16_to_f32(bcrt_f32_to_f16(f));
    if (got != want || signbit(got) != signbit(want)) fail_msg("%a rounds to %a, want %a", f, got, want);
#ifdef __FLT16_MAX__
    _Float16 c = (_Float16)f;  // the compiler's conversion, where it has one
    unsigned short cb;
    memcpy(&cb, &c, sizeof cb);
    if (cb != bcrt_f32_to_f16(f)) fail_msg("%a: %#x, _Float16 %#x", f, bcrt_f32_to_f16(f), cb);
#endif
  }
  // the F16 panel holds these bits, k-major, padding rows zero
  const float w[6] = {1.0f, 1.0f + 0x1p-11f, 65504.0f, 0x1p-24f, -0.1f, 70000.0f};
  unsigned short p[32 * 6];
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_F16, 6, 1), sizeof p / 6);
  memset(p, 0x5a, sizeof p);
  bcrt_pack_nt_wt(BCRT_WT_F16, 6, 1, w, p);
  for (int j = 0; j < 6; j++) assert_int_equal(p[j], bcrt_f32_to_f16(w[j]));
  assert_int_equal(p[5], 0x7c00);  // the runtime rounds it to Inf; the compiler's loaders refuse it
  for (int j = 6; j < 32; j++) assert_int_equal(p[j], 0);
}

// With weights that are already BF16 values, the BF16 kernel must give
// bitwise the float kernel's result (same arithmetic, half the bytes);
// with arbitrary weights, the reference product of the rounded weights.
static void test_bf16_vs_float(void **state) {
  (void)state;
  tu_rng r = {0x452821e638d01377ull};
  static const int ms[] = {1, 5, 8, 9, 17, 33, 140}, nk[][2] = {{33, 17}, {65, 300}, {7, 513}};
  for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
    for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++) {
      int m = ms[mi], n = nk[s][0], k = nk[s][1];
      float *x = rand_buf(&r, (size_t)m * k), *w = rand_buf(&r, (size_t)n * k);
      float *bias = rand_buf(&r, (size_t)n), *y0 = rand_buf(&r, (size_t)m * n);
      float *wr = tu_dup(w, (size_t)n * k);
      for (size_t i = 0; i < (size_t)n * k; i++) wr[i] = bf16_round(w[i]);
      size_t sz = bcrt_pack_nt_size(n, k);
      float *pf = malloc(sz * sizeof *pf);
      unsigned short *ph = malloc(sz * sizeof *ph), *ph2 = malloc(sz * sizeof *ph2);
      assert_true(pf && ph && ph2);
      bcrt_pack_nt(n, k, wr, pf);
      bcrt_pack_nt_bf16(n, k, wr, ph);
      bcrt_pack_nt_bf16(n, k, w, ph2);
      assert_memory_equal(ph, ph2, sz * sizeof *ph); // packing rounds like bf16_round
      float *yf = tu_dup(y0, (size_t)m * n), *yh = tu_dup(y0, (size_t)m * n);
      float beta = s == 1 ? 0.0f : 1.0f;
      bcrt_gemm_small(m, n, k, x, k, pf, bias, beta, yf, n);
      bcrt_gemm_small_bf16(1 + (int)(mi % 3), m, n, k, x, k, ph, bias, beta, yh, n);
      assert_memory_equal(yf, yh, (size_t)m * n * sizeof *yf);
      operands o = {.ta = 0, .tb = 1, .a = x, .b = wr, .lda = k, .ldb = k};
      expect_product("gemm_small_bf16", &o, m, n, k, 1.0f, bias, beta, y0, yh, n);
      free(x), free(w), free(bias), free(y0), free(wr), free(pf), free(ph), free(ph2);
      free(yf), free(yh);
    }
}

// ---------------------------------------------------------------------------
// Weight types: F32, BF16, Q8_0, Q4_0, F16 panels (bcrt_pack_*_wt, bcrt_linear_wt)
// ---------------------------------------------------------------------------

// ggml's block types (Q8_0, Q4_0), against the 16/32-bit element ones.
static bool wt_is_block(int wt) { return wt == BCRT_WT_Q8_0 || wt == BCRT_WT_Q4_0; }

// The packed block of panel p, block b (layout of blockc_rt.h).
static size_t wt_block(int wt) { return wt == BCRT_WT_Q8_0 ? 1152 : 640; }
static const unsigned char *wt_blk(int wt, const void *pk, int k, int p, int b) {
  return (const unsigned char *)pk + ((size_t)p * (size_t)((k + 31) / 32) + (size_t)b) * wt_block(wt);
}
static float wt_scale(int wt, const void *pk, int k, int row, int b) {
  float d;
  memcpy(&d, wt_blk(wt, pk, k, row / 32, b) + (size_t)(row % 32) * 4, sizeof d);
  return d;
}
// Row `row`'s code at kk (Q8_0: the int8; Q4_0: the nibble).
static int wt_code(int wt, const void *pk, int k, int row, int kk) {
  const unsigned char *q = wt_blk(wt, pk, k, row / 32, kk / 32) + 128;
  int j = row % 32, kq = kk % 32;
  if (wt == BCRT_WT_Q8_0) return (int)q[kq / 4 * 128 + j * 4 + kq % 4] - 128;  // stored + 128
  unsigned char byte = q[kq / 4 * 64 + j % 16 * 4 + kq % 4];
  return j < 16 ? byte & 15 : byte >> 4;
}

// The Q8_0 / Q4_0 products' formula (blockc_rt.h) in plain C: x's blocks
// by bcrt_quant_act, exact integer sums of weight code times x's code, one
// multiply-add a block (fused: fmaf; or, as a build without FMA hardware
// computes it, a multiply and an add), then bias and beta.  Also x's rows
// as those products see them (xq: d * q), for the double reference.
// Blocks [b0, b1) of k (a chunk: the kernel takes k > 32768 in chunks of
// 32768, each chunk's sums added to y).
static void wt_q_ref(int wt, int fused, int m, int n, int k, int b0, int b1, const float *x,
                     int ldx, const void *pk, float *y, int ldy, float *xq) {
  for (int r = 0; r < m; r++)
    for (int b = b0; b < b1; b++) {
      signed char q[32];
      int kb = k - 32 * b < 32 ? k - 32 * b : 32;
      float d = bcrt_quant_act(x + (size_t)r * ldx + 32 * b, kb, q);
      for (int i = 0; i < kb; i++) xq[(size_t)r * ldx + 32 * b + i] = d * q[i];
      for (int j = 0; j < n; j++) {
        int sum = 0;
        for (int i = 0; i < kb; i++) {
          int c = wt_code(wt, pk, k, j, 32 * b + i);
          sum += (wt == BCRT_WT_Q8_0 ? c : c - 8) * q[i];
        }
        float *acc = y + (size_t)r * ldy + j, sc = wt_scale(wt, pk, k, j, b) * d;
        *acc = fused ? fmaf((float)sum, sc, *acc) : (float)sum * sc + *acc;
      }
    }
}
static void wt_q_ref_full(int wt, int fused, int m, int n, int k, const float *x, int ldx,
                          const void *pk, const float *bias, float beta, const float *y0, float *y,
                          int ldy, float *xq) {
  float *acc = calloc((size_t)m * ldy + 1, sizeof *acc);
  assert_non_null(acc);
  int nb = (k + 31) / 32, chunk = 32768 / 32;
  wt_q_ref(wt, fused, m, n, k, 0, nb < chunk ? nb : chunk, x, ldx, pk, acc, ldy, xq);
  for (int r = 0; r < m; r++)
    for (int j = 0; j < n; j++) {
      size_t i = (size_t)r * ldy + j;
      float a = acc[i];
      if (bias) a += bias[j];
      y[i] = beta == 0.0f ? a : beta == 1.0f ? y0[i] + a : fused ? fmaf(beta, y0[i], a) : beta * y0[i] + a;
    }
  for (int c0 = chunk; c0 < nb; c0 += chunk) {  // the later chunks: their sums added to y
    memset(acc, 0, ((size_t)m * ldy + 1) * sizeof *acc);
    wt_q_ref(wt, fused, m, n, k, c0, nb < c0 + chunk ? nb : c0 + chunk, x, ldx, pk, acc, ldy, xq);
    for (int r = 0; r < m; r++)
      for (int j = 0; j < n; j++) y[(size_t)r * ldy + j] += acc[(size_t)r * ldy + j];
  }
  free(acc);
}

static void *wt_pack(int wt, int n, int k, const float *w) {
  size_t sz = bcrt_pack_wt_bytes(wt, n, k);
  void *pk = malloc(sz);
  assert_non_null(pk);
  memset(pk, 0x5a, sz);  // every byte must be written
  bcrt_pack_nt_wt(wt, n, k, w, pk);
  return pk;
}

static void test_wt_bytes(void **state) {
  (void)state;
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_F32, 45, 33), 2 * 32 * 33 * 4);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_BF16, 45, 33), 2 * 32 * 33 * 2);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_F16, 45, 33), 2 * 32 * 33 * 2);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q8_0, 45, 33), 2 * 2 * 1152);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q4_0, 45, 33), 2 * 2 * 640);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q8_0, 32, 32), 1152);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q4_0, 4096, 4096), 128ul * 128 * 640);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q4_0, 0, 32), 0);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q8_0, 32, 0), 0);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_Q8_0, -1, 5), 0);
  assert_int_equal(bcrt_pack_wt_bytes(BCRT_WT_COUNT, 32, 32), 0);
  assert_int_equal(bcrt_pack_wt_bytes(-1, 32, 32), 0);
  for (int wt = 0; wt < BCRT_WT_COUNT; wt++)
    for (int n = 1; n < 70; n += 7)
      for (int k = 1; k < 100; k += 3) {
        unsigned long b = bcrt_pack_wt_bytes(wt, n, k);
        assert_true(b > 0 && b % 64 == 0);
        if (!wt_is_block(wt)) assert_int_equal(b, bcrt_pack_nt_size(n, k) * (wt ? 2 : 4));
      }
}

// Blocks worked out by hand.  One row, k = 40: block 0 full, block 1 the
// 8-step tail.
static void test_wt_quant_blocks(void **state) {
  (void)state;
  float w[33 * 40] = {0};  // rows 0..32: row 32 is panel 1's row 0
  // Q8_0, row 0: max |x| = 127 -> d = 1, q = roundf(x) (halves away from 0).
  const float r0[8] = {0.5f, -0.5f, 2.5f, 126.6f, -127.0f, 0.49f, -3.51f, 0.0f};
  memcpy(w, r0, sizeof r0);
  for (int i = 0; i < 8; i++) w[32 + i] = (float)(i + 1) * 0.25f;  // tail block: max 2
  // Row 1: scale 127 (1 + 2^-11) / 127 = 1 + 2^-11, an FP16 tie: to even, 1.0;
  // row 2: 1 + 3 2^-11, a tie between odd 1 + 2^-10 and even 1 + 2^-9: up.
  w[40] = 127.0f * (1.0f + 0x1p-11f);
  w[80] = 127.0f * (1.0f + 3 * 0x1p-11f);
  w[81] = -1.0f;
  // Row 3: all zero.  Row 4: scale > 65504 -> FP16 +Inf.
  w[160] = 1e7f, w[161] = 0.0f, w[162] = -1e7f;
  // Row 32 (panel 1, high half of nothing: j = 0): max 127 at kk 5.
  w[32 * 40 + 5] = -127.0f, w[32 * 40 + 6] = 64.4f;
  void *q8 = wt_pack(BCRT_WT_Q8_0, 33, 40, w);
  assert_true(wt_scale(BCRT_WT_Q8_0, q8, 40, 0, 0) == 1.0f);
  static const int c0[8] = {1, -1, 3, 127, -127, 0, -4, 0};
  for (int i = 0; i < 8; i++) assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 0, i), c0[i]);
  for (int i = 8; i < 32; i++) assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 0, i), 0);
  // tail block: d = fp16(2 / 127); the codes round x / d; steps 8..31 are 0
  float d1 = wt_scale(BCRT_WT_Q8_0, q8, 40, 0, 1);
  assert_true(fabsf(d1 - 2.0f / 127) <= 0x1p-11f * (2.0f / 127) && d1 != 2.0f / 127);
  for (int i = 0; i < 8; i++)
    assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 0, 32 + i), (int)lroundf(127.0f * (i + 1) / 8));
  assert_true(wt_scale(BCRT_WT_Q8_0, q8, 40, 1, 0) == 1.0f);
  assert_true(wt_scale(BCRT_WT_Q8_0, q8, 40, 2, 0) == 1.0f + 0x1p-9f);
  assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 2, 1), -1);
  assert_true(wt_scale(BCRT_WT_Q8_0, q8, 40, 3, 0) == 0.0f);
  for (int i = 0; i < 40; i++) assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 3, i), 0);
  assert_true(isinf(wt_scale(BCRT_WT_Q8_0, q8, 40, 4, 0)) && wt_scale(BCRT_WT_Q8_0, q8, 40, 4, 0) > 0);
  assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 4, 0), 127);
  assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 4, 2), -127);
  assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 32, 5), -127);
  assert_int_equal(wt_code(BCRT_WT_Q8_0, q8, 40, 32, 6), 64);
  for (int row = 33; row < 64; row++)  // padding rows: scale 0, code 0
    assert_true(wt_scale(BCRT_WT_Q8_0, q8, 40, row, 1) == 0.0f && wt_code(BCRT_WT_Q8_0, q8, 40, row, 3) == 0);
  float *u = malloc(33 * 40 * sizeof *u);
  assert_non_null(u);
  bcrt_unpack_wt(BCRT_WT_Q8_0, 33, 40, q8, u);
  assert_true(u[0] == 1.0f && u[3] == 127.0f && u[6] == -4.0f && u[32] == d1 * 16);
  assert_true(isinf(u[160]) && isnan(u[161]) && isinf(u[162]) && u[162] < 0);  // Inf * 0 is NaN
  free(q8);

  // Q4_0: d = (the x of largest |x|, the first on ties) / -8;
  // code = min(15, trunc(x / d + 8.5)).
  float v[33 * 40] = {0};
  const float a0[8] = {0.49f, -8.0f, 0.5f, -0.5f, -0.51f, 8.0f, 3.7f, -7.6f};  // -8 first: d = 1
  memcpy(v, a0, sizeof a0);
  v[40 + 2] = 8.0f, v[40 + 5] = -8.0f, v[40 + 6] = 3.7f;  // +8 first: d = -1
  v[80] = 1.0f, v[81] = -2.0f, v[82] = 2.0f;               // max |x| = 2, first -2: d = 0.25
  for (int i = 0; i < 8; i++) v[32 + i] = -(float)(i + 1);  // tail: d = -8 / -8 = 1
  v[17 * 40 + 0] = 4.0f, v[17 * 40 + 1] = -1.0f;           // row 17: high nibbles, d = -0.5
  void *q4 = wt_pack(BCRT_WT_Q4_0, 33, 40, v);
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 0, 0) == 1.0f);
  static const int n0[8] = {8, 0, 9, 8, 7, 15, 12, 0};
  for (int i = 0; i < 8; i++) assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 0, i), n0[i]);
  for (int i = 8; i < 32; i++) assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 0, i), 8);
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 1, 0) == -1.0f);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 1, 2), 0);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 1, 5), 15);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 1, 6), 4);  // -3.7 + 8.5 = 4.8
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 2, 0) == 0.25f);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 2, 0), 12);  // 4 + 8.5
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 2, 1), 0);   // -8 + 8.5
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 2, 2), 15);  // 16.5 -> 15
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 0, 1) == 1.0f);
  for (int i = 0; i < 8; i++) assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 0, 32 + i), 7 - i);
  for (int i = 8; i < 32; i++) assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 0, 32 + i), 8);
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 3, 0) == 0.0f);  // all zero: d 0, nibbles 8
  for (int i = 0; i < 40; i++) assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 3, i), 8);
  assert_true(wt_scale(BCRT_WT_Q4_0, q4, 40, 17, 0) == -0.5f);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 17, 0), 0);
  assert_int_equal(wt_code(BCRT_WT_Q4_0, q4, 40, 17, 1), 10);
  // row 17 is the high nibble of the bytes of row 1 (low): group 0's
  // bytes 4 * 1 + step
  assert_int_equal(wt_blk(BCRT_WT_Q4_0, q4, 40, 0, 0)[128 + 4], (0 << 4) | 8);
  assert_int_equal(wt_blk(BCRT_WT_Q4_0, q4, 40, 0, 0)[128 + 4 + 1], (10 << 4) | 8);
  bcrt_unpack_wt(BCRT_WT_Q4_0, 33, 40, q4, u);
  assert_true(u[0] == 0.0f && u[1] == -8.0f && u[5] == 7.0f && u[32] == -1.0f && u[39] == -8.0f);
  assert_true(u[17 * 40] == 4.0f && u[17 * 40 + 1] == -1.0f && u[82] == 1.75f);
  free(q4), free(u);

#ifdef __FLT16_MAX__
  // Scales against the compiler's float -> _Float16 (round to nearest even)
  // over normal, subnormal, tie and overflow magnitudes.
  tu_rng r = {0x9e3779b97f4a7c15ull};
  for (int t = 0; t < 4000; t++) {
    float amax = ldexpf(1.0f + fabsf(tu_rnd(&r)), -40 + t % 70);
    if (t % 5 == 0) amax = ldexpf(127.0f * (1.0f + (float)(t % 64) * 0x1p-11f), -30 + t % 50);
    float row[32] = {0};
    row[t % 32] = t & 1 ? amax : -amax;
    void *pk = wt_pack(BCRT_WT_Q8_0, 1, 32, row);
    float want = (float)(_Float16)(amax / 127.0f), got = wt_scale(BCRT_WT_Q8_0, pk, 32, 0, 0);
    if (memcmp(&got, &want, sizeof got)) fail_msg("amax %a: scale %a, want %a", amax, got, want);
    free(pk);
  }
#endif
}

// Random rows over six decades of scale (and one row with a zero block),
// n x k with a k tail.
static float *wt_rand_w(tu_rng *r, int n, int k) {
  float *w = rand_buf(r, (size_t)n * k);
  for (int j = 0; j < n; j++) {
    float s = powf(10.0f, (float)(j % 7) - 3.0f);
    for (int kk = 0; kk < k; kk++) w[(size_t)j * k + kk] *= j == 5 && kk < 32 ? 0.0f : s;
  }
  return w;
}

// Packing the effective weights gives the same bytes (what lets a GGUF
// q8_0/q4_0 tensor, dequantized by the loader, land in this layout with
// its own values); pack_nn of W^T gives pack_nt's bytes; F32 and BF16
// are bcrt_pack_nt's and bcrt_pack_nt_bf16's bytes.
static void test_wt_roundtrip(void **state) {
  (void)state;
  tu_rng r = {0x243f6a8885a308d3ull};
  static const int nk[][2] = {{45, 33}, {77, 70}, {32, 100}, {1, 1}, {70, 64}};
  for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++)
    for (int wt = 0; wt < BCRT_WT_COUNT; wt++) {
      int n = nk[s][0], k = nk[s][1], ldw = n + 3;
      float *w = wt_rand_w(&r, n, k), *u = malloc((size_t)n * k * sizeof *u);
      float *wt_t = malloc((size_t)k * ldw * sizeof *wt_t);
      assert_true(u && wt_t);
      for (int kk = 0; kk < k; kk++)
        for (int j = 0; j < ldw; j++) wt_t[(size_t)kk * ldw + j] = j < n ? w[(size_t)j * k + kk] : NAN;
      size_t sz = bcrt_pack_wt_bytes(wt, n, k);
      void *a = wt_pack(wt, n, k, w), *b = malloc(sz), *c = malloc(sz);
      assert_true(b && c);
      bcrt_unpack_wt(wt, n, k, a, u);
      bcrt_pack_nt_wt(wt, n, k, u, b);
      if (memcmp(a, b, sz)) fail_msg("wt %d n=%d k=%d: repacking the unpacked weights changed bytes", wt, n, k);
      bcrt_pack_nn_wt(wt, n, k, wt_t, ldw, c);
      if (memcmp(a, c, sz)) fail_msg("wt %d n=%d k=%d: pack_nn differs from pack_nt", wt, n, k);
      if (wt == BCRT_WT_F32) {
        bcrt_pack_nt(n, k, w, b);
        assert_memory_equal(a, b, sz);
        assert_memory_equal(u, w, (size_t)n * k * sizeof *u);
      } else if (wt == BCRT_WT_BF16) {
        bcrt_pack_nt_bf16(n, k, w, b);
        assert_memory_equal(a, b, sz);
      }
      // The effective weights are close: Q8_0 half a code step of the
      // unrounded scale d, plus |q| <= 127 times d's FP16 rounding (2^-11
      // relative, 2^-25 absolute for subnormal FP16); Q4_0 a whole step (the
      // clamp of 16 to 15) plus 8 times the rounding.
      for (int j = 0; j < n; j++)
        for (int kk = 0; kk < k; kk++) {
          float x = w[(size_t)j * k + kk], e = u[(size_t)j * k + kk];
          double d = wt_is_block(wt) ? fabs(wt_scale(wt, a, k, j, kk / 32)) : 0;
          double tol = wt == BCRT_WT_F32    ? 0
                       : wt == BCRT_WT_BF16 ? ldexp(fabs(x), -8)
                       : wt == BCRT_WT_F16  ? fmax(ldexp(fabs(x), -11), 0x1p-25)  // half an ulp
                       : wt == BCRT_WT_Q8_0 ? 1.001 * (d * (0.5 + 127 * 0x1p-11) + 127 * 0x1p-25)
                                            : 1.001 * (d * (1.0 + 8 * 0x1p-11) + 8 * 0x1p-25);
          if (!(fabs((double)x - e) <= tol)) fail_msg("wt %d W[%d,%d] = %g unpacks to %g", wt, j, kk, x, e);
        }
      free(w), free(u), free(wt_t), free(a), free(b), free(c);
    }
}

// bcrt_linear_wt is bitwise bcrt_gemm_small on the effective weights for
// F32, BF16 and F16: up to BCRT_SMALL_M rows in one call, above it per
// group of BCRT_SMALL_M rows; F32 and BF16 also bitwise bcrt_gemm_small /
// _bf16 on their own packed bytes.  Every type, the block types included,
// against the double reference on the effective weights.
static void wt_linear_case(tu_rng *r, int wt, int m, int n, int k, int use_bias, float beta) {
  int ldx = k + 2, ldy = n + 3;
  long poff = 192;  // packed at a byte offset
  float *x = rand_buf(r, (size_t)m * ldx), *w = wt_rand_w(r, n, k);
  float *bias = use_bias ? rand_buf(r, (size_t)n) : NULL;
  float *y0 = out_buf(r, m, n, ldy, beta), *y = tu_dup(y0, (size_t)m * ldy);
  float *yr = tu_dup(y0, (size_t)m * ldy), *u = malloc((size_t)n * k * sizeof *u);
  size_t sz = bcrt_pack_wt_bytes(wt, n, k);
  char *buf = malloc(sz + (size_t)poff);
  float *pf = malloc(bcrt_pack_nt_size(n, k) * sizeof *pf);
  assert_true(buf && u && pf);
  bcrt_pack_nt_wt(wt, n, k, w, buf + poff);
  bcrt_unpack_wt(wt, n, k, buf + poff, u);
  bcrt_pack_nt(n, k, u, pf);
  bcrt_linear_wt(wt, m, n, k, x, ldx, buf, poff, bias, beta, y, ldy);
  for (int i0 = 0; i0 < m; i0 += BCRT_SMALL_M) {
    int mg = m - i0 < BCRT_SMALL_M ? m - i0 : BCRT_SMALL_M;
    bcrt_gemm_small(mg, n, k, x + (size_t)i0 * ldx, ldx, pf, bias, beta, yr + (size_t)i0 * ldy, ldy);
  }
  // A block type: bitwise its formula (fused or, without FMA hardware,
  // not), on x quantized as bcrt_quant_act does, for every row count.
  bool gemm = wt_is_block(wt);
  float *xq = tu_dup(x, (size_t)m * ldx);
  if (gemm) {
    float *yf = tu_dup(y0, (size_t)m * ldy), *yu = tu_dup(y0, (size_t)m * ldy);
    wt_q_ref_full(wt, 1, m, n, k, x, ldx, buf + poff, bias, beta, y0, yf, ldy, xq);
    wt_q_ref_full(wt, 0, m, n, k, x, ldx, buf + poff, bias, beta, y0, yu, ldy, xq);
    for (int i = 0; i < m; i++)  // the padding between rows is not written
      for (int j = n; j < ldy; j++) yf[(size_t)i * ldy + j] = yu[(size_t)i * ldy + j] = y0[(size_t)i * ldy + j];
    if (memcmp(y, yf, (size_t)m * ldy * sizeof *y) && memcmp(y, yu, (size_t)m * ldy * sizeof *y))
      fail_msg("wt %d m=%d n=%d k=%d bias=%d beta=%g: not the Q8 formula's bits", wt, m, n, k,
               use_bias, beta);
    free(yf), free(yu);
  }
  if (!gemm && memcmp(y, yr, (size_t)m * ldy * sizeof *y))
    fail_msg("wt %d m=%d n=%d k=%d bias=%d beta=%g: not bcrt_gemm_small's bits", wt, m, n, k,
             use_bias, beta);
  if (m <= BCRT_SMALL_M && (wt == BCRT_WT_F32 || wt == BCRT_WT_BF16)) {  // the same packed bytes, the old entry points
    float *y2 = tu_dup(y0, (size_t)m * ldy);
    if (wt == BCRT_WT_F32)
      bcrt_gemm_small(m, n, k, x, ldx, (const float *)(const void *)(buf + poff), bias, beta, y2, ldy);
    else
      bcrt_gemm_small_bf16(1, m, n, k, x, ldx, (const unsigned short *)(const void *)(buf + poff),
                           bias, beta, y2, ldy);
    assert_memory_equal(y, y2, (size_t)m * ldy * sizeof *y);
    free(y2);
  }
  operands o = {.ta = 0, .tb = 1, .a = gemm ? xq : x, .b = u, .lda = ldx, .ldb = k};
  expect_product("linear_wt", &o, m, n, k, 1.0f, bias, beta, y0, y, ldy);
  free(x), free(xq), free(w), free(bias), free(y0), free(y), free(yr), free(u), free(buf), free(pf);
}

static void test_wt_linear_bits(void **state) {
  (void)state;
  tu_rng r = {0x13198a2e03707344ull};
  static const int ms[] = {1, 3, 8, 9, 40, 64, 100}, nk[][2] = {{45, 33}, {77, 70}, {45, 100}};
  int t = 0;
  for (int wt = 0; wt < BCRT_WT_COUNT; wt++)
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
      for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++, t++)
        for (int use_bias = 0; use_bias < 2; use_bias++)
          wt_linear_case(&r, wt, ms[mi], nk[s][0], nk[s][1], use_bias, (t + use_bias) % 2 ? 1.0f : 0.0f);
  wt_linear_case(&r, BCRT_WT_Q4_0, 150, 33, 300, 1, 0.5f);  // three row groups, 3 k chunks
  wt_linear_case(&r, BCRT_WT_Q8_0, 80, 64, 257, 0, 1.0f);   // a 16-row last group
  // k past the 32768 steps of x's codes a call holds: chunks summed in y
  wt_linear_case(&r, BCRT_WT_Q8_0, 3, 40, 32768 + 100, 1, 0.5f);
  wt_linear_case(&r, BCRT_WT_Q4_0, 2, 33, 65536 + 32, 0, 1.0f);
  // F16 at every row count up to 70: the register tiles (m <= 8, each tile
  // width), the row groups, and past BCRT_SMALL_M the groups of 64
  for (int m = 1; m <= 70; m++)
    wt_linear_case(&r, BCRT_WT_F16, m, 45 + 2 * (m % 3), 33 + 4 * (m % 5), m % 2, m % 3 ? 0.0f : 1.0f);
  wt_linear_case(&r, BCRT_WT_F16, 150, 33, 300, 1, 0.5f);  // three row groups, 3 k chunks
  // m = 0 and n = 0 leave y alone; k = 0 gives bias + beta y
  float y[2] = {5, 6}, x[2] = {1, 1}, b[2] = {1, 2};
  unsigned char pk[1152] = {0};
  bcrt_linear_wt(BCRT_WT_Q8_0, 0, 2, 1, x, 1, pk, 0, NULL, 0.0f, y, 2);
  bcrt_linear_wt(BCRT_WT_Q8_0, 1, 0, 1, x, 1, pk, 0, NULL, 0.0f, y, 2);
  bcrt_linear_wt(BCRT_WT_COUNT, 1, 2, 1, x, 1, pk, 0, NULL, 0.0f, y, 2);
  assert_true(y[0] == 5 && y[1] == 6);
  bcrt_linear_wt(BCRT_WT_Q4_0, 1, 2, 0, x, 1, pk, 0, b, 1.0f, y, 2);
  assert_true(y[0] == 6 && y[1] == 8);
}

// bcrt_quant_act (the Q8_0 / Q4_0 products' activations) against its
// definition in plain C: roundf(x / d), d = max|x| / 127, NaN for a block
// with a NaN or Inf, 0 for an all-zero or vanishing one, nothing read past
// kb.  Bitwise, whichever path the runtime was built with (AVX-512's two
// vectors or the loops).
static float act_ref(const float *x, int kb, signed char *q) {
  float amax = 0.0f;
  bool bad = false;
  for (int i = 0; i < 32; i++) q[i] = 0;
  for (int i = 0; i < kb; i++) {
    bad |= !isfinite(x[i]);
    amax = fmaxf(amax, fabsf(x[i]));
  }
  if (bad) return NAN;
  float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  if (!(id > 0.0f && id <= FLT_MAX)) return 0.0f;
  for (int i = 0; i < kb; i++) {
    float t = roundf(x[i] * id);
    q[i] = (signed char)(t > 127 ? 127 : t < -127 ? -127 : t);
  }
  return d;
}

static void test_quant_act(void **state) {
  (void)state;
  tu_rng r = {0x243f6a8885a308d3ull};
  float x[40];
  signed char q[32], qr[32];
  for (int t = 0; t < 20000; t++) {
    int kb = t % 33;
    float scale = ldexpf(1.0f, (int)(t % 61) - 30);
    for (int i = 0; i < 40; i++) x[i] = tu_rnd(&r) * scale;
    if (t % 7 == 0) x[t % 32] = 127.0f * scale;  // d = scale exactly: exact halves below
    if (t % 7 == 0)
      for (int i = 0; i < 32; i += 3) x[i] = ((float)(t % 50) - 25.5f) * scale;
    if (t % 11 == 0) x[(t / 11) % 40] = t % 2 ? NAN : -INFINITY;  // past kb: ignored
    if (t % 13 == 0) memset(x, 0, sizeof x);
    if (t % 17 == 0)
      for (int i = 0; i < 32; i++) x[i] = ldexpf(tu_rnd(&r), -126 - (t % 20));  // subnormal
    memset(q, 0x5a, sizeof q);
    float d = bcrt_quant_act(x, kb, q), dr = act_ref(x, kb, qr);
    if (!(isnan(d) && isnan(dr)) && memcmp(&d, &dr, sizeof d))
      fail_msg("t=%d kb=%d: d %a, want %a", t, kb, (double)d, (double)dr);
    assert_memory_equal(q, qr, sizeof q);
  }
  // ties round away from zero; the largest magnitude is +-127
  float y[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, -127.0f, 126.5f};
  assert_true(bcrt_quant_act(y, 7, q) == 1.0f);
  assert_true(q[0] == 127 && q[1] == 3 && q[2] == -3 && q[3] == 1 && q[4] == -1 && q[5] == -127 &&
              q[6] == 127 && q[7] == 0);
  assert_true(bcrt_quant_act(y, 0, q) == 0.0f && q[0] == 0);
}

// A block with a non-finite weight: scale NaN, zero codes, so those rows'
// outputs are NaN (loudly) and no other row's.
static void test_wt_nan_block(void **state) {
  (void)state;
  tu_rng r = {0xa4093822299f31d0ull};
  int n = 40, k = 70, m = 3;
  for (int wt = BCRT_WT_Q8_0; wt <= BCRT_WT_Q4_0; wt++) {
    float *w = wt_rand_w(&r, n, k), *x = rand_buf(&r, (size_t)m * k);
    w[3 * k + 40] = NAN, w[35 * k + 2] = INFINITY, w[36 * k + 69] = -INFINITY;
    void *pk = wt_pack(wt, n, k, w);
    int bad[][2] = {{3, 1}, {35, 0}, {36, 2}};
    for (int i = 0; i < 3; i++) {
      assert_true(isnan(wt_scale(wt, pk, k, bad[i][0], bad[i][1])));
      for (int kk = bad[i][1] * 32; kk < k && kk < bad[i][1] * 32 + 32; kk++)
        assert_int_equal(wt_code(wt, pk, k, bad[i][0], kk), wt == BCRT_WT_Q8_0 ? 0 : 8);
    }
    assert_false(isnan(wt_scale(wt, pk, k, 3, 0)));  // the row's other blocks are fine
    float *y = malloc((size_t)m * n * sizeof *y);
    assert_non_null(y);
    for (int mm = 1; mm <= m; mm += 2) {  // in place and through packed x
      bcrt_linear_wt(wt, mm, n, k, x, k, pk, 0, NULL, 0.0f, y, n);
      for (int i = 0; i < mm; i++)
        for (int j = 0; j < n; j++)
          assert_int_equal(isnan(y[i * n + j]) != 0, j == 3 || j == 35 || j == 36);
    }
    free(w), free(x), free(pk), free(y);
  }
}

// bcrt_sgemm_ws in exactly BCRT_SGEMM_WS_FOR(m, k) bytes, placed (a) so
// that they end at a PROT_NONE page (a byte touched past the promise is a
// SIGSEGV) and (b) at every alignment mod 64 in steps of 9 bytes, with 256
// canary bytes after them that must stay as they were; also the formula's
// bounds: a larger (maxm, maxk) never asks for less, huge ones give
// BCRT_SGEMM_WS_BYTES.  Shapes across the register tile, the row block
// (128) and the k block (256), every transpose pair.
static void ws_case(tu_rng *r, char *ws, int ta, int tb, int m, int n, int k) {
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  float *a = rand_buf(r, (size_t)ar * ac), *b = rand_buf(r, (size_t)br * bc);
  float *c = rand_buf(r, (size_t)m * n), *c0 = tu_dup(c, (size_t)m * n);
  bcrt_sgemm_ws(ws, ta ? BCRT_TRANS : BCRT_NO_TRANS, tb ? BCRT_TRANS : BCRT_NO_TRANS, m, n, k,
                1.0f, a, ac, b, bc, 0.5f, c, n);
  operands o = {.ta = ta, .tb = tb, .a = a, .b = b, .lda = ac, .ldb = bc};
  expect_product("bcrt_sgemm_ws", &o, m, n, k, 1.0f, NULL, 0.5f, c0, c, n);
  free(a), free(b), free(c), free(c0);
}

static void test_sgemm_ws_promise(void **state) {
  (void)state;
  tu_rng r = {0x5eed7a11c0ffee01ull};
  static const int ms[] = {1, 5, 8, 17, 31, 128, 129, 300}, ns[] = {1, 33, 70},
                   ks[] = {1, 3, 16, 100, 256, 257, 600};
  size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (BCRT_SGEMM_WS_BYTES + page - 1) / page * page;
  char *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(map != MAP_FAILED);
  assert_int_equal(mprotect(map + span, page, PROT_NONE), 0);
  char *canary = malloc(BCRT_SGEMM_WS_BYTES + 64 + 256);
  assert_non_null(canary);
  assert_int_equal(BCRT_SGEMM_WS_FOR(1 << 20, 1 << 20), BCRT_SGEMM_WS_BYTES);
  int t = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
      int m = ms[mi], k = ks[ki];
      size_t need = BCRT_SGEMM_WS_FOR(m, k);
      assert_true(need <= BCRT_SGEMM_WS_BYTES);
      assert_true(BCRT_SGEMM_WS_FOR(m + 7, k) >= need && BCRT_SGEMM_WS_FOR(m, k + 9) >= need);
      for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++, t++) {
        ws_case(&r, map + span - need, t & 1, (t >> 1) & 1, m, ns[ni], k);
        char *ws = canary + (size_t)(t * 9 % 64);
        memset(ws + need, 0xa5, 256);
        ws_case(&r, ws, (t >> 1) & 1, t & 1, m, ns[ni], k);
        for (int i = 0; i < 256; i++)
          if ((unsigned char)ws[need + (size_t)i] != 0xa5) {
            print_error("m=%d n=%d k=%d: byte %zu past the %zu promised changed\n", m, ns[ni],
                        k, (size_t)i, need);
            fail();
          }
      }
    }
  free(canary);
  munmap(map, span + page);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pack_layout),
    cmocka_unit_test(test_small_vs_ref),
    cmocka_unit_test(test_small_degenerate),
    cmocka_unit_test(test_pack_nn),
    cmocka_unit_test(test_linear),
    cmocka_unit_test(test_gemm_rows),
    cmocka_unit_test(test_stream_sum),
    cmocka_unit_test(test_small_parts_and_threads),
    cmocka_unit_test(test_bf16_pack),
    cmocka_unit_test(test_bf16_vs_float),
    cmocka_unit_test(test_f16_convert),
    cmocka_unit_test(test_wt_bytes),
    cmocka_unit_test(test_wt_quant_blocks),
    cmocka_unit_test(test_wt_roundtrip),
    cmocka_unit_test(test_wt_linear_bits),
    cmocka_unit_test(test_wt_nan_block),
    cmocka_unit_test(test_quant_act),
    cmocka_unit_test(test_sgemm_vs_ref),
    cmocka_unit_test(test_sgemm_attention_views),
    cmocka_unit_test(test_sgemm_mt_bits),
    cmocka_unit_test(test_sgemm_degenerate),
    cmocka_unit_test(test_sgemm_ws_promise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
