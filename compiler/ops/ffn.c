// ops/ffn.c — FFN: act(x W1^T + b1) W2^T + b2, or gated (swiglu, geglu:
// down(act(gate x) * up x)).
//
// Parameters: up weight and bias, down weight and bias, gate weight and
// bias (gated only).  Scratch: the hidden activations (and the gate's).
// Every stage of the op is here, written against ops.h (its scratch sizes
// are the planner's, plan.c).
#include "ops.h"

#include "blockc_rt.h"  // bcrt_drop_threshold

#include <math.h>
#include <stdlib.h>

// Piece indices of the reference backward: up, down, gate and biases.
enum { PF_UP, PF_BUP, PF_DOWN, PF_BDOWN, PF_GATE, PF_BGATE };

// FFN and Linear share bc_node's dense attribute struct.
void bcT_dense_defaults(bc_node *n) {
  n->hidden = 0;
  n->act = BC_ACT_RELU;
}

bool bcT_dense_same(const bc_node *a, const bc_node *b) {
  return a->hidden == b->hidden && a->act == b->act && a->dropout == b->dropout;
}

// --- the activations, in double (the interpreter and the reference backward) ---
static const double k_pi = 3.14159265358979323846;

// relu is written `x < 0 ? 0 : x` so a NaN passes through (as torch.relu
// does) instead of silently becoming 0.
static double act_f(bc_act act, double x) {
  switch (act) {
  case BC_ACT_RELU: return x < 0 ? 0.0 : x;
  case BC_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case BC_ACT_GELU_TANH: case BC_ACT_GEGLU_TANH:
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / k_pi) * (x + 0.044715 * x * x * x)));
  case BC_ACT_SWIGLU: return x / (1.0 + exp(-x));  // silu, on the gate
  case BC_ACT_GEGLU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  default: return NAN;  // unreachable: the entries check act first
  }
}

// d act / dx.  relu' is 1 for x > 0 and 0 otherwise (torch's choice at 0).
static double act_df(bc_act act, double x) {
  switch (act) {
  case BC_ACT_RELU: return x > 0 ? 1.0 : 0.0;
  case BC_ACT_GELU: case BC_ACT_GEGLU:
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * k_pi);
  case BC_ACT_SWIGLU: {
    double sg = 1.0 / (1.0 + exp(-x));
    return sg * (1.0 + x * (1.0 - sg));
  }
  case BC_ACT_GELU_TANH: case BC_ACT_GEGLU_TANH: {
    double c = sqrt(2.0 / k_pi), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
  }
  default: return NAN;
  }
}

// --- parser: params=(up, down), or up=, down= and (gated activations) gate= -------
static void ffn_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *in, bc_shape *out) {
  (void)posloc, (void)out;
  int kh = bcP_attr(P, info, "hidden"), ka = bcP_attr(P, info, "act"),
      kp = bcP_attr(P, info, "params");
  bcP_check_fixed_width(P, info, in, optok->loc, NULL);
  int64_t D = in->d[in->rank - 1], F = av->ival[kh];
  n->hidden = F;
  n->act = av->have[ka] ? av->act[ka] : BC_ACT_RELU;
  n->in_out = bcP_flag(P, info, av, "layout", false);
  bool bias = bcP_flag(P, info, av, "bias", true), gated = bc_act_gated(n->act);
  bc_shape hid = *in;
  hid.d[hid.rank - 1] = F;
  bcP_checked_numel(P, av->loc[kh], &hid, "FFN hidden activation");
  bool named = bcP_have(P, info, av, "up") || bcP_have(P, info, av, "down");
  if (named == av->have[kp])
    bcP_error_at(P, optok->loc, "FFN takes its weights as params=(P1, P2) or as up=U, down=D%s",
                 named ? "; not both" : "");
  if (gated && !bcP_have(P, info, av, "gate"))
    bcP_error_at(P, av->loc[ka], "act=%s is gated: FFN needs gate=G (down(%s(gate(x)) * up(x)))",
                 bcI_act_name(n->act), n->act == BC_ACT_SWIGLU ? "silu" : "gelu");
  if (!gated && bcP_have(P, info, av, "gate"))
    bcP_error_at(P, bcP_loc_of(P, info, av, "gate"),
                 "gate= needs a gated activation (act=swiglu, geglu or geglu_tanh)");
  if (gated && !named)
    bcP_error_at(P, optok->loc, "a gated FFN names its weights up=, down= and gate=");
  if (named && (!bcP_have(P, info, av, "up") || !bcP_have(P, info, av, "down")))
    bcP_error_at(P, optok->loc, "FFN needs both up= and down=");
  const char *up = named ? bcP_path_of(P, info, av, "up") : av->path[kp][0];
  const char *down = named ? bcP_path_of(P, info, av, "down") : av->path[kp][1];
  bc_loc lu = named ? bcP_loc_of(P, info, av, "up") : av->loc[kp];
  bc_loc ld = named ? bcP_loc_of(P, info, av, "down") : av->loc[kp];
  bcP_linear_params(P, n, 0, 1, up, F, D, bias, lu);
  bcP_linear_params(P, n, 2, 3, down, D, F, bias, ld);
  int kd = bcP_attr(P, info, "dropout");
  if (av->have[kd]) {
    n->dropout = av->fval[kd];
    if (!(n->dropout >= 0 && n->dropout < 1))
      bcP_error_at(P, av->loc[kd], "FFN dropout=%g is outside [0, 1) (the probability of zeroing "
                   "a hidden activation in training)", n->dropout);
  }
  if (gated)
    bcP_linear_params(P, n, 4, 5, bcP_path_of(P, info, av, "gate"), F, D, bias,
                      bcP_loc_of(P, info, av, "gate"));
}

// --- reference interpreter ----------------------------------------------------------
// Workspace (in doubles) k_ffn needs for t rows, width d, hidden f.
static int64_t ffn_ws(int64_t t, int64_t d, int64_t f) { return 2 * t * d + 2 * t * f; }

// An FFN node's weights: up (F, D), down (D, F) and, for gated
// activations, gate (F, D).  Biases may be NULL.
typedef struct ffn_def {
  int64_t d, f;
  bc_act act;
  bcR_wview up, down, gate;
  const float *bup, *bdown, *bgate;
  int aq;  // bcR_act_quant: the products' inputs quantized (0: not)
} ffn_def;

// Position-wise FFN over t rows: y = act(x Wup^T + bup) Wdown^T + bdown, or
// gated, y = (act(x Wgate^T + bgate) * (x Wup^T + bup)) Wdown^T + bdown; the
// hidden layer kept in double.
static void k_ffn(int64_t t, const ffn_def *F, const float *x, double *ws, float *y) {
  int64_t d = F->d, f = F->f;
  double *xd = ws;            // [t, d]
  double *hid = xd + t * d;   // [t, f]
  double *gate = hid + t * f; // [t, f]
  double *yd = gate + t * f;  // [t, d]
  for (int64_t i = 0; i < t * d; i++) xd[i] = x[i];
  bcR_quant_x(F->aq, t, d, xd);
  bcR_k_linear(t, d, f, xd, &F->up, F->bup, hid);
  if (bc_act_gated(F->act)) {
    bcR_k_linear(t, d, f, xd, &F->gate, F->bgate, gate);
    for (int64_t i = 0; i < t * f; i++) hid[i] *= act_f(F->act, gate[i]);
  } else {
    for (int64_t i = 0; i < t * f; i++) hid[i] = act_f(F->act, hid[i]);
  }
  bcR_quant_x(F->aq, t, f, hid);
  bcR_k_linear(t, f, d, hid, &F->down, F->bdown, yd);
  for (int64_t i = 0; i < t * d; i++) y[i] = (float)yd[i];
}

static int ffn_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t t = o->s.t, d = o->s.d, f = n->hidden;
  if (f < 1 || f > BC_MAX_DIM) return bcR_node_error(in, n, "hidden=%lld", (long long)f);
  if (n->act < 0 || n->act >= BC_ACT_COUNT)
    return bcR_node_error(in, n, "unknown act %d", (int)n->act);
  ffn_def F = {.d = d, .f = f, .act = n->act, .aq = bcR_act_quant(in)};
  const float *w1, *w2, *wg = NULL;
  bool gated = bc_act_gated(n->act);
  int st;
  if ((st = bcR_fetch_param(in, n, 0, f, d, true, &w1)) ||
      (st = bcR_fetch_param(in, n, 1, f, 0, false, &F.bup)) ||
      (st = bcR_fetch_param(in, n, 2, d, f, true, &w2)) ||
      (st = bcR_fetch_param(in, n, 3, d, 0, false, &F.bdown)) ||
      (gated && (st = bcR_fetch_param(in, n, 4, f, d, true, &wg))) ||
      (gated && (st = bcR_fetch_param(in, n, 5, f, 0, false, &F.bgate))))
    return st;
  F.up = bcR_wfull(w1, f, d, n->in_out);
  F.down = bcR_wfull(w2, d, f, n->in_out);
  if (gated) F.gate = bcR_wfull(wg, f, d, n->in_out);
  double *ws;
  if ((st = bcR_alloc_doubles(in, ffn_ws(t, d, f), &ws))) return st;
  // Position-wise, so batches could be one call; per batch keeps the hidden
  // workspace at [T, F] however large B is.
  for (int64_t bi = 0; bi < o->s.b; bi++) k_ffn(t, &F, o->x[0] + bi * t * d, ws, o->y[0] + bi * t * d);
  free(ws);
  return BC_OK;
}

// --- reference backward: keeps the pre-activations (BCR_SV_H, BCR_SV_GT) ----------
static int ffn_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw) {
  int64_t f = n->hidden;
  if (f < 1 || f > BC_MAX_DIM) return bcR_node_err(tp, n, "hidden=%lld", (long long)f);
  if (n->act < 0 || n->act >= BC_ACT_COUNT) return bcR_node_err(tp, n, "unknown activation");
  bool gated = bc_act_gated(n->act);
  int st;
  if ((st = bcR_set_piece(tp, n, nw, PF_UP, 0, true, 0, f, d, f)) ||
      (st = bcR_set_piece(tp, n, nw, PF_BUP, 1, false, 0, f, 0, f)) ||
      (st = bcR_set_piece(tp, n, nw, PF_DOWN, 2, true, 0, d, f, d)) ||
      (st = bcR_set_piece(tp, n, nw, PF_BDOWN, 3, false, 0, d, 0, d)))
    return st;
  if (!gated) return BC_OK;
  if ((st = bcR_set_piece(tp, n, nw, PF_GATE, 4, true, 0, f, d, f))) return st;
  return bcR_set_piece(tp, n, nw, PF_BGATE, 5, false, 0, f, 0, f);
}

// The FFN's hidden layer: act(h), or act(gate) * h when gated.
static void ffn_hidden(bc_act act, int64_t n, const double *h, const double *gt, double *a) {
  for (int64_t i = 0; i < n; i++) a[i] = gt ? act_f(act, gt[i]) * h[i] : act_f(act, h[i]);
}

// Training with dropout=p: the hidden activation [B, T, F] times the mask
// (element e = its flat index), in place; the backward's own too (the
// factor is the same for a and for d loss / d a).
static void ffn_drop(const bc_tape *tp, const bc_node *n, int64_t nel, double *a) {
  unsigned long long key;
  if (!bcR_dropping(tp, n, n->dropout, &key)) return;
  for (int64_t i = 0; i < nel; i++) a[i] *= bcR_drop_factor(key, n->dropout, i);
}

static int ffn_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, f = n->hidden;
  bool gated = bc_act_gated(n->act);
  int st = BC_OK;
  double **h = bcR_saved(sv, BCR_SV_H), **gt = bcR_saved(sv, BCR_SV_GT);
  *h = bcR_dalloc(tp, rows * f, &st);
  if (gated) *gt = bcR_dalloc(tp, rows * f, &st);
  double *a = bcR_dalloc(tp, rows * f, &st);
  if (!st) {
    const double *x = bcR_tape_val(tp, o->vin[0]);
    bcR_lin_fwd(rows, d, f, x, bcR_nw_w(nw, PF_UP), bcR_nw_w(nw, PF_BUP), *h);
    if (gated) bcR_lin_fwd(rows, d, f, x, bcR_nw_w(nw, PF_GATE), bcR_nw_w(nw, PF_BGATE), *gt);
    ffn_hidden(n->act, rows * f, *h, *gt, a);
    ffn_drop(tp, n, rows * f, a);
    bcR_lin_fwd(rows, f, d, a, bcR_nw_w(nw, PF_DOWN), bcR_nw_w(nw, PF_BDOWN),
                bcR_tape_val(tp, o->vout[0]));
  }
  free(a);
  return st;
}

static int ffn_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  bc_tape *tp = bcR_bwd_tape(b);
  const double *dy = bcR_dy(b, o->vout[0]), *h = bcR_saved_of(tp, n, BCR_SV_H),
               *gt = bcR_saved_of(tp, n, BCR_SV_GT);
  int64_t rows = o->s.b * o->s.t, d = o->s.d, f = n->hidden;
  int st = BC_OK;
  double *dx = bcR_dacc(b, o->vin[0], &st);
  double *a = bcR_dalloc(tp, rows * f, &st), *da = bcR_dalloc(tp, rows * f, &st);
  double *dg = gt ? bcR_dalloc(tp, rows * f, &st) : NULL;
  if (!st) {
    const double *x = bcR_tape_val(tp, o->vin[0]);
    ffn_hidden(n->act, rows * f, h, gt, a);
    ffn_drop(tp, n, rows * f, a);
    bcR_lin_bwd(rows, f, d, a, bcR_nw_w(nw, PF_DOWN), dy, da, bcR_nw_g(nw, PF_DOWN),
                bcR_nw_g(nw, PF_BDOWN));
    ffn_drop(tp, n, rows * f, da);
    for (int64_t i = 0; i < rows * f; i++) {
      if (gt) {  // a = act(gt) * h
        dg[i] = da[i] * h[i] * act_df(n->act, gt[i]);
        da[i] *= act_f(n->act, gt[i]);
      } else {
        da[i] *= act_df(n->act, h[i]);
      }
    }
    bcR_lin_bwd(rows, d, f, x, bcR_nw_w(nw, PF_UP), da, dx, bcR_nw_g(nw, PF_UP),
                bcR_nw_g(nw, PF_BUP));
    if (gt)
      bcR_lin_bwd(rows, d, f, x, bcR_nw_w(nw, PF_GATE), dg, dx, bcR_nw_g(nw, PF_GATE),
                  bcR_nw_g(nw, PF_BGATE));
  }
  free(a);
  free(da);
  free(dg);
  return st;
}

// --- emitted forward -------------------------------------------------------------
// h = act(x Wup^T + bup) with bias and activation in one epilogue pass
// after the GEMM, then y = h Wdown^T + bdown.  Gated (swiglu, geglu): the
// gate GEMM goes to scratch 1 and one pass forms h = act(g + bg) * (h + bup).
// Scratch 0: h [B*T, hidden].
static void ffn_emit(struct bcE_emitter *E, const bc_node *n) {
  int64_t D = bcE_width(E, n->in[0]), F = n->hidden;
  int64_t rows = bcE_rows_bound(E, n->in[0]);
  if (F <= 0 || bcE_numel_bound(E, n->out[0]) != rows * D) {
    bcE_fail(E, "node %d: bad FFN shape", n->id);
    return;
  }
  bcE_ck_int(E, rows, "rows");
  bcE_ck_int(E, F, "hidden");
  bcE_ck_int(E, D, "width");
  bool gated = bc_act_gated(n->act);
  if (!bcE_scratch_ok(E, n, 0, rows * F) || (gated && !bcE_scratch_ok(E, n, 1, rows * F))) return;
  if (n->act < 0 || n->act >= BC_ACT_COUNT) {
    bcE_fail(E, "node %d: bad activation", n->id);
    return;
  }
  const char *x = bcE_vptr(E, n->in[0]), *y = bcE_vptr(E, n->out[0]);
  const char *h = bcE_vptr(E, n->scratch[0]);
  const char *b1 = bcE_wptr(E, n, 1, F), *b2 = bcE_wptr(E, n, 3, D);
  const char *m = bcE_keep(E, bcE_rows(E, n->in[0]));
  bcE_gemm_w(E, m, F, D, x, bcE_wfull(E, n, 0, F, D), "0", "0.0f", h, F);
  if (gated) {
    const char *gt = bcE_vptr(E, n->scratch[1]);
    bcE_gemm_w(E, m, F, D, x, bcE_wfull(E, n, 4, F, D), "0", "0.0f", gt, F);
    if (!bcE_gemm_only(E))
      bc_sb_add(bcE_body(E), "  bcrt_glu(%s, %lld, %s, %s, %s, %s, %s);\n", m, (long long)F, b1,
                bcE_wptr(E, n, 5, F), bcE_act_macro(n->act), h, gt);
  } else if (!bcE_gemm_only(E)) {
    bc_sb_add(bcE_body(E), "  bcrt_bias_act(%s, %lld, %s, %s, %s);\n", m, (long long)F, b1,
              bcE_act_macro(n->act), h);
  }
  bcE_linear_w(E, m, D, F, h, bcE_wfull(E, n, 2, D, F), b2, y, D);
}

// --- emitted backward: keeps the pre-activation(s) and the activation ----------
static int ffn_grad_buffers(struct bcG_emitter *E, const bc_node *n) {
  int64_t rows = bcG_rows_bound(E, n);
  // The activation (after dropout) is kept for the backward's dW of the
  // down projection rather than recomputed there: one [rows, F] buffer
  // more per layer, one elementwise pass (and one mask) less per step —
  // ~1.5% of a GPT-2 training step (docs/analysis.md, "Training speed").
  if (bcG_save_buf(E, n, 0, "pre", rows * n->hidden) < 0 ||
      bcG_temp_buf(E, n, 0, "dact", rows * n->hidden) < 0 ||
      bcG_save_buf(E, n, 2, "act", rows * n->hidden) < 0)
    return -1;
  if (bc_act_gated(n->act) &&  // the gate's pre-activation and its gradient
      (bcG_save_buf(E, n, 1, "gate", rows * n->hidden) < 0 ||
       bcG_temp_buf(E, n, 2, "dgate", rows * n->hidden) < 0))
    return -1;
  return 0;
}

// The FFN's activation a from the kept pre-activation(s) into dst:
// act(pre), or act(gate) * pre when gated.
static void ffn_act(struct bcG_emitter *E, const bc_node *n, const char *rows, const char *dst) {
  if (bc_act_gated(n->act))
    bcG_kput(E, "  bcrt_glu_act(%s, %lld, %s, %s, %s, %s);\n", rows, (long long)n->hidden,
             bcE_act_macro(n->act), bcG_saved(E, n, 0), bcG_saved(E, n, 1), dst);
  else
    bcG_kput(E, "  bcrt_act(%s, %lld, %s, %s, %s);\n", rows, (long long)n->hidden,
             bcE_act_macro(n->act), bcG_saved(E, n, 0), dst);
}

// dropout=p: the hidden activation in dst times the mask, in place, in
// training (bcrt_dropout_rows is its own backward).
static void ffn_drop_rows(struct bcG_emitter *E, const bc_node *n, const char *rows,
                          const char *dst) {
  if (!(n->dropout > 0)) return;
  bcG_kput(E, "  if (BC_training) bcrt_dropout_rows(%s, %lld, %lld, %s, %s, 0, %uu, %s);\n", rows,
           (long long)n->hidden, (long long)n->hidden, dst, bcG_drop_key(E, n),
           bcrt_drop_threshold(n->dropout), bcG_fl(E, 1.0 / (1.0 - n->dropout)));
}

static void ffn_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  const char *x = bcG_val(E, n->in[0]);
  int64_t f = n->hidden;
  bcG_wmat up = bcG_wpiece(E, n, 0, 1, 0, s.D, f), dn = bcG_wpiece(E, n, 2, 3, 0, f, s.D);
  bcG_lin_fwd(E, s.rows, f, s.D, x, s.D, up, bcG_saved(E, n, 0), f);
  if (bc_act_gated(n->act))
    bcG_lin_fwd(E, s.rows, f, s.D, x, s.D, bcG_wpiece(E, n, 4, 5, 0, s.D, f), bcG_saved(E, n, 1),
                f);
  ffn_act(E, n, s.rows, bcG_saved(E, n, 2));
  ffn_drop_rows(E, n, s.rows, bcG_saved(E, n, 2));
  bcG_lin_fwd(E, s.rows, s.D, f, bcG_saved(E, n, 2), f, dn, bcG_val(E, n->out[0]), s.D);
}

static void ffn_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  int64_t f = n->hidden;
  bcG_wmat up = bcG_wpiece(E, n, 0, 1, 0, s.D, f), dn = bcG_wpiece(E, n, 2, 3, 0, f, s.D);
  const char *da = bcG_temp(E, n, 0);  // the activation's gradient
  bcG_lin_bwd(E, s.rows, s.D, f, bcG_saved(E, n, 2), f, dn, bcG_dval(E, n->out[0]), s.D, da, f,
              "0.0f");
  ffn_drop_rows(E, n, s.rows, da);  // d loss / d act
  if (bc_act_gated(n->act)) {
    bcG_kput(E, "  bcrt_glu_bwd(%s, %lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)f,
             bcE_act_macro(n->act), bcG_saved(E, n, 0), bcG_saved(E, n, 1), da, bcG_temp(E, n, 2));
    bcG_lin_bwd(E, s.rows, f, s.D, bcG_val(E, n->in[0]), s.D, bcG_wpiece(E, n, 4, 5, 0, s.D, f),
                bcG_temp(E, n, 2), f, bcG_dval(E, n->in[0]), s.D, "1.0f");
  } else {
    bcG_kput(E, "  bcrt_act_bwd(%s, %lld, %s, %s, %s);\n", s.rows, (long long)f,
             bcE_act_macro(n->act), bcG_saved(E, n, 0), da);
  }
  bcG_lin_bwd(E, s.rows, f, s.D, bcG_val(E, n->in[0]), s.D, up, da, f, bcG_dval(E, n->in[0]),
              s.D, "1.0f");
}

// --- printing -------------------------------------------------------------------
static void ffn_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  bc_sb_add(out, view == BC_ATTRS_DOT ? "\\nhidden=%lld act=%s" : " hidden=%lld act=%s",
            (long long)n->hidden, bcI_act_name(n->act));
  if (view == BC_ATTRS_DUMP && n->in_out) bc_sb_add(out, " layout=in_out");
  if (n->dropout > 0)
    bc_sb_add(out, view == BC_ATTRS_DUMP ? " dropout=%.9g" : " dropout=%g", n->dropout);
}

// init.SEL= selectors: "up", "down", "gate" (gated activations), each with ".bias".
static const char *ffn_init_sel(const bc_node *n, int k) {
  static const char *const sel[] = {"up", "up.bias", "down", "down.bias", "gate", "gate.bias"};
  (void)n;
  return k >= 0 && k < 6 ? sel[k] : NULL;
}

const bc_op_def bcT_ffn = {
    .op = BC_OP_FFN,
    .rowwise = true,
    .info = {"FFN", true, 1, 1, 1, 1, 1, "act(x W1^T + b1) W2^T + b2, or gated",
             {{"hidden", BC_AT_INT, true, 0}, {"act", BC_AT_ACT, false, 0},
              {"params", BC_AT_PATH2, false, 0}, {"up", BC_AT_PATH, false, 0},
              {"down", BC_AT_PATH, false, 0}, {"gate", BC_AT_PATH, false, 0},
              {"bias", BC_AT_BOOL, false, 0}, {"layout", BC_AT_LAYOUT, false, 0},
              {"dropout", BC_AT_FLOAT, false, 0}}},
    .params = "up weight (F, D) and bias, down weight (D, F) and bias, gate weight and bias",
    .init_sel = ffn_init_sel,
    .dot_color = "#d8efd3",
    .defaults = bcT_dense_defaults,
    .same_attrs = bcT_dense_same,
    .attrs = ffn_attrs,
    .build = ffn_build,
    .scratch = bcM_scratch_ffn,
    .interp = ffn_interp,
    .ref_weights = ffn_pieces,
    .ref_fwd = ffn_ref_fwd,
    .ref_bwd = ffn_ref_bwd,
    .emit = ffn_emit,
    .grad_check = bcG_supported,
    .grad_buffers = ffn_grad_buffers,
    .grad_fwd = ffn_grad_fwd,
    .grad_bwd = ffn_grad_bwd,
};
