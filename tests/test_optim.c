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

// |a - b| in ulps of float at max(|b|, floor) (so 0 means bit-equal).  The
// floor is where an unfused build's error lives when a sum cancels: a moment
// b1*m + c1*g that lands near zero carries the rounding of its terms, and a
// parameter a step of ~lr moved carries the step's, not ulps of the result.
static double ulps(float a, float b, float floor) {
  if (a == b) return 0;
  float at = fabsf(b) > floor ? fabsf(b) : floor;
  float u = nextafterf(at, INFINITY) - at;
  return fabs((double)a - (double)b) / u;
}

static double rel_diff(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

// floor: NULL for none, else one per element.
static void expect_ulps(const char *what, int step, const float *a, const float *b, int n,
                        double max_ulps, const float *floor) {
  for (int i = 0; i < n; i++) {
    float f = floor ? floor[i] : 0.0f;
    if (!(ulps(a[i], b[i], f) <= max_ulps))
      fail_msg("%s step %d [%d]: %.9g vs PyTorch %.9g (%.1f ulp)", what, step + 1, i, a[i], b[i],
               ulps(a[i], b[i], f));
  }
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
// build without (the sanitizer build's -O1 runtime) rounds the moment
// updates twice where PyTorch fuses them: allowed 8 ulps, measured at the
// size of the terms of each sum (see ulps) -- a parameter's at the larger of
// its old value and lr, a moment's at the larger of its two terms.
static void run_ref(const char *name, int kind, const float (*want_p)[OREF_N],
                    const float (*want_a)[OREF_N], const float (*want_b)[OREF_N], double lr,
                    double b1, double b2, double eps, double wd, int nesterov) {
  float p[OREF_N], a[OREF_N] = {0}, b[OREF_N] = {0}, fp[OREF_N], fa[OREF_N];
  memcpy(p, oref_p0, sizeof p);
  int fused = bcrt_optim_fused();
  double tol = fused ? 0 : 8;
  // the gradient's weight in the moment: 1 - beta1 for AdamW, 1 for SGD's buffer
  double c1 = kind == 0 ? 1.0 - b1 : 1.0;
  for (int t = 0; t < OREF_STEPS; t++) {
    for (int i = 0; i < OREF_N; i++) {
      fp[i] = fused ? 0.0f : fmaxf(fabsf(p[i]), (float)lr);
      fa[i] = fused ? 0.0f : fmaxf((float)(b1 * fabsf(a[i])), (float)(c1 * fabsf(oref_g[t][i])));
    }
    if (kind == 0)
      bcrt_adamw(OREF_N, p, oref_g[t], a, b, lr, b1, b2, eps, wd, t + 1);
    else
      bcrt_sgd(OREF_N, p, oref_g[t], want_a ? a : NULL, lr, b1, wd, nesterov, t + 1);
    char what[64];
    snprintf(what, sizeof what, "%s param", name);
    expect_ulps(what, t, p, want_p[t], OREF_N, tol, fp);
    snprintf(what, sizeof what, "%s %s", name, kind == 0 ? "exp_avg" : "momentum_buffer");
    if (want_a) expect_ulps(what, t, a, want_a[t], OREF_N, tol, fa);
    snprintf(what, sizeof what, "%s exp_avg_sq", name);
    if (want_b) expect_ulps(what, t, b, want_b[t], OREF_N, tol, NULL);
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
  // the scaled forms: the same bits as scaling the gradient first (clipping)
  float gs[N], q[N], q1[N], b[N] = {0}, b1[N] = {0};
  memcpy(gs, g, sizeof g);
  bcrt_scale(N, gs, 0.37f);
  memcpy(q, p, sizeof p);
  memcpy(q1, p, sizeof p);
  bcrt_adamw_scaled(N, p, g, 0.37f, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.1, 4);
  bcrt_adamw(N, p1, gs, m1, v1, 1e-3, 0.9, 0.95, 1e-8, 0.1, 4);
  assert_memory_equal(p, p1, sizeof p);
  assert_memory_equal(v, v1, sizeof v);
  for (int t = 1; t <= 2; t++) {
    bcrt_sgd_scaled(N, q, g, 0.37f, b, 0.1, 0.9, 0.01, 1, t);
    bcrt_sgd(N, q1, gs, b1, 0.1, 0.9, 0.01, 1, t);
  }
  assert_memory_equal(q, q1, sizeof q);
  assert_memory_equal(b, b1, sizeof b);
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
  expect_ulps("clip a", 0, a, oref_clip_a, OREF_N, 2, NULL);
  expect_ulps("clip b", 0, b, oref_clip_b, 3, 2, NULL);
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

// --- the emitted training step ------------------------------------------------

// A learnable toy regression: loss = sum((FFN(x) - target)^2), the squared
// error made of Add and Mul (a loss output that is a sum over its elements).
static const char toy_graph[] =
    "model toy\ndim B = 2\ndim T = 4\ndim D = 8\n"
    "input x : [B, T, D]\ninput target : [B, T, D]\n"
    "h = FFN(x, hidden=16, act=gelu, params=(fc1, fc2))\n"
    "h = LayerNorm(h, params=norm)\n"
    "e = Add(h, target, alpha=1.0, beta=-1.0)\n"
    "loss = Mul(e, e)\n"
    "output loss\n";
enum { TOY_N = 2 * 4 * 8 };

typedef struct {
  float x[TOY_N], target[TOY_N];
} toy_batch;

static void toy_data(toy_batch *b, unsigned seed) {
  tu_fill(b->x, TOY_N, seed);
  for (int i = 0; i < TOY_N; i++) b->target[i] = 0.5f * b->x[i] - 0.25f * b->x[(i + 3) % TOY_N];
}

static blockc_model *toy_model(void) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  assert_int_equal(blockc_load_graph_string(m, "toy.blk", toy_graph), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 7), BLOCKC_OK);
  return m;
}

static blockc_train *toy_trainer(blockc_model *m, int optimizer, int accum) {
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.optimizer = optimizer;
  hp.lr = optimizer == BLOCKC_OPT_SGD ? 0.02 : 1e-2;
  hp.momentum = 0.9;
  hp.schedule = BLOCKC_LR_COSINE;
  hp.warmup = 5;
  hp.steps = 50;
  hp.min_lr = 1e-3;
  hp.accum = accum;
  hp.clip = 1.0;
  blockc_train *t = blockc_train_new(m, &hp);
  assert_non_null(t);
  return t;
}

static void test_train_loss_falls(void **state) {
  (void)state;
  for (int opt = 0; opt < 2; opt++) {
    blockc_model *m = toy_model();
    blockc_train *t = toy_trainer(m, opt, 1);
    toy_batch b;
    toy_data(&b, 5);
    const void *in[2] = {b.x, b.target};
    float first = 0, loss = 0, norm = 0;
    for (int s = 0; s < 50; s++) {
      assert_int_equal(blockc_train_step(t, in, NULL, &loss, &norm), BLOCKC_OK);
      assert_true(norm > 0 && isfinite(loss));
      if (s == 0) first = loss;
    }
    assert_int_equal(blockc_train_steps_done(t), 50);
    if (!(loss < 0.3f * first)) fail_msg("optimizer %d: loss %g after 50 steps, %g at first", opt, loss, first);
    // the trained weights reach blockc_run: the forward's loss is the last one's neighbourhood
    assert_int_equal(blockc_train_sync(t), BLOCKC_OK);
    assert_int_equal(blockc_compile(m), BLOCKC_OK);
    size_t wsn = blockc_workspace_size(m);
    void *ws = aligned_alloc(64, (wsn + 63) / 64 * 64);
    float y[TOY_N];
    void *out[1] = {y};
    assert_int_equal(blockc_run(m, in, out, NULL, ws, wsn), BLOCKC_OK);
    double sum = 0;
    for (int i = 0; i < TOY_N; i++) sum += y[i];
    assert_true(sum < first * 0.3);
    free(ws);
    blockc_train_free(t);
    blockc_delete(m);
  }
}

// One step by hand through blockc_backward: AdamW on the exact gradient of
// the first step (clipped as clip_grad_norm_) gives the same weights.
static void test_train_step_vs_parts(void **state) {
  (void)state;
  blockc_model *m = toy_model(), *ref = toy_model();
  blockc_train *t = toy_trainer(m, BLOCKC_OPT_ADAMW, 1);
  toy_batch b;
  toy_data(&b, 9);
  const void *in[2] = {b.x, b.target};
  float loss = 0, norm = 0;
  assert_int_equal(blockc_train_step(t, in, NULL, &loss, &norm), BLOCKC_OK);
  // the reference: blockc_backward with dy = 1, then the kernels
  assert_int_equal(blockc_compile_backward(ref), BLOCKC_OK);
  int np = blockc_num_params(ref);
  float *dw[16], y[TOY_N], ones[TOY_N];
  for (int i = 0; i < TOY_N; i++) ones[i] = 1.0f;
  for (int p = 0; p < np; p++) dw[p] = calloc(blockc_param_size(ref, p), sizeof(float));
  size_t wsn = blockc_backward_workspace_size(ref);
  void *ws = aligned_alloc(64, (wsn + 63) / 64 * 64);
  void *out[1] = {y};
  const float *dy[1] = {ones};
  assert_int_equal(blockc_backward(ref, in, out, dy, dw, NULL, NULL, ws, wsn), BLOCKC_OK);
  double sum = 0, ss = 0;
  for (int i = 0; i < TOY_N; i++) sum += y[i];
  assert_true(fabs(sum - loss) <= 1e-6 * fabs(sum));
  for (int p = 0; p < np; p++) ss += bcrt_sumsq((long)blockc_param_size(ref, p), dw[p]);
  assert_true(fabs(sqrt(ss) - norm) <= 1e-6 * norm);
  double c = bcrt_clip_coef(sqrt(ss), 1.0);
  // save the trained model's weights and compare with the reference update
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  assert_int_equal(blockc_train_save_weights(t, path), BLOCKC_OK);
  blockc_model *back = blockc_new();
  assert_int_equal(blockc_load_graph_string(back, "toy.blk", toy_graph), BLOCKC_OK);
  assert_int_equal(blockc_load_weights(back, path), BLOCKC_OK);
  // reference weights: a third model whose weights we update by hand, read back the same way
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  double lr = bcrt_lr_at(BCRT_LR_COSINE, 0, 50, 5, 1e-2, 1e-3);
  assert_true(fabs(lr - 1e-2 / 5) < 1e-15);
  // the reference model's weights are reachable only through a save: train it
  // for zero steps (a trainer with lr 0 would still decay), so save them as
  // they are and update the copies read back.
  blockc_train *t0 = toy_trainer(ref, BLOCKC_OPT_ADAMW, 1);
  char p0[256];
  tu_tmp_path(p0, sizeof p0, ".safetensors");
  assert_int_equal(blockc_train_save_weights(t0, p0), BLOCKC_OK);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_st_file *f0 = NULL, *f1 = NULL;
  assert_int_equal(bcS_open(ctx, p0, &f0), BC_OK);
  assert_int_equal(bcS_open(ctx, path, &f1), BC_OK);
  for (int p = 0; p < np; p++) {
    size_t n = blockc_param_size(ref, p);
    float *w0 = malloc(n * 4), *w1 = malloc(n * 4), *mm = calloc(n, 4), *vv = calloc(n, 4);
    const char *name = blockc_param_name(ref, p);
    assert_int_equal(bcS_read_f32(ctx, f0, bcS_find(f0, name), w0), BC_OK);
    assert_int_equal(bcS_read_f32(ctx, f1, bcS_find(f1, name), w1), BC_OK);
    if (c < 1.0) bcrt_scale((long)n, dw[p], (float)c);
    long long shape[4];
    (void)shape;
    int rank2 = strstr(name, "weight") && !strstr(name, "norm");  // fc1/fc2 weights: rank 2
    bcrt_adamw((long)n, w0, dw[p], mm, vv, lr, 0.9, 0.999, 1e-8, rank2 ? 0.01 : 0.0, 1);
    assert_memory_equal(w0, w1, n * 4);
    free(w0); free(w1); free(mm); free(vv); free(dw[p]);
  }
  bcS_close(f0);
  bcS_close(f1);
  bc_ctx_free(ctx);
  remove(path);
  remove(p0);
  free(ws);
  blockc_train_free(t);
  blockc_train_free(t0);
  blockc_delete(m);
  blockc_delete(ref);
  blockc_delete(back);
}

// Accumulation: K = 2 micro-batches equal one step on their gradients'
// mean: the same batch twice gives the K = 1 step bit for bit (sum x2 then
// *0.5 is exact), and the loss is the mean.
static void test_train_accum(void **state) {
  (void)state;
  blockc_model *m1 = toy_model(), *m2 = toy_model();
  blockc_train *t1 = toy_trainer(m1, BLOCKC_OPT_ADAMW, 1), *t2 = toy_trainer(m2, BLOCKC_OPT_ADAMW, 2);
  toy_batch a, c;
  toy_data(&a, 3);
  toy_data(&c, 4);
  const void *in1[2] = {a.x, a.target}, *in2[4] = {a.x, a.target, a.x, a.target};
  float l1, l2, n1, n2;
  for (int s = 0; s < 3; s++) {
    assert_int_equal(blockc_train_step(t1, in1, NULL, &l1, &n1), BLOCKC_OK);
    assert_int_equal(blockc_train_step(t2, in2, NULL, &l2, &n2), BLOCKC_OK);
    assert_true(l1 == l2 && n1 == n2);
  }
  // two different micro-batches: the loss is their mean
  const void *in3[4] = {a.x, a.target, c.x, c.target}, *ia[2] = {a.x, a.target}, *ic[2] = {c.x, c.target};
  blockc_model *m3 = toy_model(), *m4 = toy_model(), *m5 = toy_model();
  blockc_train *t3 = toy_trainer(m3, BLOCKC_OPT_SGD, 2), *t4 = toy_trainer(m4, BLOCKC_OPT_SGD, 1),
               *t5 = toy_trainer(m5, BLOCKC_OPT_SGD, 1);
  float la, lc, l3, na, nc, n3;
  assert_int_equal(blockc_train_step(t3, in3, NULL, &l3, &n3), BLOCKC_OK);
  assert_int_equal(blockc_train_step(t4, ia, NULL, &la, &na), BLOCKC_OK);
  assert_int_equal(blockc_train_step(t5, ic, NULL, &lc, &nc), BLOCKC_OK);
  assert_true(fabsf(l3 - 0.5f * (la + lc)) <= 1e-6f * l3);
  assert_true(n3 <= 0.5f * (na + nc) * (1 + 1e-6f));  // the norm of a mean <= the mean of norms
  // a wrong count of inputs is not detectable, NULL inputs are
  assert_int_equal(blockc_train_step(t3, NULL, NULL, &l3, &n3), BLOCKC_EUSAGE);
  blockc_train_free(t1); blockc_train_free(t2); blockc_train_free(t3);
  blockc_train_free(t4); blockc_train_free(t5);
  blockc_delete(m1); blockc_delete(m2); blockc_delete(m3); blockc_delete(m4); blockc_delete(m5);
}

// Save after 5 steps, load into a fresh trainer, 5 more: the same weights,
// moments and losses as 10 uninterrupted steps, bit for bit.
static void test_train_resume(void **state) {
  (void)state;
  for (int opt = 0; opt < 2; opt++) {
    blockc_model *m = toy_model(), *r = toy_model();
    blockc_train *t = toy_trainer(m, opt, 1), *u = toy_trainer(r, opt, 1);
    toy_batch b;
    float lt[10], lu[10], n;
    char ck[256], wa[256], wb[256];
    tu_tmp_path(ck, sizeof ck, ".safetensors");
    tu_tmp_path(wa, sizeof wa, ".safetensors");
    tu_tmp_path(wb, sizeof wb, ".safetensors");
    for (int s = 0; s < 10; s++) {
      toy_data(&b, 100 + (unsigned)s);
      const void *in[2] = {b.x, b.target};
      assert_int_equal(blockc_train_step(t, in, NULL, &lt[s], &n), BLOCKC_OK);
      if (s < 5) assert_int_equal(blockc_train_step(u, in, NULL, &lu[s], &n), BLOCKC_OK);
      if (s == 4) {
        assert_int_equal(blockc_train_set_meta(t, "data_position", "1234"), BLOCKC_OK);
        assert_int_equal(blockc_train_set_meta(u, "data_position", "1234"), BLOCKC_OK);
        assert_int_equal(blockc_train_set_meta(u, "step", "9"), BLOCKC_EUSAGE);
        assert_int_equal(blockc_train_save(u, ck), BLOCKC_OK);
        blockc_train_free(u);
        blockc_delete(r);
        r = toy_model();  // fresh weights: the load must bring them back
        blockc_init_weights(r, 99);
        u = toy_trainer(r, opt, 1);
        assert_int_equal(blockc_train_load(u, ck), BLOCKC_OK);
        assert_int_equal(blockc_train_steps_done(u), 5);
        assert_string_equal(blockc_train_get_meta(u, "data_position"), "1234");
        assert_null(blockc_train_get_meta(u, "nothing"));
      }
      if (s >= 5) assert_int_equal(blockc_train_step(u, in, NULL, &lu[s], &n), BLOCKC_OK);
    }
    assert_memory_equal(lt, lu, sizeof lt);
    assert_int_equal(blockc_train_save(t, wa), BLOCKC_OK);
    assert_int_equal(blockc_train_save(u, wb), BLOCKC_OK);
    size_t na, nb;
    char *fa = tu_slurp(wa, &na), *fb = tu_slurp(wb, &nb);
    assert_non_null(fa);
    assert_true(na == nb && !memcmp(fa, fb, na));  // weights, moments and metadata: same bytes
    assert_true(na > 8);  // the JSON header after its 8-byte length
    assert_non_null(strstr(fa + 8, opt ? "\"momentum_buffer.fc1.weight\"" : "\"exp_avg_sq.fc1.weight\""));
    assert_non_null(strstr(fa + 8, "\"step\":\"10\""));
    assert_non_null(strstr(fa + 8, "\"data_position\":\"1234\""));
    free(fa);
    free(fb);
    // a checkpoint of the other optimizer, and of another graph, are refused
    blockc_model *o = toy_model();
    blockc_train *v = toy_trainer(o, 1 - opt, 1);
    assert_int_equal(blockc_train_load(v, wa), BLOCKC_EINPUT);
    assert_int_equal(blockc_train_steps_done(v), 0);
    blockc_train_free(v);
    blockc_delete(o);
    blockc_model *x = blockc_new();
    assert_int_equal(blockc_load_graph_string(x, "x.blk",
                     "model other\ndim B = 1\ndim T = 2\ndim D = 8\ninput x : [B, T, D]\n"
                     "y = Linear(x, out=8, params=fc1)\noutput y\n"), BLOCKC_OK);
    assert_int_equal(blockc_init_weights(x, 1), BLOCKC_OK);
    blockc_train *w = toy_trainer(x, opt, 1);
    assert_int_equal(blockc_train_load(w, wa), BLOCKC_EINPUT);
    blockc_train_free(w);
    blockc_delete(x);
    remove(ck); remove(wa); remove(wb);
    blockc_train_free(t);
    blockc_train_free(u);
    blockc_delete(m);
    blockc_delete(r);
  }
}

// A loss that is not finite stops the step with nothing updated.
static void test_train_nonfinite(void **state) {
  (void)state;
  blockc_model *m = toy_model();
  blockc_train *t = toy_trainer(m, BLOCKC_OPT_ADAMW, 1);
  toy_batch b;
  toy_data(&b, 1);
  b.target[3] = NAN;
  const void *in[2] = {b.x, b.target};
  float loss, norm;
  char p1[256], p2[256];
  tu_tmp_path(p1, sizeof p1, ".safetensors");
  tu_tmp_path(p2, sizeof p2, ".safetensors");
  assert_int_equal(blockc_train_save(t, p1), BLOCKC_OK);
  assert_int_equal(blockc_train_step(t, in, NULL, &loss, &norm), BLOCKC_ENONFINITE);
  assert_true(isnan(loss));
  assert_int_equal(blockc_train_steps_done(t), 0);
  assert_int_equal(blockc_train_save(t, p2), BLOCKC_OK);
  assert_true(tu_same_file(p1, p2));
  remove(p1); remove(p2);
  // misuse
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.accum = 0;
  assert_null(blockc_train_new(m, &hp));
  assert_null(blockc_train_new(NULL, &hp));
  assert_int_equal(blockc_train_step(NULL, in, NULL, &loss, &norm), BLOCKC_EUSAGE);
  blockc_train_free(NULL);
  blockc_train_free(t);
  blockc_delete(m);
}

// JIT and AOT (blockc emit --train, built by the system compiler) run the
// same generated step: 10 steps from the same weights give the same bits.
// text: a graph of model `model` with toy_graph's inputs x, target and one
// output of at most TOY_N floats; seed: hp.dropout_seed.
static void jit_vs_aot(const char *text, const char *model, unsigned long long seed) {
  if (!tu_have("cc")) fail_msg("no cc for the AOT build");
  char dir[256], path[300], want[3][128];
  tu_mktmpdir(dir, sizeof dir, "optim");
  snprintf(path, sizeof path, "%s/%s.blk", dir, model);
  tu_write_bytes(path, text, strlen(text));
  char up[64];
  snprintf(up, sizeof up, "%s", model);
  for (char *c = up; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
  snprintf(want[0], sizeof want[0], "int %s_train_step(", model);
  snprintf(want[1], sizeof want[1], "#define %s_TRAIN_STATE_BYTES", up);
  snprintf(want[2], sizeof want[2], "#define %s_TRAIN_WORKSPACE_BYTES_K1", up);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *gj = bcP_parse_file(ctx, path, NULL, 0), *ga = bcP_parse_file(ctx, path, NULL, 0);
  if (!gj || !ga) fail_msg("%s", e.buf);
  bc_emit_opts eo = {.backward = true, .train = true};
  bc_compiled cj;
  if (bcD_compile(ctx, gj, &eo, &cj)) fail_msg("%s", e.buf);
  bc_aot_pair pair;
  bc_aot_gen in = {.path = path, .graph = ga, .train = true};
  if (bcA_generate(ctx, &in, &pair)) fail_msg("%s", e.buf);
  for (int i = 0; i < 3; i++) assert_non_null(strstr(pair.h_src, want[i]));
  assert_true(cj.tl.ws1_bytes < cj.tl.ws_bytes);
  bc_aot *a = NULL;
  tu_aot_build(ctx, &e, ga, pair.c_src, pair.h_src, dir, &a);
  assert_non_null(bcA_train(a));
  assert_non_null(bcA_train_init(a));
  bc_train_fn fn[2] = {cj.train, bcA_train(a)};
  bc_train_init_fn init[2] = {cj.train_init, bcA_train_init(a)};
  bc_weights w[2];
  void *st[2], *ws[2];
  for (int b = 0; b < 2; b++) {
    assert_int_equal(bcW_init_random(ctx, b ? ga : gj, 7, &w[b]), BC_OK);
    st[b] = aligned_alloc(64, (size_t)cj.tl.state_bytes);
    ws[b] = aligned_alloc(64, ((size_t)cj.tl.ws_bytes + 63) / 64 * 64);  // any accum
    init[b](st[b]);
  }
  bcrt_train_hparams hp = {.optimizer = BCRT_OPT_ADAMW, .schedule = BCRT_LR_COSINE, .lr = 1e-2,
                           .min_lr = 1e-3, .warmup = 3, .steps = 10, .beta1 = 0.9,
                           .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .clip = 0.5,
                           .accum = 2, .dropout_seed = seed};
  float y[2][2][TOY_N];
  // Bit for bit when the library's runtime is built as the AOT one is
  // (-O3 -march=native, fused multiply-adds); the sanitizer build's runtime
  // is -O1 without FMA, so there the two agree to rounding only.
  int exact = bcrt_optim_fused();
  if (!exact) print_message("note: unfused library runtime: JIT vs AOT within 1e-5\n");
  for (int s = 0; s < 10; s++) {
    toy_batch b0, b1;
    toy_data(&b0, 20 + (unsigned)s);
    toy_data(&b1, 40 + (unsigned)s);
    float loss[2], norm[2];
    for (int b = 0; b < 2; b++) {
      void *io[6] = {b0.x, b0.target, y[b][0], b1.x, b1.target, y[b][1]};
      assert_int_equal(fn[b](w[b].p, io, NULL, &hp, st[b], ws[b], &loss[b], &norm[b]), 0);
    }
    if (exact)
      assert_true(loss[0] == loss[1] && norm[0] == norm[1]);
    else
      assert_true(rel_diff(loss[0], loss[1]) < 1e-5 && rel_diff(norm[0], norm[1]) < 1e-5);
  }
  for (int p = 0; p < gj->nparams; p++) {
    long n = bc_shape_numel(&gj->params[p].shape);
    if (exact) {
      assert_memory_equal(w[0].p[p], w[1].p[p], (size_t)n * 4);
      continue;
    }
    for (long i = 0; i < n; i++)
      if (!(fabs((double)w[0].p[p][i] - w[1].p[p][i]) <= 1e-5 * (1 + fabs((double)w[1].p[p][i]))))
        fail_msg("param %d [%ld]: JIT %.9g vs AOT %.9g", p, i, w[0].p[p][i], w[1].p[p][i]);
  }
  if (exact) assert_memory_equal(st[0], st[1], (size_t)cj.tl.state_bytes);
  // the state says 10 steps of 2 micro-batches; another model's state is refused
  assert_true(((long long *)st[0])[1] == 10 && ((long long *)st[0])[5] == 20);
  ((long long *)st[1])[2] += 1;
  void *io[6] = {0};
  float l, n;
  assert_int_equal(fn[1](w[1].p, io, NULL, &hp, st[1], ws[1], &l, &n), 1);
  for (int b = 0; b < 2; b++) {
    bcW_free(&w[b]);
    free(st[b]);
    free(ws[b]);
  }
  bcA_free(a);
  bcD_free(&cj);
  bc_ctx_free(ctx);
  tu_rm_rf(dir);
}

static void test_train_jit_vs_aot(void **state) {
  (void)state;
  jit_vs_aot(toy_graph, "toy", 0);
}

// A shipped graph with a layer loop, a run-time dim and a lengths input
// (graphs/residual.blk, small): the step runs at a T below the bound, its
// loss is the sum blockc_run gives, and the weights move.
static void test_train_shipped_graph(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  assert_non_null(m);
  assert_int_equal(blockc_set_dim(m, "N", 2), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "D", 16), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "H", 2), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "T", 8), BLOCKC_OK);
  assert_int_equal(blockc_load_graph(m, "graphs/residual.blk"), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 3), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.lr = 1e-3;
  blockc_train *t = blockc_train_new(m, &hp);
  assert_non_null(t);
  float x[16 * 5];
  tu_fill(x, 16 * 5, 8);
  const void *in[2] = {x, NULL};
  long long dims[1] = {5};
  float y[16 * 5];
  void *out[1] = {y};
  size_t wsn = blockc_workspace_size(m);
  void *ws = aligned_alloc(64, (wsn + 63) / 64 * 64);
  assert_int_equal(blockc_run(m, in, out, dims, ws, wsn), BLOCKC_OK);
  double before = 0;
  for (int i = 0; i < 16 * 5; i++) before += y[i];
  float loss, norm;
  assert_int_equal(blockc_train_step(t, in, dims, &loss, &norm), BLOCKC_OK);
  assert_true(fabs(loss - before) <= 1e-4 * (fabs(before) + 1));
  assert_true(norm > 0);
  for (int s = 0; s < 3; s++) assert_int_equal(blockc_train_step(t, in, dims, &loss, &norm), BLOCKC_OK);
  assert_int_equal(blockc_train_sync(t), BLOCKC_OK);
  assert_int_equal(blockc_run(m, in, out, dims, ws, wsn), BLOCKC_OK);
  double after = 0;
  for (int i = 0; i < 16 * 5; i++) after += y[i];
  assert_true(after < before);  // descending the sum
  float ev = 0;
  assert_int_equal(blockc_train_eval(t, in, dims, &ev), BLOCKC_OK);  // the forward, no packed copy
  assert_true(fabs(ev - after) <= 1e-4 * (fabs(after) + 1));
  // the decay rule: matrices yes, biases and norms no
  for (int p = 0; p < blockc_num_params(m); p++) {
    const char *nm = blockc_param_name(m, p);
    int want = strstr(nm, "bias") || strstr(nm, "norm") ? 0 : 1;
    if (blockc_train_param_decay(t, p) != want) fail_msg("decay of %s", nm);
  }
  assert_int_equal(blockc_train_param_decay(t, -1), -1);
  // accumulation switched on later: the workspace grows
  hp.accum = 2;
  assert_int_equal(blockc_train_set_hparams(t, &hp), BLOCKC_OK);
  const void *in2[4] = {x, NULL, x, NULL};
  float l2;
  assert_int_equal(blockc_train_step(t, in2, dims, &l2, &norm), BLOCKC_OK);
  assert_true(fabs(l2 - ev) <= 1e-4 * (fabs(ev) + 1));
  hp.optimizer = BLOCKC_OPT_SGD;  // not after steps
  assert_int_equal(blockc_train_set_hparams(t, &hp), BLOCKC_EUSAGE);
  long long bad[1] = {9};  // past the bound: refused, nothing updated
  assert_int_equal(blockc_train_step(t, in, bad, &loss, &norm), BLOCKC_EINPUT);
  assert_int_equal(blockc_train_steps_done(t), 5);
  free(ws);
  blockc_train_free(t);
  blockc_delete(m);
}

// Vendoring: `blockc emit --train` and a program built from the pair and
// runtime/blockc_rt.c alone (no blockc, no OpenBLAS: -DBLOCKC_NO_BLAS)
// fine-tunes the model: its loss falls over 40 steps.
static const char device_main[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include \"toy.h\"\n"
    "int main(void) {\n"
    "  float *w[TOY_NPARAMS + 1];\n"
    "  unsigned s = 1;\n"
    "  for (int p = 0; p < TOY_NPARAMS; p++) {\n"
    "    w[p] = malloc(sizeof(float) * (size_t)toy_train_numel[p]);\n"
    "    for (long i = 0; i < toy_train_numel[p]; i++) {\n"
    "      s = s * 1103515245u + 12345u;\n"
    "      w[p][i] = toy_params[p].rank == 2 ? ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.5f : 0.0f;\n"
    "    }\n"
    "  }\n"
    "  w[TOY_NPARAMS] = NULL;\n"
    "  float x[64], tg[64], y[64];\n"
    "  for (int i = 0; i < 64; i++) { x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f; tg[i] = 0.5f * x[i]; }\n"
    "  void *state = aligned_alloc(64, TOY_TRAIN_STATE_BYTES);\n"
    "  void *ws = aligned_alloc(64, (TOY_TRAIN_WORKSPACE_BYTES_K1 + 63) / 64 * 64);  /* accum 1 */\n"
    "  toy_train_init(state);\n"
    "  bcrt_train_hparams hp = {0};\n"
    "  hp.optimizer = BCRT_OPT_ADAMW; hp.lr = 1e-2; hp.beta1 = 0.9; hp.beta2 = 0.999;\n"
    "  hp.eps = 1e-8; hp.weight_decay = 0.01; hp.clip = 1.0; hp.accum = 1;\n"
    "  void *io[3] = {x, tg, y};\n"
    "  float first = 0, loss = 0, norm = 0;\n"
    "  for (int k = 0; k < 40; k++) {\n"
    "    int st = toy_train_step(w, io, NULL, &hp, state, ws, &loss, &norm);\n"
    "    if (st != TOY_OK) { printf(\"status %d\\n\", st); return 1; }\n"
    "    if (k == 0) first = loss;\n"
    "  }\n"
    "  printf(\"%g %g\\n\", first, loss);\n"
    "  return loss < 0.5f * first ? 0 : 2;\n"
    "}\n";

// Emits MODEL's pair (--train) from graph text into a fresh directory,
// checks the pair alone compiles warning-free with gcc, clang and tcc when
// they are installed (pedantic: also those), builds main_src against the
// pair and the portable runtime only (-DBLOCKC_NO_BLAS) and runs it: a
// device fine-tuning with what `blockc emit --train` gives it.
static void vendored_train(const char *model, const char *graph_text, const char *main_src,
                           bool pedantic) {
  if (!tu_have("cc")) fail_msg("no cc");
  char dir[256], graph[300], src[300], exe[300];
  tu_mktmpdir(dir, sizeof dir, "optimv");
  snprintf(graph, sizeof graph, "%s/%s.blk", dir, model);
  snprintf(src, sizeof src, "%s/main.c", dir);
  snprintf(exe, sizeof exe, "%s/device", dir);
  tu_write_bytes(graph, graph_text, strlen(graph_text));
  tu_write_bytes(src, main_src, strlen(main_src));
  char out[4096], err[8192];
  char *emit[] = {(char *)tu_blockc(), "emit", graph, "-o", dir, "--train", NULL};
  if (tu_spawn(emit, out, sizeof out, err, sizeof err)) fail_msg("emit --train: %s", err);
  char cmd[2048];
  const char *ccs[] = {"gcc", "clang", "tcc"};
  for (int i = 0; pedantic && i < 3; i++) {  // the pair alone, warning-free
    if (!tu_have(ccs[i])) continue;
    snprintf(cmd, sizeof cmd, "%s %s -Iruntime -I'%s' -c '%s/%s.c' -o '%s/%s_%s.o'", ccs[i],
             i == 2 ? "-Wall -Werror" : "-std=c99 -Wall -Wextra -Wpedantic -Werror", dir, dir,
             model, dir, model, ccs[i]);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    if (tu_spawn(sh, out, sizeof out, err, sizeof err)) fail_msg("%s: %s%s", ccs[i], out, err);
  }
  snprintf(cmd, sizeof cmd, "cc -std=c11 -O1 -Wall -Wextra -Werror -DBLOCKC_NO_BLAS -I'%s' -Iruntime "
           "'%s' '%s/%s.c' runtime/blockc_rt.c -lm -lpthread -o '%s'", dir, src, dir, model, exe);
  char *cc[] = {"/bin/sh", "-c", cmd, NULL};
  if (tu_spawn(cc, out, sizeof out, err, sizeof err)) fail_msg("cc: %s", err);
  char *run[] = {exe, NULL};
  int rc = tu_spawn(run, out, sizeof out, err, sizeof err);
  if (rc) fail_msg("the vendored trainer exited %d: %s %s", rc, out, err);
  tu_rm_rf(dir);
}

static void test_train_vendored(void **state) {
  (void)state;
  vendored_train("toy", toy_graph, device_main, false);
}

// --- the step with dropout ---------------------------------------------------------

// toy_graph's inputs and a scalar loss, with every kind of dropout: a
// Dropout node, Attention's on the softmax weights, FFN's on the hidden
// activation.  The attention has no biases: the key bias's exact gradient
// is zero, and Adam would turn the float noise there into steps that an
// unfused runtime (the sanitizer build's) rounds apart from the AOT one.
static const char drop_graph[] =
    "model dtoy\ndim B = 2\ndim T = 4\ndim D = 8\n"
    "input x : [B, T, D]\ninput target : [B, T, D]\n"
    "h = Dropout(Linear(x, out=D, params=inp), p=0.25)\n"
    "a = Attention(LayerNorm(h, params=ln1), heads=2, causal=true, dropout=0.3, bias=false, "
    "params=attn)\n"
    "h = Add(h, a)\n"
    "f = FFN(LayerNorm(h, params=ln2), hidden=16, act=gelu, dropout=0.2, params=(fc1, fc2))\n"
    "h = Add(h, f)\n"
    "loss = MSE(h, target)\n"
    "output loss\n";
enum { DROP_MAXP = 32 };

// The emitted step against the loop `blockc train` ran for graphs with
// dropout before the step dropped (cli/train.c): micro-batch j (0-based,
// counting every one) through <model>_backward_ex(training 1, seed, j) with
// dy = 1/K, the K gradients summed, the norm (bcrt_sumsq, sqrt), the clip
// (bcrt_scale by (float)bcrt_clip_coef) and bcrt_adamw / bcrt_sgd at
// bcrt_lr_at.  Both run on the library's runtime, so the same bits: loss,
// norm and weights after every step, moments at the end (K = 2, clipping
// that bites, AdamW and SGD with momentum).
static void test_train_dropout_vs_loop(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = bcP_parse_string(ctx, "dtoy.blk", drop_graph, NULL, 0);
  if (!g) fail_msg("%s", e.buf);
  bc_emit_opts eo = {.backward = true, .train = true};
  bc_compiled c;
  if (bcD_compile(ctx, g, &eo, &c)) fail_msg("%s", e.buf);
  assert_non_null(c.backward_ex);
  assert_non_null(strstr(c.csrc, "dtoy_backward_pool((const float *const *)w, iok, rt, dy, k ? acc : grad, 0, 1,"));
  int np = g->nparams;
  assert_true(np <= DROP_MAXP);
  enum { K = 2, STEPS = 6 };
  const unsigned long long seed = 77;
  for (int opt = 0; opt < 2; opt++) {
    bc_weights w, r;  // the step's weights, the loop's
    assert_int_equal(bcW_init_random(ctx, g, 11, &w), BC_OK);
    assert_int_equal(bcW_init_random(ctx, g, 11, &r), BC_OK);
    void *st = aligned_alloc(64, (size_t)c.tl.state_bytes);
    void *ws = aligned_alloc(64, ((size_t)c.tl.ws_bytes + 63) / 64 * 64);
    void *bws = aligned_alloc(64, ((size_t)c.bwd_ws_bytes + 63) / 64 * 64);
    c.train_init(st);
    float *m1[DROP_MAXP], *m2[DROP_MAXP], *gs[DROP_MAXP], *dw[DROP_MAXP];
    for (int p = 0; p < np; p++) {
      size_t n = (size_t)bc_shape_numel(&g->params[p].shape);
      m1[p] = calloc(n, 4), m2[p] = calloc(n, 4), gs[p] = calloc(n, 4), dw[p] = calloc(n, 4);
    }
    bcrt_train_hparams hp = {.optimizer = opt ? BCRT_OPT_SGD : BCRT_OPT_ADAMW,
                             .schedule = BCRT_LR_COSINE, .lr = opt ? 0.05 : 1e-2, .min_lr = 1e-3,
                             .warmup = 2, .steps = STEPS, .beta1 = 0.9, .beta2 = 0.999,
                             .eps = 1e-8, .weight_decay = 0.01, .momentum = 0.9, .clip = 0.5,
                             .accum = K, .dropout_seed = seed};
    int clipped = 0;
    for (int s = 0; s < STEPS; s++) {
      toy_batch b[K];
      float y[K][TOY_N], yr[TOY_N];
      for (int k = 0; k < K; k++) toy_data(&b[k], 50 + (unsigned)(s * K + k));
      void *io[3 * K] = {b[0].x, b[0].target, y[0], b[1].x, b[1].target, y[1]};
      float loss, norm;
      assert_int_equal(c.train(w.p, io, NULL, &hp, st, ws, &loss, &norm), 0);
      // the loop
      float dys = (float)(1.0 / K);
      const float *dy[1] = {&dys};
      double lsum = 0;
      for (int k = 0; k < K; k++) {
        void *iok[3] = {b[k].x, b[k].target, yr};
        assert_int_equal(c.backward_ex((const float *const *)r.p, iok, NULL, dy, dw, NULL, 1, seed,
                                       (unsigned long long)(s * K + k), bws), 0);
        lsum += (double)yr[0];
        for (int p = 0; p < np; p++) {
          long n = (long)bc_shape_numel(&g->params[p].shape);
          for (long i = 0; i < n; i++) gs[p][i] = k ? gs[p][i] + dw[p][i] : dw[p][i];
        }
      }
      double ss = 0;
      for (int p = 0; p < np; p++) ss += bcrt_sumsq((long)bc_shape_numel(&g->params[p].shape), gs[p]);
      double rn = sqrt(ss);
      if (!(loss == (float)(lsum / K) && norm == (float)rn))
        fail_msg("optimizer %d step %d: loss %.9g norm %.9g, the loop's %.9g %.9g", opt, s + 1,
                 loss, norm, lsum / K, rn);
      float coef = (float)bcrt_clip_coef(rn, hp.clip);
      clipped += coef != 1.0f;
      double lr = bcrt_lr_at(hp.schedule, s, hp.steps, hp.warmup, hp.lr, hp.min_lr);
      for (int p = 0; p < np; p++) {
        long n = (long)bc_shape_numel(&g->params[p].shape);
        if (coef != 1.0f) bcrt_scale(n, gs[p], coef);
        double wd = g->params[p].shape.rank >= 2 ? hp.weight_decay : 0.0;
        if (opt) bcrt_sgd(n, r.p[p], gs[p], m1[p], lr, hp.momentum, wd, 0, s + 1);
        else bcrt_adamw(n, r.p[p], gs[p], m1[p], m2[p], lr, hp.beta1, hp.beta2, hp.eps, wd, s + 1);
      }
      for (int p = 0; p < np; p++)
        if (memcmp(w.p[p], r.p[p], (size_t)bc_shape_numel(&g->params[p].shape) * 4))
          fail_msg("optimizer %d step %d: '%s' differs from the loop's", opt, s + 1, g->params[p].name);
    }
    assert_true(clipped > 0);
    const float *b1 = (const float *)((const char *)st + 64), *b2 = b1 + c.tl.total;
    for (int p = 0; p < np; p++) {
      size_t n = (size_t)bc_shape_numel(&g->params[p].shape);
      int64_t off = 0;
      for (int i = 0; i < p; i++) off += (bc_shape_numel(&g->params[i].shape) + 15) / 16 * 16;
      assert_memory_equal(b1 + off, m1[p], n * 4);
      if (!opt) assert_memory_equal(b2 + off, m2[p], n * 4);
      free(m1[p]), free(m2[p]), free(gs[p]), free(dw[p]);
    }
    assert_true(((long long *)st)[1] == STEPS && ((long long *)st)[5] == STEPS * K);
    bcW_free(&w);
    bcW_free(&r);
    free(st), free(ws), free(bws);
  }
  bcD_free(&c);
  bc_ctx_free(ctx);
}

// JIT and AOT run the same step with dropout: the same bits (when both
// runtimes fuse).
static void test_train_dropout_jit_vs_aot(void **state) {
  (void)state;
  jit_vs_aot(drop_graph, "dtoy", 12345);
}

static blockc_train *drop_trainer(blockc_model *m, unsigned long long seed) {
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.lr = 1e-2;
  hp.accum = 2;
  hp.clip = 0.5;
  hp.dropout_seed = seed;
  blockc_train *t = blockc_train_new(m, &hp);
  assert_non_null(t);
  return t;
}

static blockc_model *drop_model(void) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  assert_int_equal(blockc_load_graph_string(m, "dtoy.blk", drop_graph), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 7), BLOCKC_OK);
  return m;
}

// Steps 0..n-1 of t on fixed batches (two micro-batches each), losses into l.
static void drop_steps(blockc_train *t, int from, int n, float *l) {
  for (int s = from; s < from + n; s++) {
    toy_batch a, b;
    toy_data(&a, 300 + 2 * (unsigned)s);
    toy_data(&b, 301 + 2 * (unsigned)s);
    const void *in[4] = {a.x, a.target, b.x, b.target};
    float norm;
    assert_int_equal(blockc_train_step(t, in, NULL, &l[s], &norm), BLOCKC_OK);
  }
}

// The seed decides the masks (blockc_train_*, hp.dropout_seed): the same
// seed gives the same steps bit for bit, another seed other ones; the
// masks move on from step to step (the same batch twice is two different
// steps); a graph without dropout ignores the seed; and a checkpoint keeps
// the micro-batch count, so save, load and continue equals not stopping.
static void test_train_dropout_seeds(void **state) {
  (void)state;
  enum { N = 6 };
  blockc_model *m[3] = {drop_model(), drop_model(), drop_model()};
  blockc_train *t[3] = {drop_trainer(m[0], 1), drop_trainer(m[1], 1), drop_trainer(m[2], 2)};
  float l[3][N];
  for (int i = 0; i < 3; i++) drop_steps(t[i], 0, N, l[i]);
  assert_memory_equal(l[0], l[1], sizeof l[0]);
  for (int s = 0; s < N; s++)
    if (l[0][s] == l[2][s]) fail_msg("step %d: seeds 1 and 2 gave the same loss %.9g", s + 1, l[0][s]);
  char pa[256], pb[256], pc[256];
  tu_tmp_path(pa, sizeof pa, ".safetensors");
  tu_tmp_path(pb, sizeof pb, ".safetensors");
  tu_tmp_path(pc, sizeof pc, ".safetensors");
  assert_int_equal(blockc_train_save(t[0], pa), BLOCKC_OK);
  assert_int_equal(blockc_train_save(t[1], pb), BLOCKC_OK);
  assert_int_equal(blockc_train_save(t[2], pc), BLOCKC_OK);
  size_t na, nb, nc;
  char *fa = tu_slurp(pa, &na), *fb = tu_slurp(pb, &nb), *fc = tu_slurp(pc, &nc);
  assert_true(na == nb && !memcmp(fa, fb, na));
  assert_true(na == nc && memcmp(fa, fc, na));  // same layout, other weights
  assert_non_null(strstr(fa + 8, "\"micro_batches\":\"12\""));
  free(fa), free(fb), free(fc);
  // the same batch at two steps: two masks, two losses (the weights barely moved)
  blockc_model *q = drop_model();
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.lr = 0;
  hp.weight_decay = 0;
  hp.dropout_seed = 1;
  blockc_train *u = blockc_train_new(q, &hp);
  toy_batch a;
  toy_data(&a, 300);
  const void *in[2] = {a.x, a.target};
  float la, lb, norm;
  assert_int_equal(blockc_train_step(u, in, NULL, &la, &norm), BLOCKC_OK);
  assert_int_equal(blockc_train_step(u, in, NULL, &lb, &norm), BLOCKC_OK);
  assert_true(la != lb);
  float ev;  // evaluation never drops: lr 0 kept the weights, so twice the same
  float ev2;
  assert_int_equal(blockc_train_eval(u, in, NULL, &ev), BLOCKC_OK);
  assert_int_equal(blockc_train_eval(u, in, NULL, &ev2), BLOCKC_OK);
  assert_true(ev == ev2 && ev != la && ev != lb);
  blockc_train_free(u);
  blockc_delete(q);
  // no dropout in the graph: the seed changes nothing
  blockc_model *n1 = toy_model(), *n2 = toy_model();
  blockc_train_hparams h1, h2;
  blockc_train_defaults(&h1);
  h2 = h1;
  h1.dropout_seed = 1, h2.dropout_seed = 2;
  blockc_train *v1 = blockc_train_new(n1, &h1), *v2 = blockc_train_new(n2, &h2);
  float x1, x2;
  for (int s = 0; s < 3; s++) {
    assert_int_equal(blockc_train_step(v1, in, NULL, &x1, &norm), BLOCKC_OK);
    assert_int_equal(blockc_train_step(v2, in, NULL, &x2, &norm), BLOCKC_OK);
    assert_true(x1 == x2);
  }
  blockc_train_free(v1), blockc_train_free(v2);
  blockc_delete(n1), blockc_delete(n2);
  // resume: 3 steps, save, a fresh trainer loads, 3 more == 6 in a row (t[0])
  blockc_model *r = drop_model();
  blockc_train *w = drop_trainer(r, 1);
  float lr_[N];
  drop_steps(w, 0, 3, lr_);
  assert_int_equal(blockc_train_save(w, pb), BLOCKC_OK);
  blockc_train_free(w);
  blockc_delete(r);
  r = drop_model();
  assert_int_equal(blockc_init_weights(r, 99), BLOCKC_OK);
  w = drop_trainer(r, 1);
  assert_int_equal(blockc_train_load(w, pb), BLOCKC_OK);
  drop_steps(w, 3, 3, lr_);
  assert_memory_equal(lr_, l[0], sizeof lr_);
  assert_int_equal(blockc_train_save(w, pc), BLOCKC_OK);
  assert_true(tu_same_file(pa, pc));
  blockc_train_free(w);
  blockc_delete(r);
  remove(pa), remove(pb), remove(pc);
  for (int i = 0; i < 3; i++) blockc_train_free(t[i]), blockc_delete(m[i]);
}

// Vendoring a graph with dropout: `blockc emit --train` gives a pair that
// gcc, clang and tcc compile without a warning, and a program built from it
// and runtime/blockc_rt.c alone fine-tunes with dropout (accumulation 2):
// the same seed twice gives the same weights, another seed others, the
// state counts the micro-batches, and the loss falls.
static const char device_drop_main[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"dtoy.h\"\n"
    "static float run(unsigned long long seed, float **w, float *first) {\n"
    "  unsigned s = 1;\n"
    "  for (int p = 0; p < DTOY_NPARAMS; p++)\n"
    "    for (long i = 0; i < dtoy_train_numel[p]; i++) {\n"
    "      s = s * 1103515245u + 12345u;\n"
    "      w[p][i] = dtoy_params[p].rank == 2 ? ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.5f\n"
    "                                         : strstr(dtoy_params[p].name, \"ln\") &&\n"
    "                                           strstr(dtoy_params[p].name, \"weight\") ? 1.0f : 0.0f;\n"
    "    }\n"
    "  float x[2][64], tg[2][64], y[2][1];\n"
    "  for (int k = 0; k < 2; k++)\n"
    "    for (int i = 0; i < 64; i++) {\n"
    "      x[k][i] = (float)((i * 37 + k * 11) % 17) / 8.0f - 1.0f;\n"
    "      tg[k][i] = 0.5f * x[k][i];\n"
    "    }\n"
    "  void *state = aligned_alloc(64, DTOY_TRAIN_STATE_BYTES);\n"
    "  void *ws = aligned_alloc(64, (DTOY_TRAIN_WORKSPACE_BYTES + 63) / 64 * 64);\n"
    "  dtoy_train_init(state);\n"
    "  bcrt_train_hparams hp = {0};\n"
    "  hp.optimizer = BCRT_OPT_ADAMW; hp.lr = 1e-2; hp.beta1 = 0.9; hp.beta2 = 0.999;\n"
    "  hp.eps = 1e-8; hp.weight_decay = 0.01; hp.clip = 1.0; hp.accum = 2;\n"
    "  hp.dropout_seed = seed;\n"
    "  void *io[6] = {x[0], tg[0], y[0], x[1], tg[1], y[1]};\n"
    "  float loss = 0, norm = 0;\n"
    "  for (int k = 0; k < 60; k++) {\n"
    "    int st = dtoy_train_step(w, io, NULL, &hp, state, ws, &loss, &norm);\n"
    "    if (st != DTOY_OK) { printf(\"status %d\\n\", st); exit(1); }\n"
    "    if (k == 0) *first = loss;\n"
    "  }\n"
    "  if (((long long *)state)[1] != 60 || ((long long *)state)[5] != 120) exit(3);\n"
    "  free(state);\n"
    "  free(ws);\n"
    "  return loss;\n"
    "}\n"
    "int main(void) {\n"
    "  float *w[3][DTOY_NPARAMS + 1], first[3], last[3];\n"
    "  for (int r = 0; r < 3; r++) {\n"
    "    for (int p = 0; p < DTOY_NPARAMS; p++) w[r][p] = malloc(sizeof(float) * (size_t)dtoy_train_numel[p]);\n"
    "    w[r][DTOY_NPARAMS] = NULL;\n"
    "    last[r] = run(r == 2 ? 6 : 5, w[r], &first[r]);\n"
    "  }\n"
    "  int same = 1, other = 0;\n"
    "  for (int p = 0; p < DTOY_NPARAMS; p++) {\n"
    "    size_t n = sizeof(float) * (size_t)dtoy_train_numel[p];\n"
    "    same &= !memcmp(w[0][p], w[1][p], n);\n"
    "    other |= memcmp(w[0][p], w[2][p], n) != 0;\n"
    "  }\n"
    "  printf(\"%g %g %d %d\\n\", first[0], last[0], same, other);\n"
    "  return same && other && last[0] < 0.5f * first[0] ? 0 : 2;\n"
    "}\n";

static void test_train_dropout_vendored(void **state) {
  (void)state;
  vendored_train("dtoy", drop_graph, device_drop_main, true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adamw_hand), cmocka_unit_test(test_sgd_hand),
      cmocka_unit_test(test_vs_pytorch), cmocka_unit_test(test_adamw_lanes),
      cmocka_unit_test(test_clip),       cmocka_unit_test(test_schedules),
      cmocka_unit_test(test_train_loss_falls), cmocka_unit_test(test_train_step_vs_parts),
      cmocka_unit_test(test_train_accum), cmocka_unit_test(test_train_resume),
      cmocka_unit_test(test_train_nonfinite), cmocka_unit_test(test_train_jit_vs_aot),
      cmocka_unit_test(test_train_shipped_graph), cmocka_unit_test(test_train_vendored),
      cmocka_unit_test(test_train_dropout_vs_loop), cmocka_unit_test(test_train_dropout_jit_vs_aot),
      cmocka_unit_test(test_train_dropout_seeds), cmocka_unit_test(test_train_dropout_vendored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
