// test_jit_ops.c — compiled code for the checkpoint families' nodes (issue
// 10) against the reference interpreter: RMSNorm (alone, fused with an Add,
// on ResiDual's dual stream), gated FFNs, (in, out) layouts, separate and
// packed projections without biases, grouped-query attention and rotary
// positions, at odd sizes, with padding and run-time lengths; Mul with
// broadcasting.
//
// Tolerance: compiled code sums in float32 (BLAS and the runtime's lanes),
// the interpreter in double; over these depths and widths the difference
// stays below 2e-5 * (1 + max|y|) (observed about 1e-6); a wrong index,
// layout or head mapping gives errors of order 1.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "attn_graphs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"
#include "cli.h"

static void check(const char *text, const long *rt, const int32_t *len_values) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_string(ctx, "t.blk", text, NULL, 0);
  if (!g) fail_msg("%s", errs.buf);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
  for (int p = 0; p < w.n; p++) {  // non-trivial norms and biases
    int64_t n = bc_shape_numel(&g->params[p].shape);
    if (g->params[p].shape.rank == 1)
      for (int64_t k = 0; k < n; k++) w.p[p][k] += 0.1f * (float)sin((double)(k + p));
  }
  int n = g->ninputs + g->noutputs;
  void **io = calloc((size_t)n, sizeof *io), **io2 = calloc((size_t)n, sizeof *io2);
  assert_non_null(io);
  assert_non_null(io2);
  bc_rng r;
  bc_rng_seed(&r, 9);
  for (int i = 0; i < n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
    int64_t cnt = bc_shape_numel(&s);
    if (g->vals[v].type == BC_VT_I32) {
      int32_t *l = malloc((size_t)cnt * sizeof *l);
      for (int64_t k = 0; k < cnt; k++) l[k] = len_values[k];
      io[i] = io2[i] = l;
      continue;
    }
    float *a = malloc((size_t)cnt * sizeof *a), *b = malloc((size_t)cnt * sizeof *b);
    for (int64_t k = 0; k < cnt && i < g->ninputs; k++) a[k] = b[k] = (float)bc_rng_normal(&r);
    io[i] = a;
    io2[i] = b;
  }
  assert_int_equal(bcR_run_io(ctx, g, &w, io, rt), BC_OK);
  bc_compiled c;
  bc_emit_opts eo = {0};
  if (bcD_compile(ctx, g, &eo, &c)) fail_msg("%s", errs.buf);
  void *ws = cli_workspace(ctx, g);
  assert_int_equal(c.run((const float *const *)w.p, io2, rt, ws), BC_RUN_OK);
  for (int i = g->ninputs; i < n; i++) {
    bc_shape s = bcI_shape_at(g, &g->vals[g->outputs[i - g->ninputs]].shape, rt);
    int64_t cnt = bc_shape_numel(&s);
    const float *a = io[i], *b = io2[i];
    double mx = 0, err = 0;
    for (int64_t k = 0; k < cnt; k++) {
      mx = fmax(mx, fabs(a[k]));
      err = fmax(err, fabs((double)a[k] - (double)b[k]));
    }
    if (!(err <= 2e-5 * (1 + mx))) fail_msg("max |jit - interp| = %g (max |y| = %g)", err, mx);
  }
  for (int i = 0; i < n; i++) {
    if (io2[i] != io[i]) free(io2[i]);
    free(io[i]);
  }
  free(io);
  free(io2);
  free(ws);
  bcD_free(&c);
  bcW_free(&w);
  bc_ctx_free(ctx);
}

static const char llama[] =
    "model llama\ndim B = 2\ndim T <= 9\ndim D = 48\ndim H = 6\ndim KV = 2\ndim F = 61\n"
    "input x : [B, T, D]\ninput len : lengths[B]\n"
    "for i in 0..2 as layers.{i} {\n"
    "  h = RMSNorm(x, eps=1e-6, params=input_layernorm)\n"
    "  a = Attention(h, heads=H, kv_heads=KV, causal=true, rope=true, rope_theta=500.0,\n"
    "                lengths=len, q=q_proj, k=k_proj, v=v_proj, o=o_proj, bias=false)\n"
    "  x = Add(x, a)\n"
    "  h = RMSNorm(x, eps=1e-6, params=post_attention_layernorm)\n"
    "  f = FFN(h, hidden=F, act=swiglu, gate=gate_proj, up=up_proj, down=down_proj, bias=false)\n"
    "  x = Add(x, f)\n}\n"
    "y = RMSNorm(x, params=norm)\noutput y\n";

static void test_llama_style(void **state) {
  (void)state;
  long rt[1] = {7};
  int32_t len[2] = {4, 7};
  check(llama, rt, len);
  rt[0] = 9;
  int32_t full[2] = {9, 9};
  check(llama, rt, full);
}

static void test_gpt2_style(void **state) {
  (void)state;
  check("model gpt2\ndim B = 2\ndim T = 7\ndim D = 48\ninput x : [B, T, D]\n"
        "for i in 0..2 as h.{i} {\n"
        "  a = Attention(LayerNorm(x, params=ln_1), heads=6, causal=true, qkv=attn.c_attn,\n"
        "                o=attn.c_proj, layout=in_out)\n"
        "  x = Add(x, a)\n"
        "  f = FFN(LayerNorm(x, params=ln_2), hidden=4 * D, act=gelu_tanh, up=mlp.c_fc,\n"
        "          down=mlp.c_proj, layout=in_out)\n"
        "  x = Add(x, f)\n}\n"
        "y = LayerNorm(x, params=ln_f)\noutput y\n",
        NULL, NULL);
}

static void test_bert_style_and_geglu(void **state) {
  (void)state;
  check("model bert\ndim B = 3\ndim T = 5\ndim D = 12\ninput x : [B, T, D]\n"
        "for i in 0..2 as encoder.layer.{i} {\n"
        "  a = Attention(x, heads=3, q=attention.self.query, k=attention.self.key,\n"
        "                v=attention.self.value, o=attention.output.dense)\n"
        "  x = LayerNorm(Add(x, a), eps=1e-12, params=attention.output.LayerNorm)\n"
        "  f = FFN(x, hidden=37, act=geglu, gate=g, up=intermediate.dense, down=output.dense)\n"
        "  x = LayerNorm(Add(x, f), eps=1e-12, params=output.LayerNorm, bias=false)\n}\n"
        "output x\n",
        NULL, NULL);
}

// RMSNorm on ResiDual's dual stream (fuse-dual with rms), Linear in_out,
// and multi-query cross-attention from a packed in_out projection.
static void test_residual_rms_and_cross_mqa(void **state) {
  (void)state;
  check("model rx\ndim S <= 6\ninput x : [2, 5, 16]\ninput mem : [2, S, 16]\n"
        "input ml : lengths[2]\nxa = x\nxd = x\n"
        "for i in 0..2 as layers.{i} {\n"
        "  u = Attention(xa, kv=mem, heads=4, kv_heads=1, kv_lengths=ml, qkv=c, o=p, layout=in_out)\n"
        "  xd = Add(xd, u)\n"
        "  xa = RMSNorm(Add(xa, u), params=n1)\n}\n"
        "z = Linear(Add(xa, RMSNorm(xd, params=nf)), out=9, params=head, layout=in_out, bias=false)\n"
        "output z\n",
        (long[]){6}, (int32_t[]){3, 6});
}

// Mul with broadcasting: the small operand first and second, a graph
// input and a temporary as the small one, Mul(u, u), a same-shape product,
// in place over a dying temporary (and never over the small one), inside a
// layer loop, at a run-time T.
static const char *mul_graph =
    "model m\ndim B = 2\ndim T <= 7\ndim D = 6\ndim N = 4\n"
    "input x : [B, T, D]\ninput g : [T, D]\n"
    "s = Linear(g, out=D, params=gs)\nh = Linear(x, out=D, params=hx)\n"
    "u = Mul(s, h)\nv = Mul(u, u)\nw = Mul(v, g)\nz = Mul(w, x)\n"
    "for i in 0..N as layers.{i} {\n  z = Add(z, Mul(Linear(z, out=D, params=p), g))\n}\n"
    "y = Mul(LayerNorm(z, params=n), x)\noutput y\n";

static void test_mul(void **state) {
  (void)state;
  long rt[1] = {5};
  check(mul_graph, rt, NULL);
  rt[0] = 7;
  check(mul_graph, rt, NULL);
}

// Param ([1], [D]), Add broadcasting a Param (either order, alpha/beta),
// Mul by a Param, Act with every activation (in place over dying
// temporaries), in a layer loop, at a run-time T.
static const char *param_act_graph =
    "model m\ndim B = 2\ndim T <= 7\ndim D = 6\ndim N = 3\ninput x : [B, T, D]\n"
    "for i in 0..N as layers.{i} {\n"
    "  a = Param(shape=[1], params=alpha)\n"
    "  g = Param(shape=[D], params=gamma, init=const(0.7))\n"
    "  x = Add(x, Mul(a, Act(Linear(x, out=D, params=l1), act=gelu)))\n"
    "  x = LayerNorm(Add(Mul(x, g), Act(Linear(x, out=D, params=l2), act=tanh)), params=n)\n"
    "  t = Act(Linear(x, out=D, params=gate), act=sigmoid)\n"
    "  x = Add(Mul(t, Act(x, act=silu)), x, beta=-1)\n"
    "  x = Add(Param(shape=[D], params=bias), Act(x, act=gelu_tanh), alpha=-0.75, beta=1.25)\n"
    "  x = Add(Act(x, act=relu), Param(shape=[1], params=c), beta=2)\n"
    "}\n"
    "y = Add(Linear(x, out=D, params=head), Param(shape=[D], params=b2))\noutput y\n";

// fuse-scale: scaled Adds and AddLayerNorm / AddRMSNorm (the sum kept and
// not), scales [1] and [D] on either operand.
static const char *scaled_graph =
    "model m\ndim B = 2\ndim T <= 7\ndim D = 6\ninput x : [B, T, D]\n"
    "for i in 0..3 as layers.{i} {\n"
    "  a = Param(shape=[1], params=alpha)\n"
    "  x = Add(x, Mul(a, Linear(x, out=D, params=l0)), alpha=0.5)\n"
    "  x = LayerNorm(Add(Mul(x, Param(shape=[D], params=omega)), Linear(x, out=D, params=l1)), params=n1)\n"
    "  h = RMSNorm(Add(x, Mul(Act(Linear(x, out=D, params=l2), act=silu), Param(shape=[D], params=g)), beta=-2), params=n2)\n"
    "  x = Add(Mul(Param(shape=[1], params=c), h), x)\n"
    "}\ny = LayerNorm(x, params=nf)\noutput y\n";

static void test_param_act(void **state) {
  (void)state;
  long rt[1] = {5};
  check(param_act_graph, rt, NULL);
  check(scaled_graph, rt, NULL);
  rt[0] = 7;
  check(param_act_graph, rt, NULL);
  check(scaled_graph, rt, NULL);
}

// Issue 23: QK-norm (per head and over the projection, RMS and LayerNorm,
// self- and cross-attention), sliding windows, soft-caps, scale=, head
// scales; RMSNorm offset= alone and fused; Softcap; geglu_tanh.
static void test_attention_options(void **state) {
  (void)state;
  long rt[1] = {6};
  check(ATTN_OPTS_SELF, rt, (int32_t[]){4, 6});
  rt[0] = 7;
  check(ATTN_OPTS_SELF, rt, (int32_t[]){7, 2});
  check(ATTN_OPTS_PACKED, NULL, NULL);
  check(NORM_OFFSET, NULL, NULL);
  // head_dim= (Qwen3, Gemma 2): heads wider and narrower than D/H.
  rt[0] = 7;
  check(HEAD_DIM_SELF, rt, (int32_t[]){7, 3});
  rt[0] = 5;
  check(HEAD_DIM_SELF, rt, (int32_t[]){2, 5});
  check(HEAD_DIM_CROSS, NULL, NULL);
  // Causal blocks of 64+ rows: each block's GEMMs start at its first row's
  // window (fixed T, unrolled; run-time T with lengths, a loop).
  check("model win\ndim T = 150\ndim D = 8\ninput x : [2, T, D]\n"
        "y = Attention(x, heads=2, causal=true, params=sa, window=10, softcap=3.0)\noutput y\n",
        NULL, NULL);
  long rt2[1] = {140};
  check("model win\ndim T <= 160\ndim D = 8\ninput x : [2, T, D]\ninput len : lengths[2]\n"
        "y = Attention(x, heads=2, causal=true, params=sa, lengths=len, window=7)\noutput y\n",
        rt2, (int32_t[]){140, 3});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_options),
      cmocka_unit_test(test_llama_style),
      cmocka_unit_test(test_gpt2_style),
      cmocka_unit_test(test_bert_style_and_geglu),
      cmocka_unit_test(test_residual_rms_and_cross_mqa),
      cmocka_unit_test(test_mul),
      cmocka_unit_test(test_param_act),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
