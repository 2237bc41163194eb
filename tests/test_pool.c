// test_pool.c — the runtime's thread pool (runtime/src/pool.c) and the
// products that split over it (bcrt_linear_pool, bcrt_linear_wt_pool), and
// the compiled entries that take one (<model>_run_pool / _step_pool, through
// blockc_set_threads).
//
// The contract under test is bit-identity: whatever the pool (NULL, 1..4
// threads), every output element is computed by the same code with the same
// arithmetic, so the bytes must be equal — not close.  Sizes are odd (rows
// around the kernels' register tiles, columns that end mid-panel, k that ends
// mid-block), every weight type, both weight layouts, bias and beta.  Then
// the pool itself: bounds, every task exactly once, jobs back to back and
// after the workers fell asleep, one pool shared by two threads at once
// (`make tsan` runs this file under ThreadSanitizer too).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockc.h"
#include "blockc_rt.h"

void openblas_set_num_threads(int n);

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

// --- the pool -------------------------------------------------------------

static void test_pool_bounds(void **state) {
  (void)state;
  assert_null(bcrt_pool_create(0));
  assert_null(bcrt_pool_create(-3));
  assert_null(bcrt_pool_create(BCRT_POOL_MAX_THREADS + 1));
  assert_int_equal(bcrt_pool_nthreads(NULL), 1);
  bcrt_pool_free(NULL);
  for (int n = 1; n <= 4; n++) {
    bcrt_pool *p = bcrt_pool_create(n);
    assert_non_null(p);
    assert_int_equal(bcrt_pool_nthreads(p), n);
    bcrt_pool_free(p);
  }
}

typedef struct {
  atomic_int count[64];
  atomic_int bad_n;
  int want_n;
} count_job;

static void count_task(void *arg, int task, int ntasks) {
  count_job *j = arg;
  if (ntasks != j->want_n || task < 0 || task >= 64) {
    atomic_fetch_add(&j->bad_n, 1);
    return;
  }
  atomic_fetch_add(&j->count[task], 1);
}

static void run_counted(bcrt_pool *p, int ntasks) {
  count_job j;
  memset(&j, 0, sizeof j);
  j.want_n = ntasks;
  bcrt_pool_run(p, ntasks, count_task, &j);
  assert_int_equal(atomic_load(&j.bad_n), 0);
  for (int t = 0; t < 64; t++)
    if (atomic_load(&j.count[t]) != (t < ntasks ? 1 : 0))
      fail_msg("%d threads, %d tasks: task %d ran %d times", bcrt_pool_nthreads(p), ntasks, t,
               atomic_load(&j.count[t]));
}

static void test_pool_runs_every_task_once(void **state) {
  (void)state;
  for (int t = 1; t <= 37; t++) run_counted(NULL, t);
  for (int n = 1; n <= 4; n++) {
    bcrt_pool *p = bcrt_pool_create(n);
    assert_non_null(p);
    for (int round = 0; round < 200; round++) run_counted(p, 1 + round % 37);
    bcrt_pool_run(p, 0, count_task, NULL);  // nothing to do: returns
    // after the workers have gone to sleep (they spin ~0.1 ms first)
    for (int round = 0; round < 5; round++) {
      nanosleep(&(struct timespec){.tv_nsec = 3 * 1000 * 1000}, NULL);
      run_counted(p, 1 + round * 7);
    }
    bcrt_pool_free(p);
  }
}

// --- the products over a pool ---------------------------------------------

typedef struct {
  int m, n, k;
} shape3;

// y (m x n) from a pool-less call and from pools of 1..4 threads: the bytes
// must agree.  f32: cblas on W (packed NULL), the packed small-M path and
// the (k, n) layout; other types: bcrt_linear_wt_pool against
// bcrt_linear_wt.
static void check_shape(bcrt_pool *const *pools, shape3 s, int wt, unsigned seed) {
  int m = s.m, n = s.n, k = s.k;
  unsigned r = seed;
  float *x = xalloc(sizeof(float) * (size_t)m * (size_t)k);
  float *w = xalloc(sizeof(float) * (size_t)n * (size_t)k);
  float *bias = xalloc(sizeof(float) * (size_t)n);
  float *y0 = xalloc(sizeof(float) * (size_t)m * (size_t)n);
  float *y1 = xalloc(sizeof(float) * (size_t)m * (size_t)n);
  float *yp = xalloc(sizeof(float) * (size_t)m * (size_t)n);
  for (int i = 0; i < m * k; i++) x[i] = frand(&r);
  for (int i = 0; i < n * k; i++) w[i] = frand(&r);
  for (int i = 0; i < n; i++) bias[i] = frand(&r);
  void *pk = xalloc(bcrt_pack_wt_bytes(wt, n, k));
  bcrt_pack_nt_wt(wt, n, k, w, pk);
  int modes = wt == BCRT_WT_F32 ? 3 : 1;
  for (int mode = 0; mode < modes; mode++)
    for (int variant = 0; variant < 2; variant++) {
      float beta = variant ? 1.0f : 0.0f;
      const float *b = variant ? NULL : bias;
      for (int i = 0; i < m * n; i++) y1[i] = frand(&r);
      memcpy(y0, y1, sizeof(float) * (size_t)m * (size_t)n);
      // the reference: no pool
      if (wt != BCRT_WT_F32) bcrt_linear_wt(wt, m, n, k, x, k, pk, 0, b, beta, y0, n);
      else if (mode == 2)  // W as (k, n): w read as k rows of n
        bcrt_linear_pool(NULL, m, n, k, x, k, w, n, BCRT_NO_TRANS, NULL, 0, b, beta, y0, n);
      else
        bcrt_linear_pool(NULL, m, n, k, x, k, w, k, BCRT_TRANS, mode ? (const float *)pk : NULL, 0,
                         b, beta, y0, n);
      for (int t = 1; t <= 4; t++) {
        memcpy(yp, y1, sizeof(float) * (size_t)m * (size_t)n);
        if (wt != BCRT_WT_F32)
          bcrt_linear_wt_pool(pools[t], wt, m, n, k, x, k, pk, 0, b, beta, yp, n);
        else if (mode == 2)
          bcrt_linear_pool(pools[t], m, n, k, x, k, w, n, BCRT_NO_TRANS, NULL, 0, b, beta, yp, n);
        else
          bcrt_linear_pool(pools[t], m, n, k, x, k, w, k, BCRT_TRANS,
                           mode ? (const float *)pk : NULL, 0, b, beta, yp, n);
        if (memcmp(yp, y0, sizeof(float) * (size_t)m * (size_t)n))
          fail_msg("weight type %d, mode %d, %s: m=%d n=%d k=%d on %d threads differs from the "
                   "pool-less call", wt, mode, variant ? "beta 1" : "bias", m, n, k, t);
      }
      if (wt == BCRT_WT_F32 && mode == 1 && m <= BCRT_SMALL_M) {
        // the packed path is bcrt_linear's own, untouched by the pool
        memcpy(yp, y1, sizeof(float) * (size_t)m * (size_t)n);
        bcrt_linear(m, n, k, x, k, w, k, BCRT_TRANS, pk, 0, b, beta, yp, n);
        assert_memory_equal(yp, y0, sizeof(float) * (size_t)m * (size_t)n);
      }
    }
  free(x);
  free(w);
  free(bias);
  free(y0);
  free(y1);
  free(yp);
  free(pk);
}

static void test_linear_pool_bit_identical(void **state) {
  (void)state;
  openblas_set_num_threads(1);
  bcrt_pool *pools[5] = {NULL};
  for (int t = 1; t <= 4; t++) assert_non_null(pools[t] = bcrt_pool_create(t));
  // rows 9 .. 32: batched decoding (issue 26), two to four register tiles
  static const int ms[] = {1, 3, 8, 9, 12, 16, 17, 24, 31, 32, 64, 65, 130};
  static const int ns[] = {33, 100, 257, 1000};
  static const int ks[] = {17, 300};
  unsigned seed = 1;
  for (int wt = 0; wt < BCRT_WT_COUNT; wt++)
    for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
      for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
        for (size_t c = 0; c < sizeof ks / sizeof *ks; c++)
          check_shape(pools, (shape3){ms[a], ns[b], ks[c]}, wt, seed++);
  for (int t = 1; t <= 4; t++) bcrt_pool_free(pools[t]);
}

// The training step's products, bcrt_sgemm_pool: every transpose pair and
// both orders, shapes around its 256 x 256 tiles and its 2^18 threshold,
// alpha and beta, leading dimensions wider than the operands; the bytes on
// pools of 1..4 threads equal the pool-less call's, and the pool-less call
// is the product (against a double evaluation: float sums of k <= 600
// products of values in [-1, 1], |err| <= 1e-4 (1 + |ref|)).
static void test_sgemm_pool_bit_identical(void **state) {
  (void)state;
  openblas_set_num_threads(1);
  bcrt_pool *pools[5] = {NULL};
  for (int t = 1; t <= 4; t++) assert_non_null(pools[t] = bcrt_pool_create(t));
  static const int shapes[][3] = {{5, 7, 3},     {64, 64, 64},  {257, 300, 65},
                                  {512, 33, 600}, {31, 513, 128}, {300, 256, 17}};
  unsigned seed = 3;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
    for (int order = 0; order < 2; order++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
          int o = order ? 102 : BCRT_ROW_MAJOR;  /* 102: CblasColMajor */
          int TA = ta ? BCRT_TRANS : BCRT_NO_TRANS, TB = tb ? BCRT_TRANS : BCRT_NO_TRANS;
          /* row-major view: A is m x k (k x m when transposed), B k x n (n x k) */
          int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
          int lda = (order ? ar : ac) + 3, ldb = (order ? br : bc) + 5, ldc = (order ? m : n) + 2;
          size_t na = (size_t)lda * (size_t)(order ? ac : ar), nb = (size_t)ldb * (size_t)(order ? bc : br);
          size_t nc = (size_t)ldc * (size_t)(order ? n : m);
          float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4), *c1 = malloc(nc * 4);
          assert_true(a && b && c0 && c1);
          for (size_t i = 0; i < na; i++) a[i] = frand(&seed);
          for (size_t i = 0; i < nb; i++) b[i] = frand(&seed);
          for (size_t i = 0; i < nc; i++) c0[i] = frand(&seed);
          memcpy(c1, c0, nc * 4);
          float alpha = 0.75f, beta = si % 2 ? 0.0f : 0.5f;
          bcrt_sgemm_pool(NULL, o, TA, TB, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc);
          for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
              double acc = 0;
              for (int q = 0; q < k; q++) {
                /* element (r, c) of a row-major view with leading dimension ld,
                   stored row- or column-major */
                int r1 = ta ? q : i, c1_ = ta ? i : q, r2 = tb ? j : q, c2 = tb ? q : j;
                float av = order ? a[(size_t)c1_ * lda + r1] : a[(size_t)r1 * lda + c1_];
                float bv = order ? b[(size_t)c2 * ldb + r2] : b[(size_t)r2 * ldb + c2];
                acc += (double)av * bv;
              }
              size_t at = order ? (size_t)j * ldc + i : (size_t)i * ldc + j;
              double want = alpha * acc + beta * (double)c1[at];
              if (!(fabs(c0[at] - want) <= 1e-4 * (1 + fabs(want))))
                fail_msg("%dx%dx%d order %d trans %d%d: (%d, %d) %.9g, want %.9g", m, n, k, order,
                         ta, tb, i, j, (double)c0[at], want);
            }
          for (int t = 1; t <= 4; t++) {
            float *cp = malloc(nc * 4);
            assert_non_null(cp);
            memcpy(cp, c1, nc * 4);
            bcrt_sgemm_pool(pools[t], o, TA, TB, m, n, k, alpha, a, lda, b, ldb, beta, cp, ldc);
            if (memcmp(cp, c0, nc * 4))
              fail_msg("%dx%dx%d order %d trans %d%d: %d threads differ from the pool-less call", m, n,
                       k, order, ta, tb, t);
            free(cp);
          }
          free(a), free(b), free(c0), free(c1);
        }
  for (int t = 1; t <= 4; t++) bcrt_pool_free(pools[t]);
}

// Two threads multiplying on one pool at once: their jobs take turns, and
// each result is still the pool-less one.
typedef struct {
  bcrt_pool *pool;
  const float *x, *w, *ref;
  int m, n, k, mismatches;
} shared_job;

static void *shared_thread(void *arg) {
  shared_job *j = arg;
  float *y = malloc(sizeof(float) * (size_t)j->m * (size_t)j->n);
  if (!y) {
    j->mismatches = -1;
    return NULL;
  }
  for (int r = 0; r < 200; r++) {
    bcrt_linear_pool(j->pool, j->m, j->n, j->k, j->x, j->k, j->w, j->k, BCRT_TRANS, NULL, 0, NULL,
                     0.0f, y, j->n);
    if (memcmp(y, j->ref, sizeof(float) * (size_t)j->m * (size_t)j->n)) j->mismatches++;
  }
  free(y);
  return NULL;
}

static void test_pool_shared_by_two_threads(void **state) {
  (void)state;
  openblas_set_num_threads(1);
  enum { M = 4, N = 300, K = 120 };
  unsigned r = 9;
  static float x[2][M * K], w[N * K], ref[2][M * N];
  for (int i = 0; i < N * K; i++) w[i] = frand(&r);
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < M * K; i++) x[t][i] = frand(&r);
    bcrt_linear_pool(NULL, M, N, K, x[t], K, w, K, BCRT_TRANS, NULL, 0, NULL, 0.0f, ref[t], N);
  }
  bcrt_pool *p = bcrt_pool_create(3);
  assert_non_null(p);
  shared_job j[2];
  pthread_t tid[2];
  for (int t = 0; t < 2; t++) {
    j[t] = (shared_job){.pool = p, .x = x[t], .w = w, .ref = ref[t], .m = M, .n = N, .k = K};
    assert_int_equal(pthread_create(&tid[t], NULL, shared_thread, &j[t]), 0);
  }
  for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(tid[t], NULL), 0);
  bcrt_pool_free(p);
  assert_int_equal(j[0].mismatches, 0);
  assert_int_equal(j[1].mismatches, 0);
}

// --- compiled models through the API --------------------------------------

// A LLaMA-style stack (RMSNorm, rotary GQA attention, SwiGLU) over token
// ids, with a run-time length: products of 1..40 rows, big enough to split.
// (The pool takes products of at least 2^17 multiply-adds: at D = 256 and
// F = 704 the FFN's are, even for one row.)
static const char *lm_graph =
    "model lm\ndim T <= 40\ndim D = 256\ndim H = 4\ndim KV = 2\ndim F = 704\ndim V = 301\n"
    "input ids : tokens[1, T]\n"
    "x = Embedding(ids, vocab=V, dim=D, params=emb)\n"
    "for i in 0..2 as layers.{i} {\n"
    "  x = Add(x, Attention(RMSNorm(x, params=n1), heads=H, kv_heads=KV, causal=true, rope=true,"
    " bias=false, params=attn))\n"
    "  x = Add(x, FFN(RMSNorm(x, params=n2), hidden=F, act=swiglu, bias=false,"
    " gate=g, up=u, down=dn))\n"
    "}\n"
    "logits = Linear(RMSNorm(x, params=norm), out=V, bias=false, params=head)\n"
    "output logits\n";

static blockc_model *lm_model(const char *dtype) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  if (blockc_load_graph_string(m, "lm.blk", lm_graph) != BLOCKC_OK) fail_msg("graph: refused");
  assert_int_equal(blockc_init_weights(m, 7), BLOCKC_OK);
  if (dtype) assert_int_equal(blockc_set_weight_dtype(m, dtype), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  return m;
}

static void test_api_threads_bit_identical(void **state) {
  (void)state;
  static const char *const dtypes[] = {NULL, "bf16", "q8_0", "q4_0"};
  enum { T = 37, V = 301 };
  int ids[T];
  for (int i = 0; i < T; i++) ids[i] = (i * 53 + 11) % V;
  for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
    blockc_model *m = lm_model(dtypes[d]);
    assert_int_equal(blockc_threads(m), 1);
    size_t wsz = blockc_workspace_size(m);
    void *ws = xalloc(wsz);
    float *ref = xalloc(sizeof(float) * T * V), *y = xalloc(sizeof(float) * T * V);
    long long dims[1] = {T};
    const void *in[1] = {ids};
    void *out[1] = {ref};
    assert_int_equal(blockc_run(m, in, out, dims, ws, wsz), BLOCKC_OK);
    for (int n = 1; n <= 4; n++) {
      assert_int_equal(blockc_set_threads(m, n), BLOCKC_OK);
      assert_int_equal(blockc_threads(m), n);
      memset(y, 0, sizeof(float) * T * V);
      out[0] = y;
      assert_int_equal(blockc_run(m, in, out, dims, ws, wsz), BLOCKC_OK);
      if (memcmp(y, ref, sizeof(float) * T * V))
        fail_msg("%s: blockc_run on %d threads differs from one thread", dtypes[d] ? dtypes[d] : "f32", n);
    }
    free(ws);
    free(ref);
    free(y);
    blockc_delete(m);
  }
}

// Decoding: prefill 5 tokens then one at a time, on 1 and on 3 threads.
static void decode(blockc_model *m, int nthreads, float *logits_out /* [T*V] */) {
  enum { T = 12, V = 301 };
  assert_int_equal(blockc_set_threads(m, nthreads), BLOCKC_OK);
  size_t wsz = blockc_workspace_size(m), csz = blockc_cache_size(m);
  void *ws = xalloc(wsz), *cache = xalloc(csz);
  int ids[T];
  for (int i = 0; i < T; i++) ids[i] = (i * 31 + 5) % V;
  long long pos = 0;
  while (pos < T) {
    long long t = pos == 0 ? 5 : 1;
    long long dims[1] = {t};
    const void *in[1] = {ids + pos};
    void *out[1] = {logits_out + pos * V};
    assert_int_equal(blockc_step(m, in, out, dims, pos, cache, csz, ws, wsz), BLOCKC_OK);
    pos += t;
  }
  free(ws);
  free(cache);
}

static void test_api_step_threads_bit_identical(void **state) {
  (void)state;
  enum { T = 12, V = 301 };
  blockc_model *m = lm_model(NULL);
  float *a = xalloc(sizeof(float) * T * V), *b = xalloc(sizeof(float) * T * V);
  decode(m, 1, a);
  decode(m, 3, b);
  assert_memory_equal(a, b, sizeof(float) * T * V);
  // the bounds
  assert_int_equal(blockc_set_threads(m, 0), BLOCKC_EUSAGE);
  assert_int_equal(blockc_set_threads(m, BCRT_POOL_MAX_THREADS + 1), BLOCKC_EUSAGE);
  assert_int_equal(blockc_threads(m), 3);  // a refused call keeps the pool
  assert_int_equal(blockc_set_threads(NULL, 2), BLOCKC_EUSAGE);
  free(a);
  free(b);
  blockc_delete(m);
}

// Training: the same language model with a next-token loss and dropout on
// the attention weights, 3 AdamW steps through blockc_train_step on 1 and on
// 3 threads (the backward's products, bcrt_sgemm_pool, and its tiled
// attention over the pool): the losses, the norms and the saved weights and
// optimizer state are the same bytes.
static const char *lm_train_graph =
    "model lmt\ndim T = 40\ndim D = 256\ndim H = 4\ndim KV = 2\ndim F = 704\ndim V = 301\n"
    "input ids : tokens[2, T]\ninput targets : tokens[2, T]\n"
    "x = Embedding(ids, vocab=V, dim=D, params=emb)\n"
    "for i in 0..2 as layers.{i} {\n"
    "  x = Add(x, Attention(RMSNorm(x, params=n1), heads=H, kv_heads=KV, causal=true, rope=true,"
    " bias=false, dropout=0.1, params=attn))\n"
    "  x = Add(x, FFN(RMSNorm(x, params=n2), hidden=F, act=swiglu, bias=false,"
    " gate=g, up=u, down=dn))\n"
    "}\n"
    "logits = Linear(RMSNorm(x, params=norm), out=V, bias=false, params=head)\n"
    "loss = CrossEntropy(logits, targets)\noutput loss\n";

static void train_run(int nthreads, const char *path, float *losses, float *norms) {
  enum { T = 40, V = 301 };
  blockc_model *m = blockc_new();
  assert_non_null(m);
  if (blockc_load_graph_string(m, "lmt.blk", lm_train_graph) != BLOCKC_OK) fail_msg("graph: refused");
  assert_int_equal(blockc_init_weights(m, 5), BLOCKC_OK);
  assert_int_equal(blockc_set_threads(m, nthreads), BLOCKC_OK);
  blockc_train_hparams hp;
  blockc_train_defaults(&hp);
  hp.lr = 1e-3;
  hp.dropout_seed = 17;
  blockc_train *t = blockc_train_new(m, &hp);
  assert_non_null(t);
  int ids[2 * T], tg[2 * T];
  for (int s = 0; s < 3; s++) {
    for (int i = 0; i < 2 * T; i++) ids[i] = (i * 53 + 11 * s + 3) % V, tg[i] = (i * 29 + s) % V;
    const void *in[2] = {ids, tg};
    assert_int_equal(blockc_train_step(t, in, NULL, &losses[s], &norms[s]), BLOCKC_OK);
  }
  assert_int_equal(blockc_train_save(t, path), BLOCKC_OK);
  blockc_train_free(t);
  blockc_delete(m);
}

static void test_api_train_threads_bit_identical(void **state) {
  (void)state;
  char dir[256], p1[300], p3[300];
  tu_mktmpdir(dir, sizeof dir, "pooltrain");
  snprintf(p1, sizeof p1, "%s/t1.safetensors", dir);
  snprintf(p3, sizeof p3, "%s/t3.safetensors", dir);
  float l1[3], n1[3], l3[3], n3[3];
  train_run(1, p1, l1, n1);
  train_run(3, p3, l3, n3);
  assert_memory_equal(l1, l3, sizeof l1);
  assert_memory_equal(n1, n3, sizeof n1);
  assert_true(l1[0] > 5.0f && l1[0] < 7.0f);  // about ln(301) = 5.7 from a random start
  assert_true(tu_same_file(p1, p3));
  remove(p1);
  remove(p3);
  tu_rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_bounds),
      cmocka_unit_test(test_pool_runs_every_task_once),
      cmocka_unit_test(test_linear_pool_bit_identical),
      cmocka_unit_test(test_sgemm_pool_bit_identical),
      cmocka_unit_test(test_pool_shared_by_two_threads),
      cmocka_unit_test(test_api_threads_bit_identical),
      cmocka_unit_test(test_api_step_threads_bit_identical),
      cmocka_unit_test(test_api_train_threads_bit_identical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
