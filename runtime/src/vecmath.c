/* vecmath.c — exp, erf and GELU as branch-free polynomials that vectorise.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
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

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) in (0, 1]: no
 * overflow (e underflows to 0 for large |x|: +-1).  Below |x| = 1/16 the
 * Taylor series x - x^3/3 + 2x^5/15 (error < 2e-9 relative), where 1 - e
 * would cancel.  NaN stays NaN.  (Issue 23: the soft-caps.) */
static inline float tanh_f(float x) {
  float a = abs_f(x);
  if (a < 0.0625f) {
    float x2 = x * x;
    return x * (1.0f + x2 * (-0.333333333f + x2 * 0.133333333f));
  }
  float e = exp_f(-2.0f * a);
  float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
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
