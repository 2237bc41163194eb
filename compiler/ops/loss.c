// ops/loss.c — the losses: CrossEntropy and MSE, each a graph output that is
// a scalar (shape [], one float), and the training graph of a whole model
// (bcX_with_lm_loss).
//
//   CrossEntropy(logits, targets, ignore_index=-100, label_smoothing=0)
//       logits float [B, T, V] (or [N, V], whose targets are then [1, N]);
//       targets a tokens input [B, T] (`input targets : tokens[B, T]`), one id
//       per row of logits.  Exactly torch.nn.functional.cross_entropy with
//       reduction='mean': with lse_r = log sum_c exp(x[r, c]) (the max
//       subtracted) and e = label_smoothing,
//           loss_r = (1 - e) (lse_r - x[r, t_r]) + e (lse_r - mean_c x[r, c])
//       (e * mean_c(-log p_c) is PyTorch's smoothing term), and the loss is
//       the mean of loss_r over the rows whose target is not ignore_index.
//       Every row ignored: loss 0 and zero gradients (PyTorch gives nan).
//       d logits[r, :] = (softmax(x[r]) - q_r) * dloss / kept for a kept row,
//       q_r = (1 - e) onehot(t_r) + e / V; 0 for an ignored one.
//   MSE(y, target)
//       mean over every element of (y - target)^2, target a float value of
//       y's shape; d y = 2 (y - target) dloss / n, d target = -d y.
//
// A target outside 0..V-1 that is not ignore_index is refused before a run
// like an Embedding's ids: bcR_check_io names the input, row, position and
// value, and generated code returns <M>_ETOKEN (the op table's `targets`
// row and bcI_tokens_vocab / bcI_tokens_ignore make the input checks take
// it).  The interpreter and the reference backward compute in double (the
// oracle); the runtime kernels (bcrt_cross_entropy, bcrt_mse and their
// backwards) in float with a double accumulator per row and for the total.
// The emitted backward's forward half keeps each row's lse ([rows] floats,
// the only buffer the loss adds) and its backward half writes d logits
// straight into the logits' gradient buffer (softmax recomputed from the
// kept logits, chunk by chunk on the stack): beyond the forward's [B, T, V]
// logits, the backward needs the one [B, T, V] gradient buffer only.
#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// --- parser -----------------------------------------------------------------------
// The targets shape logits need: [B, T] for [B, T, V], [1, N] for [N, V].
static bc_shape targets_for(const bc_shape *lg) {
  bc_shape t = {.rank = 2};
  if (lg->rank == 3) {
    t.d[0] = lg->d[0], t.sym[0] = lg->sym[0];
    t.d[1] = lg->d[1], t.sym[1] = lg->sym[1];
  } else {
    t.d[0] = 1;
    t.d[1] = lg->d[0], t.sym[1] = lg->sym[0];
  }
  return t;
}

// Another CrossEntropy reading the same targets must agree on ignore_index
// (the input check admits one value).
static void check_shared_targets(struct bcP_parser *P, const bc_node *n, bc_loc loc) {
  const bc_graph *g = bcP_graph(P);
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *m = &g->nodes[i];
    if (m != n && bcT_def(m->op)->targets && m->nin > 1 && m->in[1] == n->in[1] &&
        m->ignore_index != n->ignore_index)
      bcP_error_at(P, loc,
                   "CrossEntropy: targets '%s' are already read with ignore_index=%lld; every "
                   "CrossEntropy of one targets input takes the same ignore_index",
                   g->vals[n->in[1]].name, (long long)m->ignore_index);
  }
}

static void ce_attrs_parse(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                           const bcP_attr_vals *av) {
  int ki = bcP_attr(P, info, "ignore_index"), ks = bcP_attr(P, info, "label_smoothing");
  if (av->have[ki]) {
    double v = av->fval[ki];
    if (v != floor(v) || v < INT32_MIN || v > INT32_MAX)
      bcP_error_at(P, av->loc[ki], "ignore_index must be an int32 integer, got %.17g", v);
    n->ignore_index = (int64_t)v;
  }
  if (av->have[ks]) {
    double e = av->fval[ks];
    if (!(e >= 0 && e <= 1))
      bcP_error_at(P, av->loc[ks], "label_smoothing must be in [0, 1], got %g", e);
    n->smoothing = (double)(float)e;  // a float32 value, as the kernels read it
  }
}

static void ce_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                     const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                     const bc_shape *inp, bc_shape *out) {
  bc_graph *g = bcP_graph(P);
  bc_shape lg = *inp;
  if (lg.rank != 2 && lg.rank != 3)
    bcP_error_at(P, posloc[0], "CrossEntropy takes logits [B, T, V] or [N, V], found %s",
                 bcP_shape_desc(P, &lg));
  bcP_check_fixed_width(P, info, &lg, posloc[0], NULL);
  n->loss_vocab = lg.d[lg.rank - 1];
  if (n->loss_vocab > INT32_MAX)
    bcP_error_at(P, posloc[0], "CrossEntropy: V=%lld classes are more than int32 targets can name",
                 (long long)n->loss_vocab);
  bc_shape want = targets_for(&lg), have = g->vals[n->in[1]].shape;
  if (!bc_shape_eq(&have, &want))
    bcP_error_at(P, posloc[1],
                 "CrossEntropy: targets '%s' are %s, but logits %s need %s (one target id per row "
                 "of logits)", g->vals[n->in[1]].name, bcP_shape_desc(P, &have),
                 bcP_shape_desc(P, &lg), bcP_shape_desc(P, &want));
  ce_attrs_parse(P, info, n, av);
  check_shared_targets(P, n, optok->loc);
  *out = (bc_shape){.rank = 0};
}

static void mse_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                      const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                      const bc_shape *inp, bc_shape *out) {
  (void)info, (void)posloc, (void)av;
  bc_graph *g = bcP_graph(P);
  bc_shape t = g->vals[n->in[1]].shape;
  if (!bc_shape_eq(inp, &t))
    bcP_error_at(P, optok->loc, "shape mismatch in MSE: y is %s but target is %s",
                 bcP_shape_desc(P, inp), bcP_shape_desc(P, &t));
  *out = (bc_shape){.rank = 0};
}

// --- the loss in double (the interpreter and the reference backward) ----------------
// One row's lse.
static double row_lse(int64_t V, const double *x) {
  double m = x[0], s = 0;
  for (int64_t c = 1; c < V; c++) m = x[c] > m ? x[c] : m;
  for (int64_t c = 0; c < V; c++) s += exp(x[c] - m);
  return m + log(s);
}

// Whether every target is 0..V-1 or ignore_index.
static bool targets_ok(const int32_t *t, int64_t rows, int64_t V, int64_t ig) {
  for (int64_t r = 0; r < rows; r++)
    if ((t[r] < 0 || t[r] >= V) && t[r] != ig) return false;
  return true;
}

// One kept row's loss: (1 - e) (lse - x[t]) + e (lse - mean(x)).
static double row_loss(const bc_node *n, int64_t V, const double *row, int32_t t) {
  double l = row_lse(V, row), mean = 0, e = n->smoothing;
  for (int64_t c = 0; e != 0 && c < V; c++) mean += row[c];
  return (1 - e) * (l - row[t]) + e * (l - mean / (double)V);
}

// The mean loss over the kept rows of x (rows x V doubles); 0 when none is kept.
static double ce_loss(const bc_node *n, int64_t rows, int64_t V, const double *x,
                      const int32_t *t) {
  double total = 0;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; r++)
    if (t[r] != n->ignore_index) total += row_loss(n, V, x + r * V, t[r]), kept++;
  return kept ? total / (double)kept : 0.0;
}

// --- reference interpreter ---------------------------------------------------------
static int ce_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t rows = o->s.b * o->s.t, V = o->s.d;
  if (!o->tgt || V != n->loss_vocab || !targets_ok(o->tgt, rows, V, n->ignore_index))
    return bcR_node_error(in, n, "targets %p, V=%lld for %lld classes (unchecked input)",
                          (const void *)o->tgt, (long long)V, (long long)n->loss_vocab);
  double *x, total = 0;  // one row widened at a time (V = 50257: 400 KB, not rows x that)
  int st = bcR_alloc_doubles(in, V, &x);
  if (st) return st;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; r++) {
    if (o->tgt[r] == n->ignore_index) continue;
    for (int64_t c = 0; c < V; c++) x[c] = o->x[0][r * V + c];
    total += row_loss(n, V, x, o->tgt[r]);
    kept++;
  }
  o->y[0][0] = (float)(kept ? total / (double)kept : 0.0);
  free(x);
  return BC_OK;
}

static int mse_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  (void)in, (void)n;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  double s = 0;
  for (int64_t i = 0; i < nel; i++) {
    double d = (double)o->x[0][i] - (double)o->x[1][i];
    s += d * d;
  }
  o->y[0][0] = (float)(s / (double)nel);
  return BC_OK;
}

// --- reference backward --------------------------------------------------------------
static int ce_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                      const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t rows = o->s.b * o->s.t, V = o->s.d;
  if (!o->tgt || V != n->loss_vocab || !targets_ok(o->tgt, rows, V, n->ignore_index))
    return bcR_node_err(tp, n, "unchecked targets");
  bcR_tape_val(tp, o->vout[0])[0] = ce_loss(n, rows, V, bcR_tape_val(tp, o->vin[0]), o->tgt);
  return BC_OK;
}

static int ce_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                      const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t rows = o->s.b * o->s.t, V = o->s.d, kept = 0;
  const double *dy = bcR_dy(b, o->vout[0]);
  if (!dy) return BC_OK;
  const double *x = bcR_tape_val(bcR_bwd_tape(b), o->vin[0]);
  for (int64_t r = 0; r < rows; r++) kept += o->tgt[r] != n->ignore_index;
  if (!kept) return BC_OK;  // every row ignored: no gradient
  double *dx = bcR_dacc(b, o->vin[0], &st), s = dy[0] / (double)kept, e = n->smoothing;
  for (int64_t r = 0; !st && r < rows; r++) {
    if (o->tgt[r] == n->ignore_index) continue;
    const double *row = x + r * V;
    double l = row_lse(V, row);
    for (int64_t c = 0; c < V; c++) dx[r * V + c] += (exp(row[c] - l) - e / (double)V) * s;
    dx[r * V + o->tgt[r]] -= (1 - e) * s;
  }
  return st;
}

static int mse_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)n, (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *a = bcR_tape_val(tp, o->vin[0]), *t = bcR_tape_val(tp, o->vin[1]);
  double s = 0;
  for (int64_t i = 0; i < nel; i++) s += (a[i] - t[i]) * (a[i] - t[i]);
  bcR_tape_val(tp, o->vout[0])[0] = s / (double)nel;
  return BC_OK;
}

static int mse_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                       const struct bcR_nweights *nw) {
  (void)n, (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *dy = bcR_dy(b, o->vout[0]);
  if (!dy) return BC_OK;
  const double *a = bcR_tape_val(bcR_bwd_tape(b), o->vin[0]);
  const double *t = bcR_tape_val(bcR_bwd_tape(b), o->vin[1]);
  double *da = bcR_dacc(b, o->vin[0], &st), *dt = bcR_dacc(b, o->vin[1], &st);
  for (int64_t i = 0; !st && i < nel; i++) {
    double g = 2 * (a[i] - t[i]) * dy[0] / (double)nel;
    da[i] += g;
    dt[i] -= g;
  }
  return st;
}

// --- emitted forward ------------------------------------------------------------------
static void ce_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  int x = n->in[0];
  int64_t V = bcE_width(E, x);
  if (V != n->loss_vocab || bcE_numel_bound(E, x) != bcE_rows_bound(E, x) * V) {
    bcE_fail(E, "node %d: bad CrossEntropy shape", n->id);
    return;
  }
  bcE_ck_int(E, V, "vocab");
  char s[64];
  bc_sb_add(bcE_body(E), "  bcrt_cross_entropy(%s, %lld, %s, %s, %lld, %s, %s, 0);\n",
            bcE_rows(E, x), (long long)V, bcE_vptr(E, x), bcE_vptr(E, n->in[1]),
            (long long)n->ignore_index, bcE_flit(E, n->smoothing, s, sizeof s),
            bcE_vptr(E, n->out[0]));
}

static void mse_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  bc_sb_add(bcE_body(E), "  bcrt_mse(%s, %s, %s, %s);\n", bcE_numel(E, n->in[0]),
            bcE_vptr(E, n->in[0]), bcE_vptr(E, n->in[1]), bcE_vptr(E, n->out[0]));
}

// --- emitted backward -----------------------------------------------------------------
static int ce_grad_buffers(struct bcG_emitter *E, const bc_node *n) {
  return bcG_save_buf(E, n, 0, "lse", bcG_rows_bound(E, n)) < 0 ? -1 : 0;
}

static void ce_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_cross_entropy((long)%s, %lld, %s, %s, %lld, %s, %s, %s);\n", s.rows,
           (long long)s.D, bcG_val(E, n->in[0]), bcG_val(E, n->in[1]),
           (long long)n->ignore_index, bcG_fl(E, n->smoothing), bcG_val(E, n->out[0]),
           bcG_saved(E, n, 0));
}

static void ce_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_cross_entropy_bwd((long)%s, %lld, %s, %s, %lld, %s, %s, %s, %s);\n",
           s.rows, (long long)s.D, bcG_val(E, n->in[0]), bcG_val(E, n->in[1]),
           (long long)n->ignore_index, bcG_fl(E, n->smoothing), bcG_saved(E, n, 0),
           bcG_dval(E, n->out[0]), bcG_dval(E, n->in[0]));
}

static void mse_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_mse((long)%s*%lld, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_val(E, n->in[0]), bcG_val(E, n->in[1]), bcG_val(E, n->out[0]));
}

static void mse_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_mse_bwd((long)%s*%lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_val(E, n->in[0]), bcG_val(E, n->in[1]), bcG_dval(E, n->out[0]),
           bcG_dval(E, n->in[0]), bcG_dval(E, n->in[1]));
}

// --- printing and attributes ----------------------------------------------------------
static void ce_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  bool dflt = n->ignore_index == -100 && n->smoothing == 0;
  if (view == BC_ATTRS_DOT) {
    if (!dflt)
      bc_sb_add(out, "\\nignore=%lld smoothing=%g", (long long)n->ignore_index, n->smoothing);
    return;
  }
  if (view == BC_ATTRS_DUMP || !dflt)
    bc_sb_add(out, " ignore_index=%lld label_smoothing=%.9g", (long long)n->ignore_index,
              n->smoothing);
}

static void mse_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  (void)n, (void)view, (void)out;
}

static void loss_defaults(bc_node *n) {
  n->loss_vocab = 0;
  n->ignore_index = -100;
  n->smoothing = 0;
}

static bool loss_same(const bc_node *a, const bc_node *b) {
  return a->loss_vocab == b->loss_vocab && a->ignore_index == b->ignore_index &&
         a->smoothing == b->smoothing;
}

const bc_op_def bcT_cross_entropy = {
    .op = BC_OP_CROSS_ENTROPY,
    .info = {"CrossEntropy", true, 2, 2, 2, 1, 1,
             "mean over kept rows of -log softmax(logits)[targets] (a scalar loss)",
             {{"ignore_index", BC_AT_FLOAT, false, 0}, {"label_smoothing", BC_AT_FLOAT, false, 0}}},
    .targets = true,
    .scalar = true,
    .params = "none",
    .dot_color = "#f4cccc",
    .defaults = loss_defaults,
    .same_attrs = loss_same,
    .attrs = ce_attrs,
    .build = ce_build,
    .scratch = bcM_no_scratch,
    .interp = ce_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = ce_ref_fwd,
    .ref_bwd = ce_ref_bwd,
    .emit = ce_emit,
    .grad_check = bcG_supported,
    .grad_buffers = ce_grad_buffers,
    .grad_fwd = ce_grad_fwd,
    .grad_bwd = ce_grad_bwd,
};

const bc_op_def bcT_mse = {
    .op = BC_OP_MSE,
    .info = {"MSE", true, 2, 2, 2, 1, 1, "mean((y - target)^2) (a scalar loss)", {{0}}},
    .scalar = true,
    .params = "none",
    .dot_color = "#f4cccc",
    .defaults = loss_defaults,
    .same_attrs = loss_same,
    .attrs = mse_attrs,
    .build = mse_build,
    .scratch = bcM_no_scratch,
    .interp = mse_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = mse_ref_fwd,
    .ref_bwd = mse_ref_bwd,
    .emit = mse_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = mse_grad_fwd,
    .grad_bwd = mse_grad_bwd,
};

// --- the training graph of a whole model -----------------------------------------------
static int find_output(const bc_graph *g, const char *name) {
  for (int i = 0; i < g->noutputs; i++)
    if (!strcmp(g->output_names[i], name)) return i;
  return -1;
}

static int find_input(const bc_graph *g, const char *name) {
  for (int i = 0; i < g->ninputs; i++)
    if (!strcmp(g->vals[g->inputs[i]].name, name)) return i;
  return -1;
}

// Why g cannot take the loss (NULL: it can); *lo, *io: the logits output's
// and the ids input's indices.
static const char *lm_loss_refusal(bc_ctx *ctx, const bc_graph *g, const char *logits,
                                   const char *ids, int *lo, int *io) {
  char a[96], b[96];
  if (g->planned)  // the passes fuse and plan in place (bcD_compile): a copy would keep the plan
    return "it has been compiled (the passes ran on it); give the graph as parsed";
  if ((*lo = find_output(g, logits)) < 0)
    return bc_fmt(ctx, "the graph has no output '%s' (the logits [B, T, V])", logits);
  if ((*io = find_input(g, ids)) < 0)
    return bc_fmt(ctx, "the graph has no input '%s' (the token ids [B, T])", ids);
  if (find_input(g, "targets") >= 0) return "the graph already has an input 'targets'";
  if (find_output(g, "loss") >= 0) return "the graph already has an output 'loss'";
  const bc_value *lv = &g->vals[g->outputs[*lo]], *iv = &g->vals[g->inputs[*io]];
  if (!bcI_is_tokens(g, iv->id))
    return bc_fmt(ctx, "input '%s' is not a tokens input (`input %s : tokens[B, T]`)", ids, ids);
  bc_shape want = iv->shape;
  if (lv->type != BC_VT_F32 || lv->shape.rank != 3 || lv->shape.sym[2] ||
      lv->shape.d[0] != want.d[0] || lv->shape.sym[0] != want.sym[0] ||
      lv->shape.d[1] != want.d[1] || lv->shape.sym[1] != want.sym[1])
    return bc_fmt(ctx, "output '%s' is %s: next-token logits over '%s' %s are [B, T, V]", logits,
                  bc_shape_str(&lv->shape, a, sizeof a), ids, bc_shape_str(&want, b, sizeof b));
  if (lv->shape.d[2] > INT32_MAX) return "the logits have more classes than int32 targets name";
  return NULL;
}

// out's outputs with output k replaced by value v named name (fresh arrays:
// the clone shares the original's).
static int replace_output(bc_graph *c, int k, int v, const char *name) {
  int *outs = bc_alloc(c->ctx, (size_t)c->noutputs * sizeof *outs);
  const char **names = bc_alloc(c->ctx, (size_t)c->noutputs * sizeof *names);
  if (!outs || !names) return bc_error(c->ctx, BC_ENOMEM, "error: out of memory");
  memcpy(outs, c->outputs, (size_t)c->noutputs * sizeof *outs);
  memcpy(names, c->output_names, (size_t)c->noutputs * sizeof *names);
  c->vals[outs[k]].is_output = false;
  outs[k] = v;
  names[k] = name;
  c->outputs = outs;
  c->output_names = names;
  c->vals[v].is_output = true;
  c->output = outs[0];
  return BC_OK;
}

bc_graph *bcX_with_lm_loss(bc_ctx *ctx, const bc_graph *g, const char *logits, const char *ids,
                           bool keep) {
  int lo = -1, io = -1;
  const char *why = g && logits && ids ? lm_loss_refusal(ctx, g, logits, ids, &lo, &io)
                                       : "no graph or names";
  if (why) {
    bc_error(ctx, BC_EINPUT, "error: cannot add the next-token loss to %s: %s",
             g && g->model ? g->model : "the graph", why);
    return NULL;
  }
  bc_graph *c = bcI_clone(g);
  if (!c) {
    bc_error(ctx, BC_ENOMEM, "error: out of memory");
    return NULL;
  }
  int lv = g->outputs[lo];
  bc_loc loc = g->vals[lv].def >= 0 ? g->nodes[g->vals[lv].def].loc : (bc_loc){0};
  int t = bcI_add_value(c, "targets", g->vals[g->inputs[io]].shape, BC_VAL_INPUT);
  if (t < 0 || bcI_add_input(c, t) < 0) return NULL;
  c->vals[t].type = BC_VT_I32;
  c->vals[t].tokens = true;
  int id = bcI_add_node(c, BC_OP_CROSS_ENTROPY, loc);
  int v = id < 0 ? -1 : bcI_add_value(c, "loss", (bc_shape){.rank = 0}, BC_VAL_TEMP);
  if (v < 0) return NULL;
  bc_node *n = &c->nodes[id];
  n->nin = 2, n->in[0] = lv, n->in[1] = t;
  n->nout = 1, n->out[0] = v;
  n->loss_vocab = g->vals[lv].shape.d[2];
  c->vals[v].def = id;
  int st = keep ? (bcI_add_output(c, v, "loss") < 0 ? BC_ENOMEM : BC_OK)
                : replace_output(c, lo, v, "loss");
  if (!st) st = bcI_verify(c);
  return st ? NULL : c;
}
