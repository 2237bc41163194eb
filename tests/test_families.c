// test_families.c — the shipped BERT, GPT-2 and LLaMA graphs and the
// parser rule they need: Hugging Face names with keyword segments; and the
// research wirings (issue 23: sandwich, parallel, gated, normformer,
// hyper_connections, rezero, layerscale, admin) parsed, checked and run on
// the JIT against the interpreter.
//
// The graphs' parameters must be exactly the family's Hugging Face
// state_dict keys (without the bert./transformer./model. prefix), in the
// shapes those checkpoints store - [out, in] for nn.Linear, [in, out] for
// GPT-2's Conv1D, [KV*dh, D] for LLaMA's k/v projections.  Numerics are
// checked against PyTorch by `make conformance` (tools/families.py).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "io_graphs.h"

#include <stdio.h>
#include <string.h>

static const char *graph_path(char *buf, size_t n, const char *file) {
  snprintf(buf, n, "graphs/%s", file);
  return buf;
}

// Asserts that `name` is a parameter of g with the given 1-D or 2-D shape.
static void expect_param(const bc_graph *g, const char *name, int64_t d0, int64_t d1) {
  int i = bcI_find_param(g, name);
  if (i < 0) fail_msg("parameter %s missing", name);
  const bc_shape *s = &g->params[i].shape;
  if (d1 < 0) {
    if (s->rank != 1 || s->d[0] != d0) fail_msg("%s: want [%lld]", name, (long long)d0);
  } else if (s->rank != 2 || s->d[0] != d0 || s->d[1] != d1) {
    fail_msg("%s: want [%lld, %lld], got rank %d [%lld, %lld]", name, (long long)d0, (long long)d1,
             s->rank, (long long)s->d[0], (long long)(s->rank > 1 ? s->d[1] : 0));
  }
}

static void test_keyword_path_segments(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  const char *src = TU_PRE
      "for i in 0..2 as encoder.layer.{i} {\n"
      "  x = LayerNorm(x, eps=1e-12, params=attention.output.LayerNorm)\n"
      "  x = LayerNorm(x, params=output.LayerNorm)\n"
      "}\n"
      "for j in 0..1 as output.in.for {\n  x = LayerNorm(x, params=model.dim)\n}\n"
      "output x\n";
  bc_graph *g = bcP_parse_string(ctx, "t.blk", src, NULL, 0);
  if (!g) fail_msg("%s", e.buf);
  expect_param(g, "encoder.layer.1.attention.output.LayerNorm.weight", 8, -1);
  expect_param(g, "encoder.layer.0.output.LayerNorm.bias", 8, -1);
  expect_param(g, "output.in.for.model.dim.weight", 8, -1);
  assert_int_equal(g->nparams, 10);
  bc_ctx_free(ctx);
  // A path cannot end in a dot.
  tu_expect_error(TU_PRE "y = LayerNorm(x, params=a.output.)\noutput y\n", 6, 34,
                  "expected a parameter path (like layers.{i}.self_attn), found ')'");
}

static bc_graph *load(bc_ctx *ctx, tu_errors *e, const char *file, const bc_define *d, int nd) {
  char path[256];
  bc_graph *g = bcP_parse_file(ctx, graph_path(path, sizeof path, file), d, nd);
  if (!g) fail_msg("%s: %s", path, e->buf);
  return g;
}

static void test_bert_graph(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = load(ctx, &e, "bert.blk", NULL, 0);
  const char *lin[] = {"attention.self.query", "attention.self.key", "attention.self.value",
                       "attention.output.dense"};
  char n[200];
  for (int i = 0; i < 12; i += 11) {
    for (int k = 0; k < 4; k++) {
      snprintf(n, sizeof n, "encoder.layer.%d.%s.weight", i, lin[k]);
      expect_param(g, n, 768, 768);
      snprintf(n, sizeof n, "encoder.layer.%d.%s.bias", i, lin[k]);
      expect_param(g, n, 768, -1);
    }
    snprintf(n, sizeof n, "encoder.layer.%d.intermediate.dense.weight", i);
    expect_param(g, n, 3072, 768);
    snprintf(n, sizeof n, "encoder.layer.%d.output.dense.weight", i);
    expect_param(g, n, 768, 3072);
    snprintf(n, sizeof n, "encoder.layer.%d.attention.output.LayerNorm.bias", i);
    expect_param(g, n, 768, -1);
    snprintf(n, sizeof n, "encoder.layer.%d.output.LayerNorm.weight", i);
    expect_param(g, n, 768, -1);
  }
  assert_int_equal(g->nparams, 12 * 16);  // 8 modules x (weight, bias), no final norm
  assert_int_equal(g->ninputs, 2);         // x and the optional lengths
  assert_int_equal(g->nrt, 1);             // T <= 128: chosen at run time
  bc_ctx_free(ctx);
}

static void test_gpt2_graph(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  const bc_define d[] = {{"D", 48}, {"H", 6}, {"F", 101}, {"N", 2}};
  bc_graph *g = load(ctx, &e, "gpt2.blk", d, 4);
  expect_param(g, "h.1.attn.c_attn.weight", 48, 144);   // Conv1D: [in, out], q|k|v packed
  expect_param(g, "h.1.attn.c_attn.bias", 144, -1);
  expect_param(g, "h.0.attn.c_proj.weight", 48, 48);
  expect_param(g, "h.0.mlp.c_fc.weight", 48, 101);
  expect_param(g, "h.0.mlp.c_proj.weight", 101, 48);
  expect_param(g, "h.1.ln_2.bias", 48, -1);
  expect_param(g, "ln_f.weight", 48, -1);
  assert_int_equal(g->nparams, 2 * 12 + 2);
  bc_ctx_free(ctx);
}

static void test_llama_graph(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = load(ctx, &e, "llama.blk", NULL, 0);
  // Defaults: D=512 H=8 KV=2 (dh 64) and F = 8D/3 rounded up to 32 = 1376.
  expect_param(g, "layers.5.self_attn.q_proj.weight", 512, 512);
  expect_param(g, "layers.5.self_attn.k_proj.weight", 128, 512);
  expect_param(g, "layers.0.self_attn.v_proj.weight", 128, 512);
  expect_param(g, "layers.0.self_attn.o_proj.weight", 512, 512);
  expect_param(g, "layers.0.mlp.gate_proj.weight", 1376, 512);
  expect_param(g, "layers.0.mlp.up_proj.weight", 1376, 512);
  expect_param(g, "layers.0.mlp.down_proj.weight", 512, 1376);
  expect_param(g, "layers.3.input_layernorm.weight", 512, -1);
  expect_param(g, "layers.3.post_attention_layernorm.weight", 512, -1);
  expect_param(g, "norm.weight", 512, -1);
  assert_int_equal(bcI_find_param(g, "layers.0.self_attn.q_proj.bias"), -1);  // bias=false
  assert_int_equal(bcI_find_param(g, "norm.bias"), -1);                     // RMSNorm
  assert_int_equal(g->nparams, 6 * 9 + 1);
  assert_int_equal(g->ninputs, 2);
  assert_int_equal(g->vals[g->inputs[1]].type, BC_VT_I32);
  // KV is a dim like the others: MQA loads [dh, D] k/v projections.
  const bc_define d[] = {{"D", 48}, {"H", 6}, {"KV", 1}, {"N", 1}};
  g = load(ctx, &e, "llama.blk", d, 4);
  expect_param(g, "layers.0.self_attn.k_proj.weight", 8, 48);
  expect_param(g, "layers.0.mlp.down_proj.weight", 48, 128);
  bc_ctx_free(ctx);
  // KV must divide H.
  tu_errors e2;
  ctx = tu_ctx(&e2);
  const bc_define bad[] = {{"KV", 3}};
  char path[256];
  assert_null(bcP_parse_file(ctx, graph_path(path, sizeof path, "llama.blk"), bad, 1));
  assert_non_null(strstr(e2.buf, "kv_heads"));
  bc_ctx_free(ctx);
}

// The whole models (issue 21): GPT2LMHeadModel's and LlamaForCausalLM's
// names, the tied GPT-2 head as one parameter (the embedding's), token ids
// in and logits [B, T, V] out.
static void test_gpt2_lm_graph(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = load(ctx, &e, "gpt2_lm.blk", NULL, 0);
  expect_param(g, "transformer.wte.weight", 50257, 768);
  expect_param(g, "transformer.wpe.weight", 1024, 768);
  expect_param(g, "transformer.h.11.attn.c_attn.weight", 768, 2304);
  expect_param(g, "transformer.h.0.mlp.c_proj.weight", 3072, 768);
  expect_param(g, "transformer.ln_f.bias", 768, -1);
  assert_int_equal(bcI_find_param(g, "lm_head.weight"), -1);          // tied: no own tensor
  assert_int_equal(bcI_find_param(g, "transformer.wte.bias"), -1);    // bias=false
  assert_int_equal(g->nparams, 2 + 12 * 12 + 2);
  assert_int_equal(g->ninputs, 2);  // ids and the optional len
  assert_string_equal(g->vals[g->inputs[0]].name, "ids");
  assert_int_equal(g->noutputs, 1);
  const bc_value *y = &g->vals[g->outputs[0]];
  assert_string_equal(y->name, "logits");
  assert_int_equal(y->shape.rank, 3);
  assert_int_equal(y->shape.d[2], 50257);
  // Odd dims: V not a multiple of 8.
  const bc_define d[] = {{"D", 36}, {"H", 3}, {"N", 1}, {"V", 101}, {"P", 64}, {"T", 48}};
  g = load(ctx, &e, "gpt2_lm.blk", d, 6);
  expect_param(g, "transformer.wte.weight", 101, 36);
  assert_int_equal(g->nparams, 2 + 12 + 2);
  bc_ctx_free(ctx);
}

static void test_llama_lm_graph(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = load(ctx, &e, "llama_lm.blk", NULL, 0);
  expect_param(g, "model.embed_tokens.weight", 32000, 512);
  expect_param(g, "model.layers.5.self_attn.k_proj.weight", 128, 512);
  expect_param(g, "model.layers.0.mlp.down_proj.weight", 512, 1376);
  expect_param(g, "model.norm.weight", 512, -1);
  expect_param(g, "lm_head.weight", 32000, 512);  // untied
  assert_int_equal(bcI_find_param(g, "lm_head.bias"), -1);
  assert_int_equal(g->nparams, 1 + 6 * 9 + 1 + 1);
  const bc_value *y = &g->vals[g->outputs[0]];
  assert_string_equal(y->name, "logits");
  assert_int_equal(y->shape.d[2], 32000);
  bc_ctx_free(ctx);
}

// The research wirings of issue 23.  tools/wirings_check.py compares them
// with PyTorch (forward and gradients on every backend); here each is
// parsed with small odd dims, checked (a parameter per name, the names it
// promises), compiled for the JIT and run against the interpreter on
// weights drawn away from their identity init (tu_grad_weights: every
// gate, scale and omega non-trivial), at the bound and at a shorter
// length with a padded batch.  Tolerance 2e-5 relative (|a - b| / (1 + |b|)):
// float against double sums, as test_jit's shipped-graph check.
typedef struct research_graph {
  const char *file;
  int nparams_per_layer;   // parameter tensors of one layer
  int nfinal;              // parameter tensors outside the layers
  const char *names[4];    // some layer-1 names the graph must read
} research_graph;

static const research_graph k_research[] = {
    {"sandwich", 16, 2, {"layers.1.norm3.weight", "layers.1.norm4.bias", "layers.1.norm1.weight", NULL}},
    {"parallel", 10, 2, {"layers.1.norm1.bias", "layers.1.linear2.weight", NULL, NULL}},
    {"gated", 16, 2, {"layers.1.attn_gate.weight", "layers.1.ffn_gate.bias", "layers.1.norm2.bias", NULL}},
    {"normformer", 17, 2, {"layers.1.self_attn.head_scale", "layers.1.attn_ln.weight", "layers.1.ffn_ln.bias",
                           "layers.1.linear1.weight"}},
    {"rezero", 9, 0, {"layers.1.resweight", "layers.1.self_attn.in_proj_weight", "layers.1.linear2.bias", NULL}},
    {"layerscale", 14, 2, {"layers.1.gamma_1", "layers.1.gamma_2", "layers.1.norm2.weight", NULL}},
    {"admin", 14, 0, {"layers.1.omega1", "layers.1.omega2", "layers.1.norm1.bias", NULL}},
    {"hyper_connections", 28, 2, {"layers.1.attn_hc.am_0", "layers.1.ffn_hc.ar_1_0", "layers.1.ffn_hc.b_1",
                                  "layers.1.self_attn.in_proj_weight"}},
};

static void test_research_wirings(void **state) {
  (void)state;
  const bc_define defs[] = {{"B", 2}, {"T", 9}, {"D", 12}, {"H", 3}, {"F", 20}, {"N", 2}};
  for (size_t i = 0; i < sizeof k_research / sizeof k_research[0]; i++) {
    const research_graph *rg = &k_research[i];
    tu_errors e;
    bc_ctx *ctx = tu_ctx(&e);
    bc_graph *g = load(ctx, &e, bc_fmt(ctx, "%s.blk", rg->file), defs, 6);
    if (g->nparams != 2 * rg->nparams_per_layer + rg->nfinal)
      fail_msg("%s: %d parameter tensors, want %d", rg->file, g->nparams,
               2 * rg->nparams_per_layer + rg->nfinal);
    for (int k = 0; k < 4 && rg->names[k]; k++)
      if (bcI_find_param(g, rg->names[k]) < 0) fail_msg("%s: no parameter %s", rg->file, rg->names[k]);
    assert_int_equal(g->nrt, 1);  // T <= bound
    bc_compiled c;
    if (bcD_compile(ctx, g, NULL, &c) != BC_OK) fail_msg("%s: %s", rg->file, e.buf);
    bc_weights w;
    tu_grad_weights(ctx, g, 7, &w);
    void *ws = aligned_alloc(64, ((size_t)c.ws_bytes + 63) / 64 * 64 + 64);
    assert_non_null(ws);
    int len[2] = {6, 2};
    int *lens[8] = {0};
    for (int k = 0; k < g->ninputs && k < 8; k++)
      if (g->vals[g->inputs[k]].type == BC_VT_I32) lens[k] = len;
    for (int shorter = 0; shorter <= 1; shorter++) {
      long rt[4] = {shorter ? 6 : 9};
      ig_io got, want;
      ig_alloc(&got, g, rt, 11, shorter ? lens : NULL);
      ig_alloc(&want, g, rt, 11, shorter ? lens : NULL);
      assert_int_equal(c.run((const float *const *)w.p, got.io, got.rt, ws), BC_RUN_OK);
      if (bcR_run_io(ctx, g, &w, want.io, want.rt) != BC_OK) fail_msg("%s: %s", rg->file, e.buf);
      double err = ig_rel_err(&got, &want, g);
      printf("  %-18s %s  jit vs interp rel err %.2e\n", rg->file,
             shorter ? "T=6, lengths 6 2" : "T=9, full       ", err);
      if (!(err <= 2e-5)) fail_msg("%s (shorter=%d): rel err %g", rg->file, shorter, err);
      ig_free(&got, g);
      ig_free(&want, g);
    }
    free(ws);
    bcD_free(&c);
    bcW_free(&w);
    bc_ctx_free(ctx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keyword_path_segments),
      cmocka_unit_test(test_bert_graph),
      cmocka_unit_test(test_gpt2_graph),
      cmocka_unit_test(test_llama_graph),
      cmocka_unit_test(test_gpt2_lm_graph),
      cmocka_unit_test(test_llama_lm_graph),
      cmocka_unit_test(test_research_wirings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
