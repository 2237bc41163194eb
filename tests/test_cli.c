// test_cli.c — the blockc command line: exit codes, messages, output files.
//
// Runs the real binary (path in $BLOCKC, set by `make test`) with stdout and
// stderr captured, and checks the contract users script against: 0 on
// success, 1 for bad input, 2 for bad usage, a message that says what is
// wrong, and no output file unless the run succeeded.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  int status;      // exit code, or 128 + signal
  char out[1 << 16];
  char err[1 << 16];
} run_result;

// Runs blockc with argv (NULL-terminated, argv[0] ignored).
static void run(run_result *r, const char *const *args) {
  const char *argv[64];
  int n = 0;
  argv[n++] = tu_blockc();
  for (int i = 1; args[i]; i++) argv[n++] = args[i];
  argv[n] = NULL;
  r->status = tu_spawn((char *const *)argv, r->out, sizeof r->out, r->err, sizeof r->err);
}

#define RUN(r, ...)                                   \
  do {                                                \
    const char *a_[] = {"blockc", __VA_ARGS__, NULL}; \
    run(r, a_);                                       \
  } while (0)

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void expect(const run_result *r, int status, const char *in_out, const char *in_err) {
  if (r->status != status || (in_out && !strstr(r->out, in_out)) ||
      (in_err && !strstr(r->err, in_err))) {
    print_error("status %d (want %d)\nstdout: %s\nstderr: %s\n", r->status, status, r->out,
                r->err);
    fail();
  }
}

static run_result R;

static void test_help_and_version(void **state) {
  (void)state;
  RUN(&R, "--version");
  expect(&R, 0, "blockc 0.", NULL);
  RUN(&R, "--help");
  expect(&R, 0, "usage: blockc COMMAND", NULL);
  RUN(&R, "help", "run");
  expect(&R, 0, "--backend", NULL);
  RUN(&R, "run", "--help");
  expect(&R, 0, "usage: blockc run", NULL);
  RUN(&R, "help", "nosuch");
  expect(&R, 2, NULL, "no help for unknown command 'nosuch'");
}

static void test_usage_errors_exit_2(void **state) {
  (void)state;
  const char *rt = NULL;
  (void)rt;
  run_result *r = &R;
  {
    const char *a[] = {"blockc", NULL};
    run(r, a);
    expect(r, 2, NULL, "usage:");
  }
  RUN(r, "frobnicate");
  expect(r, 2, NULL, "unknown command 'frobnicate'");
  RUN(r, "check");
  expect(r, 2, NULL, "check: missing GRAPH");
  RUN(r, "check", "graphs/tiny.blk", "--bogus");
  expect(r, 2, NULL, "unknown option '--bogus'");
  RUN(r, "run", "graphs/tiny.blk", "--backend", "gpu");
  expect(r, 2, NULL, "unknown backend 'gpu'");
  RUN(r, "run", "graphs/tiny.blk", "--seed");
  expect(r, 2, NULL, "option '--seed' needs a value");
  RUN(r, "run", "graphs/tiny.blk", "--seed", "-4");
  expect(r, 2, NULL, "--seed expects a non-negative integer");
  RUN(r, "check", "graphs/tiny.blk", "-D", "D");
  expect(r, 2, NULL, "-D expects NAME=VALUE");
  RUN(r, "check", "graphs/tiny.blk", "-D", "D=abc");
  expect(r, 2, NULL, "the value must be an integer");
  RUN(r, "check", "graphs/tiny.blk", "graphs/post_ln.blk");
  expect(r, 2, NULL, "unexpected argument");
  RUN(r, "dump", "graphs/tiny.blk", "--after", "nosuch");
  expect(r, 2, NULL, "unknown pass 'nosuch'");
}

static void test_check_and_dump(void **state) {
  (void)state;
  RUN(&R, "check", "graphs/residual.blk");
  expect(&R, 0, "model residual, dims B=1 T=128 D=512 H=8 F=2048 N=6, 50 nodes", NULL);
  RUN(&R, "check", "graphs/residual.blk", "-D", "N=2", "-DD=64");
  expect(&R, 0, "D=64 H=8 F=256 N=2, 18 nodes", NULL);
  RUN(&R, "dump", "graphs/tiny.blk");
  expect(&R, 0, "n0: %1 a [2, 5, 8] = Attention(%0) heads=2 causal=true", NULL);
  RUN(&R, "dump", "--passes");
  expect(&R, 0, "fuse-add-ln", NULL);
  RUN(&R, "dump", "graphs/tiny.blk", "--after", "fuse-add-ln");
  expect(&R, 0, "AddLayerNorm", NULL);
  RUN(&R, "dump", "graphs/tiny.blk", "--after", "plan");
  expect(&R, 0, "arena ", NULL);
}

static void test_bad_input_exit_1(void **state) {
  (void)state;
  RUN(&R, "check", "no/such/file.blk");
  expect(&R, 1, NULL, "no/such/file.blk: error: cannot open");
  RUN(&R, "check", "graphs/residual.blk", "-D", "D=510");
  expect(&R, 1, NULL, "graphs/residual.blk:29:30: error: model width D=510 is not divisible by heads=8");
  RUN(&R, "check", "graphs/residual.blk", "-D", "Q=1");
  expect(&R, 1, NULL, "has no dim 'Q'");
  RUN(&R, "run", "graphs/tiny.blk", "--weights", "no/such.safetensors");
  expect(&R, 1, NULL, "no/such.safetensors: error: cannot open");
  RUN(&R, "run", "graphs/tiny.blk", "--input", "no/such.npy");
  expect(&R, 1, NULL, "no/such.npy");
}

// A run writes --output atomically; a failed run leaves nothing behind.
static void test_run_output_roundtrip(void **state) {
  (void)state;
  char y1[256], y2[256], x[256];
  tu_tmp_path(y1, sizeof y1, ".npy");
  tu_tmp_path(y2, sizeof y2, ".npy");
  tu_tmp_path(x, sizeof x, ".npy");
  RUN(&R, "run", "graphs/tiny.blk", "--backend", "interp", "--seed", "3", "--output", y1);
  expect(&R, 0, "output [2, 5, 8]", NULL);
  RUN(&R, "run", "graphs/tiny.blk", "--seed", "3", "--output", y2);
  expect(&R, 0, "backend jit", NULL);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape s1, s2;
  float *a = NULL, *b = NULL;
  assert_int_equal(bcN_read(ctx, y1, &s1, &a), BC_OK);
  assert_int_equal(bcN_read(ctx, y2, &s2, &b), BC_OK);
  assert_true(bc_shape_eq(&s1, &s2));
  // JIT vs interpreter on the same seeded weights and input.
  assert_true(tu_max_abs_diff(a, b, (size_t)bc_shape_numel(&s1)) < 1e-5);
  // Feeding the output back as input (same shape) works and is deterministic.
  RUN(&R, "run", "graphs/tiny.blk", "--input", y1, "--output", x);
  expect(&R, 0, NULL, NULL);
  assert_true(exists(x));
  free(a);
  free(b);
  bc_ctx_free(ctx);
  // Wrong input shape: exit 1, and the output file is not created.
  char z[256];
  tu_tmp_path(z, sizeof z, ".npy");
  RUN(&R, "run", "graphs/tiny.blk", "-D", "T=6", "--input", y1, "--output", z);
  expect(&R, 1, NULL, "input has shape [2, 5, 8] but graphs/tiny.blk expects [2, 6, 8]");
  assert_false(exists(z));
  // Output into a missing directory: exit 1 and nothing created.
  RUN(&R, "run", "graphs/tiny.blk", "--output", "/nonexistent-dir/y.npy");
  expect(&R, 1, NULL, "/nonexistent-dir/y.npy: error: cannot write");
  unlink(y1);
  unlink(y2);
  unlink(x);
}

// Linear changes the last dim; interpreter and JIT agree on a case small
// enough to check by hand: x = [1, 2], W = seeded, so compare the backends.
static void test_linear_runs_on_every_backend(void **state) {
  (void)state;
  char g[256], y1[256], y2[256];
  tu_tmp_path(g, sizeof g, ".blk");
  tu_tmp_path(y1, sizeof y1, ".npy");
  tu_tmp_path(y2, sizeof y2, ".npy");
  FILE *f = fopen(g, "w");
  fputs("model lin\ndim D = 6\ninput x : [2, 3, D]\n"
        "y = Linear(LayerNorm(x, params=n), out=5, params=head)\noutput y\n", f);
  fclose(f);
  RUN(&R, "run", g, "--backend", "interp", "--output", y1);
  expect(&R, 0, "output [2, 3, 5]", NULL);
  RUN(&R, "run", g, "--output", y2);
  expect(&R, 0, "output [2, 3, 5]", NULL);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape s1, s2;
  float *a = NULL, *b = NULL;
  assert_int_equal(bcN_read(ctx, y1, &s1, &a), BC_OK);
  assert_int_equal(bcN_read(ctx, y2, &s2, &b), BC_OK);
  assert_true(tu_max_abs_diff(a, b, 30) < 1e-5);
  free(a);
  free(b);
  bc_ctx_free(ctx);
  unlink(g);
  unlink(y1);
  unlink(y2);
}

static void test_emit_c(void **state) {
  (void)state;
  RUN(&R, "emit-c", "graphs/tiny.blk");
  expect(&R, 0, "tiny_forward", NULL);
  assert_non_null(strstr(R.out, "cblas_sgemm"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help_and_version),
      cmocka_unit_test(test_usage_errors_exit_2),
      cmocka_unit_test(test_check_and_dump),
      cmocka_unit_test(test_bad_input_exit_1),
      cmocka_unit_test(test_run_output_roundtrip),
      cmocka_unit_test(test_emit_c),
      cmocka_unit_test(test_linear_runs_on_every_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
