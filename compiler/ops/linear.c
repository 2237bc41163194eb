// ops/linear.c — Linear: y = x W^T + b with W (out, D); the last dim
// changes from D to out (stored in node->hidden).
//
// Parameters: [weight (out, D), bias (out)], in the node's layout (in_out:
// stored (D, out), GPT-2's Conv1D).  Every stage of the op is here, written
// against ops.h: the template for an op built on one GEMM.
#include "ops.h"

#include <stdlib.h>

// Piece indices of the reference backward.
enum { PL_W, PL_B };

// --- parser: out=, params=, bias=, layout= ----------------------------------------
static void linear_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                         const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                         const bc_shape *inp, bc_shape *out) {
  (void)posloc;
  bc_shape in = *inp;
  int64_t D = in.d[in.rank - 1];
  int ko = bcP_attr(P, info, "out"), kp = bcP_attr(P, info, "params");
  bcP_check_fixed_width(P, info, &in, optok->loc,
                        bc_fmt(bcP_graph(P)->ctx, "%s.weight", av->path[kp][0]));
  int64_t K = av->ival[ko];
  n->hidden = K;
  n->in_out = bcP_flag(P, info, av, "layout", false);
  out->d[out->rank - 1] = K;
  bcP_checked_numel(P, av->loc[ko], out, "Linear output");
  bcP_linear_params(P, n, 0, 1, av->path[kp][0], K, D, bcP_flag(P, info, av, "bias", true),
                    av->loc[kp]);
}

// --- reference interpreter: x and y are widened to double so the shared -------
// linear kernel accumulates exactly as Attention's projections do.
static int linear_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, k = n->hidden;
  if (k < 1 || k > BC_MAX_DIM) return bcR_node_error(in, n, "out=%lld", (long long)k);
  const float *w, *bias;
  int st;
  if ((st = bcR_fetch_param(in, n, 0, k, d, true, &w)) ||
      (st = bcR_fetch_param(in, n, 1, k, 0, false, &bias)))
    return st;
  double *xd, *yd;
  if ((st = bcR_alloc_doubles(in, rows * d, &xd))) return st;
  if ((st = bcR_alloc_doubles(in, rows * k, &yd))) {
    free(xd);
    return st;
  }
  for (int64_t i = 0; i < rows * d; i++) xd[i] = o->x[0][i];
  bcR_quant_x(bcR_act_quant(in), rows, d, xd);
  bcR_wview W = bcR_wfull(w, k, d, n->in_out);
  bcR_k_linear(rows, d, k, xd, &W, bias, yd);
  for (int64_t i = 0; i < rows * k; i++) o->y[0][i] = (float)yd[i];
  free(xd);
  free(yd);
  return BC_OK;
}

// --- reference backward ------------------------------------------------------------
static int linear_pieces(const bc_tape *tp, const bc_node *n, int64_t d,
                         struct bcR_nweights *nw) {
  int st;
  if (n->hidden < 1 || n->hidden > BC_MAX_DIM)
    return bcR_node_err(tp, n, "out=%lld", (long long)n->hidden);
  if (!(st = bcR_set_piece(tp, n, nw, PL_W, 0, true, 0, n->hidden, d, n->hidden)))
    st = bcR_set_piece(tp, n, nw, PL_B, 1, false, 0, n->hidden, 0, n->hidden);
  return st;
}

static int linear_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                          const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)sv;
  bcR_lin_fwd(o->s.b * o->s.t, o->s.d, n->hidden, bcR_tape_val(tp, o->vin[0]), bcR_nw_w(nw, PL_W),
              bcR_nw_w(nw, PL_B), bcR_tape_val(tp, o->vout[0]));
  return BC_OK;
}

static int linear_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                          const struct bcR_nweights *nw) {
  int st = BC_OK;
  double *dx = bcR_dacc(b, o->vin[0], &st);
  if (!st)
    bcR_lin_bwd(o->s.b * o->s.t, o->s.d, n->hidden, bcR_tape_val(bcR_bwd_tape(b), o->vin[0]),
                bcR_nw_w(nw, PL_W), bcR_dy(b, o->vout[0]), dx, bcR_nw_g(nw, PL_W),
                bcR_nw_g(nw, PL_B));
  return st;
}

// --- emitted forward: one GEMM with the bias (linear_w) ---------------------------
static void linear_emit(struct bcE_emitter *E, const bc_node *n) {
  int64_t D = bcE_width(E, n->in[0]), K = n->hidden;
  int64_t rows = bcE_rows_bound(E, n->in[0]);
  if (K <= 0 || bcE_width(E, n->out[0]) != K || bcE_numel_bound(E, n->out[0]) != rows * K) {
    bcE_fail(E, "node %d: bad Linear shape", n->id);
    return;
  }
  bcE_ck_int(E, rows, "rows");
  bcE_ck_int(E, K, "out");
  bcE_ck_int(E, D, "width");
  const char *x = bcE_vptr(E, n->in[0]), *y = bcE_vptr(E, n->out[0]);
  bcE_linear_w(E, bcE_rows(E, n->in[0]), K, D, x, bcE_wfull(E, n, 0, K, D), bcE_wptr(E, n, 1, K),
               y, K);
}

// --- emitted backward: the forward GEMM, then dx, dW and db ------------------------
static void linear_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  const char *x = bcG_val(E, n->in[0]);
  bcG_wmat m = bcG_wpiece(E, n, 0, 1, 0, s.D, n->hidden);
  bcG_lin_fwd(E, s.rows, n->hidden, s.D, x, s.D, m, bcG_val(E, n->out[0]), n->hidden);
}

static void linear_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_wmat m = bcG_wpiece(E, n, 0, 1, 0, s.D, n->hidden);
  bcG_lin_bwd(E, s.rows, n->hidden, s.D, bcG_val(E, n->in[0]), s.D, m, bcG_dval(E, n->out[0]),
              n->hidden, bcG_dval(E, n->in[0]), s.D, "1.0f");
}

// --- printing -------------------------------------------------------------------
static void linear_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DUMP)
    bc_sb_add(out, " out=%lld%s", (long long)n->hidden, n->in_out ? " layout=in_out" : "");
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\nout=%lld", (long long)n->hidden);
}

const bc_op_def bcT_linear = {
    .op = BC_OP_LINEAR,
    .rowwise = true,
    .info = {"Linear", true, 1, 1, 1, 1, 1, "x W^T + b",
             {{"out", BC_AT_INT, true, 0}, {"params", BC_AT_PATH, true, 0},
              {"bias", BC_AT_BOOL, false, 0}, {"layout", BC_AT_LAYOUT, false, 0}}},
    .params = "weight (out, D), bias (out)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#e8e0f4",
    .defaults = bcT_dense_defaults,
    .same_attrs = bcT_dense_same,
    .attrs = linear_attrs,
    .build = linear_build,
    .scratch = bcM_no_scratch,
    .interp = linear_interp,
    .ref_weights = linear_pieces,
    .ref_fwd = linear_ref_fwd,
    .ref_bwd = linear_ref_bwd,
    .emit = linear_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = linear_grad_fwd,
    .grad_bwd = linear_grad_bwd,
};
