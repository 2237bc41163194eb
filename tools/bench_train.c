/* bench_train.c — training speed and peak memory of blockc's emitted step,
 * for `make bench-train` (tools/bench_train.py drives it; not a test).
 *
 *   bench_train GRAPH DATA.bin [-D NAME=VALUE]... [--threads N] [--steps S]
 *               [--warmup W]            one JSON line: ms per step (median), tokens/s, peak RSS
 *   bench_train --peak [--threads N]    one JSON line: the machine's sgemm GFLOP/s
 *
 * GRAPH is a whole-model LM (a tokens input `ids`, an output `logits`
 * [B, T, V]; graphs/gpt2_lm.blk).  DATA.bin is an llm.c token file (256
 * int32 header, magic 20240520, then uint16 ids); batch k takes llm.c's
 * sequential windows.  One step is what a training step costs: the emitted
 * <model>_backward (the forward keeping activations, then the backward, the
 * GEMMs on OpenBLAS with N threads), the next-token CrossEntropy over V
 * (softmax, loss, d logits), clipping by global norm (1.0: one sum-of-squares
 * pass, the coefficient folded into the update) and a fused AdamW pass over
 * every parameter (lr 3e-4, betas 0.9/0.999, eps 1e-8, weight
 * decay 0.01 on rank >= 2).  Until the emitted backward takes the loss as an
 * output, d logits of step k is applied by step k+1's backward (the same
 * work per step, one step stale): this program measures speed, not
 * convergence; `blockc train` is the real trainer.
 *
 * --peak times cblas_sgemm on the model's GEMM shapes (M = 512 rows), and
 * bcrt_sgemm_pick (what the emitted step calls: cblas_sgemm or the
 * runtime's own GEMM, runtime/src/sgemm.c), and reports the best median
 * rate of either ("gflops"; cblas_sgemm's alone: "cblas_gflops"): the floor
 * of a step is its FLOPs over it.
 */
#define _POSIX_C_SOURCE 200809L
#include "bc.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void openblas_set_num_threads(int n);

typedef struct {
  const char *graph, *data;
  bc_define defs[16];
  int ndefs, threads, steps, warmup, peak;
} opts;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double peak_rss_mb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

static int parse_args(int argc, char **argv, opts *o) {
  *o = (opts){.threads = 1, .steps = 10, .warmup = 2};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--peak")) o->peak = 1;
    else if (!strcmp(a, "-D") && i + 1 < argc && o->ndefs < 16) {
      char *eq = strchr(argv[++i], '=');
      if (!eq) return fprintf(stderr, "bench_train: error: -D wants NAME=VALUE\n"), 1;
      *eq = 0;
      o->defs[o->ndefs++] = (bc_define){argv[i], atoll(eq + 1)};
    } else if (!strcmp(a, "--threads") && i + 1 < argc) o->threads = atoi(argv[++i]);
    else if (!strcmp(a, "--steps") && i + 1 < argc) o->steps = atoi(argv[++i]);
    else if (!strcmp(a, "--warmup") && i + 1 < argc) o->warmup = atoi(argv[++i]);
    else if (!o->graph) o->graph = a;
    else if (!o->data) o->data = a;
    else return fprintf(stderr, "bench_train: error: unexpected argument '%s'\n", a), 1;
  }
  if (o->threads < 1 || o->steps < 1 || o->warmup < 0)
    return fprintf(stderr, "bench_train: error: bad --threads/--steps/--warmup\n"), 1;
  if (!o->peak && (!o->graph || !o->data))
    return fprintf(stderr, "usage: bench_train GRAPH DATA.bin [-D N=V]... [--threads N] "
                   "[--steps S] [--warmup W] | --peak [--threads N]\n"), 1;
  return 0;
}

// --- the sgemm peak ---------------------------------------------------------

// runtime/blockc_rt.h (not included: its cblas_sgemm prototype is not cblas.h's)
void bcrt_sgemm_pick(int order, int transa, int transb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc);

void bcrt_sgemm_mt(int nthreads, int transa, int transb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

// step: 0 cblas_sgemm, 1 bcrt_sgemm_pick (what the step calls), 2 the
// runtime's own bcrt_sgemm (on nt threads: bcrt_sgemm_mt) whatever the pick.
static double gemm_rate(int m, int n, int k, int ta, int tb, int step, int nt) {
  float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n),
        *c = malloc(sizeof(float) * (size_t)m * n);
  if (!a || !b || !c) return free(a), free(b), free(c), 0;
  for (long i = 0; i < (long)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
  for (long i = 0; i < (long)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
  double t[9];
  for (int r = -2; r < 9; r++) {
    double t0 = now_ms();
    if (step == 2)
      bcrt_sgemm_mt(nt, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
    else if (step)
      bcrt_sgemm_pick(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                      m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
    else
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                  n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
    if (r >= 0) t[r] = now_ms() - t0;
  }
  free(a), free(b), free(c);
  return 2.0 * m * n * k / (median(t, 9) * 1e6);  // GFLOP/s
}

// The core's FMA rate: 12 independent chains of vector FMAs (the
// compiler's widest vectors under -march=native), 2 FLOPs per lane.
typedef float fma_vec __attribute__((vector_size(64)));
static double fma_peak(void) {
  fma_vec acc[12], b, c;
  for (int j = 0; j < 16; j++) b[j] = 1.0000001f, c[j] = 1e-7f;
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 16; j++) acc[i][j] = (float)i;
  const long n = 20000000;
  double t0 = now_ms();
  for (long it = 0; it < n; it++)
    for (int i = 0; i < 12; i++) acc[i] = acc[i] * b + c;
  double ms = now_ms() - t0;
  float s = 0;
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 16; j++) s += acc[i][j];
  if (s == 1234.5f) printf(" ");  // keeps the loop
  return (double)n * 12 * 16 * 2 / (ms * 1e6);
}

static int run_peak(const opts *o) {
  openblas_set_num_threads(o->threads);
  // The step's shapes: y = x W (NN), dx = dy W^T (NT), dW = x^T dy (TN).
  static const int shp[][5] = {{512, 1536, 512, 0, 0}, {512, 2048, 512, 0, 0},
                               {512, 512, 2048, 0, 0}, {512, 8192, 512, 0, 1},
                               {512, 512, 8192, 0, 0}, {512, 2048, 512, 1, 0},
                               {2048, 512, 512, 1, 0}};
  double best = 0, bestc = 0, fma = fma_peak();
  printf("{\"what\": \"sgemm_peak\", \"threads\": %d, \"fma_peak_gflops\": %.1f, \"shapes\": [",
         o->threads, fma);
  for (int i = 0; i < (int)(sizeof shp / sizeof *shp); i++) {
    double g = gemm_rate(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4], 0, o->threads);
    double gs = gemm_rate(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4], 1, o->threads);
    double go = gemm_rate(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4], 2, o->threads);
    printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"ta\": %d, \"tb\": %d, \"gflops\": %.2f, "
           "\"step_gflops\": %.2f, \"own_gflops\": %.2f}",
           i ? ", " : "", shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4], g, gs, go);
    if (g > bestc) bestc = g;
    if (gs > best) best = gs;
  }
  printf("], \"gflops\": %.2f, \"cblas_gflops\": %.2f}\n", best > bestc ? best : bestc, bestc);
  return 0;
}

// --- data: llm.c's .bin and its sequential windows ----------------------------

typedef struct { unsigned short *tok; long n, pos; } data;

static int data_load(const char *path, data *d) {
  FILE *f = fopen(path, "rb");
  int hdr[256];
  if (!f || fread(hdr, sizeof(int), 256, f) != 256 || hdr[0] != 20240520 || hdr[2] < 2) {
    if (f) fclose(f);
    return fprintf(stderr, "bench_train: error: %s: not an llm.c token file\n", path), 1;
  }
  d->n = hdr[2];
  d->tok = malloc(sizeof *d->tok * (size_t)d->n);
  size_t got = d->tok ? fread(d->tok, sizeof *d->tok, (size_t)d->n, f) : 0;
  fclose(f);
  if (got != (size_t)d->n) return fprintf(stderr, "bench_train: error: %s: short\n", path), 1;
  return 0;
}

// Batch rows of T+1 tokens: ids = tok[s .. s+T), targets = tok[s+1 .. s+T].
static void data_next(data *d, long B, long T, int *ids, int *tgt) {
  if (d->pos + B * T + 1 > d->n) d->pos = 0;
  for (long i = 0; i < B * T; i++) {
    ids[i] = d->tok[d->pos + i];
    tgt[i] = d->tok[d->pos + i + 1];
  }
  d->pos += B * T;
}

// --- the loss and the update ------------------------------------------------------

// Mean next-token CrossEntropy over rows of V logits; writes d loss / d logits.
static double cross_entropy(const float *logits, const int *tgt, long rows, long V, float *dl) {
  double loss = 0;
  for (long r = 0; r < rows; r++) {
    const float *z = logits + r * V;
    float *g = dl + r * V, mx = z[0], s = 0;
    for (long j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    for (long j = 0; j < V; j++) s += (g[j] = expf(z[j] - mx));
    float inv = 1.0f / s, sc = inv / (float)rows;
    for (long j = 0; j < V; j++) g[j] *= sc;
    g[tgt[r]] -= 1.0f / (float)rows;
    loss += log(s) + mx - z[tgt[r]];
  }
  return loss / (double)rows;
}

typedef struct { float **m, **v; long *n; int *decay; int np; long step; } adam;

// One fused pass per parameter; gs: the clipping coefficient, applied to
// the gradient as it is read (no separate scaling pass).
static void adamw(adam *a, float **p, float **g, float lr, float gs) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  a->step++;
  float c1 = 1.0f - powf(b1, (float)a->step), c2 = 1.0f - powf(b2, (float)a->step);
  float step = lr / c1, rc2 = 1.0f / sqrtf(c2);
  for (int i = 0; i < a->np; i++) {
    float *w = p[i], *gi = g[i], *m = a->m[i], *v = a->v[i];
    float keep = a->decay[i] ? 1.0f - lr * wd : 1.0f;
    for (long j = 0; j < a->n[i]; j++) {
      float gj = gi[j] * gs;
      m[j] = b1 * m[j] + (1 - b1) * gj;
      v[j] = b2 * v[j] + (1 - b2) * gj * gj;
      w[j] = w[j] * keep - step * m[j] / (sqrtf(v[j]) * rc2 + eps);
    }
  }
}

// Sum of squares in 16 independent lanes: one serial double accumulator
// would be latency-bound (~4 cycles an element, 60+ ms over 24M gradients).
static double sumsq(long n, const float *g) {
  double acc[16] = {0}, ss = 0;
  long j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += (double)g[j + k] * g[j + k];
  for (; j < n; j++) ss += (double)g[j] * g[j];
  for (int k = 0; k < 16; k++) ss += acc[k];
  return ss;
}

// The global gradient norm and the coefficient clip_grad_norm_ applies.
static double clip_coef(float **g, const long *n, int np, double max_norm, double *norm) {
  double ss = 0;
  for (int i = 0; i < np; i++) ss += sumsq(n[i], g[i]);
  *norm = sqrt(ss);
  double c = max_norm / (*norm + 1e-6);
  return c < 1 ? c : 1;
}

// --- the training loop -----------------------------------------------------------

static int find_io(const bc_graph *g, const char *name, int input) {
  int n = input ? g->ninputs : g->noutputs;
  for (int i = 0; i < n; i++) {
    int v = input ? g->inputs[i] : g->outputs[i];
    if (!strcmp(g->vals[v].name, name)) return i;
  }
  return -1;
}

static int train(const opts *o) {
  bc_ctx *ctx = bc_ctx_new();
  bc_graph *g = ctx ? bcP_parse_file(ctx, o->graph, o->defs, o->ndefs) : NULL;
  if (!g || bcO_run_until(g, NULL)) return 1;
  int ids_i = find_io(g, "ids", 1), lg_o = find_io(g, "logits", 0);
  if (ids_i < 0 || lg_o < 0 || g->noutputs != 1)
    return fprintf(stderr, "bench_train: error: want input ids and one output logits\n"), 1;
  const bc_shape *ls = &g->vals[g->outputs[lg_o]].shape;
  long *rt = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *rt);
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0) rt[g->dims[i].rt] = (long)g->dims[i].value;
  bc_shape s = bcI_shape_at(g, ls, rt);
  long V = (long)s.d[s.rank - 1], rows = (long)(bc_shape_numel(&s) / V);
  long T = (long)s.d[s.rank - 2], B = rows / T;
  bc_emit_opts eo = {.backward = true};
  bc_compiled c = {0};
  bc_weights w = {0}, dw = {0};
  if (bcD_compile(ctx, g, &eo, &c) || bcW_init_random(ctx, g, 1, &w) ||
      bcW_init_random(ctx, g, 2, &dw))
    return 1;
  data d = {0};
  if (data_load(o->data, &d)) return 1;
  adam a = {.np = g->nparams};
  a.m = calloc((size_t)a.np, sizeof *a.m), a.v = calloc((size_t)a.np, sizeof *a.v);
  a.n = calloc((size_t)a.np, sizeof *a.n), a.decay = calloc((size_t)a.np, sizeof *a.decay);
  for (int i = 0; i < a.np; i++) {
    a.n[i] = (long)bc_shape_numel(&g->params[i].shape);
    a.decay[i] = g->params[i].shape.rank >= 2;
    a.m[i] = calloc((size_t)a.n[i], sizeof(float)), a.v[i] = calloc((size_t)a.n[i], sizeof(float));
  }
  int *ids = malloc(sizeof(int) * (size_t)rows), *tgt = malloc(sizeof(int) * (size_t)rows);
  float *logits = malloc(sizeof(float) * (size_t)(rows * V));
  float *dl = calloc((size_t)(rows * V), sizeof(float));
  void *ws = aligned_alloc(64, (size_t)((c.bwd_ws_bytes + 63) / 64 * 64));
  void **io = calloc((size_t)(g->ninputs + g->noutputs), sizeof *io);
  if (!ids || !tgt || !logits || !dl || !ws || !io)
    return fprintf(stderr, "bench_train: error: out of memory\n"), 1;
  io[ids_i] = ids;
  io[g->ninputs + lg_o] = logits;
  const float *dy[1] = {dl};
  openblas_set_num_threads(o->threads);
  int n = o->steps + o->warmup;
  double *t = calloc((size_t)n * 5, sizeof *t), *tb = t + n, *tce = t + 2 * n, *tcl = t + 3 * n,
         *tup = t + 4 * n;
  double loss = 0, gn = 0;
  for (int k = 0; k < n; k++) {
    double t0 = now_ms();
    data_next(&d, B, T, ids, tgt);
    if (c.backward((const float *const *)w.p, io, rt, dy, dw.p, NULL, ws))
      return fprintf(stderr, "bench_train: error: the backward failed\n"), 1;
    double t1 = now_ms();
    loss = cross_entropy(logits, tgt, rows, V, dl);
    double t2 = now_ms();
    double gc = clip_coef(dw.p, a.n, a.np, 1.0, &gn);
    double t3 = now_ms();
    adamw(&a, w.p, dw.p, 3e-4f, (float)gc);
    t[k] = now_ms() - t0;
    tup[k] = t[k] - (t3 - t0);
    tb[k] = t1 - t0;
    tce[k] = t2 - t1;
    tcl[k] = t3 - t2;
  }
  double ms = median(t + o->warmup, o->steps), bms = median(tb + o->warmup, o->steps);
  double cems = median(tce + o->warmup, o->steps), clms = median(tcl + o->warmup, o->steps);
  double upd = median(tup + o->warmup, o->steps);
  printf("{\"what\": \"blockc\", \"threads\": %d, \"B\": %ld, \"T\": %ld, \"V\": %ld, "
         "\"steps\": %d, \"ms\": %.3f, \"fwd_bwd_ms\": %.3f, \"ce_ms\": %.3f, \"clip_ms\": %.3f, "
         "\"adamw_ms\": %.3f, \"tokens_per_s\": %.1f, "
         "\"peak_rss_mb\": %.1f, \"workspace_mb\": %.1f, \"last_loss\": %.4f, \"grad_norm\": %.4f}\n",
         o->threads, B, T, V, o->steps, ms, bms, cems, clms, upd, (double)rows / ms * 1e3, peak_rss_mb(),
         (double)c.bwd_ws_bytes / 1048576.0, loss, gn);
  return 0;  // process exit frees everything
}

int main(int argc, char **argv) {
  opts o;
  if (parse_args(argc, argv, &o)) return 2;
  return o.peak ? run_peak(&o) : train(&o);
}
