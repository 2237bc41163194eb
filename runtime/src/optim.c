/* optim.c — the optimizer kernels of the emitted training step
 * (`<model>_train_step`): AdamW and SGD updates, the global gradient norm
 * for clipping, and the learning-rate schedules.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses.
 *
 * The updates follow PyTorch 1.13's single-tensor (foreach=False) code
 * (torch/optim/adamw.py _single_tensor_adamw, sgd.py _single_tensor_sgd)
 * operation for operation: the scalar coefficients are computed in double
 * from double hyper-parameters, as Python does, then rounded to float once;
 * the tensor operations are float, in PyTorch's order.  PyTorch's CPU
 * kernels (gcc, GNU mode: -ffp-contract=fast) fuse some a*b + c of theirs
 * into one multiply-add (add_ with alpha, addcmul_; addcdiv_ is self + (value t1) /
 * t2, nothing to fuse: found by comparing bits); we fuse the same ones explicitly when the target has FMA
 * (__FMA__), so on such
 * machines the result is PyTorch's bit for bit (tests/test_optim.c checks
 * against numbers PyTorch produced, tools/optim_ref.py).
 *
 * Each update is one pass over its tensors (read p, g, m, v; write p, m,
 * v): memory-bound.  The square root keeps gcc from vectorising a plain
 * loop without -fno-math-errno, so with AVX the AdamW loop is written with
 * 256-bit intrinsics (the same operations in the same order as the scalar
 * tail, so the lane count does not change a bit).  Nothing allocates. */
#if defined(__AVX__) && !defined(BCRT_OPTIM_SCALAR)
#include <immintrin.h>
#define OPT_AVX 1
#endif

#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define OPT_MADD(a, b, c) __builtin_fmaf((a), (b), (c)) /* a*b + c, one rounding */
#else
#define OPT_MADD(a, b, c) ((a) * (b) + (c))
#endif

#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define OPT_DMADD(a, b, c) __builtin_fma((a), (b), (c))
#else
#define OPT_DMADD(a, b, c) ((a) * (b) + (c))
#endif

#if defined(OPT_AVX) && defined(__FMA__)
#define OPT_VMADD(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#elif defined(OPT_AVX)
#define OPT_VMADD(a, b, c) _mm256_add_ps(_mm256_mul_ps((a), (b)), (c))
#endif

int bcrt_optim_fused(void) {
#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
  return 1;
#else
  return 0;
#endif
}

/* beta^step as PyTorch has it: `beta1 ** step` with step a Python float
 * (step_t.item()), i.e. libm pow in double. */
static double opt_powi(double b, long e) { return pow(b, (double)e); }

void bcrt_adamw(long n, float *p, const float *g, float *m, float *v, double lr, double beta1,
                double beta2, double eps, double wd, long step) {
  bcrt_adamw_scaled(n, p, g, 1.0f, m, v, lr, beta1, beta2, eps, wd, step);
}

/* g * gs is the clipped gradient torch.nn.utils.clip_grad_norm_ leaves in
 * .grad (a float product, rounded once), made in registers instead of a
 * pass of its own; gs = 1 is exact, so bcrt_adamw is this with 1. */
void bcrt_adamw_scaled(long n, float *p, const float *g, float gs, float *m, float *v, double lr,
                       double beta1, double beta2, double eps, double wd, long step) {
  if (n <= 0 || step < 1) return;
  double bc1 = 1.0 - opt_powi(beta1, step), bc2 = 1.0 - opt_powi(beta2, step);
  const float decay = (float)(1.0 - lr * wd), b1 = (float)beta1, c1 = (float)(1.0 - beta1),
              b2 = (float)beta2, c2 = (float)(1.0 - beta2), bc2s = (float)sqrt(bc2),
              e = (float)eps, nss = (float)(-(lr / bc1));
  const int do_decay = wd != 0.0;
  long i = 0;
#ifdef OPT_AVX
  const __m256 vdecay = _mm256_set1_ps(decay), vb1 = _mm256_set1_ps(b1), vc1 = _mm256_set1_ps(c1),
               vb2 = _mm256_set1_ps(b2), vc2 = _mm256_set1_ps(c2), vbc2s = _mm256_set1_ps(bc2s),
               ve = _mm256_set1_ps(e), vnss = _mm256_set1_ps(nss), vgs = _mm256_set1_ps(gs);
  for (; i + 8 <= n; i += 8) {
    __m256 pi = _mm256_loadu_ps(p + i), gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), vgs);
    __m256 mi = _mm256_loadu_ps(m + i), vi = _mm256_loadu_ps(v + i);
    if (do_decay) pi = _mm256_mul_ps(pi, vdecay);
    mi = OPT_VMADD(gi, vc1, _mm256_mul_ps(mi, vb1));
    vi = OPT_VMADD(_mm256_mul_ps(vc2, gi), gi, _mm256_mul_ps(vi, vb2));
    __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2s), ve);
    pi = _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(vnss, mi), den));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, pi);
  }
#endif
  for (; i < n; i++) {
    float pi = p[i], gi = g[i] * gs;
    if (do_decay) pi = pi * decay;
    float mi = OPT_MADD(gi, c1, m[i] * b1);
    float vi = OPT_MADD(c2 * gi, gi, v[i] * b2);
    float den = sqrtf(vi) / bc2s + e;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + nss * mi / den; /* addcdiv_: (value * t1) / t2 */
  }
}

void bcrt_sgd(long n, float *p, const float *g, float *buf, double lr, double momentum, double wd,
              int nesterov, long step) {
  bcrt_sgd_scaled(n, p, g, 1.0f, buf, lr, momentum, wd, nesterov, step);
}

void bcrt_sgd_scaled(long n, float *p, const float *g, float gs, float *buf, double lr,
                     double momentum, double wd, int nesterov, long step) {
  if (n <= 0) return;
  const float w = (float)wd, mu = (float)momentum, nlr = (float)(-lr);
  const int do_decay = wd != 0.0, mom = momentum != 0.0 && buf, first = step <= 1;
  for (long i = 0; i < n; i++) {
    float d = g[i] * gs;
    if (do_decay) d = OPT_MADD(p[i], w, d);
    if (mom) {
      float b = first ? d : buf[i] * mu + d;
      buf[i] = b;
      d = nesterov ? OPT_MADD(b, mu, d) : b;
    }
    p[i] = OPT_MADD(d, nlr, p[i]);
  }
}

/* Sixteen double partial sums (four independent vector add chains),
 * added in a fixed order. */
double bcrt_sumsq(long n, const float *g) {
  double acc[16] = {0};
  long i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; l++) {
      double x = (double)g[i + l];
      acc[l] = OPT_DMADD(x, x, acc[l]); /* exact product of floats: fused or not, same sum */
    }
  for (; i < n; i++) acc[0] += (double)g[i] * (double)g[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) acc[l] += acc[l + w];
  return acc[0];
}

double bcrt_sqrt(double x) { return sqrt(x); }

void bcrt_scale(long n, float *g, float s) {
  for (long i = 0; i < n; i++) g[i] *= s;
}

double bcrt_clip_coef(double total_norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.0;
  double c = max_norm / (total_norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

#ifndef OPT_PI
#define OPT_PI 3.14159265358979323846
#endif

double bcrt_lr_at(int kind, long step, long steps, long warmup, double lr, double min_lr) {
  if (step < 0) step = 0;
  if (kind == BCRT_LR_INVERSE_SQRT) { /* fairseq: warmup_init_lr 0, then lr sqrt(W / step) */
    if (warmup <= 0) return lr / sqrt((double)(step > 1 ? step : 1));
    if (step < warmup) return lr * (double)step / (double)warmup;
    return lr * sqrt((double)warmup) / sqrt((double)step);
  }
  if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
  if (kind != BCRT_LR_LINEAR && kind != BCRT_LR_COSINE) return lr;
  double ratio = steps > warmup ? (double)(step - warmup) / (double)(steps - warmup) : 1.0;
  if (ratio > 1.0) ratio = 1.0;
  if (kind == BCRT_LR_LINEAR) return lr - ratio * (lr - min_lr);
  double coeff = 0.5 * (1.0 + cos(OPT_PI * ratio));
  return min_lr + coeff * (lr - min_lr);
}

/* The step's passes over every parameter, on a pool (NULL: the calling
 * thread).  bcrt_update_pool: parameter p (numel[p] elements at offset
 * off[p] of the moment blocks m1, m2) gets bcrt_adamw_scaled or
 * bcrt_sgd_scaled as hp->optimizer says, with hp's coefficients, weight
 * decay where mask[p], the gradient scaled by gs, at rate lr and step t.
 * The work goes in tasks of OPT_CHUNK elements; elementwise updates give
 * every element the same bits in any chunk (the vector loop and the tail
 * do the same operations), so the result is the same for every pool.
 * bcrt_sumsq_pool: ss[p] = bcrt_sumsq(numel[p], g[p]), one task per
 * parameter (the caller adds them in order: the same sum as one loop). */
enum { OPT_CHUNK = 1 << 15 };
typedef struct {
  int np;
  float *const *w;
  const float *const *g;
  const long *numel, *off;
  const unsigned char *mask;
  float gs;
  float *m1, *m2;
  const bcrt_train_hparams *hp;
  double lr;
  long t;
  double *ss;
} opt_job;

static void opt_update_task(void *arg, int task, int ntasks) {
  (void)ntasks;
  const opt_job *j = (const opt_job *)arg;
  long first = 0;
  for (int p = 0; p < j->np; p++) {
    long chunks = (j->numel[p] + OPT_CHUNK - 1) / OPT_CHUNK;
    if (task >= first + chunks) {
      first += chunks;
      continue;
    }
    long i0 = (task - first) * (long)OPT_CHUNK, n = j->numel[p] - i0 < OPT_CHUNK ? j->numel[p] - i0 : OPT_CHUNK;
    const bcrt_train_hparams *hp = j->hp;
    double wd = j->mask[p] ? hp->weight_decay : 0.0;
    long o = j->off[p] + i0;
    if (hp->optimizer == BCRT_OPT_ADAMW)
      bcrt_adamw_scaled(n, j->w[p] + i0, j->g[p] + i0, j->gs, j->m1 + o, j->m2 + o, j->lr,
                        hp->beta1, hp->beta2, hp->eps, wd, j->t);
    else
      bcrt_sgd_scaled(n, j->w[p] + i0, j->g[p] + i0, j->gs, j->m1 + o, j->lr, hp->momentum, wd,
                      hp->nesterov, j->t);
    return;
  }
}

void bcrt_update_pool(bcrt_pool *pool, int np, float *const *w, const float *const *g,
                      const long *numel, const long *off, const unsigned char *mask, float gs,
                      float *m1, float *m2, const bcrt_train_hparams *hp, double lr, long t) {
  long tasks = 0;
  for (int p = 0; p < np; p++) tasks += (numel[p] + OPT_CHUNK - 1) / OPT_CHUNK;
  if (tasks <= 0 || tasks > INT_MAX) return;
  opt_job j = {.np = np, .w = w, .g = g, .numel = numel, .off = off, .mask = mask, .gs = gs,
               .m1 = m1, .m2 = m2, .hp = hp, .lr = lr, .t = t};
  bcrt_pool_run(pool, (int)tasks, opt_update_task, &j);
}

static void opt_sumsq_task(void *arg, int p, int ntasks) {
  (void)ntasks;
  const opt_job *j = (const opt_job *)arg;
  j->ss[p] = bcrt_sumsq(j->numel[p], j->g[p]);
}

void bcrt_sumsq_pool(bcrt_pool *pool, int np, const long *numel, const float *const *g,
                     double *ss) {
  if (np <= 0) return;
  opt_job j = {.np = np, .g = g, .numel = numel, .ss = ss};
  bcrt_pool_run(pool, np, opt_sumsq_task, &j);
}
