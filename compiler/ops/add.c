// ops/add.c — Add: out = alpha*a + beta*b, elementwise over equal shapes.
//
// The residual connection of every Transformer wiring.  The passes fuse it
// into the norm that reads it (ops/norm.c: AddLayerNorm, DualAddLayerNorm);
// left alone it is one bcrt_add call that may write over either input.
#include "ops.h"

static void add_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (n->alpha == 1.0 && n->beta == 1.0) return;
  if (view == BC_ATTRS_DUMP) bc_sb_add(out, " alpha=%.9g beta=%.9g", n->alpha, n->beta);
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\nalpha=%g beta=%g", n->alpha, n->beta);
}

const bc_op_def bcT_add = {
    .op = BC_OP_ADD,
    .info = {"Add", true, 2, 2, 2, 1, 1, "alpha*a + beta*b",
             {{"alpha", BC_AT_FLOAT, false, 0}, {"beta", BC_AT_FLOAT, false, 0}}},
    .inplace = {3u},
    .params = "none",
    .dot_color = "#eeeeee",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = add_attrs,
    .build = bcP_build_add,
    .interp = bcR_run_add,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = bcR_fwd_add,
    .ref_bwd = bcR_bwd_add,
    .emit = bcE_emit_add,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = bcG_fwd_add,
    .grad_bwd = bcG_bwd_add,
};
