// test_passes.c — the rewrite passes: dce, fuse-dual, fuse-add-ln, inplace,
// and the pipeline table.  Graphs are built by hand (ir_builders.h), so each
// test states exactly which nodes exist and asserts what fused and what did
// not; the last tests interpret graphs before and after all passes.
#include "testutil.h"
#include "ir_builders.h"

#include <math.h>
#include <string.h>

static bc_graph *small(bc_ctx *ctx, ib_wiring w, int N) {
  bc_graph *g = ib_stack(ctx, w, N, 1, 4, 8, 2, 16);
  assert_non_null(g);
  return g;
}

// Node i, with the op asserted.
static const bc_node *node_op(const bc_graph *g, int i, bc_op op) {
  assert_true(i < g->nnodes);
  assert_string_equal(bcI_op_name(g->nodes[i].op), bcI_op_name(op));
  return &g->nodes[i];
}

// --- pipeline ----------------------------------------------------------------------

static void test_pipeline_table(void **state) {
  (void)state;
  int n;
  const bc_pass *p = bcO_passes(&n);
  const char *want[] = {"dce", "fuse-dual", "fuse-scale", "fuse-act", "fuse-add-ln", "inplace",
                        "plan"};
  assert_int_equal(n, 7);
  for (int i = 0; i < n; i++) {
    assert_string_equal(p[i].name, want[i]);
    assert_non_null(p[i].doc);
    assert_ptr_equal(bcO_find(want[i]), &p[i]);
  }
  assert_null(bcO_find("fuse"));
  assert_null(bcO_find(NULL));
}

static void test_run_until(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small(ctx, IB_POST_LN, 1);
  assert_int_equal(bcO_run_until(g, "nope"), BC_EUSAGE);
  assert_non_null(strstr(errs.buf, "unknown pass 'nope'"));
  assert_int_equal(g->nnodes, 6);  // untouched

  bc_graph *c = bcI_clone(g);
  assert_int_equal(bcO_run_until(c, "fuse-dual"), BC_OK);
  assert_int_equal(ib_count(c, BC_OP_LAYERNORM), 2);  // fuse-add-ln has not run
  assert_false(c->planned);

  c = bcI_clone(g);
  assert_int_equal(bcO_run_until(c, "fuse-add-ln"), BC_OK);
  assert_int_equal(ib_count(c, BC_OP_ADD_LN), 2);
  assert_false(c->planned);

  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_true(g->planned);
  assert_int_equal(bcM_check(g), BC_OK);
  bc_ctx_free(ctx);
}

// --- dce ---------------------------------------------------------------------------

static void test_dce_removes_dead_branch(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int x = b.g->input;
  int dead = ib_ffn(&b, x, 0);          // n0: never read
  int a = ib_attn(&b, x, 0);            // n1
  int dead2 = ib_add(&b, dead, a, "z"); // n2: reads live and dead values, unread itself
  int y = ib_add(&b, x, a, "y");        // n3
  (void)dead2;
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_dce(g), BC_OK);
  assert_int_equal(g->nnodes, 2);
  const bc_node *n0 = node_op(g, 0, BC_OP_ATTENTION);
  const bc_node *n1 = node_op(g, 1, BC_OP_ADD);
  assert_int_equal(n0->id, 0);
  assert_int_equal(n1->id, 1);
  assert_int_equal(n0->out[0], a);  // value ids are stable
  assert_int_equal(n1->out[0], y);
  assert_int_equal(g->vals[y].def, 1);
  assert_int_equal(g->vals[dead].def, -1);
  assert_int_equal(g->output, y);
  // Idempotent.
  assert_int_equal(bcO_dce(g), BC_OK);
  assert_int_equal(g->nnodes, 2);
  bc_ctx_free(ctx);
}

static void test_dce_identity_graph(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  ib_attn(&b, b.g->input, 0);
  bc_graph *g = ib_finish(&b, b.g->input);  // y = x
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->nnodes, 0);
  assert_true(g->planned);
  assert_int_equal(g->arena_floats, 0);
  assert_int_equal(g->arena_lower_bound, 0);
  assert_int_equal(g->vals[g->input].offset, -1);
  assert_int_equal(bcM_check(g), BC_OK);
  bc_ctx_free(ctx);
}

static void test_dce_drops_unread_sum(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int n = ib_node(&b, BC_OP_ADD_LN, 2, b.g->input, a);
  int y = b.g->nodes[n].out[0] = ib_val(&b, "y");
  b.g->nodes[n].out[1] = ib_val(&b, "s");
  b.g->nodes[n].nout = 2;
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_dce(g), BC_OK);
  assert_int_equal(g->nnodes, 2);
  assert_int_equal(g->nodes[1].nout, 1);
  assert_int_equal(g->nodes[1].out[1], -1);
  bc_ctx_free(ctx);
}

// --- fuse-add-ln -----------------------------------------------------------------------

static void test_fuse_post_ln(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small(ctx, IB_POST_LN, 2);
  g->nodes[1].alpha = 1.5;  // DeepNorm-style residual weight survives fusion
  g->nodes[2].eps = 1e-6;
  int s0 = g->nodes[1].out[0], y0 = g->nodes[2].out[0];
  int lnw = g->nodes[2].param[0], lnb = g->nodes[2].param[1];
  assert_int_equal(bcO_fuse_dual(g), BC_OK);
  assert_int_equal(g->nnodes, 12);  // nothing for fuse-dual in Post-LN
  assert_int_equal(bcO_fuse_add_ln(g), BC_OK);
  assert_int_equal(g->nnodes, 8);
  assert_int_equal(ib_count(g, BC_OP_ADD_LN), 4);
  assert_int_equal(ib_count(g, BC_OP_ADD), 0);
  assert_int_equal(ib_count(g, BC_OP_LAYERNORM), 0);
  const bc_node *f = node_op(g, 1, BC_OP_ADD_LN);
  assert_int_equal(f->in[0], g->input);
  assert_int_equal(f->in[1], g->nodes[0].out[0]);
  assert_int_equal(f->out[0], y0);
  assert_int_equal(f->out[1], -1);  // the sum is read by the LN alone
  assert_int_equal(f->nout, 1);
  assert_true(f->alpha == 1.5 && f->beta == 1.0 && f->eps == 1e-6);
  assert_int_equal(f->param[0], lnw);
  assert_int_equal(f->param[1], lnb);
  assert_string_equal(f->fused_from, "Add t.blk:11:10 + LayerNorm t.blk:12:10");
  assert_int_equal(g->vals[s0].def, -1);  // orphaned, id kept
  for (int i = 0; i < 4; i++) {
    node_op(g, 2 * i, i % 2 ? BC_OP_FFN : BC_OP_ATTENTION);
    node_op(g, 2 * i + 1, BC_OP_ADD_LN);
  }
  assert_true(g->vals[g->nodes[7].out[0]].is_output);
  bc_ctx_free(ctx);
}

// fuse-scale: a Mul by a [D] or [1] Param read only by an Add becomes the
// Add's operand scale (either Mul order, either Add slot), and fuse-add-ln
// carries it into AddLayerNorm (LayerScale, Admin; ReZero keeps a plain
// scaled Add).  Not folded: a Mul read twice, a Mul that is an output, a
// [T, D] scale, an Add that broadcasts, Add(m, m); and the interpreter's
// output is bit-identical after the pass.
static void test_fuse_scale(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx,
      "model m\ndim T = 3\ndim D = 4\ninput x : [2, T, D]\n"
      "g = Param(shape=[D], params=g)\na = Param(shape=[1], params=a)\n"
      "y = LayerNorm(Add(Mul(x, g), Linear(x, out=D, params=l1)), params=n1)\n"      // Admin
      "y = Add(y, Mul(a, Linear(y, out=D, params=l2)), beta=0.5)\n"                  // ReZero
      "z = LayerNorm(Add(y, Mul(Linear(y, out=D, params=l3), g)), params=n2)\n"      // LayerScale
      "m = Mul(z, g)\nw = Add(m, m)\n"                                               // Add(m, m)
      "u = Mul(w, a)\nv = Add(u, Linear(u, out=D, params=l4))\n"                    // read twice
      "p = Add(v, Mul(v, Param(shape=[T, D], params=pe)))\n"                         // [T, D]
      "q = Add(Mul(p, g), a)\n"                                                        // broadcast Add
      "output q\n");
  if (!g) fail_msg("%s", errs.buf);
  float x[24], before[24], after[24];
  tu_fill(x, 24, 5);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 3, &w), BC_OK);
  for (int i = 0; i < g->nparams; i++)
    tu_fill(w.p[i], bc_shape_numel(&g->params[i].shape), 10 + (unsigned)i);
  void *io[2] = {x, before};
  assert_int_equal(bcR_run_io(ctx, g, &w, io, NULL), BC_OK);
  int muls = ib_count(g, BC_OP_MUL);
  assert_int_equal(muls, 7);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  // Left: Add(m, m)'s, u (read twice), the [T, D] one, the broadcast Add's.
  assert_int_equal(ib_count(g, BC_OP_MUL), 4);
  int scaled_ln = 0, scaled_add = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->nin < 4) continue;
    assert_true((n->in[2] >= 0) != (n->in[3] >= 0));
    int sc = n->in[2] >= 0 ? n->in[2] : n->in[3];
    assert_int_equal(g->vals[sc].shape.rank, 1);
    scaled_ln += n->op == BC_OP_ADD_LN;
    scaled_add += n->op == BC_OP_ADD;
    assert_non_null(n->fused_from);
  }
  assert_int_equal(scaled_ln, 2);
  assert_int_equal(scaled_add, 1);  // ReZero's
  io[1] = after;
  assert_int_equal(bcR_run_io(ctx, g, &w, io, NULL), BC_OK);
  assert_memory_equal(before, after, sizeof before);
  bcW_free(&w);
  bc_ctx_free(ctx);
}

// fuse-act: an Act read only by an Add becomes that operand's activation,
// applied before a scale fuse-scale gave it (Mul(g, Act(f)) = g * act(f));
// not folded: an Act read twice, an Act that is an output, Add(a, a); the
// interpreter's output is bit-identical after the pass.
static void test_fuse_act(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx,
      "model m\ndim T = 3\ndim D = 4\ninput x : [2, T, D]\n"
      "g = Param(shape=[D], params=g)\n"
      "y = LayerNorm(Add(x, Mul(g, Act(Linear(x, out=D, params=l1), act=silu))), params=n1)\n"
      "y = Add(Act(Linear(y, out=D, params=l2), act=tanh), y, beta=0.5)\n"
      "a = Act(y, act=gelu)\nz = Add(a, a)\n"
      "b = Act(z, act=sigmoid)\nw = Add(b, Linear(b, out=D, params=l3))\n"
      "c = Act(w, act=relu)\nv = Add(c, w)\noutput v\noutput c\n");
  if (!g) fail_msg("%s", errs.buf);
  float x[24], before[2][24], after[2][24];
  tu_fill(x, 24, 7);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 3, &w), BC_OK);
  for (int i = 0; i < g->nparams; i++)
    tu_fill(w.p[i], bc_shape_numel(&g->params[i].shape), 20 + (unsigned)i);
  void *io[3] = {x, before[0], before[1]};
  assert_int_equal(bcR_run_io(ctx, g, &w, io, NULL), BC_OK);
  assert_int_equal(ib_count(g, BC_OP_ACT), 5);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  assert_int_equal(ib_count(g, BC_OP_ACT), 3);  // Add(a, a)'s, b (read twice), c (an output)
  int acted = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->opact[0] || n->opact[1]) {
      acted++;
      assert_true(n->op == BC_OP_ADD_LN || n->op == BC_OP_ADD);
    }
    if (n->op == BC_OP_ADD_LN) {
      assert_int_equal(n->opact[1], 1 + BC_UN_SILU);
      assert_true(n->in[3] >= 0);  // its scale g
    }
  }
  assert_int_equal(acted, 2);
  io[1] = after[0], io[2] = after[1];
  assert_int_equal(bcR_run_io(ctx, g, &w, io, NULL), BC_OK);
  assert_memory_equal(before, after, sizeof before);
  bcW_free(&w);
  bc_ctx_free(ctx);
}

static void test_fuse_pre_ln_keeps_sum(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small(ctx, IB_PRE_LN, 2);
  assert_int_equal(g->nnodes, 13);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  // LN(x) of layer 0 reads the input, not an Add: it stays.
  node_op(g, 0, BC_OP_LAYERNORM);
  assert_int_equal(ib_count(g, BC_OP_LAYERNORM), 1);
  assert_int_equal(ib_count(g, BC_OP_ADD_LN), 4);
  assert_int_equal(ib_count(g, BC_OP_ADD), 0);
  assert_int_equal(g->nnodes, 9);
  // Every residual sum feeds the next residual Add, except the last.
  for (int i = 0; i < 4; i++) {
    const bc_node *f = node_op(g, 2 + 2 * i, BC_OP_ADD_LN);
    if (i < 3) {
      assert_int_equal(f->nout, 2);
      assert_true(f->out[1] >= 0);
      assert_int_equal(g->nodes[2 + 2 * i + 2].in[0], f->out[1]);  // next residual reads the sum
      assert_int_equal(g->nodes[2 + 2 * i + 1].in[0], f->out[0]);  // sublayer reads the LN
    } else {
      assert_int_equal(f->out[1], -1);
      assert_int_equal(f->out[0], g->output);
    }
  }
  bc_ctx_free(ctx);
}

// s = Add(x, a) is read by an FFN *between* the Add and its LN.  Fusing at
// the LN's slot would define s after its reader; the pass fuses at the Add's
// slot and keeps s as the second output.
static void test_fuse_sum_read_before_ln(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);   // n0
  int s = ib_add(&b, b.g->input, a, "s");  // n1
  int f = ib_ffn(&b, s, 0);             // n2 reads s
  int h = ib_ln(&b, s, 0, "norm1", "h");  // n3
  int y = ib_add(&b, h, f, "y");        // n4
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  assert_int_equal(g->nnodes, 4);
  const bc_node *fz = node_op(g, 1, BC_OP_ADD_LN);
  assert_int_equal(fz->out[0], h);
  assert_int_equal(fz->out[1], s);
  node_op(g, 2, BC_OP_FFN);
  assert_int_equal(g->nodes[2].in[0], s);
  node_op(g, 3, BC_OP_ADD);
  bc_ctx_free(ctx);
}

static void test_no_fuse_ln_of_non_add(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int h = ib_ln(&b, a, 0, "norm1", "h");
  int y = ib_ln(&b, h, 0, "norm2", "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  assert_int_equal(g->nnodes, 3);
  assert_int_equal(ib_count(g, BC_OP_LAYERNORM), 2);
  assert_int_equal(ib_count(g, BC_OP_ADD_LN), 0);
  bc_ctx_free(ctx);
}

static void test_fuse_add_read_by_two_lns(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int s = ib_add(&b, b.g->input, a, "s");
  int h1 = ib_ln(&b, s, 0, "norm1", "h1");
  int h2 = ib_ln(&b, s, 0, "norm2", "h2");
  int y = ib_add(&b, h1, h2, "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  assert_int_equal(g->nnodes, 4);
  const bc_node *f = node_op(g, 1, BC_OP_ADD_LN);
  assert_int_equal(f->out[0], h1);
  assert_int_equal(f->out[1], s);
  const bc_node *l = node_op(g, 2, BC_OP_LAYERNORM);
  assert_int_equal(l->in[0], s);
  assert_int_equal(l->out[0], h2);
  bc_ctx_free(ctx);
}

// Add(x, x): the same value in both slots.
static void test_fuse_add_same_input_twice(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int s = ib_add(&b, a, a, "s");
  int y = ib_ln(&b, s, 0, "norm1", "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "inplace"), BC_OK);
  assert_int_equal(g->nnodes, 2);
  const bc_node *f = node_op(g, 1, BC_OP_ADD_LN);
  assert_int_equal(f->in[0], a);
  assert_int_equal(f->in[1], a);
  assert_int_equal(f->out[1], -1);
  assert_int_equal(g->vals[y].alias, -1);  // y is the caller's
  bc_ctx_free(ctx);
}

// --- fuse-dual -------------------------------------------------------------------------

static void test_fuse_residual(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small(ctx, IB_RESIDUAL, 2);
  assert_int_equal(g->nnodes, 18);
  // Layer 0, sublayer 0 is n0 Attention, n1 xd=Add(xd,u), n2 s=Add(xa,u), n3 LN.
  int u = g->nodes[0].out[0], xd1 = g->nodes[1].out[0], xa1 = g->nodes[3].out[0];
  g->nodes[1].alpha = 0.5;
  g->nodes[1].beta = 2.0;
  g->nodes[2].alpha = 3.0;
  g->nodes[2].beta = 4.0;
  // Sublayer 1 written with u first in both Adds: Add(u, xd), Add(u, xa).
  bc_node *n5 = &g->nodes[5], *n6 = &g->nodes[6];
  int t = n5->in[0];
  n5->in[0] = n5->in[1];
  n5->in[1] = t;
  n5->alpha = 5.0;
  n5->beta = 6.0;
  t = n6->in[0];
  n6->in[0] = n6->in[1];
  n6->in[1] = t;
  n6->alpha = 7.0;
  n6->beta = 8.0;
  assert_int_equal(bcO_fuse_dual(g), BC_OK);
  assert_int_equal(ib_count(g, BC_OP_DUAL_ADD_LN), 4);
  assert_int_equal(ib_count(g, BC_OP_ADD), 1);        // y = xa + LN(xd)
  assert_int_equal(ib_count(g, BC_OP_LAYERNORM), 1);  // LN(xd): reads a dual output
  assert_int_equal(g->nnodes, 10);
  const bc_node *d = node_op(g, 1, BC_OP_DUAL_ADD_LN);
  assert_int_equal(d->in[0], g->input);
  assert_int_equal(d->in[1], g->input);
  assert_int_equal(d->in[2], u);
  assert_int_equal(d->out[0], xd1);
  assert_int_equal(d->out[1], xa1);
  assert_true(d->alpha == 0.5 && d->beta == 2.0 && d->alpha2 == 3.0 && d->beta2 == 4.0);
  assert_string_equal(d->fused_from, "Add t.blk:11:10 + Add t.blk:12:10 + LayerNorm t.blk:13:10");
  const bc_node *e = node_op(g, 3, BC_OP_DUAL_ADD_LN);
  assert_int_equal(e->in[0], xd1);
  assert_int_equal(e->in[1], xa1);
  assert_int_equal(e->in[2], g->nodes[2].out[0]);
  assert_true(e->alpha == 6.0 && e->beta == 5.0 && e->alpha2 == 8.0 && e->beta2 == 7.0);
  // fuse-add-ln has nothing left to do.
  assert_int_equal(bcO_fuse_add_ln(g), BC_OK);
  assert_int_equal(g->nnodes, 10);
  bc_ctx_free(ctx);
}

// b's graph with output y, through fuse-dual (asserting it succeeds and
// leaves nnodes nodes).
static bc_graph *finish_dual(ib *b, int y, int nnodes) {
  bc_graph *g = ib_finish(b, y);
  assert_non_null(g);
  assert_int_equal(bcO_fuse_dual(g), BC_OK);
  assert_int_equal(g->nnodes, nnodes);
  return g;
}

// xa is computed from xd' (an FFN between the two Adds reads xd'): the fused
// node would have to be both before that FFN (it defines xd') and after it
// (it reads xa).  No position is legal, so fuse-dual must leave it; the
// second Add still fuses with its LN.
static void test_no_dual_without_legal_slot(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int x = b.g->input;
  int u = ib_attn(&b, x, 0);          // n0
  int xd = ib_add(&b, x, u, "xd");    // n1
  int xa = ib_ffn(&b, xd, 0);         // n2 reads xd'
  int s = ib_add(&b, xa, u, "s");     // n3
  int h = ib_ln(&b, s, 0, "norm1", "h");  // n4
  int y = ib_add(&b, h, xd, "y");     // n5
  bc_graph *g = finish_dual(&b, y, 6);
  assert_int_equal(ib_count(g, BC_OP_DUAL_ADD_LN), 0);
  assert_int_equal(bcO_fuse_add_ln(g), BC_OK);
  assert_int_equal(ib_count(g, BC_OP_ADD_LN), 1);
  assert_int_equal(g->nodes[3].out[0], h);
  bc_ctx_free(ctx);
}

// A reader of xd' sits between the two Adds: the later slots are illegal
// for xd', the earliest one (A1's) works because xa is defined before it.
static void test_dual_placed_early_when_needed(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int x = b.g->input;
  int xa = ib_ffn(&b, x, 1);          // n0
  int u = ib_attn(&b, x, 0);          // n1
  int xd = ib_add(&b, x, u, "xd");    // n2
  int r = ib_ffn(&b, xd, 0);          // n3 reads xd'
  int s = ib_add(&b, xa, u, "s");     // n4
  int h = ib_ln(&b, s, 0, "norm1", "h");  // n5
  int y = ib_add(&b, h, r, "y");      // n6
  bc_graph *g = finish_dual(&b, y, 5);
  const bc_node *d = node_op(g, 2, BC_OP_DUAL_ADD_LN);
  assert_int_equal(d->out[0], xd);
  assert_int_equal(d->out[1], h);
  node_op(g, 3, BC_OP_FFN);
  bc_ctx_free(ctx);
}

// The normalised stream's sum is read elsewhere: the dual kernel would not
// produce it, so no DUAL_ADD_LN (fuse-add-ln then keeps the sum instead).
static void test_no_dual_when_sum_is_read(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int x = b.g->input;
  int u = ib_attn(&b, x, 0);
  int xd = ib_add(&b, x, u, "xd");
  int s = ib_add(&b, x, u, "s");
  int h = ib_ln(&b, s, 0, "norm1", "h");
  int t = ib_add(&b, h, s, "t");
  int y = ib_add(&b, t, xd, "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "fuse-add-ln"), BC_OK);
  assert_int_equal(ib_count(g, BC_OP_DUAL_ADD_LN), 0);
  assert_int_equal(ib_count(g, BC_OP_ADD_LN), 1);
  const bc_node *f = node_op(g, 2, BC_OP_ADD_LN);
  assert_int_equal(f->out[1], s);
  bc_ctx_free(ctx);
}

// --- inplace ---------------------------------------------------------------------------

static bool reads(const bc_node *n, int v) {
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] == v) return true;
  return false;
}

// Checks the kernel rules on every alias, whatever graph produced them.
static void check_alias_rules(const bc_graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nout; k++) {
      if (n->out[k] < 0) continue;
      int w = g->vals[n->out[k]].alias;
      if (w < 0) continue;
      assert_true(reads(n, w));
      assert_int_not_equal(w, g->input);
      assert_false(g->vals[w].is_output);
      assert_true(bc_shape_eq(&g->vals[w].shape, &g->vals[n->out[k]].shape));
      for (int j = i + 1; j < g->nnodes; j++) assert_false(reads(&g->nodes[j], w));
      switch (n->op) {
      case BC_OP_ADD: break;
      case BC_OP_LAYERNORM: assert_int_equal(w, n->in[0]); break;
      case BC_OP_ADD_LN:
        if (k == 1 && n->out[0] >= 0) assert_int_not_equal(g->vals[n->out[0]].alias, w);
        break;
      case BC_OP_DUAL_ADD_LN:
        assert_int_equal(w, n->in[k]);  // xd' over xd, xa' over xa
        assert_int_not_equal(w, n->in[2]);
        break;
      default: fail_msg("%s output marked in place", bcI_op_name(n->op));
      }
    }
  }
}

static void test_inplace_wirings(void **state) {
  (void)state;
  for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = small(ctx, (ib_wiring)w, 3);
    assert_int_equal(bcO_run_until(g, "inplace"), BC_OK);
    check_alias_rules(g);
    int naliased = 0;
    for (int v = 0; v < g->nvals; v++) naliased += g->vals[v].alias >= 0;
    // Post-LN: every ADD_LN but the first (which reads the input) overwrites
    // its residual input or sublayer output.  Pre-LN: every ADD_LN writes both
    // its LN and its sum in place.  ResiDual: both streams in place after layer 0.
    if (w == IB_POST_LN) assert_int_equal(naliased, 5);
    if (w == IB_PRE_LN) assert_true(naliased >= 9);
    if (w == IB_RESIDUAL) assert_true(naliased >= 8);
    // Idempotent.
    int *before = malloc((size_t)g->nvals * sizeof(int));
    for (int v = 0; v < g->nvals; v++) before[v] = g->vals[v].alias;
    assert_int_equal(bcO_inplace(g), BC_OK);
    for (int v = 0; v < g->nvals; v++) assert_int_equal(g->vals[v].alias, before[v]);
    free(before);
    bc_ctx_free(ctx);
  }
}

static void test_inplace_add_ln_both_outputs(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = small(ctx, IB_PRE_LN, 2);
  assert_int_equal(bcO_run_until(g, "inplace"), BC_OK);
  // n4: the FFN residual of layer 0 (reads the attention sum and f).
  const bc_node *f = node_op(g, 4, BC_OP_ADD_LN);
  assert_true(f->out[1] >= 0);
  int a0 = g->vals[f->out[0]].alias, a1 = g->vals[f->out[1]].alias;
  assert_true(a0 >= 0 && a1 >= 0 && a0 != a1);
  assert_true(reads(f, a0) && reads(f, a1));
  bc_ctx_free(ctx);
}

// Add(a, a) dying at an ADD_LN whose sum is also kept: only one of the two
// outputs may take a's buffer.
static void test_inplace_same_input_twice(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int s = ib_add(&b, a, a, "s");
  int h = ib_ln(&b, s, 0, "norm1", "h");
  int y = ib_add(&b, h, s, "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, "inplace"), BC_OK);
  const bc_node *f = node_op(g, 1, BC_OP_ADD_LN);
  assert_int_equal(f->out[1], s);
  assert_int_equal(g->vals[h].alias, a);
  assert_int_equal(g->vals[s].alias, -1);
  check_alias_rules(g);
  assert_int_equal(bcM_plan(g), BC_OK);
  assert_int_equal(bcM_check(g), BC_OK);
  bc_ctx_free(ctx);
}

static void test_inplace_never_attention_ffn(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int f = ib_ffn(&b, a, 0);   // a dies here: still no alias
  int h = ib_attn(&b, f, 1);  // f dies here
  int y = ib_ln(&b, h, 0, "norm", "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_inplace(g), BC_OK);
  for (int v = 0; v < g->nvals; v++) assert_int_equal(g->vals[v].alias, -1);
  bc_ctx_free(ctx);
}

// --- semantics preserved ------------------------------------------------------------------

static void run(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, const float *x, float *y) {
  assert_int_equal(bcR_run(ctx, g, w, x, y), BC_OK);
}

static void test_interp_before_after(void **state) {
  (void)state;
  for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = ib_stack(ctx, (ib_wiring)w, 2, 2, 5, 16, 4, 24);
    assert_non_null(g);
    if (w == IB_RESIDUAL) {  // non-default, swapped coefficients as well
      g->nodes[1].beta = 0.5;
      g->nodes[2].alpha = 1.25;
    }
    bc_weights wt;
    ib_weights(g, 7 + (uint64_t)w, &wt);
    size_t n = 2 * 5 * 16;
    float *x = malloc(n * sizeof(float)), *y0 = malloc(n * sizeof(float)),
          *y1 = malloc(n * sizeof(float));
    uint64_t seed = 99;
    for (size_t i = 0; i < n; i++) x[i] = ib_rand(&seed, 1.0f);
    run(ctx, g, &wt, x, y0);
    bc_graph *c = bcI_clone(g);
    assert_int_equal(bcO_run_until(c, NULL), BC_OK);
    assert_true(c->nnodes < g->nnodes);
    run(ctx, c, &wt, x, y1);
    double d = tu_max_abs_diff(y0, y1, n);
    if (d != 0.0) fail_msg("wiring %d: max |diff| %g after passes", w, d);
    free(x);
    free(y0);
    free(y1);
    ib_weights_free(&wt);
    bc_ctx_free(ctx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_table),
      cmocka_unit_test(test_run_until),
      cmocka_unit_test(test_dce_removes_dead_branch),
      cmocka_unit_test(test_dce_identity_graph),
      cmocka_unit_test(test_dce_drops_unread_sum),
      cmocka_unit_test(test_fuse_post_ln),
      cmocka_unit_test(test_fuse_pre_ln_keeps_sum),
      cmocka_unit_test(test_fuse_sum_read_before_ln),
      cmocka_unit_test(test_no_fuse_ln_of_non_add),
      cmocka_unit_test(test_fuse_add_read_by_two_lns),
      cmocka_unit_test(test_fuse_add_same_input_twice),
      cmocka_unit_test(test_fuse_residual),
      cmocka_unit_test(test_no_dual_without_legal_slot),
      cmocka_unit_test(test_dual_placed_early_when_needed),
      cmocka_unit_test(test_no_dual_when_sum_is_read),
      cmocka_unit_test(test_inplace_wirings),
      cmocka_unit_test(test_inplace_add_ln_both_outputs),
      cmocka_unit_test(test_inplace_same_input_twice),
      cmocka_unit_test(test_inplace_never_attention_ffn),
      cmocka_unit_test(test_interp_before_after),
      cmocka_unit_test(test_fuse_scale),
      cmocka_unit_test(test_fuse_act),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
