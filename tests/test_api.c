// test_api.c — the embedding API (blockc.h): the documented call sequence,
// results equal to the reference interpreter, reentrancy across threads,
// and misuse reported as status codes.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blockc.h"
#include "io_graphs.h"

#include <fcntl.h>
#include <unistd.h>

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
  // tiny.blk: fixed dims and one input, so blockc_forward applies (the
  // other shipped graphs have a run-time T and lengths: blockc_run).
  assert_int_equal(blockc_load_graph(m, "graphs/tiny.blk"), BLOCKC_OK);
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


// --- blockc_run: several inputs and outputs, lengths, run-time dims --------------

static blockc_model *io_model_new(sink *s, bc_weights *w) {
  ig_cfg cfg = {.B = 2, .D = 12, .H = 3, .F = 16, .T = 20, .S = 6, .causal = true};
  char text[2048];
  blockc_model *m = blockc_new();
  assert_non_null(m);
  blockc_set_error_func(m, s, on_error);
  assert_int_equal(blockc_load_graph_string(m, "dec.blk", ig_text(text, sizeof text, &cfg)), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 9), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  if (w) {  // the same weights for the interpreter
    tu_errors e;
    bc_ctx *ctx = tu_ctx(&e);
    bc_graph *g = tu_parse(ctx, text);
    assert_non_null(g);
    assert_int_equal(bcW_init_random(ctx, g, 9, w), BC_OK);
    bc_ctx_free(ctx);
  }
  return m;
}

static void test_introspection(void **state) {
  (void)state;
  sink s = {{0}};
  blockc_model *m = io_model_new(&s, NULL);
  assert_int_equal(blockc_num_inputs(m), 4);
  assert_int_equal(blockc_num_outputs(m), 3);
  assert_string_equal(blockc_input_name(m, 1), "mem");
  assert_string_equal(blockc_output_name(m, 1), "c");
  assert_int_equal(blockc_input_is_lengths(m, 0), 0);
  assert_int_equal(blockc_input_is_lengths(m, 2), 1);
  assert_int_equal(blockc_input_is_lengths(m, 4), -1);
  long long shape[4];
  const char *names[4];
  assert_int_equal(blockc_input_shape(m, 1, shape, names), 3);
  assert_true(shape[0] == 2 && shape[1] == 6 && shape[2] == 12);
  assert_null(names[0]);
  assert_string_equal(names[1], "S");
  assert_int_equal(blockc_input_shape(m, 2, shape, NULL), 1);
  assert_int_equal(blockc_output_shape(m, 0, shape, names), 3);
  assert_string_equal(names[1], "T");
  assert_int_equal(blockc_output_shape(m, 3, shape, names), -1);
  assert_int_equal(blockc_num_dims(m), 2);
  assert_string_equal(blockc_dim_name(m, 0), "T");
  assert_int_equal(blockc_dim_bound(m, 0), 20);
  assert_string_equal(blockc_dim_name(m, 1), "S");
  assert_null(blockc_dim_name(m, 2));
  assert_int_equal(blockc_dim_bound(m, 2), -1);
  assert_null(strstr(blockc_c_source(m), "dec_forward"));
  blockc_delete(m);
}

static void test_run_matches_interpreter(void **state) {
  (void)state;
  sink s = {{0}};
  bc_weights w;
  blockc_model *m = io_model_new(&s, &w);
  size_t n = blockc_workspace_size(m);
  void *ws = aligned_alloc(64, n);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  ig_cfg cfg = {.B = 2, .D = 12, .H = 3, .F = 16, .T = 20, .S = 6, .causal = true};
  char text[2048];
  bc_graph *g = tu_parse(ctx, ig_text(text, sizeof text, &cfg));
  static const long sizes[][2] = {{20, 6}, {11, 2}, {1, 1}};
  for (int k = 0; k < 3; k++) {
    int len[2] = {(int)sizes[k][0], 1}, mlen[2] = {1, (int)sizes[k][1]};
    int *lens[4] = {0, 0, len, mlen};
    ig_io a, r;
    ig_alloc(&a, g, sizes[k], 5 + k, lens);
    ig_alloc(&r, g, sizes[k], 5 + k, lens);
    long long dims[2] = {sizes[k][0], sizes[k][1]};
    assert_int_equal(blockc_run(m, (const void *const *)a.io, a.io + 4, dims, ws, n), BLOCKC_OK);
    assert_int_equal(bcR_run_io(ctx, g, &w, r.io, r.rt), BC_OK);
    double err = ig_rel_err(&a, &r, g);
    if (!(err <= 2e-5)) fail_msg("T=%ld S=%ld: rel err %g", sizes[k][0], sizes[k][1], err);
    ig_free(&a, g);
    ig_free(&r, g);
  }
  bcW_free(&w);
  bc_ctx_free(ctx);
  free(ws);
  blockc_delete(m);
}

// Runs fn with stderr sent to a temp file; returns what it printed.
static const char *capture_stderr(char *buf, size_t n, int (*fn)(void), int *st) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".err");
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  *st = fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = '\0';
  if (f) fclose(f);
  unlink(path);
  return buf;
}

static int null_run(void) { return blockc_run(NULL, NULL, NULL, NULL, NULL, 0); }
static int null_forward(void) { return blockc_forward(NULL, NULL, NULL, NULL); }
static int null_load(void) { return blockc_load_graph(NULL, "graphs/tiny.blk"); }
static int null_compile(void) { return blockc_compile(NULL); }
static int null_weights(void) { return blockc_load_weights(NULL, "w.safetensors"); }

// Issue 12 item 9: every misuse is a status and a message.
static void test_run_misuse(void **state) {
  (void)state;
  char err[1024];
  int st;
  int (*nulls[])(void) = {null_run, null_forward, null_load, null_compile, null_weights};
  for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
    capture_stderr(err, sizeof err, nulls[i], &st);
    assert_int_equal(st, BLOCKC_EUSAGE);
    assert_non_null(strstr(err, "the model is NULL"));
  }
  blockc_delete(NULL);  // a no-op
  assert_int_equal(blockc_num_inputs(NULL), -1);
  assert_null(blockc_c_source(NULL));
  assert_int_equal(blockc_workspace_size(NULL), 0);

  sink s = {{0}};
  blockc_model *m = blockc_new();
  blockc_set_error_func(m, &s, on_error);
  assert_int_equal(blockc_load_graph(m, NULL), BLOCKC_EUSAGE);
  assert_non_null(strstr(s.msg, "path is NULL"));
  assert_int_equal(blockc_load_graph_string(m, NULL, "model m"), BLOCKC_EUSAGE);
  assert_int_equal(blockc_load_graph_string(m, "g", NULL), BLOCKC_EUSAGE);
  // Graph text over BC_MAX_SOURCE (16 MiB): refused like a graph file of that
  // size, before parsing (it was accepted: issue 20, item 11).
  {
    size_t big = ((size_t)16 << 20) + 1;
    char *t = malloc(big + 1);
    assert_non_null(t);
    memset(t, ' ', big);
    memcpy(t, "model m\n", 8);
    t[big] = '\0';
    s.msg[0] = '\0';
    assert_int_equal(blockc_load_graph_string(m, "big.blk", t), BLOCKC_EINPUT);
    assert_non_null(strstr(s.msg, "big.blk: error: the graph text is over the limit of 16777216 bytes"));
    free(t);
  }
  assert_int_equal(blockc_set_dim(m, NULL, 3), BLOCKC_EUSAGE);
  s.msg[0] = '\0';
  assert_int_equal(blockc_set_dim(m, "T", 0), BLOCKC_EUSAGE);
  assert_non_null(strstr(s.msg, "blockc_set_dim: T = 0 is outside 1..16777216"));
  s.msg[0] = '\0';
  assert_int_equal(blockc_run(m, NULL, NULL, NULL, NULL, 0), BLOCKC_EUSAGE);
  assert_non_null(strstr(s.msg, "load and compile a graph"));
  blockc_delete(m);

  m = io_model_new(&s, NULL);
  assert_int_equal(blockc_load_weights(m, NULL), BLOCKC_EUSAGE);
  size_t n = blockc_workspace_size(m);
  char *ws = aligned_alloc(64, n + 64);
  ig_cfg cfg = {.B = 2, .D = 12, .H = 3, .F = 16, .T = 20, .S = 6, .causal = true};
  char text[2048];
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, ig_text(text, sizeof text, &cfg));
  int len[2] = {20, 20}, mlen[2] = {6, 6};
  int *lens[4] = {0, 0, len, mlen};
  ig_io a;
  ig_alloc(&a, g, (long[]){20, 6}, 3, lens);
  const void *const *in = (const void *const *)a.io;
  void *const *out = a.io + 4;
  long long dims[2] = {20, 6};
  assert_int_equal(blockc_run(m, in, out, dims, ws, n), BLOCKC_OK);
  struct { const char *want; int st; } cases[] = {
      {"workspace has", BLOCKC_EUSAGE}, {"misaligned", BLOCKC_EUSAGE},
      {"workspace is NULL", BLOCKC_EUSAGE}, {"dims is NULL", BLOCKC_EUSAGE},
      {"run-time dim T = 21 is outside 1..20", BLOCKC_EINPUT},
      {"run-time dim S = 0 is outside 1..6", BLOCKC_EINPUT},
      {"input 'mem' is NULL", BLOCKC_EUSAGE}, {"output 'c' is NULL", BLOCKC_EUSAGE},
      {"output 'y' overlaps input 'x'", BLOCKC_EUSAGE},
      {"output 'c' overlaps output 'x2'", BLOCKC_EUSAGE},
      {"inputs or outputs is NULL", BLOCKC_EUSAGE}, {"len", BLOCKC_EINPUT},
      {"use blockc_run", BLOCKC_EUSAGE}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    s.msg[0] = '\0';
    void *io[7];
    memcpy(io, a.io, sizeof io);
    long long d[2] = {20, 6};
    int got;
    switch (k) {
    case 0: got = blockc_run(m, in, out, dims, ws, n - 1); break;
    case 1: got = blockc_run(m, in, out, dims, ws + 4, n); break;
    case 2: got = blockc_run(m, in, out, dims, NULL, n); break;
    case 3: got = blockc_run(m, in, out, NULL, ws, n); break;
    case 4: d[0] = 21; got = blockc_run(m, in, out, d, ws, n); break;
    case 5: d[1] = 0; got = blockc_run(m, in, out, d, ws, n); break;
    case 6: io[1] = NULL; got = blockc_run(m, (const void *const *)io, io + 4, dims, ws, n); break;
    case 7: io[5] = NULL; got = blockc_run(m, (const void *const *)io, io + 4, dims, ws, n); break;
    case 8: io[4] = (float *)io[0] + 5; got = blockc_run(m, (const void *const *)io, io + 4, dims, ws, n); break;
    case 9: io[6] = (float *)io[5] + 479; got = blockc_run(m, (const void *const *)io, io + 4, dims, ws, n); break;
    case 10: got = blockc_run(m, NULL, out, dims, ws, n); break;
    case 11: len[1] = 0; got = blockc_run(m, in, out, dims, ws, n); len[1] = 20; break;
    default: got = blockc_forward_ws(m, a.io[0], a.io[4], ws, n); break;
    }
    if (got != cases[k].st || !strstr(s.msg, cases[k].want))
      fail_msg("case %zu: status %d, message '%s'; want %d and '%s'", k, got, s.msg, cases[k].st,
               cases[k].want);
  }
  // Overlap is about the actual sizes: at T = 10, y may start where x ends.
  void *io[7];
  memcpy(io, a.io, sizeof io);
  io[4] = (float *)io[0] + 2 * 10 * 12;
  long long d10[2] = {10, 6};
  len[0] = len[1] = 10;
  assert_int_equal(blockc_run(m, (const void *const *)io, io + 4, d10, ws, n), BLOCKC_OK);
  ig_free(&a, g);
  bc_ctx_free(ctx);
  free(ws);
  blockc_delete(m);
}

// A head graph of Hugging Face names: y = x W^T + b, W transformer.h.0.fc.weight [3, 4].
static const char *const k_head_graph =
    "model hd\ndim B = 1\ndim T = 2\ndim D = 4\ninput x : [B, T, D]\n"
    "y = Linear(x, out=3, params=transformer.h.0.fc)\noutput y\n";

// Writes the tensors names[i] (W [3, 4] or b [3], by the name's ending) with
// W[r][c] = wscale (r * 4 + c + 1) and b = 0.5, 1.5, 2.5; a third tensor
// (an extra) is b + 100.
static void write_head_file(const char *path, int n, const char *const *names, float wscale) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  float wv[12], bv[3] = {0.5f, 1.5f, 2.5f}, xv[3] = {100.5f, 101.5f, 102.5f};
  for (int i = 0; i < 12; i++) wv[i] = wscale * (float)(i + 1);
  bc_shape shapes[4];
  const float *data[4];
  for (int i = 0; i < n; i++) {
    bool bias = strstr(names[i], "bias") != NULL;
    shapes[i] = bias ? (bc_shape){.rank = 1, .d = {3}} : (bc_shape){.rank = 2, .d = {3, 4}};
    data[i] = i >= 2 ? xv : bias ? bv : wv;
  }
  assert_int_equal(bcS_write(ctx, path, n, names, shapes, data), BC_OK);
  bc_ctx_free(ctx);
}

// A head model with the given weights options; the load's status.
static int load_head(const char *path, const char *prefix, int allow, sink *s, blockc_model **out) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  s->msg[0] = '\0';
  blockc_set_error_func(m, s, on_error);
  assert_int_equal(blockc_load_graph_string(m, "hd.blk", k_head_graph), BLOCKC_OK);
  assert_int_equal(blockc_set_weights_options(m, prefix, allow), BLOCKC_OK);
  int st = blockc_load_weights(m, path);
  if (out) *out = m;
  else blockc_delete(m);
  return st;
}

// y[0][r] for x[0] = (1, 0, 0, 0): W[r][0] + b[r], so the test sees which
// file tensor was read.
static float head_y(blockc_model *m, int r) {
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  float x[8] = {1, 0, 0, 0, 0, 0, 0, 0}, y[6];
  size_t n = blockc_workspace_size(m);
  void *ws = aligned_alloc(64, (n + 63) / 64 * 64);
  const void *in[1] = {x};
  void *outp[1] = {y};
  assert_int_equal(blockc_run(m, in, outp, NULL, ws, n), BLOCKC_OK);
  free(ws);
  return y[r];
}

// Issue 21: the API loads whole Hugging Face files (blockc_set_weights_options
// = --weights-prefix / --allow-extra), its messages name the API function and
// never the CLI's flags, and a tied head saved twice loads without options.
static void test_weights_options(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  sink s;
  blockc_model *m;
  // A bare file (no "transformer."): the prefix strips it from the graph's names.
  const char *bare[] = {"h.0.fc.weight", "h.0.fc.bias"};
  write_head_file(path, 2, bare, 1.0f);
  assert_int_equal(load_head(path, NULL, 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "missing tensor 'transformer.h.0.fc.weight'"));
  assert_int_equal(load_head(path, "transformer.", 0, &s, &m), BLOCKC_OK);
  assert_float_equal(head_y(m, 2), 9.0f + 2.5f, 1e-6);  // W[2][0] = 9
  blockc_delete(m);
  // A prefix that finds nothing: the names tried and the API's option.
  assert_int_equal(load_head(path, "model.", 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "missing tensor 'transformer.h.0.fc.weight' (expected shape [3, 4]; "
                                "tried 'model.transformer.h.0.fc.weight' (prefix 'model.' of "
                                "blockc_set_weights_options))"));
  assert_null(strstr(s.msg, "--weights-prefix"));
  // A file under a wrapper ("lm.transformer.h..."): the hint names the API.
  const char *wrapped[] = {"lm.transformer.h.0.fc.weight", "lm.transformer.h.0.fc.bias"};
  write_head_file(path, 2, wrapped, 1.0f);
  assert_int_equal(load_head(path, NULL, 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "the file has 'lm.transformer.h.0.fc.weight' (exported with a "
                                "different name prefix? give blockc_set_weights_options a prefix)"));
  assert_null(strstr(s.msg, "--weights-prefix"));
  assert_int_equal(load_head(path, "lm.", 0, &s, NULL), BLOCKC_OK);
  // An extra tensor: refused naming the API call (not --allow-extra), then allowed.
  const char *extra[] = {"transformer.h.0.fc.weight", "transformer.h.0.fc.bias", "transformer.wpe.bias"};
  write_head_file(path, 3, extra, 1.0f);
  assert_int_equal(load_head(path, NULL, 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "unexpected tensor 'transformer.wpe.bias' [3]"));
  assert_non_null(strstr(s.msg, "1 tensor in the file is not used by the graph; call "
                                "blockc_set_weights_options(m, prefix, 1) to ignore them"));
  assert_null(strstr(s.msg, "--allow-extra"));
  assert_int_equal(load_head(path, NULL, 1, &s, &m), BLOCKC_OK);
  assert_float_equal(head_y(m, 0), 1.0f + 0.5f, 1e-6);
  blockc_delete(m);
  // Options apply to later loads, and can be reset (NULL / "" prefix, 0).
  assert_int_equal(load_head(path, NULL, 1, &s, &m), BLOCKC_OK);
  assert_int_equal(blockc_set_weights_options(m, "", 0), BLOCKC_OK);
  assert_int_equal(blockc_load_weights(m, path), BLOCKC_EINPUT);
  assert_int_equal(blockc_set_weights_options(m, NULL, 2), BLOCKC_EUSAGE);
  assert_non_null(strstr(s.msg, "allow_extra must be 0 or 1"));
  blockc_delete(m);
  assert_int_equal(blockc_set_weights_options(NULL, NULL, 0), BLOCKC_EUSAGE);
  unlink(path);
}

// A tied head saved twice (GPT2LMHeadModel's lm_head.weight beside the
// transformer.wte.weight the graph reads): the same bytes load without any
// option; other values (an untied head) are refused, saying so.
static void test_tied_copy(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  float wv[12], hv[12], zeros[12] = {0};
  for (int i = 0; i < 12; i++) wv[i] = hv[i] = 0.25f * (float)(i - 5);
  const char *names[] = {"transformer.h.0.fc.weight", "transformer.h.0.fc.bias", "lm_head.weight"};
  bc_shape shapes[] = {{.rank = 2, .d = {3, 4}}, {.rank = 1, .d = {3}}, {.rank = 2, .d = {3, 4}}};
  const float *data[] = {wv, zeros, hv};
  assert_int_equal(bcS_write(ctx, path, 3, names, shapes, data), BC_OK);
  sink s;
  blockc_model *m;
  assert_int_equal(load_head(path, NULL, 0, &s, &m), BLOCKC_OK);
  assert_float_equal(head_y(m, 1), 0.25f * (4 - 5), 1e-6);
  blockc_delete(m);
  // One element differs: not the same tensor.
  hv[7] = 3.0f;
  assert_int_equal(bcS_write(ctx, path, 3, names, shapes, data), BC_OK);
  assert_int_equal(load_head(path, NULL, 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "unexpected tensor 'lm_head.weight' [3, 4] (not one of the graph's 2 "
                                "parameters; it has the shape of 'transformer.h.0.fc.weight' but is "
                                "no tied copy of it)"));
  // A constant tensor equal to a used one (a fresh bias of zeros) matches
  // by chance: it is still an extra.
  const char *names2[] = {"transformer.h.0.fc.weight", "transformer.h.0.fc.bias", "ln_f.bias"};
  bc_shape shapes2[] = {{.rank = 2, .d = {3, 4}}, {.rank = 1, .d = {3}}, {.rank = 1, .d = {3}}};
  const float *data2[] = {wv, zeros, zeros};
  assert_int_equal(bcS_write(ctx, path, 3, names2, shapes2, data2), BC_OK);
  assert_int_equal(load_head(path, NULL, 0, &s, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(s.msg, "unexpected tensor 'ln_f.bias' [3]"));
  bc_ctx_free(ctx);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_and_match_interpreter),
      cmocka_unit_test(test_reentrant_across_threads),
      cmocka_unit_test(test_errors_and_misuse),
      cmocka_unit_test(test_introspection),
      cmocka_unit_test(test_run_matches_interpreter),
      cmocka_unit_test(test_run_misuse),
      cmocka_unit_test(test_weights_options),
      cmocka_unit_test(test_tied_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
