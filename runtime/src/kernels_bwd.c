/* kernels_bwd.c — the backward kernels of the emitted training step.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
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

/* da first, then db: neither loop reads a gradient, so da may equal db (Mul(x, x)). */
void bcrt_mul_bwd(long n, const float *dy, const float *a, long nb, const float *b, float *da,
                  float *db) {
  for (long r = 0; r + nb <= n; r += nb)
    for (long j = 0; j < nb; j++) da[r + j] += dy[r + j] * b[j];
  for (long r = 0; r + nb <= n; r += nb)
    for (long j = 0; j < nb; j++) db[j] += dy[r + j] * a[r + j];
}

/* The learned Positions table: position pos0 + r's row sums dy over the batch. */
void bcrt_pos_learned_bwd(long b, long t, long d, long pos0, const float *dy, float *dw) {
  for (long i = 0; i < b; i++)
    for (long r = 0; r < t; r++) {
      const float *g = dy + ((size_t)i * (size_t)t + (size_t)r) * (size_t)d;
      float *w = dw + (size_t)(pos0 + r) * (size_t)d;
      for (long k = 0; k < d; k++) w[k] += g[k];
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

/* Gated FFN: act(g) of the gate, silu (swiglu), exact gelu (geglu) or tanh
 * gelu (geglu_tanh). */
static inline float gate_f(int act, float g) {
  return act == BCRT_ACT_GEGLU ? gelu_f(g) : act == BCRT_ACT_GEGLU_TANH ? gelu_tanh_f(g) : silu_f(g);
}

void bcrt_glu_act(int n, int d, int act, const float *u, const float *g, float *a) {
  long nel = (long)n * (long)d;
  if (act == BCRT_ACT_GEGLU)
    for (long i = 0; i < nel; i++) a[i] = gate_f(BCRT_ACT_GEGLU, g[i]) * u[i];
  else if (act == BCRT_ACT_GEGLU_TANH)
    for (long i = 0; i < nel; i++) a[i] = gate_f(BCRT_ACT_GEGLU_TANH, g[i]) * u[i];
  else
    for (long i = 0; i < nel; i++) a[i] = gate_f(BCRT_ACT_SWIGLU, g[i]) * u[i];
}

/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x); gelu' as act_df. */
static inline float gate_df(int act, float x) {
  if (act == BCRT_ACT_GEGLU) return act_df(BCRT_ACT_GELU, x);
  if (act == BCRT_ACT_GEGLU_TANH) return act_df(BCRT_ACT_GELU_TANH, x);
  float sg = 1.0f / (1.0f + exp_f(-x));
  return sg * (1.0f + x * (1.0f - sg));
}

void bcrt_glu_bwd(int n, int d, int act, const float *u, const float *g, float *da, float *dg) {
  long nel = (long)n * (long)d;
  int a = act == BCRT_ACT_GEGLU || act == BCRT_ACT_GEGLU_TANH ? act : BCRT_ACT_SWIGLU;
#define GLU_BWD_LOOP(A)                                                                        \
  for (long i = 0; i < nel; i++) {                                                             \
    float gi = g[i], di = da[i];                                                               \
    dg[i] = di * u[i] * gate_df(A, gi);                                                        \
    da[i] = di * gate_f(A, gi);                                                                \
  }
  if (a == BCRT_ACT_GEGLU) {
    GLU_BWD_LOOP(BCRT_ACT_GEGLU)
  } else if (a == BCRT_ACT_GEGLU_TANH) {
    GLU_BWD_LOOP(BCRT_ACT_GEGLU_TANH)
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
                               const float *w, float off, const float *dy, int rms, float *dx,
                               float *dw, float *db) {
  float acc_g[LANES] = {0}, acc_gx[LANES] = {0};
  int i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int j = 0; j < LANES; j++) {
      float xh = (x[i + j] * s - mean) * rstd, g = w ? dy[i + j] * (w[i + j] + off) : dy[i + j];
      acc_g[j] += g;
      acc_gx[j] += g * xh;
    }
  for (int j = 0; i + j < d; j++) {
    float xh = (x[i + j] * s - mean) * rstd, g = w ? dy[i + j] * (w[i + j] + off) : dy[i + j];
    acc_g[j] += g;
    acc_gx[j] += g * xh;
  }
  if (dw)
    for (int j = 0; j < d; j++) dw[j] += dy[j] * ((x[j] * s - mean) * rstd);
  if (db)
    for (int j = 0; j < d; j++) db[j] += dy[j];
  float mg = rms ? 0.0f : lanes_sum(acc_g) / (float)d, mgx = lanes_sum(acc_gx) / (float)d;
  for (int j = 0; j < d; j++) {
    float xh = (x[j] * s - mean) * rstd, g = w ? dy[j] * (w[j] + off) : dy[j];
    dx[j] += rstd * s * (g - mg - xh * mgx);
  }
}

/* x * s: the scaled row of ln_stats (s = 1 folded away on ordinary rows). */
static void norm_bwd_row(int d, const float *x, float s, float mean, float rstd, const float *w,
                         float off, const float *dy, int rms, float *dx, float *dw, float *db) {
  if (s == 1.0f)
    norm_bwd_row_s(d, x, 1.0f, mean, rstd, w, off, dy, rms, dx, dw, db);
  else
    norm_bwd_row_s(d, x, s, mean, rstd, w, off, dy, rms, dx, dw, db);
}

void bcrt_layernorm_bwd(int n, int d, const float *x, const float *w, float eps,
                        const float *dy, float *dx, float *dw, float *db) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    ln_stats st = ln_row_stats(d, xr, eps);
    norm_bwd_row(d, xr, st.scale, st.k + st.delta, st.rstd, w, 0.0f, crow_of(dy, i, d), 0, row_of(dx, i, d),
                 dw, db);
  }
}

void bcrt_rmsnorm_bwd(int n, int d, const float *x, const float *w, float eps,
                      const float *dy, float *dx, float *dw) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    norm_bwd_row(d, xr, 1.0f, 0.0f, rms_rstd(d, xr, eps), w, 0.0f, crow_of(dy, i, d), 1,
                 row_of(dx, i, d), dw, 0);
  }
}

/* Issue 23: RMSNorm with (off + w) (Gemma), the soft-caps, QK-norm over row
 * segments and NormFormer's head scales. */
void bcrt_rmsnorm_bwd_off(int n, int d, const float *x, const float *w, float off, float eps,
                          const float *dy, float *dx, float *dw) {
  if (d <= 0) return;
  for (int i = 0; i < n; i++) {
    const float *xr = crow_of(x, i, d);
    norm_bwd_row(d, xr, 1.0f, 0.0f, rms_rstd(d, xr, eps), w, off, crow_of(dy, i, d), 1,
                 row_of(dx, i, d), dw, 0);
  }
}

void bcrt_softcap_bwd(long n, float cap, const float *x, const float *dy, float *dx) {
  for (long i = 0; i < n; i++) {
    float t = tanh_f(x[i] / cap);
    dx[i] += dy[i] * (1.0f - t * t);
  }
}

void bcrt_softcap_scores_bwd(int n, int d, int ld, float cap, const float *raw, float *ds) {
  for (int i = 0; i < n; i++) {
    const float *r = crow_of(raw, i, ld);
    float *g = row_of(ds, i, ld);
    for (int j = 0; j < d; j++) {
      float t = tanh_f(r[j] / cap);
      g[j] *= 1.0f - t * t;
    }
  }
}

void bcrt_seg_norm_bwd(int n, int nseg, int w, int ld, const float *x, const float *g, float eps,
                       int rms, const float *dy, float *dx, float *dg, float *db) {
  if (w <= 0) return;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nseg; k++) {
      size_t o = (size_t)i * (size_t)ld + (size_t)k * (size_t)w;
      const float *xr = x + o;
      if (rms) {
        norm_bwd_row(w, xr, 1.0f, 0.0f, rms_rstd(w, xr, eps), g, 0.0f, dy + o, 1, dx + o, dg, 0);
      } else {
        ln_stats st = ln_row_stats(w, xr, eps);
        norm_bwd_row(w, xr, st.scale, st.k + st.delta, st.rstd, g, 0.0f, dy + o, 0, dx + o, dg,
                     db);
      }
    }
}

void bcrt_head_scale_bwd(int n, int nheads, int dh, int ld, const float *x, const float *w,
                         float *dx, float *dw) {
  for (int i = 0; i < n; i++)
    for (int h = 0; h < nheads; h++) {
      size_t o = (size_t)i * (size_t)ld + (size_t)h * (size_t)dh;
      float acc = 0.0f;
      for (int c = 0; c < dh; c++) {
        acc += dx[o + (size_t)c] * x[o + (size_t)c];
        dx[o + (size_t)c] *= w[h];
      }
      dw[h] += acc;
    }
}


void bcrt_embedding_bwd(long n, int d, const int *ids, const float *dy, float scale, float *dw) {
  for (long i = 0; i < n; i++) {
    float *g = dw + (size_t)ids[i] * (size_t)d;
    const float *r = dy + (size_t)i * (size_t)d;
    for (int j = 0; j < d; j++) g[j] += scale * r[j];
  }
}

/* ------------------------------------------------------------------------ */
/* Losses (issue 22)                                                        */
/* ------------------------------------------------------------------------ */

void bcrt_cross_entropy_bwd(long n, long v, const float *x, const int *tgt, long ignore, float e,
                            const float *lse, const float *dloss, float *dx) {
  long kept = 0;
  for (long r = 0; r < n; r++) kept += tgt[r] != ignore;
  if (!kept) return;
  float s = *dloss / (float)kept, off = e / (float)v * s;
  for (long r = 0; r < n; r++) {
    if (tgt[r] == ignore) continue;
    const float *row = x + (size_t)r * (size_t)v;
    float *d = dx + (size_t)r * (size_t)v, l = lse[r];
    float t[256];  /* exp on the stack, then one pass over d (which may not alias row) */
    for (long c0 = 0; c0 < v; c0 += 256) {
      long k = v - c0 < 256 ? v - c0 : 256;
      for (long j = 0; j < k; j++) t[j] = row[c0 + j] - l;
      bcrt_exp(k, t, t);
      for (long j = 0; j < k; j++) d[c0 + j] += t[j] * s - off;
    }
    d[tgt[r]] -= (1.0f - e) * s;
  }
}

void bcrt_mse_bwd(long n, const float *a, const float *b, const float *dloss, float *da,
                  float *db) {
  float k = n > 0 ? 2.0f * *dloss / (float)n : 0.0f;
  for (long i = 0; i < n; i++) {
    float g = k * (a[i] - b[i]);
    da[i] += g;
    if (db) db[i] -= g;
  }
}

/* The Act node's backward: dx += dy * act'(x). */
static inline float unary_df(int act, float x) {
  switch (act) {
  case BCRT_UN_GELU: return act_df(BCRT_ACT_GELU, x);
  case BCRT_UN_GELU_TANH: return act_df(BCRT_ACT_GELU_TANH, x);
  case BCRT_UN_SILU: return gate_df(BCRT_ACT_SWIGLU, x);
  case BCRT_UN_SIGMOID: {
    float s = 1.0f / (1.0f + exp_f(-x));
    return s * (1.0f - s);
  }
  case BCRT_UN_TANH: {
    float t = tanh_un_f(x);
    return 1.0f - t * t;
  }
  default: return x > 0.0f ? 1.0f : 0.0f;
  }
}

void bcrt_unary_bwd(long n, int act, const float *x, const float *dy, float *dx) {
  switch (act) {
#define UNARY_BWD(A) for (long i = 0; i < n; i++) dx[i] += dy[i] * unary_df(A, x[i]); break;
  case BCRT_UN_GELU: UNARY_BWD(BCRT_UN_GELU)
  case BCRT_UN_GELU_TANH: UNARY_BWD(BCRT_UN_GELU_TANH)
  case BCRT_UN_SILU: UNARY_BWD(BCRT_UN_SILU)
  case BCRT_UN_SIGMOID: UNARY_BWD(BCRT_UN_SIGMOID)
  case BCRT_UN_TANH: UNARY_BWD(BCRT_UN_TANH)
  default: UNARY_BWD(BCRT_UN_RELU)
#undef UNARY_BWD
  }
}

/* A broadcast operand's gradient: db[j] += k * sum of dy over the copies of b. */
void bcrt_sum_bcast(long n, long nb, float k, const float *dy, float *db) {
  for (long r = 0; r + nb <= n; r += nb)
    for (long j = 0; j < nb; j++) db[j] += k * dy[r + j];
}

/* A scaled (and activated) operand's backward (bcrt_add_sc and the fused
 * norms): with m = act(x) . s (s NULL: none, else ns = 1 or d values; act
 * -1: none), dx += k s act'(x) ds, and dsc[j] += k * sum over the rows of
 * act(x) ds. */
void bcrt_add_sc_bwd(int n, int d, float k, const float *ds, const float *x, const float *s,
                     int ns, int act, float *dx, float *dsc) {
  for (int i = 0; i < n; i++) {
    const float *g = crow_of(ds, i, d), *xr = crow_of(x, i, d);
    float *dr = row_of(dx, i, d);
    if (act < 0 && !s) {
      for (int j = 0; j < d; j++) dr[j] += k * g[j];
    } else if (act < 0 && ns == d) {
      for (int j = 0; j < d; j++) {
        dr[j] += k * s[j] * g[j];
        dsc[j] += k * xr[j] * g[j];
      }
    } else {
      float acc = 0.0f;
      for (int j = 0; j < d; j++) {
        float sj = s ? s[ns == d ? j : 0] : 1.0f;
        float dj = act < 0 ? 1.0f : unary_df(act, xr[j]);
        dr[j] += k * sj * dj * g[j];
        if (s && ns == d) dsc[j] += k * un_apply(act, xr[j]) * g[j];
        else acc += un_apply(act, xr[j]) * g[j];
      }
      if (s && ns != d) dsc[0] += k * acc;
    }
  }
}
