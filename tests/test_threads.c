// test_threads.c — blockc from several threads at once.
//
// blockc has no global state except the tcc lock in jit.c, so:
//   1. four threads each take a different graph text through the whole
//      pipeline (own bc_ctx: parse, passes, emit, bcJ_compile, weights, run),
//      several rounds, and must reproduce the single-threaded output bit for
//      bit;
//   2. one compiled model is run from four threads at once, each with its
//      own workspace and output, and every run must be bit-identical too
//      (forward is reentrant: all its state is in the workspace);
//   3. one model with run-time dims and lengths is run from four threads at
//      four different lengths at once, each bit-identical to its
//      single-threaded run (the lengths live in the call, not the code).
// BLAS runs single-threaded (OpenBLAS with one thread is deterministic).
// `make tsan` (tests/tsan.mk) builds this file with -fsanitize=thread.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io_graphs.h"

#define NTHREADS 4
#define ROUNDS 3

static const char *const models[NTHREADS] = {
    // Post-LN, causal, relu
    "model post\ndim B = 2\ndim T = 5\ndim D = 12\ndim H = 3\n"
    "input x : [B, T, D]\n"
    "for i in 0..2 as layers.{i} {\n"
    "  x = LayerNorm(Add(x, Attention(x, heads=H, causal=true, params=self_attn)), params=norm1)\n"
    "  x = LayerNorm(Add(x, FFN(x, hidden=2 * D, act=relu, params=(linear1, linear2))), params=norm2)\n"
    "}\noutput x\n",
    // Pre-LN with a final norm, gelu, odd width
    "model pre\ndim T = 7\ndim D = 9\n"
    "input x : [T, D]\n"
    "for i in 0..3 as layers.{i} {\n"
    "  x = Add(x, Attention(LayerNorm(x, params=norm1), heads=3, params=self_attn))\n"
    "  x = Add(x, FFN(LayerNorm(x, params=norm2), hidden=13, act=gelu, params=(linear1, linear2)))\n"
    "}\ny = LayerNorm(x, params=norm)\noutput y\n",
    // ResiDual (fuse-dual), gelu_tanh
    "model dual\ndim B = 3\ndim T = 4\ndim D = 8\n"
    "input x : [B, T, D]\nxa = x\nxd = x\n"
    "for i in 0..2 as layers.{i} {\n"
    "  a = Attention(xa, heads=2, causal=false, params=self_attn)\n"
    "  xd = Add(xd, a)\n  xa = LayerNorm(Add(xa, a), params=norm1)\n"
    "  f = FFN(xa, hidden=16, act=gelu_tanh, params=(linear1, linear2))\n"
    "  xd = Add(xd, f)\n  xa = LayerNorm(Add(xa, f), params=norm2)\n"
    "}\ny = Add(xa, LayerNorm(xd, eps=1e-7, params=norm))\noutput y\n",
    // DeepNorm-style scaled residuals, T = 1, one head, tied params
    "model deep\ndim B = 2\ndim T = 1\ndim D = 5\ndim N = 4\n"
    "input x : [B, T, D]\n"
    "for i in 0..N {\n"
    "  x = LayerNorm(Add(x, Attention(x, heads=1, causal=true, params=attn), alpha=(2 * N)^0.25), params=ln1)\n"
    "  x = LayerNorm(Add(x, FFN(x, hidden=7, act=relu, params=(f1, f2)), alpha=(2 * N)^0.25), params=ln2)\n"
    "}\noutput x\n",
};

// Everything one model needs; built with its own context.
typedef struct {
  const char *text;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_jit *jit;
  bc_forward_fn fn;
  float *x;
  int64_t ny;
} model;

static void quiet(void *opaque, const char *msg) {
  (void)opaque;
  (void)msg;
}

static int build(model *m, const char *text, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->text = text;
  if (!(m->ctx = bc_ctx_new())) return -1;
  bc_set_error_fn(m->ctx, NULL, quiet);  // errors: kept in ctx->last_error only
  if (!(m->g = bcP_parse_string(m->ctx, "t.blk", text, NULL, 0))) return -1;
  if (bcW_init_random(m->ctx, m->g, seed, &m->w)) return -1;
  bc_emit_opts eo = {0};
  if (cli_compile_jit(m->ctx, m->g, &eo, &m->jit, &m->fn)) return -1;
  int64_t nx = bc_shape_numel(&m->g->vals[m->g->input].shape);
  if (!(m->x = malloc((size_t)nx * sizeof(float)))) return -1;
  bc_rng r;
  bc_rng_seed(&r, seed + 1000);
  for (int64_t i = 0; i < nx; i++) m->x[i] = (float)bc_rng_normal(&r);
  m->ny = bc_shape_numel(&m->g->vals[m->g->output].shape);
  return 0;
}

// One forward with a fresh workspace; returns malloc'ed output or NULL.
static float *forward(const model *m) {
  float *y = malloc((size_t)m->ny * sizeof(float));
  void *ws = cli_workspace(m->ctx, m->g);
  if (!y || !ws || m->fn((const float *const *)m->w.p, m->x, y, ws) != 0) {
    free(y);
    y = NULL;
  }
  free(ws);
  return y;
}

static void release(model *m) {
  bcJ_free(m->jit);
  bcW_free(&m->w);
  free(m->x);
  bc_ctx_free(m->ctx);
}

static float *reference[NTHREADS];
static int64_t reference_n[NTHREADS];

static int setup(void **state) {
  (void)state;
  cli_set_threads(1);
  for (int i = 0; i < NTHREADS; i++) {
    model m;
    if (build(&m, models[i], 10 + (uint64_t)i)) {
      fprintf(stderr, "model %d: %s\n", i, m.ctx && m.ctx->last_error ? m.ctx->last_error : "?");
      return -1;
    }
    reference[i] = forward(&m);
    reference_n[i] = m.ny;
    release(&m);
    if (!reference[i]) return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < NTHREADS; i++) free(reference[i]);
  return 0;
}

// --- 1. different models, whole pipeline, concurrently ---------------------
typedef struct {
  int id;
  int mismatches, failures;
} job;

static void *pipeline_thread(void *arg) {
  job *j = arg;
  for (int round = 0; round < ROUNDS; round++) {
    // Thread k builds model k, then the others in turn, so every model is
    // also compiled concurrently with itself.
    int which = (j->id + round) % NTHREADS;
    model m;
    if (build(&m, models[which], 10 + (uint64_t)which)) {
      j->failures++;
      release(&m);
      continue;
    }
    float *y = forward(&m);
    if (!y || m.ny != reference_n[which]) j->failures++;
    else if (memcmp(y, reference[which], (size_t)m.ny * sizeof(float)) != 0) j->mismatches++;
    free(y);
    release(&m);
  }
  return NULL;
}

static void test_models_in_parallel(void **state) {
  (void)state;
  pthread_t t[NTHREADS];
  job jobs[NTHREADS] = {{0}};
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i].id = i;
    assert_int_equal(pthread_create(&t[i], NULL, pipeline_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < NTHREADS; i++) {
    if (jobs[i].failures || jobs[i].mismatches)
      fail_msg("thread %d: %d pipeline failures, %d outputs not bit-identical to the single-threaded run",
               i, jobs[i].failures, jobs[i].mismatches);
  }
}

// --- 2. one compiled model, four threads, separate workspaces --------------
typedef struct {
  const model *m;
  const float *ref;
  int runs, mismatches, failures;
} run_job;

static void *forward_thread(void *arg) {
  run_job *j = arg;
  for (int r = 0; r < j->runs; r++) {
    float *y = forward(j->m);
    if (!y) j->failures++;
    else if (memcmp(y, j->ref, (size_t)j->m->ny * sizeof(float)) != 0) j->mismatches++;
    free(y);
  }
  return NULL;
}

static void test_one_model_many_threads(void **state) {
  (void)state;
  for (int which = 0; which < NTHREADS; which++) {
    model m;
    assert_int_equal(build(&m, models[which], 10 + (uint64_t)which), 0);
    pthread_t t[NTHREADS];
    run_job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
      jobs[i] = (run_job){&m, reference[which], 20, 0, 0};
      assert_int_equal(pthread_create(&t[i], NULL, forward_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < NTHREADS; i++)
      if (jobs[i].failures || jobs[i].mismatches)
        fail_msg("model %d thread %d: %d failures, %d outputs differ from the single-threaded run", which,
                 i, jobs[i].failures, jobs[i].mismatches);
    release(&m);
  }
}

// The references themselves are sane: models differ from one another and a
// different seed gives a different output (so bit-equality above means
// something).
static void test_references_distinct(void **state) {
  (void)state;
  for (int i = 0; i < NTHREADS; i++)
    for (int j = i + 1; j < NTHREADS; j++)
      assert_true(reference_n[i] != reference_n[j] ||
                  memcmp(reference[i], reference[j], (size_t)reference_n[i] * sizeof(float)) != 0);
  model m;
  assert_int_equal(build(&m, models[0], 99), 0);
  float *y = forward(&m);
  assert_non_null(y);
  assert_true(memcmp(y, reference[0], (size_t)m.ny * sizeof(float)) != 0);
  free(y);
  release(&m);
}


// --- run-time dims from several threads -------------------------------------------

typedef struct {
  const bc_graph *g;
  bc_run_fn run;
  const bc_weights *w;
  long rt[2];
  int len[2], mlen[2];
  ig_io ref;
  bool same;
} rt_job;

static void rt_call(rt_job *j, ig_io *a, void *ws) {
  int *lens[4] = {0, 0, j->len, j->mlen};
  ig_alloc(a, j->g, j->rt, 17, lens);
  if (j->run((const float *const *)j->w->p, a->io, a->rt, ws) != 0) a->n = -1;
}

static void *rt_worker(void *arg) {
  rt_job *j = arg;
  void *ws = aligned_alloc(64, (size_t)bcY_workspace_bytes(j->g));
  j->same = ws != NULL;
  for (int r = 0; r < ROUNDS && j->same; r++) {
    ig_io a;
    rt_call(j, &a, ws);
    j->same = a.n > 0;
    for (int i = j->g->ninputs; j->same && i < a.n; i++)
      j->same = !memcmp(a.io[i], j->ref.io[i], (size_t)a.numel[i] * sizeof(float));
    ig_free(&a, j->g);
  }
  free(ws);
  return NULL;
}

static void test_runtime_dims_many_threads(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ig_cfg cfg = {.B = 2, .D = 12, .H = 3, .F = 16, .T = 90, .S = 7, .causal = true};
  char text[2048];
  bc_graph *g = tu_parse(ctx, ig_text(text, sizeof text, &cfg));
  assert_non_null(g);
  bc_compiled c;
  assert_int_equal(bcD_compile(ctx, g, NULL, &c), BC_OK);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 4, &w), BC_OK);
  rt_job jobs[NTHREADS];
  static const long sizes[NTHREADS][2] = {{90, 7}, {70, 3}, {33, 7}, {1, 1}};
  void *ws = aligned_alloc(64, (size_t)c.ws_bytes);
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i] = (rt_job){.g = g, .run = c.run, .w = &w, .rt = {sizes[i][0], sizes[i][1]},
                       .len = {(int)sizes[i][0], 1}, .mlen = {1, (int)sizes[i][1]}};
    rt_call(&jobs[i], &jobs[i].ref, ws);  // single-threaded reference
    assert_true(jobs[i].ref.n > 0);
  }
  free(ws);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, rt_worker, &jobs[i]), 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < NTHREADS; i++) {
    if (!jobs[i].same) fail_msg("thread %d (T=%ld S=%ld) differs from its single-threaded run", i,
                                sizes[i][0], sizes[i][1]);
    ig_free(&jobs[i].ref, g);
  }
  bcW_free(&w);
  bcD_free(&c);
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_references_distinct),
      cmocka_unit_test(test_models_in_parallel),
      cmocka_unit_test(test_one_model_many_threads),
      cmocka_unit_test(test_runtime_dims_many_threads),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
