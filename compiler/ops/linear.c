// ops/linear.c — Linear: x W^T + b with W (out, D); changes the last dim
// to out (stored in node->hidden).
#include "ops.h"

static void linear_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DUMP)
    bc_sb_add(out, " out=%lld%s", (long long)n->hidden, n->in_out ? " layout=in_out" : "");
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\nout=%lld", (long long)n->hidden);
}

const bc_op_def bcT_linear = {
    .op = BC_OP_LINEAR,
    .info = {"Linear", true, 1, 1, 1, 1, 1, "x W^T + b",
             {{"out", BC_AT_INT, true, 0}, {"params", BC_AT_PATH, true, 0},
              {"bias", BC_AT_BOOL, false, 0}, {"layout", BC_AT_LAYOUT, false, 0}}},
    .params = "weight (out, D), bias (out)",
    .dot_color = "#e8e0f4",
    .defaults = bcT_dense_defaults,
    .same_attrs = bcT_dense_same,
    .attrs = linear_attrs,
    .build = bcP_build_linear,
    .interp = bcR_run_linear,
    .ref_weights = bcR_linear_pieces,
    .ref_fwd = bcR_fwd_linear,
    .ref_bwd = bcR_bwd_linear,
    .emit = bcE_emit_linear,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = bcG_fwd_linear,
    .grad_bwd = bcG_bwd_linear,
};
