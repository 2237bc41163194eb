// test_optim.c — the optimizer kernels (runtime/src/optim.c): AdamW and SGD
// against hand-computed steps and against PyTorch's own numbers
// (tests/optim_ref.h, written by tools/optim_ref.py), clipping by global
// norm, the learning-rate schedules at their boundaries; then the emitted
// training step (blockc_train_*): gradient accumulation, a loss that falls,
// JIT and AOT agreeing bit for bit, save/load continuing bit for bit.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockc.h"
#include "blockc_rt.h"
#include "optim_ref.h"

// Max |a - b| / max(|b|, 1e-30) in ulps of float at b (so 0 means bit-equal).
static double ulps(float a, float b) {
  if (a == b) return 0;
  float u = nextafterf(fabsf(b), INFINITY) - fabsf(b);
  return fabs((double)a - (double)b) / u;
}

static void expect_ulps(const char *what, int step, const float *a, const float *b, int n,
                        double max_ulps) {
  for (int i = 0; i < n; i++)
    if (!(ulps(a[i], b[i]) <= max_ulps))
      fail_msg("%s step %d [%d]: %.9g vs PyTorch %.9g (%.1f ulp)", what, step + 1, i, a[i], b[i],
               ulps(a[i], b[i]));
}

// One AdamW step by hand (double, the formulas of the torch.optim.AdamW docs).
static void test_adamw_hand(void **state) {
  (void)state;
  float p[3] = {1.0f, -2.0f, 0.5f}, m[3] = {0}, v[3] = {0};
  const float g1[3] = {0.1f, -0.2f, 0.0f}, g2[3] = {0.3f, 0.1f, -0.4f};
  double lr = 0.1, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.5;
  double ep[3] = {1.0, -2.0, 0.5}, em[3] = {0}, ev[3] = {0};
  const float *gs[2] = {g1, g2};
  for (int t = 1; t <= 2; t++) {
    bcrt_adamw(3, p, gs[t - 1], m, v, lr, b1, b2, eps, wd, t);
    for (int i = 0; i < 3; i++) {
      double g = gs[t - 1][i];
      ep[i] *= 1 - lr * wd;
      em[i] = b1 * em[i] + (1 - b1) * g;
      ev[i] = b2 * ev[i] + (1 - b2) * g * g;
      double mh = em[i] / (1 - pow(b1, t)), vh = ev[i] / (1 - pow(b2, t));
      ep[i] -= lr * mh / (sqrt(vh) + eps);
      assert_true(fabs(p[i] - ep[i]) < 1e-6);
      assert_true(fabs(m[i] - em[i]) < 1e-7);
      assert_true(fabs(v[i] - ev[i]) < 1e-9);
    }
  }
  // Step 1 with bias correction moves every element with a non-zero gradient by
  // about lr (m^/sqrt(v^) = sign(g)): the hallmark of the correction.
  float q[2] = {0, 0}, qm[2] = {0}, qv[2] = {0};
  const float gq[2] = {1e-3f, -5.0f};
  bcrt_adamw(2, q, gq, qm, qv, 0.01, 0.9, 0.999, 1e-8, 0.0, 1);
  assert_true(fabs(q[0] + 0.01) < 1e-6 && fabs(q[1] - 0.01) < 1e-6);
  // step < 1 and n <= 0 touch nothing
  bcrt_adamw(2, q, gq, qm, qv, 0.01, 0.9, 0.999, 1e-8, 0.0, 0);
  assert_true(fabs(q[0] + 0.01) < 1e-6);
}

static void test_sgd_hand(void **state) {
  (void)state;
  float p[2] = {1.0f, -1.0f}, buf[2] = {7, 7};
  const float g[2] = {0.5f, 0.25f};
  // plain: p -= lr g
  bcrt_sgd(2, p, g, NULL, 0.1, 0.0, 0.0, 0, 1);
  assert_true(fabsf(p[0] - 0.95f) < 1e-7f && fabsf(p[1] + 1.025f) < 1e-7f);
  // momentum: step 1 buf = d (whatever it held), step 2 buf = mu buf + d
  float q[1] = {2.0f}, b[1] = {123.0f};
  const float gq[1] = {1.0f};
  bcrt_sgd(1, q, gq, b, 0.1, 0.9, 0.1, 0, 1);  // d = 1 + 0.1*2 = 1.2; buf = 1.2; q = 2 - .12
  assert_true(fabsf(b[0] - 1.2f) < 1e-6f && fabsf(q[0] - 1.88f) < 1e-6f);
  bcrt_sgd(1, q, gq, b, 0.1, 0.9, 0.1, 0, 2);  // d = 1.188; buf = 1.08 + 1.188 = 2.268
  assert_true(fabsf(b[0] - 2.268f) < 1e-6f && fabsf(q[0] - (1.88f - 0.2268f)) < 1e-6f);
  // nesterov: d + mu buf
  float r[1] = {0.0f}, rb[1] = {0};
  bcrt_sgd(1, r, gq, rb, 1.0, 0.5, 0.0, 1, 1);  // buf = 1, d = 1 + .5 = 1.5
  assert_true(fabsf(r[0] + 1.5f) < 1e-7f);
  (void)buf;
}

// Against PyTorch: with FMA (a -march=native build here), bit for bit; a
// build without is allowed a few ulps over the steps.
static void run_ref(const char *name, int kind, const float (*want_p)[OREF_N],
                    const float (*want_a)[OREF_N], const float (*want_b)[OREF_N], double lr,
                    double b1, double b2, double eps, double wd, int nesterov) {
  float p[OREF_N], a[OREF_N] = {0}, b[OREF_N] = {0};
  memcpy(p, oref_p0, sizeof p);
  double tol = bcrt_optim_fused() ? 0 : 8;
  for (int t = 0; t < OREF_STEPS; t++) {
    if (kind == 0)
      bcrt_adamw(OREF_N, p, oref_g[t], a, b, lr, b1, b2, eps, wd, t + 1);
    else
      bcrt_sgd(OREF_N, p, oref_g[t], want_a ? a : NULL, lr, b1, wd, nesterov, t + 1);
    expect_ulps(name, t, p, want_p[t], OREF_N, tol);
    if (want_a) expect_ulps(name, t, a, want_a[t], OREF_N, tol);
    if (want_b) expect_ulps(name, t, b, want_b[t], OREF_N, tol);
  }
}

static void test_vs_pytorch(void **state) {
  (void)state;
  run_ref("adamw", 0, oref_adamw_p, oref_adamw_exp_avg, oref_adamw_exp_avg_sq, 1e-2, 0.9, 0.999,
          1e-8, 0.0, 0);
  run_ref("adamw_wd", 0, oref_adamw_wd_p, oref_adamw_wd_exp_avg, oref_adamw_wd_exp_avg_sq, 3e-2,
          0.8, 0.95, 1e-6, 0.1, 0);
  run_ref("sgd", 1, oref_sgd_p, NULL, NULL, 0.1, 0.0, 0, 0, 0.0, 0);
  run_ref("sgd_mom", 1, oref_sgd_mom_p, oref_sgd_mom_momentum_buffer, NULL, 0.05, 0.9, 0, 0,
          0.01, 0);
  run_ref("sgd_nesterov", 1, oref_sgd_nesterov_p, oref_sgd_nesterov_momentum_buffer, NULL, 0.05,
          0.9, 0, 0, 0.01, 1);
}

// A long tensor: the vector body and the tail agree with an element-wise run.
static void test_adamw_lanes(void **state) {
  (void)state;
  enum { N = 203 };
  float p[N], g[N], m[N] = {0}, v[N] = {0};
  tu_fill(p, N, 3);
  tu_fill(g, N, 4);
  float p1[N], m1[N] = {0}, v1[N] = {0};
  memcpy(p1, p, sizeof p);
  for (int t = 1; t <= 3; t++) {
    bcrt_adamw(N, p, g, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
    for (int i = 0; i < N; i++) bcrt_adamw(1, p1 + i, g + i, m1 + i, v1 + i, 1e-3, 0.9, 0.95, 1e-8, 0.1, t);
  }
  assert_memory_equal(p, p1, sizeof p);
  assert_memory_equal(m, m1, sizeof m);
  assert_memory_equal(v, v1, sizeof v);
}

static void test_clip(void **state) {
  (void)state;
  float a[OREF_N], b[3] = {3.0f, -4.0f, 12.0f};
  memcpy(a, oref_g[0], sizeof a);
  double ss = bcrt_sumsq(OREF_N, a) + bcrt_sumsq(3, b);
  double norm = sqrt(ss);
  assert_true(fabs(norm - oref_clip_norm) <= 1e-6 * oref_clip_norm);
  double c = bcrt_clip_coef(norm, 1.0);
  assert_true(c < 1.0);
  bcrt_scale(OREF_N, a, (float)c);
  bcrt_scale(3, b, (float)c);
  expect_ulps("clip a", 0, a, oref_clip_a, OREF_N, 2);
  expect_ulps("clip b", 0, b, oref_clip_b, 3, 2);
  // below the threshold and clipping off: factor 1
  assert_true(bcrt_clip_coef(0.5, 1.0) == 1.0);
  assert_true(bcrt_clip_coef(100.0, 0.0) == 1.0);
  // sumsq: exact on integers, any length (vector lanes and tail)
  float ones[37];
  for (int i = 0; i < 37; i++) ones[i] = (float)(i % 5);
  double want = 0;
  for (int i = 0; i < 37; i++) want += (double)(i % 5) * (i % 5);
  assert_true(bcrt_sumsq(37, ones) == want);
  assert_true(bcrt_sumsq(0, ones) == 0.0);
}

static void test_schedules(void **state) {
  (void)state;
  const double lr = 6e-4, mn = 6e-5, pi = 3.14159265358979323846;
  const long W = 10, N = 100;
  // warm-up: (step+1)/W, reaching lr at step W-1
  for (int k = BCRT_LR_CONSTANT; k <= BCRT_LR_COSINE; k++) {
    assert_true(fabs(bcrt_lr_at(k, 0, N, W, lr, mn) - lr / W) < 1e-18);
    assert_true(fabs(bcrt_lr_at(k, W - 1, N, W, lr, mn) - lr) < 1e-18);
    assert_true(fabs(bcrt_lr_at(k, W, N, W, lr, mn) - lr) < 1e-18);  // decay ratio 0
  }
  // the end of the decay: ratio (N-1-W)/(N-W)
  double r = (double)(N - 1 - W) / (double)(N - W);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_COSINE, N - 1, N, W, lr, mn) -
                   (mn + 0.5 * (1 + cos(pi * r)) * (lr - mn))) < 1e-18);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_LINEAR, N - 1, N, W, lr, mn) - (lr - r * (lr - mn))) < 1e-18);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_COSINE, N, N, W, lr, mn) - mn) < 1e-18);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_COSINE, 5 * N, N, W, lr, mn) - mn) < 1e-18);  // clamped
  assert_true(fabs(bcrt_lr_at(BCRT_LR_COSINE, 55, N, W, lr, mn) - (mn + 0.5 * (lr - mn))) < 1e-15);
  assert_true(bcrt_lr_at(BCRT_LR_CONSTANT, N - 1, N, W, lr, mn) == lr);
  assert_true(bcrt_lr_at(BCRT_LR_CONSTANT, 0, N, 0, lr, mn) == lr);  // no warm-up
  assert_true(bcrt_lr_at(BCRT_LR_COSINE, 0, N, 0, lr, mn) == lr);
  // fairseq's inverse_sqrt: 0 at step 0, lr at W, lr sqrt(W/step) after
  assert_true(bcrt_lr_at(BCRT_LR_INVERSE_SQRT, 0, N, W, lr, mn) == 0.0);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_INVERSE_SQRT, W - 1, N, W, lr, mn) - lr * 0.9) < 1e-18);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_INVERSE_SQRT, W, N, W, lr, mn) - lr) < 1e-18);
  assert_true(fabs(bcrt_lr_at(BCRT_LR_INVERSE_SQRT, 40, N, W, lr, mn) - lr / 2) < 1e-18);
  assert_true(bcrt_lr_at(BCRT_LR_INVERSE_SQRT, 4, N, 0, lr, mn) == lr / 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adamw_hand), cmocka_unit_test(test_sgd_hand),
      cmocka_unit_test(test_vs_pytorch), cmocka_unit_test(test_adamw_lanes),
      cmocka_unit_test(test_clip),       cmocka_unit_test(test_schedules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
