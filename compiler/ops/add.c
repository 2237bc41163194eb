// ops/add.c — Add: out = alpha*a + beta*b, elementwise over equal shapes.
//
// The residual connection of every Transformer wiring.  The passes fuse it
// into the norm that reads it (ops/norm.c: AddLayerNorm, DualAddLayerNorm);
// left alone it is one bcrt_add call that may write over either input.
//
// Every stage of the op is here, written against ops.h: the template for a
// new elementwise op.
#include "ops.h"

// --- parser: both inputs of one shape; alpha=, beta= ------------------------------
static void add_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *inp, bc_shape *out) {
  (void)posloc, (void)out;
  bc_graph *g = bcP_graph(P);
  bc_shape in = *inp;
  bc_shape in2 = g->vals[n->in[1]].shape;
  if (!bc_shape_eq(&in, &in2))
    bcP_error_at(P, optok->loc, "shape mismatch in Add: first input is %s but second is %s",
                 bcP_shape_desc(P, &in), bcP_shape_desc(P, &in2));
  int ka = bcP_attr(P, info, "alpha"), kb = bcP_attr(P, info, "beta");
  if (av->have[ka]) n->alpha = av->fval[ka];
  if (av->have[kb]) n->beta = av->fval[kb];
}

// --- reference interpreter ------------------------------------------------------
static int add_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  (void)in;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const float *a = o->x[0], *b = o->x[1];
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = (float)(n->alpha * a[i] + n->beta * b[i]);
  return BC_OK;
}

// --- reference backward: no weights; da += alpha dy, db += beta dy --------------
static int add_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *a = bcR_tape_val(tp, o->vin[0]), *b = bcR_tape_val(tp, o->vin[1]);
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = n->alpha * a[i] + n->beta * b[i];
  return BC_OK;
}

static int add_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *dy = bcR_dy(b, o->vout[0]);
  double *da = bcR_dacc(b, o->vin[0], &st), *db = bcR_dacc(b, o->vin[1], &st);
  for (int64_t i = 0; !st && i < nel; i++) {
    da[i] += n->alpha * dy[i];
    db[i] += n->beta * dy[i];
  }
  return st;
}

// --- emitted forward and backward -------------------------------------------------
static void add_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E) || !bcE_same_numel(E, n, 2)) return;
  char fa[32], fb[32];
  bc_sb_add(bcE_body(E), "  bcrt_add(%s, %s, %s, %s, %s, %s);\n", bcE_numel(E, n->out[0]),
            bcE_flit(E, n->alpha, fa, sizeof fa), bcE_vptr(E, n->in[0]),
            bcE_flit(E, n->beta, fb, sizeof fb), bcE_vptr(E, n->in[1]), bcE_vptr(E, n->out[0]));
}

static void add_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_add((long)%s*%lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_fl(E, n->alpha), bcG_val(E, n->in[0]), bcG_fl(E, n->beta), bcG_val(E, n->in[1]),
           bcG_val(E, n->out[0]));
}

static void add_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_axpy(E, n->in[0], n->alpha, bcG_dval(E, n->out[0]), bcG_dval(E, n->in[0]));
  bcG_axpy(E, n->in[1], n->beta, bcG_dval(E, n->out[0]), bcG_dval(E, n->in[1]));
}

// --- printing -------------------------------------------------------------------
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
