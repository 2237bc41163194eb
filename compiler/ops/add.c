// ops/add.c — Add: out = alpha*a + beta*b, elementwise, with broadcasting.
//
// The residual connection of every Transformer wiring.  The passes fuse it
// into the norm that reads it (ops/norm.c: AddLayerNorm, DualAddLayerNorm);
// left alone it is one bcrt_add call that may write over either input.
// As Mul (ops/mul.c), one operand may be smaller when its shape is a suffix
// of the other's or [1] (`x + bias` with a Param [D], `x + Param([1])`):
// out[i] = alpha a[i] + beta b[i % nb] (or the coefficients the other way
// round when a is the small one), and the small operand's gradient sums
// over the broadcast axes.  Only an Add of equal shapes fuses with a norm.
//
// Scaled operands: the fuse-scale pass (passes.c) folds a Mul of one operand
// by a [D] or [1] value (a Param: ReZero's alpha, LayerScale's gamma,
// Admin's omega) into the Add as input slot 2 (the scale of a) or 3 (of b):
// out = alpha*(s2 . a) + beta*(s3 . b), one pass over the stream instead of
// two; such an Add has operands of one shape, and fuse-add-ln carries the
// scales into AddLayerNorm.  No graph file writes slots 2 and 3.
//
// Every stage of the op is here, written against ops.h: the template for a
// new elementwise op.
#include "ops.h"

#include <string.h>

// --- parser: both inputs of one shape; alpha=, beta= ------------------------------
static void add_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *inp, bc_shape *out) {
  (void)posloc;
  bc_graph *g = bcP_graph(P);
  bc_shape in = *inp;
  bc_shape in2 = g->vals[n->in[1]].shape;
  if (bc_shape_broadcasts(&in2, &in)) *out = in;
  else if (bc_shape_broadcasts(&in, &in2)) *out = in2;
  else
    bcP_error_at(P, optok->loc, "shape mismatch in Add: first input is %s but second is %s (one "
                 "must be the other's shape, a suffix of it, or [1])",
                 bcP_shape_desc(P, &in), bcP_shape_desc(P, &in2));
  int ka = bcP_attr(P, info, "alpha"), kb = bcP_attr(P, info, "beta");
  if (av->have[ka]) n->alpha = av->fval[ka];
  if (av->have[kb]) n->beta = av->fval[kb];
}

// The input slot of the full operand (the output's element count nel), 0 or
// 1 (0 when both are); -1 when neither is or the other does not divide it.
static int full_slot(int64_t nel, int64_t n0, int64_t n1) {
  int f = n0 == nel ? 0 : n1 == nel ? 1 : -1;
  int64_t nb = f == 0 ? n1 : n0;
  return f >= 0 && nb >= 1 && nel % nb == 0 ? f : -1;
}

// --- reference interpreter ------------------------------------------------------
static int add_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  if (bcT_add_extra(n)) return bcR_add_scaled_rows(in, n, o, o->y[0], NULL);
  int64_t nel = o->s.b * o->s.t * o->s.d;
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0)
    return bcR_node_error(in, n, "%lld and %lld elements do not broadcast to %lld",
                          (long long)o->nel[0], (long long)o->nel[1], (long long)nel);
  const float *a = o->x[f], *b = o->x[1 - f];
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  int64_t nb = o->nel[1 - f];
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = (float)(ca * a[i] + cb * b[i % nb]);
  return BC_OK;
}

// --- reference backward: no weights; da += alpha dy, db += beta dy --------------
static int add_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  if (bcT_add_extra(n)) return bcR_scaled_sum(tp, n, o, bcR_tape_val(tp, o->vout[0]));
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0) return bcR_node_err(tp, n, "operands do not broadcast");
  const double *a = bcR_tape_val(tp, o->vin[f]), *b = bcR_tape_val(tp, o->vin[1 - f]);
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  int64_t nb = o->nel[1 - f];
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = ca * a[i] + cb * b[i % nb];
  return BC_OK;
}

static int add_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  if (bcT_add_extra(n)) return bcR_scaled_sum_bwd(b, n, o, bcR_dy(b, o->vout[0]));
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0) return bcR_node_err(bcR_bwd_tape(b), n, "operands do not broadcast");
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  int64_t nb = o->nel[1 - f];
  const double *dy = bcR_dy(b, o->vout[0]);
  double *da = bcR_dacc(b, o->vin[f], &st), *db = bcR_dacc(b, o->vin[1 - f], &st);
  for (int64_t i = 0; !st && i < nel; i++) {  // da may be db (Add(x, x))
    da[i] += ca * dy[i];
    db[i % nb] += cb * dy[i];
  }
  return st;
}

// --- emitted forward and backward -------------------------------------------------
static bool e_full(struct bcE_emitter *E, int v, int out) {
  return bcE_numel_bound(E, v) == bcE_numel_bound(E, out) &&
         !strcmp(bcE_numel(E, v), bcE_numel(E, out));
}

static void add_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  char fa[32], fb[32];
  if (bcT_add_extra(n)) {  // scaled / activated operands: one shape, scales of 1 or D values
    int y = n->out[0];
    bc_sb_add(bcE_body(E), "  bcrt_add_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s);\n",
              bcE_rows(E, y), (long long)bcE_width(E, y), bcE_flit(E, n->alpha, fa, sizeof fa),
              bcE_vptr(E, n->in[0]), bcE_scale(E, n, 2), bcT_opact_rt(n, 0),
              bcE_flit(E, n->beta, fb, sizeof fb), bcE_vptr(E, n->in[1]), bcE_scale(E, n, 3),
              bcT_opact_rt(n, 1), bcE_vptr(E, y));
    return;
  }
  int y = n->out[0];
  int f = e_full(E, n->in[0], y) ? 0 : e_full(E, n->in[1], y) ? 1 : -1;
  int64_t nb = f < 0 ? 0 : bcE_numel_bound(E, n->in[1 - f]);
  if (f < 0 || nb < 1 || bcE_numel_bound(E, y) % nb) {
    bcE_fail(E, "node %d: Add operands do not broadcast to the output", n->id);
    return;
  }
  int a = n->in[f], b = n->in[1 - f];
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  if (e_full(E, b, y)) {
    bc_sb_add(bcE_body(E), "  bcrt_add(%s, %s, %s, %s, %s, %s);\n", bcE_numel(E, y),
              bcE_flit(E, n->alpha, fa, sizeof fa), bcE_vptr(E, n->in[0]),
              bcE_flit(E, n->beta, fb, sizeof fb), bcE_vptr(E, n->in[1]), bcE_vptr(E, y));
    return;
  }
  bc_sb_add(bcE_body(E), "  bcrt_add_bcast(%s, %s, %s, %s, %s, %s, %s);\n", bcE_numel(E, y),
            bcE_flit(E, ca, fa, sizeof fa), bcE_vptr(E, a), bcE_flit(E, cb, fb, sizeof fb),
            bcE_numel(E, b), bcE_vptr(E, b), bcE_vptr(E, y));
}

// The full operand's slot (the output's dims; input 0 when both are).
static int g_full(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims y = bcG_dims_of(E, n->out[0]), d0 = bcG_dims_of(E, n->in[0]);
  return d0.D == y.D && !strcmp(d0.rows, y.rows) ? 0 : 1;
}

static bool g_same(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims d0 = bcG_dims_of(E, n->in[0]), d1 = bcG_dims_of(E, n->in[1]);
  return d0.D == d1.D && !strcmp(d0.rows, d1.rows);
}

static void add_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->out[0]);
  if (bcT_add_extra(n)) {
    bcG_kput(E, "  bcrt_add_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s);\n", s.rows,
             (long long)s.D, bcG_fl(E, n->alpha), bcG_val(E, n->in[0]), bcG_scale(E, n, 2),
             bcT_opact_rt(n, 0), bcG_fl(E, n->beta), bcG_val(E, n->in[1]), bcG_scale(E, n, 3),
             bcT_opact_rt(n, 1), bcG_val(E, n->out[0]));
    return;
  }
  if (g_same(E, n)) {
    bcG_kput(E, "  bcrt_add((long)%s*%lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
             bcG_fl(E, n->alpha), bcG_val(E, n->in[0]), bcG_fl(E, n->beta), bcG_val(E, n->in[1]),
             bcG_val(E, n->out[0]));
    return;
  }
  int f = g_full(E, n);
  bcG_dims b = bcG_dims_of(E, n->in[1 - f]);
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  bcG_kput(E, "  bcrt_add_bcast((long)%s*%lld, %s, %s, %s, (long)%s*%lld, %s, %s);\n", s.rows,
           (long long)s.D, bcG_fl(E, ca), bcG_val(E, n->in[f]), bcG_fl(E, cb), b.rows,
           (long long)b.D, bcG_val(E, n->in[1 - f]), bcG_val(E, n->out[0]));
}

static void add_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  if (bcT_add_extra(n)) {
    bcG_scaled_bwd(E, n, bcG_dval(E, n->out[0]));
    return;
  }
  if (g_same(E, n)) {
    bcG_axpy(E, n->in[0], n->alpha, bcG_dval(E, n->out[0]), bcG_dval(E, n->in[0]));
    bcG_axpy(E, n->in[1], n->beta, bcG_dval(E, n->out[0]), bcG_dval(E, n->in[1]));
    return;
  }
  int f = g_full(E, n);
  bcG_dims s = bcG_dims_of(E, n->out[0]), b = bcG_dims_of(E, n->in[1 - f]);
  double ca = f ? n->beta : n->alpha, cb = f ? n->alpha : n->beta;
  bcG_axpy(E, n->in[f], ca, bcG_dval(E, n->out[0]), bcG_dval(E, n->in[f]));
  bcG_kput(E, "  bcrt_sum_bcast((long)%s*%lld, (long)%s*%lld, %s, %s, %s);\n", s.rows,
           (long long)s.D, b.rows, (long long)b.D, bcG_fl(E, cb), bcG_dval(E, n->out[0]),
           bcG_dval(E, n->in[1 - f]));
}

// --- printing -------------------------------------------------------------------
static void add_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DUMP) bcT_opact_attrs(n, out);
  if (n->alpha == 1.0 && n->beta == 1.0) return;
  if (view == BC_ATTRS_DUMP) bc_sb_add(out, " alpha=%.9g beta=%.9g", n->alpha, n->beta);
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\nalpha=%g beta=%g", n->alpha, n->beta);
}

const bc_op_def bcT_add = {
    .op = BC_OP_ADD,
    .rowwise = true,
    .info = {"Add", true, 2, 2, 4, 1, 1, "alpha*a + beta*b (b broadcast: a suffix of a's shape, or [1])",
             {{"alpha", BC_AT_FLOAT, false, 0}, {"beta", BC_AT_FLOAT, false, 0}}},
    .inplace = {3u},  // the pass gives y only an input of y's own shape
    .broadcast = true,
    .params = "none",
    .dot_color = "#eeeeee",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = add_attrs,
    .build = add_build,
    .scratch = bcM_no_scratch,
    .interp = add_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = add_ref_fwd,
    .ref_bwd = add_ref_bwd,
    .emit = add_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = add_grad_fwd,
    .grad_bwd = add_grad_bwd,
};
