// ops/param.c — Param(shape=[...], params=NAME): a learned tensor as a value.
//
// The scales and gates of the residual wirings (ReZero's alpha [1],
// LayerScale's gamma [D], Admin's omega [D]) are parameters that enter the
// graph as values, read by Mul and Add (which broadcast them over the
// stream).  The node has no inputs; its output is the parameter itself, of
// the given shape: rank 1 ([D], [1]) or rank 2 ([T, D]), fixed sizes.  The
// parameter is named by the path alone, with no suffix — inside
// `for i in 0..N as layers.{i}`, `params=gamma` reads `layers.3.gamma`, as
// a PyTorch nn.Parameter attribute is named.
//
// Initialisation: `init=` as on every parameter-reading node (`init=zeros`
// for ReZero's alpha, `init=const(1e-4)` for LayerScale's gamma); without
// it the seeded schemes start a Param at ones (bc_param.unit: a scale that
// leaves its operand alone).  Weight decay follows the usual rule: rank < 2
// (a [D] or [1] Param) is not decayed.
//
// Every stage: the output is a copy of the parameter (D floats, nothing
// next to the stream it scales); its gradient is d loss / d output.
#include "ops.h"

#include <string.h>

// --- parser: shape=[...] of fixed sizes, params=NAME ------------------------------
static void param_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                        const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                        const bc_shape *inp, bc_shape *out) {
  (void)posloc, (void)inp, (void)optok;
  int ks = bcP_attr(P, info, "shape"), kp = bcP_attr(P, info, "params");
  bc_shape s = av->shape[ks];
  if (s.rank < 1 || s.rank > 2)
    bcP_error_at(P, av->loc[ks], "Param: shape=%s has rank %d; a Param is a vector [D] (or [1]) "
                 "or a matrix [T, D]", bcP_shape_desc(P, &s), s.rank);
  bc_graph *g = bcP_graph(P);
  bcP_checked_numel(P, av->loc[ks], &s,
                    bc_fmt(g->ctx, "parameter '%s' of shape", av->path[kp][0]));
  int id = bcP_add_param(P, av->path[kp][0], s, av->loc[kp]);
  g->params[id].unit = true;
  n->param[0] = id;
  *out = s;
}

static const char *param_init_sel(const bc_node *n, int k) {
  (void)n;
  return k == 0 ? "weight" : NULL;
}

// The parameter's shape as the fetchers take it: (d0) or (d0, d1).
static void dims_of(const bc_graph *g, const bc_node *n, int64_t *d0, int64_t *d1) {
  *d0 = *d1 = 0;
  if (n->param[0] < 0 || n->param[0] >= g->nparams) return;
  const bc_shape *s = &g->params[n->param[0]].shape;
  *d0 = s->d[0];
  *d1 = s->rank == 2 ? s->d[1] : 0;
}

// --- reference interpreter: y = the parameter -------------------------------------
static int param_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t d0, d1, nel = o->s.b * o->s.t * o->s.d;
  dims_of(bcR_interp_graph(in), n, &d0, &d1);
  const float *w;
  int st = bcR_fetch_param(in, n, 0, d0, d1, true, &w);
  if (st) return st;
  if (d0 * (d1 ? d1 : 1) != nel)
    return bcR_node_error(in, n, "parameter of %lld elements for an output of %lld",
                          (long long)(d0 * (d1 ? d1 : 1)), (long long)nel);
  memcpy(o->y[0], w, (size_t)nel * sizeof *w);
  return BC_OK;
}

// --- reference backward: the parameter's gradient is the output's ------------------
static int param_ref_weights(const bc_tape *tp, const bc_node *n, int64_t d,
                             struct bcR_nweights *nw) {
  (void)d;
  int64_t d0, d1;
  dims_of(bcR_tape_graph(tp), n, &d0, &d1);
  return bcR_set_piece(tp, n, nw, 0, 0, true, 0, d0, d1, d0);
}

static int param_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                         const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *w = bcR_nw_w(nw, 0);
  if (!w) return bcR_node_err(tp, n, "no parameter");
  memcpy(bcR_tape_val(tp, o->vout[0]), w, (size_t)nel * sizeof *w);
  return BC_OK;
}

static int param_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                         const struct bcR_nweights *nw) {
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *dy = bcR_dy(b, o->vout[0]);
  double *g = bcR_nw_g(nw, 0);
  if (!g) return bcR_node_err(bcR_bwd_tape(b), n, "no parameter gradient");
  for (int64_t i = 0; dy && i < nel; i++) g[i] += dy[i];
  return BC_OK;
}

// --- emitted forward and backward: a copy; dW += dy --------------------------------
static void param_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  int y = n->out[0];
  int64_t need = bcE_numel_bound(E, y);
  bc_sb_add(bcE_body(E), "  bcrt_copy(%s, %s, %s);\n", bcE_numel(E, y),
            bcE_wptr(E, n, 0, need), bcE_vptr(E, y));
}

static void param_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims d = bcG_dims_of(E, n->out[0]);
  bcG_wmat W = bcG_wpiece(E, n, 0, -1, 0, 1, 1);
  bcG_kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", d.rows, (long long)d.D, W.p,
          bcG_val(E, n->out[0]));
}

static void param_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_wmat W = bcG_wpiece(E, n, 0, -1, 0, 1, 1);
  bcG_axpy(E, n->out[0], 1.0, bcG_dval(E, n->out[0]), W.dp);
}

// --- printing: the shape is the parameter's -----------------------------------------
static void param_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  (void)n, (void)view, (void)out;
}

const bc_op_def bcT_param = {
    .op = BC_OP_PARAM,
    .info = {"Param", true, 0, 0, 0, 1, 1, "a learned tensor (params=NAME) of shape=[...]",
             {{"shape", BC_AT_SHAPE, true, 0}, {"params", BC_AT_PATH, true, 0}}},
    .broadcast = true,  // no inputs: output 0 gives the query shape
    .params = "the tensor NAME itself, of shape= (no suffix)",
    .init_sel = param_init_sel,
    .dot_color = "#fff2cc",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = param_attrs,
    .build = param_build,
    .scratch = bcM_no_scratch,
    .interp = param_interp,
    .ref_weights = param_ref_weights,
    .ref_fwd = param_ref_fwd,
    .ref_bwd = param_ref_bwd,
    .emit = param_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = param_grad_fwd,
    .grad_bwd = param_grad_bwd,
};
