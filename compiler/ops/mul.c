// ops/mul.c — Mul: out = a * b, elementwise, with broadcasting.
//
// The learned gates and scales of the residual wirings (ReZero's alpha,
// LayerScale's gamma, a sigmoid gate times a branch).  One operand may be
// smaller than the other when its shape is a suffix of the other's or [1]
// ([B, T, D] * [T, D], [B, T, D] * [D], x * [1]): the small operand b of nb
// elements is then repeated along the leading axes, out[i] = a[i] * b[i % nb].
// The output has the full operand's shape; the row's `broadcast` tells the
// interpreter and the reference backward to check the inputs against it.
// The gradient of the small operand sums over the broadcast axes.
//
// Every stage of the op is here, written against ops.h (the first op added
// through the op table, issue 19).
#include "ops.h"

#include <string.h>

// --- parser: the two shapes broadcast; the output takes the larger ----------------
static void mul_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *inp, bc_shape *out) {
  (void)info, (void)posloc, (void)av;
  bc_shape a = *inp, b = bcP_graph(P)->vals[n->in[1]].shape;
  if (bc_shape_broadcasts(&b, &a)) *out = a;
  else if (bc_shape_broadcasts(&a, &b)) *out = b;
  else
    bcP_error_at(P, optok->loc,
                 "Mul: shapes %s and %s do not broadcast (one must be a suffix of the other, "
                 "or [1])",
                 bcP_shape_desc(P, &a), bcP_shape_desc(P, &b));
}

// The input slot of the full operand (the output's element count nel), 0 or
// 1; -1 when neither is full or the other does not divide it.
static int full_slot(int64_t nel, int64_t n0, int64_t n1) {
  int f = n0 == nel ? 0 : n1 == nel ? 1 : -1;
  int64_t nb = f == 0 ? n1 : n0;
  return f >= 0 && nb >= 1 && nel % nb == 0 ? f : -1;
}

// --- reference interpreter: each product in double, rounded once ----------------
static int mul_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t nel = o->s.b * o->s.t * o->s.d;
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0)
    return bcR_node_error(in, n, "%lld and %lld elements do not broadcast to %lld",
                          (long long)o->nel[0], (long long)o->nel[1], (long long)nel);
  const float *a = o->x[f], *b = o->x[1 - f];
  int64_t nb = o->nel[1 - f];
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = (float)((double)a[i] * (double)b[i % nb]);
  return BC_OK;
}

// --- reference backward: no weights; da += dy b, db += dy a summed over ---------
// the broadcast axes
static int mul_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0) return bcR_node_err(tp, n, "operands do not broadcast");
  const double *a = bcR_tape_val(tp, o->vin[f]), *b = bcR_tape_val(tp, o->vin[1 - f]);
  int64_t nb = o->nel[1 - f];
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = a[i] * b[i % nb];
  return BC_OK;
}

static int mul_ref_bwd(struct bcR_bwd *bw, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  (void)nw;
  bc_tape *tp = bcR_bwd_tape(bw);
  int64_t nel = o->s.b * o->s.t * o->s.d;
  int f = full_slot(nel, o->nel[0], o->nel[1]);
  if (f < 0) return bcR_node_err(tp, n, "operands do not broadcast");
  int st = BC_OK;
  int64_t nb = o->nel[1 - f];
  const double *dy = bcR_dy(bw, o->vout[0]);
  const double *a = bcR_tape_val(tp, o->vin[f]), *b = bcR_tape_val(tp, o->vin[1 - f]);
  double *da = bcR_dacc(bw, o->vin[f], &st), *db = bcR_dacc(bw, o->vin[1 - f], &st);
  for (int64_t i = 0; !st && i < nel; i++) {
    da[i] += dy[i] * b[i % nb];
    db[i % nb] += dy[i] * a[i];
  }
  return st;
}

// --- emitted forward: bcrt_mul(n, a, nb, b, y) with a the full operand ------------
static bool e_full(struct bcE_emitter *E, int v, int out) {
  return bcE_numel_bound(E, v) == bcE_numel_bound(E, out) &&
         !strcmp(bcE_numel(E, v), bcE_numel(E, out));
}

static void mul_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  int y = n->out[0];
  int f = e_full(E, n->in[0], y) ? 0 : e_full(E, n->in[1], y) ? 1 : -1;
  int64_t nb = f < 0 ? 0 : bcE_numel_bound(E, n->in[1 - f]);
  if (f < 0 || nb < 1 || bcE_numel_bound(E, y) % nb) {
    bcE_fail(E, "node %d: Mul operands do not broadcast to the output", n->id);
    return;
  }
  int a = n->in[f], b = n->in[1 - f];
  bc_sb_add(bcE_body(E), "  bcrt_mul(%s, %s, %s, %s, %s);\n", bcE_numel(E, y), bcE_vptr(E, a),
            bcE_numel(E, b), bcE_vptr(E, b), bcE_vptr(E, y));
}

// --- emitted backward: the same forward, then bcrt_mul_bwd ------------------------
// The full operand's slot (the output's dims; input 0 when both are), and
// the dims of the output and of each operand in that order.
static int g_operands(struct bcG_emitter *E, const bc_node *n, bcG_dims d[3]) {
  d[0] = bcG_dims_of(E, n->out[0]);
  bcG_dims d0 = bcG_dims_of(E, n->in[0]);
  int f = d0.D == d[0].D && !strcmp(d0.rows, d[0].rows) ? 0 : 1;
  d[1] = bcG_dims_of(E, n->in[f]);
  d[2] = bcG_dims_of(E, n->in[1 - f]);
  return f;
}

static void mul_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims d[3];
  int f = g_operands(E, n, d);
  bcG_kput(E, "  bcrt_mul((long)%s*%lld, %s, (long)%s*%lld, %s, %s);\n", d[0].rows,
           (long long)d[0].D, bcG_val(E, n->in[f]), d[2].rows, (long long)d[2].D,
           bcG_val(E, n->in[1 - f]), bcG_val(E, n->out[0]));
}

static void mul_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims d[3];
  int f = g_operands(E, n, d);
  bcG_kput(E, "  bcrt_mul_bwd((long)%s*%lld, %s, %s, (long)%s*%lld, %s, %s, %s);\n", d[0].rows,
           (long long)d[0].D, bcG_dval(E, n->out[0]), bcG_val(E, n->in[f]), d[2].rows,
           (long long)d[2].D, bcG_val(E, n->in[1 - f]), bcG_dval(E, n->in[f]),
           bcG_dval(E, n->in[1 - f]));
}

// --- printing: no attributes -------------------------------------------------------
static void mul_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  (void)n, (void)view, (void)out;
}

const bc_op_def bcT_mul = {
    .op = BC_OP_MUL,
    .rowwise = true,
    .info = {"Mul", true, 2, 2, 2, 1, 1, "a * b (b broadcast: a suffix of a's shape, or [1])",
             {{0}}},
    .inplace = {3u},  // the pass gives y only an input of y's own shape
    .broadcast = true,
    .params = "none",
    .dot_color = "#eeeeee",
    .defaults = bcT_norm_defaults,
    .same_attrs = bcT_norm_same,
    .attrs = mul_attrs,
    .build = mul_build,
    .scratch = bcM_no_scratch,
    .interp = mul_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = mul_ref_fwd,
    .ref_bwd = mul_ref_bwd,
    .emit = mul_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = mul_grad_fwd,
    .grad_bwd = mul_grad_bwd,
};
