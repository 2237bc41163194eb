/* kernels.c — the forward kernels: copies, adds, bias + activation, LayerNorm,
 * softmax, RMSNorm, gated FFN, RoPE, the KV-cache row copy, Positions.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
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

/* One pass per copy of b, so the inner loop is a straight vectorisable body. */
void bcrt_mul(long n, const float *a, long nb, const float *b, float *y) {
  for (long r = 0; r + nb <= n; r += nb)
    for (long j = 0; j < nb; j++) y[r + j] = a[r + j] * b[j];
}

/* Broadcast add: one pass per copy of b, as bcrt_mul. */
void bcrt_add_bcast(long n, float alpha, const float *a, float beta, long nb, const float *b,
                    float *y) {
  if (nb == n) {
    bcrt_add(n, alpha, a, beta, b, y);
    return;
  }
  for (long r = 0; r + nb <= n; r += nb)
    for (long j = 0; j < nb; j++) y[r + j] = alpha * a[r + j] + beta * b[j];
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

/* The slow path above, in double (bcrt_real): the statistics of x * s. */
static ln_stats ln_scaled_stats(int d, const float *x, float eps, float s) {
  ln_stats st = {s, x[0] * s, 0.0f, 0.0f};
  bcrt_real acc = 0, q = 0;
  for (int j = 0; j < d; j++) acc += (bcrt_real)(x[j] * s - st.k);
  st.delta = (float)(acc / (bcrt_real)d);
  for (int j = 0; j < d; j++) {
    bcrt_real c = (bcrt_real)((x[j] * s - st.k) - st.delta);
    q += c * c;
  }
  st.rstd = (float)((bcrt_real)1 / R_SQRT(q / (bcrt_real)d + (bcrt_real)eps * (bcrt_real)s * (bcrt_real)s));
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
  bcrt_real ms = (bcrt_real)lanes_sum(acc) / (bcrt_real)d * (bcrt_real)m * (bcrt_real)m;
  return (float)((bcrt_real)1 / R_SQRT(ms + (bcrt_real)eps));
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

/* Issue 23: RMSNorm with (off + w) (Gemma's 1 + weight), the soft-caps, the
 * windowed and capped softmax, QK-norm over row segments, head scales. */
static void rms_row_off(int d, const float *x, const float *w, float off, float eps, float *y) {
  float r = rms_rstd(d, x, eps);
  if (w)
    for (int j = 0; j < d; j++) y[j] = x[j] * r * (w[j] + off);
  else
    for (int j = 0; j < d; j++) y[j] = x[j] * r;
}

void bcrt_rmsnorm_off(int n, int d, const float *x, const float *w, float off, float eps,
                      float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) rms_row_off(d, crow_of(x, i, d), w, off, eps, row_of(y, i, d));
}

void bcrt_add_rmsnorm_off(int n, int d, float alpha, const float *a, float beta, const float *b,
                          const float *w, float off, float eps, float *sum, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *yr = row_of(y, i, d);
    float *sr = sum ? row_of(sum, i, d) : yr;
    bcrt_add(d, alpha, crow_of(a, i, d), beta, crow_of(b, i, d), sr);
    rms_row_off(d, sr, w, off, eps, yr);
  }
}

void bcrt_dual_add_rmsnorm_off(int n, int d, float a0, const float *xd, float b0, float a1,
                               const float *xa, float b1, const float *u, const float *w,
                               float off, float eps, float *xd_out, float *xa_out) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *xar = row_of(xa_out, i, d);
    dual_add_row(d, a0, crow_of(xd, i, d), b0, a1, crow_of(xa, i, d), b1, crow_of(u, i, d),
                 row_of(xd_out, i, d), xar);
    rms_row_off(d, xar, w, off, eps, xar);
  }
}

void bcrt_softcap(long n, float cap, const float *x, float *y) {
  for (long i = 0; i < n; i++) y[i] = cap * tanh_f(x[i] / cap);  /* not * (1/cap): a tiny cap */
}

void bcrt_softmax_ex(int n, int d, int ld, int causal, int row0, int window, float cap,
                     float *s) {
  for (int i = 0; i < n; i++) {
    float *r = row_of(s, i, ld);
    long hi = causal ? (long)i + 1 + row0 : d;
    if (hi > d) hi = d;
    if (hi < 0) hi = 0;
    long lo = window > 0 ? (long)i + 1 + row0 - window : 0;
    if (lo < 0) lo = 0;
    if (lo > hi) lo = hi;
    if (cap > 0.0f)
      for (long j = lo; j < hi; j++) r[j] = cap * tanh_f(r[j] / cap);
    for (long j = 0; j < lo; j++) r[j] = 0.0f;
    softmax_row((int)(hi - lo), d - (int)lo, r + lo);
  }
}

void bcrt_seg_norm(int n, int nseg, int w, int ld, const float *g, const float *b, float eps,
                   int rms, float *x) {
  if (w <= 0) return;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nseg; k++) {
      float *xr = x + (size_t)i * (size_t)ld + (size_t)k * (size_t)w;
      if (rms) rms_row(w, xr, g, eps, xr);
      else ln_row(w, xr, g, b, eps, xr);
    }
}

void bcrt_head_scale(int n, int nheads, int dh, int ld, const float *w, float *x) {
  for (int i = 0; i < n; i++)
    for (int h = 0; h < nheads; h++) {
      float *xr = x + (size_t)i * (size_t)ld + (size_t)h * (size_t)dh;
      for (int c = 0; c < dh; c++) xr[c] *= w[h];
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
GLU_ROWS(geglu_tanh_rows, gelu_tanh_f)

void bcrt_glu(int n, int d, const float *bu, const float *bg, int act, float *h, const float *g) {
  if (act == BCRT_ACT_GEGLU) geglu_rows(n, d, bu, bg, h, g);
  else if (act == BCRT_ACT_GEGLU_TANH) geglu_tanh_rows(n, d, bu, bg, h, g);
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
  bcrt_real inv[256]; /* theta^(-2j/dh), once per call for the usual head widths */
  for (int j = 0; j < half && j < 256; j++)
    inv[j] = R_POW((bcrt_real)theta, (bcrt_real)(-2 * j) / (bcrt_real)dh);
  for (int r = 0; r < n; r++) {
    bcrt_real pos = (bcrt_real)(pos0 + r % t);
    float *xr = row_of(x, r, ld);
    for (int j = 0; j < half; j++) {
      bcrt_real a = pos * (j < 256 ? inv[j] : R_POW((bcrt_real)theta, (bcrt_real)(-2 * j) / (bcrt_real)dh));
      float c = (float)R_COS(a), sn = sign * (float)R_SIN(a);
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
/* Positions (issue 21): a learned table or the sinusoid, added to x         */
/* ------------------------------------------------------------------------ */

void bcrt_pos_learned(long b, long t, long d, long pos0, const float *x, const float *wpe,
                      float *y) {
  for (long i = 0; i < b; i++)
    for (long r = 0; r < t; r++) {
      size_t o = ((size_t)i * (size_t)t + (size_t)r) * (size_t)d;
      const float *w = wpe + (size_t)(pos0 + r) * (size_t)d;
      for (long k = 0; k < d; k++) y[o + (size_t)k] = x[o + (size_t)k] + w[k];
    }
}

/* Pairs j0 .. j0+nj (nj <= SIN_PAIRS) at a time: their inverse
 * frequencies w_j = 10000^(-2j/d), and per pair the sine and cosine of the
 * current position's angle p w_j, all in double.  Every SIN_EXACT positions
 * the sines and cosines are computed by sin() and cos(); in between the
 * angle-addition formula steps them by w_j (sin(a + w) = s cos w + c sin w),
 * whose double rounding stays below 1e-14 over SIN_EXACT steps: the floats
 * written are those of the exact angles but where a sum lies within 1e-14
 * of a rounding boundary, and the interpreter (which divides, pos /
 * 10000^(2j/d)) agrees to a float ulp.  Each (position, pair) is shared by
 * the batch rows; the sum x + PE is taken in double and rounded once. */
enum { SIN_PAIRS = 64, SIN_EXACT = 32 };

static void sin_rows(long b, long t, long d, long pos0, long j0, long nj, const float *x,
                     float *y) {
  bcrt_real w[SIN_PAIRS], sw[SIN_PAIRS], cw[SIN_PAIRS], sn[SIN_PAIRS], cs[SIN_PAIRS];
  for (long j = 0; j < nj; j++) {
    w[j] = R_POW((bcrt_real)10000, (bcrt_real)(-2 * (j0 + j)) / (bcrt_real)d);
    sw[j] = R_SIN(w[j]);
    cw[j] = R_COS(w[j]);
  }
  for (long r = 0; r < t; r++) {
    bcrt_real p = (bcrt_real)(pos0 + r);
    for (long j = 0; j < nj; j++) {
      if (r % SIN_EXACT == 0) {
        sn[j] = R_SIN(p * w[j]);
        cs[j] = R_COS(p * w[j]);
      } else {
        bcrt_real s1 = sn[j] * cw[j] + cs[j] * sw[j];
        cs[j] = cs[j] * cw[j] - sn[j] * sw[j];
        sn[j] = s1;
      }
    }
    for (long i = 0; i < b; i++) {
      size_t o = ((size_t)i * (size_t)t + (size_t)r) * (size_t)d + 2 * (size_t)j0;
      for (long j = 0; j < nj; j++) {
        long c = 2 * (j0 + j);
        y[o + 2 * (size_t)j] = (float)((bcrt_real)x[o + 2 * (size_t)j] + sn[j]);
        if (c + 1 < d) y[o + 2 * (size_t)j + 1] = (float)((bcrt_real)x[o + 2 * (size_t)j + 1] + cs[j]);
      }
    }
  }
}

void bcrt_pos_sinusoid(long b, long t, long d, long pos0, const float *x, float *y) {
  long npair = (d + 1) / 2;
  for (long j0 = 0; j0 < npair; j0 += SIN_PAIRS)
    sin_rows(b, t, d, pos0, j0, npair - j0 < SIN_PAIRS ? npair - j0 : SIN_PAIRS, x, y);
}

/* ------------------------------------------------------------------------ */

/* 1 if p is a multiple of align (a power of 2); generated forward() uses it. */
int bcrt_is_aligned(const void *p, unsigned long align) {
  return align && ((uintptr_t)p & (uintptr_t)(align - 1)) == 0;
}

/* ------------------------------------------------------------------------ */
/* Token embedding (issue 21)                                               */
/* ------------------------------------------------------------------------ */

void bcrt_embedding(long n, int d, const int *ids, const float *w, float scale, float *y) {
  for (long i = 0; i < n; i++) {
    const float *r = w + (size_t)ids[i] * (size_t)d;
    float *o = y + (size_t)i * (size_t)d;
    if (scale == 1.0f)
      memcpy(o, r, (size_t)d * sizeof *o);
    else
      for (int j = 0; j < d; j++) o[j] = scale * r[j];
  }
}

/* ------------------------------------------------------------------------ */
/* Losses (issue 22)                                                        */
/* ------------------------------------------------------------------------ */

/* Logits rows are reduced in chunks of CE_CHUNK: LANES float partial sums
 * per chunk (vectorised), each chunk's total added into a double. */
#define CE_CHUNK 1024

/* max_c x[c] (NaN-free rows; a NaN makes the loss NaN through exp). */
static float ce_max(long v, const float *x) {
  float mx[LANES];
  for (int j = 0; j < LANES; j++) mx[j] = x[0];
  long c = 0;
  for (; c + LANES <= v; c += LANES)
    for (int j = 0; j < LANES; j++) mx[j] = x[c + j] > mx[j] ? x[c + j] : mx[j];
  for (int j = 0; c + j < v; j++) mx[j] = x[c + j] > mx[j] ? x[c + j] : mx[j];
  float m = mx[0];
  for (int j = 1; j < LANES; j++) m = mx[j] > m ? mx[j] : m;
  return m;
}

/* sum_c exp(x[c] - m) (pass m = 0 and ex = 0 for sum_c x[c]), in double over chunks. */
static double ce_sum(long v, const float *x, float m, int ex) {
  double s = 0;
  for (long c0 = 0; c0 < v; c0 += CE_CHUNK) {
    long k = v - c0 < CE_CHUNK ? v - c0 : CE_CHUNK, j = 0;
    const float *r = x + c0;
    float acc[LANES] = {0};
    if (ex) {  /* bcrt_exp's loop vectorises; exp_f inlined into the sum does not */
      float t[CE_CHUNK];
      for (long i = 0; i < k; i++) t[i] = r[i] - m;
      bcrt_exp(k, t, t);
      for (; j + LANES <= k; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += t[j + l];
      for (int l = 0; j + l < k; l++) acc[l] += t[j + l];
    } else {
      for (; j + LANES <= k; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += r[j + l];
      for (int l = 0; j + l < k; l++) acc[l] += r[j + l];
    }
    s += (double)lanes_sum(acc);
  }
  return s;
}

/* log(sum_c exp(x[c])) for one row of v logits, the max subtracted. */
static double ce_lse(long v, const float *x) {
  float m = ce_max(v, x);
  return (double)m + log(ce_sum(v, x, m, 1));
}

void bcrt_cross_entropy(long n, long v, const float *x, const int *tgt, long ignore, float e,
                        float *loss, float *lse) {
  double total = 0;
  long kept = 0;
  for (long r = 0; r < n; r++) {
    if (tgt[r] == ignore) continue;
    const float *row = x + (size_t)r * (size_t)v;
    double l = ce_lse(v, row);
    if (lse) lse[r] = (float)l;
    double mean = e != 0.0f ? ce_sum(v, row, 0.0f, 0) / (double)v : 0.0;
    total += (1.0 - (double)e) * (l - (double)row[tgt[r]]) + (double)e * (l - mean);
    kept++;
  }
  *loss = kept ? (float)(total / (double)kept) : 0.0f;
}

void bcrt_mse(long n, const float *a, const float *b, float *loss) {
  double s = 0;
  for (long i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    s += d * d;
  }
  *loss = n > 0 ? (float)(s / (double)n) : 0.0f;
}

/* ------------------------------------------------------------------------ */
/* Elementwise activations (the Act node)                                   */
/* ------------------------------------------------------------------------ */
static inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }
/* tanh without libm's tanhf (the freestanding build calls only a few libm
 * functions): the odd Taylor series to x^7 for |x| < 0.2 (error below
 * 1e-8 relative there), else 1 - 2 / (1 + exp(2x)) (a few ulps: no
 * cancellation left at |t| >= 0.19; exp saturates to 0 or inf). */
static inline float tanh_un_f(float x) {
  if (x > -0.2f && x < 0.2f) {
    float x2 = x * x;
    return x * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f - x2 * 0.053968254f)));
  }
  return 1.0f - 2.0f / (1.0f + exp_f(2.0f * x));
}

void bcrt_unary(long n, int act, const float *x, float *y) {
  switch (act) { /* one loop per activation, so each vectorises */
  case BCRT_UN_GELU: for (long i = 0; i < n; i++) y[i] = gelu_f(x[i]); break;
  case BCRT_UN_GELU_TANH: for (long i = 0; i < n; i++) y[i] = gelu_tanh_f(x[i]); break;
  case BCRT_UN_SILU: for (long i = 0; i < n; i++) y[i] = silu_f(x[i]); break;
  case BCRT_UN_SIGMOID: for (long i = 0; i < n; i++) y[i] = sigmoid_f(x[i]); break;
  case BCRT_UN_TANH: for (long i = 0; i < n; i++) y[i] = tanh_un_f(x[i]); break;
  default: for (long i = 0; i < n; i++) y[i] = relu_f(x[i]); break;
  }
}

/* ------------------------------------------------------------------------ */
/* Scaled and activated operands (the fuse-scale and fuse-act passes)       */
/* ------------------------------------------------------------------------ */
/* act(x) for an operand: a BCRT_UN_* (the same float functions as
 * bcrt_unary), or the identity for -1. */
static inline float un_apply(int act, float x) {
  switch (act) {
  case BCRT_UN_RELU: return relu_f(x);
  case BCRT_UN_GELU: return gelu_f(x);
  case BCRT_UN_GELU_TANH: return gelu_tanh_f(x);
  case BCRT_UN_SILU: return silu_f(x);
  case BCRT_UN_SIGMOID: return sigmoid_f(x);
  case BCRT_UN_TANH: return tanh_un_f(x);
  default: return x;
  }
}

/* One row of alpha*(sa . act_a(a)) + beta*(sb . act_b(b)): each activated
 * and each scaled operand is rounded to float first (what an Act and a Mul
 * node store), so the fused node computes exactly what Act, Mul and Add
 * computed; a scale is NULL, one value (ns 1) or one per column (ns d), an
 * activation -1 (none) or a BCRT_UN_*. */
static void add_sc_row(int d, float alpha, const float *a, const float *sa, int na, int acta,
                       float beta, const float *b, const float *sb, int nb, int actb, float *y) {
  if (acta < 0 && actb < 0 && !sa && sb && nb == d) {
    for (int j = 0; j < d; j++) {
      float m = b[j] * sb[j];
      y[j] = alpha * a[j] + beta * m;
    }
  } else if (acta < 0 && actb < 0 && !sa && sb) {
    float s = sb[0];
    for (int j = 0; j < d; j++) {
      float m = b[j] * s;
      y[j] = alpha * a[j] + beta * m;
    }
  } else if (acta < 0 && actb < 0 && sa && !sb && na == d) {
    for (int j = 0; j < d; j++) {
      float m = a[j] * sa[j];
      y[j] = alpha * m + beta * b[j];
    }
  } else {
    for (int j = 0; j < d; j++) {
      float ma = un_apply(acta, a[j]), mb = un_apply(actb, b[j]);
      if (sa) ma = ma * sa[na == d ? j : 0];
      if (sb) mb = mb * sb[nb == d ? j : 0];
      y[j] = alpha * ma + beta * mb;
    }
  }
}

void bcrt_add_sc(int n, int d, float alpha, const float *a, const float *sa, int na, int acta,
                 float beta, const float *b, const float *sb, int nb, int actb, float *y) {
  for (int i = 0; i < n; i++)
    add_sc_row(d, alpha, crow_of(a, i, d), sa, na, acta, beta, crow_of(b, i, d), sb, nb, actb,
               row_of(y, i, d));
}

void bcrt_add_layernorm_sc(int n, int d, float alpha, const float *a, const float *sa, int na,
                           int acta, float beta, const float *b, const float *sb, int nb,
                           int actb, const float *w, const float *bias, float eps, float *sum,
                           float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *yr = row_of(y, i, d);
    float *sr = sum ? row_of(sum, i, d) : yr;
    add_sc_row(d, alpha, crow_of(a, i, d), sa, na, acta, beta, crow_of(b, i, d), sb, nb, actb, sr);
    ln_row(d, sr, w, bias, eps, yr);
  }
}

void bcrt_add_rmsnorm_sc(int n, int d, float alpha, const float *a, const float *sa, int na,
                         int acta, float beta, const float *b, const float *sb, int nb, int actb,
                         const float *w, float eps, float *sum, float *y) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    float *yr = row_of(y, i, d);
    float *sr = sum ? row_of(sum, i, d) : yr;
    add_sc_row(d, alpha, crow_of(a, i, d), sa, na, acta, beta, crow_of(b, i, d), sb, nb, actb, sr);
    rms_row(d, sr, w, eps, yr);
  }
}
