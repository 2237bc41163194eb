// test_ops.c — the op table (compiler/ops.h): every op has a row, every row
// has every stage (or the stage's explicit "not supported" entry), and the
// rows are consistent (their own index, unique names, arities and
// attributes in range, in-place masks naming real slots).  Then the one
// attribute printer, in each view, on parsed nodes.
#include "testutil.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

static void test_every_op_has_a_row(void **state) {
  (void)state;
  for (int i = 0; i < BC_OP_COUNT; i++) {
    const bc_op_def *d = bcT_def((bc_op)i);
    assert_non_null(d);
    assert_int_equal(d->op, i);
    assert_ptr_equal(bcI_op_info((bc_op)i), &d->info);
    assert_string_equal(bcI_op_name((bc_op)i), d->info.name);
  }
  assert_null(bcT_def(BC_OP_COUNT));
  assert_null(bcT_def((bc_op)-1));
  assert_null(bcI_op_info(BC_OP_COUNT));
  assert_string_equal(bcI_op_name(BC_OP_COUNT), "?");
}

static void test_every_op_has_every_stage(void **state) {
  (void)state;
  for (int i = 0; i < BC_OP_COUNT; i++) {
    const bc_op_def *d = bcT_def((bc_op)i);
    print_message("%s\n", d->info.name);
    assert_non_null(d->attrs);
    assert_non_null(d->defaults);
    assert_non_null(d->same_attrs);
    assert_non_null(d->build);
    assert_non_null(d->scratch);
    assert_non_null(d->interp);
    assert_non_null(d->ref_weights);
    assert_non_null(d->ref_fwd);
    assert_non_null(d->ref_bwd);
    assert_non_null(d->emit);
    assert_non_null(d->grad_check);
    assert_non_null(d->grad_buffers);
    assert_non_null(d->grad_fwd);
    assert_non_null(d->grad_bwd);
    assert_non_null(d->params);
    assert_non_null(d->dot_color);
    // The parser builds exactly the ops a graph file may name; the others
    // (fused by the passes) have its explicit "not supported" entry.
    if (d->info.in_language) assert_true(d->build != bcP_build_none);
    else assert_true(d->build == bcP_build_none);
    // An op with parameters names them for init.SEL= (and only such an op).
    assert_true((d->init_sel != NULL) == (strcmp(d->params, "none") != 0));
    assert_true(!d->init_part || d->init_sel);
  }
}

static void test_rows_are_consistent(void **state) {
  (void)state;
  for (int i = 0; i < BC_OP_COUNT; i++) {
    const bc_op_info *a = &bcT_def((bc_op)i)->info;
    assert_non_null(a->name);
    assert_true(a->name[0] != '\0');
    assert_non_null(a->doc);
    for (int j = 0; j < i; j++) assert_string_not_equal(a->name, bcT_def((bc_op)j)->info.name);
    // A source (Param: no inputs) has nin_max 0 and reads output 0's shape.
    assert_in_range(a->nin_min, a->nin_max ? 1 : 0, BC_MAX_NODE_IN);
    assert_in_range(a->nin_max, a->nin_min, BC_MAX_NODE_IN);
    if (!a->nin_max) assert_true(bcT_def((bc_op)i)->broadcast);
    assert_in_range(a->nout_min, 1, BC_MAX_NODE_OUT);
    assert_in_range(a->nout_max, a->nout_min, BC_MAX_NODE_OUT);
    if (a->in_language) assert_in_range(a->npos, a->nin_max ? 1 : 0, a->nin_min);
    else assert_int_equal(a->npos, 0);
    for (int k = 0; k < BC_MAX_ATTRS && a->attrs[k].name; k++) {
      const bc_attr_info *at = &a->attrs[k];
      assert_true(a->in_language);  // only graph-file ops are spelled with attributes
      assert_in_range(at->type, BC_AT_INT, BC_AT_SHAPE);
      for (int j = 0; j < k; j++) assert_string_not_equal(at->name, a->attrs[j].name);
      if (at->type == BC_AT_VALUE) assert_in_range(at->slot, a->npos, a->nin_max - 1);
      else assert_int_equal(at->slot, 0);
    }
    const bc_op_def *d = bcT_def((bc_op)i);
    for (int k = 0; k < BC_MAX_NODE_OUT; k++) {
      if (k >= a->nout_max) assert_int_equal(d->inplace[k], 0);
      assert_int_equal(d->inplace[k] >> a->nin_max, 0);  // only real input slots
    }
  }
}

// A new node gets its op's attribute defaults from the table.
static void test_attribute_defaults(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcI_new(ctx);
  for (int i = 0; i < BC_OP_COUNT; i++) assert_int_equal(bcI_add_node(g, (bc_op)i, (bc_loc){0}), i);
  const bc_node *n = g->nodes;
  assert_true(n[BC_OP_ADD].alpha == 1.0 && n[BC_OP_ADD].beta == 1.0);
  assert_true(n[BC_OP_LAYERNORM].eps == 1e-5 && !n[BC_OP_LAYERNORM].rms);
  assert_true(n[BC_OP_DUAL_ADD_LN].alpha2 == 1.0 && n[BC_OP_DUAL_ADD_LN].beta2 == 1.0);
  assert_true(n[BC_OP_ATTENTION].rope_theta == 10000.0 && !n[BC_OP_ATTENTION].causal);
  assert_true(n[BC_OP_FFN].act == BC_ACT_RELU && n[BC_OP_FFN].hidden == 0);
  assert_false(n[BC_OP_LINEAR].in_out);
  assert_true(n[BC_OP_POSITIONS].pos_kind == BC_POS_LEARNED && n[BC_OP_POSITIONS].pos_max == 0);
  assert_true(n[BC_OP_CROSS_ENTROPY].ignore_index == -100 && n[BC_OP_CROSS_ENTROPY].smoothing == 0);
  for (int i = 0; i < BC_OP_COUNT; i++) {
    const bc_op_def *d = bcT_def((bc_op)i);
    bc_node a = n[i], b = n[i];
    assert_true(d->same_attrs(&a, &b));
  }
  bc_node a = n[BC_OP_ATTENTION], b = a;
  b.rope_theta = 500000.0;
  assert_false(bcT_def(BC_OP_ATTENTION)->same_attrs(&a, &b));
  a = n[BC_OP_ADD_LN], b = a;
  b.rms = true;
  assert_false(bcT_def(BC_OP_ADD_LN)->same_attrs(&a, &b));
  a = n[BC_OP_FFN], b = a;
  b.act = BC_ACT_GELU;
  assert_false(bcT_def(BC_OP_FFN)->same_attrs(&a, &b));
  a = n[BC_OP_POSITIONS], b = a;
  b.pos_kind = BC_POS_SINUSOIDAL;
  assert_false(bcT_def(BC_OP_POSITIONS)->same_attrs(&a, &b));
  b = a, b.pos_max = 7;
  assert_false(bcT_def(BC_OP_POSITIONS)->same_attrs(&a, &b));
  bc_ctx_free(ctx);
}

// The printer's text for node `node` of a parsed graph is `want`.
static void expect_attrs(const bc_graph *g, int node, bc_attrs_view view, const char *want) {
  bc_sbuf b = {0};
  bcT_attrs(&g->nodes[node], view, &b);
  assert_false(b.oom);
  assert_string_equal(b.len ? b.p : "", want);
  free(b.p);
}

static void test_one_attribute_printer(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx,
                         "model t\n"
                         "dim D = 8\n"
                         "input x : [2, 4, D]\n"
                         "a = Attention(x, heads=2, kv_heads=1, causal=true, params=sa)\n"
                         "s = Add(x, a, alpha=0.5)\n"
                         "n = LayerNorm(s, params=ln)\n"
                         "f = FFN(n, hidden=16, act=gelu, params=(up, down))\n"
                         "y = Linear(f, out=3, params=head)\n"
                         "output y\n");
  assert_non_null(g);
  assert_int_equal(g->nnodes, 5);
  expect_attrs(g, 0, BC_ATTRS_DUMP, " heads=2 causal=true kv_heads=1");
  expect_attrs(g, 0, BC_ATTRS_COMMENT, " heads=2 causal=true");
  expect_attrs(g, 0, BC_ATTRS_DOT, "\\nheads=2 causal");
  expect_attrs(g, 1, BC_ATTRS_DUMP, " alpha=0.5 beta=1");
  expect_attrs(g, 1, BC_ATTRS_COMMENT, "");
  expect_attrs(g, 1, BC_ATTRS_DOT, "\\nalpha=0.5 beta=1");
  expect_attrs(g, 2, BC_ATTRS_DUMP, " eps=1e-05");
  expect_attrs(g, 2, BC_ATTRS_COMMENT, " eps=1e-05");
  expect_attrs(g, 2, BC_ATTRS_DOT, "");
  expect_attrs(g, 3, BC_ATTRS_DUMP, " hidden=16 act=gelu");
  expect_attrs(g, 3, BC_ATTRS_DOT, "\\nhidden=16 act=gelu");
  expect_attrs(g, 4, BC_ATTRS_DUMP, " out=3");
  expect_attrs(g, 4, BC_ATTRS_COMMENT, "");
  expect_attrs(g, 4, BC_ATTRS_DOT, "\\nout=3");
  // After fusion the Add and the LayerNorm are one AddLayerNorm node.
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  int fused = -1;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i].op == BC_OP_ADD_LN) fused = i;
  assert_true(fused >= 0);
  expect_attrs(g, fused, BC_ATTRS_DUMP, " alpha=0.5 beta=1 eps=1e-05");
  expect_attrs(g, fused, BC_ATTRS_COMMENT, " eps=1e-05");
  // Positions: its kind (learned by default) and the table's rows.
  g = tu_parse(ctx, "model t\ndim D = 8\ninput x : [2, 4, D]\n"
                    "a = Positions(x, max=16, params=wpe)\n"
                    "y = Positions(a, kind=sinusoidal)\noutput y\n");
  assert_non_null(g);
  expect_attrs(g, 0, BC_ATTRS_DUMP, " kind=learned max=16");
  expect_attrs(g, 0, BC_ATTRS_COMMENT, " kind=learned max=16");
  expect_attrs(g, 0, BC_ATTRS_DOT, "\\nlearned max=16");
  expect_attrs(g, 1, BC_ATTRS_DUMP, " kind=sinusoidal");
  expect_attrs(g, 1, BC_ATTRS_DOT, "\\nsinusoidal");
  assert_int_equal(g->nparams, 1);
  assert_string_equal(g->params[0].name, "wpe.weight");
  bc_ctx_free(ctx);
}

// Embedding: the row of a tokens op (input 0 token ids, output 0 the query
// shape), its defaults, attributes and printer.
static void test_embedding_row(void **state) {
  (void)state;
  const bc_op_def *d = bcT_def(BC_OP_EMBEDDING);
  assert_string_equal(d->info.name, "Embedding");
  assert_true(d->tokens && !d->broadcast && d->info.in_language);
  assert_int_equal(d->inplace[0], 0);  // a gather never overwrites its ids
  for (int i = 0; i < BC_OP_COUNT; i++)
    if (i != BC_OP_EMBEDDING) assert_false(bcT_def((bc_op)i)->tokens);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx,
                         "model t\ndim T <= 5\ninput ids : tokens[2, T]\n"
                         "a = Embedding(ids, vocab=7, dim=4, params=wte)\n"
                         "b = Embedding(ids, vocab=9, dim=4, params=wpe, scale=sqrt(4))\n"
                         "y = Linear(Add(a, b), out=7, bias=false, params=wte)\noutput y\n");
  assert_non_null(g);
  assert_true(g->nodes[0].emb_scale == 1.0 && g->nodes[1].emb_scale == 2.0);
  assert_int_equal(g->nparams, 2);  // the head is tied to wte
  assert_true(bcI_is_tokens(g, g->inputs[0]) && !bcI_is_lengths(g, g->inputs[0]));
  assert_int_equal(bcI_tokens_vocab(g, g->inputs[0]), 7);  // the smallest reader's
  expect_attrs(g, 0, BC_ATTRS_DUMP, " vocab=7 dim=4");
  expect_attrs(g, 1, BC_ATTRS_DUMP, " vocab=9 dim=4 scale=2");
  expect_attrs(g, 1, BC_ATTRS_DOT, "\\nvocab=9 dim=4");
  bc_node a = g->nodes[0], b = g->nodes[0];
  assert_true(d->same_attrs(&a, &b));
  b.emb_scale = 2.0;
  assert_false(d->same_attrs(&a, &b));
  b = a, b.vocab = 8;
  assert_false(d->same_attrs(&a, &b));
  bc_ctx_free(ctx);
}

// Dropout: its row (in place, no parameters), the default p, the attribute
// printer, the layer finder's comparison; dropout= on Attention and FFN
// (printed only when set, so graphs without it print and emit as before).
static void test_dropout_row(void **state) {
  (void)state;
  const bc_op_def *d = bcT_def(BC_OP_DROPOUT);
  assert_string_equal(d->info.name, "Dropout");
  assert_true(d->info.in_language && !d->tokens && !d->broadcast);
  assert_int_equal(d->inplace[0], 1u);
  assert_int_equal(d->info.npos, 1);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, "model t\ndim D = 8\ninput x : [2, 4, D]\n"
                              "a = Dropout(x)\nb = Dropout(a, p=0.25)\n"
                              "f = FFN(b, hidden=16, params=(u, v), dropout=0.5)\n"
                              "h = FFN(f, hidden=16, params=(u2, v2))\n"
                              "y = Attention(h, heads=2, params=at, dropout=0.125)\noutput y\n");
  assert_non_null(g);
  assert_true(g->nodes[0].dropout == 0.1 && g->nodes[1].dropout == 0.25);
  expect_attrs(g, 0, BC_ATTRS_DUMP, " p=0.1");
  expect_attrs(g, 1, BC_ATTRS_COMMENT, " p=0.25");
  expect_attrs(g, 1, BC_ATTRS_DOT, "\\np=0.25");
  expect_attrs(g, 2, BC_ATTRS_DUMP, " hidden=16 act=relu dropout=0.5");
  expect_attrs(g, 3, BC_ATTRS_DUMP, " hidden=16 act=relu");
  expect_attrs(g, 4, BC_ATTRS_DUMP, " heads=2 causal=false dropout=0.125");
  for (int i = 0; i < g->nnodes; i++) assert_int_equal(g->nodes[i].key_node, i);
  bc_node a = g->nodes[2], b = g->nodes[3];
  assert_false(bcT_def(BC_OP_FFN)->same_attrs(&a, &b));  // dropout differs
  b.dropout = a.dropout;
  assert_true(bcT_def(BC_OP_FFN)->same_attrs(&a, &b));
  a = g->nodes[0], b = g->nodes[1];
  assert_false(d->same_attrs(&a, &b));
  a = g->nodes[4], b = g->nodes[4];
  b.dropout = 0;
  assert_false(bcT_def(BC_OP_ATTENTION)->same_attrs(&a, &b));
  assert_true(bcI_has_dropout(g));
  bc_ctx_free(ctx);
}

// The losses: CrossEntropy's row reads targets at slot 1 (the only
// `targets` row), both loss rows output a scalar (the only `scalar` rows);
// their defaults, attributes and printer.
static void test_loss_rows(void **state) {
  (void)state;
  const bc_op_def *ce = bcT_def(BC_OP_CROSS_ENTROPY), *mse = bcT_def(BC_OP_MSE);
  assert_string_equal(ce->info.name, "CrossEntropy");
  assert_string_equal(mse->info.name, "MSE");
  assert_true(ce->targets && ce->scalar && !ce->tokens && !ce->broadcast);
  assert_true(!mse->targets && mse->scalar && !mse->tokens && !mse->broadcast);
  for (int i = 0; i < BC_OP_COUNT; i++) {
    if (i != BC_OP_CROSS_ENTROPY) assert_false(bcT_def((bc_op)i)->targets);
    if (i != BC_OP_CROSS_ENTROPY && i != BC_OP_MSE) assert_false(bcT_def((bc_op)i)->scalar);
  }
  assert_int_equal(ce->inplace[0], 0);
  assert_int_equal(mse->inplace[0], 0);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx,
                         "model t\ndim T <= 5\ninput lg : [2, T, 7]\ninput tg : tokens[2, T]\n"
                         "input p : [2, T, 7]\n"
                         "a = CrossEntropy(lg, tg)\n"
                         "b = CrossEntropy(lg, tg, label_smoothing=0.1)\n"
                         "c = MSE(lg, p)\noutput a\noutput b\noutput c\n");
  assert_non_null(g);
  assert_true(g->nodes[0].ignore_index == -100 && g->nodes[0].smoothing == 0);
  assert_true(g->nodes[1].smoothing == (double)0.1f);  // a float32 value
  assert_int_equal(bcI_tokens_vocab(g, g->inputs[1]), 7);
  int64_t ig = 0;
  assert_true(bcI_tokens_ignore(g, g->inputs[1], &ig) && ig == -100);
  assert_false(bcI_tokens_ignore(g, g->inputs[0], NULL));
  for (int i = 0; i < 3; i++) assert_int_equal(g->vals[g->outputs[i]].shape.rank, 0);
  expect_attrs(g, 0, BC_ATTRS_DUMP, " ignore_index=-100 label_smoothing=0");
  expect_attrs(g, 0, BC_ATTRS_COMMENT, "");
  expect_attrs(g, 0, BC_ATTRS_DOT, "");
  expect_attrs(g, 1, BC_ATTRS_COMMENT, " ignore_index=-100 label_smoothing=0.100000001");
  expect_attrs(g, 1, BC_ATTRS_DOT, "\\nignore=-100 smoothing=0.1");
  expect_attrs(g, 2, BC_ATTRS_DUMP, "");
  bc_node a = g->nodes[0], b = a;
  assert_true(ce->same_attrs(&a, &b));
  b.ignore_index = 0;
  assert_false(ce->same_attrs(&a, &b));
  b = a, b.smoothing = 0.5;
  assert_false(ce->same_attrs(&a, &b));
  bc_ctx_free(ctx);
}

// Rows with run-time checks (Positions) declare the statuses they return;
// the others have none.
static void test_run_checks(void **state) {
  (void)state;
  for (int i = 0; i < BC_OP_COUNT; i++) {
    const bc_op_def *d = bcT_def((bc_op)i);
    assert_true(!d->run_check == !d->emit_check);
    assert_true(!d->run_check == !d->statuses);
  }
  assert_non_null(bcT_def(BC_OP_POSITIONS)->run_check);
  assert_int_equal(bcT_def(BC_OP_POSITIONS)->statuses, 1u << BC_RUN_EPOS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_has_a_row),
      cmocka_unit_test(test_every_op_has_every_stage),
      cmocka_unit_test(test_rows_are_consistent),
      cmocka_unit_test(test_attribute_defaults),
      cmocka_unit_test(test_one_attribute_printer),
      cmocka_unit_test(test_embedding_row),
      cmocka_unit_test(test_loss_rows),
      cmocka_unit_test(test_run_checks),
      cmocka_unit_test(test_dropout_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
