/* bench_kernels.c — how fast are the runtime kernels, and what would we lose
 * by inlining elementwise loops into the generated (tcc-compiled) code?
 *
 * For each kernel at Transformer sizes it times four builds of "the same
 * work" and prints medians:
 *   rt/gcc     runtime/blockc_rt.c as shipped (linked; gcc -O3 -march=native)
 *   rt/tcc     the very same file compiled in-process by libtcc
 *   naive/gcc  plain loops calling libm (expf, erff, tanhf), gcc -O3 -march=native
 *   naive/tcc  those plain loops compiled by libtcc: what generated code
 *              would run if it inlined the elementwise work
 * plus one 128x512x2048 cblas_sgemm for scale.
 *
 * Build and run from the project root (the rt/tcc column reads the runtime
 * source at run time):
 *   gcc -std=c11 -O3 -march=native -Iruntime tools/bench_kernels.c \
 *       runtime/blockc_rt.c -ltcc -lopenblas -lm -ldl -o build/bench_kernels
 *   ./build/bench_kernels [reps]
 * Not a test: it asserts nothing, it measures. */
#define _POSIX_C_SOURCE 200809L
#include <libtcc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockc_rt.h"

/* The naive kernels, written once and compiled twice: here by gcc, and as a
 * string (the stringified macro argument) by libtcc. No # lines allowed. */
#define NAIVE_CODE(...) __VA_ARGS__
#define STR_(...) #__VA_ARGS__
#define STR(...) STR_(__VA_ARGS__)
#define NAIVE_SRC NAIVE_CODE(                                                         \
  float expf(float); float erff(float); float tanhf(float); float sqrtf(float);      \
  void nv_relu(int n, int d, const float *b, float *y) {                             \
    for (int i = 0; i < n; i++) for (int j = 0; j < d; j++) {                        \
      float v = y[i * d + j] + b[j]; y[i * d + j] = v < 0.0f ? 0.0f : v; } }         \
  void nv_gelu(int n, int d, const float *b, float *y) {                             \
    for (int i = 0; i < n; i++) for (int j = 0; j < d; j++) {                        \
      float v = y[i * d + j] + b[j];                                                 \
      y[i * d + j] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); } }                  \
  void nv_gelu_tanh(int n, int d, const float *b, float *y) {                        \
    for (int i = 0; i < n; i++) for (int j = 0; j < d; j++) {                        \
      float v = y[i * d + j] + b[j];                                                 \
      y[i * d + j] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); } } \
  void nv_add(long n, float al, const float *a, float be, const float *b, float *y) { \
    for (long i = 0; i < n; i++) y[i] = al * a[i] + be * b[i]; }                     \
  void nv_layernorm(int n, int d, const float *x, const float *w, const float *b,    \
                    float eps, float *y) {                                           \
    for (int i = 0; i < n; i++) {                                                    \
      const float *r = x + i * d; float *o = y + i * d; float m = 0, v = 0;          \
      for (int j = 0; j < d; j++) m += r[j];                                         \
      m /= d;                                                                        \
      for (int j = 0; j < d; j++) v += (r[j] - m) * (r[j] - m);                      \
      float rs = 1.0f / sqrtf(v / d + eps);                                          \
      for (int j = 0; j < d; j++) o[j] = (r[j] - m) * rs * w[j] + b[j]; } }          \
  void nv_add_layernorm(int n, int d, float al, const float *a, float be,            \
                        const float *b, const float *w, const float *bias, float eps, \
                        float *sum, float *y) {                                      \
    nv_add((long)n * d, al, a, be, b, sum);                                          \
    nv_layernorm(n, d, sum, w, bias, eps, y); }                                      \
  void nv_softmax(int n, int d, int ld, int causal, int row0, float *s) {            \
    for (int i = 0; i < n; i++) {                                                    \
      float *r = s + i * ld; int len = causal ? i + 1 + row0 : d;                    \
      if (len > d) len = d;                                                          \
      float m = r[0], sum = 0;                                                       \
      for (int j = 1; j < len; j++) if (r[j] > m) m = r[j];                          \
      for (int j = 0; j < len; j++) { r[j] = expf(r[j] - m); sum += r[j]; }          \
      for (int j = 0; j < len; j++) r[j] /= sum;                                     \
      for (int j = len; j < d; j++) r[j] = 0.0f; } }                                 \
)

NAIVE_SRC

static const char *naive_src = STR(NAIVE_SRC);

typedef void (*act_fn)(int, int, const float *, float *);
typedef void (*bias_act_fn)(int, int, const float *, int, float *);
typedef void (*add_fn)(long, float, const float *, float, const float *, float *);
typedef void (*ln_fn)(int, int, const float *, const float *, const float *, float, float *);
typedef void (*addln_fn)(int, int, float, const float *, float, const float *, const float *,
                         const float *, float, float *, float *);
typedef void (*dual_fn)(int, int, float, const float *, float, float, const float *, float,
                        const float *, const float *, const float *, float, float *, float *);
typedef void (*softmax_fn)(int, int, int, int, int, float *);

/* One build of the kernels; NULL where a build has no such kernel. */
typedef struct {
  const char *name;
  bias_act_fn bias_act;          /* runtime builds */
  act_fn relu, gelu, gelu_tanh;  /* naive builds */
  add_fn add;
  ln_fn layernorm;
  addln_fn add_layernorm;
  dual_fn dual;
  softmax_fn softmax;
} kernels;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The work items; each reset()s its in-place inputs outside the timing. */
enum { N = 128, D = 512, F = 2048, H = 8, T = 128 };
typedef struct {
  float *src, *x, *y, *a, *b, *w, *bias, *sum, *u, *xd, *xa, *xd2, *xa2, *s;
} buffers;

static void fill(float *p, long n, unsigned *seed, float scale) {
  for (long i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = scale * ((float)(*seed >> 8) / 16777216.0f - 0.5f);
  }
}

typedef enum {
  K_RELU, K_GELU, K_GELU_TANH, K_ADD, K_LN, K_ADD_LN, K_DUAL, K_SOFTMAX, K_SOFTMAX_CAUSAL, K_COUNT
} kernel_id;

static const char *kernel_name[K_COUNT] = {
  "bias+relu", "bias+gelu", "bias+gelu_tanh", "add", "layernorm", "add_layernorm",
  "dual_add_layernorm", "softmax 8x128x128", "softmax causal"};

/* Runs kernel k of build kb once on n rows of width d; returns seconds, or
 * -1 if the build lacks it. */
static double run_once(const kernels *kb, kernel_id k, int d, buffers *m) {
  long nd = (long)N * d;
  double t0 = 0, t1 = 0;
  switch (k) {
  case K_RELU: case K_GELU: case K_GELU_TANH: {
    act_fn f = k == K_RELU ? kb->relu : k == K_GELU ? kb->gelu : kb->gelu_tanh;
    int act = k == K_RELU ? BCRT_ACT_RELU : k == K_GELU ? BCRT_ACT_GELU : BCRT_ACT_GELU_TANH;
    memcpy(m->y, m->src, (size_t)nd * sizeof(float));
    t0 = now();
    if (kb->bias_act) kb->bias_act(N, d, m->bias, act, m->y);
    else f(N, d, m->bias, m->y);
    t1 = now();
    break;
  }
  case K_ADD:
    t0 = now(); kb->add(nd, 1.0f, m->a, 1.0f, m->b, m->y); t1 = now();
    break;
  case K_LN:
    t0 = now(); kb->layernorm(N, d, m->x, m->w, m->bias, 1e-5f, m->y); t1 = now();
    break;
  case K_ADD_LN:
    t0 = now();
    kb->add_layernorm(N, d, 1.0f, m->a, 1.0f, m->b, m->w, m->bias, 1e-5f, m->sum, m->y);
    t1 = now();
    break;
  case K_DUAL:
    if (!kb->dual) return -1;
    t0 = now();
    kb->dual(N, d, 1.0f, m->xd, 1.0f, 1.0f, m->xa, 1.0f, m->u, m->w, m->bias, 1e-5f, m->xd2,
             m->xa2);
    t1 = now();
    break;
  case K_SOFTMAX: case K_SOFTMAX_CAUSAL:
    if (d != D) return -1; /* one size: 8 heads x 128 x 128 */
    memcpy(m->s, m->src, (size_t)H * T * T * sizeof(float));
    t0 = now();
    for (int h = 0; h < H; h++) kb->softmax(T, T, T, k == K_SOFTMAX_CAUSAL, 0, m->s + h * T * T);
    t1 = now();
    break;
  default: break;
  }
  return t1 - t0;
}

static double median_us(const kernels *kb, kernel_id k, int d, buffers *m, int reps) {
  double *t = malloc((size_t)reps * sizeof *t);
  if (run_once(kb, k, d, m) < 0) { free(t); return -1; } /* also a warm-up */
  for (int r = 0; r < reps; r++) t[r] = run_once(kb, k, d, m);
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  double med = t[reps / 2] * 1e6;
  free(t);
  return med;
}

static void tcc_error(void *opaque, const char *msg) {
  (void)opaque;
  fprintf(stderr, "tcc: %s\n", msg);
}

/* Compiles either a file or a string with libtcc; NULL on failure. */
static TCCState *tcc_build(const char *file, const char *src) {
  TCCState *s = tcc_new();
  if (!s) return NULL;
  tcc_set_error_func(s, NULL, tcc_error);
  tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
  tcc_add_include_path(s, "runtime");
  int rc = file ? tcc_add_file(s, file) : tcc_compile_string(s, src);
  if (rc == 0) tcc_add_library(s, "m");
  if (rc != 0 || tcc_relocate(s, TCC_RELOCATE_AUTO) < 0) {
    tcc_delete(s);
    return NULL;
  }
  return s;
}

/* Function pointers from tcc_get_symbol's void *: memcpy keeps -Wpedantic
 * quiet about object-to-function pointer conversion. */
#define SYM(s, dst, name)                                      \
  do {                                                         \
    void *p_ = tcc_get_symbol(s, name);                        \
    if (!p_) { fprintf(stderr, "missing %s\n", name); exit(1); } \
    memcpy(&(dst), &p_, sizeof p_);                            \
  } while (0)

static void print_row(const char *name, int d, const double *us, int nb) {
  char label[64];
  snprintf(label, sizeof label, "%s d=%d", name, d);
  printf("%-30s", label);
  for (int i = 0; i < nb; i++) {
    if (us[i] < 0) printf(" %10s", "-");
    else printf(" %10.1f", us[i]);
  }
  if (us[0] > 0 && us[1] > 0) printf("   %6.1fx", us[1] / us[0]);
  else printf("   %7s", "");
  if (us[0] > 0 && us[3] > 0) printf("   %6.1fx", us[3] / us[0]);
  printf("\n");
}

static float *alloc_f(long n, unsigned *seed, float scale) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) { perror("malloc"); exit(1); }
  fill(p, n, seed, scale);
  return p;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 201;
  if (reps < 1) reps = 1;
  const char *rt_path = "runtime/blockc_rt.c";

  TCCState *rt_tcc = tcc_build(rt_path, NULL);
  TCCState *nv_tcc = tcc_build(NULL, naive_src);
  if (!rt_tcc || !nv_tcc) {
    fprintf(stderr, "libtcc build failed (run from the project root)\n");
    return 1;
  }
  kernels kb[4] = {
    {"rt/gcc", bcrt_bias_act, 0, 0, 0, bcrt_add, bcrt_layernorm, bcrt_add_layernorm,
     bcrt_dual_add_layernorm, bcrt_softmax},
    {"rt/tcc", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"naive/gcc", 0, nv_relu, nv_gelu, nv_gelu_tanh, nv_add, nv_layernorm, nv_add_layernorm,
     0, nv_softmax},
    {"naive/tcc", 0, 0, 0, 0, 0, 0, 0, 0, 0},
  };
  SYM(rt_tcc, kb[1].bias_act, "bcrt_bias_act");
  SYM(rt_tcc, kb[1].add, "bcrt_add");
  SYM(rt_tcc, kb[1].layernorm, "bcrt_layernorm");
  SYM(rt_tcc, kb[1].add_layernorm, "bcrt_add_layernorm");
  SYM(rt_tcc, kb[1].dual, "bcrt_dual_add_layernorm");
  SYM(rt_tcc, kb[1].softmax, "bcrt_softmax");
  SYM(nv_tcc, kb[3].relu, "nv_relu");
  SYM(nv_tcc, kb[3].gelu, "nv_gelu");
  SYM(nv_tcc, kb[3].gelu_tanh, "nv_gelu_tanh");
  SYM(nv_tcc, kb[3].add, "nv_add");
  SYM(nv_tcc, kb[3].layernorm, "nv_layernorm");
  SYM(nv_tcc, kb[3].add_layernorm, "nv_add_layernorm");
  SYM(nv_tcc, kb[3].softmax, "nv_softmax");

  unsigned seed = 12345;
  long big = (long)N * F > (long)H * T * T ? (long)N * F : (long)H * T * T;
  buffers m = {
    alloc_f(big, &seed, 8.0f), alloc_f(big, &seed, 4.0f), alloc_f(big, &seed, 1.0f),
    alloc_f(big, &seed, 2.0f), alloc_f(big, &seed, 2.0f), alloc_f(F, &seed, 2.0f),
    alloc_f(F, &seed, 1.0f), alloc_f(big, &seed, 1.0f), alloc_f(big, &seed, 2.0f),
    alloc_f(big, &seed, 2.0f), alloc_f(big, &seed, 2.0f), alloc_f(big, &seed, 1.0f),
    alloc_f(big, &seed, 1.0f), alloc_f(big, &seed, 1.0f)};

  printf("median of %d runs, microseconds per call (n=%d rows)\n\n", reps, N);
  printf("%-30s %10s %10s %10s %10s   %7s   %7s\n", "kernel", kb[0].name, kb[1].name,
         kb[2].name, kb[3].name, "rt tcc/gcc", "naive tcc/rt gcc");
  for (int k = 0; k < K_COUNT; k++) {
    int dims[2] = {D, F};
    for (int di = 0; di < 2; di++) {
      double us[4];
      for (int b = 0; b < 4; b++) us[b] = median_us(&kb[b], (kernel_id)k, dims[di], &m, reps);
      if (us[0] < 0) continue;
      print_row(kernel_name[k], dims[di], us, 4);
    }
  }

  /* Scale: the FFN's first GEMM, 128x2048 = 128x512 . (2048x512)^T. */
  float *a = alloc_f((long)N * D, &seed, 1.0f), *w = alloc_f((long)F * D, &seed, 1.0f);
  float *c = alloc_f((long)N * F, &seed, 1.0f);
  double t[51];
  for (int r = 0; r < 51; r++) {
    double t0 = now();
    cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, N, F, D, 1.0f, a, D, w, D, 0.0f, c,
                F);
    t[r] = now() - t0;
  }
  qsort(t, 51, sizeof *t, cmp_double);
  printf("\nsgemm 128x512x2048 (m x k x n): %.1f us, %.1f GFLOP/s\n", t[25] * 1e6,
         2.0 * N * D * F / t[25] * 1e-9);
  tcc_delete(rt_tcc);
  tcc_delete(nv_tcc);
  return 0;
}
