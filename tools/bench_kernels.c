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
 * Then the matrix products of issue 11, each measured side by side with
 * what it is compared with, the calls interleaved rep by rep, medians:
 *   read floor   a plain vectorised read of the same bytes (GB/s, ms)
 *   small-M      bcrt_gemm_small (packed weights) vs cblas_sgemm at M = 1,
 *                8, 16, 32 on the model's N x K; weights rotate through
 *                ~80 MB of copies so each call streams them from memory
 *   T=1 forward  the weight GEMVs of post_ln D=512 F=2048 N=6 (75.5 MB)
 *                in sequence, vs the read floor of the same bytes
 *   portable     bcrt_sgemm (the -DBLOCKC_NO_BLAS GEMM) vs OpenBLAS, one
 *                thread, GFLOP/s
 *   weight types bcrt_linear_wt on F32, BF16, Q8_0, Q4_0 panels vs the read
 *                floor of each type's packed bytes (`wt` only)
 * `bench_kernels [reps] [all|elementwise|gemm|small|optim|wt]` (default: 201,
 * all; small: the small-M rows alone, as `make bench` prints them; wt: the
 * weight types alone).
 *
 * Build and run from the project root (the rt/tcc column reads the runtime
 * source at run time):
 *   gcc -std=c11 -O3 -march=native -Iruntime tools/bench_kernels.c \
 *       runtime/blockc_rt.c -ltcc -lopenblas -lm -ldl -o build/bench_kernels
 *   ./build/bench_kernels [reps] [all|elementwise|gemm|small]
 * (or `make bench-kernels`).  Not a test: it asserts nothing, it measures. */
#define _POSIX_C_SOURCE 200809L
#include <libtcc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
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

/* ------------------------------------------------------------------------
 * Issue 11: small-M kernel, read floor, portable GEMM
 * ------------------------------------------------------------------------ */
void openblas_set_num_threads(int n); /* OpenBLAS; cblas.h is not included */

/* The read floor: bcrt_stream_sum (runtime/blockc_rt.h), plain and with a
 * software prefetch 2 KiB ahead as the small-M kernel does: on this machine
 * the latter streams faster, so the floor reported is the faster of the two
 * (the stricter comparison). */
/* Seconds for the faster of the two floor reads of n floats: the plain one
 * at p, the prefetching one at q (another copy, or p itself when the data
 * is far bigger than the caches). */
static double floor_read(const float *p, const float *q, size_t n, float *sum) {
  double t0 = now();
  *sum += bcrt_stream_sum((long)n, p, 0);
  double t1 = now();
  *sum += bcrt_stream_sum((long)n, q, 1);
  double t2 = now();
  return t1 - t0 < t2 - t1 ? t1 - t0 : t2 - t1;
}

static double median_of(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return t[n / 2];
}

static void *xmalloc(size_t bytes) {
  void *p = bcrt_aligned_alloc(64, bytes ? bytes : 64);
  if (!p) { perror("malloc"); exit(1); }
  return p;
}

/* A weight matrix in `copies` rotating copies, raw (for cblas) and packed. */
typedef struct {
  int n, k, copies;
  size_t raw_floats, packed_floats;
  float *raw, *packed;
} wset;

static wset wset_new(int n, int k, size_t min_bytes, unsigned *seed) {
  wset w = {.n = n, .k = k};
  w.raw_floats = (size_t)n * (size_t)k;
  w.packed_floats = bcrt_pack_nt_size(n, k);
  w.copies = (int)(min_bytes / (w.raw_floats * 4)) + 1;
  w.raw = xmalloc(w.raw_floats * 4 * (size_t)w.copies);
  w.packed = xmalloc(w.packed_floats * 4 * (size_t)w.copies);
  fill(w.raw, (long)(w.raw_floats * (size_t)w.copies), seed, 0.1f);
  for (int c = 0; c < w.copies; c++)
    bcrt_pack_nt(n, k, w.raw + (size_t)c * w.raw_floats, w.packed + (size_t)c * w.packed_floats);
  return w;
}

static void wset_free(wset *w) {
  bcrt_aligned_free(w->raw);
  bcrt_aligned_free(w->packed);
}

/* Small-M kernel vs cblas_sgemm vs the read floor of the same bytes, rep
 * by rep on rotating copies (each call finds its weights out of cache). */
static void bench_small_shape(int n, int k, const int *ms, int nm, int reps, unsigned *seed) {
  wset w = wset_new(n, k, (size_t)80 << 20, seed);
  volatile float sink = 0; /* keeps the floor reads alive */
  float *x = alloc_f(32L * k, seed, 1.0f), *y = alloc_f(32L * n, seed, 1.0f);
  double *tf = malloc((size_t)reps * sizeof *tf), *ts = malloc((size_t)reps * sizeof *ts),
         *tb = malloc((size_t)reps * sizeof *tb);
  double bytes = (double)w.raw_floats * 4;
  for (int mi = 0; mi < nm; mi++) {
    int m = ms[mi], c = 0;
    for (int r = 0; r < reps; r++) {
      float sum = 0;
      int c2 = (c + 1) % w.copies;
      tf[r] = floor_read(w.packed + (size_t)c * w.packed_floats,
                         w.packed + (size_t)c2 * w.packed_floats, w.raw_floats, &sum);
      sink += sum;
      c = (c2 + 1) % w.copies;
      double t0 = now();
      bcrt_gemm_small(m, n, k, x, k, w.packed + (size_t)c * w.packed_floats, NULL, 0.0f, y, n);
      ts[r] = now() - t0;
      c = (c + 1) % w.copies;
      t0 = now();
      cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, m, n, k, 1.0f, x, k,
                  w.raw + (size_t)c * w.raw_floats, k, 0.0f, y, n);
      tb[r] = now() - t0;
      c = (c + 1) % w.copies;
    }
    double f = median_of(tf, reps), sm = median_of(ts, reps), bl = median_of(tb, reps);
    printf("%4dx%-4d %3d | %7.4f %6.1f | %7.4f %6.1f %6.1f | %7.4f %6.1f %6.1f | %5.2fx %5.2fx\n",
           n, k, m, f * 1e3, bytes / f * 1e-9, sm * 1e3, bytes / sm * 1e-9,
           2.0 * m * n * k / sm * 1e-9, bl * 1e3, bytes / bl * 1e-9, 2.0 * m * n * k / bl * 1e-9,
           bl / sm, sm / f);
  }
  free(tf), free(ts), free(tb), free(x), free(y);
  wset_free(&w);
}

/* The T=1 (and T=8) forward's weight GEMVs for post_ln D=512 F=2048 N=6:
 * per layer the attention in/out projections and the two FFN matrices,
 * packed contiguously layer after layer as a JIT would hold them. */
enum { FW_D = 512, FW_F = 2048, FW_N = 6, FW_MATS = 4 };

static void bench_forward(int reps, unsigned *seed) {
  const int shp[FW_MATS][2] = {{3 * FW_D, FW_D}, {FW_D, FW_D}, {FW_F, FW_D}, {FW_D, FW_F}};
  size_t off_raw[FW_N * FW_MATS], off_pk[FW_N * FW_MATS], raw = 0, pk = 0;
  for (int l = 0; l < FW_N; l++)
    for (int i = 0; i < FW_MATS; i++) {
      off_raw[l * FW_MATS + i] = raw, off_pk[l * FW_MATS + i] = pk;
      raw += (size_t)shp[i][0] * shp[i][1];
      pk += bcrt_pack_nt_size(shp[i][0], shp[i][1]);
    }
  float *w = xmalloc(raw * 4), *p = xmalloc(pk * 4);
  unsigned short *ph = xmalloc(pk * 2);
  fill(w, (long)raw, seed, 0.05f);
  for (int l = 0; l < FW_N; l++)
    for (int i = 0; i < FW_MATS; i++) {
      bcrt_pack_nt(shp[i][0], shp[i][1], w + off_raw[l * FW_MATS + i], p + off_pk[l * FW_MATS + i]);
      bcrt_pack_nt_bf16(shp[i][0], shp[i][1], w + off_raw[l * FW_MATS + i],
                        ph + off_pk[l * FW_MATS + i]);
    }
  float *x = alloc_f(8L * FW_F, seed, 1.0f), *y = alloc_f(8L * FW_F, seed, 1.0f);
  volatile float sink = 0; /* keeps the floor reads alive */
  double *tf = malloc((size_t)reps * sizeof *tf), *ts = malloc((size_t)reps * sizeof *ts),
         *tb = malloc((size_t)reps * sizeof *tb), *th = malloc((size_t)reps * sizeof *th);
  double bytes = (double)raw * 4;
  printf("\nT=1 forward weight GEMVs, post_ln D=%d F=%d N=%d: %.1f MB of weights "
         "(24 matrices; biases/LN not counted)\n", FW_D, FW_F, FW_N, bytes / 1e6);
  printf("  M | floor ms   GB/s | small ms   GB/s | cblas ms   GB/s | small/floor cblas/floor "
         "cblas/small | bf16 ms  bf16/floor\n");
  const int ms[2] = {1, 8};
  for (int mi = 0; mi < 2; mi++) {
    int m = ms[mi];
    for (int r = 0; r < reps; r++) {
      float sum = 0;
      tf[r] = floor_read(p, p, raw, &sum);
      sink += sum;
      double t0 = now();
      for (int j = 0; j < FW_N * FW_MATS; j++) {
        int n = shp[j % FW_MATS][0], k = shp[j % FW_MATS][1];
        bcrt_gemm_small(m, n, k, x, k, p + off_pk[j], NULL, 0.0f, y, n);
      }
      ts[r] = now() - t0;
      t0 = now();
      for (int j = 0; j < FW_N * FW_MATS; j++) {
        int n = shp[j % FW_MATS][0], k = shp[j % FW_MATS][1];
        cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, m, n, k, 1.0f, x, k,
                    w + off_raw[j], k, 0.0f, y, n);
      }
      tb[r] = now() - t0;
      t0 = now();
      for (int j = 0; j < FW_N * FW_MATS; j++) {
        int n = shp[j % FW_MATS][0], k = shp[j % FW_MATS][1];
        bcrt_gemm_small_bf16(1, m, n, k, x, k, ph + off_pk[j], NULL, 0.0f, y, n);
      }
      th[r] = now() - t0;
    }
    double f = median_of(tf, reps), sm = median_of(ts, reps), bl = median_of(tb, reps),
           bh = median_of(th, reps);
    printf("%3d | %8.3f %6.1f | %8.3f %6.1f | %8.3f %6.1f | %10.2fx %10.2fx %10.2fx | %7.3f "
           "%9.2fx\n", m, f * 1e3, bytes / f * 1e-9, sm * 1e3, bytes / sm * 1e-9, bl * 1e3,
           bytes / bl * 1e-9, sm / f, bl / f, bl / sm, bh * 1e3, bh / f);
  }
  printf("(floor: the faster of a plain and a prefetching vectorised read of the float32 "
         "bytes; bf16: the same GEMVs on BF16 weights, half the bytes)\n");
  free(tf), free(ts), free(tb), free(th), free(x), free(y);
  bcrt_aligned_free(ph);
  bcrt_aligned_free(w);
  bcrt_aligned_free(p);
}

/* bcrt_sgemm vs OpenBLAS on in-cache operands, interleaved, medians; for
 * x W^T shapes also bcrt_gemm_small on pre-packed W (its blocked path). */
static void bench_portable(int reps, unsigned *seed) {
  static const struct { int m, n, k, tb; } sh[] = {
    {128, 1536, 512, 1}, {128, 2048, 512, 1}, {128, 512, 2048, 1}, {512, 512, 512, 0},
    {512, 512, 512, 1}};
  printf("\nportable GEMM (bcrt_sgemm = cblas_sgemm under -DBLOCKC_NO_BLAS) vs OpenBLAS, "
         "one thread, GFLOP/s, in cache\n");
  printf("median, then the best of the %d runs in parentheses (compute-bound and in cache, "
         "so the best is the machine's own speed when it is shared)\n", reps);
  printf("%-22s %16s %16s %16s %14s %14s\n", "M x N x K, op(B)", "bcrt_sgemm", "packed W",
         "openblas", "sgemm/ob", "packed/ob");
  double *ta = malloc((size_t)reps * sizeof *ta), *tb = malloc((size_t)reps * sizeof *tb),
         *tp = malloc((size_t)reps * sizeof *tp);
  for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
    int m = sh[s].m, n = sh[s].n, k = sh[s].k;
    float *a = alloc_f((long)m * k, seed, 1.0f), *b = alloc_f((long)n * k, seed, 1.0f);
    float *c = alloc_f((long)m * n, seed, 1.0f);
    float *p = xmalloc(bcrt_pack_nt_size(n, k) * sizeof(float));
    bcrt_pack_nt(n, k, b, p);
    int tr = sh[s].tb ? BCRT_TRANS : BCRT_NO_TRANS, ldb = sh[s].tb ? k : n;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
      double t0 = now();
      bcrt_sgemm(BCRT_NO_TRANS, tr, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
      double t1 = now();
      cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, tr, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
      double t2 = now();
      if (sh[s].tb) bcrt_gemm_small(m, n, k, a, k, p, NULL, 0.0f, c, n);
      double t3 = now();
      if (r >= 0) ta[r] = t1 - t0, tb[r] = t2 - t1, tp[r] = t3 - t2;
    }
    double fl = 2.0 * m * n * k, ga = fl / median_of(ta, reps) * 1e-9,
           gb = fl / median_of(tb, reps) * 1e-9, gp = fl / median_of(tp, reps) * 1e-9;
    double ba = fl / ta[0] * 1e-9, bb = fl / tb[0] * 1e-9, bp = fl / tp[0] * 1e-9; /* sorted */
    char label[64];
    snprintf(label, sizeof label, "%dx%dx%d, %s", m, n, k, sh[s].tb ? "B^T" : "B");
    if (sh[s].tb)
      printf("%-22s %7.1f (%6.1f) %7.1f (%6.1f) %7.1f (%6.1f) %5.2fx (%4.2fx) %5.2fx (%4.2fx)\n",
             label, ga, ba, gp, bp, gb, bb, ga / gb, ba / bb, gp / gb, bp / bb);
    else
      printf("%-22s %7.1f (%6.1f) %16s %7.1f (%6.1f) %5.2fx (%4.2fx) %14s\n", label, ga, ba, "-",
             gb, bb, ga / gb, ba / bb, "-");
    free(a), free(b), free(c);
    bcrt_aligned_free(p);
  }
  free(ta), free(tb), free(tp);
}

/* The machine's load average, printed with the GEMM tables: the memory
 * stream is shared, so other work moves these numbers. */
static void print_load(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  char buf[128] = "";
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
    fclose(f);
  }
  printf("load average: %s", buf[0] ? buf : "unknown\n");
}

/* The small-M rows (`make bench` prints them): the model's shapes. */
static void bench_small(int reps, unsigned *seed) {
  static const int shapes[4][2] = {{512, 512}, {1536, 512}, {2048, 512}, {512, 2048}};
  static const int ms[4] = {1, 8, 16, 32};
  printf("\nsmall-M: y[M,N] = x[M,K] W^T, one thread, weights streamed from ~80 MB of "
         "rotating copies; median of %d, interleaved\n", reps);
  printf("   N x K    M | floor ms   GB/s | small ms   GB/s GFLOP/s | cblas ms   GB/s GFLOP/s "
         "| cblas/small small/floor\n");
  for (int s = 0; s < 4; s++) bench_small_shape(shapes[s][0], shapes[s][1], ms, 4, reps, seed);
}

/* Weight types (bcrt_linear_wt): each type's packed bytes against the read
 * floor of the same bytes (bcrt_stream_sum over them), one thread, rotating
 * copies of >= 80 MB, interleaved rep by rep, medians.  GB/s are of the
 * packed bytes (Q8_0 is 36 bytes per 32 weights, Q4_0 20). */
static void bench_wt_shape(int n, int k, int m, int reps, unsigned *seed) {
  static const char *names[BCRT_WT_COUNT] = {"f32", "bf16", "q8_0", "q4_0", "f16"};
  float *w = alloc_f((long)n * k, seed, 0.1f), *x = alloc_f((long)m * k, seed, 1.0f);
  float *y = alloc_f((long)m * n, seed, 1.0f);
  double *tf = malloc((size_t)reps * sizeof *tf), *tk = malloc((size_t)reps * sizeof *tk);
  volatile float sink = 0;
  for (int wt = 0; wt < BCRT_WT_COUNT; wt++) {
    size_t bytes = bcrt_pack_wt_bytes(wt, n, k);
    int copies = (int)(((size_t)80 << 20) / bytes) + 2;
    char *pk = xmalloc(bytes * (size_t)copies);
    bcrt_pack_nt_wt(wt, n, k, w, pk);
    for (int c = 1; c < copies; c++) memcpy(pk + (size_t)c * bytes, pk, bytes);
    int c = 0;
    for (int r = 0; r < reps; r++) {
      float sum = 0;
      int c2 = (c + 1) % copies;
      tf[r] = floor_read((const float *)(const void *)(pk + (size_t)c * bytes),
                         (const float *)(const void *)(pk + (size_t)c2 * bytes), bytes / 4, &sum);
      sink += sum;
      c = (c2 + 1) % copies;
      double t0 = now();
      bcrt_linear_wt(wt, m, n, k, x, k, pk, (long)((size_t)c * bytes), NULL, 0.0f, y, n);
      tk[r] = now() - t0;
      c = (c + 1) % copies;
    }
    double f = median_of(tf, reps), t = median_of(tk, reps);
    printf("%4dx%-4d %2d %-4s | %9.1f KB | %8.1f %6.1f | %8.1f %6.1f | %5.2fx\n", n, k, m,
           names[wt], bytes / 1024.0, f * 1e6, bytes / f * 1e-9, t * 1e6, bytes / t * 1e-9,
           t / f);
    bcrt_aligned_free(pk);
  }
  free(w), free(x), free(y), free(tf), free(tk);
}

static void bench_wt(int reps, unsigned *seed) {
  static const int shapes[3][2] = {{1376, 512}, {512, 1376}, {4096, 4096}};
  static const int ms[2] = {1, 8};
  printf("\nweight types: y[M,N] = x[M,K] W^T by bcrt_linear_wt, one thread, packed weights "
         "streamed from >= 80 MB of rotating copies; median of %d, interleaved\n", reps);
  printf("  N x K    M type |     packed | floor us   GB/s | kernel us  GB/s | kernel/floor\n");
  for (int s = 0; s < 3; s++)
    for (int mi = 0; mi < 2; mi++) bench_wt_shape(shapes[s][0], shapes[s][1], ms[mi], reps, seed);
}

static void bench_gemm(int reps, unsigned *seed) {
  openblas_set_num_threads(1);
  printf("\n");
  print_load();
  bench_small(reps, seed);
  bench_forward(reps, seed);
  bench_portable(reps, seed);
  print_load();
}

/* Issue 22: the optimizer update, one fused pass per tensor (read p, g, m,
 * v; write p, m, v: 28 bytes per element), next to the read floor of the
 * same bytes (bcrt_stream_sum over 7 n floats) and a GPT-2-small-sized
 * tensor set (124M parameters is too big to be polite here: 8M floats,
 * 224 MB moved per step, well past the caches). */
static void bench_optim(int reps, unsigned *seed) {
  const long n = 8L << 20;
  float *p = alloc_f(n, seed, 1.0f), *g = alloc_f(n, seed, 1.0f), *m = alloc_f(n, seed, 0.1f);
  float *v = alloc_f(n, seed, 0.1f), *buf = alloc_f(7 * n, seed, 1.0f);
  for (long i = 0; i < n; i++) v[i] = v[i] * v[i];
  if (reps > 21) reps = 21;
  double ta[21], ts[21], tf[21], tn[21], sink = 0;
  float fsum = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    bcrt_adamw(n, p, g, m, v, 1e-4, 0.9, 0.999, 1e-8, 0.01, r + 1);
    double t1 = now();
    bcrt_sgd(n, p, g, m, 1e-4, 0.9, 0.01, 0, r + 1);
    double t2 = now();
    sink += bcrt_sumsq(n, g);
    double t3 = now();
    ta[r] = t1 - t0;
    ts[r] = t2 - t1;
    tn[r] = t3 - t2;
    tf[r] = floor_read(buf, buf, (size_t)(7 * n), &fsum);
  }
  double a = median_of(ta, reps), sg = median_of(ts, reps), f = median_of(tf, reps),
         nr = median_of(tn, reps);
  printf("\noptimizer update, %ld floats (median of %d; sink %g %g)\n", n, reps, sink, (double)fsum);
  printf("  bcrt_adamw  %8.2f ms  %6.1f GB/s (28 B/elem)   read floor of the same bytes %8.2f ms "
         "%6.1f GB/s   ratio %.2fx\n", a * 1e3, 28.0 * n / a * 1e-9, f * 1e3, 28.0 * n / f * 1e-9, a / f);
  printf("  bcrt_sgd    %8.2f ms  %6.1f GB/s (20 B/elem)   floor %8.2f ms   ratio %.2fx\n", sg * 1e3,
         20.0 * n / sg * 1e-9, f * 20 / 28 * 1e3, sg / (f * 20 / 28));
  printf("  bcrt_sumsq  %8.2f ms  %6.1f GB/s (4 B/elem)    floor %8.2f ms   ratio %.2fx\n", nr * 1e3,
         4.0 * n / nr * 1e-9, f / 7 * 1e3, nr / (f / 7));
  free(p); free(g); free(m); free(v); free(buf);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 201;
  if (reps < 1) reps = 1;
  const char *which = argc > 2 ? argv[2] : "all";
  if (strcmp(which, "all") && strcmp(which, "elementwise") && strcmp(which, "gemm") &&
      strcmp(which, "small") && strcmp(which, "optim") && strcmp(which, "wt")) {
    fprintf(stderr, "usage: bench_kernels [reps] [all|elementwise|gemm|small|optim|wt]\n");
    return 2;
  }
  unsigned seed = 12345;
  if (!strcmp(which, "optim")) {
    bench_optim(reps, &seed);
    return 0;
  }
  if (!strcmp(which, "wt")) {  /* the weight types only */
    print_load();
    bench_wt(reps, &seed);
    print_load();
    return 0;
  }
  if (!strcmp(which, "small")) {  /* the small-M rows only */
    openblas_set_num_threads(1);
    print_load();
    bench_small(reps, &seed);
    return 0;
  }
  if (!strcmp(which, "gemm")) {
    bench_gemm(reps < 31 ? reps : 31, &seed);
    return 0;
  }
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
  if (!strcmp(which, "all")) bench_gemm(reps < 31 ? reps : 31, &seed);
  if (!strcmp(which, "all")) bench_optim(reps, &seed);
  return 0;
}
