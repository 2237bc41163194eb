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
 * delta = 0 and var = 0, so its output is exactly the bias. */
typedef struct {
  float k, delta, rstd;
} ln_stats;

/* max_j |(x[j] - k) - delta| */
static float max_abs_dev(int d, const float *x, float k, float delta) {
  float m = 0.0f;
  for (int j = 0; j < d; j++) {
    float c = (x[j] - k) - delta;
    c = c < 0 ? -c : c;
    m = c > m ? c : m;
  }
  return m;
}

/* Squares of deviations above ~1.8e19 overflow a float although the row
 * and its normalised output are finite (1e30 inputs).  Only then (the sum
 * is inf but the deviations are finite) the variance is recomputed with the
 * deviations scaled by their max s: var = s^2 q, and
 * 1 / sqrt(var + eps) = 1 / (s sqrt(q + eps / s^2)), with no s^2 formed
 * where it would overflow.  Ordinary rows never take this path. */
static ln_stats ln_row_stats(int d, const float *x, float eps) {
  ln_stats st;
  st.k = x[0];
  st.delta = sum_shifted(d, x, st.k) / (float)d;
  float var = sum_sq_dev(d, x, st.k, st.delta) / (float)d;
  if (var > FLT_MAX && st.delta - st.delta == 0.0f) {
    float s = max_abs_dev(d, x, st.k, st.delta);
    if (s > 0.0f && s <= FLT_MAX) {
      float acc = 0.0f, inv = 1.0f / s;
      for (int j = 0; j < d; j++) {
        float c = ((x[j] - st.k) - st.delta) * inv;
        acc += c * c;
      }
      float q = acc / (float)d, e = eps * inv * inv;
      st.rstd = inv / sqrtf(q + e);
      return st;
    }
  }
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
void bcrt_rope(int n, int t, int pos0, int nheads, int dh, int ld, float theta, float *x) {
  int half = dh / 2;
  if (half <= 0 || t <= 0) return;
  double inv[256]; /* theta^(-2j/dh), once per call for the usual head widths */
  for (int j = 0; j < half && j < 256; j++) inv[j] = pow((double)theta, -2.0 * j / dh);
  for (int r = 0; r < n; r++) {
    double pos = (double)(pos0 + r % t);
    float *xr = row_of(x, r, ld);
    for (int j = 0; j < half; j++) {
      double a = pos * (j < 256 ? inv[j] : pow((double)theta, -2.0 * j / dh));
      float c = (float)cos(a), sn = (float)sin(a);
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
/* Files for vendored programs: safetensors weights, .npy arrays            */
/* ------------------------------------------------------------------------ */
/* The JSON in a safetensors header is parsed by the small recursive-descent
 * reader below rather than a library: this .c/.h pair must stay copyable
 * into any project with no dependency beyond ISO C (blockc itself uses
 * cJSON).  It accepts exactly the JSON grammar (RFC 8259) the header needs:
 * one object of objects, plus "__metadata__", with any value skipped. */

#define ST_MAX_HEADER (100ul << 20) /* the reference implementation's limit */
#define JSON_MAX_DEPTH 64

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

/* --- JSON ------------------------------------------------------------------ */

typedef struct {
  const char *p, *end;
  int depth;
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

static int hex4(const char *p, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
               : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
               : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
    if (d > 15) return 0;
    *v = *v * 16 + d;
  }
  return 1;
}

/* A JSON string, decoded to UTF-8 into a malloc'ed buffer (out may be NULL
 * to just skip it).  Escapes, including surrogate pairs, are decoded so
 * names compare as the text they spell. */
static int js_string(json *j, char **out) {
  js_ws(j);
  if (j->p >= j->end || *j->p != '"') return 0;
  j->p++;
  const char *s = j->p;
  while (j->p < j->end && *j->p != '"') j->p += (*j->p == '\\' && j->p + 1 < j->end) ? 2 : 1;
  if (j->p >= j->end) return 0;
  size_t n = (size_t)(j->p - s);
  j->p++;
  char *d = malloc(n + 1), *o = d;  /* decoding never lengthens the text */
  if (!d) return 0;
  for (const char *q = s; q < s + n;) {
    unsigned char c = (unsigned char)*q++;
    if (c < 0x20) goto bad;
    if (c != '\\') {
      *o++ = (char)c;
      continue;
    }
    c = (unsigned char)*q++;
    switch (c) {
    case '"': case '\\': case '/': *o++ = (char)c; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      unsigned u, lo;
      if (s + n - q < 4 || !hex4(q, &u)) goto bad;
      q += 4;
      if (u >= 0xd800 && u < 0xdc00) {
        if (s + n - q < 6 || q[0] != '\\' || q[1] != 'u' || !hex4(q + 2, &lo) || lo < 0xdc00 ||
            lo > 0xdfff)
          goto bad;
        q += 6;
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
      } else if (u >= 0xdc00 && u < 0xe000) {
        goto bad;
      }
      if (u == 0) goto bad;  /* a NUL would truncate the name */
      if (u < 0x80) *o++ = (char)u;
      else if (u < 0x800) *o++ = (char)(0xc0 | u >> 6), *o++ = (char)(0x80 | (u & 0x3f));
      else if (u < 0x10000)
        *o++ = (char)(0xe0 | u >> 12), *o++ = (char)(0x80 | ((u >> 6) & 0x3f)),
        *o++ = (char)(0x80 | (u & 0x3f));
      else
        *o++ = (char)(0xf0 | u >> 18), *o++ = (char)(0x80 | ((u >> 12) & 0x3f)),
        *o++ = (char)(0x80 | ((u >> 6) & 0x3f)), *o++ = (char)(0x80 | (u & 0x3f));
      break;
    }
    default: goto bad;
    }
  }
  *o = '\0';
  if (out) *out = d;
  else free(d);
  return 1;
bad:
  free(d);
  return 0;
}

/* A non-negative integer without sign, fraction or exponent (shapes and
 * offsets), below 2^53 so it is exact wherever it came from. */
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

static int js_skip(json *j) {
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
        if (!js_skip(j)) return 0;
      } while (js_lit(j, ','));
      ok = js_lit(j, close);
    }
  } else if (c >= '0' && c <= '9') {
    /* Numbers in a safetensors header are sizes and offsets: plain
     * non-negative integers, wherever they appear (blockc's reader agrees). */
    unsigned long long v;
    ok = js_uint(j, &v);
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

/* --- safetensors -------------------------------------------------------------- */

typedef struct {
  char *name;
  char dtype[16];
  int rank;
  unsigned long long shape[8], begin, end;
} st_entry;

typedef struct {
  st_entry *e;
  int n, cap;
} st_table;

static void st_table_free(st_table *t) {
  for (int i = 0; i < t->n; i++) free(t->e[i].name);
  free(t->e);
}

/* {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]} */
static int st_parse_entry(json *j, st_entry *e) {
  int have = 0;
  if (!js_lit(j, '{')) return 0;
  if (js_lit(j, '}')) return 0;
  do {
    char *key;
    if (!js_string(j, &key)) return 0;
    int k = !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2 : !strcmp(key, "data_offsets") ? 4 : 0;
    free(key);
    if (!js_lit(j, ':') || (have & k)) return 0;
    have |= k;
    if (k == 1) {
      char *dt;
      if (!js_string(j, &dt)) return 0;
      snprintf(e->dtype, sizeof e->dtype, "%s", dt);
      free(dt);
    } else if (k == 2 || k == 4) {
      unsigned long long *dst = k == 2 ? e->shape : &e->begin;
      int n = 0, max = k == 2 ? 8 : 2;
      if (!js_lit(j, '[')) return 0;
      if (!js_lit(j, ']')) {
        do {
          unsigned long long v;
          if (n == max || !js_uint(j, &v)) return 0;
          if (k == 2) dst[n] = v;
          else if (n == 0) e->begin = v;
          else e->end = v;
          n++;
        } while (js_lit(j, ','));
        if (!js_lit(j, ']')) return 0;
      }
      if (k == 2) e->rank = n;
      else if (n != 2) return 0;
    } else if (!js_skip(j)) {
      return 0;
    }
  } while (js_lit(j, ','));
  return js_lit(j, '}') && have == 7;
}

static int st_parse_header(const char *text, size_t len, st_table *t) {
  json j = {text, text + len, 0};
  if (!js_lit(&j, '{')) return 0;
  if (js_lit(&j, '}')) goto done;
  do {
    char *name;
    if (!js_string(&j, &name)) return 0;
    if (!js_lit(&j, ':')) {
      free(name);
      return 0;
    }
    if (!strcmp(name, "__metadata__")) {  /* an object of strings */
      free(name);
      if (!js_lit(&j, '{')) return 0;
      if (!js_lit(&j, '}')) {
        do {
          if (!js_string(&j, NULL) || !js_lit(&j, ':') || !js_string(&j, NULL)) return 0;
        } while (js_lit(&j, ','));
        if (!js_lit(&j, '}')) return 0;
      }
      continue;
    }
    if (t->n == t->cap) {
      int cap = t->cap ? 2 * t->cap : 64;
      st_entry *ne = realloc(t->e, (size_t)cap * sizeof *ne);
      if (!ne) {
        free(name);
        return 0;
      }
      t->e = ne, t->cap = cap;
    }
    st_entry *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    e->name = name;
    t->n++;
    if (!st_parse_entry(&j, e)) return 0;
    for (int i = 0; i + 1 < t->n; i++)
      if (!strcmp(t->e[i].name, name)) return 0;  /* duplicate tensor name */
  } while (js_lit(&j, ','));
  if (!js_lit(&j, '}')) return 0;
done:
  js_ws(&j);
  return j.p == j.end;
}

static int dtype_size(const char *dt) {
  return !strcmp(dt, "F32") ? 4 : (!strcmp(dt, "F16") || !strcmp(dt, "BF16")) ? 2 : 0;
}

/* Element size of any safetensors dtype (0: not a safetensors dtype).  The
 * same list as blockc's own reader (compiler/safetensors.c): a file either
 * opens in both or in neither. */
static int st_any_dtype_size(const char *dt) {
  static const char *const names[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8",
                                      "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2",
                                      "F8_E8M0", "C64"};
  static const unsigned char sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1, 1, 8};
  for (size_t i = 0; i < sizeof sizes; i++)
    if (!strcmp(dt, names[i])) return sizes[i];
  return 0;
}

static int st_cmp_begin(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* The whole header, as the safetensors format defines it (and as blockc's
 * reader checks it): every entry has a known dtype and offsets holding
 * exactly its shape's bytes, and the entries tile the data section: no
 * overlap, no gap, nothing after the last one.  Writes the reason into
 * msg (n bytes) and returns 0 when the file is malformed. */
static int st_validate(const st_table *t, unsigned long long data_len, char *msg, size_t n) {
  for (int i = 0; i < t->n; i++) {
    const st_entry *e = &t->e[i];
    unsigned long long need = (unsigned long long)st_any_dtype_size(e->dtype);
    if (!need) {
      snprintf(msg, n, "tensor '%.200s' has unknown dtype '%.15s'", e->name, e->dtype);
      return 0;
    }
    for (int k = 0; k < e->rank; k++) {
      if (e->shape[k] && need > (1ull << 62) / e->shape[k]) {
        snprintf(msg, n, "tensor '%.200s' has too many elements", e->name);
        return 0;
      }
      need *= e->shape[k];
    }
    if (e->end < e->begin || e->end - e->begin != need) {
      snprintf(msg, n, "tensor '%.200s': data_offsets [%llu, %llu] do not hold its %llu bytes",
               e->name, e->begin, e->end, need);
      return 0;
    }
  }
  const st_entry **by = malloc((size_t)(t->n ? t->n : 1) * sizeof *by);
  if (!by) {
    snprintf(msg, n, "out of memory");
    return 0;
  }
  for (int i = 0; i < t->n; i++) by[i] = &t->e[i];
  qsort(by, (size_t)t->n, sizeof *by, st_cmp_begin);
  unsigned long long at = 0;
  int ok = 1;
  for (int i = 0; i < t->n && ok; i++) {
    if (by[i]->begin != at) {
      snprintf(msg, n, "tensor '%.200s' at data_offsets [%llu, %llu] %s", by[i]->name,
               by[i]->begin, by[i]->end, by[i]->begin < at ? "overlaps another tensor"
                                                            : "leaves a gap before it");
      ok = 0;
    }
    at = by[i]->end;
  }
  free(by);
  if (ok && at != data_len) {
    snprintf(msg, n, "%llu bytes after the last tensor (the data section is %llu bytes)",
             data_len - at, data_len);
    ok = 0;
  }
  return ok;
}

/* First invalid UTF-8 byte (or NUL) in s[0, n), or -1: the header must be
 * UTF-8 (names end up in messages). */
static long st_bad_utf8(const unsigned char *s, size_t n) {
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

/* Reads one tensor's data into dst (numel floats), converting 16-bit types
 * a chunk at a time so no second copy of the tensor is needed. */
static int st_read_tensor(FILE *f, long base, const st_entry *e, size_t numel, float *dst) {
  if (fseek(f, base + (long)e->begin, SEEK_SET) != 0) return 0;
  if (!strcmp(e->dtype, "F32")) {
    if (fread(dst, 4, numel, f) != numel) return 0;
    if (!host_le()) swap32(dst, numel);
    return 1;
  }
  unsigned char buf[8192];
  int bf = !strcmp(e->dtype, "BF16");
  for (size_t done = 0; done < numel;) {
    size_t k = numel - done < sizeof buf / 2 ? numel - done : sizeof buf / 2;
    if (fread(buf, 2, k, f) != k) return 0;
    for (size_t i = 0; i < k; i++) {
      unsigned h = (unsigned)buf[2 * i] | (unsigned)buf[2 * i + 1] << 8;
      dst[done + i] = bf ? float_of((uint32_t)h << 16) : f16_to_f32(h);
    }
    done += k;
  }
  return 1;
}

static const char *shape_text(int rank, const unsigned long long *ull, const long *l, char *buf,
                              size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %llu" : "%llu",
                          ull ? ull[i] : (unsigned long long)l[i]);
  if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
  return buf;
}

/* Checks one param against its entry; appends a message and returns 0 if
 * unusable. */
static int st_check(const bcrt_param_info *p, const st_entry *e, unsigned long long data_len,
                    char *err, unsigned long errlen) {
  char line[1024], a[256], b[256];
  if (!e) {
    snprintf(line, sizeof line, "missing tensor '%s' (expected shape %s)", p->name,
             shape_text(p->rank, NULL, p->shape, a, sizeof a));
    add_err(err, errlen, line);
    return 0;
  }
  int ok = 1;
  if (!dtype_size(e->dtype)) {
    snprintf(line, sizeof line, "tensor '%s' has dtype %s, expected F32, F16 or BF16", p->name,
             e->dtype);
    add_err(err, errlen, line);
    ok = 0;
  }
  int same = e->rank == p->rank;
  for (int i = 0; same && i < p->rank; i++) same = e->shape[i] == (unsigned long long)p->shape[i];
  if (!same) {
    snprintf(line, sizeof line, "tensor '%s' has shape %s, expected %s", p->name,
             shape_text(e->rank, e->shape, NULL, a, sizeof a),
             shape_text(p->rank, NULL, p->shape, b, sizeof b));
    add_err(err, errlen, line);
    ok = 0;
  }
  if (ok) {
    unsigned long long numel = 1;
    for (int i = 0; i < p->rank; i++) numel *= (unsigned long long)p->shape[i];
    if (e->end < e->begin || e->end > data_len ||
        e->end - e->begin != numel * (unsigned long long)dtype_size(e->dtype)) {
      snprintf(line, sizeof line, "tensor '%s': data_offsets [%llu, %llu] do not match its "
               "size or lie outside the file", p->name, e->begin, e->end);
      add_err(err, errlen, line);
      ok = 0;
    }
  }
  return ok;
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
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return BCRT_EIO;
  }
  int st = BCRT_EFORMAT;
  char *hdr = NULL, msg[512];
  st_table t = {0};
  float *block = NULL;
  unsigned char len8[8];
  unsigned long long hlen = 0, fsize = 0;
  long end;
  if (fread(len8, 1, 8, f) != 8 || fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0) {
    set_err(err, errlen, "%s: not a safetensors file (shorter than its 8-byte header length)%s",
            path, "");
    goto out;
  }
  fsize = (unsigned long long)end;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
  if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > fsize - 8) {
    snprintf(msg, sizeof msg, "header length %llu is impossible for a %llu-byte file", hlen, fsize);
    set_err(err, errlen, "%s: not a safetensors file: %s", path, msg);
    goto out;
  }
  if (!(hdr = malloc((size_t)hlen))) {
    st = BCRT_ENOMEM;
    set_err(err, errlen, "%s: out of memory reading the header%s", path, "");
    goto out;
  }
  if (fseek(f, 8, SEEK_SET) != 0 || fread(hdr, 1, (size_t)hlen, f) != hlen) {
    st = BCRT_EIO;
    set_err(err, errlen, "%s: read error in the header%s", path, "");
    goto out;
  }
  if (st_bad_utf8((const unsigned char *)hdr, (size_t)hlen) >= 0) {
    set_err(err, errlen, "%s: malformed safetensors header (not valid UTF-8)%s", path, "");
    goto out;
  }
  if (!st_parse_header(hdr, (size_t)hlen, &t)) {
    set_err(err, errlen, "%s: malformed safetensors header (bad JSON, duplicate name, or "
            "an entry without dtype/shape/data_offsets)%s", path, "");
    goto out;
  }
  unsigned long long data_len = fsize - 8 - hlen, total = 0;
  if (!st_validate(&t, data_len, msg, sizeof msg)) {
    set_err(err, errlen, "%s: malformed safetensors file: %s", path, msg);
    goto out;
  }
  /* Match every param; report all problems, not just the first. */
  const st_entry **match = calloc((size_t)(nparams ? nparams : 1), sizeof *match);
  if (!match) {
    st = BCRT_ENOMEM;
    set_err(err, errlen, "%s: out of memory%s", path, "");
    goto out;
  }
  int bad = 0;
  for (int i = 0; i < nparams; i++) {
    for (int k = 0; k < t.n && !match[i]; k++)
      if (!strcmp(t.e[k].name, params[i].name)) match[i] = &t.e[k];
    if (!st_check(&params[i], match[i], data_len, err, errlen)) bad++;
    unsigned long long numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (unsigned long long)params[i].shape[d];
    total += numel;
  }
  if (bad) {
    snprintf(msg, sizeof msg, "%s: %d of %d tensors unusable (above)", path, bad, nparams);
    add_err(err, errlen, msg);
    st = BCRT_EMISMATCH;
    free(match);
    goto out;
  }
  if (!(block = malloc((size_t)(total ? total : 1) * sizeof(float)))) {
    st = BCRT_ENOMEM;
    set_err(err, errlen, "%s: out of memory for the weights%s", path, "");
    free(match);
    goto out;
  }
  float *dst = block;
  int failed = 0;
  for (int i = 0; i < nparams && !failed; i++) {
    size_t numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (size_t)params[i].shape[d];
    if (!st_read_tensor(f, (long)(8 + hlen), match[i], numel, dst)) {
      st = BCRT_EIO, failed = 1;
      set_err(err, errlen, "%s: read error in tensor '%s'", path, params[i].name);
      break;
    }
    /* NaN/Inf in weights means a broken export; say which tensor. */
    for (size_t k = 0; k < numel && !failed; k++)
      if (!isfinite(dst[k])) {
        snprintf(msg, sizeof msg, "tensor '%s' has a non-finite value at flat index %lu",
                 params[i].name, (unsigned long)k);
        set_err(err, errlen, "%s: %s", path, msg);
        st = BCRT_EFORMAT, failed = 1;
      }
    slots[i] = dst;
    dst += numel;
  }
  free(match);
  if (!failed) {
    st = BCRT_OK;
    *storage = block;
    block = NULL;
  }
out:
  free(block);
  free(hdr);
  st_table_free(&t);
  fclose(f);
  if (st != BCRT_OK)
    for (int i = 0; i < nparams && slots; i++) slots[i] = NULL;
  return st;
}

void bcrt_st_free(void *storage) { free(storage); }

/* --- .npy --------------------------------------------------------------------- */

/* The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * Only this subset is accepted: quoted keys, and values that are a quoted
 * string, True/False, or a tuple of non-negative integers. */
static int npy_descr(json *j, int ints, int *esize, const char **why);

static int npy_parse_dict(const char *p, const char *end, long *shape, int *rank,
                          const char **why, int ints, int *esize) {
  json j = {p, end, 0};
  int have = 0;
  *why = "malformed header dict";
  if (!js_lit(&j, '{')) return 0;
  while (!js_lit(&j, '}')) {
    js_ws(&j);
    /* Python string literals: '...' (what numpy writes) or "...". */
    if (j.p >= j.end || (*j.p != '\'' && *j.p != '"')) return 0;
    char q = *j.p;
    const char *k = ++j.p;
    while (j.p < j.end && *j.p != q) j.p++;
    if (j.p >= j.end) return 0;
    size_t kn = (size_t)(j.p++ - k);
    if (!js_lit(&j, ':')) return 0;
    js_ws(&j);
    if (kn == 5 && !memcmp(k, "descr", 5)) {
      if (!npy_descr(&j, ints, esize, why)) return 0;
      have |= 1;
    } else if (kn == 13 && !memcmp(k, "fortran_order", 13)) {
      if ((size_t)(j.end - j.p) >= 5 && !memcmp(j.p, "False", 5)) j.p += 5;
      else {
        *why = "array is in Fortran order (C order only)";
        return 0;
      }
      have |= 2;
    } else if (kn == 5 && !memcmp(k, "shape", 5)) {
      if (!js_lit(&j, '(')) return 0;
      *rank = 0;
      while (!js_lit(&j, ')')) {
        unsigned long long v;
        if (*rank == BCRT_NPY_MAX_RANK) {
          *why = "rank above 8";
          return 0;
        }
        /* Decimal digits (Python 2 files may add an L). */
        js_ws(&j);
        const char *d0 = j.p;
        v = 0;
        while (j.p < j.end && *j.p >= '0' && *j.p <= '9' && v <= 0x7fffffffull)
          v = v * 10 + (unsigned long long)(*j.p++ - '0');
        if (j.p == d0 || v > 0x7fffffffull) return 0;
        if (j.p < j.end && *j.p == 'L') j.p++;
        shape[(*rank)++] = (long)v;
        if (!js_lit(&j, ',')) {
          if (!js_lit(&j, ')')) return 0;
          break;
        }
      }
      have |= 4;
    } else {
      *why = "unknown key in header";
      return 0;
    }
    if (!js_lit(&j, ',')) {
      if (!js_lit(&j, '}')) return 0;
      break;
    }
  }
  if (have != 7) {
    *why = "header lacks descr, fortran_order or shape";
    return 0;
  }
  return 1;
}

/* The descr value: '<f4' for floats (ints == 0), '<i4' or '<i8' for
 * lengths (ints != 0); *esize is the element size. */
static int npy_descr(json *j, int ints, int *esize, const char **why) {
  static const char *const want[] = {"'<f4'", "\"<f4\"", "'<i4'", "\"<i4\"", "'<i8'", "\"<i8\""};
  for (int i = ints ? 2 : 0; i < (ints ? 6 : 2); i++)
    if ((size_t)(j->end - j->p) >= 5 && !memcmp(j->p, want[i], 5)) {
      *esize = want[i][3] - '0';
      j->p += 5;
      return 1;
    }
  *why = ints ? "dtype is not little-endian int32 or int64 ('<i4', '<i8'); save lengths with "
                "np.array(..., np.int32)"
              : "dtype is not little-endian float32 ('<f4')";
  return 0;
}

int bcrt_npy_read(const char *path, float **data, long *shape, int *rank, char *err,
                  unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || !data || !shape || !rank) {
    set_err(err, errlen, "bcrt_npy_read: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  *data = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return BCRT_EIO;
  }
  int st = BCRT_EFORMAT;
  unsigned char pre[12];
  char *hdr = NULL;
  float *x = NULL;
  const char *why = "not a .npy file (bad magic)";
  long end;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) || pre[6] < 1 || pre[6] > 3)
    goto bad;
  unsigned long hlen = (unsigned long)pre[8] | (unsigned long)pre[9] << 8, off = 10;
  if (pre[6] > 1) {
    if (fread(pre + 10, 1, 2, f) != 2) goto bad;
    hlen |= (unsigned long)pre[10] << 16 | (unsigned long)pre[11] << 24;
    off = 12;
  }
  why = "header length out of range";
  if (hlen > (1ul << 20) || !(hdr = malloc(hlen + 1)) || fread(hdr, 1, hlen, f) != hlen) goto bad;
  hdr[hlen] = '\0';
  int esize = 4;
  if (!npy_parse_dict(hdr, hdr + hlen, shape, rank, &why, 0, &esize)) goto bad;
  size_t numel = 1;
  for (int i = 0; i < *rank; i++) {
    if (shape[i] && numel > ((size_t)1 << 40) / (size_t)shape[i]) {
      why = "shape too large";
      goto bad;
    }
    numel *= (size_t)shape[i];
  }
  why = "data size does not match the shape";
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 ||
      (unsigned long long)end != (unsigned long long)(off + hlen) + 4ull * numel)
    goto bad;
  if (!(x = malloc(numel ? numel * 4 : 4))) {
    st = BCRT_ENOMEM;
    why = "out of memory";
    goto bad;
  }
  if (fseek(f, (long)(off + hlen), SEEK_SET) != 0 || fread(x, 4, numel, f) != numel) {
    st = BCRT_EIO;
    why = "read error";
    goto bad;
  }
  if (!host_le()) swap32(x, numel);
  free(hdr);
  fclose(f);
  *data = x;
  return BCRT_OK;
bad:
  set_err(err, errlen, "%s: %s", path, why);
  free(hdr);
  free(x);
  fclose(f);
  return st;
}

/* Little-endian element i of raw (esize 4 or 8 bytes), sign-extended. */
static long long npy_int_at(const unsigned char *raw, int esize, size_t i) {
  unsigned long long u = 0;
  for (int b = esize - 1; b >= 0; b--) u = u << 8 | raw[i * (size_t)esize + (size_t)b];
  if (esize == 4) return (long long)(int32_t)(uint32_t)u;
  return (long long)(int64_t)u;  /* two's complement, as on every host C99 runs on */
}

/* bcrt_npy_read's skeleton for lengths: rank 1, '<i4' or '<i8', values
 * range-checked into int. */
int bcrt_npy_read_i32(const char *path, int **data, long *n, char *err, unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || !data || !n) {
    set_err(err, errlen, "bcrt_npy_read_i32: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  *data = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return BCRT_EIO;
  }
  int st = BCRT_EFORMAT, rank = 0, esize = 4;
  unsigned char pre[12], *raw = NULL;
  char *hdr = NULL, msg[160];
  int *x = NULL;
  long shape[BCRT_NPY_MAX_RANK], end;
  const char *why = "not a .npy file (bad magic)";
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) || pre[6] < 1 || pre[6] > 3)
    goto bad;
  unsigned long hlen = (unsigned long)pre[8] | (unsigned long)pre[9] << 8, off = 10;
  if (pre[6] > 1) {
    if (fread(pre + 10, 1, 2, f) != 2) goto bad;
    hlen |= (unsigned long)pre[10] << 16 | (unsigned long)pre[11] << 24;
    off = 12;
  }
  why = "header length out of range";
  if (hlen > (1ul << 20) || !(hdr = malloc(hlen + 1)) || fread(hdr, 1, hlen, f) != hlen) goto bad;
  hdr[hlen] = '\0';
  if (!npy_parse_dict(hdr, hdr + hlen, shape, &rank, &why, 1, &esize)) goto bad;
  why = "lengths must be a rank-1 array (one per batch row)";
  if (rank != 1) goto bad;
  size_t numel = (size_t)shape[0];  /* <= 2^31 - 1: npy_parse_dict's limit */
  why = "data size does not match the shape";
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 ||
      (unsigned long long)end != (unsigned long long)(off + hlen) + (unsigned long long)esize * numel)
    goto bad;
  if (!(raw = malloc(numel ? numel * (size_t)esize : 1)) || !(x = malloc(numel ? numel * sizeof *x : 1))) {
    st = BCRT_ENOMEM;
    why = "out of memory";
    goto bad;
  }
  if (fseek(f, (long)(off + hlen), SEEK_SET) != 0 || fread(raw, (size_t)esize, numel, f) != numel) {
    st = BCRT_EIO;
    why = "read error";
    goto bad;
  }
  for (size_t i = 0; i < numel; i++) {
    long long v = npy_int_at(raw, esize, i);
    if (v < INT_MIN || v > INT_MAX) {
      snprintf(msg, sizeof msg, "element %lu is %lld, outside the int range", (unsigned long)i, v);
      why = msg;
      goto bad;
    }
    x[i] = (int)v;
  }
  free(raw);
  free(hdr);
  fclose(f);
  *data = x;
  *n = (long)numel;
  return BCRT_OK;
bad:
  set_err(err, errlen, "%s: %s", path, why);
  free(raw);
  free(hdr);
  free(x);
  fclose(f);
  return st;
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

/* m > SG_MR: rows in groups of up to SG_MG; per group, k in chunks of
 * SG_KC: the chunk of x is packed (k-major per row block) on the stack,
 * then every panel's chunk (32 KiB, contiguous) is read once from memory
 * and reused from L1 by all the group's row blocks, while the next
 * panel's chunk is prefetched into L2.  Row blocks are balanced (m = 9 is
 * 5 + 4, not 8 + 1). */
enum { SG_MG = 32 };

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
  float mem[SG_MG * SG_KC + 16];
  float *xp = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  size_t pstride = (size_t)SG_NR * (size_t)k; /* weights per panel */
  for (int i0 = 0; i0 < m; i0 += SG_MG) {
    int mg = m - i0 < SG_MG ? m - i0 : SG_MG;
    int nb = (mg + SG_MR - 1) / SG_MR, rb = (mg + nb - 1) / nb;
    int k0 = 0;
    do {
      int kc = k - k0 < SG_KC ? k - k0 : SG_KC;
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
 * m <= 8 one pass, m <= 32 row groups over packed chunks of x, more rows
 * the blocked GEMM path. */
static void sg_part(int bf, int part, int nparts, int m, int n, int k, const float *x, int ldx,
                    const void *packed, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0 || nparts < 1 || part < 0 || part >= nparts) return;
  long np = ((long)n + SG_NR - 1) / SG_NR;
  int p0 = (int)(np * part / nparts), p1 = (int)(np * (part + 1) / nparts);
  if (k < 0) k = 0;
  if (m <= SG_MR)
    sg_panels_few(bf, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy);
  else if (m <= SG_MG || k == 0 ||
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
