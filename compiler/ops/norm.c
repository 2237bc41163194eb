// ops/norm.c — the norms: LayerNorm, RMSNorm, and the fused forms the passes
// make of a residual Add and the norm that reads it, AddLayerNorm and
// ResiDual's DualAddLayerNorm (node->rms: they normalise with RMSNorm).
//
// All normalise each last-dim row; parameters are [weight (D), bias (D)]
// (-1 where absent).  Every kernel reads a row before writing it, so the
// outputs may overwrite inputs as the in-place masks say.
#include "ops.h"

// Add and the norms share bc_node's first attribute struct.
void bcT_norm_defaults(bc_node *n) {
  n->alpha = n->beta = n->alpha2 = n->beta2 = 1.0;
  n->eps = 1e-5;
  n->rms = false;
  n->offset = 0.0;
  n->opact[0] = n->opact[1] = 0;
}

bool bcT_norm_same(const bc_node *a, const bc_node *b) {
  return a->alpha == b->alpha && a->beta == b->beta && a->alpha2 == b->alpha2 &&
         a->beta2 == b->beta2 && a->eps == b->eps && a->rms == b->rms &&
         a->offset == b->offset &&
         a->opact[0] == b->opact[0] && a->opact[1] == b->opact[1];
}

static void norm_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DUMP || view == BC_ATTRS_COMMENT) bc_sb_add(out, " eps=%.9g", n->eps);
  if ((view == BC_ATTRS_DUMP || view == BC_ATTRS_COMMENT) && n->offset != 0)
    bc_sb_add(out, " offset=%.9g", n->offset);
}

static void fused_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_COMMENT) bc_sb_add(out, " eps=%.9g", n->eps);
  if (view != BC_ATTRS_DUMP) return;
  if (n->alpha != 1.0 || n->beta != 1.0) bc_sb_add(out, " alpha=%.9g beta=%.9g", n->alpha, n->beta);
  if (n->op == BC_OP_DUAL_ADD_LN && (n->alpha2 != 1.0 || n->beta2 != 1.0))
    bc_sb_add(out, " alpha2=%.9g beta2=%.9g", n->alpha2, n->beta2);
  bc_sb_add(out, " eps=%.9g%s", n->eps, n->rms ? " rms" : "");
  if (n->offset != 0) bc_sb_add(out, " offset=%.9g", n->offset);
  bcT_opact_attrs(n, out);
}

bool bcT_add_extra(const bc_node *n) {
  return (n->nin > 2 && (n->in[2] >= 0 || (n->nin > 3 && n->in[3] >= 0))) || n->opact[0] ||
         n->opact[1];
}

void bcT_opact_attrs(const bc_node *n, bc_sbuf *out) {
  for (int k = 0; k < 2; k++)
    if (n->opact[k]) bc_sb_add(out, " act%d=%s", k, bcI_unary_name((bc_unary)(n->opact[k] - 1)));
}

int bcT_opact_rt(const bc_node *n, int k) { return n->opact[k] ? n->opact[k] - 1 : -1; }

const bc_op_def bcT_layernorm = {
    .op = BC_OP_LAYERNORM,
    .rowwise = true,
    .info = {"LayerNorm", true, 1, 1, 1, 1, 1, "(x - mean) / sqrt(var + eps) * w + b",
             {{"eps", BC_AT_FLOAT, false, 0}, {"affine", BC_AT_BOOL, false, 0},
              {"params", BC_AT_PATH, false, 0}, {"bias", BC_AT_BOOL, false, 0}}},
    .inplace = {1u},
    .norm = true,
    .params = "weight (D), bias (D); none with affine=false",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#d6e6f7",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = norm_attrs,
    .build = bcP_build_layernorm,
    .scratch = bcM_no_scratch,
    .interp = bcR_run_layernorm,
    .ref_weights = bcR_norm_pieces,
    .ref_fwd = bcR_fwd_ln_family,
    .ref_bwd = bcR_bwd_ln_family,
    .emit = bcE_emit_layernorm,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = bcG_fwd_layernorm,
    .grad_bwd = bcG_bwd_norms,
};

const bc_op_def bcT_rmsnorm = {
    .op = BC_OP_RMSNORM,
    .rowwise = true,
    .info = {"RMSNorm", true, 1, 1, 1, 1, 1, "x / sqrt(mean(x^2) + eps) * (offset + w)",
             {{"eps", BC_AT_FLOAT, false, 0}, {"params", BC_AT_PATH, true, 0},
              {"offset", BC_AT_FLOAT, false, 0}}},
    .inplace = {1u},
    .norm = true,
    .params = "weight (D)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#d6e6f7",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = norm_attrs,
    .build = bcP_build_rmsnorm,
    .scratch = bcM_no_scratch,
    .interp = bcR_run_layernorm,
    .ref_weights = bcR_norm_pieces,
    .ref_fwd = bcR_fwd_ln_family,
    .ref_bwd = bcR_bwd_ln_family,
    .emit = bcE_emit_layernorm,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = bcG_fwd_rmsnorm,
    .grad_bwd = bcG_bwd_norms,
};

const bc_op_def bcT_add_ln = {
    .op = BC_OP_ADD_LN,
    .rowwise = true,
    .info = {"AddLayerNorm", false, 0, 2, 4, 1, 2, "LN(alpha*a + beta*b), and the sum", {{0}}},
    // y and the sum may each overwrite a or b (never both the same input:
    // bcO_inplace gives an input to one output only).
    .inplace = {3u, 3u},
    .broadcast = true,  // the optional scales (slots 2, 3: 1 or D values; ops/add.c)
    .params = "the norm's: weight (D), bias (D)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#d6e6f7",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = fused_attrs,
    .build = bcP_build_none,
    .scratch = bcM_no_scratch,
    .interp = bcR_run_add_ln,
    .ref_weights = bcR_norm_pieces,
    .ref_fwd = bcR_fwd_ln_family,
    .ref_bwd = bcR_bwd_ln_family,
    .emit = bcE_emit_add_ln,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_bufs_add_ln,
    .grad_fwd = bcG_fwd_add_ln,
    .grad_bwd = bcG_bwd_norms,
};

const bc_op_def bcT_dual_add_ln = {
    .op = BC_OP_DUAL_ADD_LN,
    .rowwise = true,
    .info = {"DualAddLayerNorm", false, 0, 3, 3, 2, 2, "ResiDual: xd + u and LN(xa + u)", {{0}}},
    .inplace = {1u, 2u},  // xd' over xd, xa' over xa; never over u
    .params = "the norm's: weight (D), bias (D)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#d6e6f7",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = fused_attrs,
    .build = bcP_build_none,
    .scratch = bcM_no_scratch,
    .interp = bcR_run_dual_add_ln,
    .ref_weights = bcR_norm_pieces,
    .ref_fwd = bcR_fwd_ln_family,
    .ref_bwd = bcR_bwd_ln_family,
    .emit = bcE_emit_dual,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_bufs_dual,
    .grad_fwd = bcG_fwd_add_ln,
    .grad_bwd = bcG_bwd_norms,
};
