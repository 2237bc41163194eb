// test_cli_io.c — `blockc run` with several named inputs and outputs,
// lengths files and run-time dims taken from the arrays' shapes.
//
// Each case runs the real binary and checks the exit status, the message and
// the files written; the numbers themselves are the interpreter's (checked in
// test_interp_io.c), here we check that the CLI feeds it the right arrays.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>

static const char graph_text[] =
    "model dec\ndim B = 2\ndim T <= 16\ndim S <= 12\ndim D = 8\n"
    "input x : [B, T, D]\ninput mem : [B, S, D]\ninput len : lengths[B]\n"
    "input mlen : lengths[B]\n"
    "a = Attention(x, heads=2, causal=true, lengths=len, params=sa)\n"
    "x1 = LayerNorm(Add(x, a), params=n1)\n"
    "c = Attention(x1, kv=mem, heads=2, lengths=len, kv_lengths=mlen, params=ca)\n"
    "y = LayerNorm(Add(x1, c), params=n2)\noutput y\noutput c\n";

typedef struct {
  char graph[256], x[256], mem[256], len[256], y[256], c[256];
  char out[8192], err[8192];
  int status;
} fixture;

static fixture F;

// A little-endian int64 .npy of rank 1.
static void write_i64(const char *path, const int64_t *v, int n) {
  char head[128];
  int h = snprintf(head + 10, sizeof head - 10,
                   "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }", n);
  size_t total = (size_t)(10 + h + 1 + 63) & ~(size_t)63;
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  head[8] = (char)((total - 10) & 0xff), head[9] = (char)((total - 10) >> 8);
  memset(head + 10 + h, ' ', total - 10 - (size_t)h - 1);
  head[total - 1] = '\n';
  char *buf = malloc(total + (size_t)n * 8);
  assert_non_null(buf);
  memcpy(buf, head, total);
  memcpy(buf + total, v, (size_t)n * 8);
  tu_write_bytes(path, buf, total + (size_t)n * 8);
  free(buf);
}

static void write_f32(const char *path, int b, int t, int d) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape s = {.rank = 3, .d = {b, t, d}};
  float *x = malloc((size_t)(b * t * d) * sizeof *x);
  assert_non_null(x);
  for (int i = 0; i < b * t * d; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  assert_int_equal(bcN_write(ctx, path, &s, x), BC_OK);
  free(x);
  bc_ctx_free(ctx);
}

static int setup(void **state) {
  (void)state;
  tu_tmp_path(F.graph, sizeof F.graph, ".blk");
  tu_write_bytes(F.graph, graph_text, strlen(graph_text));
  tu_tmp_path(F.x, sizeof F.x, ".npy");
  tu_tmp_path(F.mem, sizeof F.mem, ".npy");
  tu_tmp_path(F.len, sizeof F.len, ".npy");
  tu_tmp_path(F.y, sizeof F.y, ".npy");
  tu_tmp_path(F.c, sizeof F.c, ".npy");
  write_f32(F.x, 2, 5, 8);
  write_f32(F.mem, 2, 7, 8);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink(F.graph), unlink(F.x), unlink(F.mem), unlink(F.len), unlink(F.y), unlink(F.c);
  return 0;
}

#define RUN(...)                                                                        \
  do {                                                                                  \
    char *argv_[] = {(char *)tu_blockc(), "run", F.graph, "--backend", (char *)"interp", \
                     __VA_ARGS__, NULL};                                                \
    F.status = tu_spawn(argv_, F.out, sizeof F.out, F.err, sizeof F.err);               \
  } while (0)

static void expect(int status, const char *in_out, const char *in_err) {
  if (F.status != status || (in_out && !strstr(F.out, in_out)) ||
      (in_err && !strstr(F.err, in_err))) {
    print_error("status %d (want %d)\nstdout: %s\nstderr: %s\n", F.status, status, F.out, F.err);
    fail();
  }
}

static char arg[8][320];
static char *kv(int k, const char *name, const char *path) {
  snprintf(arg[k], sizeof arg[k], "%s=%s", name, path);
  return arg[k];
}

static void read_shape(const char *path, bc_shape *s) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  float *data;
  assert_int_equal(bcN_read(ctx, path, s, &data), BC_OK);
  free(data);
  bc_ctx_free(ctx);
}

// Named inputs fix T = 5 and S = 7; both outputs are written at those sizes.
static void test_named_inputs_and_outputs(void **state) {
  (void)state;
  int64_t len[2] = {3, 5};
  write_i64(F.len, len, 2);
  RUN("--input", kv(0, "x", F.x), "--input", kv(1, "mem", F.mem), "--input",
      kv(2, "len", F.len), "--output", kv(3, "y", F.y), "--output", kv(4, "c", F.c));
  expect(0, "y: output [2, 5, 8]", NULL);
  expect(0, "c: output [2, 5, 8]", NULL);
  bc_shape s;
  read_shape(F.y, &s);
  assert_int_equal(s.d[1], 5);
  read_shape(F.c, &s);
  assert_int_equal(s.rank, 3);
  // Without files every input is random, at the bounds.
  RUN("--seed", "1");
  expect(0, "y: output [2, 16, 8]", NULL);
}

static void test_input_errors(void **state) {
  (void)state;
  RUN("--input", F.x);
  expect(2, NULL, "has 2 float inputs (x, mem, len, mlen); name one with --input NAME=FILE");
  RUN("--input", kv(0, "q", F.x));
  expect(2, NULL, "has no input 'q' (its inputs: x, mem, len, mlen)");
  RUN("--output", F.y);
  expect(2, NULL, "has 2 outputs (y, c); name one with --output NAME=FILE");
  RUN("--input", kv(0, "x", F.x), "--input", kv(1, "x", F.mem));
  expect(2, NULL, "given twice for the same name");
  // Lengths past the sequence, zero, or for the wrong batch.
  int64_t bad[2] = {6, 5};
  write_i64(F.len, bad, 2);
  RUN("--input", kv(0, "x", F.x), "--input", kv(1, "len", F.len));
  expect(1, NULL, "len[0] = 6 is outside 1..5");
  int64_t zero[2] = {0, 5};
  write_i64(F.len, zero, 2);
  RUN("--input", kv(0, "x", F.x), "--input", kv(1, "len", F.len));
  expect(1, NULL, "len[0] = 0: batch row 0 has no valid position");
  int64_t three[3] = {1, 2, 3};
  write_i64(F.len, three, 3);
  RUN("--input", kv(0, "x", F.x), "--input", kv(1, "len", F.len));
  expect(1, NULL, "lengths input 'len' has shape [3]; the batch needs [2]");
  // A sequence longer than the bound.
  char big[256];
  tu_tmp_path(big, sizeof big, ".npy");
  write_f32(big, 2, 17, 8);
  RUN("--input", kv(0, "x", big));
  expect(1, NULL, "expects [2, <=16, 8]");
  unlink(big);

}


// Issue 20, item 7: one array given two destinations, or two outputs one
// file (also through ./ or a symlink), is a usage error naming both flags,
// and nothing is written.
static void test_one_array_one_file(void **state) {
  (void)state;
  char one[256], other[256], link_[300], dotted[300];
  tu_tmp_path(one, sizeof one, ".npy");
  tu_tmp_path(other, sizeof other, ".npy");
  snprintf(link_, sizeof link_, "%s.lnk.npy", one);
  const char *slash = strrchr(one, '/');
  snprintf(dotted, sizeof dotted, "%.*s/./%s", (int)(slash - one), one, slash + 1);
  char *in = kv(0, "x", F.x);
  RUN("--input", in, "--output", kv(1, "y", one), "--output", kv(2, "c", one));
  expect(2, NULL, "--output y=");
  expect(2, NULL, "name the same file");
  assert_false(tu_exists(one));
  RUN("--input", in, "--output", kv(1, "y", one), "--output", kv(2, "c", dotted));
  expect(2, NULL, "name the same file");
  write_f32(one, 1, 1, 1);
  assert_int_equal(symlink(one, link_), 0);
  RUN("--input", in, "--output", kv(1, "y", one), "--output", kv(2, "c", link_));
  expect(2, NULL, "name the same file");
  unlink(link_), unlink(one);
  char *i2[] = {(char *)tu_blockc(), "run", "graphs/tiny.blk", "--input", kv(6, "x", F.mem),
                "--input", F.x, NULL};
  F.status = tu_spawn(i2, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(2, NULL, "both give input 'x'");
  // A graph with one output: a bare FILE and y=FILE both give it.
  char *argv[] = {(char *)tu_blockc(), "run", "graphs/tiny.blk", "--output", kv(3, "y", one),
                  "--output", other, NULL};
  F.status = tu_spawn(argv, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(2, NULL, "--output y=");
  expect(2, NULL, "and --output ");
  expect(2, NULL, "both give output 'y'");
  assert_false(tu_exists(one) || tu_exists(other));
  // grad: -o and --dx one file; --dx x=A and a bare --dx.
  char *g1[] = {(char *)tu_blockc(), "grad", "graphs/tiny.blk", "-o", one, "--dx", one, NULL};
  F.status = tu_spawn(g1, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(2, NULL, "name the same file");
  assert_false(tu_exists(one));
  char *g2[] = {(char *)tu_blockc(), "grad", "graphs/tiny.blk", "-o", one, "--dx", kv(4, "x", other),
                "--dx", F.c, NULL};
  F.status = tu_spawn(g2, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(2, NULL, "both give the gradient of input 'x'");
  char *g3[] = {(char *)tu_blockc(), "grad", "graphs/tiny.blk", "-o", one, "--dy", kv(5, "y", other),
                "--dy", other, NULL};
  F.status = tu_spawn(g3, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(2, NULL, "both give dy of output 'y'");
  assert_false(tu_exists(one));
  // grad -o takes a plain file name, '=' and all (item 11).
  char eq[300];
  snprintf(eq, sizeof eq, "%.*s/x=w.st", (int)(slash - one), one);
  char *g4[] = {(char *)tu_blockc(), "grad", "graphs/tiny.blk", "-o", eq, NULL};
  F.status = tu_spawn(g4, F.out, sizeof F.out, F.err, sizeof F.err);
  expect(0, NULL, NULL);
  assert_true(tu_exists(eq));
  unlink(eq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_named_inputs_and_outputs),
      cmocka_unit_test(test_input_errors),
      cmocka_unit_test(test_one_array_one_file),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
