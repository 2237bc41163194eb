// test_attention.c — bcrt_attention, the tiled attention over a pool
// (runtime/src/attention.c), against a direct evaluation in double; and the
// training step's pair, bcrt_attention_train and bcrt_attention_bwd (the
// forward keeping log sum exps, the backward recomputing the weights),
// against one in double too (see "the training pair" below).
//
// Each case draws Q, K, V with row strides wider than the heads (as the
// fused projections lay them out), then checks every output element
// against softmax(cap(scale q . k)) v over exactly the keys the row sees
// (causal, sliding window, per-batch key counts, an absolute position
// row0 as in the step entry), in double; and the bytes on pools of 1..4
// threads against the pool-less call.  Sizes straddle the 64-row query
// blocks and the 256-key tiles; grouped-query heads include the one-row
// case that runs a group's heads as one block.
//
// Tolerance: float accumulation over at most a few hundred keys of
// softmax weights in [0, 1] and values in [-1, 1]: |err| <= 2e-5 *
// (1 + |ref|) holds with margin (the online softmax rescales by
// exp(m_old - m_new), exact to a few ulps; measured max ~3e-7).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

void openblas_set_num_threads(int n);

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct {
  int B, T, H, group, dh, S, causal, row0, window, lens;
  float cap;
  int rp;  // a position per batch row (rowpos) instead of row0
} acase;

// The batch rows' positions of a case with rp: different, from 0 up.
static int row_pos(const acase *c, int b) { return (c->row0 + 13 * b) % (c->S - c->T + 1); }

static double ref_at(const acase *c, const float *q, long ldq, const float *k, long ldkv,
                     long kvrows, long vcol, const int *nk, float scale, int b, int i, int h,
                     int col) {
  int n = nk ? nk[b] : c->S, pos = (c->rp ? row_pos(c, b) : c->row0) + i;
  int hi = c->causal && pos + 1 < n ? pos + 1 : n;
  int lo = c->window > 0 && pos + 1 - c->window > 0 ? pos + 1 - c->window : 0;
  if (lo >= hi) return 0.0;
  const float *qi = q + ((size_t)b * (size_t)c->T + (size_t)i) * (size_t)ldq + (size_t)h * (size_t)c->dh;
  int g = h / c->group;
  double m = -INFINITY, sum = 0, acc = 0;
  double *s = malloc(sizeof(double) * (size_t)(hi - lo));
  for (int j = lo; j < hi; j++) {
    const float *kj = k + ((size_t)b * (size_t)kvrows + (size_t)j) * (size_t)ldkv + (size_t)g * (size_t)c->dh;
    double d = 0;
    for (int t = 0; t < c->dh; t++) d += (double)qi[t] * kj[t];
    d *= scale;
    if (c->cap > 0) d = c->cap * tanh(d / c->cap);
    s[j - lo] = d;
    if (d > m) m = d;
  }
  for (int j = lo; j < hi; j++) {
    const float *vj = k + ((size_t)b * (size_t)kvrows + (size_t)j) * (size_t)ldkv + (size_t)g * (size_t)c->dh + vcol;
    double p = exp(s[j - lo] - m);
    sum += p;
    acc += p * vj[col];
  }
  free(s);
  return acc / sum;
}

static void run_case(const acase *c, bcrt_pool *const *pools, unsigned seed) {
  int KV = c->H / c->group;
  long ldq = (long)c->H * c->dh + 3, ldkv = 2L * KV * c->dh + 5, vcol = (long)KV * c->dh;
  long ldo = (long)c->H * c->dh + 1, kvrows = c->S + 2;
  size_t nq = (size_t)c->B * (size_t)c->T * (size_t)ldq;
  size_t nkv = (size_t)c->B * (size_t)kvrows * (size_t)ldkv;
  size_t no = (size_t)c->B * (size_t)c->T * (size_t)ldo;
  float *q = malloc(nq * sizeof *q), *k = malloc(nkv * sizeof *k);
  float *o = malloc(no * sizeof *o), *op = malloc(no * sizeof *op);
  assert_true(q && k && o && op);
  unsigned r = seed;
  for (size_t i = 0; i < nq; i++) q[i] = frand(&r) * 2.0f;
  for (size_t i = 0; i < nkv; i++) k[i] = frand(&r);
  for (size_t i = 0; i < no; i++) o[i] = 7.0f;  // the gaps between heads' columns stay 7
  int nk[4];
  for (int b = 0; b < c->B; b++) nk[b] = c->lens ? 1 + (c->S - 1) * (b + 1) / (c->B + 1) : c->S;
  const int *nkp = c->lens ? nk : NULL;
  long rowpos[4];
  for (int b = 0; b < c->B; b++) rowpos[b] = row_pos(c, b);
  const long *rpp = c->rp ? rowpos : NULL;
  float scale = 1.0f / sqrtf((float)c->dh);
  bcrt_attention(NULL, c->B, c->T, c->H, c->group, c->dh, q, ldq, k, ldkv, kvrows, vcol, nkp,
                 c->S, c->causal, c->row0, rpp, c->window, scale, c->cap, o, ldo);
  double worst = 0;
  for (int b = 0; b < c->B; b++)
    for (int i = 0; i < c->T; i++) {
      for (int h = 0; h < c->H; h++)
        for (int col = 0; col < c->dh; col++) {
          double want = ref_at(c, q, ldq, k, ldkv, kvrows, vcol, nkp, scale, b, i, h, col);
          float got = o[((size_t)b * (size_t)c->T + (size_t)i) * (size_t)ldo + (size_t)h * (size_t)c->dh + (size_t)col];
          double err = fabs(got - want) / (1.0 + fabs(want));
          if (!(err <= 2e-5))
            fail_msg("B=%d T=%d H=%d group=%d dh=%d S=%d causal=%d row0=%d window=%d cap=%g lens=%d: "
                     "b %d row %d head %d col %d: %.9g, want %.9g", c->B, c->T, c->H, c->group,
                     c->dh, c->S, c->causal, c->row0, c->window, (double)c->cap, c->lens, b, i, h,
                     col, (double)got, want);
          if (err > worst) worst = err;
        }
      assert_true(o[((size_t)b * (size_t)c->T + (size_t)i) * (size_t)ldo + (size_t)c->H * (size_t)c->dh] == 7.0f);
    }
  if (getenv("ATTN_WORST")) fprintf(stderr, "T=%d S=%d worst %.3g\n", c->T, c->S, worst);
  for (int t = 1; t <= 4; t++) {
    for (size_t i = 0; i < no; i++) op[i] = 7.0f;
    bcrt_attention(pools[t], c->B, c->T, c->H, c->group, c->dh, q, ldq, k, ldkv, kvrows, vcol,
                   nkp, c->S, c->causal, c->row0, rpp, c->window, scale, c->cap, op, ldo);
    if (memcmp(op, o, no * sizeof *o))
      fail_msg("T=%d H=%d: %d threads differ from the pool-less call", c->T, c->H, t);
  }
  // The training forward packs each head's keys and values once a call
  // (without a window, blocks of more than 8 rows), bcrt_attention each tile
  // as it goes: the same tiles, so the same bytes.
  if (!c->window && !c->rp && !c->row0) {
    float *lse = malloc((size_t)c->B * (size_t)c->H * (size_t)c->T * sizeof *lse);
    assert_non_null(lse);
    for (size_t i = 0; i < no; i++) op[i] = 7.0f;
    bcrt_attention_train(pools[2], c->B, c->T, c->H, c->group, c->dh, q, ldq, k, ldkv, kvrows,
                         vcol, nkp, c->S, c->causal, 0, scale, c->cap, 0, 0, 1.0f, op, ldo, lse);
    if (memcmp(op, o, no * sizeof *o))
      fail_msg("T=%d H=%d: packed once a call differs from packed a tile at a time", c->T, c->H);
    free(lse);
  }
  free(q);
  free(k);
  free(o);
  free(op);
}

static void test_attention_against_double(void **state) {
  (void)state;
  openblas_set_num_threads(1);
  bcrt_pool *pools[5] = {NULL};
  for (int t = 1; t <= 4; t++) assert_non_null(pools[t] = bcrt_pool_create(t));
  static const acase cases[] = {
      // B  T    H  g  dh  S    causal row0 window lens cap
      {1, 1, 1, 1, 8, 1, 1, 0, 0, 0, 0, 0},
      {1, 5, 2, 1, 8, 5, 0, 0, 0, 0, 0, 0},
      {2, 63, 4, 1, 16, 63, 1, 0, 0, 0, 0, 0},
      {1, 64, 2, 2, 33, 64, 1, 0, 0, 0, 0, 0},
      {2, 65, 4, 2, 8, 65, 1, 0, 0, 1, 0, 0},
      {1, 130, 2, 1, 64, 130, 0, 0, 0, 1, 0, 0},
      {1, 300, 2, 2, 16, 300, 1, 0, 0, 0, 0, 0},   // key tiles of 256: two
      {1, 300, 1, 1, 16, 300, 1, 0, 37, 0, 0, 0},  // a window inside a tile
      {2, 130, 2, 1, 8, 130, 1, 0, 3, 1, 0, 0},    // a tiny window, padded rows
      {1, 70, 2, 1, 8, 70, 1, 0, 0, 0, 5.0f, 0},   // a soft-cap
      {1, 9, 3, 1, 8, 20, 0, 0, 0, 0, 0, 0},       // cross-attention: S != T
      {2, 4, 3, 1, 8, 260, 0, 0, 0, 1, 0, 0},      // cross-attention, padded memories
      // the step entry: T new rows at row0 against a longer cache
      {1, 1, 8, 4, 64, 600, 1, 511, 0, 0, 0, 0},   // one position, GQA: the group as rows
      {2, 1, 4, 2, 16, 40, 1, 30, 0, 0, 0, 0},
      {1, 1, 4, 4, 16, 40, 1, 30, 8, 0, 2.0f, 0},  // GQA step with a window and a cap
      {1, 7, 4, 2, 16, 600, 1, 290, 0, 0, 0, 0},
      {1, 70, 2, 1, 16, 300, 1, 200, 50, 0, 0, 0},
      // rows at different positions stepping together (rowpos)
      {3, 1, 8, 4, 16, 64, 1, 5, 0, 0, 0, 1},
      {3, 1, 4, 1, 16, 64, 1, 40, 0, 0, 0, 1},
      {4, 3, 4, 2, 8, 90, 1, 0, 10, 0, 0, 1},
  };
  unsigned seed = 11;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], pools, seed++);
  for (int t = 1; t <= 4; t++) bcrt_pool_free(pools[t]);
}

// A non-finite score poisons its row only: a NaN query gives NaN outputs
// for that row, every other row stays finite.
static void test_attention_nan_row(void **state) {
  (void)state;
  enum { T = 5, D = 8 };
  float q[T * D], k[T * 2 * D], o[T * D];
  unsigned r = 3;
  for (int i = 0; i < T * D; i++) q[i] = frand(&r);
  for (int i = 0; i < T * 2 * D; i++) k[i] = frand(&r);
  q[2 * D + 1] = NAN;
  bcrt_attention(NULL, 1, T, 1, 1, D, q, D, k, 2 * D, T, D, NULL, T, 0, 0, NULL, 0, 0.3f, 0.0f, o, D);
  for (int i = 0; i < T; i++)
    for (int c = 0; c < D; c++)
      if (i == 2) assert_true(isnan(o[i * D + c]));
      else assert_true(isfinite(o[i * D + c]));
}

// --- the training pair: bcrt_attention_train and bcrt_attention_bwd ---------------
//
// A direct evaluation in double of one head's forward and backward, over
// exactly the keys each row sees, with dropout's masks drawn by
// bcrt_dropout itself (element ((b*H + h)*T + i)*kvrows + j): the kept
// weights p' = p * keep / (1 - p_drop), o = p' V; given dO,
// dV = p'^T dO, dp = keep / (1 - p_drop) * dO V^T, ds = p (dp - rowsum(p dp)),
// through the cap ds *= 1 - tanh^2(raw / cap), dQ = scale ds K, dK = scale ds^T Q.
// Tolerance: each gradient element sums up to S (or T) products of
// weights in [0, 1] (scaled by 1/(1 - p_drop)) and values in [-2, 2], in
// float, and the kernel's weights come back from the kept log sum exp
// (exp(s - lse), a few ulps of s): |err| <= 1e-4 * (1 + |ref|) with margin
// (measured max 3.9e-7 for these sizes, ATTN_WORST=1).
typedef struct {
  int B, T, H, group, dh, S, causal, window, lens;
  float cap, drop;
} tcase;

typedef struct {
  const tcase *c;
  long ldq, ldkv, vcol, kvrows, ldo;
  const float *q, *k, *dout;
  const int *nk;
  float scale;
  unsigned long long key;
  unsigned thr;
} tref;

static double keep_of(const tref *r, long e) {
  float one = 1.0f, y = 0.0f;
  bcrt_dropout(1, &one, &y, r->key, e, r->thr, 1.0f);
  return y;
}

// Head h of batch row b: o [T, dh], lse [T], dq [T, dh], dk, dv [kvrows, dh].
static void ref_head(const tref *r, int b, int h, double *o, double *lse, double *dq, double *dk,
                     double *dv) {
  const tcase *c = r->c;
  int T = c->T, S = c->S, dh = c->dh, g = h / c->group, n = r->nk ? r->nk[b] : S;
  double ds_scale = c->drop > 0 ? 1.0 / (1.0 - c->drop) : 1.0;
  double *p = calloc((size_t)T * (size_t)S, sizeof *p), *raw = calloc((size_t)T * (size_t)S, sizeof *raw);
  double *kp = calloc((size_t)T * (size_t)S, sizeof *kp);
  assert_true(p && raw && kp);
  const float *qb = r->q + (size_t)b * (size_t)T * (size_t)r->ldq + (size_t)h * (size_t)dh;
  const float *kb = r->k + (size_t)b * (size_t)r->kvrows * (size_t)r->ldkv + (size_t)g * (size_t)dh;
  const float *db = r->dout + (size_t)b * (size_t)T * (size_t)r->ldo + (size_t)h * (size_t)dh;
  memset(o, 0, sizeof *o * (size_t)T * (size_t)dh);
  memset(dq, 0, sizeof *dq * (size_t)T * (size_t)dh);
  memset(dk, 0, sizeof *dk * (size_t)r->kvrows * (size_t)dh);
  memset(dv, 0, sizeof *dv * (size_t)r->kvrows * (size_t)dh);
  for (int i = 0; i < T; i++) {
    int hi = c->causal && i + 1 < n ? i + 1 : n;
    int lo = c->window > 0 && i + 1 - c->window > 0 ? i + 1 - c->window : 0;
    double m = -INFINITY, sum = 0;
    for (int j = lo; j < hi; j++) {
      double d = 0;
      for (int t = 0; t < dh; t++) d += (double)qb[(size_t)i * r->ldq + t] * kb[(size_t)j * r->ldkv + t];
      d *= r->scale;
      raw[(size_t)i * S + j] = d;
      if (c->cap > 0) d = c->cap * tanh(d / c->cap);
      p[(size_t)i * S + j] = d;
      if (d > m) m = d;
    }
    for (int j = lo; j < hi; j++) sum += exp(p[(size_t)i * S + j] - m);
    lse[i] = lo < hi ? m + log(sum) : INFINITY;
    long row = ((long)b * c->H + h) * T + i;
    for (int j = lo; j < hi; j++) {
      double w = exp(p[(size_t)i * S + j] - m) / sum;
      p[(size_t)i * S + j] = w;
      kp[(size_t)i * S + j] = c->drop > 0 ? keep_of(r, row * r->kvrows + j) * ds_scale : 1.0;
    }
    for (int j = 0; j < S; j++)
      if (j < lo || j >= hi) p[(size_t)i * S + j] = 0, kp[(size_t)i * S + j] = 0;
    for (int j = lo; j < hi; j++)
      for (int t = 0; t < dh; t++)
        o[(size_t)i * dh + t] += p[(size_t)i * S + j] * kp[(size_t)i * S + j] *
                                 kb[(size_t)j * r->ldkv + r->vcol + t];
    // the backward of row i
    double *dp = calloc((size_t)S, sizeof *dp), dot = 0;
    assert_true(dp);
    for (int j = lo; j < hi; j++) {
      double d = 0;
      for (int t = 0; t < dh; t++) d += (double)db[(size_t)i * r->ldo + t] * kb[(size_t)j * r->ldkv + r->vcol + t];
      for (int t = 0; t < dh; t++)
        dv[(size_t)j * dh + t] += p[(size_t)i * S + j] * kp[(size_t)i * S + j] * db[(size_t)i * r->ldo + t];
      dp[j] = d * kp[(size_t)i * S + j];
      dot += p[(size_t)i * S + j] * dp[j];
    }
    for (int j = lo; j < hi; j++) {
      double ds = p[(size_t)i * S + j] * (dp[j] - dot);
      if (c->cap > 0) {
        double th = tanh(raw[(size_t)i * S + j] / c->cap);
        ds *= 1 - th * th;
      }
      for (int t = 0; t < dh; t++) {
        dq[(size_t)i * dh + t] += r->scale * ds * kb[(size_t)j * r->ldkv + t];
        dk[(size_t)j * dh + t] += r->scale * ds * qb[(size_t)i * r->ldq + t];
      }
    }
    free(dp);
  }
  free(p);
  free(raw);
  free(kp);
}

static void check_close(const tcase *c, const char *what, double got, double want, double *worst) {
  double err = fabs(got - want) / (1.0 + fabs(want));
  if (!(err <= 1e-4))
    fail_msg("B=%d T=%d H=%d group=%d dh=%d S=%d causal=%d window=%d lens=%d cap=%g drop=%g: "
             "%s %.9g, want %.9g", c->B, c->T, c->H, c->group, c->dh, c->S, c->causal, c->window,
             c->lens, (double)c->cap, (double)c->drop, what, got, want);
  if (err > *worst) *worst = err;
}

static void run_train_case(const tcase *c, bcrt_pool *const *pools, unsigned seed) {
  int KV = c->H / c->group;
  long ldq = (long)c->H * c->dh + 3, ldkv = 2L * KV * c->dh + 5, vcol = (long)KV * c->dh;
  long ldo = (long)c->H * c->dh + 1, kvrows = c->S;
  size_t nq = (size_t)c->B * (size_t)c->T * (size_t)ldq, nkv = (size_t)c->B * (size_t)kvrows * (size_t)ldkv;
  size_t no = (size_t)c->B * (size_t)c->T * (size_t)ldo, nl = (size_t)c->B * (size_t)c->H * (size_t)c->T;
  float *q = malloc(nq * 4), *k = malloc(nkv * 4), *o = malloc(no * 4), *dout = malloc(no * 4);
  float *lse = malloc(nl * 4), *dq = malloc(nq * 4), *dk = malloc(nkv * 4);
  float *o2 = malloc(no * 4), *lse2 = malloc(nl * 4), *dq2 = malloc(nq * 4), *dk2 = malloc(nkv * 4);
  assert_true(q && k && o && dout && lse && dq && dk && o2 && lse2 && dq2 && dk2);
  unsigned rs = seed;
  for (size_t i = 0; i < nq; i++) q[i] = frand(&rs) * 2.0f;
  for (size_t i = 0; i < nkv; i++) k[i] = frand(&rs);
  for (size_t i = 0; i < no; i++) dout[i] = frand(&rs);
  int nk[4];
  for (int b = 0; b < c->B; b++) nk[b] = c->lens ? 1 + (c->S - 1) * (b + 1) / (c->B + 1) : c->S;
  float scale = 1.0f / sqrtf((float)c->dh);
  unsigned thr = c->drop > 0 ? bcrt_drop_threshold(c->drop) : 0;
  unsigned long long key = bcrt_drop_key(7, 3, 2);
  float dsc = c->drop > 0 ? (float)(1.0 / (1.0 - c->drop)) : 1.0f;
  tref r = {.c = c, .ldq = ldq, .ldkv = ldkv, .vcol = vcol, .kvrows = kvrows, .ldo = ldo, .q = q,
            .k = k, .dout = dout, .nk = c->lens ? nk : NULL, .scale = scale, .key = key, .thr = thr};
  for (int t = 0; t <= 4; t++) {  // t = 0: the pool-less call, the one checked in double
    float *oo = t ? o2 : o, *ll = t ? lse2 : lse, *qq = t ? dq2 : dq, *kk = t ? dk2 : dk;
    for (size_t i = 0; i < no; i++) oo[i] = 7.0f;
    for (size_t i = 0; i < nq; i++) qq[i] = 0.5f;  // accumulated into: the gaps stay 0.5
    for (size_t i = 0; i < nkv; i++) kk[i] = 0.25f;
    bcrt_attention_train(t ? pools[t] : NULL, c->B, c->T, c->H, c->group, c->dh, q, ldq, k, ldkv,
                         kvrows, vcol, r.nk, c->S, c->causal, c->window, scale, c->cap, key, thr,
                         dsc, oo, ldo, ll);
    bcrt_attention_bwd(t ? pools[t] : NULL, c->B, c->T, c->H, c->group, c->dh, q, ldq, k, ldkv,
                       kvrows, vcol, r.nk, c->S, c->causal, c->window, scale, c->cap, key, thr,
                       dsc, oo, dout, ldo, ll, qq, kk);
    if (t && (memcmp(o, o2, no * 4) || memcmp(lse, lse2, nl * 4) || memcmp(dq, dq2, nq * 4) ||
              memcmp(dk, dk2, nkv * 4)))
      fail_msg("T=%d H=%d: %d threads differ from the pool-less call", c->T, c->H, t);
  }
  size_t T = (size_t)c->T, dh = (size_t)c->dh;
  double *ro = malloc(T * dh * 8), *rl = malloc(T * 8), *rq = malloc(T * dh * 8);
  double *rk = malloc((size_t)kvrows * dh * 8), *rv = malloc((size_t)kvrows * dh * 8);
  double *sk = calloc((size_t)kvrows * dh * (size_t)KV, 8), *sv = calloc((size_t)kvrows * dh * (size_t)KV, 8);
  assert_true(ro && rl && rq && rk && rv && sk && sv);
  double worst = 0;
  for (int b = 0; b < c->B; b++) {
    memset(sk, 0, (size_t)kvrows * dh * (size_t)KV * 8);
    memset(sv, 0, (size_t)kvrows * dh * (size_t)KV * 8);
    for (int h = 0; h < c->H; h++) {
      ref_head(&r, b, h, ro, rl, rq, rk, rv);
      for (size_t i = 0; i < T; i++) {
        size_t row = (size_t)b * T + i;
        float l = lse[((size_t)b * (size_t)c->H + (size_t)h) * T + i];
        if (isinf(rl[i])) assert_true(l == FLT_MAX);
        else check_close(c, "lse", l, rl[i], &worst);
        for (size_t t = 0; t < dh; t++) {
          check_close(c, "o", o[row * (size_t)ldo + (size_t)h * dh + t], ro[i * dh + t], &worst);
          check_close(c, "dq", dq[row * (size_t)ldq + (size_t)h * dh + t] - 0.5f, rq[i * dh + t], &worst);
        }
      }
      for (size_t j = 0; j < (size_t)kvrows * dh; j++) {
        sk[(size_t)(h / c->group) * (size_t)kvrows * dh + j] += rk[j];
        sv[(size_t)(h / c->group) * (size_t)kvrows * dh + j] += rv[j];
      }
    }
    for (int g = 0; g < KV; g++)
      for (size_t j = 0; j < (size_t)kvrows; j++)
        for (size_t t = 0; t < dh; t++) {
          size_t at = ((size_t)b * (size_t)kvrows + j) * (size_t)ldkv + (size_t)g * dh + t;
          check_close(c, "dk", dk[at] - 0.25f, sk[(size_t)g * (size_t)kvrows * dh + j * dh + t], &worst);
          check_close(c, "dv", dk[at + (size_t)vcol] - 0.25f, sv[(size_t)g * (size_t)kvrows * dh + j * dh + t], &worst);
        }
  }
  // the gaps between heads' columns are never written
  for (size_t i = 0; i < (size_t)c->B * T; i++) {
    assert_true(dq[i * (size_t)ldq + (size_t)c->H * dh] == 0.5f);
    assert_true(o[i * (size_t)ldo + (size_t)c->H * dh] == 7.0f);
  }
  if (getenv("ATTN_WORST")) fprintf(stderr, "train T=%d S=%d worst %.3g\n", c->T, c->S, worst);
  free(q), free(k), free(o), free(dout), free(lse), free(dq), free(dk);
  free(o2), free(lse2), free(dq2), free(dk2);
  free(ro), free(rl), free(rq), free(rk), free(rv), free(sk), free(sv);
}

static void test_attention_train_bwd(void **state) {
  (void)state;
  openblas_set_num_threads(1);
  bcrt_pool *pools[5] = {NULL};
  for (int t = 1; t <= 4; t++) assert_non_null(pools[t] = bcrt_pool_create(t));
  static const tcase cases[] = {
      // B  T    H  g  dh  S    causal window lens cap drop
      {1, 1, 1, 1, 8, 1, 1, 0, 0, 0, 0},
      {1, 5, 2, 1, 8, 5, 0, 0, 0, 0, 0},
      {2, 63, 4, 1, 16, 63, 1, 0, 0, 0, 0},
      {1, 64, 2, 2, 33, 64, 1, 0, 0, 0, 0},     // GQA, an odd head size
      {2, 65, 4, 2, 8, 65, 1, 0, 1, 0, 0},      // padded keys
      {1, 130, 2, 1, 64, 130, 0, 0, 1, 0, 0},   // three query and key blocks
      {1, 150, 2, 1, 16, 150, 1, 37, 0, 0, 0},  // a window across blocks
      {2, 70, 2, 1, 8, 70, 1, 3, 1, 0, 0},      // a tiny window, padded keys
      {1, 70, 2, 1, 8, 70, 1, 0, 0, 5.0f, 0},   // a soft-cap
      {2, 67, 4, 2, 8, 67, 1, 0, 1, 0, 0.25f},  // dropout on the weights, GQA, padding
      {1, 9, 3, 1, 8, 20, 0, 0, 0, 0, 0.1f},    // cross-attention: S != T, dropout
      {2, 4, 3, 1, 8, 130, 0, 0, 1, 2.0f, 0},   // cross-attention, padded memories, a cap
  };
  unsigned seed = 101;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_train_case(&cases[i], pools, seed++);
  for (int t = 1; t <= 4; t++) bcrt_pool_free(pools[t]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_against_double),
      cmocka_unit_test(test_attention_nan_row),
      cmocka_unit_test(test_attention_train_bwd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
