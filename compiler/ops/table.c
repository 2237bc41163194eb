// ops/table.c — the op table: the row of every op, collected from the file
// of its kind (add.c, mul.c, norm.c, attention.c, ffn.c, linear.c,
// embedding.c, positions.c, dropout.c, loss.c, param.c, act.c, softcap.c), the shared attribute printer and the walk over
// the optional run-time checks.  ops.h describes a row; the table's size is
// asserted against BC_OP_COUNT and tests/test_ops.c checks every row is complete.
#include "ops.h"

extern const bc_op_def bcT_add, bcT_layernorm, bcT_rmsnorm, bcT_add_ln, bcT_dual_add_ln,
    bcT_attention, bcT_ffn, bcT_linear, bcT_mul, bcT_embedding, bcT_positions, bcT_dropout,
    bcT_cross_entropy, bcT_mse, bcT_param, bcT_act, bcT_softcap;

static const bc_op_def *const table[] = {
    [BC_OP_ADD] = &bcT_add,
    [BC_OP_LAYERNORM] = &bcT_layernorm,
    [BC_OP_ATTENTION] = &bcT_attention,
    [BC_OP_FFN] = &bcT_ffn,
    [BC_OP_LINEAR] = &bcT_linear,
    [BC_OP_RMSNORM] = &bcT_rmsnorm,
    [BC_OP_ADD_LN] = &bcT_add_ln,
    [BC_OP_DUAL_ADD_LN] = &bcT_dual_add_ln,
    [BC_OP_MUL] = &bcT_mul,
    [BC_OP_EMBEDDING] = &bcT_embedding,
    [BC_OP_POSITIONS] = &bcT_positions,
    [BC_OP_DROPOUT] = &bcT_dropout,
    [BC_OP_CROSS_ENTROPY] = &bcT_cross_entropy,
    [BC_OP_MSE] = &bcT_mse,
    [BC_OP_PARAM] = &bcT_param,
    [BC_OP_ACT] = &bcT_act,
    [BC_OP_SOFTCAP] = &bcT_softcap,
};
_Static_assert(sizeof table / sizeof table[0] == BC_OP_COUNT, "one op table row per bc_op");

const bc_op_def *bcT_def(bc_op op) {
  return (op >= 0 && op < BC_OP_COUNT) ? table[op] : NULL;
}

void bcT_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  const bc_op_def *d = bcT_def(n->op);
  if (d && d->attrs) d->attrs(n, view, out);
}

const char *bcT_init_sel(const bc_node *n, int k) {
  const bc_op_def *d = bcT_def(n->op);
  return d && d->init_sel && k >= 0 && k < BC_MAX_NODE_PARAMS ? d->init_sel(n, k) : NULL;
}

const char *bcT_init_sel_wb(const bc_node *n, int k) {
  (void)n;
  return k == 0 ? "weight" : k == 1 ? "bias" : NULL;
}

int bcT_run_checks(bc_ctx *ctx, const bc_graph *g, const long *rt, long pos, bool step,
                   const char *who) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_op_def *d = bcT_def(g->nodes[i].op);
    int st = d && d->run_check ? d->run_check(ctx, g, &g->nodes[i], rt, pos, step, who) : BC_OK;
    if (st) return st;
  }
  return BC_OK;
}

unsigned bcT_statuses(const bc_graph *g) {
  unsigned m = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_op_def *d = bcT_def(g->nodes[i].op);
    if (d) m |= d->statuses;
  }
  return m;
}
