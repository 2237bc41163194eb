/* blockc_rt.c — the elementwise kernels that blockc's generated code calls.
 *
 * A Transformer block is mostly matrix products (OpenBLAS does those); what
 * is left is bias + activation, residual adds, LayerNorm and softmax.  They
 * are cheap in FLOPs but touch every activation, so done badly they cost as
 * much as the GEMMs.  The JIT compiles generated code with tcc, which emits
 * scalar code, so these loops live here instead, built with gcc -O3
 * -march=native, and the JIT binds them by address.
 *
 * Everything is plain C99 written so that gcc's auto-vectoriser turns each
 * inner loop into SIMD code without -ffast-math:
 *   - no libm calls in inner loops: exp, erf and GELU are our own branch-free
 *     polynomials (the ifs are selects, so both sides are computed);
 *   - reductions (sums, maxima) go through an array of LANES partial results,
 *     because the compiler may not reorder a single float accumulator;
 *   - no `restrict`: outputs may alias inputs element for element, and gcc's
 *     runtime alias check accepts exact aliasing (it only rejects overlaps
 *     that are off by a few elements, which our contracts never allow).
 * The bcrt_ref_* kernels at the end are the slow, obviously correct oracle
 * (double accumulation, libm) the tests compare against.
 *
 * With -DBLOCKC_NO_BLAS this file also defines cblas_sgemm: a portable,
 * cache-blocked loop nest, so generated code runs without OpenBLAS. */
#include "blockc_rt.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Partial results per reduction: 16 floats = two 8-wide vectors, enough
 * independent add chains to hide the FP add latency at our row widths
 * (measured: 8, 32 and 64 were no better for LayerNorm at d = 512/2048,
 * and wider trees cost more per 128-wide softmax row). */
#define LANES 16

/* a*b + c.  Where the target has FMA (gcc and clang define __FMA__ under
 * -march=native), one fused instruction: half the latency of the Horner
 * chains below, which is what bounds exp/erf throughput, and a little more
 * accurate.  Elsewhere (tcc, plain x86-64) a multiply and an add; the
 * polynomials are accurate either way.  gcc never fuses by itself in ISO C
 * mode (-std=c11 implies -ffp-contract=off). */
#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define MADD(a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------------------ */
/* Scalar math that vectorises                                              */
/* ------------------------------------------------------------------------ */

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* exp(x), max relative error ~1 ulp (the tests measure it).
 *
 * Classic Cody-Waite: x = n ln2 + r with |r| <= ln2/2, exp(x) = 2^n exp(r).
 *   - n = round(x / ln2) by adding 1.5*2^23: the sum's low mantissa bits then
 *     hold n, so there is no float->int conversion (UB on NaN, and slow).
 *   - ln2 is split in C1 + C2 with C1 exact in 9 bits, so n*C1 is exact and
 *     the reduction is accurate without FMA (ISO C mode turns contraction off).
 *   - exp(r) = 1 + r + r^2 P(r), Cephes' degree-5 minimax P.
 *   - 2^n is applied as two factors 2^n1 * 2^n2, each a normal float, so
 *     results down to the subnormals are right and 2^128 need not exist.
 * Clamping x to [-104, 89] makes the over/underflow fall out of the final
 * multiply (inf above ~88.72, 0 below ~-103.97); a NaN fails both compares
 * and propagates. */
static inline float exp_f(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  float t = MADD(xc, 1.44269504088896341f, magic);
  float n = t - magic;
  float r = MADD(n, -0.693359375f, xc);
  r = MADD(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = MADD(p, r, 1.3981999507e-3f);
  p = MADD(p, r, 8.3334519073e-3f);
  p = MADD(p, r, 4.1665795894e-2f);
  p = MADD(p, r, 1.6666665459e-1f);
  p = MADD(p, r, 5.0000001201e-1f);
  p = MADD(p, r * r, r) + 1.0f;
  /* u = n + 256 (mod 2^32: unsigned, so garbage from a NaN is harmless). */
  uint32_t u = bits_of(t) - bits_of(magic) + 256u;
  uint32_t n1 = u >> 1;                   /* n1 - 128 = floor(n / 2) */
  float s1 = float_of((n1 - 1u) << 23);   /* 2^(n1 - 128) */
  float s2 = float_of((u - n1 - 1u) << 23); /* 2^(n - (n1 - 128)) */
  return p * s1 * s2;
}

/* erf(z) = z + z (S(z^2) - 1) on |z| < 1, S a degree-6 Chebyshev fit of
 * erf(z)/z (error 1.2e-9).  Adding z last keeps the rounding error of the
 * polynomial, whose value is now small, out of the leading digits. */
static inline float erf_small(float z) {
  float s = z * z;
  float p = 7.875875063e-05f;
  p = MADD(p, s, -8.016864287e-04f);
  p = MADD(p, s, 5.189087423e-03f);
  p = MADD(p, s, -2.685421201e-02f);
  p = MADD(p, s, 1.128359472e-01f);
  p = MADD(p, s, -3.761262667e-01f);
  p = MADD(p, s, 1.283791658e-01f);
  return MADD(z, p, z);
}

/* erfc(a) for a in [1, 5] as exp(Q(a)), Q a degree-9 Chebyshev fit of
 * log erfc in powers of (a - 1) (error 2.2e-8), expanded at 1 where erf
 * needs the most absolute accuracy.  a is clamped to [1, 5]: erf selects
 * erf_small below 1, and 1 - erfc(5) already rounds to 1.  (Coefficients
 * here and below: mpmath.chebyfit, rounded to float.) */
static inline float erfc_big(float a) {
  float v = a < 1.0f ? 1.0f : a;
  v = v > 5.0f ? 5.0f : v;
  v -= 1.0f;
  float q = -1.143299289e-07f;
  q = MADD(q, v, 3.184530392e-06f);
  q = MADD(q, v, -4.169996144e-05f);
  q = MADD(q, v, 3.469173966e-04f);
  q = MADD(q, v, -2.101935349e-03f);
  q = MADD(q, v, 1.012804286e-02f);
  q = MADD(q, v, -4.160574417e-02f);
  q = MADD(q, v, -8.430956546e-01f);
  q = MADD(q, v, -2.638968778e+00f);
  q = MADD(q, v, -1.849605485e+00f);
  return exp_f(q);
}

static inline float abs_f(float x) { return float_of(bits_of(x) & 0x7fffffffu); }

/* erf(x), absolute error <= 1e-7 everywhere (+-1 for |x| >= 5). */
static inline float erf_f(float x) {
  float a = abs_f(x);
  float big = 1.0f - erfc_big(a);
  big = x < 0.0f ? -big : big;
  return a < 1.0f ? erf_small(x) : big; /* NaN: takes `big`, which is NaN */
}

/* exp(x) for |x| <= 87 only (no clamping, one scale factor): for callers
 * whose argument is bounded by construction. */
static inline float exp_bounded(float x) {
  const float magic = 12582912.0f;
  float t = MADD(x, 1.44269504088896341f, magic);
  float n = t - magic;
  float r = MADD(n, -0.693359375f, x);
  r = MADD(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = MADD(p, r, 1.3981999507e-3f);
  p = MADD(p, r, 8.3334519073e-3f);
  p = MADD(p, r, 4.1665795894e-2f);
  p = MADD(p, r, 1.6666665459e-1f);
  p = MADD(p, r, 5.0000001201e-1f);
  p = MADD(p, r * r, r) + 1.0f;
  return p * float_of((bits_of(t) - bits_of(magic) + 127u) << 23);
}

/* Exact GELU: x * Phi(x) with Phi(x) = erfc(-x/sqrt2) / 2.  GELU is the hot
 * elementwise kernel (it runs over the FFN's wide hidden layer), so it gets
 * its own single-branch formula: erfc(z) = exp(Q(z)) on z = |x|/sqrt2 in
 * [0, 4], Q a degree-11 Chebyshev fit of log erfc (error 2.7e-8), then
 *   x >= 0: Phi = 1 - erfc(z)/2,    x < 0: Phi = erfc(z)/2
 * so the negative side never forms 1 + erf(x), which cancels.  Past z = 4,
 * erfc < 1.6e-8 and Phi is taken as 1 or 0 (absolute error < 5e-8). */
static inline float gelu_f(float x) {
  float z = abs_f(x) * 0.707106781186547524f;
  float v = z > 4.0f ? 4.0f : z;
  float q = 7.827350131e-08f;
  q = MADD(q, v, -2.062626218e-06f);
  q = MADD(q, v, 2.416305359e-05f);
  q = MADD(q, v, -1.642972311e-04f);
  q = MADD(q, v, 6.955366285e-04f);
  q = MADD(q, v, -1.666748767e-03f);
  q = MADD(q, v, 5.446877630e-05f);
  q = MADD(q, v, 1.928500953e-02f);
  q = MADD(q, v, -1.028488906e-01f);
  q = MADD(q, v, -6.366020498e-01f);
  q = MADD(q, v, -1.128380712e+00f);
  q = MADD(q, v, 2.161096548e-08f);
  float h = 0.5f * exp_bounded(q); /* q in [-17.6, 0] */
  h = z > 4.0f ? 0.0f : h;
  float phi = x < 0.0f ? h : 1.0f - h;
  return x * phi;
}

/* tanh GELU: 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)), a sigmoid.  The
 * second form has no cancellation for negative u and needs only exp; at
 * the extremes exp gives 0 or inf, so the result is x or -0. */
static inline float gelu_tanh_f(float x) {
  float u = 0.797884560802865355f * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp_f(-2.0f * u));
}

/* x < 0 rather than x > 0 so that NaN stays NaN (as in PyTorch). */
static inline float relu_f(float x) { return x < 0.0f ? 0.0f : x; }

void bcrt_exp(long n, const float *x, float *y) {
  for (long i = 0; i < n; i++) y[i] = exp_f(x[i]);
}

void bcrt_erf(long n, const float *x, float *y) {
  for (long i = 0; i < n; i++) y[i] = erf_f(x[i]);
}

/* ------------------------------------------------------------------------ */
/* Copies, adds, bias + activation                                          */
/* ------------------------------------------------------------------------ */

static inline float *row_of(float *m, int i, int ld) { return m + (size_t)i * (size_t)ld; }
static inline const float *crow_of(const float *m, int i, int ld) {
  return m + (size_t)i * (size_t)ld;
}

void bcrt_fill_rows(int n, int d, const float *bias, float *y) {
  for (int i = 0; i < n; i++) {
    if (bias)
      memcpy(row_of(y, i, d), bias, (size_t)d * sizeof *y);
    else
      memset(row_of(y, i, d), 0, (size_t)d * sizeof *y);
  }
}

void bcrt_copy(long n, const float *x, float *y) {
  if (n > 0 && x != y) memmove(y, x, (size_t)n * sizeof *y);
}

void bcrt_add(long n, float alpha, const float *a, float beta, const float *b, float *y) {
  for (long i = 0; i < n; i++) y[i] = alpha * a[i] + beta * b[i];
}

/* One loop per activation (and per bias/no bias), so each inner loop is a
 * straight vectorisable body; a macro stamps them out. */
#define ACT_ROWS(name, f)                                          \
  static void name(int n, int d, const float *bias, float *y) {    \
    for (int i = 0; i < n; i++) {                                  \
      float *r = row_of(y, i, d);                                  \
      if (bias)                                                    \
        for (int j = 0; j < d; j++) r[j] = f(r[j] + bias[j]);      \
      else                                                         \
        for (int j = 0; j < d; j++) r[j] = f(r[j]);                \
    }                                                              \
  }

static inline float ident_f(float x) { return x; }
ACT_ROWS(relu_rows, relu_f)
ACT_ROWS(gelu_rows, gelu_f)
ACT_ROWS(gelu_tanh_rows, gelu_tanh_f)
ACT_ROWS(bias_rows, ident_f)

void bcrt_bias_act(int n, int d, const float *bias, int act, float *y) {
  switch (act) {
  case BCRT_ACT_RELU: relu_rows(n, d, bias, y); break;
  case BCRT_ACT_GELU: gelu_rows(n, d, bias, y); break;
  case BCRT_ACT_GELU_TANH: gelu_tanh_rows(n, d, bias, y); break;
  default: if (bias) bias_rows(n, d, bias, y); break;
  }
}

/* ------------------------------------------------------------------------ */
/* Row reductions                                                           */
/* ------------------------------------------------------------------------ */

/* Pairwise sum of the LANES partial sums (also the most accurate order). */
static inline float lanes_sum(float *acc) {
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  return acc[0];
}

/* sum_j (x[j] - k) */
static float sum_shifted(int d, const float *x, float k) {
  float acc[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += x[i + j] - k;
  for (int j = 0; i + j < d; j++) acc[j] += x[i + j] - k;
  return lanes_sum(acc);
}

/* sum_j ((x[j] - k) - delta)^2 */
static float sum_sq_dev(int d, const float *x, float k, float delta) {
  float acc[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) {
      float c = (x[i + j] - k) - delta;
      acc[j] += c * c;
    }
  for (int j = 0; i + j < d; j++) {
    float c = (x[i + j] - k) - delta;
    acc[j] += c * c;
  }
  return lanes_sum(acc);
}

/* max of x[j] over j < len, reading (but ignoring) x up to lim >= len so
 * the loop runs over whole LANES blocks; NaNs are skipped too (the caller's
 * exp brings them back). */
static float row_max(int lim, int len, const float *x) {
  float acc[LANES];
  for (int j = 0; j < LANES; j++) acc[j] = float_of(0xff800000u); /* -inf */
  int i = 0;
  for (; i + LANES <= lim; i += LANES)
    for (int j = 0; j < LANES; j++)
      acc[j] = i + j < len && x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (int j = 0; i + j < len; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (int j = 1; j < LANES; j++) m = acc[j] > m ? acc[j] : m;
  return m;
}

/* ------------------------------------------------------------------------ */
/* LayerNorm                                                                */
/* ------------------------------------------------------------------------ */

/* Two passes over a row that is in L1 by now.  Everything is centred on
 * a sample, k = x[0]: with delta = mean(x - k), the centred value is
 * (x - k) - delta.  When the mean is large against the spread, x - k is
 * exact and delta is small, so this keeps digits that x - mean, with the
 * mean rounded to a float, would lose.  A constant row gives exactly
 * delta = 0 and var = 0, so its output is exactly the bias. */
typedef struct {
  float k, delta, rstd;
} ln_stats;

static ln_stats ln_row_stats(int d, const float *x, float eps) {
  ln_stats st;
  st.k = x[0];
  st.delta = sum_shifted(d, x, st.k) / (float)d;
  float var = sum_sq_dev(d, x, st.k, st.delta) / (float)d;
  st.rstd = 1.0f / sqrtf(var + eps);
  return st;
}

/* y = ((x - k) - delta) * rstd * w + b; y may alias x. */
static void ln_apply(int d, const float *x, ln_stats st, const float *w, const float *b,
                     float *y) {
  float k = st.k, delta = st.delta, rstd = st.rstd;
  if (w && b) {
    for (int j = 0; j < d; j++) y[j] = ((x[j] - k) - delta) * rstd * w[j] + b[j];
  } else if (!w && !b) {
    for (int j = 0; j < d; j++) y[j] = ((x[j] - k) - delta) * rstd;
  } else {
    for (int j = 0; j < d; j++) {
      float v = ((x[j] - k) - delta) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      y[j] = v;
    }
  }
}

static void ln_row(int d, const float *x, const float *w, const float *b, float eps,
                   float *y) {
  ln_apply(d, x, ln_row_stats(d, x, eps), w, b, y);
}

void bcrt_layernorm(int n, int d, const float *x, const float *w, const float *b,
                    float eps, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) ln_row(d, crow_of(x, i, d), w, b, eps, row_of(y, i, d));
}

/* The sum goes to `sum` if wanted, else straight into y's row (element j of
 * y only depends on element j of a and b, so y may alias either); then the
 * row, hot in L1, is normalised in place. */
void bcrt_add_layernorm(int n, int d, float alpha, const float *a, float beta,
                        const float *b, const float *w, const float *bias, float eps,
                        float *sum, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *yr = row_of(y, i, d);
    float *sr = sum ? row_of(sum, i, d) : yr;
    bcrt_add(d, alpha, crow_of(a, i, d), beta, crow_of(b, i, d), sr);
    ln_row(d, sr, w, bias, eps, yr);
  }
}

static void dual_add_row(int d, float a0, const float *xd, float b0, float a1,
                         const float *xa, float b1, const float *u, float *xd_out,
                         float *xa_out) {
  for (int j = 0; j < d; j++) {
    float uj = u[j];
    xd_out[j] = a0 * xd[j] + b0 * uj;
    xa_out[j] = a1 * xa[j] + b1 * uj;
  }
}

void bcrt_dual_add_layernorm(int n, int d, float a0, const float *xd, float b0,
                             float a1, const float *xa, float b1, const float *u,
                             const float *w, const float *bias, float eps,
                             float *xd_out, float *xa_out) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *xar = row_of(xa_out, i, d);
    dual_add_row(d, a0, crow_of(xd, i, d), b0, a1, crow_of(xa, i, d), b1,
                 crow_of(u, i, d), row_of(xd_out, i, d), xar);
    ln_row(d, xar, w, bias, eps, xar);
  }
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                  */
/* ------------------------------------------------------------------------ */

/* exp(x) for x <= 0, as softmax needs it: below -87 (e^-87 = 1.6e-38, far
 * under a float's resolution next to the row max's exp(0) = 1) the result
 * is flushed to 0, which also maps -inf to 0 and keeps exp_bounded cheap. */
static inline float exp_nonpos(float x) {
  float e = exp_bounded(x < -87.0f ? -87.0f : x);
  return x < -87.0f ? 0.0f : e;
}

/* sum_j x[j] */
static float row_sum(int d, const float *x) {
  float acc[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
  for (int j = 0; i + j < d; j++) acc[j] += x[i + j];
  return lanes_sum(acc);
}

/* Softmax over s[0, len), zeros in s[len, d).
 *
 * Causal rows have every length from 1 to d, and a loop whose count is not a
 * multiple of the vector width ends in scalar iterations: with exp in them
 * that doubled the cost of a causal 128-wide row.  So the loops run to lim,
 * len rounded up to whole LANES blocks (capped at d), and mask [len, lim)
 * with selects; those entries must become 0 anyway. */
static void softmax_row(int len, int d, float *s) {
  int lim = len % LANES ? len + LANES - len % LANES : len;
  if (lim > d) lim = d;
  float m = len > 0 ? row_max(lim, len, s) : 0.0f;
  if (len > 0 && m < -FLT_MAX) {
    /* Every entry is -inf or NaN (rare: a fully masked row).  Define the
     * all -inf row as all zeros rather than NaN; a NaN still poisons. */
    float fill = 0.0f;
    for (int j = 0; j < len; j++)
      if (s[j] != s[j]) fill = s[j];
    for (int j = 0; j < len; j++) s[j] = fill;
    lim = len;
  } else if (len <= 0) {
    lim = 0;
  } else {
    for (int j = 0; j < lim; j++) s[j] = j < len ? exp_nonpos(s[j] - m) : 0.0f;
    /* sum >= 1 (the max contributes exp(0)), so the reciprocal is safe. */
    float inv = 1.0f / row_sum(lim, s);
    for (int j = 0; j < lim; j++) s[j] *= inv;
  }
  for (int j = lim; j < d; j++) s[j] = 0.0f;
}

void bcrt_softmax(int n, int d, int ld, int causal, int row0, float *s) {
  for (int i = 0; i < n; i++) {
    long len = causal ? (long)i + 1 + row0 : d;
    softmax_row(len > d ? d : (int)(len < 0 ? 0 : len), d, row_of(s, i, ld));
  }
}

/* ------------------------------------------------------------------------ */
/* Portable SGEMM (only with -DBLOCKC_NO_BLAS)                              */
/* ------------------------------------------------------------------------ */
#ifdef BLOCKC_NO_BLAS

/* C = alpha op(A) op(B) + beta C, row-major.  B is copied a KC x NC panel at
 * a time (32 KiB, stays in L1/L2) into contiguous rows, so the inner loop is
 * a vectorised axpy of one panel row into a slice of a C row.  op(A) is read
 * element by element: it is only touched m*k times per panel. */
enum { GEMM_KC = 64, GEMM_NC = 128 };

static inline float op_at(int trans, const float *m, int ld, int r, int c) {
  return trans ? m[(size_t)c * (size_t)ld + (size_t)r] : m[(size_t)r * (size_t)ld + (size_t)c];
}

/* C *= beta, where beta == 0 clears C without reading it (BLAS semantics:
 * NaNs in an uninitialised C must not leak through). */
static void gemm_scale_c(int m, int n, float beta, float *c, int ldc) {
  if (beta == 1.0f) return;
  for (int i = 0; i < m; i++) {
    float *cr = row_of(c, i, ldc);
    if (beta == 0.0f)
      for (int j = 0; j < n; j++) cr[j] = 0.0f;
    else
      for (int j = 0; j < n; j++) cr[j] *= beta;
  }
}

static void gemm_pack_b(int transb, const float *b, int ldb, int p0, int kc, int j0,
                        int nc, float *bp) {
  for (int p = 0; p < kc; p++)
    for (int j = 0; j < nc; j++) bp[p * nc + j] = op_at(transb, b, ldb, p0 + p, j0 + j);
}

static void gemm_panel(int transa, int m, int kc, int nc, float alpha, const float *a,
                       int lda, int p0, const float *bp, float *c, int ldc, int j0) {
  for (int i = 0; i < m; i++) {
    float *cr = row_of(c, i, ldc) + j0;
    for (int p = 0; p < kc; p++) {
      float aip = alpha * op_at(transa, a, lda, i, p0 + p);
      const float *br = bp + p * nc;
      for (int j = 0; j < nc; j++) cr[j] += aip * br[j];
    }
  }
}

static void gemm_row_major(int transa, int transb, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta,
                           float *c, int ldc) {
  float bp[GEMM_KC * GEMM_NC];
  if (m <= 0 || n <= 0) return;
  gemm_scale_c(m, n, beta, c, ldc);
  if (alpha == 0.0f || k <= 0) return;
  for (int j0 = 0; j0 < n; j0 += GEMM_NC) {
    int nc = n - j0 < GEMM_NC ? n - j0 : GEMM_NC;
    for (int p0 = 0; p0 < k; p0 += GEMM_KC) {
      int kc = k - p0 < GEMM_KC ? k - p0 : GEMM_KC;
      gemm_pack_b(transb, b, ldb, p0, kc, j0, nc, bp);
      gemm_panel(transa, m, kc, nc, alpha, a, lda, p0, bp, c, ldc, j0);
    }
  }
}

/* Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap. */
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc) {
  int ta = transa == BCRT_TRANS, tb = transb == BCRT_TRANS;
  if (order == BCRT_ROW_MAJOR)
    gemm_row_major(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm_row_major(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
#endif /* BLOCKC_NO_BLAS */

/* ------------------------------------------------------------------------ */
/* Reference kernels: double accumulation and libm, no cleverness           */
/* ------------------------------------------------------------------------ */

static double ref_act(double v, int act) {
  switch (act) {
  case BCRT_ACT_RELU: return v < 0 ? 0 : v;
  case BCRT_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
  case BCRT_ACT_GELU_TANH: {
    double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
  }
  default: return v;
  }
}

/* The bias add is a float add, as in the contract; the activation is exact. */
void bcrt_ref_bias_act(int n, int d, const float *bias, int act, float *y) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < d; j++) {
      float *p = &y[(size_t)i * (size_t)d + (size_t)j];
      float v = bias ? *p + bias[j] : *p;
      *p = (float)ref_act(v, act);
    }
}

void bcrt_ref_layernorm(int n, int d, const float *x, const float *w, const float *b,
                        float eps, float *y) {
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    float *yr = row_of(y, i, d);
    double mean = 0, var = 0;
    for (int j = 0; j < d; j++) mean += xr[j];
    mean /= d;
    for (int j = 0; j < d; j++) var += (xr[j] - mean) * (xr[j] - mean);
    var /= d;
    double rstd = 1.0 / sqrt(var + (double)eps);
    for (int j = 0; j < d; j++) {
      double v = (xr[j] - mean) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = (float)v;
    }
  }
}

void bcrt_ref_softmax(int n, int d, int ld, int causal, int row0, float *s) {
  for (int i = 0; i < n; i++) {
    float *r = row_of(s, i, ld);
    long len = causal ? (long)i + 1 + row0 : d;
    if (len > d) len = d;
    if (len < 0) len = 0;
    double m = -HUGE_VAL, sum = 0;
    for (long j = 0; j < len; j++)
      if (r[j] > m) m = r[j];
    if (m == -HUGE_VAL) len = 0; /* empty or all -inf: all zeros */
    for (long j = 0; j < len; j++) sum += exp(r[j] - m);
    for (long j = 0; j < len; j++) r[j] = (float)(exp(r[j] - m) / sum);
    for (long j = len; j < d; j++) r[j] = 0.0f;
  }
}
