// ops/embedding.c — Embedding: y[b, t, :] = scale * W[ids[b, t], :], the
// token-embedding lookup that turns a tokens input into activations.
//
// Input slot 0 is a tokens input (`input ids : tokens[B, T]`, int32 ids, C
// order; the row's `tokens`); the output is float [B, T, D].  Parameter
// <params>.weight (V, D), PyTorch's nn.Embedding layout, which is also the
// (out, in) matrix of a Linear LM head: `Linear(x, out=V, bias=false,
// params=wte)` names the same parameter (tied weights, GPT-2), so it is one
// parameter whose gradient sums both uses (the reference backward and the
// emitted one accumulate parameter gradients).  scale= (a float32 value;
// sqrt(D) as the original Transformer and fairseq scale) multiplies the
// gathered rows; it is rounded to float32 when parsed, so the interpreter's
// double product rounded once equals the compiled float product.
//
// Ids outside 0..V-1 never reach these functions: bcR_check_io (the
// interpreter, the reference backward, the API and the CLI) reports them
// with the row, position and value, and generated code returns
// <M>_ETOKEN before writing anything; the interpreter's entry checks again
// (an internal error if one slipped through).  The embedding reads nothing
// but its own row, so it is position-independent: the step entry gathers
// the new positions' rows only.  Ids get no gradient; d W scatters (adds)
// scale * dy into the rows the ids name.
//
// Every stage of the op is here, written against ops.h.
#include "ops.h"

#include <stdint.h>

// Piece index of the reference backward: the whole table.
enum { PE_W };

// --- parser: vocab=, dim=, params=, scale= --------------------------------------
static void embedding_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                            const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                            const bc_shape *inp, bc_shape *out) {
  (void)optok, (void)posloc;
  int kv = bcP_attr(P, info, "vocab"), kd = bcP_attr(P, info, "dim");
  int kp = bcP_attr(P, info, "params"), ks = bcP_attr(P, info, "scale");
  n->vocab = av->ival[kv];
  n->emb_dim = av->ival[kd];
  if (n->vocab > INT32_MAX)
    bcP_error_at(P, av->loc[kv], "Embedding: vocab=%lld is more than int32 token ids can name",
                 (long long)n->vocab);
  if (av->have[ks]) n->emb_scale = (double)(float)av->fval[ks];
  *out = *inp;  // [B, T] -> [B, T, D]
  out->rank = 3;
  out->d[2] = n->emb_dim;
  out->sym[2] = 0;
  bcP_checked_numel(P, av->loc[kd], out, "Embedding output");
  n->in_out = false;
  bcP_linear_params(P, n, 0, 1, av->path[kp][0], n->vocab, n->emb_dim, false, av->loc[kp]);
}

// --- reference interpreter: each row times scale in double, rounded once ------
static int embedding_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, V = n->vocab;
  if (!o->ids || d != n->emb_dim || V < 1)
    return bcR_node_error(in, n, "ids %p, D=%lld for dim=%lld, vocab=%lld", (const void *)o->ids,
                          (long long)d, (long long)n->emb_dim, (long long)V);
  const float *w;
  int st = bcR_fetch_param(in, n, 0, V, d, true, &w);
  if (st) return st;
  for (int64_t r = 0; r < rows; r++) {
    int64_t id = o->ids[r];
    if (id < 0 || id >= V)
      return bcR_node_error(in, n, "token id %lld (row %lld) is outside 0..%lld (unchecked input)",
                            (long long)id, (long long)r, (long long)(V - 1));
    for (int64_t j = 0; j < d; j++)
      o->y[0][r * d + j] = (float)((double)w[id * d + j] * n->emb_scale);
  }
  return BC_OK;
}

// --- reference backward: the table as one piece; dW[id] += scale dy -------------
static int embedding_pieces(const bc_tape *tp, const bc_node *n, int64_t d,
                            struct bcR_nweights *nw) {
  if (n->vocab < 1 || n->vocab > BC_MAX_DIM || d != n->emb_dim)
    return bcR_node_err(tp, n, "vocab=%lld dim=%lld for D=%lld", (long long)n->vocab,
                        (long long)n->emb_dim, (long long)d);
  return bcR_set_piece(tp, n, nw, PE_W, 0, true, 0, n->vocab, d, n->vocab);
}

// Whether every id of the node's rows is in 0..V-1 (checked before the run).
static bool ids_ok(const bcR_ops *o, int64_t rows, int64_t V) {
  for (int64_t r = 0; r < rows; r++)
    if (o->ids[r] < 0 || o->ids[r] >= V) return false;
  return true;
}

static int embedding_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                             const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)sv;
  int64_t rows = o->s.b * o->s.t, d = o->s.d;
  if (!o->ids || !ids_ok(o, rows, n->vocab)) return bcR_node_err(tp, n, "unchecked token ids");
  const double *w = bcR_nw_w(nw, PE_W);
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < d; j++) y[r * d + j] = w[o->ids[r] * d + j] * n->emb_scale;
  return BC_OK;
}

static int embedding_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                             const struct bcR_nweights *nw) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d;
  if (!o->ids || !ids_ok(o, rows, n->vocab))
    return bcR_node_err(bcR_bwd_tape(b), n, "unchecked token ids");
  const double *dy = bcR_dy(b, o->vout[0]);
  double *g = bcR_nw_g(nw, PE_W);
  for (int64_t r = 0; dy && g && r < rows; r++)
    for (int64_t j = 0; j < d; j++) g[o->ids[r] * d + j] += n->emb_scale * dy[r * d + j];
  return BC_OK;
}

// --- emitted forward: bcrt_embedding over the output's rows -------------------------
static void embedding_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E)) return;
  int y = n->out[0];
  int64_t D = bcE_width(E, y), V = n->vocab;
  if (D != n->emb_dim || V < 1 || bcE_numel_bound(E, y) != bcE_rows_bound(E, y) * D) {
    bcE_fail(E, "node %d: bad Embedding shape", n->id);
    return;
  }
  bcE_ck_int(E, D, "dim");
  bcE_ck_int(E, V, "vocab");
  char s[64];
  bc_sb_add(bcE_body(E), "  bcrt_embedding(%s, %lld, %s, %s, %s, %s);\n", bcE_rows(E, y),
            (long long)D, bcE_vptr(E, n->in[0]), bcE_wptr(E, n, 0, V * D),
            bcE_flit(E, n->emb_scale, s, sizeof s), bcE_vptr(E, y));
}

// --- emitted backward: the same gather, then the scatter-add into dW --------------
static void embedding_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->out[0]);
  bcG_wmat m = bcG_wpiece(E, n, 0, -1, 0, s.D, n->vocab);
  bcG_kput(E, "  bcrt_embedding((long)%s, %lld, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_val(E, n->in[0]), m.p, bcG_fl(E, n->emb_scale), bcG_val(E, n->out[0]));
}

static void embedding_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->out[0]);
  bcG_wmat m = bcG_wpiece(E, n, 0, -1, 0, s.D, n->vocab);
  bcG_kput(E, "  bcrt_embedding_bwd((long)%s, %lld, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_val(E, n->in[0]), bcG_dval(E, n->out[0]), bcG_fl(E, n->emb_scale), m.dp);
}

// --- printing -------------------------------------------------------------------
static void embedding_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DOT) {
    bc_sb_add(out, "\\nvocab=%lld dim=%lld", (long long)n->vocab, (long long)n->emb_dim);
    return;
  }
  bc_sb_add(out, " vocab=%lld dim=%lld", (long long)n->vocab, (long long)n->emb_dim);
  if (n->emb_scale != 1.0) bc_sb_add(out, " scale=%.9g", n->emb_scale);
}

static void embedding_defaults(bc_node *n) {
  n->vocab = 0;
  n->emb_dim = 0;
  n->emb_scale = 1.0;
}

static bool embedding_same(const bc_node *a, const bc_node *b) {
  return a->vocab == b->vocab && a->emb_dim == b->emb_dim && a->emb_scale == b->emb_scale;
}

const bc_op_def bcT_embedding = {
    .op = BC_OP_EMBEDDING,
    .info = {"Embedding", true, 1, 1, 1, 1, 1, "scale * W[ids] (token ids to rows of W (V, D))",
             {{"vocab", BC_AT_INT, true, 0}, {"dim", BC_AT_INT, true, 0},
              {"params", BC_AT_PATH, true, 0}, {"scale", BC_AT_FLOAT, false, 0}}},
    .tokens = true,
    .params = "weight (V, D)",
    .init_sel = bcT_init_sel_wb,
    .dot_color = "#fde9c8",
    .defaults = embedding_defaults,
    .same_attrs = embedding_same,
    .attrs = embedding_attrs,
    .build = embedding_build,
    .scratch = bcM_no_scratch,
    .interp = embedding_interp,
    .ref_weights = embedding_pieces,
    .ref_fwd = embedding_ref_fwd,
    .ref_bwd = embedding_ref_bwd,
    .emit = embedding_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = embedding_grad_fwd,
    .grad_bwd = embedding_grad_bwd,
};
