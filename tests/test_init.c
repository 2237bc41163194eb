// test_init.c — the graph file's per-parameter initialisation overrides
// (`init=normal(0.02)`, `init.o=...`; docs/language.md "Initialisation
// overrides", docs/training.md "Initialisation").
//
// What is checked: the parse (which parameters an override reaches, the
// arguments' dim expressions and loop variables, `blockc dump` and the
// passes keeping them, the printed spelling reading back exactly); the
// values (normal's mean and std within sampling bounds, uniform's and
// xavier's bounds, exact zeros and ones); that an override beats every
// --init scheme, moves no other parameter, follows the seed, and never
// touches weights loaded from a file; that nothing of it reaches the
// emitted C; and every error, at its line and column.
#include "testutil.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Two layers: packed attention, a norm, an FFN; then a Linear head.
#define LAYERS                                                                         \
  "model m\ndim D = 32\ndim N = 2\ninput x : [1, 4, D]\nh = x\n"                       \
  "for i in 0..N as layers.{i} {\n"                                                    \
  "  a = Attention(h, heads=4, params=sa, init.o=normal(0.03/sqrt(2*N)))\n"            \
  "  h = LayerNorm(Add(h, a), params=ln, init.bias=uniform(0.1*(i+1)))\n"              \
  "  f = FFN(h, hidden=4*D, params=(up, down), init.down=xavier_normal((8*N)^-0.25))\n" \
  "  h = Add(h, f)\n"                                                                  \
  "}\n"                                                                                \
  "y = Linear(h, out=D, params=head, init=zeros, init.bias=ones)\noutput y\n"

// The same graph without any override.
#define LAYERS_PLAIN                                                                   \
  "model m\ndim D = 32\ndim N = 2\ninput x : [1, 4, D]\nh = x\n"                       \
  "for i in 0..N as layers.{i} {\n"                                                    \
  "  a = Attention(h, heads=4, params=sa)\n"                                           \
  "  h = LayerNorm(Add(h, a), params=ln)\n"                                            \
  "  f = FFN(h, hidden=4*D, params=(up, down))\n"                                      \
  "  h = Add(h, f)\n"                                                                  \
  "}\n"                                                                                \
  "y = Linear(h, out=D, params=head)\noutput y\n"

static const bc_param *param(const bc_graph *g, const char *name) {
  int id = bcI_find_param(g, name);
  if (id < 0) {
    print_error("no parameter '%s'\n", name);
    fail();
  }
  return &g->params[id];
}

static void expect_init(const bc_graph *g, const char *name, bc_init_kind kind, double arg) {
  const bc_param *p = param(g, name);
  if (p->init.kind != kind || (kind != BC_INIT_NONE && fabs(p->init.arg - arg) > 1e-15 * arg)) {
    print_error("%s: init kind %d arg %.17g, want %d %.17g\n", name, (int)p->init.kind,
                p->init.arg, (int)kind, arg);
    fail();
  }
}

static void stats(const float *x, int64_t n, double *mean, double *sd, double *mx) {
  double s = 0, q = 0;
  *mx = 0;
  for (int64_t i = 0; i < n; i++) {
    s += x[i];
    q += (double)x[i] * x[i];
    if (fabs(x[i]) > *mx) *mx = fabs(x[i]);
  }
  *mean = s / (double)n;
  *sd = sqrt(q / (double)n - *mean * *mean);
}

// mean within 5 standard errors of 0, sd within 5 % (n >= 4096 samples:
// the sample sd's relative error is about 1/sqrt(2n) = 1.1 %).
static void expect_normal(tu_model *m, const char *name, double sd_want) {
  int64_t n = tu_param_numel(m, name);
  double mean, sd, mx;
  stats(tu_param(m, name), n, &mean, &sd, &mx);
  if (fabs(mean) > 5 * sd_want / sqrt((double)n) || fabs(sd / sd_want - 1) > 0.05 ||
      mx > 9 * sd_want) {
    print_error("%s: mean %g sd %g max %g over %lld; want N(0, %g^2)\n", name, mean, sd, mx,
                (long long)n, sd_want);
    fail();
  }
}

// Every |x| <= a, the largest near a, the variance a^2/3 within 7 %.
static void expect_uniform(tu_model *m, const char *name, double a) {
  int64_t n = tu_param_numel(m, name);
  double mean, sd, mx;
  stats(tu_param(m, name), n, &mean, &sd, &mx);
  if (mx > a * (1 + 1e-7) || mx < 0.95 * a || fabs(sd * sd / (a * a / 3) - 1) > 0.07 ||
      fabs(mean) > 5 * a / sqrt(3.0 * (double)n)) {
    print_error("%s: mean %g sd %g max %g over %lld; want U(-%g, %g)\n", name, mean, sd, mx,
                (long long)n, a, a);
    fail();
  }
}

static void expect_const(tu_model *m, const char *name, float v) {
  const float *x = tu_param(m, name);
  for (int64_t i = 0; i < tu_param_numel(m, name); i++)
    if (x[i] != v) {
      print_error("%s[%lld] = %g, want exactly %g\n", name, (long long)i, x[i], v);
      fail();
    }
}

static bool same(tu_model *a, tu_model *b, const char *name) {
  return !memcmp(tu_param(a, name), tu_param(b, name),
                 (size_t)tu_param_numel(a, name) * sizeof(float));
}

// --- parse -----------------------------------------------------------------

static void test_parse_reaches_params(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, LAYERS);
  assert_non_null(g);
  for (int i = 0; i < 2; i++) {
    char n[128];
#define P(s) (snprintf(n, sizeof n, "layers.%d." s, i), n)
    expect_init(g, P("sa.out_proj.weight"), BC_INIT_NORMAL, 0.03 / sqrt(4.0));
    expect_init(g, P("sa.in_proj_weight"), BC_INIT_NONE, 0);
    expect_init(g, P("sa.in_proj_bias"), BC_INIT_NONE, 0);
    expect_init(g, P("sa.out_proj.bias"), BC_INIT_NONE, 0);
    expect_init(g, P("ln.weight"), BC_INIT_NONE, 0);
    expect_init(g, P("ln.bias"), BC_INIT_UNIFORM, 0.1 * (i + 1));   // the loop variable
    expect_init(g, P("down.weight"), BC_INIT_XAVIER_NORMAL, pow(16.0, -0.25));
    expect_init(g, P("down.bias"), BC_INIT_NONE, 0);
    expect_init(g, P("up.weight"), BC_INIT_NONE, 0);
#undef P
  }
  expect_init(g, "head.weight", BC_INIT_ZEROS, 0);
  expect_init(g, "head.bias", BC_INIT_ONES, 0);
  // init= is every weight of the node, never its biases; init.SEL= wins.
  bc_graph *h = tu_parse(ctx, TU_PRE "a = Attention(x, heads=2, q=q, k=k, v=v, o=o, "
                                     "init=xavier(2), init.k=ones, init.v.bias=normal(3))\n"
                                     "y = FFN(a, hidden=16, act=swiglu, up=u, down=d, gate=gt, "
                                     "init=uniform(0.5), init.gate=zeros)\noutput y\n");
  assert_non_null(h);
  expect_init(h, "q.weight", BC_INIT_XAVIER, 2);
  expect_init(h, "k.weight", BC_INIT_ONES, 0);
  expect_init(h, "v.weight", BC_INIT_XAVIER, 2);
  expect_init(h, "o.weight", BC_INIT_XAVIER, 2);
  expect_init(h, "v.bias", BC_INIT_NORMAL, 3);
  expect_init(h, "q.bias", BC_INIT_NONE, 0);
  expect_init(h, "u.weight", BC_INIT_UNIFORM, 0.5);
  expect_init(h, "d.weight", BC_INIT_UNIFORM, 0.5);
  expect_init(h, "gt.weight", BC_INIT_ZEROS, 0);
  expect_init(h, "gt.bias", BC_INIT_NONE, 0);
  // Norms: init= is the gain; tables: init= is the table.
  bc_graph *t = tu_parse(ctx, "model m\ninput ids : tokens[1, 4]\n"
                              "e = Embedding(ids, vocab=11, dim=8, params=wte, init=normal(0.02))\n"
                              "p = Positions(e, max=4, params=wpe, init=uniform(0.01))\n"
                              "r = RMSNorm(p, params=rn, init=normal(0.1))\n"
                              "y = LayerNorm(r, params=ln, init=zeros, init.bias=ones)\noutput y\n");
  assert_non_null(t);
  expect_init(t, "wte.weight", BC_INIT_NORMAL, 0.02);
  expect_init(t, "wpe.weight", BC_INIT_UNIFORM, 0.01);
  expect_init(t, "rn.weight", BC_INIT_NORMAL, 0.1);
  expect_init(t, "ln.weight", BC_INIT_ZEROS, 0);
  expect_init(t, "ln.bias", BC_INIT_ONES, 0);
  // A tied head: the override of either reader is the parameter's; the
  // same override twice is fine.
  bc_graph *tied = tu_parse(ctx, "model m\ninput ids : tokens[1, 4]\n"
                                 "e = Embedding(ids, vocab=11, dim=8, params=wte)\n"
                                 "y = Linear(e, out=11, bias=false, params=wte, init=normal(0.5))\n"
                                 "output y\n");
  assert_non_null(tied);
  expect_init(tied, "wte.weight", BC_INIT_NORMAL, 0.5);
  assert_non_null(tu_parse(ctx, TU_PRE "h = Linear(x, out=8, params=p, init=normal(0.02))\n"
                                "y = Linear(h, out=8, params=p, init=normal(0.01*2))\noutput y\n"));
  // `init` is not reserved: a value may be called init.
  assert_non_null(tu_parse(ctx, TU_PRE "init = LayerNorm(x, params=n)\ny = Add(init, x)\noutput y\n"));
  bc_ctx_free(ctx);
}

// dump prints every override; the passes (fusion, planning) keep them; the
// printed spelling parses back to the same double.
static void test_dump_and_passes(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, LAYERS);
  assert_non_null(g);
  char path[256];
  FILE *f = fopen(tu_tmp_path(path, sizeof path, ".txt"), "w+");
  assert_non_null(f);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  bcI_dump(g, f);
  fclose(f);
  size_t len;
  char *text = tu_slurp(path, &len);
  assert_non_null(text);
  assert_non_null(strstr(text, "AddLayerNorm"));  // fused: the overrides are the parameters'
  assert_non_null(strstr(text, "    init layers.1.sa.out_proj.weight=normal(0.015)\n"));
  assert_non_null(strstr(text, "    init layers.1.ln.bias=uniform(0.2)\n"));
  assert_non_null(strstr(text, "    init layers.0.down.weight=xavier_normal(0.5)\n"));
  assert_non_null(strstr(text, "    init head.weight=zeros, head.bias=ones\n"));
  free(text);
  unlink(path);
  expect_init(g, "layers.1.ln.bias", BC_INIT_UNIFORM, 0.2);
  bc_graph *c = bcI_clone(g);
  assert_non_null(c);
  expect_init(c, "layers.0.sa.out_proj.weight", BC_INIT_NORMAL, 0.015);
  // bcW_init_str reads back exactly, whatever the double.
  const double args[] = {0.02 / sqrt(12.0), 1.0 / 3, 0.1, 2.5e-7, 1e37, 0.87};
  for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
    bc_init in = {.kind = BC_INIT_NORMAL, .arg = args[i]};
    char spec[64];
    bcW_init_str(&in, spec, sizeof spec);
    const char *text2 = bc_fmt(ctx, TU_PRE "y = Linear(x, out=8, params=p, init=%s)\noutput y\n", spec);
    bc_graph *r = tu_parse(ctx, text2);
    assert_non_null(r);
    assert_true(param(r, "p.weight")->init.arg == args[i]);
  }
  char b[64];
  assert_string_equal(bcW_init_str(&(bc_init){BC_INIT_XAVIER, 1.0, {0}}, b, sizeof b), "xavier");
  assert_string_equal(bcW_init_str(&(bc_init){BC_INIT_XAVIER, 0.5, {0}}, b, sizeof b), "xavier(0.5)");
  assert_string_equal(bcW_init_str(&(bc_init){BC_INIT_ONES, 0.0, {0}}, b, sizeof b), "ones");
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

// --- values ------------------------------------------------------------------

#define STATS_G                                                                            \
  "model m\ndim D = 128\ninput x : [1, 2, D]\n"                                           \
  "a = Linear(x, out=D, params=n1, init=normal(0.05))\n"                                  \
  "b = Linear(a, out=D, params=u1, init=uniform(0.3), init.bias=normal(2))\n"             \
  "c = Linear(b, out=64, params=xa, init=xavier(2))\n"                                    \
  "d = Linear(c, out=D, params=xn, init=xavier_normal(0.5), init.bias=uniform(1e-3))\n"   \
  "e = LayerNorm(d, params=ln, init=zeros, init.bias=ones)\n"                             \
  "y = Linear(e, out=D, params=z, init=ones, init.bias=zeros)\noutput y\n"

static void test_statistics(void **state) {
  (void)state;
  tu_model *m = tu_model_new(STATS_G, NULL, 0, 3);
  expect_normal(m, "n1.weight", 0.05);
  expect_const(m, "n1.bias", 0.0f);                                // not overridden: the scheme's 0
  expect_uniform(m, "u1.weight", 0.3);
  expect_uniform(m, "xa.weight", 2 * sqrt(6.0 / (64 + 128)));     // gain * sqrt(6/(fan_in+fan_out))
  expect_normal(m, "xn.weight", 0.5 * sqrt(2.0 / (128 + 64)));
  expect_const(m, "ln.weight", 0.0f);
  expect_const(m, "ln.bias", 1.0f);
  expect_const(m, "z.weight", 1.0f);
  expect_const(m, "z.bias", 0.0f);
  // Biases: 128 samples; only bounds and scale.
  double mean, sd, mx;
  stats(tu_param(m, "u1.bias"), 128, &mean, &sd, &mx);
  assert_true(sd > 1.5 && sd < 2.5);
  stats(tu_param(m, "xn.bias"), 128, &mean, &sd, &mx);
  assert_true(mx <= 1e-3 && mx > 0.9e-3);
  tu_model_free(m);
}

// An override beats every scheme: the overridden tensors are bit-identical
// under xavier, torch and gpt2, and equal bcW_init_random's.
static void test_beats_schemes(void **state) {
  (void)state;
  tu_model *x = tu_model_new(LAYERS, NULL, 0, 11);
  tu_model *t = tu_model_new(LAYERS, NULL, 0, 11);
  tu_model *p = tu_model_new(LAYERS, NULL, 0, 11);
  tu_model *plain = tu_model_new(LAYERS_PLAIN, NULL, 0, 11);
  bcW_free(&t->w);
  assert_int_equal(tr_init_weights(t->ctx, t->g, CLI_INIT_TORCH, 11, &t->w), BC_OK);
  bcW_free(&p->w);
  assert_int_equal(tr_init_weights(p->ctx, p->g, CLI_INIT_GPT2, 11, &p->w), BC_OK);
  const char *over[] = {"layers.0.sa.out_proj.weight", "layers.1.ln.bias", "layers.0.down.weight",
                        "head.weight", "head.bias"};
  for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
    assert_true(same(x, t, over[i]));
    assert_true(same(x, p, over[i]));
  }
  expect_normal(p, "layers.1.sa.out_proj.weight", 0.015);  // gpt2's would be 0.02/sqrt(4)
  const float *lb = tu_param(t, "layers.1.ln.bias");      // torch would give 0
  double mean, sd, mx;
  stats(lb, 32, &mean, &sd, &mx);
  assert_true(mx <= 0.2 && sd > 0.05);
  expect_const(t, "head.weight", 0.0f);                   // torch would give kaiming
  expect_const(p, "head.bias", 1.0f);
  expect_normal(t, "layers.0.down.weight", pow(16.0, -0.25) * sqrt(2.0 / (32 + 128)));
  // The scheme still fills the rest: gpt2's in_proj is N(0, 0.02^2).
  expect_normal(p, "layers.0.sa.in_proj_weight", 0.02);
  // The other parameters are those of the graph without overrides, bit for bit.
  const char *rest[] = {"layers.0.sa.in_proj_weight", "layers.1.sa.in_proj_bias",
                        "layers.0.up.weight", "layers.1.up.bias", "layers.1.down.bias",
                        "layers.0.ln.weight"};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) assert_true(same(x, plain, rest[i]));
  bc_weights tp;
  assert_int_equal(tr_init_weights(plain->ctx, plain->g, CLI_INIT_TORCH, 11, &tp), BC_OK);
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) {
    int id = bcI_find_param(plain->g, rest[i]);
    assert_memory_equal(tp.p[id], tu_param(t, rest[i]),
                        (size_t)tu_param_numel(t, rest[i]) * sizeof(float));
  }
  bcW_free(&tp);
  tu_model_free(x);
  tu_model_free(t);
  tu_model_free(p);
  tu_model_free(plain);
}

// Param (issue 23): seeded at ones under every scheme (any rank) unless
// init= says otherwise; const(c) is exact under every scheme and prints
// back as written.
static void test_param_init(void **state) {
  (void)state;
  static const char *g =
      "model m\ndim T = 3\ndim D = 8\ninput x : [2, T, D]\n"
      "y = Add(Mul(x, Param(shape=[D], params=gamma)), Param(shape=[T, D], params=pe))\n"
      "y = Add(y, Mul(Param(shape=[1], params=alpha, init=zeros), Linear(y, out=D, params=l)))\n"
      "y = Mul(y, Param(shape=[D], params=ls, init=const(-2.5e-4)))\noutput y\n";
  for (int scheme = 0; scheme < 3; scheme++) {
    tu_model *m = tu_model_new(g, NULL, 0, 5);
    if (scheme) {
      bcW_free(&m->w);
      assert_int_equal(tr_init_weights(m->ctx, m->g, scheme == 1 ? CLI_INIT_TORCH : CLI_INIT_GPT2,
                                       5, &m->w), BC_OK);
    }
    expect_const(m, "gamma", 1.0f);
    expect_const(m, "pe", 1.0f);
    expect_const(m, "alpha", 0.0f);
    expect_const(m, "ls", (float)-2.5e-4);
    tu_model_free(m);
  }
  char buf[64];
  bc_init in = {.kind = BC_INIT_CONST, .arg = -2.5e-4};
  assert_string_equal(bcW_init_str(&in, buf, sizeof buf), "const(-0.00025)");
  in.arg = 0.1;
  assert_string_equal(bcW_init_str(&in, buf, sizeof buf), "const(0.1)");
}

// init.q / init.k / init.v of a packed projection: each block as a matrix
// of its own ([rows, D], its own fans and stream); the rest of the packed
// matrix keeps init= (or the scheme); columns with layout=in_out.
static void test_packed_blocks(void **state) {
  (void)state;
  const char *g = "model m\ndim D = 64\ninput x : [1, 4, D]\n"
                  "a = Attention(x, heads=4, kv_heads=2, params=sa, init=normal(0.5), "
                  "init.k=zeros, init.v=xavier_normal(2), init.k.bias=ones, init.v.bias=uniform(0.5))\n"
                  "y = Attention(a, heads=4, kv_heads=2, qkv=c, o=o, layout=in_out, "
                  "init.q=ones, init.v=uniform(0.25))\noutput y\n";
  tu_model *m = tu_model_new(g, NULL, 0, 9);
  const bc_param *p = param(m->g, "sa.in_proj_weight");
  assert_int_equal(p->part[1].kind, BC_INIT_ZEROS);
  // init.k.bias / init.v.bias: the K and V ranges of the packed bias
  // [D + 2 kvd] = [128]; the Q range keeps the scheme's zeros.
  const bc_param *pb = param(m->g, "sa.in_proj_bias");
  assert_int_equal(pb->part[1].kind, BC_INIT_ONES);
  assert_int_equal(pb->part_at[2], 96);
  assert_int_equal(pb->part_n[2], 32);
  const float *bias = tu_param(m, "sa.in_proj_bias");
  for (int i = 0; i < 64; i++) assert_true(bias[i] == 0.0f);
  for (int i = 64; i < 96; i++) assert_true(bias[i] == 1.0f);
  double bs = 0;
  for (int i = 96; i < 128; i++) {
    assert_true(fabs(bias[i]) <= 0.5f && bias[i] != 0.0f);
    bs += (double)bias[i] * bias[i];
  }
  assert_true(fabs(bs / 32 / (0.25 / 3) - 1) < 0.5);  // uniform(0.5): variance a^2 / 3
  assert_int_equal(p->part_at[1], 64);
  assert_int_equal(p->part_n[1], 32);
  assert_int_equal(p->part_at[2], 96);
  assert_false(p->part_cols);
  const float *w = tu_param(m, "sa.in_proj_weight");  // [64 + 2*32, 64]
  double mean, sd, mx;
  stats(w, 64 * 64, &mean, &sd, &mx);                     // q: init=normal(0.5) over the whole
  assert_true(fabs(sd / 0.5 - 1) < 0.05);
  for (int i = 64 * 64; i < 96 * 64; i++) assert_true(w[i] == 0.0f);   // k
  stats(w + 96 * 64, 32 * 64, &mean, &sd, &mx);           // v: xavier_normal(2) of [32, 64]
  assert_true(fabs(sd / (2 * sqrt(2.0 / 96)) - 1) < 0.05);
  // in_out: [D, D + 2 kvd] = [64, 128]; q is columns 0..63, v columns 96..127.
  const float *c = tu_param(m, "c.weight");
  for (int r = 0; r < 64; r++) {
    for (int k = 0; k < 64; k++) assert_true(c[r * 128 + k] == 1.0f);
    for (int k = 96; k < 128; k++) assert_true(fabs(c[r * 128 + k]) <= 0.25f);
    for (int k = 64; k < 96; k++)  // k: the scheme's xavier over the whole [64, 128]
      assert_true(fabs(c[r * 128 + k]) <= sqrt(6.0 / 192) && c[r * 128 + k] != 1.0f);
  }
  double s = 0;
  for (int r = 0; r < 64; r++)
    for (int k = 96; k < 128; k++) s += (double)c[r * 128 + k] * c[r * 128 + k];
  assert_true(fabs(s / (64 * 32) / (0.25 * 0.25 / 3) - 1) < 0.1);
  // Beats --init gpt2 too, block by block.
  bc_weights gw;
  assert_int_equal(tr_init_weights(m->ctx, m->g, CLI_INIT_GPT2, 9, &gw), BC_OK);
  int id = bcI_find_param(m->g, "c.weight");
  for (int r = 0; r < 64; r++) {
    assert_memory_equal(gw.p[id] + r * 128, c + r * 128, 64 * sizeof(float));
    assert_memory_equal(gw.p[id] + r * 128 + 96, c + r * 128 + 96, 32 * sizeof(float));
  }
  bcW_free(&gw);
  // dump names the blocks.
  char path[256];
  FILE *f = fopen(tu_tmp_path(path, sizeof path, ".txt"), "w+");
  assert_non_null(f);
  bcI_dump(m->g, f);
  fclose(f);
  size_t len;
  char *text = tu_slurp(path, &len);
  assert_non_null(strstr(text, "    init sa.in_proj_weight=normal(0.5), sa.in_proj_weight[k]=zeros, "
                               "sa.in_proj_weight[v]=xavier_normal(2), sa.in_proj_bias[k]=ones, "
                               "sa.in_proj_bias[v]=uniform(0.5), sa.out_proj.weight=normal(0.5)\n"));
  assert_non_null(strstr(text, "    init c.weight[q]=ones, c.weight[v]=uniform(0.25)\n"));
  free(text);
  unlink(path);
  tu_model_free(m);
}

// docs/language.md's DeepNet example: beta = (8N)^(-1/4) on v, o and the
// FFN, gain 1 on q and k, each as xavier_normal of its own [D, D] matrix.
static void test_deepnet_example(void **state) {
  (void)state;
  tu_model *m = tu_model_new(
      "model deep\ndim D = 64\ndim H = 4\ndim F = 4 * D\ndim N = 6\ninput x : [1, 8, D]\n"
      "for i in 0..N as layers.{i} {\n"
      "  a = Attention(x, heads=H, params=self_attn, init.q=xavier_normal, init.k=xavier_normal,\n"
      "                init.v=xavier_normal((8*N)^-0.25), init.o=xavier_normal((8*N)^-0.25))\n"
      "  x = LayerNorm(Add(x, a, alpha=(2*N)^0.25), params=norm1)\n"
      "  f = FFN(x, hidden=F, params=(linear1, linear2), init=xavier_normal((8*N)^-0.25))\n"
      "  x = LayerNorm(Add(x, f, alpha=(2*N)^0.25), params=norm2)\n"
      "}\noutput x\n", NULL, 0, 4);
  double beta = pow(48.0, -0.25), mean, sd, mx;
  const float *w = tu_param(m, "layers.5.self_attn.in_proj_weight");
  const double want[3] = {sqrt(2.0 / 128), sqrt(2.0 / 128), beta * sqrt(2.0 / 128)};
  for (int j = 0; j < 3; j++) {
    stats(w + j * 64 * 64, 64 * 64, &mean, &sd, &mx);
    if (fabs(sd / want[j] - 1) > 0.05) {
      print_error("block %d: sd %g, want %g\n", j, sd, want[j]);
      fail();
    }
  }
  expect_normal(m, "layers.5.self_attn.out_proj.weight", beta * sqrt(2.0 / 128));
  expect_normal(m, "layers.0.linear1.weight", beta * sqrt(2.0 / (256 + 64)));
  expect_normal(m, "layers.3.linear2.weight", beta * sqrt(2.0 / (256 + 64)));
  expect_const(m, "layers.2.linear1.bias", 0.0f);
  expect_const(m, "layers.2.norm1.weight", 1.0f);
  tu_model_free(m);
}

// The CLI: `blockc weights` writes the overridden values (init_ok.blk: the
// head's weight zeros, its bias ones; the rest seeded).
static void test_cli_weights(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  char err[4096];
  char *argv[] = {(char *)tu_blockc(), "weights", "tests/bad/init_ok.blk", "-o", path, "--seed", "2", NULL};
  assert_int_equal(tu_spawn(argv, NULL, 0, err, sizeof err), 0);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_file(ctx, "tests/bad/init_ok.blk", NULL, 0);
  assert_non_null(g);
  bc_weights fw, sw;
  assert_int_equal(bcW_load(ctx, g, path, &fw), BC_OK);
  assert_int_equal(bcW_init_random(ctx, g, 2, &sw), BC_OK);
  for (int i = 0; i < g->nparams; i++)
    assert_memory_equal(fw.p[i], sw.p[i], (size_t)bc_shape_numel(&g->params[i].shape) * sizeof(float));
  int hw = bcI_find_param(g, "fc.weight"), hb = bcI_find_param(g, "fc.bias");
  for (int k = 0; k < 16; k++) assert_true(fw.p[hw][k] == 0.0f);
  for (int k = 0; k < 4; k++) assert_true(fw.p[hb][k] == 1.0f);
  bcW_free(&fw);
  bcW_free(&sw);
  unlink(path);
  bc_ctx_free(ctx);
}

static void test_seed(void **state) {
  (void)state;
  tu_model *a = tu_model_new(STATS_G, NULL, 0, 5);
  tu_model *b = tu_model_new(STATS_G, NULL, 0, 5);
  tu_model *c = tu_model_new(STATS_G, NULL, 0, 6);
  const char *drawn[] = {"n1.weight", "u1.weight", "u1.bias", "xa.weight", "xn.weight", "xn.bias"};
  for (size_t i = 0; i < sizeof drawn / sizeof *drawn; i++) {
    assert_true(same(a, b, drawn[i]));
    assert_false(same(a, c, drawn[i]));
  }
  // Two parameters with the same override draw different values (each its own stream).
  tu_model *d = tu_model_new(TU_PRE "a = Linear(x, out=8, params=p, init=normal(1))\n"
                                    "y = Linear(a, out=8, params=q, init=normal(1))\noutput y\n",
                             NULL, 0, 5);
  assert_memory_not_equal(tu_param(d, "p.weight"), tu_param(d, "q.weight"), 64 * sizeof(float));
  tu_model_free(a);
  tu_model_free(b);
  tu_model_free(c);
  tu_model_free(d);
}

// Weights from a file are the file's, overrides or not.
static void test_file_untouched(void **state) {
  (void)state;
  tu_model *m = tu_model_new(STATS_G, NULL, 0, 1);
  const char *names[16];
  bc_shape shapes[16];
  const float *data[16];
  float *vals[16];
  for (int i = 0; i < m->g->nparams; i++) {
    int64_t n = bc_shape_numel(&m->g->params[i].shape);
    vals[i] = malloc((size_t)n * sizeof(float));
    assert_non_null(vals[i]);
    for (int64_t k = 0; k < n; k++) vals[i][k] = 0.25f + (float)i;
    names[i] = m->g->params[i].name, shapes[i] = m->g->params[i].shape, data[i] = vals[i];
  }
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  assert_int_equal(bcS_write(m->ctx, path, m->g->nparams, names, shapes, data), BC_OK);
  bc_weights w;
  assert_int_equal(bcW_load(m->ctx, m->g, path, &w), BC_OK);
  for (int i = 0; i < m->g->nparams; i++) {
    assert_memory_equal(w.p[i], vals[i],
                        (size_t)bc_shape_numel(&m->g->params[i].shape) * sizeof(float));
    free(vals[i]);
  }
  bcW_free(&w);
  unlink(path);
  tu_model_free(m);
}

// The emitted C holds nothing of the overrides (they are the weights' business).
static void test_not_in_emitted_c(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, LAYERS);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  bc_graph *plain = tu_parse(ctx, LAYERS_PLAIN);
  assert_non_null(plain);
  assert_int_equal(bcO_run_until(plain, NULL), BC_OK);
  bc_emit_opts o = {.backward = true};
  char *c = bcE_emit_c(ctx, g, &o), *cp = bcE_emit_c(ctx, plain, &o);
  assert_non_null(c);
  assert_non_null(cp);
  assert_null(strstr(c, "normal("));
  assert_null(strstr(c, "xavier"));
  assert_null(strstr(c, "init="));
  assert_string_equal(c, cp);  // the same C as the graph without overrides
  bc_ctx_free(ctx);
}

// --- errors --------------------------------------------------------------------

#define LIN(a) TU_PRE "y = Linear(x, out=8, params=p, " a ")\noutput y\n"

static void test_errors(void **state) {
  (void)state;
  // Line 6 is the call; `init` starts at column 32.
  tu_expect_error(LIN("init=kaiming"), 6, 37, "unknown init scheme 'kaiming'; init= takes zeros, ones");
  tu_expect_error(LIN("init=nromal(1)"), 6, 37, "(did you mean 'normal'?)");
  tu_expect_error(LIN("init=3"), 6, 37, "unknown init scheme '3'");
  tu_expect_error(LIN("init=normal(-0.5)"), 6, 44, "normal: the standard deviation must be positive, got -0.5");
  tu_expect_error(LIN("init=uniform(0)"), 6, 45, "uniform: the bound a of U(-a, a) must be positive, got 0 (init=zeros sets zeros)");
  tu_expect_error(LIN("init=xavier(-1)"), 6, 44, "xavier: the gain must be positive");
  tu_expect_error(LIN("init=normal(1e38)"), 6, 44, "over the limit of 1e+37");
  tu_expect_error(LIN("init=normal()"), 6, 44, "normal(...) takes one argument (the standard deviation), found none");
  tu_expect_error(LIN("init=normal(1, 2)"), 6, 45, "takes one argument (the standard deviation), found more");
  tu_expect_error(LIN("init=normal"), 6, 43, "expected '(' after 'normal' (it takes one argument)");
  tu_expect_error(LIN("init=zeros(1)"), 6, 42, "zeros takes no argument");
  tu_expect_error(LIN("init=ones()"), 6, 41, "ones takes no argument");
  tu_expect_error(LIN("init=normal(x)"), 6, 44, "'x' is a value, not a dim");
  tu_expect_error(LIN("init=normal(Q)"), 6, 44, "undefined dim 'Q'");
  tu_expect_error(LIN("init=normal(1/0)"), 6, 45, "division by zero");
  tu_expect_error("model m\ndim T <= 8\ninput x : [1, T, 8]\n"
                  "y = Linear(x, out=8, params=p, init=normal(T))\noutput y\n",
                  4, 44, "run-time dim 'T' has no value at compile time");
  tu_expect_error(TU_PRE "y = Add(x, x, init=zeros)\noutput y\n", 6, 15,
                  "Add has no parameters: init= sets the initial values of a node's weights");
  tu_expect_error(TU_PRE "y = Dropout(x, init.x=zeros)\noutput y\n", 6, 16, "Dropout has no parameters");
  tu_expect_error(TU_PRE "y = LayerNorm(x, affine=false, init=ones)\noutput y\n", 6, 32,
                  "this LayerNorm has no parameters (affine=false): init= has nothing to set");
  tu_expect_error(TU_PRE "y = Positions(x, kind=sinusoidal, init=zeros)\noutput y\n", 6, 35,
                  "this Positions has no parameters (kind=sinusoidal)");
  tu_expect_error(LIN("init.w=zeros"), 6, 32, "unknown init selector 'w' for this Linear; it takes init, init.weight, init.bias");
  tu_expect_error(LIN("bias=false, init.bias=zeros"), 6, 44, "unknown init selector 'bias' for this Linear; it takes init, init.weight");
  tu_expect_error(TU_PRE "y = FFN(x, hidden=8, params=(a, b), init.dwn=zeros)\noutput y\n", 6, 37,
                  "unknown init selector 'dwn' for this FFN (did you mean 'down'?); it takes init, init.up, init.up.bias, init.down, init.down.bias");
  tu_expect_error(TU_PRE "y = FFN(x, hidden=8, params=(a, b), init.gate=zeros)\noutput y\n", 6, 37,
                  "unknown init selector 'gate'");
  tu_expect_error(TU_PRE "y = Attention(x, heads=2, params=a, bias=false, init.v.bias=zeros)\noutput y\n",
                  6, 49, "unknown init selector 'v.bias' for this Attention; it takes init, init.qkv, "
                  "init.o, init.q, init.k, init.v");
  tu_expect_error(TU_PRE "y = Attention(x, heads=2, params=a, init.k.bias=xavier)\noutput y\n", 6, 49,
                  "xavier needs a matrix (it is sized by fan_in + fan_out): 'a.in_proj_bias' is [24]");
  tu_expect_error(TU_PRE "h = Attention(x, heads=2, params=a, init.v=zeros)\n"
                  "y = Attention(h, heads=2, params=a, init.v=ones)\noutput y\n", 7, 44,
                  "parameter 'a.in_proj_weight' (block v) gets init=ones here but init=zeros earlier");
  tu_expect_error(TU_PRE "y = Attention(x, heads=2, q=q, k=k, v=v, o=o, init.qkv=zeros)\noutput y\n", 6, 47,
                  "it takes init, init.q, init.q.bias, init.o, init.o.bias, init.k, init.k.bias, init.v, init.v.bias");
  tu_expect_error(LIN("init.=ones"), 6, 37, "expected an init selector after 'init.'");
  tu_expect_error(LIN("init.weight.x.y=ones"), 6, 45, "expected '=' after the init selector");
  tu_expect_error(LIN("init=ones, init=zeros"), 6, 43, "init= given twice");
  tu_expect_error(LIN("init.bias=ones, init.bias=zeros"), 6, 48, "init.bias= given twice");
  tu_expect_error(LIN("init.bias=xavier"), 6, 42, "xavier needs a matrix (it is sized by fan_in + fan_out): 'p.bias' is [8]");
  tu_expect_error(TU_PRE "y = RMSNorm(x, params=n, init=xavier_normal(2))\noutput y\n", 6, 31,
                  "xavier_normal(2) needs a matrix");
  tu_expect_error(TU_PRE "h = Linear(x, out=8, params=p, init=normal(0.02))\n"
                  "y = Linear(h, out=8, params=p, init.weight=uniform(0.02))\noutput y\n", 7, 44,
                  "parameter 'p.weight' gets init=uniform(0.02) here but init=normal(0.02) earlier");
  tu_expect_error(TU_PRE "h = x\nfor i in 0..2 {\n  h = Linear(h, out=8, params=p, init=normal(0.1*(i+1)))\n}\n"
                  "output h\n", 8, 39, "gets init=normal(0.2) here but init=normal(0.1) earlier");
  tu_expect_error(LIN("init=ones; system(\"id\")"), 6, 41, "unexpected character ';'");
  tu_expect_error(LIN("foo=1"), 6, 32, "Linear takes: out, params, bias, layout, init");
  tu_expect_error(LIN("init=ones, x"), 6, 43, "positional argument after attributes");
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_parse_reaches_params),
      cmocka_unit_test(test_dump_and_passes),
      cmocka_unit_test(test_statistics),
      cmocka_unit_test(test_beats_schemes),
      cmocka_unit_test(test_packed_blocks),
      cmocka_unit_test(test_param_init),
      cmocka_unit_test(test_deepnet_example),
      cmocka_unit_test(test_cli_weights),
      cmocka_unit_test(test_seed),
      cmocka_unit_test(test_file_untouched),
      cmocka_unit_test(test_not_in_emitted_c),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(quick, NULL, NULL);
}
