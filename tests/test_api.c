// test_api.c — the embedding API (blockc.h): the documented call sequence,
// results equal to the reference interpreter, reentrancy across threads,
// and misuse reported as status codes.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blockc.h"

typedef struct {
  char msg[4096];
} sink;

static void on_error(void *opaque, const char *msg) {
  sink *s = opaque;
  strncat(s->msg, msg, sizeof s->msg - strlen(s->msg) - 1);
}

static float *random_input(size_t n, unsigned seed) {
  float *x = malloc(n * sizeof *x);
  bc_rng r;
  bc_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) x[i] = (float)bc_rng_normal(&r);
  return x;
}

static void test_compile_and_match_interpreter(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  assert_non_null(m);
  assert_int_equal(blockc_set_dim(m, "T", 7), BLOCKC_OK);
  assert_int_equal(blockc_load_graph(m, "graphs/tiny.blk"), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 5), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  assert_non_null(strstr(blockc_c_source(m), "tiny_forward"));
  size_t nx = blockc_input_size(m), ny = blockc_output_size(m);
  assert_int_equal(nx, 2 * 7 * 8);
  float *x = random_input(nx, 1), *y = calloc(ny, sizeof(float)), *ref = calloc(ny, sizeof(float));
  void *ws = aligned_alloc(64, blockc_workspace_size(m));
  assert_int_equal(blockc_forward(m, x, y, ws), BLOCKC_OK);

  // The same graph, weights and input through the reference interpreter.
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_define d = {"T", 7};
  bc_graph *g = bcP_parse_file(ctx, "graphs/tiny.blk", &d, 1);
  bc_weights w = {0};
  assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
  assert_int_equal(bcR_run(ctx, g, &w, x, ref), BC_OK);
  // float32 GEMMs and kernels vs double accumulation over D=8, F=16, 2
  // layers: errors are ~1e-6 of values of order 1.
  assert_true(tu_max_abs_diff(y, ref, ny) < 1e-5);
  bcW_free(&w);
  bc_ctx_free(ctx);
  free(ws);
  free(x);
  free(y);
  free(ref);
  blockc_delete(m);
}

typedef struct {
  const blockc_model *m;
  const float *x;
  float *y;
  int st;
} job;

static void *worker(void *arg) {
  job *j = arg;
  void *ws = aligned_alloc(64, blockc_workspace_size(j->m));
  j->st = BLOCKC_OK;
  for (int i = 0; i < 20 && j->st == BLOCKC_OK; i++) j->st = blockc_forward(j->m, j->x, j->y, ws);
  free(ws);
  return NULL;
}

static void test_reentrant_across_threads(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  assert_int_equal(blockc_set_dim(m, "D", 32), BLOCKC_OK);
  assert_int_equal(blockc_load_graph(m, "graphs/residual.blk"), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "T", 4), BLOCKC_EUSAGE);  // too late
  assert_int_equal(blockc_init_weights(m, 9), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  size_t nx = blockc_input_size(m), ny = blockc_output_size(m);
  float *x = random_input(nx, 2);
  job jobs[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (job){m, x, calloc(ny, sizeof(float)), -1};
    assert_int_equal(pthread_create(&t[i], NULL, worker, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(jobs[i].st, BLOCKC_OK);
    assert_memory_equal(jobs[i].y, jobs[0].y, ny * sizeof(float));
  }
  for (int i = 0; i < 4; i++) free(jobs[i].y);
  free(x);
  blockc_delete(m);
}

static void test_errors_and_misuse(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  sink s = {{0}};
  blockc_set_error_func(m, &s, on_error);
  assert_int_equal(blockc_compile(m), BLOCKC_EUSAGE);
  assert_non_null(strstr(s.msg, "load a graph before compiling"));
  s.msg[0] = '\0';
  assert_int_equal(blockc_load_graph_string(m, "g.blk", "model m\ndim D = 8\ninput x : [2, D]\n"
                                            "y = Attention(x, heads=3, params=a)\noutput y\n"),
                   BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "g.blk:4:24: error: model width D=8 is not divisible by heads=3"));
  blockc_delete(m);

  m = blockc_new();
  blockc_set_error_func(m, &s, on_error);
  assert_int_equal(blockc_load_graph(m, "graphs/tiny.blk"), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  float x[80] = {0}, y[80];
  void *ws = aligned_alloc(64, blockc_workspace_size(m));
  // No weights yet: refused, not a crash.
  assert_int_equal(blockc_forward(m, x, y, ws), BLOCKC_EUSAGE);
  assert_int_equal(blockc_init_weights(m, 1), BLOCKC_OK);
  assert_int_equal(blockc_forward(m, x, y, ws), BLOCKC_OK);
  assert_int_equal(blockc_forward(m, x, y, (char *)ws + 4), BLOCKC_EUSAGE);  // misaligned
  assert_int_equal(blockc_forward(m, NULL, y, ws), BLOCKC_EUSAGE);
  free(ws);
  blockc_delete(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_and_match_interpreter),
      cmocka_unit_test(test_reentrant_across_threads),
      cmocka_unit_test(test_errors_and_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
