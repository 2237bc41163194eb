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
 * With -DBLOCKC_NO_BLAS this file also defines cblas_sgemm, a wrapper over
 * bcrt_sgemm (a BLIS-style packed, register-blocked GEMM at the end of the
 * file), so generated code runs without OpenBLAS.  bcrt_gemm_small, also
 * there, is the weight-streaming product for few rows.
 *
 * At the end, for vendored AOT programs only: a safetensors weights loader
 * and .npy read/write (ISO C stdio, a small JSON reader of our own), so
 * this file and its header are all a user copies next to <model>.{c,h}. */
#include "blockc_rt.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
/* The shared core: reduces x (already in range) and returns exp(r), with
 * t holding n in its low mantissa bits. */
static inline float exp_reduced(float x, float *t) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  *t = MADD(x, 1.44269504088896341f, magic);
  float n = *t - magic;
  float r = MADD(n, -0.693359375f, x);
  r = MADD(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = MADD(p, r, 1.3981999507e-3f);
  p = MADD(p, r, 8.3334519073e-3f);
  p = MADD(p, r, 4.1665795894e-2f);
  p = MADD(p, r, 1.6666665459e-1f);
  p = MADD(p, r, 5.0000001201e-1f);
  return MADD(p, r * r, r) + 1.0f;
}

static inline float exp_f(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  float t, p = exp_reduced(xc, &t);
  /* u = n + 256 (mod 2^32: unsigned, so garbage from a NaN is harmless). */
  uint32_t u = bits_of(t) - bits_of(12582912.0f) + 256u;
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
  float t, p = exp_reduced(x, &t);
  return p * float_of((bits_of(t) - bits_of(12582912.0f) + 127u) << 23);
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
 * delta = 0 and var = 0, so its output is exactly the bias.
 *
 * A row of huge finite values can overflow on the way although its output
 * is finite: the squares of deviations above ~1.8e19 (1e30 inputs), or
 * sum(x - k) itself (+-1e36 over 512 columns, [3.4e38, 0, ...]).  Only then
 * (the variance came out inf or NaN, every x finite) the row is taken as
 * x * scale, scale a power of two that brings max |x| into [2, 4): exact,
 * so the statistics of x * scale are those of x up to the factor, and
 * nothing overflows.  The normalised value is ((x * scale - k) - delta) *
 * rstd with k, delta and rstd those of the scaled row; ordinary rows have
 * scale = 1 and run loops in which the factor is folded away. */
typedef struct {
  float scale, k, delta, rstd;
} ln_stats;

#if defined(__GNUC__) || defined(__clang__)
#define RT_INLINE static inline __attribute__((always_inline))
#else
#define RT_INLINE static inline
#endif

/* max_j |x[j]|; NaNs are skipped (the statistics bring them back). */
static float max_abs(int d, const float *x) {
  float m = 0.0f;
  for (int j = 0; j < d; j++) m = abs_f(x[j]) > m ? abs_f(x[j]) : m;
  return m;
}

/* The power of two s with m * s in [2, 4), for a normal finite m > 0. */
static float pow2_scale(float m) {
  uint32_t e = (bits_of(m) >> 23) & 0xffu; /* 1..254 */
  return float_of((255u - e) << 23);
}

/* The slow path above, in double: the statistics of x * s. */
static ln_stats ln_scaled_stats(int d, const float *x, float eps, float s) {
  ln_stats st = {s, x[0] * s, 0.0f, 0.0f};
  double acc = 0.0, q = 0.0;
  for (int j = 0; j < d; j++) acc += (double)(x[j] * s - st.k);
  st.delta = (float)(acc / d);
  for (int j = 0; j < d; j++) {
    double c = (double)((x[j] * s - st.k) - st.delta);
    q += c * c;
  }
  st.rstd = (float)(1.0 / sqrt(q / d + (double)eps * s * s));
  return st;
}

static ln_stats ln_row_stats(int d, const float *x, float eps) {
  ln_stats st = {1.0f, x[0], 0.0f, 0.0f};
  st.delta = sum_shifted(d, x, st.k) / (float)d;
  float var = sum_sq_dev(d, x, st.k, st.delta) / (float)d;
  if (!(var <= FLT_MAX)) {
    float m = max_abs(d, x);
    if (m >= FLT_MIN && m <= FLT_MAX) return ln_scaled_stats(d, x, eps, pow2_scale(m));
  }
  st.rstd = 1.0f / sqrtf(var + eps);
  return st;
}

/* y = ((x * s - k) - delta) * rstd * w + b; y may alias x. */
RT_INLINE void ln_apply_s(int d, const float *x, float s, ln_stats st, const float *w,
                          const float *b, float *y) {
  float k = st.k, delta = st.delta, rstd = st.rstd;
  if (w && b) {
    for (int j = 0; j < d; j++) y[j] = ((x[j] * s - k) - delta) * rstd * w[j] + b[j];
  } else if (!w && !b) {
    for (int j = 0; j < d; j++) y[j] = ((x[j] * s - k) - delta) * rstd;
  } else {
    for (int j = 0; j < d; j++) {
      float v = ((x[j] * s - k) - delta) * rstd;
      if (w) v *= w[j];
      if (b) v += b[j];
      y[j] = v;
    }
  }
}

/* The common row (scale 1, a constant the compiler folds) or a scaled one. */
static void ln_apply(int d, const float *x, ln_stats st, const float *w, const float *b,
                     float *y) {
  if (st.scale == 1.0f)
    ln_apply_s(d, x, 1.0f, st, w, b, y);
  else
    ln_apply_s(d, x, st.scale, st, w, b, y);
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

/* The portable GEMM itself, bcrt_sgemm, is at the end of this file (the
 * issue 11 section); this wrapper only maps CBLAS's calling convention onto
 * it.  Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T. */
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc) {
  if (order == BCRT_ROW_MAJOR)
    bcrt_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    bcrt_sgemm(transb, transa, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
#endif /* BLOCKC_NO_BLAS */

/* ------------------------------------------------------------------------ */
/* Checkpoint families (issue 10): RMSNorm, gated FFN, strided bias, RoPE   */
/* ------------------------------------------------------------------------ */

/* 1 / sqrt(mean(x^2) + eps) of a row.  The squares are summed in lanes of
 * x / m with m = max |x|, then scaled back, so a row of 1e30s neither
 * overflows nor loses its digits. */
static float rms_rstd(int d, const float *x, float eps) {
  float m = 0.0f;
  for (int j = 0; j < d; j++) m = abs_f(x[j]) > m ? abs_f(x[j]) : m;
  if (!(m > 0.0f)) return m == 0.0f ? 1.0f / sqrtf(eps) : m; /* zero row; NaN stays NaN */
  float inv = 1.0f / m, acc[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) {
      float v = x[i + j] * inv;
      acc[j] += v * v;
    }
  for (int j = 0; i + j < d; j++) {
    float v = x[i + j] * inv;
    acc[j] += v * v;
  }
  double ms = (double)lanes_sum(acc) / d * (double)m * (double)m;
  return (float)(1.0 / sqrt(ms + (double)eps));
}

static void rms_row(int d, const float *x, const float *w, float eps, float *y) {
  float r = rms_rstd(d, x, eps);
  if (w)
    for (int j = 0; j < d; j++) y[j] = x[j] * r * w[j];
  else
    for (int j = 0; j < d; j++) y[j] = x[j] * r;
}

void bcrt_rmsnorm(int n, int d, const float *x, const float *w, float eps, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) rms_row(d, crow_of(x, i, d), w, eps, row_of(y, i, d));
}

void bcrt_add_rmsnorm(int n, int d, float alpha, const float *a, float beta, const float *b,
                      const float *w, float eps, float *sum, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *yr = row_of(y, i, d);
    float *sr = sum ? row_of(sum, i, d) : yr;
    bcrt_add(d, alpha, crow_of(a, i, d), beta, crow_of(b, i, d), sr);
    rms_row(d, sr, w, eps, yr);
  }
}

void bcrt_dual_add_rmsnorm(int n, int d, float a0, const float *xd, float b0, float a1,
                           const float *xa, float b1, const float *u, const float *w, float eps,
                           float *xd_out, float *xa_out) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *xar = row_of(xa_out, i, d);
    dual_add_row(d, a0, crow_of(xd, i, d), b0, a1, crow_of(xa, i, d), b1, crow_of(u, i, d),
                 row_of(xd_out, i, d), xar);
    rms_row(d, xar, w, eps, xar);
  }
}

/* silu(x) = x / (1 + exp(-x)). */
static inline float silu_f(float x) { return x / (1.0f + exp_f(-x)); }

#define GLU_ROWS(name, f)                                                        \
  static void name(int n, int d, const float *bu, const float *bg, float *h,     \
                   const float *g) {                                             \
    for (int i = 0; i < n; i++) {                                                \
      float *hr = row_of(h, i, d);                                               \
      const float *gr = crow_of(g, i, d);                                        \
      if (bu && bg)                                                              \
        for (int j = 0; j < d; j++) hr[j] = f(gr[j] + bg[j]) * (hr[j] + bu[j]);  \
      else if (!bu && !bg) /* LLaMA: no biases, one straight loop */             \
        for (int j = 0; j < d; j++) hr[j] = f(gr[j]) * hr[j];                    \
      else                                                                       \
        for (int j = 0; j < d; j++)                                              \
          hr[j] = f(gr[j] + (bg ? bg[j] : 0.0f)) * (hr[j] + (bu ? bu[j] : 0.0f)); \
    }                                                                            \
  }

GLU_ROWS(swiglu_rows, silu_f)
GLU_ROWS(geglu_rows, gelu_f)

void bcrt_glu(int n, int d, const float *bu, const float *bg, int act, float *h, const float *g) {
  if (act == BCRT_ACT_GEGLU) geglu_rows(n, d, bu, bg, h, g);
  else swiglu_rows(n, d, bu, bg, h, g);
}

void bcrt_fill_cols(int n, int d, int ld, const float *bias, float *y) {
  for (int i = 0; i < n; i++) {
    if (bias)
      memcpy(row_of(y, i, ld), bias, (size_t)d * sizeof *y);
    else
      memset(row_of(y, i, ld), 0, (size_t)d * sizeof *y);
  }
}

/* Row r is position pos0 + r % t.  The angle of pair j is
 * pos * theta^(-2j/dh), computed in double (PyTorch rounds it through
 * float32; the difference is well inside the conformance tolerance) once
 * per (position, pair) and shared by every head. */
static void rope_rows(int n, int t, int pos0, int nheads, int dh, int ld, float theta, float sign,
                      float *x);

void bcrt_rope(int n, int t, int pos0, int nheads, int dh, int ld, float theta, float *x) {
  rope_rows(n, t, pos0, nheads, dh, ld, theta, 1.0f, x);
}

/* The transpose of a rotation is the rotation by minus its angle. */
void bcrt_rope_bwd(int n, int t, int pos0, int nheads, int dh, int ld, float theta, float *x) {
  rope_rows(n, t, pos0, nheads, dh, ld, theta, -1.0f, x);
}

static void rope_rows(int n, int t, int pos0, int nheads, int dh, int ld, float theta, float sign,
                      float *x) {
  int half = dh / 2;
  if (half <= 0 || t <= 0) return;
  double inv[256]; /* theta^(-2j/dh), once per call for the usual head widths */
  for (int j = 0; j < half && j < 256; j++) inv[j] = pow((double)theta, -2.0 * j / dh);
  for (int r = 0; r < n; r++) {
    double pos = (double)(pos0 + r % t);
    float *xr = row_of(x, r, ld);
    for (int j = 0; j < half; j++) {
      double a = pos * (j < 256 ? inv[j] : pow((double)theta, -2.0 * j / dh));
      float c = (float)cos(a), sn = sign * (float)sin(a);
      for (int h = 0; h < nheads; h++) {
        float *xh = xr + (size_t)h * (size_t)dh;
        float x0 = xh[j], x1 = xh[j + half];
        xh[j] = x0 * c - x1 * sn;
        xh[j + half] = x1 * c + x0 * sn;
      }
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Step entry (issue 11): rows into and out of the KV cache                 */
/* ------------------------------------------------------------------------ */

/* n rows of d floats from x (row stride ldx) to y (row stride ldy); the
 * ranges must not overlap.  The step entry appends K|V rows to the cache. */
void bcrt_copy_rows(int n, int d, const float *x, int ldx, float *y, int ldy) {
  if (n <= 0 || d <= 0) return;
  for (int i = 0; i < n; i++)
    memcpy(y + (size_t)i * (size_t)ldy, x + (size_t)i * (size_t)ldx, (size_t)d * sizeof *y);
}

/* ------------------------------------------------------------------------ */
/* Backward kernels (issue 14): the elementwise parts of a training step.   */
/* Gradients accumulate (+=) unless a contract says otherwise, because a    */
/* value read by several nodes sums their contributions.                    */
/* ------------------------------------------------------------------------ */

/* sum_j a[j] * b[j] */
static float dot_lanes(int d, const float *a, const float *b) {
  float acc[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i + j < d; j++) acc[j] += a[i + j] * b[i + j];
  return lanes_sum(acc);
}

void bcrt_colsum_add(int n, int d, int ld, const float *dy, float *db) {
  for (int i = 0; i < n; i++) {
    const float *r = crow_of(dy, i, ld);
    for (int j = 0; j < d; j++) db[j] += r[j];
  }
}

void bcrt_softmax_bwd(int n, int d, int ld, const float *p, float *dp) {
  for (int i = 0; i < n; i++) {
    const float *pr = crow_of(p, i, ld);
    float *gr = row_of(dp, i, ld);
    float dot = dot_lanes(d, pr, gr);
    for (int j = 0; j < d; j++) gr[j] = pr[j] * (gr[j] - dot);
  }
}

/* d act / dx at x.  gelu: Phi(x) + x phi(x); gelu_tanh with t = tanh(u) =
 * 1 - 2 / (1 + exp(2u)) (exp saturates to 0 or inf, so t to -1 or 1). */
static inline float act_df(int act, float x) {
  switch (act) {
  case BCRT_ACT_GELU:
    return 0.5f * (1.0f + erf_f(x * 0.707106781186547524f)) +
           x * 0.398942280401432678f * exp_f(-0.5f * x * x);
  case BCRT_ACT_GELU_TANH: {
    float c = 0.797884560802865355f, u = c * (x + 0.044715f * x * x * x);
    float t = 1.0f - 2.0f / (1.0f + exp_f(2.0f * u));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 0.134145f * x * x);
  }
  default: return x > 0.0f ? 1.0f : 0.0f;
  }
}

void bcrt_act_bwd(int n, int d, int act, const float *h, float *g) {
  long nel = (long)n * (long)d;
  switch (act) { /* one loop per activation, so each vectorises */
  case BCRT_ACT_GELU:
    for (long i = 0; i < nel; i++) g[i] *= act_df(BCRT_ACT_GELU, h[i]);
    break;
  case BCRT_ACT_GELU_TANH:
    for (long i = 0; i < nel; i++) g[i] *= act_df(BCRT_ACT_GELU_TANH, h[i]);
    break;
  default:
    for (long i = 0; i < nel; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f;
    break;
  }
}

void bcrt_act(int n, int d, int act, const float *h, float *a) {
  long nel = (long)n * (long)d;
  switch (act) {
  case BCRT_ACT_GELU: for (long i = 0; i < nel; i++) a[i] = gelu_f(h[i]); break;
  case BCRT_ACT_GELU_TANH: for (long i = 0; i < nel; i++) a[i] = gelu_tanh_f(h[i]); break;
  default: for (long i = 0; i < nel; i++) a[i] = relu_f(h[i]); break;
  }
}

/* Gated FFN: act(g) of the gate, silu (swiglu) or exact gelu (geglu). */
static inline float gate_f(int act, float g) {
  return act == BCRT_ACT_GEGLU ? gelu_f(g) : silu_f(g);
}

void bcrt_glu_act(int n, int d, int act, const float *u, const float *g, float *a) {
  long nel = (long)n * (long)d;
  if (act == BCRT_ACT_GEGLU)
    for (long i = 0; i < nel; i++) a[i] = gate_f(BCRT_ACT_GEGLU, g[i]) * u[i];
  else
    for (long i = 0; i < nel; i++) a[i] = gate_f(BCRT_ACT_SWIGLU, g[i]) * u[i];
}

/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x); gelu' as act_df. */
static inline float gate_df(int act, float x) {
  if (act == BCRT_ACT_GEGLU) return act_df(BCRT_ACT_GELU, x);
  float sg = 1.0f / (1.0f + exp_f(-x));
  return sg * (1.0f + x * (1.0f - sg));
}

void bcrt_glu_bwd(int n, int d, int act, const float *u, const float *g, float *da, float *dg) {
  long nel = (long)n * (long)d;
  int a = act == BCRT_ACT_GEGLU ? BCRT_ACT_GEGLU : BCRT_ACT_SWIGLU;
#define GLU_BWD_LOOP(A)                                                                        \
  for (long i = 0; i < nel; i++) {                                                             \
    float gi = g[i], di = da[i];                                                               \
    dg[i] = di * u[i] * gate_df(A, gi);                                                        \
    da[i] = di * gate_f(A, gi);                                                                \
  }
  if (a == BCRT_ACT_GEGLU) {
    GLU_BWD_LOOP(BCRT_ACT_GEGLU)
  } else {
    GLU_BWD_LOOP(BCRT_ACT_SWIGLU)
  }
#undef GLU_BWD_LOOP
}

/* One row of the norm backward, xhat = (x - mean) * rstd (mean 0 for
 * RMSNorm), g = dy * w:
 *   dx += rstd * (g - mean(g) - xhat * mean(g * xhat))   (no mean(g) term: RMS)
 *   dw += dy * xhat,  db += dy. */
RT_INLINE void norm_bwd_row_s(int d, const float *x, float s, float mean, float rstd,
                               const float *w, const float *dy, int rms, float *dx, float *dw,
                               float *db) {
  float acc_g[LANES] = {0}, acc_gx[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) {
      float xh = (x[i + j] * s - mean) * rstd, g = w ? dy[i + j] * w[i + j] : dy[i + j];
      acc_g[j] += g;
      acc_gx[j] += g * xh;
    }
  for (int j = 0; i + j < d; j++) {
    float xh = (x[i + j] * s - mean) * rstd, g = w ? dy[i + j] * w[i + j] : dy[i + j];
    acc_g[j] += g;
    acc_gx[j] += g * xh;
  }
  if (dw)
    for (int j = 0; j < d; j++) dw[j] += dy[j] * ((x[j] * s - mean) * rstd);
  if (db)
    for (int j = 0; j < d; j++) db[j] += dy[j];
  float mg = rms ? 0.0f : lanes_sum(acc_g) / (float)d, mgx = lanes_sum(acc_gx) / (float)d;
  for (int j = 0; j < d; j++) {
    float xh = (x[j] * s - mean) * rstd, g = w ? dy[j] * w[j] : dy[j];
    dx[j] += rstd * s * (g - mg - xh * mgx);
  }
}

/* x * s: the scaled row of ln_stats (s = 1 folded away on ordinary rows). */
static void norm_bwd_row(int d, const float *x, float s, float mean, float rstd, const float *w,
                         const float *dy, int rms, float *dx, float *dw, float *db) {
  if (s == 1.0f)
    norm_bwd_row_s(d, x, 1.0f, mean, rstd, w, dy, rms, dx, dw, db);
  else
    norm_bwd_row_s(d, x, s, mean, rstd, w, dy, rms, dx, dw, db);
}

void bcrt_layernorm_bwd(int n, int d, const float *x, const float *w, float eps,
                        const float *dy, float *dx, float *dw, float *db) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    ln_stats st = ln_row_stats(d, xr, eps);
    norm_bwd_row(d, xr, st.scale, st.k + st.delta, st.rstd, w, crow_of(dy, i, d), 0, row_of(dx, i, d),
                 dw, db);
  }
}

void bcrt_rmsnorm_bwd(int n, int d, const float *x, const float *w, float eps,
                      const float *dy, float *dx, float *dw) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    norm_bwd_row(d, xr, 1.0f, 0.0f, rms_rstd(d, xr, eps), w, crow_of(dy, i, d), 1, row_of(dx, i, d),
                 dw, 0);
  }
}

/* The double references of the backward kernels (tests). */
void bcrt_ref_norm_bwd(int n, int d, int rms, const float *x, const float *w, float eps,
                       const float *dy, float *dx, float *dw, float *db) {
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d), *dyr = crow_of(dy, i, d);
    double mean = 0, var = 0, sg = 0, sgx = 0;
    for (int j = 0; j < d && !rms; j++) mean += xr[j];
    mean /= d;
    for (int j = 0; j < d; j++) var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1.0 / sqrt(var / d + (double)eps);
    for (int j = 0; j < d; j++) {
      double xh = (xr[j] - mean) * rstd, g = (double)dyr[j] * (w ? w[j] : 1.0);
      sg += g;
      sgx += g * xh;
      if (dw) dw[j] = (float)(dw[j] + dyr[j] * xh);
      if (db) db[j] = (float)(db[j] + (double)dyr[j]);
    }
    sg = rms ? 0.0 : sg / d;
    sgx /= d;
    for (int j = 0; j < d; j++) {
      double xh = (xr[j] - mean) * rstd, g = (double)dyr[j] * (w ? w[j] : 1.0);
      float *o = row_of(dx, i, d) + j;
      *o = (float)(*o + rstd * (g - sg - xh * sgx));
    }
  }
}

void bcrt_ref_act_bwd(int n, int d, int act, const float *h, float *g) {
  const double c = sqrt(2.0 / 3.14159265358979323846);
  for (long i = 0; i < (long)n * d; i++) {
    double x = h[i], df;
    if (act == BCRT_ACT_GELU) {
      df = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
    } else if (act == BCRT_ACT_GELU_TANH) {
      double t = tanh(c * (x + 0.044715 * x * x * x));
      df = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
    } else {
      df = x > 0 ? 1.0 : 0.0;
    }
    g[i] = (float)(g[i] * df);
  }
}

void bcrt_ref_glu_bwd(int n, int d, int act, const float *u, const float *g, float *da,
                      float *dg) {
  const double k = 1.0 / sqrt(2.0), q = 1.0 / sqrt(2.0 * 3.14159265358979323846);
  for (long i = 0; i < (long)n * d; i++) {
    double x = g[i], f, df;
    if (act == BCRT_ACT_GEGLU) {
      f = 0.5 * x * (1.0 + erf(x * k));
      df = 0.5 * (1.0 + erf(x * k)) + x * q * exp(-0.5 * x * x);
    } else {
      double sg = 1.0 / (1.0 + exp(-x));
      f = x * sg;
      df = sg * (1.0 + x * (1.0 - sg));
    }
    dg[i] = (float)((double)da[i] * u[i] * df);
    da[i] = (float)((double)da[i] * f);
  }
}

void bcrt_ref_softmax_bwd(int n, int d, int ld, const float *p, float *dp) {
  for (int i = 0; i < n; i++) {
    const float *pr = crow_of(p, i, ld);
    float *gr = row_of(dp, i, ld);
    double dot = 0;
    for (int j = 0; j < d; j++) dot += (double)pr[j] * gr[j];
    for (int j = 0; j < d; j++) gr[j] = (float)(pr[j] * (gr[j] - dot));
  }
}

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

/* ------------------------------------------------------------------------ */
/* Files: safetensors weights and .npy arrays                               */
/* ------------------------------------------------------------------------ */
/* These are THE readers of both formats: blockc itself reads weights and
 * inputs through them (compiler/safetensors.c and npy.c only put its
 * "path: error: " in front of the messages and pass its own limits), so a
 * vendored program rejects exactly what blockc rejects.  ISO C only, no
 * JSON library: this .c/.h pair must stay copyable into any project.
 *
 * The rules, checked on the header alone before any tensor data is read
 * (data is then read one tensor at a time, on demand):
 *   safetensors: file <= 1 TiB; header length <= 100 MiB and inside the
 *   file; the header valid UTF-8 and strict JSON (RFC 8259: no raw control
 *   bytes, valid escapes, paired surrogates, no \u0000, nothing after the
 *   value, nesting <= 64) whose numbers are plain non-negative integers;
 *   one object of entries {"dtype", "shape", "data_offsets"}, each key
 *   exactly once, plus "__metadata__" (an object of strings); known dtypes;
 *   rank <= 8; offsets holding exactly the shape's bytes; unique names; the
 *   tensors tiling the data section (no overlap, no gap, no trailing bytes).
 *   .npy: magic, version 1.0-3.0, header <= 1 MiB and inside the file, a
 *   dict of exactly 'descr', 'fortran_order' and 'shape'; the wanted dtype,
 *   C order, rank and sizes within the caller's limits; then, when the data
 *   is read, exactly the shape's bytes after the header.
 * Allocation is bounded by the header's size (the tensor table) or by the
 * validated shape (the data).  Messages name the tensor or the byte; bytes
 * a terminal could act on are escaped (\xNN). */

#define ST_MAX_HEADER (100ull << 20) /* the reference implementation's limit */
#define ST_MAX_FILE (1ull << 40)     /* 1 TiB: anything bigger is not a block's weights */
#define ST_MAX_RANK 8
#define NPY_MAX_HEADER (1ul << 20)   /* numpy itself refuses headers over 10000 bytes */
#define NPY_MAX_DIMS 64              /* parsed before the rank check, for the message */
#define JSON_MAX_DEPTH 64
#define REPORT_MAX 8                 /* names listed per kind of weights problem */

static void set_err(char *err, unsigned long errlen, const char *fmt, const char *a,
                    const char *b) {
  if (err && errlen) snprintf(err, (size_t)errlen, fmt, a, b);
}

/* Appends one line to err (the weights loader reports every bad tensor). */
static void add_err(char *err, unsigned long errlen, const char *line) {
  if (!err || !errlen) return;
  size_t n = strlen(err);
  if (n + 1 >= errlen) return;
  snprintf(err + n, (size_t)errlen - n, "%s%s", n ? "\n" : "", line);
}

static int host_le(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static void swap32(void *p, size_t n) {
  unsigned char *c = p;
  for (size_t i = 0; i < n; i++, c += 4) {
    unsigned char t = c[0];
    c[0] = c[3], c[3] = t, t = c[1], c[1] = c[2], c[2] = t;
  }
}

void bcrt_free(void *p) { free(p); }

void *bcrt_aligned_alloc(unsigned long align, unsigned long bytes) {
  if (align < sizeof(void *) || (align & (align - 1))) return NULL;
  unsigned char *raw = malloc((size_t)bytes + (size_t)align + sizeof(void *));
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
  void *p = (void *)a;
  memcpy((unsigned char *)p - sizeof(void *), &raw, sizeof raw);  /* the block to free */
  return p;
}

void bcrt_aligned_free(void *p) {
  if (!p) return;
  void *raw;
  memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
  free(raw);
}

int bcrt_is_aligned(const void *p, unsigned long align) {
  return align && ((uintptr_t)p & (uintptr_t)(align - 1)) == 0;
}

/* --- errors and sources ------------------------------------------------------ */

static void err_clear(bcrt_error *e) {
  if (e) memset(e, 0, sizeof *e);
}

/* Length of the valid, printable UTF-8 sequence at s (2..4 bytes), else 0
 * (C1 controls U+0080..U+009F count as unprintable). */
static size_t utf8_printable(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (len < 2 || len > n || c < 0xC2 || c > 0xF4) return 0;
  for (size_t k = 1; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (len == 2 && c == 0xC2 && s[1] < 0xA0) return 0;
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

/* s for a message: control bytes, DEL and bytes that are not printable
 * UTF-8 become \xNN; at most about 200 bytes of s. */
static const char *esc(const char *s, char *buf, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = 0, len = strlen(s);
  for (size_t i = 0; i < len && k + 8 < n && i < 200;) {
    size_t w = u[i] >= 0x80 ? utf8_printable(u + i, len - i) : (u[i] >= 0x20 && u[i] != 0x7f) || u[i] == '\t';
    if (w) {
      memcpy(buf + k, s + i, w), k += w, i += w;
    } else {
      k += (size_t)snprintf(buf + k, n - k, "\\x%02x", u[i]), i++;
    }
  }
  buf[k] = '\0';
  return buf;
}

/* Records an error (the first one wins) and returns its status. */
static int rd_fail(bcrt_error *e, int status, int code, const char *tensor, unsigned long long offset,
                const char *fmt, ...) {
  if (!e || e->status) return status;
  e->status = status, e->code = code, e->offset = offset;
  char t[256];
  snprintf(e->tensor, sizeof e->tensor, "%s", tensor ? esc(tensor, t, sizeof t) : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return status;
}

/* A source of bytes at offsets: a FILE (the path functions), or whatever
 * the caller provides (blockc: its own opened file; fuzzers: memory). */
static int file_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  FILE *f = h;
  if (off > (unsigned long long)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0) return -1;
  return fread(buf, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
}

/* Opens path as a source (its size from seeking to the end). */
static FILE *open_source(const char *path, bcrt_source *src, bcrt_error *e) {
  FILE *f = fopen(path, "rb");
  long end;
  if (!f) {
    rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "cannot open: %s", strerror(errno));
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0) {
    fclose(f);
    rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "cannot determine the file's size");
    return NULL;
  }
  src->handle = f, src->size = (unsigned long long)end, src->read = file_read;
  return f;
}

static int src_read(const bcrt_source *s, unsigned long long off, void *buf, size_t n) {
  return n == 0 || (off <= s->size && n <= s->size - off && s->read(s->handle, off, buf, (unsigned long)n) == 0);
}

/* "path: msg" into err (the path functions' one-line form). */
static int report(const char *path, const bcrt_error *e, char *err, unsigned long errlen) {
  if (err && errlen) snprintf(err, (size_t)errlen, "%s: %s", path, e->msg);
  return e->status;
}

/* --- strict JSON ----------------------------------------------------------- */

typedef struct {
  const char *s, *p, *end;   /* s: the header's first byte (positions in messages) */
  int depth;
  const char *badnum;        /* the first number that is not a plain non-negative integer */
} json;

static void js_ws(json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int js_lit(json *j, char c) {
  js_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

/* Value of 4 hex digits at s[i..i+4) (n bytes in all), or -1. */
static long hex4(const char *s, size_t n, size_t i) {
  if (i + 4 > n) return -1;
  long v = 0;
  for (size_t k = i; k < i + 4; k++) {
    char c = s[k];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* The escape at s[*i] (a backslash inside a string): one of \" \\ \/ \b
 * \f \n \r \t, or \uXXXX with surrogates in pairs and never U+0000.
 * Advances *i to the escape's last byte; returns what is wrong or NULL. */
static const char *bad_escape(const char *s, size_t n, size_t *i) {
  size_t k = *i + 1;
  if (k >= n) return "an unfinished escape in a string";
  if (s[k] && strchr("\"\\/bfnrt", s[k])) {
    *i = k;
    return NULL;
  }
  if (s[k] != 'u') return "an invalid escape in a string";
  long u = hex4(s, n, k + 1);
  if (u < 0) return "an invalid \\u escape in a string";
  if (u == 0) return "an escaped NUL (\\u0000) in a string; tensor names cannot contain NUL";
  k += 4;
  if (u >= 0xDC00 && u <= 0xDFFF) return "a lone low surrogate escape in a string";
  if (u >= 0xD800 && u <= 0xDBFF) {
    long lo = k + 2 < n && s[k + 1] == '\\' && s[k + 2] == 'u' ? hex4(s, n, k + 3) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return "a high surrogate escape without its low half";
    k += 6;
  }
  *i = k;
  return NULL;
}

/* The lexical rules over the whole header, before its grammar: no raw
 * control byte in a string, valid escapes (see bad_escape), only JSON's
 * whitespace between tokens.  Returns what is wrong (at *at) or NULL. */
static const char *lexical_problem(const char *s, size_t n, size_t *at) {
  int in_str = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    *at = i;
    if (in_str) {
      if (c == '"') in_str = 0;
      else if (c < 0x20) return "a raw control byte inside a string (JSON requires an escape)";
      else if (c == '\\') {
        const char *bad = bad_escape(s, n, &i);
        if (bad) return bad;
      }
    } else if (c == '"') {
      in_str = 1;
    } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return "a control byte where JSON allows only space, tab, CR and LF";
    }
  }
  return NULL;
}

/* First invalid UTF-8 byte (or NUL) in s[0, n), or -1. */
static long bad_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (c == 0 || len == 0 || (len == 2 && c < 0xC2) || c > 0xF4 || i + len > n) return (long)i;
    for (size_t k = 1; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return (long)i;
    if (len == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) return (long)i;
    if (len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) return (long)i;
    i += len;
  }
  return -1;
}

/* A JSON string (lexically checked already), decoded to UTF-8 into a
 * malloc'ed buffer (out may be NULL to just skip it). */
static int js_string(json *j, char **out) {
  js_ws(j);
  if (j->p >= j->end || *j->p != '"') return 0;
  const char *s = ++j->p;
  while (j->p < j->end && *j->p != '"') j->p += (*j->p == '\\' && j->p + 1 < j->end) ? 2 : 1;
  if (j->p >= j->end) return 0;
  size_t n = (size_t)(j->p++ - s);
  if (!out) return 1;
  char *d = malloc(n + 1), *o = d;  /* decoding never lengthens the text */
  if (!d) return 0;
  for (size_t q = 0; q < n;) {
    char c = s[q++];
    if (c != '\\') {
      *o++ = c;
      continue;
    }
    c = s[q++];
    if (c != 'u') {
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      *o++ = to[strchr(from, c) - from];
      continue;
    }
    unsigned long u = (unsigned long)hex4(s, n, q);
    q += 4;
    if (u >= 0xd800 && u < 0xdc00) {
      u = 0x10000 + ((u - 0xd800) << 10) + ((unsigned long)hex4(s, n, q + 2) - 0xdc00);
      q += 6;
    }
    if (u < 0x80) *o++ = (char)u;
    else if (u < 0x800) *o++ = (char)(0xc0 | u >> 6), *o++ = (char)(0x80 | (u & 0x3f));
    else if (u < 0x10000)
      *o++ = (char)(0xe0 | u >> 12), *o++ = (char)(0x80 | ((u >> 6) & 0x3f)),
      *o++ = (char)(0x80 | (u & 0x3f));
    else
      *o++ = (char)(0xf0 | u >> 18), *o++ = (char)(0x80 | ((u >> 12) & 0x3f)),
      *o++ = (char)(0x80 | ((u >> 6) & 0x3f)), *o++ = (char)(0x80 | (u & 0x3f));
  }
  *o = '\0';
  *out = d;
  return 1;
}

/* A non-negative integer without sign, fraction, exponent or leading zero,
 * below 2^53 (exact wherever it came from). */
static int js_uint(json *j, unsigned long long *v) {
  js_ws(j);
  const char *s = j->p;
  *v = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (*v > (1ull << 53) / 10) return 0;
    *v = *v * 10 + (unsigned long long)(*j->p++ - '0');
  }
  if (j->p == s || (j->p - s > 1 && *s == '0') || *v >= (1ull << 53)) return 0;
  return !(j->p < j->end && strchr(".eE+-", *j->p));
}

/* A JSON number (RFC 8259 grammar); one that is not a plain non-negative
 * integer of at most 16 digits is remembered in j->badnum. */
static int js_number(json *j) {
  const char *s = j->p, *e = j->end;
  const char *p = s + (*s == '-');
  const char *d0 = p;
  while (p < e && *p >= '0' && *p <= '9') p++;
  if (p == d0 || (p - d0 > 1 && *d0 == '0')) return 0;
  int plain = *s != '-' && p - d0 <= 16;
  if (p < e && *p == '.') {
    const char *f = ++p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    if (p == f) return 0;
    plain = 0;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p += p + 1 < e && (p[1] == '+' || p[1] == '-') ? 2 : 1;
    const char *x = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    if (p == x) return 0;
    plain = 0;
  }
  if (!plain && !j->badnum) j->badnum = s;
  j->p = p;
  return 1;
}

/* Any JSON value (the grammar pass): 0 with j->p at the offending byte. */
static int js_value(json *j) {
  js_ws(j);
  if (j->p >= j->end || ++j->depth > JSON_MAX_DEPTH) return 0;
  char c = *j->p;
  int ok = 1;
  if (c == '"') {
    ok = js_string(j, NULL);
  } else if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (!js_lit(j, close)) {
      do {
        if (c == '{' && !(js_string(j, NULL) && js_lit(j, ':'))) return 0;
        if (!js_value(j)) return 0;
      } while (js_lit(j, ','));
      ok = js_lit(j, close);
    }
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    ok = js_number(j);
  } else {
    static const char *const words[] = {"true", "false", "null"};
    ok = 0;
    for (int i = 0; i < 3 && !ok; i++) {
      size_t n = strlen(words[i]);
      if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[i], n)) j->p += n, ok = 1;
    }
  }
  j->depth--;
  return ok;
}

/* The next value's first byte (after whitespace), or 0. */
static char js_peek(json *j) {
  js_ws(j);
  return j->p < j->end ? *j->p : 0;
}

/* Up to 24 bytes at p, unprintable ones as '?', for quoting a spot. */
static const char *excerpt(const char *p, const char *end, char *buf, size_t n) {
  size_t k = 0;
  while (p < end && k + 1 < n && k < 24) {
    unsigned char c = (unsigned char)*p++;
    buf[k++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  buf[k] = '\0';
  return buf;
}

/* --- safetensors -------------------------------------------------------------- */

/* The dtypes of the safetensors spec with a whole-byte element size. */
static const char *const st_dtypes[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8",
                                        "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2",
                                        "F8_E8M0", "C64"};
static const unsigned char st_sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1, 1, 8};

struct bcrt_st_file {
  bcrt_source src;
  FILE *own;                  /* the file bcrt_st_open opened, else NULL */
  unsigned long long data_off, data_len;
  bcrt_st_tensor *t;          /* sorted by name */
  int n, cap;
};

void bcrt_st_close(bcrt_st_file *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
  free(f->t);
  if (f->own) fclose(f->own);
  free(f);
}

int bcrt_st_count(const bcrt_st_file *f) { return f ? f->n : 0; }
const bcrt_st_tensor *bcrt_st_tensor_at(const bcrt_st_file *f, int i) {
  return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}
unsigned long long bcrt_st_data_offset(const bcrt_st_file *f) { return f ? f->data_off : 0; }

const bcrt_st_tensor *bcrt_st_find(const bcrt_st_file *f, const char *name) {
  int lo = 0, hi = f && name ? f->n - 1 : -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->t[mid].name, name);
    if (c == 0) return &f->t[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

/* "[2, 3]" for a file tensor's shape. */
static const char *dims_str(const unsigned long long *d, int rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %llu" : "%llu", d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* One safetensors header being checked: the file, its header text and
 * where the error goes. */
typedef struct {
  bcrt_st_file *f;
  const char *hdr;
  size_t hn;
  bcrt_error *e;
} st_reader;

#define ST_BAD(r, code, t, ...) rd_fail((r)->e, BCRT_EFORMAT, code, t, 0, __VA_ARGS__)

/* "__metadata__": an object whose values are strings. */
static int st_metadata(st_reader *r, json *j) {
  if (js_peek(j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "\"__metadata__\" is not a JSON object");
  j->p++;
  if (js_lit(j, '}')) return BCRT_OK;
  do {
    char *key = NULL, k[256];
    if (!js_string(j, &key)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    js_lit(j, ':');
    int str = js_peek(j) == '"';
    if (!str) ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "\"__metadata__\" entry '%s' is not a string", esc(key, k, sizeof k));
    free(key);
    if (!str) return BCRT_EFORMAT;
    js_value(j);
  } while (js_lit(j, ','));
  js_lit(j, '}');
  return BCRT_OK;
}

/* Where each of an entry's three keys' values starts (NULL: absent); a
 * key given twice is an error (which one counts would be luck). */
static int st_entry_keys(st_reader *r, json *j, const char *name, const char **at) {
  static const char *const keys[] = {"dtype", "shape", "data_offsets"};
  int seen[3] = {0, 0, 0};
  char k[256];
  j->p++;
  if (!js_lit(j, '}')) {
    do {
      char *key = NULL;
      if (!js_string(j, &key)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
      js_lit(j, ':');
      js_ws(j);
      for (int i = 0; i < 3; i++)
        if (!strcmp(key, keys[i]) && !seen[i]++) at[i] = j->p;
      free(key);
      js_value(j);
    } while (js_lit(j, ','));
    js_lit(j, '}');
  }
  for (int i = 0; i < 3; i++)
    if (seen[i] > 1)
      return ST_BAD(r, BCRT_ERR_SCHEMA, name, "tensor '%s': \"%s\" appears %d times",
                    esc(name, k, sizeof k), keys[i], seen[i]);
  for (int i = 0; i < 3; i++)
    if (!at[i]) return ST_BAD(r, BCRT_ERR_SCHEMA, name, "tensor '%s': missing \"%s\"", esc(name, k, sizeof k), keys[i]);
  return BCRT_OK;
}

static int st_dtype(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  char *dt = NULL, d[256];
  if (js_peek(j) != '"') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': \"dtype\" is not a string", k);
  if (!js_string(j, &dt)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (size_t i = 0; i < sizeof st_sizes && !t->dtype; i++)
    if (!strcmp(dt, st_dtypes[i])) t->dtype = st_dtypes[i], t->esize = st_sizes[i];
  if (!t->dtype)
    ST_BAD(r, BCRT_ERR_DTYPE, t->name, "tensor '%s': unknown dtype '%s' (safetensors dtypes are F32, F16, "
           "BF16, F64, I64, I32, ...)", k, esc(dt, d, sizeof d));
  free(dt);
  return t->dtype ? BCRT_OK : BCRT_EFORMAT;
}

static int st_shape(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  if (js_peek(j) != '[') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': \"shape\" is not an array", k);
  json c = *j;  /* count the dims first, for the message */
  int n = 0;
  c.p++;
  if (!js_lit(&c, ']')) do n++, js_value(&c); while (js_lit(&c, ','));
  if (n > ST_MAX_RANK)
    return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape has %d dims (limit %d)", k, n, ST_MAX_RANK);
  j->p++;
  for (t->rank = 0; t->rank < n; t->rank++) {
    if (t->rank) js_lit(j, ',');
    if (!js_uint(j, &t->shape[t->rank]))
      return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape[%d] is not a non-negative integer", k, t->rank);
  }
  /* numel * element size must fit in 63 bits (and, a fortiori, the file). */
  unsigned long long bytes = (unsigned long long)t->esize;
  char s[256];
  for (int i = 0; i < t->rank; i++) {
    if (t->shape[i] && bytes > (unsigned long long)INT64_MAX / t->shape[i])
      return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape %s has too many elements", k,
                    dims_str(t->shape, t->rank, s, sizeof s));
    bytes *= t->shape[i];
  }
  return BCRT_OK;
}

static int st_offsets(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  unsigned long long b = 0, en = 0, dl = r->f->data_len;
  int ok = js_lit(j, '[') && js_uint(j, &b) && js_lit(j, ',') && js_uint(j, &en) && js_lit(j, ']');
  if (!ok)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': \"data_offsets\" must be [begin, end], two "
                  "non-negative integers", k);
  t->begin = b, t->end = en;
  if (b > en)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] end before they begin", k, b, en);
  if (en > dl)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] run past the end of "
                  "the data section (%llu bytes)", k, b, en, dl);
  unsigned long long need = (unsigned long long)t->esize;
  for (int i = 0; i < t->rank; i++) need *= t->shape[i];
  char s[256];
  if (en - b != need)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but "
                  "shape %s of %s needs %llu", k, b, en, en - b, dims_str(t->shape, t->rank, s, sizeof s),
                  t->dtype, need);
  return BCRT_OK;
}

/* One tensor entry (its name already taken by t): dtype, shape, offsets. */
static int st_entry(st_reader *r, json *j, bcrt_st_tensor *t) {
  char k[256];
  esc(t->name, k, sizeof k);
  if (js_peek(j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': entry is not a JSON object", k);
  const char *at[3] = {NULL, NULL, NULL};
  int st = st_entry_keys(r, j, t->name, at);
  json v = *j;
  if (!st) v.p = at[0], st = st_dtype(r, &v, t, k);
  if (!st) v.p = at[1], st = st_shape(r, &v, t, k);
  if (!st) v.p = at[2], st = st_offsets(r, &v, t, k);
  return st;
}

static int st_add(st_reader *r, char *name) {
  bcrt_st_file *f = r->f;
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 16;
    bcrt_st_tensor *nt = realloc(f->t, (size_t)cap * sizeof *nt);
    if (!nt) {
      free(name);
      return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    }
    f->t = nt, f->cap = cap;
  }
  memset(&f->t[f->n], 0, sizeof f->t[f->n]);
  f->t[f->n++].name = name;
  return BCRT_OK;
}

/* The entries of the (grammatically valid) root object. */
static int st_entries(st_reader *r) {
  json j = {r->hdr, r->hdr, r->hdr + r->hn, 0, NULL};
  if (js_peek(&j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "header is not a JSON object");
  j.p++;
  if (js_lit(&j, '}')) return BCRT_OK;
  int st = BCRT_OK;
  do {
    char *name = NULL;
    if (!js_string(&j, &name)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    js_lit(&j, ':');
    if (!strcmp(name, "__metadata__")) {
      free(name);
      st = st_metadata(r, &j);
    } else if (!(st = st_add(r, name))) {
      st = st_entry(r, &j, &r->f->t[r->f->n - 1]);
    }
  } while (!st && js_lit(&j, ','));
  return st;
}

static int st_cmp_name(const void *a, const void *b) {
  return strcmp(((const bcrt_st_tensor *)a)->name, ((const bcrt_st_tensor *)b)->name);
}

static int st_cmp_begin(const void *a, const void *b) {
  const bcrt_st_tensor *x = *(const bcrt_st_tensor *const *)a, *y = *(const bcrt_st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Sorted by name (for bcrt_st_find): a name given twice is an error. */
static int st_unique(st_reader *r) {
  bcrt_st_file *f = r->f;
  char k[256];
  if (f->n > 1) qsort(f->t, (size_t)f->n, sizeof *f->t, st_cmp_name);
  for (int i = 1; i < f->n; i++)
    if (!strcmp(f->t[i - 1].name, f->t[i].name))
      return ST_BAD(r, BCRT_ERR_DUPLICATE, f->t[i].name, "tensor '%s' appears more than once in the header",
                    esc(f->t[i].name, k, sizeof k));
  return BCRT_OK;
}

/* The data section is tiled exactly, as the reference implementation
 * requires: sorted by offset, each tensor begins where the previous one
 * ended (shared bytes would alias two tensors; a gap or a tail is data
 * nobody reads), and the last one ends at the end of the file. */
static int st_tiling(st_reader *r) {
  bcrt_st_file *f = r->f;
  const bcrt_st_tensor **by = malloc((size_t)(f->n ? f->n : 1) * sizeof *by);
  if (!by) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (int i = 0; i < f->n; i++) by[i] = &f->t[i];
  qsort(by, (size_t)f->n, sizeof *by, st_cmp_begin);
  unsigned long long at = 0, base = f->data_off;
  const bcrt_st_tensor *prev = NULL;
  int st = BCRT_OK;
  char a[256], b[256];
  for (int i = 0; i < f->n && !st; i++) {
    const bcrt_st_tensor *t = by[i];
    if (t->begin < at)
      st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_OVERLAP, t->name, base + t->begin,
                "tensors '%s' (data_offsets [%llu, %llu]) and '%s' (data_offsets [%llu, %llu]) overlap",
                esc(prev->name, a, sizeof a), prev->begin, prev->end, esc(t->name, b, sizeof b), t->begin, t->end);
    else if (t->begin > at)
      st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_GAP, t->name, base + at,
                "bytes [%llu, %llu) of the data section belong to no tensor (before '%s'); safetensors "
                "files have no gaps", at, t->begin, esc(t->name, a, sizeof a));
    at = t->end;
    prev = t;
  }
  free(by);
  if (!st && at != f->data_len)
    st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_TRAILING, NULL, base + at,
              "%llu bytes after the last tensor (the data section is %llu bytes, the tensors end at "
              "%llu); safetensors files have no trailing data", f->data_len - at, f->data_len, at);
  return st;
}

/* The header text, as a whole: encoding, lexical rules, grammar, then the
 * entries, the numbers, the names and the tiling. */
static int st_check_header(st_reader *r) {
  const char *h = r->hdr;
  size_t n = r->hn, at = 0;
  char ex[32];
  long bad = bad_utf8((const unsigned char *)h, n);
  if (bad >= 0)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_UTF8, NULL, 8 + (unsigned long long)bad,
                "header is not valid UTF-8 (byte %ld of the header)", bad);
  const char *lex = lexical_problem(h, n, &at);
  if (lex)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + at, "header has %s (byte %lu of the header)",
                lex, (unsigned long)at);
  json j = {h, h, h + n, 0, NULL};
  int ok = js_value(&j);
  at = (size_t)(j.p - h);
  if (!ok)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + at, "header is not valid JSON (at byte %lu "
                "of the header: '%s')", (unsigned long)at, excerpt(j.p, h + n, ex, sizeof ex));
  js_ws(&j);
  if (j.p < j.end)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + (unsigned long long)(j.p - h),
                "header has data after the JSON value (at byte %lu: '%s')", (unsigned long)(j.p - h),
                excerpt(j.p, h + n, ex, sizeof ex));
  int st = st_entries(r);
  if (!st && j.badnum)
    st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_NUMBER, NULL, 8 + (unsigned long long)(j.badnum - h),
              "header has a number that is not a plain non-negative integer (at byte %lu of the header: '%s')",
              (unsigned long)(j.badnum - h), excerpt(j.badnum, h + n, ex, sizeof ex));
  if (!st) st = st_unique(r);
  if (!st) st = st_tiling(r);
  return st;
}

/* The 8-byte length and the header text (malloc'ed, NUL-terminated). */
static int st_read_header(st_reader *r, char **hdr) {
  const bcrt_source *s = &r->f->src;
  unsigned char len8[8];
  unsigned long long n = 0;
  if (s->size > ST_MAX_FILE)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_SIZE, NULL, 0, "file is %llu bytes, over the limit of %llu",
                s->size, ST_MAX_FILE);
  if (s->size < 8)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_SIZE, NULL, 0, "file is %llu bytes, too short for a "
                "safetensors header (at least 8)", s->size);
  if (!src_read(s, 0, len8, 8)) return rd_fail(r->e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "read failed");
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  if (n > ST_MAX_HEADER)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 0, "header length %llu is over the limit of %llu "
                "bytes (not a safetensors file?)", n, ST_MAX_HEADER);
  if (n > s->size - 8)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 0, "header length %llu runs past the end of the "
                "file (%llu bytes follow the length field)", n, s->size - 8);
  if (!(*hdr = malloc((size_t)n + 1))) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  if (!src_read(s, 8, *hdr, (size_t)n)) return rd_fail(r->e, BCRT_EIO, BCRT_ERR_IO, NULL, 8, "read failed");
  (*hdr)[n] = '\0';
  r->hn = (size_t)n;
  r->f->data_off = 8 + n;
  r->f->data_len = s->size - 8 - n;
  return BCRT_OK;
}

int bcrt_st_open_source(const bcrt_source *src, bcrt_st_file **out, bcrt_error *e) {
  err_clear(e);
  if (out) *out = NULL;
  if (!src || !src->read || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  bcrt_st_file *f = calloc(1, sizeof *f);
  if (!f) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  f->src = *src;
  char *hdr = NULL;
  st_reader r = {f, NULL, 0, e};
  bcrt_error local;
  if (!e) r.e = &local, err_clear(&local);
  int st = st_read_header(&r, &hdr);
  r.hdr = hdr;
  if (!st) st = st_check_header(&r);
  free(hdr);
  if (st) {
    bcrt_st_close(f);
    return st;
  }
  *out = f;
  return BCRT_OK;
}

int bcrt_st_open(const char *path, bcrt_st_file **out, bcrt_error *e) {
  err_clear(e);
  if (out) *out = NULL;
  if (!path || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  bcrt_source src;
  FILE *fp = open_source(path, &src, e);
  if (!fp) return e ? e->status : BCRT_EIO;
  int st = bcrt_st_open_source(&src, out, e);
  if (st) fclose(fp);
  else (*out)->own = fp;
  return st;
}

static float f16_to_f32(unsigned h) {
  unsigned sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man) { /* subnormal: normalise */
    int e = -1;
    do e++, man <<= 1; while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  } else {
    bits = sign;
  }
  return float_of(bits);
}

/* A chunk at a time, so no second copy of a big tensor is needed. */
int bcrt_st_read_f32(const bcrt_st_file *f, const bcrt_st_tensor *t, float *dst, bcrt_error *e) {
  err_clear(e);
  if (!f || !t || (!dst && t->end > t->begin)) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  char k[256];
  int f32 = !strcmp(t->dtype, "F32"), bf = !strcmp(t->dtype, "BF16");
  if (!f32 && !bf && strcmp(t->dtype, "F16"))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_DTYPE, t->name, 0, "tensor '%s': dtype %s is not supported "
                "(expected F32, F16 or BF16)", esc(t->name, k, sizeof k), t->dtype);
  size_t es = (size_t)t->esize;
  unsigned long long n = (t->end - t->begin) / es, off = f->data_off + t->begin;
  unsigned char buf[1 << 15];
  for (unsigned long long done = 0; done < n;) {
    size_t c = n - done < sizeof buf / es ? (size_t)(n - done) : sizeof buf / es;
    if (!src_read(&f->src, off + done * es, buf, c * es))
      return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, t->name, off + done * es, "read failed in tensor '%s' (file "
                  "truncated while open?)", esc(t->name, k, sizeof k));
    for (size_t i = 0; i < c; i++) {
      const unsigned char *q = buf + i * es;
      unsigned h = (unsigned)q[0] | (unsigned)q[1] << 8;
      dst[done + i] = f32 ? float_of((uint32_t)h | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24)
                      : bf ? float_of((uint32_t)h << 16) : f16_to_f32(h);
    }
    done += c;
  }
  return BCRT_OK;
}

/* "(2, 3)", "(5,)", "()": a shape as Python prints it. */
static const char *tuple_str(int rank, const unsigned long long *ull, const long *l, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %llu" : "%llu", ull ? ull[i] : (unsigned long long)l[i]);
  if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
  return buf;
}

/* Checks one param against its tensor (NULL: missing); appends a line and
 * returns 0 if unusable. */
static int st_check(const bcrt_param_info *p, const bcrt_st_tensor *t, char *err, unsigned long errlen) {
  char line[1024], a[256], b[256], k[256];
  esc(p->name, k, sizeof k);
  if (!t) {
    snprintf(line, sizeof line, "missing tensor '%s' (expected shape %s)", k, tuple_str(p->rank, NULL, p->shape, a, sizeof a));
    add_err(err, errlen, line);
    return 0;
  }
  int ok = 1;
  if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F16") && strcmp(t->dtype, "BF16")) {
    snprintf(line, sizeof line, "tensor '%s' has dtype %s, expected F32, F16 or BF16", k, t->dtype);
    add_err(err, errlen, line);
    ok = 0;
  }
  int same = t->rank == p->rank;
  for (int i = 0; same && i < p->rank; i++) same = t->shape[i] == (unsigned long long)p->shape[i];
  if (!same) {
    snprintf(line, sizeof line, "tensor '%s' has shape %s, expected %s", k, tuple_str(t->rank, t->shape, NULL, a, sizeof a),
             tuple_str(p->rank, NULL, p->shape, b, sizeof b));
    add_err(err, errlen, line);
    ok = 0;
  }
  return ok;
}

/* Tensors of the file no param asked for: a checkpoint of another model
 * (what blockc rejects without --allow-extra).  The first few are named. */
static int st_extras(const bcrt_st_file *f, const unsigned char *used, int nparams, char *err,
                     unsigned long errlen) {
  int extras = 0;
  char line[1024], a[256], k[256];
  for (int i = 0; i < f->n; i++) {
    if (used[i] || ++extras > REPORT_MAX) continue;
    snprintf(line, sizeof line, "unexpected tensor '%s' %s (not one of the model's %d parameters)",
             esc(f->t[i].name, k, sizeof k), tuple_str(f->t[i].rank, f->t[i].shape, NULL, a, sizeof a), nparams);
    add_err(err, errlen, line);
  }
  if (extras > REPORT_MAX) {
    snprintf(line, sizeof line, "... %d unexpected tensors in all (the first %d are listed)", extras, REPORT_MAX);
    add_err(err, errlen, line);
  }
  return extras;
}

/* Every param's tensor into one block, checked finite. */
static int st_read_all(const char *path, const bcrt_st_file *f, const bcrt_param_info *params, int nparams,
                       const bcrt_st_tensor **match, const float **slots, float *block, char *err,
                       unsigned long errlen) {
  float *dst = block;
  bcrt_error e;
  char k[256];
  for (int i = 0; i < nparams; i++) {
    size_t numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (size_t)params[i].shape[d];
    if (bcrt_st_read_f32(f, match[i], dst, &e)) return report(path, &e, err, errlen);
    /* NaN/Inf in weights means a broken export; say which tensor. */
    for (size_t j = 0; j < numel; j++)
      if (!isfinite(dst[j])) {
        if (err && errlen)
          snprintf(err, (size_t)errlen, "%s: tensor '%s' has a non-finite value at flat index %lu", path,
                   esc(params[i].name, k, sizeof k), (unsigned long)j);
        return BCRT_EFORMAT;
      }
    slots[i] = dst;
    dst += numel;
  }
  return BCRT_OK;
}

/* Matches params to tensors, reporting every problem; then reads them. */
static int st_bind(const char *path, const bcrt_st_file *f, const bcrt_param_info *params, int nparams,
                   const float **slots, void **storage, char *err, unsigned long errlen) {
  const bcrt_st_tensor **match = calloc((size_t)(nparams ? nparams : 1), sizeof *match);
  unsigned char *used = calloc((size_t)(f->n ? f->n : 1), 1);
  int st = BCRT_ENOMEM, bad = 0;
  unsigned long long total = 0;
  if (!match || !used) {
    set_err(err, errlen, "%s: out of memory%s", path, "");
    goto out;
  }
  for (int i = 0; i < nparams; i++) {
    match[i] = bcrt_st_find(f, params[i].name);
    if (match[i]) used[match[i] - f->t] = 1;
    if (!st_check(&params[i], match[i], err, errlen)) bad++;
    unsigned long long numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (unsigned long long)params[i].shape[d];
    total += numel;
  }
  int extras = st_extras(f, used, nparams, err, errlen);
  if (bad || extras) {
    char msg[1024];
    if (extras)
      snprintf(msg, sizeof msg, "%.900s: %d of %d tensors unusable, %d tensor%s in the file not used by "
               "the model (above)", path, bad, nparams, extras, extras == 1 ? "" : "s");
    else
      snprintf(msg, sizeof msg, "%.900s: %d of %d tensors unusable (above)", path, bad, nparams);
    add_err(err, errlen, msg);
    st = BCRT_EMISMATCH;
    goto out;
  }
  float *block = malloc((size_t)(total ? total : 1) * sizeof(float));
  if (!block) {
    set_err(err, errlen, "%s: out of memory for the weights%s", path, "");
    goto out;
  }
  st = st_read_all(path, f, params, nparams, match, slots, block, err, errlen);
  if (st) free(block);
  else *storage = block;
out:
  free(match);
  free(used);
  return st;
}

int bcrt_st_load(const char *path, const bcrt_param_info *params, int nparams,
                 const float **slots, void **storage, char *err, unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (storage) *storage = NULL;
  if (!path || !storage || nparams < 0 || (nparams && (!params || !slots))) {
    set_err(err, errlen, "bcrt_st_load: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  for (int i = 0; i < nparams; i++)
    if (!params[i].name || params[i].rank < 1 || params[i].rank > 4) {
      set_err(err, errlen, "bcrt_st_load: params[] entry %s%s is malformed", "", "");
      return BCRT_EINVAL;
    }
  for (int i = 0; i < nparams; i++) slots[i] = NULL;
  bcrt_error e;
  bcrt_st_file *f;
  int st = bcrt_st_open(path, &f, &e);
  if (st) return report(path, &e, err, errlen);
  st = st_bind(path, f, params, nparams, slots, storage, err, errlen);
  bcrt_st_close(f);
  if (st)
    for (int i = 0; i < nparams; i++) slots[i] = NULL;
  return st;
}

void bcrt_st_free(void *storage) { free(storage); }

/* --- .npy --------------------------------------------------------------------- */

/* The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed by a small recursive-descent reader for just the literals numpy
 * writes (strings without escapes, True/False, tuples of integers), so key
 * order, spacing and trailing commas do not matter. */
typedef struct {
  char descr[32];
  int fortran, rank;            /* rank may exceed the limit; checked after */
  unsigned long long d[NPY_MAX_DIMS];
  int has_descr, has_fortran, has_shape;
} npy_dict;

typedef struct {
  json j;                    /* the JSON reader's cursor: the same whitespace and literals */
  bcrt_error *e;
} npy_parser;

/* An error at the parser's position, quoting the header. */
static int hp_error(npy_parser *h, const char *what) {
  char quoted[81];
  size_t k = 0;
  for (const char *q = h->j.s; q < h->j.end && k + 1 < sizeof quoted; q++)
    quoted[k++] = (*q >= 32 && *q < 127) ? *q : ' ';
  quoted[k] = '\0';
  return rd_fail(h->e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "bad .npy header at column %d: %s\n  header: %s",
              (int)(h->j.p - h->j.s) + 1, what, quoted);
}

/* A string literal in ' or " quotes, without escapes. */
static int hp_string(npy_parser *h, char *out, size_t n) {
  js_ws(&h->j);
  if (h->j.p >= h->j.end || (*h->j.p != '\'' && *h->j.p != '"')) return hp_error(h, "expected a string");
  char q = *h->j.p++;
  size_t k = 0;
  while (h->j.p < h->j.end && *h->j.p != q) {
    if (*h->j.p == '\\' || *h->j.p == '\n') return hp_error(h, "unsupported character in string");
    if (k + 1 >= n) return hp_error(h, "string is too long");
    out[k++] = *h->j.p++;
  }
  if (h->j.p >= h->j.end) return hp_error(h, "unterminated string");
  h->j.p++;
  out[k] = '\0';
  return BCRT_OK;
}

static int hp_word(npy_parser *h, const char *w) {
  size_t n = strlen(w);
  js_ws(&h->j);
  if ((size_t)(h->j.end - h->j.p) >= n && memcmp(h->j.p, w, n) == 0) {
    h->j.p += n;
    return 1;
  }
  return 0;
}

/* A non-negative integer (Python 2 era files may write "3L"), clamped at
 * 2^62 so the limit checks report it. */
static int hp_int(npy_parser *h, unsigned long long *out) {
  js_ws(&h->j);
  if (h->j.p >= h->j.end || *h->j.p < '0' || *h->j.p > '9') return hp_error(h, "expected a non-negative integer");
  unsigned long long v = 0;
  while (h->j.p < h->j.end && *h->j.p >= '0' && *h->j.p <= '9') {
    v = v * 10 + (unsigned long long)(*h->j.p++ - '0');
    if (v > (1ull << 62)) v = 1ull << 62;
  }
  if (h->j.p < h->j.end && *h->j.p == 'L') h->j.p++;
  *out = v;
  return BCRT_OK;
}

/* (), (5,), (2, 3) and (2, 3,). */
static int hp_shape(npy_parser *h, npy_dict *hd) {
  if (!js_lit(&h->j, '(')) return hp_error(h, "expected '(' to start the shape tuple");
  hd->rank = 0;
  while (!js_lit(&h->j, ')')) {
    if (hd->rank >= NPY_MAX_DIMS) return hp_error(h, "shape has too many dimensions");
    int st = hp_int(h, &hd->d[hd->rank++]);
    if (st) return st;
    if (!js_lit(&h->j, ',')) {
      if (!js_lit(&h->j, ')')) return hp_error(h, "expected ',' or ')' in the shape tuple");
      break;
    }
  }
  return BCRT_OK;
}

static int hp_entry(npy_parser *h, npy_dict *hd) {
  char key[32];
  int st = hp_string(h, key, sizeof key);
  if (st) return st;
  if (!js_lit(&h->j, ':')) return hp_error(h, "expected ':' after the key");
  int *seen = !strcmp(key, "descr") ? &hd->has_descr : !strcmp(key, "fortran_order") ? &hd->has_fortran
            : !strcmp(key, "shape") ? &hd->has_shape : NULL;
  if (!seen) {
    char msg[256], k[160];
    snprintf(msg, sizeof msg, "unexpected key '%s' (expected 'descr', 'fortran_order', 'shape')",
             esc(key, k, sizeof k));
    return hp_error(h, msg);
  }
  if (*seen) return hp_error(h, "key appears twice");
  *seen = 1;
  if (seen == &hd->has_fortran) {
    if (hp_word(h, "True")) hd->fortran = 1;
    else if (!hp_word(h, "False")) return hp_error(h, "expected True or False");
    return BCRT_OK;
  }
  if (seen == &hd->has_shape) return hp_shape(h, hd);
  js_ws(&h->j);
  if (h->j.p < h->j.end && *h->j.p == '[')
    return rd_fail(h->e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "the array has a structured dtype (a record "
                "type); expected plain '<f4' (float32)");
  return hp_string(h, hd->descr, sizeof hd->descr);
}

static int npy_parse_dict(const char *text, size_t n, npy_dict *hd, bcrt_error *e) {
  npy_parser h = {{text, text, text + n, 0, NULL}, e};
  memset(hd, 0, sizeof *hd);
  if (!js_lit(&h.j, '{')) return hp_error(&h, "expected '{'");
  while (!js_lit(&h.j, '}')) {
    int st = hp_entry(&h, hd);
    if (st) return st;
    if (!js_lit(&h.j, ',')) {
      if (!js_lit(&h.j, '}')) return hp_error(&h, "expected ',' or '}'");
      break;
    }
  }
  js_ws(&h.j);
  if (h.j.p < h.j.end) return hp_error(&h, "unexpected text after the dict");
  const char *missing = !hd->has_descr ? "descr" : !hd->has_fortran ? "fortran_order" : !hd->has_shape ? "shape" : NULL;
  if (missing) {
    char msg[64];
    snprintf(msg, sizeof msg, "the key '%s' is missing", missing);
    return hp_error(&h, msg);
  }
  return BCRT_OK;
}

/* "big-endian float32", "float64", "int64", ... for a numpy descr string. */
static const char *describe_descr(const char *descr, char *buf, size_t n) {
  const char *order = *descr == '>' ? "big-endian " : *descr == '=' ? "native-order " : "";
  const char *p = descr + (*descr && strchr("<>=|", *descr) ? 1 : 0);
  char kind = *p ? *p++ : '?';
  int bytes = 0;  /* the item size as numpy writes it; longer or larger is "unknown" */
  for (int k = 0; p[k] >= '0' && p[k] <= '9'; k++)
    if ((bytes = bytes * 10 + (p[k] - '0')) > 1024) {
      bytes = 0;
      break;
    }
  const char *name = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : kind == 'c' ? "complex" : NULL;
  if (name && bytes > 0) snprintf(buf, n, "%s%s%d", order, name, bytes * 8);
  else if (kind == 'b') snprintf(buf, n, "bool");
  else if (kind == 'U') snprintf(buf, n, "unicode string");
  else if (kind == 'S' || kind == 'a') snprintf(buf, n, "bytes");
  else if (kind == 'O') snprintf(buf, n, "Python objects");
  else if (kind == 'M' || kind == 'm') snprintf(buf, n, "datetime/timedelta");
  else if (kind == 'V') snprintf(buf, n, "raw void records");
  else snprintf(buf, n, "unknown dtype");
  return buf;
}

static int npy_check_dtype(const npy_dict *hd, int type, bcrt_error *e) {
  char what[64], d[160];
  describe_descr(hd->descr, what, sizeof what);
  esc(hd->descr, d, sizeof d);
  if (type == BCRT_NPY_INT && strcmp(hd->descr, "<i4") && strcmp(hd->descr, "<i8"))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "dtype '%s' (%s) is not supported for lengths; "
                "expected '<i4' or '<i8' (little-endian int32 or int64); convert with x.astype(np.int32)", d, what);
  if (type == BCRT_NPY_F32 && strcmp(hd->descr, "<f4")) {
    int f4 = !strcmp(hd->descr + (hd->descr[0] ? 1 : 0), "f4");
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "dtype '%s' (%s) is not supported; expected "
                "'<f4' (little-endian float32); convert with x.astype(%s)", d, what, f4 ? "'<f4'" : "np.float32");
  }
  return BCRT_OK;
}

/* Order, rank and sizes within the limits. */
static int npy_check_shape(const npy_dict *hd, const bcrt_npy_limits *lim, bcrt_error *e) {
  char s[256];
  if (hd->fortran)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_ORDER, NULL, 0, "fortran_order is True; save a C-ordered "
                "array (np.ascontiguousarray)");
  if (hd->rank == 0)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape () is a scalar; expected an array of "
                "rank 1 to %d", lim->max_rank);
  tuple_str(hd->rank, hd->d, NULL, s, sizeof s);
  if (hd->rank > lim->max_rank)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s: rank %d is over the limit of %d", s,
                hd->rank, lim->max_rank);
  unsigned long long numel = 1;
  for (int i = 0; i < hd->rank; i++) {
    if (hd->d[i] > (unsigned long long)lim->max_dim)
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s: dimension %d is over the limit of %ld",
                  s, i, lim->max_dim);
    /* Checked before the product, which could wrap (2^34 * 2^30 is 0). */
    if (hd->d[i] && numel > (unsigned long long)lim->max_elems / hd->d[i])
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s has more than %lld elements", s,
                  lim->max_elems);
    numel *= hd->d[i];
  }
  return BCRT_OK;
}

/* The magic, version and header length: info->data_offset is set to the
 * first byte after the header; *hlen to its length. */
static int npy_prefix(const bcrt_source *s, bcrt_npy_info *info, unsigned long *hlen, bcrt_error *e) {
  unsigned char b[12];
  unsigned long long pre = 10;
  if (s->size < 6 || !src_read(s, 0, b, 6) || memcmp(b, "\x93NUMPY", 6))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_MAGIC, NULL, 0, "not a .npy file (it does not start with \"\\x93NUMPY\")");
  if (s->size < 10 || !src_read(s, 6, b + 6, 4))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "truncated .npy header (file is %llu bytes)", s->size);
  if (b[7] != 0 || b[6] < 1 || b[6] > 3)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_VERSION, NULL, 6, ".npy format version %d.%d is not supported "
                "(expected 1.0, 2.0 or 3.0)", b[6], b[7]);
  *hlen = (unsigned long)b[8] | (unsigned long)b[9] << 8;
  if (b[6] > 1) {
    if (s->size < 12 || !src_read(s, 10, b + 10, 2))
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "truncated .npy header (file is %llu bytes)", s->size);
    *hlen |= (unsigned long)b[10] << 16 | (unsigned long)b[11] << 24;
    pre = 12;
  }
  if (*hlen > NPY_MAX_HEADER)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 8, ".npy header length %lu is over the limit of %lu "
                "bytes", *hlen, NPY_MAX_HEADER);
  if (pre + *hlen > s->size)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 8, "truncated .npy header: it claims %lu bytes but "
                "only %llu follow", *hlen, s->size - pre);
  info->data_offset = pre + *hlen;
  return BCRT_OK;
}

int bcrt_npy_open_source(const bcrt_source *src, int type, const bcrt_npy_limits *lim,
                         bcrt_npy_info *info, bcrt_error *e) {
  static const bcrt_npy_limits defaults = {BCRT_NPY_MAX_RANK, 0x7fffffffL, 1LL << 40};
  err_clear(e);
  if (!src || !src->read || !info || (type != BCRT_NPY_F32 && type != BCRT_NPY_INT))
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  if (!lim) lim = &defaults;
  if (lim->max_rank < 1 || lim->max_rank > BCRT_NPY_MAX_RANK)
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad limits");
  memset(info, 0, sizeof *info);
  unsigned long hlen = 0;
  int st = npy_prefix(src, info, &hlen, e);
  if (st) return st;
  char *text = malloc((size_t)hlen + 1);
  if (!text) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  npy_dict hd;
  if (!src_read(src, info->data_offset - hlen, text, hlen)) st = rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "read failed");
  if (!st) st = npy_parse_dict(text, hlen, &hd, e);
  free(text);
  if (!st) st = npy_check_dtype(&hd, type, e);
  if (!st) st = npy_check_shape(&hd, lim, e);
  if (st) return st;
  info->type = type;
  info->esize = type == BCRT_NPY_F32 ? 4 : hd.descr[2] - '0';  /* '<i4' / '<i8' */
  info->rank = hd.rank;
  for (int i = 0; i < hd.rank; i++) info->shape[i] = (long)hd.d[i];
  return BCRT_OK;
}

/* Element i of raw (esize 4 or 8 bytes, little-endian), sign-extended. */
static long long npy_int_at(const unsigned char *raw, int esize, size_t i) {
  unsigned long long u = 0;
  for (int b = esize - 1; b >= 0; b--) u = u << 8 | raw[i * (size_t)esize + (size_t)b];
  if (esize == 4) return (long long)(int32_t)(uint32_t)u;
  return (long long)(int64_t)u;  /* two's complement, as on every host C99 runs on */
}

/* numel elements from off into dst (floats, or ints narrowed with a range
 * check), a chunk at a time. */
static int npy_read_data(const bcrt_source *src, const bcrt_npy_info *info, size_t numel, void *dst, bcrt_error *e) {
  unsigned char buf[1 << 15];
  size_t es = (size_t)info->esize;
  for (size_t done = 0; done < numel;) {
    size_t c = numel - done < sizeof buf / es ? numel - done : sizeof buf / es;
    unsigned long long off = info->data_offset + done * es;
    if (!src_read(src, off, buf, c * es)) return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, off, "read failed");
    if (info->type == BCRT_NPY_F32) {
      memcpy((float *)dst + done, buf, c * 4);
      if (!host_le()) swap32((float *)dst + done, c);
    }
    for (size_t i = 0; info->type == BCRT_NPY_INT && i < c; i++) {
      long long v = npy_int_at(buf, (int)es, i);
      if (v < INT32_MIN || v > INT32_MAX)
        return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_RANGE, NULL, off + i * es, "element %lu is %lld, outside the "
                    "int32 range", (unsigned long)(done + i), v);
      ((int32_t *)dst)[done + i] = (int32_t)v;
    }
    done += c;
  }
  return BCRT_OK;
}

int bcrt_npy_read_source(const bcrt_source *src, const bcrt_npy_info *info, void **data, bcrt_error *e) {
  err_clear(e);
  if (data) *data = NULL;
  if (!src || !src->read || !info || !data || info->rank < 1 || info->rank > BCRT_NPY_MAX_RANK)
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  unsigned long long numel = 1, have = src->size - info->data_offset;
  for (int i = 0; i < info->rank; i++) numel *= (unsigned long long)info->shape[i];
  unsigned long long need = numel * (unsigned long long)info->esize;
  char s[256];
  if (have != need) {
    tuple_str(info->rank, NULL, info->shape, s, sizeof s);
    if (have > need)
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DATA, NULL, info->data_offset + need, "shape %s needs %llu bytes "
                  "of data but the file has %llu (%llu extra bytes at the end)", s, need, have, have - need);
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DATA, NULL, src->size, "shape %s needs %llu bytes of data but "
                "the file has %llu", s, need, have);
  }
  void *p = malloc(numel ? (size_t)numel * 4 : 4);  /* floats or int32 */
  if (!p) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory reading %llu bytes", need);
  int st = npy_read_data(src, info, (size_t)numel, p, e);
  if (st) free(p);
  else *data = p;
  return st;
}

/* The path functions' common part: the arguments, then open, header, data
 * (lengths: rank 1 only); "path: reason" into err on failure. */
static int npy_read_path(const char *path, int type, int args_ok, const char *fn, bcrt_npy_info *info,
                         void **data, char *err, unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  *data = NULL;
  if (!path || !args_ok) {
    set_err(err, errlen, "%s: bad arguments%s", fn, "");
    return BCRT_EINVAL;
  }
  bcrt_error e;
  bcrt_source src;
  err_clear(&e);
  FILE *f = open_source(path, &src, &e);
  int st = f ? bcrt_npy_open_source(&src, type, NULL, info, &e) : e.status;
  if (!st && type == BCRT_NPY_INT && info->rank != 1)
    st = rd_fail(&e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "lengths must be a rank-1 array (one per batch row)");
  if (!st) st = bcrt_npy_read_source(&src, info, data, &e);
  if (f) fclose(f);
  return st ? report(path, &e, err, errlen) : BCRT_OK;
}

int bcrt_npy_read(const char *path, float **data, long *shape, int *rank, char *err,
                  unsigned long errlen) {
  bcrt_npy_info info;
  void *p;
  if (data) *data = NULL;
  int st = npy_read_path(path, BCRT_NPY_F32, data && shape && rank, "bcrt_npy_read", &info, &p, err, errlen);
  if (st) return st;
  *data = p;
  *rank = info.rank;
  for (int i = 0; i < info.rank; i++) shape[i] = info.shape[i];
  return BCRT_OK;
}

int bcrt_npy_read_i32(const char *path, int **data, long *n, char *err, unsigned long errlen) {
  bcrt_npy_info info;
  void *p;
  if (data) *data = NULL;
  int st = npy_read_path(path, BCRT_NPY_INT, data && n, "bcrt_npy_read_i32", &info, &p, err, errlen);
  if (st) return st;
  *data = p;
  *n = info.shape[0];
  return BCRT_OK;
}

int bcrt_npy_write(const char *path, const float *data, const long *shape, int rank, char *err,
                   unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || (!data && rank) || (!shape && rank) || rank < 0 || rank > BCRT_NPY_MAX_RANK) {
    set_err(err, errlen, "bcrt_npy_write: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  char dict[512];
  size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  size_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) {
      set_err(err, errlen, "bcrt_npy_write: negative dimension%s%s", "", "");
      return BCRT_EINVAL;
    }
    numel *= (size_t)shape[i];
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%ld%s", shape[i],
                          rank == 1 ? "," : i + 1 < rank ? ", " : "");
  }
  n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
  /* Version 1.0: 10-byte preamble; pad with spaces and a newline so the
   * data starts 64-byte aligned, as numpy does. */
  size_t total = (10 + n + 1 + 63) / 64 * 64, hlen = total - 10;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  memset(dict + n, ' ', hlen - n - 1);
  dict[hlen - 1] = '\n';
  /* The temp file: a short name in path's directory (path + ".tmp" would
   * overflow NAME_MAX for a 252-byte file name), opened exclusively (C11
   * "x") with a fresh suffix per try, so a stale temp never blocks. */
  size_t plen = strlen(path), dlen = plen;
  while (dlen > 0 && path[dlen - 1] != '/' && path[dlen - 1] != '\\') dlen--;
  char *tmp = malloc(dlen + 32);
  if (!tmp) {
    set_err(err, errlen, "%s: out of memory%s", path, "");
    return BCRT_ENOMEM;
  }
  FILE *f = NULL;
  unsigned long seed = (unsigned long)time(NULL) ^ (unsigned long)clock() ^ (unsigned long)(uintptr_t)&f;
  for (int tries = 0; tries < 64 && !f; tries++) {
    seed = seed * 6364136223846793005ul + 1442695040888963407ul;
    memcpy(tmp, path, dlen);
    snprintf(tmp + dlen, 32, ".bcrt-%08lx.tmp", (seed >> 16) & 0xfffffffful);
    f = fopen(tmp, "wbx");
  }
  if (!f) {
    set_err(err, errlen, "%s: cannot create a temporary file next to it: %s", path, strerror(errno));
    free(tmp);
    return BCRT_EIO;
  }
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, hlen, f) == hlen;
  if (host_le()) {
    ok = ok && fwrite(data, 4, numel, f) == numel;
  } else {
    for (size_t i = 0; ok && i < numel; i++) {
      float v = data[i];
      swap32(&v, 1);
      ok = fwrite(&v, 4, 1, f) == 1;
    }
  }
  ok = fclose(f) == 0 && ok;
  ok = ok && rename(tmp, path) == 0;
#ifdef _WIN32
  /* Windows' rename() refuses to replace a file: remove it first, giving up
   * atomicity only there. */
  if (!ok) ok = remove(path) == 0 && rename(tmp, path) == 0;
#endif
  if (!ok) {
    set_err(err, errlen, "%s: write failed: %s", path, strerror(errno));
    remove(tmp);
  }
  free(tmp);
  return ok ? BCRT_OK : BCRT_EIO;
}

/* --- issue 11: small-M and portable GEMM --- */
/* Two matrix products in plain C that gcc and clang vectorise:
 *
 *   bcrt_gemm_small  y = x W^T (+ bias) for few rows (decoding, small
 *     batches).  W is repacked once (bcrt_pack_nt) into panels of
 *     BCRT_PACK_NR output rows interleaved along k, so each panel is one
 *     contiguous stream and the inner loop is "broadcast x[i,k], FMA a
 *     row of the panel": every weight is read from memory once per call.
 *     Weights may be BF16 (half the bytes); above 32 rows the packed
 *     panels feed bcrt_sgemm's blocked loop instead.
 *   bcrt_sgemm  the general product, BLIS-style: op(A) packed a block of
 *     GM_MC x GM_KC at a time into micro-panels of GM_MR rows, op(B) a
 *     GM_KC x GM_NR micro-panel at a time; a GM_MR x GM_NR register tile
 *     accumulates in a local array the compiler keeps in vector registers.
 *     The -DBLOCKC_NO_BLAS cblas_sgemm above is a thin wrapper over it.
 *
 * Both micro-kernels are "acc[r][j] = fma(a[r], b[j], acc[r][j])" over
 * small constant bounds; after inlining with a constant row count gcc and
 * clang unroll them into straight FMA sequences on registers.  gcc prefers
 * 256-bit vectors on AVX-512 machines; the pragma below asks for 512-bit
 * ones here (measured 1.4-2x faster on these loops); clang keeps 256.
 * Without FMA hardware MADD is a multiply and an add: slower, same code. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC push_options
#pragma GCC target("prefer-vector-width=512")
#endif

/* Rows per register tile, from the vector registers the compiler will use:
 * the tile is GK_MR x 32 floats of accumulators, and must fit with room
 * for the loads (512-bit: 16 of 32 registers; clang keeps 256-bit vectors
 * even with AVX-512, 32 registers: 24; AVX2, 16 registers of 256 bits: 12;
 * SSE, 16 of 128 bits: 8). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define GK_MR 8
#elif defined(__AVX512F__)
#define GK_MR 6
#elif defined(__AVX__)
#define GK_MR 3
#else
#define GK_MR 1
#endif

/* POSIX threads for bcrt_gemm_small_mt; elsewhere (or with
 * -DBLOCKC_NO_THREADS) it runs its parts one after the other. */
#if !defined(BLOCKC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#include <pthread.h>
#define GK_THREADS 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GK_INLINE static inline __attribute__((always_inline))
/* Integer arithmetic: the address may lie past the end of the panel (a
 * prefetch never faults), and pointer arithmetic there would be UB. */
#define GK_PREFETCH(p, off) __builtin_prefetch((const void *)((uintptr_t)(p) + (off)))
#define GK_PREFETCH_L2(p, off) __builtin_prefetch((const void *)((uintptr_t)(p) + (off)), 0, 2)
#else
#define GK_INLINE static inline
#define GK_PREFETCH(p, off) ((void)0)
#define GK_PREFETCH_L2(p, off) ((void)0)
#endif

/* Small-M tiling: SG_MR rows of x per register tile (with AVX-512 and gcc,
 * 8 x 32 floats = 16 512-bit accumulators).  m <= SG_MR: one pass over each panel, with a
 * prefetch SG_PF bytes ahead into L1 (measured: 2 KiB beat 1 and 4 KiB at
 * M = 8, neutral at M = 1).  m > SG_MR: k in chunks of SG_KC, so a
 * panel's chunk (32 KiB) stays in L1 while every row block reads it, and
 * the tiles prefetch the next panel's chunk into L2 meanwhile (M = 32 went
 * from 1.42-1.53x to 1.53-1.68x cblas with the prefetch; chunks of 128 and
 * an L1 hint were no better, best-of-60 timings). */
enum { SG_NR = BCRT_PACK_NR, SG_MR = GK_MR, SG_KC = 256, SG_PF = 2048 };

unsigned long bcrt_pack_nt_size(int n, int k) {
  if (n <= 0 || k <= 0) return 0;
  return (unsigned long)(((long)n + SG_NR - 1) / SG_NR) * SG_NR * (unsigned long)k;
}

void bcrt_pack_nt(int n, int k, const float *w, float *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    float *dst = packed + (size_t)p * SG_NR * (size_t)k;
    for (int j = 0; j < SG_NR; j++) {
      int row = p * SG_NR + j;
      const float *src = w + (size_t)row * (size_t)k;
      if (row < n)
        for (int kk = 0; kk < k; kk++) dst[(size_t)kk * SG_NR + j] = src[kk];
      else
        for (int kk = 0; kk < k; kk++) dst[(size_t)kk * SG_NR + j] = 0.0f;
    }
  }
}

void bcrt_pack_nn(int n, int k, const float *w, int ldw, float *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    float *dst = packed + (size_t)p * SG_NR * (size_t)k;
    int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
    for (int kk = 0; kk < k; kk++) {
      const float *src = w + (size_t)kk * (size_t)ldw + (size_t)j0;
      float *d = dst + (size_t)kk * SG_NR;
      for (int j = 0; j < SG_NR; j++) d[j] = j < nc ? src[j] : 0.0f;
    }
  }
}

/* One register tile: mr rows of x times kc steps of a panel w, then y (nc
 * valid columns) = acc + bias + beta*y, where beta == 0 means y is not read
 * (BLAS semantics) and bias may be NULL.  x is either rows in place (px ==
 * 0: x[r*ldx + kk]) or packed k-major (px == 1: x[kk*mr + r], one stream
 * of broadcasts).  w is float, or BF16 when bf (bcrt_gemm_small_bf16).
 * far != 0: prefetch into L2 `far` bytes ahead (the next panel), else into
 * L1 SG_PF bytes ahead. */
/* Weight i of a panel: float, or BF16 (the high half of a float). */
GK_INLINE float sg_w(const void *w, const int bf, size_t i) {
  if (bf) {
    uint32_t u = (uint32_t)((const unsigned short *)w)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  return ((const float *)w)[i];
}

GK_INLINE void sg_tile(const int mr, const int px, const int bf, int kc, const float *x,
                       size_t ldx, const void *w, const float *bias, float beta, float *y,
                       size_t ldy, int nc, size_t far) {
  float acc[SG_MR][SG_NR];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < SG_NR; j++) acc[r][j] = 0.0f;
  for (int kk = 0; kk < kc; kk++) {
    uintptr_t wk = (uintptr_t)w + (size_t)kk * SG_NR * (bf ? 2u : 4u);
    if (far) {
      GK_PREFETCH_L2(wk, far);
      if (!bf) GK_PREFETCH_L2(wk, far + 64);
    } else {
      GK_PREFETCH(wk, SG_PF);
      if (!bf) GK_PREFETCH(wk, SG_PF + 64);
    }
    for (int r = 0; r < mr; r++) {
      float xv = px ? x[(size_t)kk * (size_t)mr + (size_t)r] : x[(size_t)r * ldx + (size_t)kk];
      for (int j = 0; j < SG_NR; j++)
        acc[r][j] = MADD(xv, sg_w(w, bf, (size_t)kk * SG_NR + (size_t)j), acc[r][j]);
    }
  }
  for (int r = 0; r < mr; r++) {
    float *yr = y + (size_t)r * ldy;
    if (bias)
      for (int j = 0; j < nc; j++) acc[r][j] += bias[j];
    if (beta == 0.0f)
      for (int j = 0; j < nc; j++) yr[j] = acc[r][j];
    else if (beta == 1.0f)
      for (int j = 0; j < nc; j++) yr[j] += acc[r][j];
    else
      for (int j = 0; j < nc; j++) yr[j] = MADD(beta, yr[j], acc[r][j]);
  }
}

/* sg_tile with constant row count, x layout and weight type, so each copy
 * unrolls into straight vector code. */
#define SG_TILE_N(mr)                                                                      \
  static void sg_tile_##mr(int px, int bf, int kc, const float *x, size_t ldx,             \
                           const void *w, const float *bias, float beta, float *y,         \
                           size_t ldy, int nc, size_t far) {                               \
    if (bf) {                                                                              \
      if (px) sg_tile(mr, 1, 1, kc, x, ldx, w, bias, beta, y, ldy, nc, far);               \
      else sg_tile(mr, 0, 1, kc, x, ldx, w, bias, beta, y, ldy, nc, far);                  \
    } else {                                                                               \
      if (px) sg_tile(mr, 1, 0, kc, x, ldx, w, bias, beta, y, ldy, nc, far);               \
      else sg_tile(mr, 0, 0, kc, x, ldx, w, bias, beta, y, ldy, nc, far);                  \
    }                                                                                      \
  }
SG_TILE_N(1)
#if GK_MR >= 2
SG_TILE_N(2)
#endif
#if GK_MR >= 3
SG_TILE_N(3)
#endif
#if GK_MR >= 4
SG_TILE_N(4)
SG_TILE_N(5)
SG_TILE_N(6)
#endif
#if GK_MR >= 7
SG_TILE_N(7)
SG_TILE_N(8)
#endif

static void sg_tile_rows(int mr, int px, int bf, int kc, const float *x, size_t ldx,
                         const void *w, const float *bias, float beta, float *y, size_t ldy,
                         int nc, size_t far) {
  switch (mr) { /* 1 <= mr <= GK_MR */
#if GK_MR >= 2
  case 2: sg_tile_2(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 3
  case 3: sg_tile_3(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 4
  case 4: sg_tile_4(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 5: sg_tile_5(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 6: sg_tile_6(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 7
  case 7: sg_tile_7(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 8: sg_tile_8(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
  default: sg_tile_1(px, bf, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  }
}

/* m <= SG_MR: one tile per panel over all of k, x read in place; every
 * weight is touched once, the kernel runs at the memory stream. */
/* Element `off` of a packed panel array of floats (bf = 0) or BF16. */
static const void *sg_at(const void *packed, int bf, size_t off) {
  return (const char *)packed + off * (bf ? 2u : 4u);
}

static void sg_panels_few(int bf, int p0, int p1, int m, int n, int k, const float *x,
                          size_t ldx, const void *packed, const float *bias, float beta,
                          float *y, size_t ldy) {
  for (int p = p0; p < p1; p++) {
    int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
    sg_tile_rows(m, 0, bf, k, x, ldx, sg_at(packed, bf, (size_t)j0 * (size_t)k),
                 bias ? bias + j0 : NULL, beta, y + j0, ldy, nc, 0);
  }
}

/* m > SG_MR: rows in groups of up to mg_max; per group, k in chunks of
 * kc_max: the chunk of x is packed (k-major per row block) into SG_XP
 * floats (32 KiB) on the stack, then every panel's chunk (<= 32 KiB,
 * contiguous) is read once from memory and reused from L1 by all the
 * group's row blocks, while the next panel's chunk is prefetched into L2.
 * Up to SG_MG rows: one group, chunks of SG_KC.  Up to BCRT_SMALL_M rows
 * (bcrt_linear's range): still one group, so every weight is read once,
 * in chunks of SG_XP / BCRT_SMALL_M = 128 (no allocation, unlike the
 * blocked path; see docs/gemm-kernels.md for the measurement).  Row blocks
 * are balanced (m = 9 is 5 + 4, not 8 + 1). */
enum { SG_MG = 32, SG_XP = SG_MG * SG_KC };
typedef char sg_xp_fits_small_m[SG_XP % BCRT_SMALL_M == 0 && SG_XP / BCRT_SMALL_M >= 64 ? 1 : -1];

static void sg_pack_x(int mg, int rb, int kc, const float *x, size_t ldx, float *xp) {
  for (int i = 0; i < mg; i += rb) {
    int mr = mg - i < rb ? mg - i : rb;
    float *dst = xp + (size_t)i * (size_t)kc;
    for (int r = 0; r < mr; r++) {
      const float *src = x + (size_t)(i + r) * ldx;
      for (int kk = 0; kk < kc; kk++) dst[(size_t)kk * (size_t)mr + (size_t)r] = src[kk];
    }
  }
}

static void sg_panels_many(int bf, int p0, int p1, int m, int n, int k, const float *x,
                           size_t ldx, const void *packed, const float *bias, float beta,
                           float *y, size_t ldy) {
  float mem[SG_XP + 16];
  float *xp = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  size_t pstride = (size_t)SG_NR * (size_t)k; /* weights per panel */
  int mg_max = m <= SG_MG ? SG_MG : BCRT_SMALL_M, kc_max = SG_XP / mg_max;
  for (int i0 = 0; i0 < m; i0 += mg_max) {
    int mg = m - i0 < mg_max ? m - i0 : mg_max;
    int nb = (mg + SG_MR - 1) / SG_MR, rb = (mg + nb - 1) / nb;
    int k0 = 0;
    do {
      int kc = k - k0 < kc_max ? k - k0 : kc_max;
      sg_pack_x(mg, rb, kc, x + (size_t)i0 * ldx + (size_t)k0, ldx, xp);
      for (int p = p0; p < p1; p++) {
        int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
        const void *w = sg_at(packed, bf, (size_t)p * pstride + (size_t)k0 * SG_NR);
        for (int i = 0; i < mg; i += rb)
          sg_tile_rows(mg - i < rb ? mg - i : rb, 1, bf, kc, xp + (size_t)i * (size_t)kc, 0, w,
                       k0 ? NULL : bias ? bias + j0 : NULL, k0 ? 1.0f : beta,
                       y + (size_t)(i0 + i) * ldy + (size_t)j0, ldy, nc,
                       pstride * (bf ? 2u : 4u));
      }
      k0 += kc;
    } while (k0 < k);
  }
}

static int sg_blocked(int bf, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y,
                      size_t ldy);

/* Part `part` of `nparts` (a contiguous range of panels) of one call:
 * m <= 8 one pass, m <= BCRT_SMALL_M one row group over packed chunks of
 * x, more rows the blocked GEMM path (which allocates). */
static void sg_part(int bf, int part, int nparts, int m, int n, int k, const float *x, int ldx,
                    const void *packed, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0 || nparts < 1 || part < 0 || part >= nparts) return;
  long np = ((long)n + SG_NR - 1) / SG_NR;
  int p0 = (int)(np * part / nparts), p1 = (int)(np * (part + 1) / nparts);
  if (k < 0) k = 0;
  if (m <= SG_MR)
    sg_panels_few(bf, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy);
  else if (m <= BCRT_SMALL_M || k == 0 ||
           !sg_blocked(bf, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy))
    sg_panels_many(bf, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy);
}

void bcrt_gemm_small_part(int part, int nparts, int m, int n, int k, const float *x, int ldx,
                          const float *packed, const float *bias, float beta, float *y,
                          int ldy) {
  sg_part(0, part, nparts, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

void bcrt_gemm_small(int m, int n, int k, const float *x, int ldx, const float *packed,
                     const float *bias, float beta, float *y, int ldy) {
  sg_part(0, 0, 1, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

/* Threads: parts 1..nt-1 on fresh pthreads, part 0 on the caller's; a part
 * whose thread cannot start runs on the caller's too.  Thread start costs
 * ~10-30 us, so this pays for itself on MB-sized weights only. */
typedef struct {
  int bf, part, nparts, m, n, k, ldx, ldy;
  const float *x, *bias;
  const void *packed;
  float beta;
  float *y;
} sg_job;

static void sg_job_run(const sg_job *j) {
  sg_part(j->bf, j->part, j->nparts, j->m, j->n, j->k, j->x, j->ldx, j->packed, j->bias, j->beta,
          j->y, j->ldy);
}

#ifdef GK_THREADS
static void *sg_job_thread(void *arg) {
  sg_job_run((const sg_job *)arg);
  return NULL;
}
#endif

enum { SG_MAX_THREADS = 64 };

static void sg_mt(int bf, int nthreads, int m, int n, int k, const float *x, int ldx,
                  const void *packed, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR), nt = nthreads < 1 ? 1 : nthreads;
  nt = nt > SG_MAX_THREADS ? SG_MAX_THREADS : nt;
  nt = nt > np ? np : nt;
  sg_job job[SG_MAX_THREADS];
  for (int t = 0; t < nt; t++)
    job[t] = (sg_job){.bf = bf, .part = t, .nparts = nt, .m = m, .n = n, .k = k, .ldx = ldx, .ldy = ldy,
                      .x = x, .packed = packed, .bias = bias, .beta = beta, .y = y};
#ifdef GK_THREADS
  pthread_t tid[SG_MAX_THREADS];
  int started[SG_MAX_THREADS] = {0};
  for (int t = 1; t < nt; t++) started[t] = pthread_create(&tid[t], NULL, sg_job_thread, &job[t]) == 0;
  sg_job_run(&job[0]);
  for (int t = 1; t < nt; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    else sg_job_run(&job[t]);
  }
#else
  for (int t = 0; t < nt; t++) sg_job_run(&job[t]);
#endif
}

void bcrt_gemm_small_mt(int nthreads, int m, int n, int k, const float *x, int ldx,
                        const float *packed, const float *bias, float beta, float *y, int ldy) {
  sg_mt(0, nthreads, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

void bcrt_linear(int m, int n, int k, const float *x, int ldx, const float *w, int ldw,
                 int trans, const float *packed, long poff, const float *bias, float beta,
                 float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (packed && m <= BCRT_SMALL_M) {
    sg_part(0, 0, 1, m, n, k, x, ldx, packed + poff, bias, beta, y, ldy);
    return;
  }
  if (bias && beta == 0.0f) {  /* rows <- bias, then the product accumulates */
    bcrt_fill_cols(m, n, ldy, bias, y);
    bias = NULL;
    beta = 1.0f;
  }
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, trans, m, n, k, 1.0f, x, ldx, w, ldw, beta, y, ldy);
  if (bias)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) y[(size_t)i * (size_t)ldy + (size_t)j] += bias[j];
}

float bcrt_stream_sum(long n, const float *x, int prefetch) {
  float acc[64] = {0};
  long i = 0;
  for (; i + 64 <= n; i += 64) {
    if (prefetch)
      for (int q = 0; q < 4; q++) GK_PREFETCH(x + i, 2048u + 64u * (unsigned)q);
    for (int j = 0; j < 64; j++) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; j++) acc[j] += x[i + j];
  float s = 0.0f;
  for (int j = 0; j < 64; j++) s += acc[j];
  return s;
}

/* Few-row attention products.  nt: per key row j (read once, from memory),
 * a 16-lane dot product with each of the m query rows (in L1).  nn: per
 * value row kk (read once), y_i += x[i, kk] * row into m accumulator rows
 * on the stack (in L1), scaled and stored at the end.  The rows are one
 * head's slice of a K|V cache row (256 B every 2-8 KiB): every line of the
 * row RW_AHEAD rows on is prefetched, as the hardware prefetcher does not
 * follow such strides (measured: decode at context 512 spent 3 ms of CPU
 * here with only the first line prefetched). */
enum { RW_LANES = 16, RW_ACC = 4096, RW_AHEAD = 8 };

/* Every cache line of floats [p, p + n). */
static void rw_prefetch(const float *p, int n) {
  for (long off = 0; off < (long)n * 4; off += 64) GK_PREFETCH(p, (size_t)off);
}

static float rw_dot(int k, const float *a, const float *b) {
  float acc[RW_LANES] = {0};
  int kk = 0;
  for (; kk + RW_LANES <= k; kk += RW_LANES)
    for (int l = 0; l < RW_LANES; l++) acc[l] = MADD(a[kk + l], b[kk + l], acc[l]);
  float s = 0.0f;
  for (; kk < k; kk++) s = MADD(a[kk], b[kk], s);
  for (int l = 0; l < RW_LANES; l++) s += acc[l];
  return s;
}

void bcrt_gemm_rows_nt(int m, int n, int k, float alpha, const float *x, int ldx,
                       const float *b, int ldb, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (m > BCRT_ROWS_M) {
    cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, m, n, k, alpha, x, ldx, b, ldb, 0.0f,
                y, ldy);
    return;
  }
  for (int j = 0; j < n; j++) {
    const float *bj = b + (size_t)j * (size_t)ldb;
    if (j + RW_AHEAD < n) rw_prefetch(bj + (size_t)RW_AHEAD * (size_t)ldb, k);
    for (int i = 0; i < m; i++)
      y[(size_t)i * (size_t)ldy + (size_t)j] = alpha * rw_dot(k, x + (size_t)i * (size_t)ldx, bj);
  }
}

void bcrt_gemm_rows_nn(int m, int n, int k, float alpha, const float *x, int ldx,
                       const float *b, int ldb, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (m > BCRT_ROWS_M || (long)m * n > RW_ACC) {
    cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, m, n, k, alpha, x, ldx, b, ldb, 0.0f,
                y, ldy);
    return;
  }
  float acc[RW_ACC];
  for (long t = 0; t < (long)m * n; t++) acc[t] = 0.0f;
  for (int kk = 0; kk < k; kk++) {
    const float *bk = b + (size_t)kk * (size_t)ldb;
    if (kk + RW_AHEAD < k) rw_prefetch(bk + (size_t)RW_AHEAD * (size_t)ldb, n);
    for (int i = 0; i < m; i++) {
      float a = x[(size_t)i * (size_t)ldx + (size_t)kk], *ai = acc + (size_t)i * (size_t)n;
      for (int j = 0; j < n; j++) ai[j] = MADD(a, bk[j], ai[j]);
    }
  }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) y[(size_t)i * (size_t)ldy + (size_t)j] = alpha * acc[(size_t)i * n + j];
}

/* BF16: round to nearest even; NaN stays a (quiet) NaN. */
static unsigned short sg_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

void bcrt_pack_nt_bf16(int n, int k, const float *w, unsigned short *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    unsigned short *dst = packed + (size_t)p * SG_NR * (size_t)k;
    for (int j = 0; j < SG_NR; j++) {
      int row = p * SG_NR + j;
      const float *src = w + (size_t)row * (size_t)k;
      for (int kk = 0; kk < k; kk++)
        dst[(size_t)kk * SG_NR + j] = row < n ? sg_to_bf16(src[kk]) : 0;
    }
  }
}

void bcrt_gemm_small_bf16(int nthreads, int m, int n, int k, const float *x, int ldx,
                          const unsigned short *packed, const float *bias, float beta, float *y,
                          int ldy) {
  sg_mt(1, nthreads, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

/* Portable GEMM blocking: GM_MR x GM_NR register tile; an A block of
 * GM_MC x GM_KC (<= 128 KiB, L2; GM_MC a multiple of GM_MR) packed once
 * per (k block, row block); a B micro-panel of GM_KC x GM_NR (32 KiB, L1) packed just before the tiles
 * that use it, so B is packed ceil(m / GM_MC) times in all. */
enum { GM_MR = GK_MR, GM_NR = 32, GM_KC = 256, GM_MC = 128 / GK_MR * GK_MR };
/* sg_blocked reads packed weight panels as B micro-panels. */
typedef char gm_nr_matches_pack_nr[(int)GM_NR == (int)SG_NR ? 1 : -1];

static inline float gm_at(int trans, const float *m, size_t ld, int r, int c) {
  return trans ? m[(size_t)c * ld + (size_t)r] : m[(size_t)r * ld + (size_t)c];
}

/* A rows [i0, i0 + mc), columns [p0, p0 + kc) of op(A) into micro-panels
 * of GM_MR rows, k-major inside each (ap[panel][p][r]), zero rows past mc. */
static void gm_pack_a(int ta, const float *a, size_t lda, int i0, int mc, int p0, int kc,
                      float *ap) {
  for (int ir = 0; ir < mc; ir += GM_MR) {
    float *dst = ap + (size_t)ir * (size_t)kc;
    int mr = mc - ir < GM_MR ? mc - ir : GM_MR;
    if (ta) {
      for (int p = 0; p < kc; p++) {
        const float *src = a + (size_t)(p0 + p) * lda + (size_t)(i0 + ir);
        for (int r = 0; r < GM_MR; r++) dst[(size_t)p * GM_MR + r] = r < mr ? src[r] : 0.0f;
      }
    } else {
      for (int r = 0; r < GM_MR; r++) {
        const float *src = a + (size_t)(i0 + ir + r) * lda + (size_t)p0;
        if (r < mr)
          for (int p = 0; p < kc; p++) dst[(size_t)p * GM_MR + r] = src[p];
        else
          for (int p = 0; p < kc; p++) dst[(size_t)p * GM_MR + r] = 0.0f;
      }
    }
  }
}

/* op(B) rows [p0, p0 + kc), columns [j0, j0 + nr) into bp[p][j], zero
 * columns past nr. */
static void gm_pack_b(int tb, const float *b, size_t ldb, int p0, int kc, int j0, int nr,
                      float *bp) {
  if (tb) {
    for (int j = 0; j < GM_NR; j++) {
      const float *src = b + (size_t)(j0 + j) * ldb + (size_t)p0;
      if (j < nr)
        for (int p = 0; p < kc; p++) bp[(size_t)p * GM_NR + j] = src[p];
      else
        for (int p = 0; p < kc; p++) bp[(size_t)p * GM_NR + j] = 0.0f;
    }
  } else {
    for (int p = 0; p < kc; p++) {
      const float *src = b + (size_t)(p0 + p) * ldb + (size_t)j0;
      float *dst = bp + (size_t)p * GM_NR;
      for (int j = 0; j < GM_NR; j++) dst[j] = j < nr ? src[j] : 0.0f;
    }
  }
}

/* The register tile: acc = A micro-panel x B micro-panel over kc steps,
 * then C (mr x nr valid) = alpha acc (+ bias) + beta C (beta == 0: C not
 * read; bias may be NULL). */
static void gm_tile(int kc, const float *ap, const float *bp, float alpha, const float *bias,
                    float beta, float *c, size_t ldc, int mr, int nr) {
  float acc[GM_MR][GM_NR];
  for (int r = 0; r < GM_MR; r++)
    for (int j = 0; j < GM_NR; j++) acc[r][j] = 0.0f;
  for (int p = 0; p < kc; p++) {
    const float *bk = bp + (size_t)p * GM_NR, *ak = ap + (size_t)p * GM_MR;
    for (int r = 0; r < GM_MR; r++) {
      float av = ak[r];
      for (int j = 0; j < GM_NR; j++) acc[r][j] = MADD(av, bk[j], acc[r][j]);
    }
  }
  for (int r = 0; r < mr; r++) {
    float *cr = c + (size_t)r * ldc;
    if (bias)
      for (int j = 0; j < nr; j++) acc[r][j] = MADD(alpha, acc[r][j], bias[j]);
    else if (alpha != 1.0f)
      for (int j = 0; j < nr; j++) acc[r][j] *= alpha;
    if (beta == 0.0f)
      for (int j = 0; j < nr; j++) cr[j] = acc[r][j];
    else if (beta == 1.0f)
      for (int j = 0; j < nr; j++) cr[j] += acc[r][j];
    else
      for (int j = 0; j < nr; j++) cr[j] = MADD(beta, cr[j], acc[r][j]);
  }
}

/* bcrt_gemm_small for many rows (m > SG_MG, k > 0): bcrt_sgemm's blocking,
 * with the packed weights as the B micro-panels as they are (a panel's k
 * block is a contiguous GM_KC x 32 micro-panel), so nothing but x is
 * packed; BF16 micro-panels are widened into a float buffer first.  Panels
 * [p0, p1) only (the caller's part).  Returns 0 if the packing buffers
 * cannot be allocated (the caller then takes the row-group path). */
static int sg_blocked(int bf, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y,
                      size_t ldy) {
  size_t na = (size_t)GM_MC * GM_KC, nb = (size_t)GM_KC * GM_NR;
  void *mem = malloc((na + nb + 16) * sizeof(float));
  if (!mem) return 0;
  float *ap = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63), *bp = ap + na;
  size_t pstride = (size_t)SG_NR * (size_t)k;
  for (int k0 = 0; k0 < k; k0 += GM_KC) {
    int kc = k - k0 < GM_KC ? k - k0 : GM_KC;
    for (int i0 = 0; i0 < m; i0 += GM_MC) {
      int mc = m - i0 < GM_MC ? m - i0 : GM_MC;
      gm_pack_a(0, x, ldx, i0, mc, k0, kc, ap);
      for (int p = p0; p < p1; p++) {
        int j0 = p * SG_NR, nr = n - j0 < SG_NR ? n - j0 : SG_NR;
        size_t off = (size_t)p * pstride + (size_t)k0 * SG_NR;
        const float *b = bf ? bp : (const float *)packed + off;
        if (bf) {
          const unsigned short *h = (const unsigned short *)packed + off;
          for (size_t i = 0; i < (size_t)kc * GM_NR; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&bp[i], &u, sizeof u);
          }
        }
        for (int ir = 0; ir < mc; ir += GM_MR)
          gm_tile(kc, ap + (size_t)ir * (size_t)kc, b, 1.0f, k0 ? NULL : bias ? bias + j0 : NULL,
                  k0 ? 1.0f : beta, y + (size_t)(i0 + ir) * ldy + (size_t)j0, ldy,
                  mc - ir < GM_MR ? mc - ir : GM_MR, nr);
      }
    }
  }
  free(mem);
  return 1;
}

/* C = beta C; beta == 0 writes zeros without reading C. */
static void gm_scale(int m, int n, float beta, float *c, size_t ldc) {
  if (beta == 1.0f) return;
  for (int i = 0; i < m; i++) {
    float *cr = c + (size_t)i * ldc;
    if (beta == 0.0f)
      for (int j = 0; j < n; j++) cr[j] = 0.0f;
    else
      for (int j = 0; j < n; j++) cr[j] *= beta;
  }
}

/* Unpacked fallback (packing buffers unavailable): one dot product per
 * element of C; slow, but never wrong. */
static void gm_plain(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0.0f;
      for (int p = 0; p < k; p++) s = MADD(gm_at(ta, a, lda, i, p), gm_at(tb, b, ldb, p, j), s);
      float *cij = c + (size_t)i * ldc + (size_t)j;
      *cij = beta == 0.0f ? alpha * s : MADD(alpha, s, beta * *cij);
    }
}

void bcrt_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  int ta = transa == BCRT_TRANS, tb = transb == BCRT_TRANS;
  if (m <= 0 || n <= 0) return;
  if (alpha == 0.0f || k <= 0) {
    gm_scale(m, n, beta, c, (size_t)ldc);
    return;
  }
  /* 64-byte aligned packing buffers: A block, then one B micro-panel. */
  size_t na = (size_t)GM_MC * GM_KC, nb = (size_t)GM_KC * GM_NR;
  void *mem = malloc((na + nb + 16) * sizeof(float));
  if (!mem) {
    gm_plain(ta, tb, m, n, k, alpha, a, (size_t)lda, b, (size_t)ldb, beta, c, (size_t)ldc);
    return;
  }
  float *ap = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63), *bp = ap + na;
  for (int p0 = 0; p0 < k; p0 += GM_KC) {
    int kc = k - p0 < GM_KC ? k - p0 : GM_KC;
    float bt = p0 ? 1.0f : beta;
    for (int i0 = 0; i0 < m; i0 += GM_MC) {
      int mc = m - i0 < GM_MC ? m - i0 : GM_MC;
      gm_pack_a(ta, a, (size_t)lda, i0, mc, p0, kc, ap);
      for (int j0 = 0; j0 < n; j0 += GM_NR) {
        int nr = n - j0 < GM_NR ? n - j0 : GM_NR;
        gm_pack_b(tb, b, (size_t)ldb, p0, kc, j0, nr, bp);
        for (int ir = 0; ir < mc; ir += GM_MR)
          gm_tile(kc, ap + (size_t)ir * (size_t)kc, bp, alpha, NULL, bt,
                  c + (size_t)(i0 + ir) * (size_t)ldc + (size_t)j0, (size_t)ldc,
                  mc - ir < GM_MR ? mc - ir : GM_MR, nr);
      }
    }
  }
  free(mem);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC pop_options
#endif
