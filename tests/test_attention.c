// test_attention.c — bcrt_attention, the tiled attention over a pool
// (runtime/src/attention.c), against a direct evaluation in double.
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_against_double),
      cmocka_unit_test(test_attention_nan_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
