// ops/positions.c — Positions: y = x + PE[pos], the absolute position
// encodings of the Transformer's input.
//
//   Positions(x, kind=learned, max=P, params=wpe)   y = x + wpe.weight[pos]
//       (GPT-2's wpe, BERT's position_embeddings): one parameter
//       <params>.weight [P, D], rows 0..P-1.  kind=learned is the default.
//   Positions(x, kind=sinusoidal)   y = x + PE, "Attention Is All You Need":
//       PE[pos, c] = sin(pos / 10000^(2i/D)) for c = 2i, cos(pos / 10000^(2i/D))
//       for c = 2i + 1.  An odd D's last column c = D - 1 = 2i is a sine, with
//       its own frequency 10000^(-(D-1)/D) (no cosine partner).
//
// x is [B, T, D] or [T, D] (B = 1); row t of every batch row is position t
// in a run (padded rows too: lengths do not shift positions, as in Hugging
// Face), and pos + t in the step entry when x's sequence axis is the
// stepped dim (the absolute position, as RoPE takes it).  A learned table
// bounds the positions: a fixed sequence axis longer than P is a parse
// error naming both; a run-time sequence dim may be bounded above P (the
// KV cache may hold more than the table), and then a call reaching
// position P is refused at run time: run_check (the CLI, the API and the
// interpreter report "position N is past ...") and emit_check (the emitted
// prologue returns <M>_EPOS, BC_RUN_EPOS, before anything is written).
//
// The interpreter computes the sinusoid's angle pos / 10000^(2i/D) and the
// sum x + PE in double, rounded once; the runtime kernel (bcrt_pos_sinusoid)
// works in double too (precomputed inverse frequencies 10000^(-2i/D), sin
// and cos exact every 32 positions and stepped by the angle-addition formula
// in between, error < 1e-14) and rounds the sum once: the two agree to one
// float ulp of y (bit-identical but where a sum lies within 1e-14 of a
// float rounding boundary).  The learned sum of two floats is exact in
// double, so every backend agrees bit for bit.
//
// The backward: dx = dy; a learned table's row t gathers dy[b, t] summed
// over the batch.  Every stage of the op is here, written against ops.h.
#include "ops.h"

#include <math.h>
#include <string.h>

enum { PP_W };  // the reference backward's piece: the whole table (P, D)

// --- parser: kind=, max=, params= ------------------------------------------------
static const char *const kind_names[] = {"learned", "sinusoidal"};

static bc_pos_kind parse_kind(struct bcP_parser *P, const bc_op_info *info,
                              const bcP_attr_vals *av) {
  int k = bcP_attr(P, info, "kind");
  if (!av->have[k]) return BC_POS_LEARNED;
  for (int i = 0; i < 2; i++)
    if (!strcmp(av->word[k], kind_names[i])) return (bc_pos_kind)i;
  bcP_error_at(P, av->loc[k], "unknown kind '%s' for Positions (expected learned or sinusoidal)",
               av->word[k]);
}

// The sequence axis of x (rank 2 or 3): fixed and longer than max is an error.
static void check_seq(struct bcP_parser *P, const bc_token *optok, const bc_shape *in,
                      int64_t max, const char *param) {
  int ax = in->rank - 2;
  if (in->sym[ax] || in->d[ax] <= max) return;
  bcP_error_at(P, optok->loc,
               "Positions: x %s has %lld positions on its sequence axis, but max=%lld: the table "
               "'%s' [%lld, %lld] holds positions 0..%lld only",
               bcP_shape_desc(P, in), (long long)in->d[ax], (long long)max, param,
               (long long)max, (long long)in->d[in->rank - 1], (long long)(max - 1));
}

static void positions_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                            const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                            const bc_shape *inp, bc_shape *out) {
  (void)out;
  bc_shape in = *inp;
  if (in.rank < 2 || in.rank > 3)
    bcP_error_at(P, posloc[0], "Positions takes x [B, T, D] or [T, D], found %s",
                 bcP_shape_desc(P, &in));
  n->pos_kind = parse_kind(P, info, av);
  bool have_max = bcP_have(P, info, av, "max"), have_params = bcP_have(P, info, av, "params");
  if (n->pos_kind == BC_POS_SINUSOIDAL) {
    if (have_params)
      bcP_error_at(P, bcP_loc_of(P, info, av, "params"),
                   "params= does not apply to kind=sinusoidal: the sinusoid has no parameters "
                   "(kind=learned reads a table)");
    if (have_max)
      bcP_error_at(P, bcP_loc_of(P, info, av, "max"),
                   "max= does not apply to kind=sinusoidal: the sinusoid is defined at every "
                   "position (max= bounds a learned table)");
    bcP_check_fixed_width(P, info, &in, optok->loc, NULL);
    return;
  }
  if (!have_max || !have_params)
    bcP_error_at(P, optok->loc,
                 "Positions with kind=learned%s needs %s: the table's rows (n_positions) and "
                 "its parameter path, like Positions(x, max=1024, params=wpe)",
                 bcP_have(P, info, av, "kind") ? "" : " (the default)",
                 !have_max && !have_params ? "max= and params=" : !have_max ? "max=" : "params=");
  const char *base = bcP_path_of(P, info, av, "params");
  const char *wname = bc_fmt(bcP_graph(P)->ctx, "%s.weight", base);
  bcP_check_fixed_width(P, info, &in, optok->loc, wname);
  n->pos_max = av->ival[bcP_attr(P, info, "max")];
  check_seq(P, optok, &in, n->pos_max, wname);
  bcP_linear_params(P, n, 0, 1, base, n->pos_max, in.d[in.rank - 1], false,
                    bcP_loc_of(P, info, av, "params"));
}

// --- the sinusoid --------------------------------------------------------------------
// PE[pos, c] as the paper writes it, in double.
static double pe_at(int64_t pos, int64_t c, int64_t d) {
  double a = (double)pos / pow(10000.0, (double)(c - c % 2) / (double)d);
  return c % 2 ? cos(a) : sin(a);
}

// --- run-time checks: a learned table bounds the positions -------------------------
// The positions a call covers on n's input: first .. first + count - 1.
static void call_positions(const bc_graph *g, const bc_node *n, const long *rt, long pos,
                           bool step, long *first, long *count) {
  const bc_shape *s = &g->vals[n->in[0]].shape;
  int ax = s->rank - 2, k = s->sym[ax];
  *count = k && rt ? rt[g->dims[k - 1].rt] : (long)s->d[ax];
  *first = step && k && k - 1 == bcY_step_dim(g) ? pos : 0;
}

static int positions_run_check(bc_ctx *ctx, const bc_graph *g, const bc_node *n, const long *rt,
                               long pos, bool step, const char *who) {
  if (n->pos_kind != BC_POS_LEARNED || n->in[0] < 0) return BC_OK;
  long first, count;
  call_positions(g, n, rt, pos, step, &first, &count);
  if (count < 1 || first <= n->pos_max - count) return BC_OK;
  long bad = first > n->pos_max ? first : (long)n->pos_max;
  const bc_param *p = n->param[0] >= 0 ? &g->params[n->param[0]] : NULL;
  return bc_error(ctx, BC_EINPUT,
                  "%s: position %ld is past the learned Positions table (max=%lld%s%s%s) of "
                  "%s:%d:%d: it holds positions 0..%lld, and this call covers positions "
                  "%ld..%ld",
                  who, bad, (long long)n->pos_max, p ? ": parameter '" : "", p ? p->name : "",
                  p ? "'" : "", n->loc.src ? n->loc.src->path : "?", n->loc.line, n->loc.col,
                  (long long)(n->pos_max - 1), first, first + count - 1);
}

// The emitted prologue's form: the step entry at pos + T past P, or a
// run-time sequence dim whose bound exceeds P; fixed axes were checked by
// the parser, and a stepped dim bounded by P is already refused as ECACHE.
static void positions_emit_check(struct bcE_emitter *E, const bc_node *n) {
  if (n->pos_kind != BC_POS_LEARNED || bcE_gemm_only(E)) return;
  const bc_graph *g = bcE_graph(E);
  int x = n->in[0];
  const bc_shape *s = &g->vals[x].shape;
  int ax = s->rank - 2;
  if (!s->sym[ax] || s->d[ax] <= n->pos_max) return;
  const char *T = bcE_seq(E, x), *p0 = bcE_pos0(E, x);
  bc_sbuf *b = bcE_body(E);
  if (!strcmp(p0, "0"))
    bc_sb_add(b, "  if (%s > %lld) %s  // n%d: Positions max=%lld\n", T, (long long)n->pos_max,
              bcE_ret(E, BC_RUN_EPOS), n->id, (long long)n->pos_max);
  else
    bc_sb_add(b, "  if (pos_hi > %lld - %s) %s  // n%d: Positions max=%lld\n", (long long)n->pos_max,
              T, bcE_ret(E, BC_RUN_EPOS), n->id, (long long)n->pos_max);
}

// <model>_backward's: its forward covers positions 0..T-1.
static void positions_grad_emit_check(struct bcG_emitter *E, const bc_node *n) {
  const bc_shape *s = &bcG_graph(E)->vals[n->in[0]].shape;
  int ax = s->rank - 2;
  if (n->pos_kind != BC_POS_LEARNED || !s->sym[ax] || s->d[ax] <= n->pos_max) return;
  bcG_put(E, "  if (%s > %lld) return %d;  // n%d: Positions max=%lld\n", bcG_dims_of(E, n->in[0]).T,
          (long long)n->pos_max, BC_RUN_EPOS, n->id, (long long)n->pos_max);
}

// --- reference interpreter: each sum in double, rounded once ----------------------
static int positions_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t B = o->s.b, T = o->s.t, D = o->s.d;
  const float *x = o->x[0], *w = NULL;
  float *y = o->y[0];
  if (n->pos_kind == BC_POS_LEARNED) {
    int st = bcR_fetch_param(in, n, 0, n->pos_max, D, true, &w);
    if (st) return st;
    if (T > n->pos_max)
      return bcR_node_error(in, n, "%lld positions past max=%lld (run_check passed them)",
                            (long long)T, (long long)n->pos_max);
  }
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < D; c++) {
      double pe = w ? (double)w[t * D + c] : pe_at(t, c, D);
      for (int64_t b = 0; b < B; b++) {
        int64_t i = (b * T + t) * D + c;
        y[i] = (float)((double)x[i] + pe);
      }
    }
  return BC_OK;
}

// --- reference backward: dx += dy; d table[t] += sum_b dy[b, t] -------------------
static int positions_pieces(const bc_tape *tp, const bc_node *n, int64_t d,
                            struct bcR_nweights *nw) {
  if (n->pos_kind != BC_POS_LEARNED) return bcR_no_pieces(tp, n, d, nw);
  if (n->pos_max < 1 || n->pos_max > BC_MAX_DIM)
    return bcR_node_err(tp, n, "max=%lld", (long long)n->pos_max);
  return bcR_set_piece(tp, n, nw, PP_W, 0, true, 0, n->pos_max, d, n->pos_max);
}

static int positions_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                             const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)sv;
  int64_t B = o->s.b, T = o->s.t, D = o->s.d;
  const double *x = bcR_tape_val(tp, o->vin[0]);
  const double *w = n->pos_kind == BC_POS_LEARNED ? bcR_nw_w(nw, PP_W) : NULL;
  double *y = bcR_tape_val(tp, o->vout[0]);
  if (n->pos_kind == BC_POS_LEARNED && (!w || T > n->pos_max))
    return bcR_node_err(tp, n, "no table, or %lld positions past max=%lld", (long long)T,
                        (long long)n->pos_max);
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < D; c++) {
      double pe = w ? w[t * D + c] : pe_at(t, c, D);
      for (int64_t b = 0; b < B; b++) y[(b * T + t) * D + c] = x[(b * T + t) * D + c] + pe;
    }
  return BC_OK;
}

static int positions_ref_bwd(struct bcR_bwd *bw, const bc_node *n, const bcR_ops *o,
                             const struct bcR_nweights *nw) {
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d, TD = o->s.t * o->s.d;
  const double *dy = bcR_dy(bw, o->vout[0]);
  double *dx = bcR_dacc(bw, o->vin[0], &st);
  double *dw = n->pos_kind == BC_POS_LEARNED ? bcR_nw_g(nw, PP_W) : NULL;
  for (int64_t i = 0; !st && i < nel; i++) {
    dx[i] += dy[i];
    if (dw) dw[i % TD] += dy[i];  // row t of the table: [t, c] is i % (T D)
  }
  return st;
}

// --- emitted forward: one kernel call, in place over x when the pass allows -------
static void positions_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E) || !bcE_same_numel(E, n, 1)) return;
  int x = n->in[0], y = n->out[0];
  int64_t D = bcE_width(E, x);
  bcE_ck_int(E, D, "width");
  const char *B = bcE_keep(E, bcE_batch(E, x)), *T = bcE_keep(E, bcE_seq(E, x));
  const char *p0 = bcE_pos0(E, x);
  if (strcmp(p0, "0")) {  // the step entry: batch row b from its own pos[b]
    char ob[96];
    snprintf(ob, sizeof ob, "b*%s*%lld", T, (long long)D);
    const char *o = bcE_keep(E, ob);
    bc_sb_add(bcE_body(E), "  for (int b = 0; b < %s; b++)  // row b from pos[b]\n", B);
    if (n->pos_kind == BC_POS_LEARNED)
      bc_sb_add(bcE_body(E), "    bcrt_pos_learned(1, %s, %lld, pos[b], %s + %s, %s, %s + %s);\n",
                T, (long long)D, bcE_vptr(E, x), o, bcE_wptr(E, n, 0, n->pos_max * D),
                bcE_vptr(E, y), o);
    else
      bc_sb_add(bcE_body(E), "    bcrt_pos_sinusoid(1, %s, %lld, pos[b], %s + %s, %s + %s);\n", T,
                (long long)D, bcE_vptr(E, x), o, bcE_vptr(E, y), o);
    return;
  }
  if (n->pos_kind == BC_POS_LEARNED)
    bc_sb_add(bcE_body(E), "  bcrt_pos_learned(%s, %s, %lld, %s, %s, %s, %s);\n", B, T,
              (long long)D, p0, bcE_vptr(E, x), bcE_wptr(E, n, 0, n->pos_max * D),
              bcE_vptr(E, y));
  else
    bc_sb_add(bcE_body(E), "  bcrt_pos_sinusoid(%s, %s, %lld, %s, %s, %s);\n", B, T, (long long)D,
              p0, bcE_vptr(E, x), bcE_vptr(E, y));
}

// --- emitted backward: the same forward (positions 0..T-1), then dx and the table --
static void positions_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  if (n->pos_kind == BC_POS_LEARNED)
    bcG_kput(E, "  bcrt_pos_learned(%s, %s, %lld, 0, %s, %s, %s);\n", s.B, s.T, (long long)s.D,
             bcG_val(E, n->in[0]), bcG_wpiece(E, n, 0, -1, 0, s.D, n->pos_max).p,
             bcG_val(E, n->out[0]));
  else
    bcG_kput(E, "  bcrt_pos_sinusoid(%s, %s, %lld, 0, %s, %s);\n", s.B, s.T, (long long)s.D,
             bcG_val(E, n->in[0]), bcG_val(E, n->out[0]));
}

static void positions_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  const char *dy = bcG_dval(E, n->out[0]);
  if (n->pos_kind == BC_POS_LEARNED)
    bcG_kput(E, "  bcrt_pos_learned_bwd(%s, %s, %lld, 0, %s, %s);\n", s.B, s.T, (long long)s.D,
             dy, bcG_wpiece(E, n, 0, -1, 0, s.D, n->pos_max).dp);
  bcG_axpy(E, n->in[0], 1.0, dy, bcG_dval(E, n->in[0]));
}

// --- attributes --------------------------------------------------------------------
static void positions_defaults(bc_node *n) {
  n->pos_kind = BC_POS_LEARNED;
  n->pos_max = 0;
}

static bool positions_same(const bc_node *a, const bc_node *b) {
  return a->pos_kind == b->pos_kind && a->pos_max == b->pos_max;
}

static void positions_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  bool learned = n->pos_kind == BC_POS_LEARNED;
  if (view == BC_ATTRS_DOT) {
    if (learned) bc_sb_add(out, "\\nlearned max=%lld", (long long)n->pos_max);
    else bc_sb_add(out, "\\nsinusoidal");
    return;
  }
  if (learned) bc_sb_add(out, " kind=learned max=%lld", (long long)n->pos_max);
  else bc_sb_add(out, " kind=sinusoidal");
}

const bc_op_def bcT_positions = {
    .op = BC_OP_POSITIONS,
    .info = {"Positions", true, 1, 1, 1, 1, 1,
             "x + PE[pos]: a learned table (max=, params=) or the sinusoid (kind=sinusoidal)",
             {{"kind", BC_AT_WORD, false, 0}, {"max", BC_AT_INT, false, 0},
              {"params", BC_AT_PATH, false, 0}}},
    .inplace = {1u},  // each element is read before it is written
    .params = "weight (max, D) (kind=learned; none for kind=sinusoidal)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#f4ecd8",
    .defaults = positions_defaults,
    .same_attrs = positions_same,
    .attrs = positions_attrs,
    .build = positions_build,
    .scratch = bcM_no_scratch,
    .interp = positions_interp,
    .ref_weights = positions_pieces,
    .ref_fwd = positions_ref_fwd,
    .ref_bwd = positions_ref_bwd,
    .emit = positions_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = positions_grad_fwd,
    .grad_bwd = positions_grad_bwd,
    .run_check = positions_run_check,
    .emit_check = positions_emit_check,
    .grad_emit_check = positions_grad_emit_check,
    .statuses = 1u << BC_RUN_EPOS,
};
