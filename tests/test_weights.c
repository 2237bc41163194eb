// test_weights.c — the RNG (determinism, pinned values, distribution),
// random init conventions, and bcW_load's checks against a graph built by
// hand: every missing, extra, misshaped, wrongly typed or non-finite tensor
// is reported by name in one run.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bc_shape shape1(int64_t a) { return (bc_shape){.rank = 1, .d = {a}}; }
static bc_shape shape2(int64_t a, int64_t b) { return (bc_shape){.rank = 2, .d = {a, b}}; }

// A FFN-shaped block plus a LayerNorm and an attention bias.
static bc_graph *small_graph(bc_ctx *ctx) {
  bc_graph *g = bcI_new(ctx);
  assert_non_null(g);
  bc_loc nowhere = {0};
  assert_int_equal(bcI_add_param(g, "layers.0.linear1.weight", shape2(64, 32), nowhere), 0);
  assert_int_equal(bcI_add_param(g, "layers.0.linear1.bias", shape1(64), nowhere), 1);
  assert_int_equal(bcI_add_param(g, "layers.0.norm1.weight", shape1(32), nowhere), 2);
  assert_int_equal(bcI_add_param(g, "layers.0.norm1.bias", shape1(32), nowhere), 3);
  assert_int_equal(bcI_add_param(g, "layers.0.self_attn.in_proj_bias", shape1(96), nowhere), 4);
  return g;
}

// ---------------------------------------------------------------------------
// RNG
// ---------------------------------------------------------------------------
static void test_rng_pinned(void **state) {
  (void)state;
  bc_rng r;
  bc_rng_seed(&r, 0);
  assert_int_equal(r.s[0], 0xE220A8397B1DCDAFULL);  // splitmix64(0)'s published first output
  bc_rng_seed(&r, 42);
  assert_int_equal(bc_rng_next(&r), 1546998764402558742ULL);
  assert_int_equal(bc_rng_next(&r), 6990951692964543102ULL);
  assert_int_equal(bc_rng_next(&r), 12544586762248559009ULL);
  bc_rng_seed(&r, 42);
  assert_true(bc_rng_uniform(&r) == (double)(1546998764402558742ULL >> 11) * 0x1.0p-53);
  bc_rng_seed(&r, 42);
  // sqrt(-2 ln(1 - u1)) cos(2 pi u2) of the first two draws, computed in Python.
  assert_true(fabs(bc_rng_normal(&r) - -0.303263064678738) < 1e-12);
}

static void test_rng_deterministic(void **state) {
  (void)state;
  bc_rng a, b, c;
  bc_rng_seed(&a, 7);
  bc_rng_seed(&b, 7);
  bc_rng_seed(&c, 8);
  int same_as_c = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t x = bc_rng_next(&a);
    assert_int_equal(x, bc_rng_next(&b));
    same_as_c += x == bc_rng_next(&c);
  }
  assert_int_equal(same_as_c, 0);
  for (int i = 0; i < 100; i++) assert_true(bc_rng_normal(&a) == bc_rng_normal(&b));
}

static void test_rng_distribution(void **state) {
  (void)state;
  bc_rng r;
  bc_rng_seed(&r, 123);
  enum { N = 200000 };
  double sum = 0, lo = 1, hi = 0;
  for (int i = 0; i < N; i++) {
    double u = bc_rng_uniform(&r);
    assert_true(u >= 0.0 && u < 1.0);
    sum += u;
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  assert_true(fabs(sum / N - 0.5) < 0.005);
  assert_true(lo < 1e-4 && hi > 1 - 1e-4);
  double s1 = 0, s2 = 0;
  for (int i = 0; i < N; i++) {
    double z = bc_rng_normal(&r);
    assert_true(isfinite(z));
    s1 += z;
    s2 += z * z;
  }
  double mean = s1 / N, var = s2 / N - mean * mean;
  assert_true(fabs(mean) < 0.01);
  assert_true(fabs(var - 1.0) < 0.02);
}

// ---------------------------------------------------------------------------
// Random init
// ---------------------------------------------------------------------------
static void test_init_random(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  bc_weights w, w2, w3;
  assert_int_equal(bcW_init_random(ctx, g, 1, &w), BC_OK);
  assert_int_equal(w.n, 5);

  // Xavier: |x| <= a, mean ~ 0, variance ~ a^2/3, extremes near +-a.
  double a = sqrt(6.0 / (32 + 64)), sum = 0, sq = 0, mx = 0;
  for (int i = 0; i < 64 * 32; i++) {
    double x = w.p[0][i];
    assert_true(fabs(x) <= a);
    sum += x;
    sq += x * x;
    mx = fabs(x) > mx ? fabs(x) : mx;
  }
  double mean = sum / 2048, var = sq / 2048 - mean * mean;
  assert_true(fabs(mean) < 0.03 * a);
  assert_true(fabs(var / (a * a / 3) - 1) < 0.1);
  assert_true(mx > 0.98 * a);
  for (int i = 0; i < 64; i++) assert_true(w.p[1][i] == 0.0f);   // bias
  for (int i = 0; i < 32; i++) assert_true(w.p[2][i] == 1.0f);   // LayerNorm weight
  for (int i = 0; i < 32; i++) assert_true(w.p[3][i] == 0.0f);   // LayerNorm bias
  for (int i = 0; i < 96; i++) assert_true(w.p[4][i] == 0.0f);   // in_proj_bias

  assert_int_equal(bcW_init_random(ctx, g, 1, &w2), BC_OK);
  assert_memory_equal(w.p[0], w2.p[0], 2048 * sizeof(float));
  assert_int_equal(bcW_init_random(ctx, g, 2, &w3), BC_OK);
  assert_memory_not_equal(w.p[0], w3.p[0], 2048 * sizeof(float));
  bcW_free(&w);
  bcW_free(&w);  // idempotent
  bcW_free(&w2);
  bcW_free(&w3);
  bc_weights z = {0};
  bcW_free(&z);
  bcW_free(NULL);
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

static void test_init_empty_graph(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcI_new(ctx);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 1, &w), BC_OK);
  assert_int_equal(w.n, 0);
  bcW_free(&w);
  bc_ctx_free(ctx);
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

// Saves w (for graph g) in file order reversed from param order.
static void save_weights(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, const char *path) {
  const char *names[16];
  bc_shape shapes[16];
  const float *data[16];
  for (int i = 0; i < g->nparams; i++) {
    int k = g->nparams - 1 - i;
    names[i] = g->params[k].name;
    shapes[i] = g->params[k].shape;
    data[i] = w->p[k];
  }
  assert_int_equal(bcS_write(ctx, path, g->nparams, names, shapes, data), BC_OK);
}

static void test_load_round_trip(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  bc_weights w, got;
  assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
  save_weights(ctx, g, &w, path);
  assert_int_equal(bcW_load(ctx, g, path, &got), BC_OK);
  assert_int_equal(got.n, g->nparams);
  for (int i = 0; i < g->nparams; i++)
    assert_memory_equal(w.p[i], got.p[i], (size_t)bc_shape_numel(&g->params[i].shape) * sizeof(float));
  bcW_free(&w);
  bcW_free(&got);
  unlink(path);
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

// Half-precision checkpoints load by converting to float32.
static void test_load_half(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcI_new(ctx);
  bc_loc nowhere = {0};
  bcI_add_param(g, "h.weight", shape1(2), nowhere);
  bcI_add_param(g, "b.bias", shape1(2), nowhere);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char data[8] = {0x00, 0x3C, 0x00, 0xC0,   // F16 1, -2
                           0x80, 0x3F, 0x49, 0x40};  // BF16 1, 3.140625
  tu_write_safetensors_raw(path,
            "{\"h.weight\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
            "\"b.bias\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
            data, sizeof data);
  bc_weights w;
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_OK);
  assert_true(w.p[0][0] == 1.0f && w.p[0][1] == -2.0f);
  assert_true(w.p[1][0] == 1.0f && w.p[1][1] == 3.140625f);
  bcW_free(&w);
  unlink(path);
  bc_ctx_free(ctx);
}

// One file with every kind of problem: each is reported, by name.
static void test_load_reports_everything(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  // linear1.weight misshaped, linear1.bias I64, norm1.weight fine,
  // norm1.bias (present with a prefix) and in_proj_bias missing, foo and
  // bar extra.
  size_t dlen = 64 * 16 * 4 + 64 * 8 + 32 * 4 + 3 * 4 + 4 * 4 + 32 * 4;
  unsigned char *data = calloc(1, dlen);
  assert_non_null(data);
  tu_write_safetensors_raw(path,
            "{\"layers.0.linear1.weight\":{\"dtype\":\"F32\",\"shape\":[64,16],\"data_offsets\":[0,4096]},"
            "\"layers.0.linear1.bias\":{\"dtype\":\"I64\",\"shape\":[64],\"data_offsets\":[4096,4608]},"
            "\"layers.0.norm1.weight\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[4608,4736]},"
            "\"foo\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[4736,4748]},"
            "\"bar\":{\"dtype\":\"F16\",\"shape\":[2,4],\"data_offsets\":[4748,4764]},"
            "\"model.layers.0.norm1.bias\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[4764,4892]}}",
            data, dlen);
  free(data);
  bc_weights w = {7, (float **)1};  // garbage in: bcW_load must not free it
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_EINPUT);
  assert_int_equal(w.n, 0);
  assert_null(w.p);
  const char *want[] = {
      "error: tensor 'layers.0.linear1.weight' has shape [64, 16], expected [64, 32]\n",
      "error: tensor 'layers.0.linear1.bias' has dtype I64, expected F32, F16 or BF16\n",
      "error: missing tensor 'layers.0.norm1.bias' (expected shape [32]); the file has "
      "'model.layers.0.norm1.bias' (exported with a different name prefix? try --weights-prefix)\n",
      "error: missing tensor 'layers.0.self_attn.in_proj_bias' (expected shape [96])\n",
      "error: unexpected tensor 'foo' [3] (not one of the graph's 5 parameters)\n",
      "error: unexpected tensor 'bar' [2, 4] (not one of the graph's 5 parameters)\n",
      "error: unexpected tensor 'model.layers.0.norm1.bias' [32] (not one of the graph's 5 parameters)\n",
      "error: 3 tensors in the file are not used by the graph; pass --allow-extra to ignore them\n",
      "error: 7 problems with the weights (the graph has 5 parameters, the file 6 tensors)\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char line[512];
    snprintf(line, sizeof line, "%s: %s", path, want[i]);
    if (!strstr(errs.buf, line)) {
      print_error("missing: %s\nin:\n%s", line, errs.buf);
      fail();
    }
  }
  assert_null(strstr(errs.buf, "norm1.weight'"));  // the good one is not mentioned
  unlink(path);
  bc_ctx_free(ctx);
}

static void test_load_non_finite(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcI_new(ctx);
  bc_loc nowhere = {0};
  bcI_add_param(g, "a.weight", shape2(2, 3), nowhere);
  bcI_add_param(g, "b.bias", shape1(4), nowhere);
  bcI_add_param(g, "c.bias", shape1(2), nowhere);
  float a[6] = {0, 1, 2, 3, 4, NAN}, b[4] = {0, -INFINITY, INFINITY, 0}, c[2] = {1, 2};
  const char *names[] = {"a.weight", "b.bias", "c.bias"};
  bc_shape shapes[] = {shape2(2, 3), shape1(4), shape1(2)};
  const float *data[] = {a, b, c};
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  assert_int_equal(bcS_write(ctx, path, 3, names, shapes, data), BC_OK);
  bc_weights w;
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_EINPUT);
  assert_non_null(strstr(errs.buf, ": error: tensor 'a.weight' has a non-finite value (nan) at index [1, 2]\n"));
  assert_non_null(strstr(errs.buf, ": error: tensor 'b.bias' has a non-finite value (-inf) at index [1]\n"));
  assert_null(strstr(errs.buf, "c.bias"));
  assert_non_null(strstr(errs.buf, "2 problems with the weights"));
  assert_null(w.p);
  unlink(path);
  bc_ctx_free(ctx);
}

static void test_load_bad_file(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  bc_weights w;
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_EIO);
  assert_null(w.p);
  assert_int_equal(w.n, 0);
  assert_non_null(strstr(errs.buf, "cannot open"));
  bcW_free(&w);
  bc_ctx_free(ctx);
}

// Writes the graph's parameters (random init) under names with `prefix`
// prepended, plus `extra` more tensors named "extra.<i>".
static void write_prefixed(bc_ctx *ctx, const bc_graph *g, const char *path, const char *prefix,
                           int extra) {
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 1, &w), BC_OK);
  int n = g->nparams + extra;
  const char **names = calloc((size_t)n, sizeof *names);
  bc_shape *shapes = calloc((size_t)n, sizeof *shapes);
  const float **data = calloc((size_t)n, sizeof *data);
  static const float one = 1;
  for (int i = 0; i < n; i++) {
    names[i] = i < g->nparams ? bc_fmt(ctx, "%s%s", prefix, g->params[i].name) : bc_fmt(ctx, "extra.%d", i);
    shapes[i] = i < g->nparams ? g->params[i].shape : shape1(1);
    data[i] = i < g->nparams ? w.p[i] : &one;
  }
  assert_int_equal(bcS_write(ctx, path, n, names, shapes, data), BC_OK);
  free(names);
  free(shapes);
  free(data);
  bcW_free(&w);
}

// --weights-prefix strips a prefix the file has, or one the graph has;
// --allow-extra ignores unused tensors and counts them.
static void test_prefix_and_allow_extra(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  write_prefixed(ctx, g, path, "model.", 3);
  bc_weights w;
  bc_load_opts o = {.prefix = "model.", .allow_extra = true};
  assert_int_equal(bcW_load_opts(ctx, g, path, &o, &w), BC_OK);
  assert_int_equal(o.ignored, 3);
  bcW_free(&w);
  o.allow_extra = false;
  assert_int_equal(bcW_load_opts(ctx, g, path, &o, &w), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "3 tensors in the file are not used by the graph; pass --allow-extra"));
  assert_null(strstr(errs.buf, "missing tensor"));
  // Without the prefix every parameter is missing, with a hint.
  errs.len = 0, errs.buf[0] = '\0';
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "the file has 'model.layers.0.linear1.weight' (exported with a different name prefix? try --weights-prefix)"));
  // The graph's names carry the prefix and the file's do not: stripped.
  bc_graph *g2 = bcI_new(ctx);
  bc_loc nowhere = {0};
  bcI_add_param(g2, "model.layers.0.norm1.weight", shape1(32), nowhere);
  tu_tmp_path(path, sizeof path, ".safetensors");
  bc_graph *g1 = bcI_new(ctx);
  bcI_add_param(g1, "layers.0.norm1.weight", shape1(32), nowhere);
  write_prefixed(ctx, g1, path, "", 0);
  o = (bc_load_opts){.prefix = "model."};
  assert_int_equal(bcW_load_opts(ctx, g2, path, &o, &w), BC_OK);
  bcW_free(&w);
  unlink(path);
  bc_ctx_free(ctx);
}

// A checkpoint with 10,000 tensors the graph does not use: a few lines, then
// the count and the flag (not 10,000 lines).
static void test_extras_capped(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small_graph(ctx);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  write_prefixed(ctx, g, path, "", 10000);
  bc_weights w;
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_EINPUT);
  int lines = 0;
  for (const char *p = errs.buf; (p = strstr(p, "unexpected tensor")); p++) lines++;
  assert_int_equal(lines, 8);
  assert_non_null(strstr(errs.buf, "10000 tensors in the file are not used by the graph (the first few are listed above); pass --allow-extra to ignore them"));
  assert_non_null(strstr(errs.buf, "10000 problems with the weights"));  // each tensor counts
  unlink(path);
  bc_ctx_free(ctx);
}

// A whole checkpoint at other dims: the per-tensor errors end with one line
// saying which -D would fit.
static void test_dims_diagnosis(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  const char *text = "model m\ndim D = 8\ndim F = 4 * D\ninput x : [2, D]\n"
                     "y = FFN(LayerNorm(x, params=ln), hidden=F, params=(f1, f2))\noutput y\n";
  bc_define d4 = {"D", 4};
  bc_graph *small = bcP_parse_string(ctx, "t.blk", text, &d4, 1);
  bc_graph *big = bcP_parse_string(ctx, "t.blk", text, NULL, 0);
  assert_non_null(small);
  assert_non_null(big);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  write_prefixed(ctx, small, path, "", 0);
  bc_weights w;
  assert_int_equal(bcW_load(ctx, big, path, &w), BC_EINPUT);
  if (!strstr(errs.buf, "note: the checkpoint has D=4, F=16; the graph was built with D=8, F=32: try -D D=4 -D F=16")) {
    print_error("%s", errs.buf);
    fail();
  }
  unlink(path);
  bc_ctx_free(ctx);
}

// 1000 Linear layers 4096 wide: 16.8 billion parameters are refused before
// any allocation, with the size; a higher limit lets the check pass.
static void test_memory_limit(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, "model m\ndim D = 4096\ninput x : [1, D]\nfor i in 0..1000 as l.{i} {\n"
                              "  x = Linear(x, out=D, params=p)\n}\noutput x\n");
  assert_non_null(g);
  assert_int_equal(bcW_check_memory(ctx, g, 0), BC_ENOMEM);
  assert_non_null(strstr(errs.buf, "the run needs 67125248000 bytes (62.5 GiB: 67125248000 bytes of parameters), "
                                   "over the limit of 17179869184 bytes (16.0 GiB); raise it with --max-memory"));
  assert_int_equal(bcW_check_memory(ctx, g, 100LL << 30), BC_OK);
  bc_weights w = {0};
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  assert_int_equal(bcW_load(ctx, g, path, &w), BC_ENOMEM);  // checked before the file is even opened
  assert_null(w.p);
  bc_ctx_free(ctx);
}

// Once planned, the packed copy of the weights (one row: every Linear's
// matrix is packed, 16 x 16 floats) counts too: a limit that covers the
// parameters and the workspace but not the copy is refused, naming it.
static void test_memory_limit_counts_packed(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, "model m\ndim D = 16\ninput x : [1, D]\n"
                              "y = Linear(Linear(x, out=D, params=a), out=D, params=b)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  int64_t params = 2 * (16 * 16 + 16) * 4, packed = bcY_packed_floats(g) * 4;
  assert_int_equal(packed, 2 * 32 * 16 * 4);  // 16 rows padded to one 32-row panel
  int64_t all = params + bcY_workspace_bytes(g) + packed;
  assert_int_equal(bcW_check_memory(ctx, g, all), BC_OK);
  assert_int_equal(bcW_check_memory(ctx, g, all - packed), BC_ENOMEM);
  assert_non_null(strstr(errs.buf, ", 4096 of packed weights), over the limit"));
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng_pinned),
      cmocka_unit_test(test_rng_deterministic),
      cmocka_unit_test(test_rng_distribution),
      cmocka_unit_test(test_init_random),
      cmocka_unit_test(test_init_empty_graph),
      cmocka_unit_test(test_load_round_trip),
      cmocka_unit_test(test_load_half),
      cmocka_unit_test(test_load_reports_everything),
      cmocka_unit_test(test_load_non_finite),
      cmocka_unit_test(test_load_bad_file),
      cmocka_unit_test(test_prefix_and_allow_extra),
      cmocka_unit_test(test_extras_capped),
      cmocka_unit_test(test_dims_diagnosis),
      cmocka_unit_test(test_memory_limit),
      cmocka_unit_test(test_memory_limit_counts_packed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
