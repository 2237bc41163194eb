// ops/ffn.c — FFN: act(x W1^T + b1) W2^T + b2, or gated (swiglu, geglu:
// down(act(gate x) * up x)).
//
// Parameters: up weight and bias, down weight and bias, gate weight and
// bias (gated only).  Scratch: the hidden activations (and the gate's).
#include "ops.h"

// FFN and Linear share bc_node's dense attribute struct.
void bcT_dense_defaults(bc_node *n) {
  n->hidden = 0;
  n->act = BC_ACT_RELU;
}

bool bcT_dense_same(const bc_node *a, const bc_node *b) {
  return a->hidden == b->hidden && a->act == b->act;
}

static void ffn_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  bc_sb_add(out, view == BC_ATTRS_DOT ? "\\nhidden=%lld act=%s" : " hidden=%lld act=%s",
            (long long)n->hidden, bcI_act_name(n->act));
  if (view == BC_ATTRS_DUMP && n->in_out) bc_sb_add(out, " layout=in_out");
}

const bc_op_def bcT_ffn = {
    .op = BC_OP_FFN,
    .info = {"FFN", true, 1, 1, 1, 1, 1, "act(x W1^T + b1) W2^T + b2, or gated",
             {{"hidden", BC_AT_INT, true, 0}, {"act", BC_AT_ACT, false, 0},
              {"params", BC_AT_PATH2, false, 0}, {"up", BC_AT_PATH, false, 0},
              {"down", BC_AT_PATH, false, 0}, {"gate", BC_AT_PATH, false, 0},
              {"bias", BC_AT_BOOL, false, 0}, {"layout", BC_AT_LAYOUT, false, 0}}},
    .params = "up weight (F, D) and bias, down weight (D, F) and bias, gate weight and bias",
    .dot_color = "#d8efd3",
    .defaults = bcT_dense_defaults,
    .same_attrs = bcT_dense_same,
    .attrs = ffn_attrs,
    .build = bcP_build_ffn,
    .scratch = bcM_scratch_ffn,
    .interp = bcR_run_ffn,
    .ref_weights = bcR_ffn_pieces,
    .ref_fwd = bcR_fwd_ffn,
    .ref_bwd = bcR_bwd_ffn,
    .emit = bcE_emit_ffn,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_bufs_ffn,
    .grad_fwd = bcG_fwd_ffn,
    .grad_bwd = bcG_bwd_ffn,
};
