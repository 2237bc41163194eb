// test_parse.c — the lexer, the parser and every front-end error message.
//
// Error tests assert both the message and its location (file:line:col), so
// a regression that reports the right thing in the wrong place fails too.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

// testutil.h's minimal valid prelude, which most error cases build on.
#define PRE TU_PRE

// Issue 23's options: their errors, with carets.
static void test_errors_attention_options(void **state) {
  (void)state;
  tu_expect_error(PRE "y = Attention(x, heads=2, causal=true, params=sa, qk_norm=foo)\noutput y\n",
                  6, 59, "unknown qk_norm 'foo'; choices are rms");
  tu_expect_error(PRE "y = Attention(x, heads=2, causal=true, params=sa, window=0)\noutput y\n",
                  6, 58, "window must be positive, got 0");
  tu_expect_error(PRE "y = Attention(x, heads=2, causal=true, params=sa, window=-3)\noutput y\n",
                  6, 58, "window must be positive");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, window=2)\noutput y\n", 6, 45,
                  "window= needs causal=true");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, softcap=0)\noutput y\n", 6, 46,
                  "softcap=0 must be a positive finite number");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, softcap=-2.5)\noutput y\n", 6, 46,
                  "softcap=-2.5 must be a positive");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, scale=-1)\noutput y\n", 6, 44,
                  "scale=-1 must be a positive finite number");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, q_norm=qn)\noutput y\n", 6, 45,
                  "q_norm= needs qk_norm=rms or qk_norm=layernorm");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, qk_norm_per_head=false)\noutput y\n",
                  6, 55, "qk_norm_per_head= needs qk_norm=");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, qk_norm=rms, qk_norm_eps=0)\noutput y\n",
                  6, 63, "qk_norm_eps must be positive, got 0");
  tu_expect_error(PRE "y = Attention(x, heads=2, params=sa, head_scale=1)\noutput y\n", 6, 49,
                  "head_scale must be true or false");
  tu_expect_error(PRE "y = LayerNorm(x, offset=1, params=n)\noutput y\n", 6, 18,
                  "unknown attribute 'offset' for LayerNorm");
  tu_expect_error(PRE "y = Softcap(x, cap=0)\noutput y\n", 6, 20,
                  "Softcap cap=0 must be a positive finite number");
  tu_expect_error(PRE "y = Softcap(x, cap=-1)\noutput y\n", 6, 20, "must be a positive");
  tu_expect_error(PRE "y = Softcap(x)\noutput y\n", 6, 5, "Softcap needs the attribute 'cap'");
  tu_expect_error(PRE "y = FFN(x, hidden=4, act=geglu_tan, gate=g, up=u, down=d)\noutput y\n", 6,
                  26, "unknown activation");
}

// Their parameters: Hugging Face's q_norm / k_norm beside the projections
// (per head [dh], or [D] and [KV*dh] over the projection; LayerNorm's
// biases), given paths, head_scale [H] beside o (or under params=).
static void test_attention_option_params(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, "model m\ndim D = 12\ninput x : [1, 4, D]\n"
                              "for i in 0..2 as model.layers.{i} {\n"
                              "  x = Attention(x, heads=3, kv_heads=1, causal=true, bias=false,\n"
                              "      q=self_attn.q_proj, k=self_attn.k_proj, v=self_attn.v_proj,\n"
                              "      o=self_attn.o_proj, qk_norm=rms, head_scale=true)\n"
                              "}\n"
                              "y = Attention(x, heads=2, params=sa, qk_norm=layernorm, "
                              "qk_norm_per_head=false, window=2, causal=true)\n"
                              "z = Attention(y, heads=2, qkv=c, o=p, qk_norm=rms, q_norm=qq, k_norm=kk, "
                              "qk_norm_per_head=false, kv_heads=1)\n"
                              "output z\n");
  if (!g) fail_msg("%s", e.buf);
  static const struct { const char *name; int64_t n; } want[] = {
      {"model.layers.1.self_attn.q_norm.weight", 4}, {"model.layers.1.self_attn.k_norm.weight", 4},
      {"model.layers.1.self_attn.head_scale", 3},   {"sa.q_norm.weight", 12},
      {"sa.q_norm.bias", 12},                       {"sa.k_norm.weight", 12},
      {"sa.k_norm.bias", 12},                       {"qq.weight", 12},
      {"kk.weight", 6}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    int found = -1;
    for (int p = 0; p < g->nparams; p++)
      if (!strcmp(g->params[p].name, want[k].name)) found = p;
    if (found < 0) fail_msg("no parameter %s", want[k].name);
    assert_int_equal(g->params[found].shape.rank, 1);
    assert_int_equal(g->params[found].shape.d[0], want[k].n);
  }
  const bc_node *n = &g->nodes[g->nnodes - 2];
  assert_int_equal(n->qk_norm, 2);
  assert_false(n->qk_norm_per_head);
  assert_int_equal(n->window, 2);
  assert_true(g->nodes[0].head_scale && g->nodes[0].qk_norm_per_head);
  bc_ctx_free(ctx);
}

// head_dim= (a head width independent of D, Qwen3 and Gemma 2): its errors
// with carets, then the parameter shapes it gives: q [H*K, D], k and v
// [KV*K, D], o [D, H*K], q_norm / k_norm [K] per head or [H*K] / [KV*K]
// over the projection, head_scale [H]; head_dim = D/H is the default graph.
static void test_attention_head_dim(void **state) {
  (void)state;
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=0, q=a.q, k=a.k, v=a.v, o=a.o)\noutput y\n",
                  6, 36, "head_dim must be positive, got 0");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=-4, q=a.q, k=a.k, v=a.v, o=a.o)\noutput y\n",
                  6, 36, "head_dim must be positive, got -4");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=2.5, q=a.q, k=a.k, v=a.v, o=a.o)\noutput y\n",
                  6, 36, "expected an integer, found 2.5");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=3, params=sa)\noutput y\n", 6, 36,
                  "head_dim=3 with heads=2 makes the query projection 6 wide, not D=8; a packed "
                  "projection (params=) needs head_dim = D/heads");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=16, qkv=c, o=p)\noutput y\n", 6, 36,
                  "a packed projection (qkv=) needs head_dim = D/heads; give separate projections");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=3, rope=true, q=a.q, k=a.k, v=a.v, "
                  "o=a.o)\noutput y\n", 6, 44, "rope=true needs an even head width; head_dim = 3");
  tu_expect_error(PRE "y = Attention(x, heads=3, q=a.q, k=a.k, v=a.v, o=a.o)\noutput y\n", 6, 24,
                  "model width D=8 is not divisible by heads=3 (or give the head width as head_dim=)");
  tu_expect_error(PRE "y = Attention(x, heads=2, head_dim=1099511627776, q=a.q, k=a.k, v=a.v, "
                  "o=a.o)\noutput y\n", 6, 36, "head_dim is 1099511627776, over the limit");
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, "model m\ndim D = 10\ndim K = 6\ninput x : [1, 4, D]\n"
                              "a = Attention(x, heads=4, kv_heads=2, head_dim=K, causal=true, rope=true,\n"
                              "      q=l.q_proj, k=l.k_proj, v=l.v_proj, o=l.o_proj, qk_norm=rms,\n"
                              "      head_scale=true)\n"
                              "b = Attention(a, heads=4, kv_heads=2, head_dim=3, q=m.q, k=m.k, v=m.v,\n"
                              "      o=m.o, qk_norm=layernorm, qk_norm_per_head=false, layout=in_out)\n"
                              "c = Attention(b, heads=2, head_dim=D / 2, params=sa)\n"
                              "output c\n");
  if (!g) fail_msg("%s", e.buf);
  static const struct { const char *name; int rank; int64_t d0, d1; } want[] = {
      {"l.q_proj.weight", 2, 24, 10},  {"l.q_proj.bias", 1, 24, 0},
      {"l.k_proj.weight", 2, 12, 10},  {"l.v_proj.weight", 2, 12, 10},
      {"l.v_proj.bias", 1, 12, 0},     {"l.o_proj.weight", 2, 10, 24},
      {"l.o_proj.bias", 1, 10, 0},     {"l.q_norm.weight", 1, 6, 0},
      {"l.k_norm.weight", 1, 6, 0},    {"l.head_scale", 1, 4, 0},
      {"m.q.weight", 2, 10, 12},       {"m.k.weight", 2, 10, 6},
      {"m.o.weight", 2, 12, 10},       {"m.q_norm.weight", 1, 12, 0},
      {"m.q_norm.bias", 1, 12, 0},     {"m.k_norm.weight", 1, 6, 0},
      {"sa.in_proj_weight", 2, 30, 10}, {"sa.out_proj.weight", 2, 10, 10}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    int found = -1;
    for (int p = 0; p < g->nparams; p++)
      if (!strcmp(g->params[p].name, want[k].name)) found = p;
    if (found < 0) fail_msg("no parameter %s", want[k].name);
    const bc_shape *sh = &g->params[found].shape;
    if (sh->rank != want[k].rank || sh->d[0] != want[k].d0 || (sh->rank == 2 && sh->d[1] != want[k].d1))
      fail_msg("%s: rank %d [%lld, %lld]", want[k].name, sh->rank, (long long)sh->d[0],
               (long long)(sh->rank == 2 ? sh->d[1] : 0));
  }
  assert_int_equal(g->nodes[0].head_dim, 6);
  assert_int_equal(bc_head_dim(&g->nodes[0], 10), 6);
  assert_int_equal(g->nodes[1].head_dim, 3);
  assert_int_equal(g->nodes[2].head_dim, 0);  // = D/H: the default, spelled out
  assert_int_equal(bc_head_dim(&g->nodes[2], 10), 5);
  bc_ctx_free(ctx);
}

// --- several inputs and outputs, cross-attention, lengths, run-time dims -----

#define XA "model m\ndim B = 2\ndim T <= 16\ndim S <= 9\ndim D = 8\ndim H = 2\n" \
           "input x : [B, T, D]\ninput mem : [B, S, D]\ninput len : lengths[B]\n" \
           "input mlen : lengths[B]\n"

static void test_cross_attention_and_lengths(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  const char *src = XA
      "a = Attention(x, heads=H, causal=true, lengths=len, params=sa)\n"
      "c = Attention(a, kv=mem, heads=H, lengths=len, kv_lengths=mlen, params=ca)\n"
      "y = Add(c, x)\noutput y\noutput a\n";
  bc_graph *g = bcP_parse_string(ctx, "t.blk", src, NULL, 0);
  assert_non_null(g);
  assert_int_equal(g->ninputs, 4);
  assert_int_equal(g->noutputs, 2);
  assert_string_equal(g->output_names[0], "y");
  assert_string_equal(g->output_names[1], "a");
  assert_int_equal(g->nrt, 2);
  assert_int_equal(g->vals[g->inputs[2]].type, BC_VT_I32);
  const bc_value *x = &g->vals[g->inputs[0]];
  assert_int_equal(x->shape.sym[0], 0);
  assert_int_equal(x->shape.sym[1], 2);  // T is dims[1]
  assert_int_equal(x->shape.d[1], 16);   // planned at the bound
  assert_int_equal(g->dims[1].rt, 0);
  assert_int_equal(g->dims[2].rt, 1);
  const bc_node *sa = &g->nodes[0], *ca = &g->nodes[1];
  assert_int_equal(sa->nin, 3);
  assert_int_equal(sa->in[1], -1);
  assert_int_equal(sa->in[2], g->inputs[2]);
  assert_true(sa->causal);
  assert_int_equal(ca->nin, 4);
  assert_int_equal(ca->in[1], g->inputs[1]);
  assert_int_equal(ca->in[3], g->inputs[3]);
  assert_int_equal(bcI_find_param(g, "ca.in_proj_weight") >= 0, 1);
  long rt[2] = {5, 3};
  bc_shape at = bcI_shape_at(g, &x->shape, rt);
  assert_int_equal(at.d[1], 5);
  // -D sets the bound of a run-time dim.
  bc_define d = {"T", 64};
  g = bcP_parse_string(ctx, "t.blk", src, &d, 1);
  assert_non_null(g);
  assert_int_equal(g->vals[g->inputs[0]].shape.d[1], 64);
  bc_ctx_free(ctx);
}

static void test_errors_cross_attention(void **state) {
  (void)state;
  tu_expect_error(XA "a = Attention(x, kv=mem, heads=H, causal=true, params=sa)\noutput a\n", 11, 42,
                  "causal=true with kv=");
  tu_expect_error(XA "a = Attention(x, heads=H, kv_lengths=mlen, params=sa)\noutput a\n", 11, 38,
                  "kv_lengths= masks the memory of a cross-attention");
  tu_expect_error(XA "a = Attention(x, heads=H, lengths=x, params=sa)\noutput a\n", 11, 35,
                  "lengths= takes a lengths input");
  tu_expect_error(XA "a = Add(x, len)\noutput a\n", 11, 12, "'len' is a lengths input");
  tu_expect_error("model m\ndim D = 8\ninput x : [2, 3, D]\ninput m : [3, 3, D]\n"
                  "a = Attention(x, kv=m, heads=2, params=sa)\noutput a\n", 5, 21,
                  "kv=m has shape [3, 3, 8]");
  tu_expect_error("model m\ndim D = 8\ninput x : [2, 3, D]\ninput l : lengths[3]\n"
                  "a = Attention(x, heads=2, lengths=l, params=sa)\noutput a\n", 5, 35,
                  "lengths need one entry per row");
  tu_expect_error(XA "output len\n", 11, 8, "'len' is a lengths input, not an output");
  tu_expect_error(XA "output x\noutput x\n", 12, 8, "'x' is already an output");
}

static void test_errors_runtime_dims(void **state) {
  (void)state;
  tu_expect_error("model m\ndim T <= 8\ndim D = T * 2\n", 3, 9,
                  "run-time dim 'T' has no value at compile time");
  tu_expect_error("model m\ndim T <= 8\ninput x : [T + 1, 4]\n", 3, 12,
                  "run-time dim 'T' has no value at compile time");
  tu_expect_error("model m\ndim T <= 8\ninput x : [1, T, 4]\n"
                  "a = Linear(x, out=T, params=l)\noutput a\n", 4, 19, "run-time dim 'T'");
  tu_expect_error("model m\ndim D <= 8\ninput x : [1, 2, D]\n"
                  "a = Linear(x, out=4, params=l)\noutput a\n", 4, 5,
                  "parameter 'l.weight' would be sized by run-time dim 'D'");
  tu_expect_error("model m\nfor i in 0..2 { dim T <= 8 }\n", 2, 23,
                  "run-time dims (dim T <= ...) must be declared outside loops");
  tu_expect_error("model m\ndim T <= 0\n", 2, 10, "bound of dim T must be positive");
  tu_expect_error("model m\ndim T <= 8\nfor i in 0..T { }\n", 3, 13, "run-time dim 'T'");
}

// Issue 12, item 3: a dim declared in a loop body belongs to that trip.
static void test_dims_scoped_to_loop_trips(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  const char *ok = "model m\ndim D = 4\ninput x : [1, 2, D]\n"
                   "for i in 0..3 { dim Z = i + 1\n for j in 0..2 { dim W = j + Z\n x = Add(x, x) } }\n"
                   "output x\n";
  bc_graph *g = bcP_parse_string(ctx, "t.blk", ok, NULL, 0);
  assert_non_null(g);
  assert_int_equal(g->ndims, 1);  // Z and W are local to their trips
  bc_ctx_free(ctx);
  tu_expect_error("model m\ndim D = 4\ninput x : [1, 2, D]\n"
                  "for i in 0..3 { dim Z = i + 1 }\ny = Linear(x, out=i + 5, params=l)\noutput y\n",
                  5, 19, "undefined dim 'i'");
  tu_expect_error("model m\ndim D = 4\ninput x : [1, 2, D]\n"
                  "for i in 0..3 { dim Z = i + 1 }\ny = Linear(x, out=Z, params=l)\noutput y\n",
                  5, 19, "undefined dim 'Z'");
}

// bc_ctx.max_nodes lowers the node limit (the parse fuzzer's cap), with the
// same message as the 200,000-node limit; it never raises it.
static void test_node_cap(void **state) {
  (void)state;
  const char *src = "model m\ndim D = 4\ninput x : [1, 2, D]\n"
                    "for i in 0..6 { x = Add(x, x) }\noutput x\n";
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  ctx->max_nodes = 5;
  assert_null(bcP_parse_string(ctx, "t.blk", src, NULL, 0));
  assert_non_null(strstr(ctx->last_error, "graph has more than 5 nodes (the limit)"));
  bc_ctx_free(ctx);
  ctx = tu_ctx(&e);
  ctx->max_nodes = 6;
  bc_graph *g = bcP_parse_string(ctx, "t.blk", src, NULL, 0);
  assert_non_null(g);
  assert_int_equal(g->nnodes, 6);
  bc_ctx_free(ctx);
  ctx = tu_ctx(&e);
  ctx->max_nodes = BC_MAX_NODES + 1000;  // cannot raise the limit
  assert_null(bcP_parse_string(ctx, "t.blk", "model m\ndim D = 4\ninput x : [1, 2, D]\n"
                                               "for i in 0..100000 { x = Add(x, x)\n x = Add(x, x)"
                                               "\n x = Add(x, x) }\noutput x\n", NULL, 0));
  assert_non_null(strstr(ctx->last_error, "more than 200000 nodes"));
  bc_ctx_free(ctx);
}

// Found by the long fuzz run: a loop range whose length overflows int64
// (UBSan: signed overflow in hi - lo) is reported, not computed.
static void test_loop_range_overflow(void **state) {
  (void)state;
  tu_expect_error("model m\ndim D = 4\ninput x : [1, 2, D]\n"
                  "for i in -9223372036854775807..16 { x = Add(x, x) }\noutput x\n",
                  4, 10, "loop runs 9223372036854775823 times, over the limit of 100000");
}

// Parameter paths may use keywords as segments (BERT's attention.output.dense).
static void test_keywords_in_paths(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = bcP_parse_string(ctx, "t.blk", PRE "y = LayerNorm(x, params=output.input.for)\noutput y\n",
                                 NULL, 0);
  assert_non_null(g);
  assert_true(bcI_find_param(g, "output.input.for.weight") >= 0);
  bc_ctx_free(ctx);
}

// Issue 12, item 10: float attributes that float32 cannot hold are errors.
static void test_float_attribute_range(void **state) {
  (void)state;
  tu_expect_error(PRE "y = LayerNorm(x, eps=1e-46, params=n)\noutput y\n", 6, 22,
                  "eps=1e-46 underflows float32 to 0");
  tu_expect_error(PRE "y = LayerNorm(x, eps=1e-400, params=n)\noutput y\n", 6, 22,
                  "1e-400 is too small for a double");
  tu_expect_error(PRE "y = Add(x, x, alpha=1e39)\noutput y\n", 6, 21, "does not fit in float32");
}

// --- lexer -------------------------------------------------------------------

static void test_lex_tokens(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_src src = {"t.blk", "a_1 = 0..N 1e-7 2.5 # comment ( ignored\n{x}^", 0};
  src.len = strlen(src.text);
  bc_token *t;
  int n;
  assert_int_equal(bcL_tokenize(ctx, &src, &t, &n), BC_OK);
  assert_int_equal(n, 12);
  assert_int_equal(t[0].kind, BC_TK_IDENT);
  assert_true(bcL_is(&t[0], "a_1"));
  assert_true(bcL_is(&t[1], "="));
  assert_int_equal(t[2].kind, BC_TK_INT);
  assert_int_equal(t[2].ival, 0);
  assert_true(bcL_is(&t[3], ".."));  // "0..N" is an int, a range, a name
  assert_true(bcL_is(&t[4], "N"));
  assert_int_equal(t[5].kind, BC_TK_FLOAT);
  assert_true(t[5].fval == 1e-7);
  assert_true(t[6].fval == 2.5);
  assert_true(bcL_is(&t[7], "{"));
  assert_int_equal(t[7].loc.line, 2);
  assert_int_equal(t[7].loc.col, 1);
  assert_true(bcL_is(&t[10], "^"));
  assert_int_equal(t[11].kind, BC_TK_EOF);
  bc_ctx_free(ctx);
}

static void test_lex_errors(void **state) {
  (void)state;
  tu_expect_error("model m\ny = x; z", 2, 6, "unexpected character ';'");
  tu_expect_error("model m\n\"s\"", 2, 1, "unexpected character '\"'");
  tu_expect_error("model m\ndim D = 12ab", 2, 9, "malformed number");
  tu_expect_error("model m\ndim D = 99999999999999999999", 2, 9, "does not fit in 64 bits");
  tu_expect_error("model m\n\xc3\xa9 = x", 2, 1, "unexpected byte 0xc3");
  tu_expect_error("model m\n\x01", 2, 1, "unexpected control character 0x01");
  char longid[200];
  memset(longid, 'a', 100);
  snprintf(longid + 100, 100, " = x\n");
  char text[300];
  snprintf(text, sizeof text, "model m\n%s", longid);
  tu_expect_error(text, 2, 1, "identifier is 100 characters long (limit 64)");
}

// --- a valid graph -------------------------------------------------------------

static void test_parse_residual_shape(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = bcP_parse_file(ctx, "graphs/residual.blk", NULL, 0);
  assert_non_null(g);
  assert_string_equal(g->model, "residual");
  // 6 layers x (Attention, Add, Add, LN, FFN, Add, Add, LN) + LN + Add
  assert_int_equal(g->nnodes, 6 * 8 + 2);
  // 6 x 12 per-layer tensors + the final norm's weight and bias
  assert_int_equal(g->nparams, 6 * 12 + 2);
  int p = bcI_find_param(g, "layers.5.self_attn.in_proj_weight");
  assert_true(p >= 0);
  assert_int_equal(g->params[p].shape.rank, 2);
  assert_int_equal(g->params[p].shape.d[0], 3 * 512);
  assert_int_equal(g->params[p].shape.d[1], 512);
  p = bcI_find_param(g, "layers.0.linear1.weight");
  assert_int_equal(g->params[p].shape.d[0], 2048);  // F = 4 * D
  assert_true(bcI_find_param(g, "norm.weight") >= 0);
  // The final LayerNorm carries eps=1e-7; every float value is [1, T<=128,
  // 512]; the one int value is the optional lengths input `len` [B].
  bc_node *ln = &g->nodes[g->nnodes - 2];
  assert_int_equal(ln->op, BC_OP_LAYERNORM);
  assert_true(ln->eps == 1e-7);
  int nint = 0;
  for (int i = 0; i < g->nvals; i++) {
    if (g->vals[i].type == BC_VT_I32) {
      assert_int_equal(g->vals[i].shape.rank, 1);
      nint++;
      continue;
    }
    assert_int_equal(g->vals[i].shape.rank, 3);
    assert_int_equal(g->vals[i].shape.d[2], 512);
  }
  assert_int_equal(nint, 1);
  assert_int_equal(g->ninputs, 2);
  assert_true(g->vals[g->output].is_output);
  // 38 M parameters: 12 D^2 + 13 D per layer... computed independently:
  int64_t D = 512, F = 2048;
  int64_t per = 3 * D * D + 3 * D + D * D + D + F * D + F + D * F + D + 4 * D;
  assert_int_equal(bcI_param_count(g), 6 * per + 2 * D);
  bc_ctx_free(ctx);
}

static void test_parse_all_shipped(void **state) {
  (void)state;
  const char *files[] = {"graphs/post_ln.blk", "graphs/pre_ln.blk", "graphs/residual.blk",
                         "graphs/deepnorm.blk", "graphs/peri_ln.blk", "graphs/tiny.blk"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    tu_errors e;
    bc_ctx *ctx = tu_ctx(&e);
    bc_graph *g = bcP_parse_file(ctx, files[i], NULL, 0);
    if (!g) print_error("%s", e.buf);
    assert_non_null(g);
    assert_int_equal(bcI_verify(g), BC_OK);
    bc_ctx_free(ctx);
  }
}

static void test_defines_override(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_define d[] = {{"D", 64}, {"N", 2}, {"T", 7}};
  bc_graph *g = bcP_parse_file(ctx, "graphs/pre_ln.blk", d, 3);
  assert_non_null(g);
  // F = 4 * D is recomputed from the overridden D.
  int p = bcI_find_param(g, "layers.1.linear1.weight");
  assert_int_equal(g->params[p].shape.d[0], 256);
  assert_int_equal(bcI_find_param(g, "layers.2.linear1.weight"), -1);
  assert_int_equal(g->vals[g->input].shape.d[1], 7);
  bool found = false;
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, "D")) found = g->dims[i].overridden && g->dims[i].value == 64;
  assert_true(found);
  bc_ctx_free(ctx);

  ctx = tu_ctx(&e);
  bc_define bad[] = {{"Q", 3}};
  assert_null(bcP_parse_file(ctx, "graphs/pre_ln.blk", bad, 1));
  assert_non_null(strstr(e.buf, "-D Q=3: graphs/pre_ln.blk has no dim 'Q'"));
  bc_ctx_free(ctx);

  ctx = tu_ctx(&e);
  bc_define zero[] = {{"D", 0}};
  assert_null(bcP_parse_file(ctx, "graphs/pre_ln.blk", zero, 1));
  assert_non_null(strstr(e.buf, "-D D=0: dims must be between 1 and"));
  bc_ctx_free(ctx);
}

static void test_dim_expressions(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx,
                         "model m\ndim A = 3\ndim B = (A + 1) * 2 - 10 / 3 % 2\n"
                         "dim C = -(-A)\ninput x : [B, C]\n"
                         "y = Add(x, x, alpha=2^-1, beta=sqrt(4) * (1 + 1e-1))\noutput y\n");
  assert_non_null(g);
  assert_int_equal(g->dims[1].value, 7);  // (3+1)*2 - (10/3)%2 = 8 - 1
  assert_int_equal(g->dims[2].value, 3);
  assert_true(g->nodes[0].alpha == 0.5);
  assert_true(fabs(g->nodes[0].beta - 2.2) < 1e-15);
  bc_ctx_free(ctx);
}

static void test_loops_and_rebinding(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE
                         "for i in 0..2 as blocks.{i} {\n"
                         "  for j in 1..3 as sub.{j * 10} {\n"
                         "    x = LayerNorm(x, params=ln)\n"
                         "  }\n"
                         "}\n"
                         "output x\n");
  assert_non_null(g);
  assert_int_equal(g->nnodes, 4);
  assert_true(bcI_find_param(g, "blocks.0.sub.10.ln.weight") >= 0);
  assert_true(bcI_find_param(g, "blocks.1.sub.20.ln.bias") >= 0);
  // Each LayerNorm reads the previous one's output: rebinding carries state.
  for (int i = 1; i < 4; i++) assert_int_equal(g->nodes[i].in[0], g->nodes[i - 1].out[0]);
  assert_int_equal(g->output, g->nodes[3].out[0]);
  bc_ctx_free(ctx);
}

static void test_weight_tying(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "a = LayerNorm(x, params=shared)\n"
                              "y = LayerNorm(a, params=shared)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(g->nparams, 2);
  assert_int_equal(g->nodes[0].param[0], g->nodes[1].param[0]);
  bc_ctx_free(ctx);
  tu_expect_error(PRE "a = Linear(x, out=4, params=p)\ny = Linear(a, out=4, params=p)\noutput y\n",
                  7, 29, "parameter 'p.weight' is used here with shape [4, 4] but earlier with shape [4, 8]");
}

static void test_linear_and_ffn(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "h = FFN(x, hidden=3 * D, act=gelu_tanh, params=(up, down))\n"
                              "y = Linear(h, out=5, params=head)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(g->nodes[0].hidden, 24);
  assert_int_equal(g->nodes[0].act, BC_ACT_GELU_TANH);
  assert_int_equal(g->params[g->nodes[0].param[2]].shape.d[1], 24);  // down.weight (D, F)
  assert_int_equal(g->vals[g->output].shape.d[2], 5);
  bc_ctx_free(ctx);
}

static void test_affine_false_and_identity(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "y = LayerNorm(x, affine=false, eps=1e-6)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(g->nparams, 0);
  assert_int_equal(g->nodes[0].param[0], -1);
  bc_ctx_free(ctx);
  ctx = tu_ctx(&e);
  g = tu_parse(ctx, PRE "output x\n");  // the identity graph is legal
  assert_non_null(g);
  assert_int_equal(g->output, g->input);
  bc_ctx_free(ctx);
}

// --- every error message, with its location -----------------------------------

static void test_errors_structure(void **state) {
  (void)state;
  tu_expect_error("dim D = 8\n", 1, 1, "a graph file starts with 'model NAME', found 'dim'");
  tu_expect_error("model m\nmodel n\n", 2, 1, "'model' must be the first statement");
  tu_expect_error("model m\ndim D = 8\n", 3, 1, "the graph has no 'input' statement");
  tu_expect_error(PRE "y = LayerNorm(x, params=n)\n", 7, 1, "the graph has no 'output' statement");
  tu_expect_error(PRE "y = LayerNorm(x, params=n)\noutput y\noutput y\n", 8, 8,
                  "'y' is already an output");
  // Two names of one value (issue 20, item 11): said as such, not "already an output".
  tu_expect_error(PRE "y = LayerNorm(x, params=n)\nz = y\noutput y\noutput z\n", 9, 8,
                  "'z' is the same value as output 'y' (bound to it by '='): an output is given "
                  "once; name it once");
  tu_expect_error(PRE "input z : [B, T, D]\noutput x\n", 6, 7, "input 'z' is declared but never used");
  tu_expect_error(PRE "LayerNorm(x, params=n)\n", 6, 1, "must be bound to a name");
  tu_expect_error(PRE "+\n", 6, 1, "expected a statement");
  tu_expect_error(PRE "y = LayerNorm(x, params=n\noutput y\n", 7, 1, "expected ')' to close the call");
  tu_expect_error(PRE "for = x\n", 6, 5, "expected a loop variable, found '='");
  tu_expect_error(PRE "in = x\n", 6, 1, "expected a statement");
}

static void test_errors_names(void **state) {
  (void)state;
  tu_expect_error(PRE "y = LayerNorm(q, params=n)\noutput y\n", 6, 15, "undefined name 'q'");
  tu_expect_error(PRE "y = LayerNorm(xx, params=n)\noutput y\n", 6, 15,
                  "undefined name 'xx' (did you mean 'x'?)");
  tu_expect_error(PRE "y = Add(x, y)\noutput y\n", 6, 12, "'y' is used in its own definition (a cycle)");
  tu_expect_error(PRE "a = LayerNorm(x, params=n)\ny = LayerNorm(x, params=m)\noutput y\n", 6, 1,
                  "'a' is assigned here but never used");
  tu_expect_error(PRE "a = LayerNorm(x, params=n)\na = LayerNorm(x, params=m)\noutput a\n", 6, 1,
                  "'a' is assigned here but never used");
  tu_expect_error(PRE "y = LayerNorm(D, params=n)\noutput y\n", 6, 15, "'D' is a dim, not a value");
  tu_expect_error(PRE "D = LayerNorm(x, params=n)\noutput D\n", 6, 1, "'D' is already a dim");
  tu_expect_error(PRE "dim D = 4\n", 6, 5, "dim 'D' is already defined");
  tu_expect_error(PRE "dim E = x\n", 6, 9, "'x' is a value, not a dim");
  tu_expect_error(PRE "dim E = Q\n", 6, 9, "undefined dim 'Q'");
  tu_expect_error(PRE "for D in 0..2 { x = LayerNorm(x, params=n) }\noutput x\n", 6, 5,
                  "loop variable 'D' shadows the dim 'D'");
}

static void test_errors_nodes(void **state) {
  (void)state;
  tu_expect_error(PRE "y = Atention(x, heads=2, params=a)\noutput y\n", 6, 5,
                  "unknown node 'Atention' (did you mean 'Attention'?)");
  tu_expect_error(PRE "y = Attention(x, head=2, params=a)\noutput y\n", 6, 18,
                  "unknown attribute 'head' for Attention (did you mean 'heads'?)");
  tu_expect_error(PRE "y = Attention(x, params=a)\noutput y\n", 6, 5,
                  "Attention needs the attribute 'heads'");
  tu_expect_error(PRE "y = Attention(x, heads=3, params=a)\noutput y\n", 6, 24,
                  "model width D=8 is not divisible by heads=3");
  tu_expect_error(PRE "y = Attention(x, heads=0, params=a)\noutput y\n", 6, 24,
                  "heads must be positive, got 0");
  tu_expect_error(PRE "y = Attention(x, heads=2, heads=2, params=a)\noutput y\n", 6, 27,
                  "attribute 'heads' given twice");
  tu_expect_error(PRE "y = Attention(x, heads=2, causal=maybe, params=a)\noutput y\n", 6, 34,
                  "causal must be true or false, found 'maybe'");
  tu_expect_error(PRE "y = FFN(x, hidden=D, act=swish, params=(a, b))\noutput y\n", 6, 26,
                  "unknown activation 'swish' (expected relu, gelu, gelu_tanh, swiglu, geglu or "
                  "geglu_tanh)");
  tu_expect_error(PRE "y = FFN(x, hidden=D, params=a)\noutput y\n", 6, 29, "takes two paths");
  tu_expect_error(PRE "y = Add(x)\noutput y\n", 6, 5, "Add takes 2 inputs, found 1");
  tu_expect_error(PRE "y = Add(x, x, x)\noutput y\n", 6, 15, "Add takes 2 inputs, found more");
  tu_expect_error(PRE "y = Add(x, alpha=2, x)\noutput y\n", 6, 21, "positional argument after attributes");
  tu_expect_error(PRE "y = LayerNorm(x)\noutput y\n", 6, 5, "LayerNorm needs params=NAME");
  tu_expect_error(PRE "y = LayerNorm(x, eps=0, params=n)\noutput y\n", 6, 22, "eps must be positive");
  tu_expect_error(PRE "y = LayerNorm(x, affine=false, params=n)\noutput y\n", 6, 39,
                  "affine=false has no parameters");
  tu_expect_error(PRE "y = Add(x, Linear(x, out=4, params=p))\noutput y\n", 6, 5,
                  "shape mismatch in Add: first input is [1, 4, 8] but second is [1, 4, 4]");
  tu_expect_error(PRE "y = Add(x, x, alpha=1/0)\noutput y\n", 6, 22, "division by zero");
  tu_expect_error(PRE "y = Add(x, x, alpha=10^400)\noutput y\n", 6, 23, "not a finite number");
  tu_expect_error(PRE "y = LayerNorm(x, eps=1e39, affine=false)\noutput y\n", 6, 22,
                  "eps=1e+39 does not fit in float32");
}

static void test_errors_dims(void **state) {
  (void)state;
  tu_expect_error("model m\ndim D = 0\n", 2, 9, "dim D must be positive, got 0");
  tu_expect_error("model m\ndim D = 2 - 5\n", 2, 9, "dim D must be positive, got -3");
  tu_expect_error("model m\ndim D = 4294967296 * 4294967296\n", 2, 20, "integer overflow");
  tu_expect_error("model m\ndim D = 9223372036854775807 + 1\n", 2, 29, "integer overflow");
  tu_expect_error("model m\ndim D = 1 << 3\n", 2, 11, "unexpected character '<'");
  tu_expect_error("model m\ndim D = 100000000\n", 2, 9, "over the limit of 16777216");
  tu_expect_error("model m\ndim D = 7 / 0\n", 2, 11, "division by zero");
  tu_expect_error("model m\ndim D = 2.5\n", 2, 9, "expected an integer, found 2.5");
  tu_expect_error("model m\ndim D = 16777216\ninput x : [D, D, D]\noutput x\n", 3, 11,
                  "input shape [16777216, 16777216, 16777216] has more than");
  tu_expect_error("model m\ndim D = 8\ninput x : [D]\noutput x\n", 3, 11,
                  "input must be [B, T, D] or [T, D], found rank 1");
  tu_expect_error("model m\ndim D = 8\ninput x : [D, D, D, D]\noutput x\n", 3, 21, "rank above 3");
}

static void test_errors_loops(void **state) {
  (void)state;
  tu_expect_error(PRE "for i in 3..3 { x = LayerNorm(x, params=n) }\noutput x\n", 6, 10,
                  "loop range 3..3 is empty");
  tu_expect_error(PRE "for i in 0..1000000 { x = LayerNorm(x, params=n) }\noutput x\n", 6, 10,
                  "loop runs 1000000 times, over the limit");
  tu_expect_error(PRE "for i in 0..2 { x = LayerNorm(x, params=n)\noutput x\n", 7, 1,
                  "outputs must be declared outside loops (is a loop missing its '}'?)");
  tu_expect_error(PRE "for i in 0..2 { x = LayerNorm(x, params=n)\n", 6, 1,
                  "loop body is missing its '}'");
  // 100000 x 100000 trips of an empty-ish body: stopped by the statement limit.
  tu_expect_error(PRE "for i in 0..100000 { for j in 0..100000 { x = x } }\noutput x\n",
                  6, 43, "more than 1000000 statements");
  // Nesting limit: deeply nested parentheses.
  char text[4096];
  int n = snprintf(text, sizeof text, "model m\ndim D = ");
  for (int i = 0; i < 200; i++) text[n++] = '(';
  text[n++] = '1';
  for (int i = 0; i < 200; i++) text[n++] = ')';
  text[n] = '\0';
  tu_expect_error(text, 2, 137, "nested too deeply (limit 128)");
}

// Mul broadcasts when one shape is a suffix of the other's (run-time dims
// included) or [1]; the output takes the larger shape.  Anything else is
// reported at the call with both shapes.
static void test_mul_shapes(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, "model m\ndim T <= 5\ninput x : [2, T, 8]\ninput s : [T, 8]\n"
                              "a = Mul(s, x)\nb = Mul(x, s)\ny = Mul(a, b)\noutput y\n");
  if (!g) fail_msg("%s", e.buf);
  assert_int_equal(g->nnodes, 3);
  for (int i = 0; i < 3; i++) {
    const bc_node *n = &g->nodes[i];
    assert_int_equal(n->op, BC_OP_MUL);
    assert_true(bc_shape_eq(&g->vals[n->out[0]].shape, &g->vals[g->inputs[0]].shape));
  }
  bc_ctx_free(ctx);
  // The rule itself, on the shapes no graph input has yet ([D], [1]).
  bc_shape full = {.rank = 3, .d = {2, 5, 8}}, d8 = {.rank = 1, .d = {8}}, one = {.rank = 1, .d = {1}};
  bc_shape d5 = {.rank = 1, .d = {5}}, t8 = {.rank = 2, .d = {5, 8}, .sym = {1, 0}};
  assert_true(bc_shape_broadcasts(&d8, &full) && bc_shape_broadcasts(&one, &full));
  assert_true(bc_shape_broadcasts(&full, &full) && !bc_shape_broadcasts(&full, &d8));
  assert_false(bc_shape_broadcasts(&d5, &full) || bc_shape_broadcasts(&t8, &full));
  tu_expect_error("model m\ninput x : [2, 5, 8]\ninput g : [4, 8]\ny = Mul(x, g)\noutput y\n", 4,
                  5,
                  "Mul: shapes [2, 5, 8] and [4, 8] do not broadcast (one must be a suffix of "
                  "the other, or [1])");
  tu_expect_error("model m\ninput x : [2, 5, 8]\ninput g : [5, 4]\ny = Mul(g, x)\noutput y\n", 4,
                  5, "Mul: shapes [5, 4] and [2, 5, 8] do not broadcast");
  tu_expect_error("model m\ninput x : [2, 5, 8]\ninput g : [2, 8]\ny = Mul(g, x)\noutput y\n", 4,
                  5, "Mul: shapes [2, 8] and [2, 5, 8] do not broadcast");
  tu_expect_error("model m\ndim T <= 5\ndim S <= 5\ninput x : [2, T, 8]\ninput g : [S, 8]\n"
                  "y = Mul(x, g)\noutput y\n",
                  6, 5, "Mul: shapes [2, T<=5, 8] and [S<=5, 8] do not broadcast");
  tu_expect_error(PRE "y = Mul(x)\noutput y\n", 6, 5, "Mul");
  tu_expect_error(PRE "y = Mul(x, x, alpha=2)\noutput y\n", 6, 15, "unknown attribute 'alpha' for Mul");
}

// Param, Act, broadcasting Add and init=const(c): the graphs they make, and
// each error at its caret.
static void test_param_act_add(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "for i in 0..2 as layers.{i} {\n"
                              "  a = Param(shape=[1], params=alpha, init=zeros)\n"
                              "  g = Param(shape=[D], params=gamma, init=const(-2.5e-4))\n"
                              "  x = Add(x, Mul(a, Act(x, act=silu)))\n"
                              "  x = Add(Param(shape=[T, D], params=pe), Mul(x, g), beta=-1)\n}\n"
                              "output x\n");
  if (!g) fail_msg("%s", e.buf);
  int p = bcI_find_param(g, "layers.1.gamma");  // the path itself, no suffix
  assert_true(p >= 0 && g->params[p].unit && g->params[p].shape.rank == 1);
  assert_int_equal(g->params[p].shape.d[0], 8);
  assert_int_equal(g->params[p].init.kind, BC_INIT_CONST);
  assert_true(g->params[p].init.arg == -2.5e-4);
  p = bcI_find_param(g, "layers.0.alpha");
  assert_true(p >= 0 && g->params[p].init.kind == BC_INIT_ZEROS);
  p = bcI_find_param(g, "layers.0.pe");
  assert_true(p >= 0 && g->params[p].shape.rank == 2 && g->params[p].init.kind == BC_INIT_NONE);
  int nact = 0, nparam = 0;
  for (int i = 0; i < g->nnodes; i++) {
    nact += g->nodes[i].op == BC_OP_ACT && g->nodes[i].unary == BC_UN_SILU;
    nparam += g->nodes[i].op == BC_OP_PARAM && g->nodes[i].nin == 0;
    if (g->nodes[i].op == BC_OP_ADD)  // the output takes the full shape
      assert_int_equal(g->vals[g->nodes[i].out[0]].shape.rank, 3);
  }
  assert_int_equal(nact, 2);
  assert_int_equal(nparam, 6);
  bc_ctx_free(ctx);
  // Param: shape=, params= and its init.
  tu_expect_error(PRE "p = Param(shape=[D, D, D], params=w)\ny = Add(x, p)\noutput y\n", 6, 17,
                  "Param: shape=[8, 8, 8] has rank 3");
  tu_expect_error(PRE "p = Param(shape=[0], params=w)\ny = Add(x, p)\noutput y\n", 6, 18,
                  "a parameter dimension must be positive");
  tu_expect_error(PRE "p = Param(shape=D, params=w)\ny = Add(x, p)\noutput y\n", 6, 17,
                  "to start shape=");
  tu_expect_error(PRE "p = Param(shape=[D])\ny = Add(x, p)\noutput y\n", 6, 5,
                  "Param needs the attribute 'params'");
  tu_expect_error(PRE "p = Param(params=w)\ny = Add(x, p)\noutput y\n", 6, 5,
                  "Param needs the attribute 'shape'");
  tu_expect_error(PRE "p = Param(x, shape=[D], params=w)\ny = Add(x, p)\noutput y\n", 6, 11,
                  "Param takes 0 inputs, found more");
  tu_expect_error(PRE "p = Param(shape=[D], params=w, init=const)\ny = Add(x, p)\noutput y\n", 6,
                  42, "after 'const'");
  tu_expect_error(PRE "p = Param(shape=[D], params=w, init=constant(1))\ny = Add(x, p)\noutput y\n",
                  6, 37, "unknown init scheme 'constant'; init= takes zeros, ones, const(c)");
  tu_expect_error(PRE "p = Param(shape=[D], params=w, init=const(1e39))\ny = Add(x, p)\noutput y\n",
                  6, 43, "const=1e+39 does not fit in float32");
  tu_expect_error(PRE "p = Param(shape=[D], params=w, init=xavier)\ny = Add(x, p)\noutput y\n",
                  6, 37, "xavier needs a matrix");
  tu_expect_error(PRE "p = Param(shape=[T, D], params=w)\nq = Param(shape=[D], params=w)\n"
                  "y = Add(Add(x, p), q)\noutput y\n",
                  7, 29, "parameter 'w' is used here with shape [8] but earlier with shape [4, 8]");
  tu_expect_error("model m\ndim T <= 4\ninput x : [1, T, 8]\np = Param(shape=[T, 8], params=w)\n"
                  "y = Add(x, p)\noutput y\n", 4, 18, "run-time dim 'T' has no value");
  // A Param's vector goes to Add and Mul only, and is never a graph output.
  tu_expect_error(PRE "p = Param(shape=[D], params=w)\ny = LayerNorm(p, params=n)\noutput y\n", 7,
                  15, "LayerNorm takes [B, T, D] or [T, D] values; 'p' is [8]");
  tu_expect_error(PRE "p = Param(shape=[D], params=w)\ny = Add(x, x)\noutput y\noutput p\n", 9, 8,
                  "'p' is a Param");
  // Act: the six activations.
  tu_expect_error(PRE "y = Act(x, act=swish)\noutput y\n", 6, 16,
                  "Act: unknown activation 'swish'; act= takes relu, gelu, gelu_tanh, silu, "
                  "sigmoid or tanh");
  tu_expect_error(PRE "y = Act(x, act=swiglu)\noutput y\n", 6, 16,
                  "gated activations belong to FFN");
  tu_expect_error(PRE "y = Act(x, act=1)\noutput y\n", 6, 16, "act of Act takes a word");
  tu_expect_error(PRE "y = Act(x, x)\noutput y\n", 6, 12, "Act takes 1 input, found more");
  // Add: shapes that do not broadcast.
  tu_expect_error(PRE "p = Param(shape=[3], params=w)\ny = Add(x, p)\noutput y\n", 7, 5,
                  "shape mismatch in Add: first input is [1, 4, 8] but second is [3] (one must be "
                  "the other's shape, a suffix of it, or [1])");
  tu_expect_error(PRE "p = Param(shape=[2, 8], params=w)\ny = Add(p, x)\noutput y\n", 7, 5,
                  "shape mismatch in Add: first input is [2, 8] but second is [1, 4, 8]");
}

static void test_error_format_has_caret(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  assert_null(tu_parse(ctx, PRE "y = LayerNorm(qqq, params=n)\noutput y\n"));
  assert_string_equal(e.buf,
                      "t.blk:6:15: error: undefined name 'qqq'\n"
                      "  y = LayerNorm(qqq, params=n)\n"
                      "                ^^^\n");
  bc_ctx_free(ctx);
}

static void test_dump_is_stable(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "y = LayerNorm(Add(x, x, beta=0.5), params=n)\noutput y\n");
  assert_non_null(g);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  bcI_dump(g, f);
  fclose(f);
  assert_string_equal(buf,
                      "model m  (t.blk)\n"
                      "dims B=1 T=4 D=8\n"
                      "params 2 tensors, 16 scalars\n"
                      "input  %0 x [1, 4, 8]\n"
                      "n0: %1 [1, 4, 8] = Add(%0, %0) alpha=1 beta=0.5\n"
                      "    ; t.blk:6:15\n"
                      "n1: %2 y [1, 4, 8] = LayerNorm(%1) eps=1e-05\n"
                      "    params n.weight, n.bias\n"
                      "    ; t.blk:6:5\n"
                      "output %2\n");
  free(buf);
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lex_tokens),
      cmocka_unit_test(test_lex_errors),
      cmocka_unit_test(test_parse_residual_shape),
      cmocka_unit_test(test_parse_all_shipped),
      cmocka_unit_test(test_defines_override),
      cmocka_unit_test(test_dim_expressions),
      cmocka_unit_test(test_loops_and_rebinding),
      cmocka_unit_test(test_weight_tying),
      cmocka_unit_test(test_linear_and_ffn),
      cmocka_unit_test(test_affine_false_and_identity),
      cmocka_unit_test(test_errors_structure),
      cmocka_unit_test(test_errors_names),
      cmocka_unit_test(test_errors_nodes),
      cmocka_unit_test(test_errors_dims),
      cmocka_unit_test(test_errors_loops),
      cmocka_unit_test(test_mul_shapes),
      cmocka_unit_test(test_error_format_has_caret),
      cmocka_unit_test(test_dump_is_stable),
      cmocka_unit_test(test_cross_attention_and_lengths),
      cmocka_unit_test(test_errors_cross_attention),
      cmocka_unit_test(test_errors_runtime_dims),
      cmocka_unit_test(test_dims_scoped_to_loop_trips),
      cmocka_unit_test(test_float_attribute_range),
      cmocka_unit_test(test_errors_attention_options),
      cmocka_unit_test(test_attention_option_params),
      cmocka_unit_test(test_attention_head_dim),
      cmocka_unit_test(test_keywords_in_paths),
      cmocka_unit_test(test_node_cap),
      cmocka_unit_test(test_loop_range_overflow),
      cmocka_unit_test(test_param_act_add),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
