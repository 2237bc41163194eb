// rt_ref.c — the reference kernels of rt_ref.h: the slow, obviously correct
// oracle (double accumulation, libm) the runtime's kernels are tested
// against.  Linked into every test binary with testutil.c.
#include "rt_ref.h"

#include <math.h>
#include <stddef.h>

#include "blockc_rt.h"

static float *row_of(float *m, int i, int ld) { return m + (size_t)i * (size_t)ld; }
static const float *crow_of(const float *m, int i, int ld) {
  return m + (size_t)i * (size_t)ld;
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

