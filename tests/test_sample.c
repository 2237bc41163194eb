// test_sample.c — the runtime's token sampler (runtime/src/sample.c):
// the generator against an independent Python rendering of its documented
// algorithm, greedy ties and NaN/inf logits, the top-k and top-p masks on
// hand-made logits, temperature, seeded determinism, one draw per token,
// frequencies (chi-square with a fixed seed, so the bound cannot flake),
// and bcrt_sample against a slow reference written from blockc_rt.h's
// description (qsort, no heap).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

#define VMAX 64

static int sample(const float *l, int V, double T, int k, double p, bcrt_rng *r) {
  int32_t scratch[VMAX];
  assert_true(BCRT_SAMPLE_SCRATCH_BYTES(V) <= sizeof scratch);
  return bcrt_sample(l, V, T, k, p, r, scratch);
}

// Draw n tokens and count them.
static void counts(const float *l, int V, double T, int k, double p, unsigned long long seed,
                   int n, int *cnt) {
  bcrt_rng r;
  bcrt_rng_seed(&r, seed);
  memset(cnt, 0, (size_t)V * sizeof *cnt);
  for (int i = 0; i < n; i++) {
    int id = sample(l, V, T, k, p, &r);
    assert_true(id >= 0 && id < V);
    cnt[id]++;
  }
}

// The first outputs for seed 42, computed by a Python transcription of the
// documented splitmix64 seeding and xoshiro256** step; and blockc's own
// generator for weights gives the same stream.
static void test_rng_stream(void **state) {
  (void)state;
  bcrt_rng r;
  bcrt_rng_seed(&r, 42);
  assert_true(bcrt_rng_next(&r) == 0x15780b2e0c2ec716ULL);
  assert_true(bcrt_rng_next(&r) == 0x6104d9866d113a7eULL);
  assert_true(bcrt_rng_next(&r) == 0xae17533239e499a1ULL);
  bc_rng b;
  bc_rng_seed(&b, 7);
  bcrt_rng_seed(&r, 7);
  for (int i = 0; i < 100; i++) assert_true(bc_rng_next(&b) == bcrt_rng_next(&r));
  for (int i = 0; i < 1000; i++) {
    double u = bcrt_rng_uniform(&r);
    assert_true(u >= 0 && u < 1);
  }
}

static void test_greedy(void **state) {
  (void)state;
  float l[5] = {1, 3, -2, 3, 0};
  assert_int_equal(bcrt_sample(l, 5, 0, 0, 1, NULL, NULL), 1);  // lowest id on the tie
  l[1] = NAN;
  assert_int_equal(bcrt_sample(l, 5, 0, 0, 1, NULL, NULL), 3);  // NaN never wins
  l[0] = INFINITY;
  assert_int_equal(bcrt_sample(l, 5, 0, 0, 1, NULL, NULL), 0);
  float bad[3] = {NAN, -INFINITY, NAN};
  assert_int_equal(bcrt_sample(bad, 3, 0, 0, 1, NULL, NULL), -1);
  bcrt_rng r;
  bcrt_rng_seed(&r, 1);
  assert_int_equal(sample(bad, 3, 1.0, 0, 1, &r), -1);
  float neg[3] = {-INFINITY, -1e30f, -INFINITY};  // a finite logit among -inf
  assert_int_equal(sample(neg, 3, 0.7, 0, 0.5, &r), 1);
  // Greedy draws nothing: the stream is where it was.
  bcrt_rng a, b;
  bcrt_rng_seed(&a, 9);
  b = a;
  float g[3] = {0, 1, 2};
  assert_int_equal(bcrt_sample(g, 3, 0, 0, 1, &a, NULL), 2);
  assert_memory_equal(&a, &b, sizeof a);
}

static void test_bad_arguments(void **state) {
  (void)state;
  float l[3] = {0, 1, 2};
  bcrt_rng r;
  bcrt_rng_seed(&r, 1);
  int32_t s[3];
  assert_int_equal(bcrt_sample(NULL, 3, 1, 0, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 0, 1, 0, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, -1, 0, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, NAN, 0, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, INFINITY, 0, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, -1, 1, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, 0, 0, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, 0, 1.5, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, 0, NAN, &r, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, 0, 1, NULL, s), -1);
  assert_int_equal(bcrt_sample(l, 3, 1, 0, 1, &r, NULL), -1);
}

// top-k keeps the k largest (lower id on ties at the boundary).
static void test_top_k_mask(void **state) {
  (void)state;
  float l[6] = {1, 5, 3, 5, 2, 3};
  int c[6];
  counts(l, 6, 1.0, 2, 1.0, 3, 4000, c);
  assert_true(c[1] > 0 && c[3] > 0);
  assert_int_equal(c[0] + c[2] + c[4] + c[5], 0);
  counts(l, 6, 1.0, 3, 1.0, 3, 4000, c);  // the 3 at id 2 is kept, the one at id 5 not
  assert_true(c[1] > 0 && c[3] > 0 && c[2] > 0);
  assert_int_equal(c[0] + c[4] + c[5], 0);
  counts(l, 6, 1.0, 1, 1.0, 3, 100, c);  // top_k = 1: greedy
  assert_int_equal(c[1], 100);
  counts(l, 6, 50.0, 6, 1.0, 3, 4000, c);  // k = V: off
  for (int i = 0; i < 6; i++) assert_true(c[i] > 0);
  counts(l, 6, 50.0, 99, 1.0, 3, 4000, c);
  for (int i = 0; i < 6; i++) assert_true(c[i] > 0);
}

// top-p keeps the shortest prefix whose probability reaches p.
static void test_top_p_mask(void **state) {
  (void)state;
  // probabilities 0.05, 0.5, 0.15, 0.3 (ids 0..3)
  float l[4] = {logf(0.05f), logf(0.5f), logf(0.15f), logf(0.3f)};
  int c[4];
  counts(l, 4, 1.0, 0, 0.4, 5, 3000, c);  // 0.5 >= 0.4: the top token only
  assert_int_equal(c[1], 3000);
  counts(l, 4, 1.0, 0, 0.79, 5, 3000, c);  // 0.5 + 0.3
  assert_true(c[1] > 0 && c[3] > 0);
  assert_int_equal(c[0] + c[2], 0);
  counts(l, 4, 1.0, 0, 0.81, 5, 3000, c);  // + 0.15
  assert_true(c[1] > 0 && c[3] > 0 && c[2] > 0);
  assert_int_equal(c[0], 0);
  counts(l, 4, 1.0, 0, 0.999, 5, 3000, c);
  for (int i = 0; i < 4; i++) assert_true(c[i] > 0);
  // top-k first, then top-p over what is left: k = 2 leaves 0.5 / 0.8 =
  // 0.625 and 0.375, so p = 0.6 keeps the top token only.
  counts(l, 4, 1.0, 2, 0.6, 5, 3000, c);
  assert_int_equal(c[1], 3000);
  counts(l, 4, 1.0, 2, 0.7, 5, 3000, c);
  assert_true(c[1] > 0 && c[3] > 0);
  assert_int_equal(c[0] + c[2], 0);
}

// Chi-square of counts against probabilities q (n draws).
static double chi2(const int *c, const double *q, int V, int n) {
  double x = 0;
  for (int i = 0; i < V; i++) {
    double e = q[i] * n;
    x += (c[i] - e) * (c[i] - e) / e;
  }
  return x;
}

static void softmax_ref(const float *l, int V, double T, double *q) {
  double m = -INFINITY, s = 0;
  for (int i = 0; i < V; i++) m = fmax(m, l[i]);
  for (int i = 0; i < V; i++) s += q[i] = exp((l[i] - m) / T);
  for (int i = 0; i < V; i++) q[i] /= s;
}

// Frequencies follow softmax(l / T): 20000 draws from fixed seeds, so each
// statistic is a fixed number and cannot flake; the bound 30 is the 5e-6
// tail of a chi-square with 4 degrees of freedom (a correct sampler sits
// far below it), and the wrong temperature's softmax is far above 200.
static void test_frequencies_and_temperature(void **state) {
  (void)state;
  float l[5] = {0.0f, 1.0f, 0.5f, -1.0f, 2.0f};
  double q[5], q2[5];
  int c[5];
  const int n = 20000;
  for (unsigned long long seed = 1; seed <= 3; seed++) {
    double Ts[3] = {1.0, 0.5, 2.0};
    for (int t = 0; t < 3; t++) {
      softmax_ref(l, 5, Ts[t], q);
      counts(l, 5, Ts[t], 0, 1.0, seed, n, c);
      assert_true(chi2(c, q, 5, n) < 30);
      softmax_ref(l, 5, Ts[(t + 1) % 3], q2);  // the wrong temperature is far off
      assert_true(chi2(c, q2, 5, n) > 200);
    }
  }
  // A low temperature concentrates on the argmax, a high one flattens.
  counts(l, 5, 0.05, 0, 1.0, 11, 2000, c);
  assert_true(c[4] > 1990);
  counts(l, 5, 1000.0, 0, 1.0, 11, 5000, c);
  for (int i = 0; i < 5; i++) assert_true(c[i] > 800 && c[i] < 1200);
}

// +inf logits: the +inf tokens only, equally likely.
static void test_inf_logits(void **state) {
  (void)state;
  float l[5] = {0, INFINITY, NAN, INFINITY, 1e30f};
  int c[5];
  counts(l, 5, 1.0, 0, 1.0, 2, 4000, c);
  assert_int_equal(c[0] + c[2] + c[4], 0);
  assert_true(c[1] > 1800 && c[3] > 1800);
  counts(l, 5, 1.0, 1, 1.0, 2, 100, c);  // rank order: id 1 before id 3
  assert_int_equal(c[1], 100);
  float m[4] = {NAN, 2.0f, NAN, 1.0f};  // NaN never drawn
  counts(m, 4, 3.0, 0, 1.0, 2, 4000, c);
  assert_int_equal(c[0] + c[2], 0);
  assert_true(c[1] > 0 && c[3] > 0);
}

static void test_seeded_determinism(void **state) {
  (void)state;
  float l[16];
  for (int i = 0; i < 16; i++) l[i] = (float)((i * 7) % 5) * 0.3f;
  int a[200], b[200], d[200];
  bcrt_rng r1, r2, r3;
  bcrt_rng_seed(&r1, 123);
  bcrt_rng_seed(&r2, 123);
  bcrt_rng_seed(&r3, 124);
  for (int i = 0; i < 200; i++) {
    bcrt_rng before = r1;
    a[i] = sample(l, 16, 0.8, 5, 0.9, &r1);
    bcrt_rng_next(&before);  // exactly one draw per sampled token
    assert_memory_equal(&before, &r1, sizeof before);
    b[i] = sample(l, 16, 0.8, 5, 0.9, &r2);
    d[i] = sample(l, 16, 0.8, 5, 0.9, &r3);
  }
  assert_memory_equal(a, b, sizeof a);
  assert_true(memcmp(a, d, sizeof a) != 0);
}

// --- a slow reference written from the header's description ---------------

static const float *ref_l;
static int ref_cmp(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  if (ref_l[a] != ref_l[b]) return ref_l[a] > ref_l[b] ? -1 : 1;
  return a - b;
}

static int ref_sample(const float *l, int V, double T, int k, double p, bcrt_rng *r) {
  int ord[VMAX], n = 0;
  bool inf = false, kept[VMAX] = {0};
  for (int i = 0; i < V; i++) inf |= l[i] == INFINITY;
  for (int i = 0; i < V; i++)
    if (inf ? l[i] == INFINITY : !isnan(l[i]) && l[i] != -INFINITY) ord[n++] = i;
  if (!n) return -1;
  ref_l = l;
  qsort(ord, (size_t)n, sizeof *ord, ref_cmp);
  if (T == 0) return ord[0];
  double lmax = l[ord[0]];
#define W(i) (inf ? 1.0 : exp(((double)l[i] - lmax) / T))
  int m = k > 0 && k < n ? k : n;
  double s = 0;
  if (m < n) {
    for (int j = 0; j < m; j++) s += W(ord[j]);
  } else {
    for (int i = 0; i < V; i++)
      if (inf ? l[i] == INFINITY : !isnan(l[i]) && l[i] != -INFINITY) s += W(i);
  }
  if (p < 1) {
    double c = 0;
    for (int j = 0; j < m; j++) {
      c += W(ord[j]) / s;
      if (c >= p) {
        m = j + 1;
        break;
      }
    }
  }
  for (int j = 0; j < m; j++) kept[ord[j]] = true;
  double tot = 0, acc = 0;
  int last = -1;
  for (int i = 0; i < V; i++)
    if (kept[i]) tot += W(i), last = i;
  double target = bcrt_rng_uniform(r) * tot;
  for (int i = 0; i < V; i++)
    if (kept[i] && (acc += W(i)) > target) return i;
  return last;
#undef W
}

static void test_against_reference(void **state) {
  (void)state;
  bc_rng g;
  bc_rng_seed(&g, 5);
  for (int trial = 0; trial < 3000; trial++) {
    int V = 1 + (int)(bc_rng_next(&g) % VMAX);
    float l[VMAX];
    for (int i = 0; i < V; i++) {
      int kind = (int)(bc_rng_next(&g) % 40);
      // few distinct values, so ties are common; now and then NaN / inf
      l[i] = kind == 0 ? NAN : kind == 1 ? -INFINITY : kind == 2 && trial % 7 == 0 ? INFINITY
                                                    : (float)(bc_rng_next(&g) % 9) * 0.25f - 1.0f;
    }
    double T = trial % 5 == 0 ? 0.0 : 0.2 + 2.0 * bc_rng_uniform(&g);
    int k = (int)(bc_rng_next(&g) % 6) * (trial % 3 != 0);
    double p = trial % 4 == 0 ? 1.0 : 0.05 + 0.95 * bc_rng_uniform(&g);
    bcrt_rng r1, r2;
    bcrt_rng_seed(&r1, (unsigned long long)trial);
    r2 = r1;
    int got = sample(l, V, T, k, p, &r1), want = ref_sample(l, V, T, k, p, &r2);
    if (got != want) fail_msg("trial %d: V %d T %g k %d p %g: got %d, reference %d", trial, V, T, k, p, got, want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng_stream),
      cmocka_unit_test(test_greedy),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_top_k_mask),
      cmocka_unit_test(test_top_p_mask),
      cmocka_unit_test(test_frequencies_and_temperature),
      cmocka_unit_test(test_inf_logits),
      cmocka_unit_test(test_seeded_determinism),
      cmocka_unit_test(test_against_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
