// ops/act.c — Act(x, act=relu|gelu|gelu_tanh|silu|sigmoid|tanh): an
// activation as a node, elementwise over any shape.
//
// With Act, Mul and Linear an FFN can be written out (NormFormer's norm
// after the activation), and so can a gate: `x + Mul(Act(Linear(x),
// act=sigmoid), f)` (gated residuals, Highway).  relu is `x < 0 ? 0 : x`
// (a NaN passes, as torch.relu), relu'(0) = 0 (torch's choice); gelu is
// the exact erf form, gelu_tanh PyTorch's approximate='tanh'; silu is
// x sigmoid(x).  The runtime's bcrt_unary / bcrt_unary_bwd compute them in
// float (the FFN kernels' gelu and silu), the interpreter in double.
//
// Every stage of the op is here, written against ops.h.
#include "ops.h"

#include "blockc_rt.h"  // BCRT_UN_*

#include <math.h>
#include <string.h>

_Static_assert(BC_UN_RELU == BCRT_UN_RELU && BC_UN_GELU == BCRT_UN_GELU &&
                   BC_UN_GELU_TANH == BCRT_UN_GELU_TANH && BC_UN_SILU == BCRT_UN_SILU &&
                   BC_UN_SIGMOID == BCRT_UN_SIGMOID && BC_UN_TANH == BCRT_UN_TANH,
               "bc_unary is the runtime's BCRT_UN_* numbering");

static void act_defaults(bc_node *n) { n->unary = BC_UN_RELU; }
static bool act_same(const bc_node *a, const bc_node *b) { return a->unary == b->unary; }

// --- the activations in double ---------------------------------------------------
static const double k_pi = 3.14159265358979323846;

static double un_f(bc_unary u, double x) {
  switch (u) {
  case BC_UN_RELU: return x < 0 ? 0.0 : x;
  case BC_UN_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case BC_UN_GELU_TANH:
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / k_pi) * (x + 0.044715 * x * x * x)));
  case BC_UN_SILU: return x / (1.0 + exp(-x));
  case BC_UN_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case BC_UN_TANH: return tanh(x);
  default: return NAN;  // unreachable: the parser checks act
  }
}

static double un_df(bc_unary u, double x) {
  switch (u) {
  case BC_UN_RELU: return x > 0 ? 1.0 : 0.0;
  case BC_UN_GELU:
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * k_pi);
  case BC_UN_GELU_TANH: {
    double c = sqrt(2.0 / k_pi), v = c * (x + 0.044715 * x * x * x), t = tanh(v);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
  }
  case BC_UN_SILU: {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
  }
  case BC_UN_SIGMOID: {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 - s);
  }
  case BC_UN_TANH: {
    double t = tanh(x);
    return 1.0 - t * t;
  }
  default: return NAN;
  }
}

double bcT_unary_f(bc_unary u, double x) { return un_f(u, x); }
double bcT_unary_df(bc_unary u, double x) { return un_df(u, x); }

// --- parser: act= one of the six words (relu by default) ----------------------------
static void act_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *inp, bc_shape *out) {
  (void)optok, (void)posloc, (void)inp, (void)out;
  int ka = bcP_attr(P, info, "act");
  n->unary = BC_UN_RELU;
  if (!av->have[ka]) return;
  for (int u = 0; u < BC_UN_COUNT; u++)
    if (!strcmp(av->word[ka], bcI_unary_name((bc_unary)u))) {
      n->unary = (bc_unary)u;
      return;
    }
  const char *hint = !strcmp(av->word[ka], "swiglu") || !strcmp(av->word[ka], "geglu")
                         ? " (gated activations belong to FFN: write Mul(Act(g, act=silu), u) "
                           "for one by hand)"
                         : "";
  bcP_error_at(P, av->loc[ka], "Act: unknown activation '%s'; act= takes relu, gelu, gelu_tanh, "
               "silu, sigmoid or tanh%s", av->word[ka], hint);
}

// --- reference interpreter ------------------------------------------------------------
static int act_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  (void)in;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = (float)un_f(n->unary, (double)o->x[0][i]);
  return BC_OK;
}

// --- reference backward: dx += dy act'(x) ---------------------------------------------
static int act_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *x = bcR_tape_val(tp, o->vin[0]);
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = un_f(n->unary, x[i]);
  return BC_OK;
}

static int act_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *dy = bcR_dy(b, o->vout[0]), *x = bcR_tape_val(bcR_bwd_tape(b), o->vin[0]);
  double *dx = bcR_dacc(b, o->vin[0], &st);
  for (int64_t i = 0; !st && i < nel; i++) dx[i] += dy[i] * un_df(n->unary, x[i]);
  return st;
}

// --- emitted forward and backward ----------------------------------------------------
static void act_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E) || !bcE_same_numel(E, n, 1)) return;
  bc_sb_add(bcE_body(E), "  bcrt_unary(%s, %d, %s, %s);\n", bcE_numel(E, n->out[0]),
            (int)n->unary, bcE_vptr(E, n->in[0]), bcE_vptr(E, n->out[0]));
}

static void act_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_unary((long)%s*%lld, %d, %s, %s);\n", s.rows, (long long)s.D,
           (int)n->unary, bcG_val(E, n->in[0]), bcG_val(E, n->out[0]));
}

static void act_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_unary_bwd((long)%s*%lld, %d, %s, %s, %s);\n", s.rows, (long long)s.D,
           (int)n->unary, bcG_val(E, n->in[0]), bcG_dval(E, n->out[0]), bcG_dval(E, n->in[0]));
}

// --- printing ------------------------------------------------------------------------
static void act_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\n%s", bcI_unary_name(n->unary));
  else bc_sb_add(out, " act=%s", bcI_unary_name(n->unary));
}

const bc_op_def bcT_act = {
    .op = BC_OP_ACT,
    .rowwise = true,
    .info = {"Act", true, 1, 1, 1, 1, 1, "act(x) elementwise (relu, gelu, gelu_tanh, silu, sigmoid, tanh)",
             {{"act", BC_AT_WORD, false, 0}}},
    .inplace = {1u},
    .params = "none",
    .dot_color = "#eeeeee",
    .defaults = act_defaults,
    .same_attrs = act_same,
    .attrs = act_attrs,
    .build = act_build,
    .scratch = bcM_no_scratch,
    .interp = act_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = act_ref_fwd,
    .ref_bwd = act_ref_bwd,
    .emit = act_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = act_grad_fwd,
    .grad_bwd = act_grad_bwd,
};
