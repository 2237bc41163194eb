// emit_grad.c — the emitted training step: `<model>_backward`, a forward
// that keeps what the backward needs, then the reverse walk, as C.
//
//   int <model>_backward(const float *const *w, void *const *io, const long *rt,
//                        const float *const *dy, float *const *dw,
//                        float *const *dx, void *workspace);
//
// w, io, rt as `<model>_run` (bc.h; io's outputs receive y); dy one array
// per output (NULL: not in the loss); dw one array per parameter, same
// layout as w, overwritten with d sum(y * dy) / d param; dx NULL or one
// pointer per input (NULL entries and lengths inputs skipped) receiving the
// input's gradient.  workspace: bcG_workspace_bytes(g), 64-byte aligned.
//
// The structure is grad.c's (the double reference, whose header describes
// it): time 0..N-1 runs node i forward, time 2N-1-i runs its backward.
//   - Every value lives from its node until the backward of its first reader
//     (its readers' backwards read it); each node keeps its saves (Attention:
//     q|k|v projections, the softmax weights of every head, the concatenated
//     heads; FFN: the pre-activation, its activation recomputed; a fused
//     add+norm: the sum)
//     until its own backward.  LayerNorm's mean and 1/std are recomputed by
//     bcrt_layernorm_bwd from the input instead of kept.
//   - Every float value has one gradient buffer, zeroed at the backward of
//     its last reader (outputs: seeded with dy when the backward starts),
//     accumulated (+=) by every reader, dead after its defining node's
//     backward.  An input's gradient goes straight into dx[i] when given.
//   - Parameter gradients accumulate into dw (zeroed first), so shared
//     weights sum their uses.
// All those intervals are placed by the planner's own placement
// (bcM_place_intervals), so the arena is liveness-planned like the forward's.
//
// Per op: Linear-like products are three GEMMs (dx += dy W, dW += dy^T x,
// db += colsum dy); weights are read in place in their stored layout
// (packed q|k|v row blocks, layout=in_out) through the transpose flag and
// leading dimension, never copied.  Attention is per batch row and head:
// dP = dO V^T, dV += P^T dO, dS = softmax_bwd(P, dP), dQ = s dS K,
// dK += s dS^T Q.  Supported: the seed set (Add, LayerNorm and the fused
// forms, self-attention causal or not with lengths, FFN relu/gelu/gelu_tanh,
// Linear), RMSNorm, gated FFNs (swiglu, geglu), rotary positions and
// grouped-query attention, cross-attention (kv=, kv_lengths=); anything
// else is an error naming the node.
//
// Nothing from the graph file reaches the code except numbers: buffers are
// named v<id>/d<id>/s<node>_..., parameters w[i], and comments carry op names
// and line:col only.
#include "ops.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- output text: bc_sbuf (ctx.c) -----------------------------------------------

typedef bc_sbuf gtext;
#define put bc_sb_add
#define vput bc_sb_vadd

// --- the plan ----------------------------------------------------------------

enum { MAX_SAVE = 4, MAX_TEMP = 4 };

typedef struct {
  const char *name;
  int64_t size;         // floats at the bounds
  int lo, hi;           // live times
  int64_t off;
} gbuf;

typedef struct bcG_emitter {
  bc_ctx *ctx;
  const bc_graph *g;
  gtext t;
  int N;                // nodes
  gbuf *bufs; int nbufs;
  int *val_buf;         // per value: buffer of its forward storage (-1: caller memory)
  int *grad_buf;        // per value: buffer of its gradient (-1: none)
  int (*save)[MAX_SAVE];// per node: buffers it keeps for its backward
  int (*temp)[MAX_TEMP];// per node: buffers its backward uses
  int *minr, *maxr;     // per value: first and last reading node (-1: none)
  const char **rtname;  // per dim: "rt<k>" for a run-time dim, NULL when fixed
  int64_t arena;        // floats
  bool gemm_only;       // bench floor: kernel calls left out
  bool forward_only;    // bench: the step's forward half alone
} G;

// A statement calling an elementwise kernel: left out of the gemm-only
// build (the benchmark floor: the same GEMMs alone).
__attribute__((format(printf, 2, 3)))
static void kput(G *E, const char *fmt, ...) {
  if (E->gemm_only) return;
  va_list ap;
  va_start(ap, fmt);
  vput(&E->t, fmt, ap);
  va_end(ap);
}

static int add_buf(G *E, const char *name, int64_t size, int lo, int hi) {
  gbuf *nb = realloc(E->bufs, (size_t)(E->nbufs + 1) * sizeof *nb);
  if (!nb) return -1;
  E->bufs = nb;
  E->bufs[E->nbufs] = (gbuf){name, size > 0 ? size : 1, lo, hi, -1};
  return E->nbufs++;
}

static int bwd_time(const G *E, int node) { return 2 * E->N - 1 - node; }

static bool caller_mem(const bc_graph *g, int v) {
  return g->vals[v].kind == BC_VAL_INPUT || bcI_is_output(g, v);
}

// The shape of value v seen as B x T x D (bounds).
static bool btd_of(const bc_graph *g, int v, bc_btd *s) {
  return v >= 0 && bcI_as_btd(&g->vals[v].shape, s);
}

// The op table's check entries: NULL when the emitted backward takes n.
const char *bcG_supported(const bc_graph *g, const bc_node *n) {
  (void)g, (void)n;
  return NULL;
}

const char *bcG_check_attention(const bc_graph *g, const bc_node *n) {
  (void)g;
  if (n->nin > 1 && n->in[1] >= 0 && (n->causal || n->rope))
    return "causal or rotary cross-attention";
  return NULL;
}

// Why the emitted backward cannot take node n (NULL: it can).
static const char *unsupported(const bc_graph *g, const bc_node *n) {
  const bc_op_def *d = bcT_def(n->op);
  const char *why = d ? d->grad_check(g, n) : "this op";
  if (why) return why;
  for (int k = 0; k < n->nin; k++) {
    int v = n->in[k];
    bc_btd s;
    if (v >= 0 && g->vals[v].type == BC_VT_F32 && !btd_of(g, v, &s)) return "this input rank";
  }
  return NULL;
}

int bcG_check(bc_ctx *ctx, const bc_graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    const char *why = unsupported(g, n);
    if (!why) continue;
    if (!ctx) return BC_EINPUT;
    return bc_error_at(ctx, n->loc,
                       "the emitted backward does not support %s (node %d, %s); "
                       "`blockc grad --backend interp` computes its gradient",
                       why, n->id, bcI_op_name(n->op));
  }
  return BC_OK;
}

static int64_t numel(const bc_graph *g, int v) { return bc_shape_numel(&g->vals[v].shape); }

// Saves and backward temporaries of node n (sizes at the bounds): the
// frame every op's buffers entry starts from.
typedef struct {
  int lo, hi;           // n's forward and backward times
  bc_btd s;             // its input 0 as B x T x D
  int64_t rows, d;
  int *sv, *tp;         // its save and temp slots
  const char *id;
} frame;

static frame frame_of(G *E, const bc_node *n) {
  frame f;
  f.lo = n->id, f.hi = bwd_time(E, n->id);
  btd_of(E->g, n->in[0], &f.s);
  f.rows = f.s.b * f.s.t, f.d = f.s.d;
  f.sv = E->save[n->id], f.tp = E->temp[n->id];
  f.id = bc_fmt(E->ctx, "%d", n->id);
  return f;
}
#define SAVE(k, nm, sz) (f.sv[k] = add_buf(E, bc_fmt(E->ctx, "s%s_%s", f.id, nm), (sz), f.lo, f.hi))
#define TEMP(k, nm, sz) (f.tp[k] = add_buf(E, bc_fmt(E->ctx, "t%s_%s", f.id, nm), (sz), f.hi, f.hi))

int bcG_no_buffers(G *E, const bc_node *n) {
  (void)E, (void)n;
  return 0;
}

int bcG_bufs_add_ln(G *E, const bc_node *n) {
  frame f = frame_of(E, n);
  if (n->out[1] < 0 && SAVE(0, "sum", f.rows * f.d) < 0) return -1;
  if (TEMP(0, "dsum", f.rows * f.d) < 0) return -1;
  return 0;
}

int bcG_bufs_dual(G *E, const bc_node *n) {
  frame f = frame_of(E, n);
  if (SAVE(0, "sum", f.rows * f.d) < 0 || TEMP(0, "dsum", f.rows * f.d) < 0) return -1;
  return 0;
}

int bcG_bufs_attention(G *E, const bc_node *n) {
  frame f = frame_of(E, n);
  const bc_graph *g = E->g;
  bc_btd s = f.s;
  int64_t rows = f.rows, d = f.d;
  int64_t kvd = n->kv_heads * (d / n->heads);
  bc_btd kv = s;
  bool cross = n->nin > 1 && n->in[1] >= 0;
  if (cross) btd_of(g, n->in[1], &kv);
  // Self: one q|k|v buffer [rows, D + 2 kvd]; cross: q [rows, D] and
  // k|v [kv rows, 2 kvd] (slot 3).
  int64_t ldq = cross ? d : d + 2 * kvd;
  if (SAVE(0, cross ? "q" : "qkv", rows * ldq) < 0 ||
      SAVE(1, "probs", s.b * n->heads * s.t * kv.t) < 0 || SAVE(2, "heads", rows * d) < 0 ||
      TEMP(0, cross ? "dq" : "dqkv", rows * ldq) < 0 || TEMP(1, "dheads", rows * d) < 0 ||
      TEMP(2, "dprobs", s.t * kv.t) < 0)
    return -1;
  if (cross && (SAVE(3, "kv", kv.b * kv.t * 2 * kvd) < 0 ||
                TEMP(3, "dkv", kv.b * kv.t * 2 * kvd) < 0))
    return -1;
  return 0;
}

int bcG_bufs_ffn(G *E, const bc_node *n) {
  frame f = frame_of(E, n);
  int64_t rows = f.rows;
  // The activation is recomputed in the backward rather than kept: one
  // [rows, F] buffer less per layer for one elementwise pass.
  if (SAVE(0, "pre", rows * n->hidden) < 0 || TEMP(0, "dact", rows * n->hidden) < 0 ||
      (f.tp[1] = add_buf(E, bc_fmt(E->ctx, "f%s_act", f.id), rows * n->hidden, f.lo, f.lo)) < 0)
    return -1;
  if (bc_act_gated(n->act) &&  // the gate's pre-activation and its gradient
      (SAVE(1, "gate", rows * n->hidden) < 0 || TEMP(2, "dgate", rows * n->hidden) < 0))
    return -1;
  return 0;
}
#undef SAVE
#undef TEMP

static int node_buffers(G *E, const bc_node *n) {
  const bc_op_def *d = bcT_def(n->op);
  return d ? d->grad_buffers(E, n) : -1;
}

static int plan(G *E) {
  const bc_graph *g = E->g;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1), nn = (size_t)(E->N ? E->N : 1);
  E->val_buf = malloc(nv * sizeof(int));
  E->grad_buf = malloc(nv * sizeof(int));
  E->minr = malloc(nv * sizeof(int));
  E->maxr = malloc(nv * sizeof(int));
  E->save = malloc(nn * sizeof *E->save);
  E->temp = malloc(nn * sizeof *E->temp);
  if (!E->val_buf || !E->grad_buf || !E->minr || !E->maxr || !E->save || !E->temp)
    return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  for (int v = 0; v < g->nvals; v++) E->val_buf[v] = E->grad_buf[v] = E->minr[v] = E->maxr[v] = -1;
  for (int i = 0; i < E->N; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < MAX_SAVE; k++) E->save[i][k] = -1;
    for (int k = 0; k < MAX_TEMP; k++) E->temp[i][k] = -1;
    for (int k = 0; k < n->nin; k++) {
      int v = n->in[k];
      if (v < 0) continue;
      if (E->minr[v] < 0) E->minr[v] = i;
      E->maxr[v] = i;
    }
  }
  int st = bcG_check(E->ctx, g);
  if (st) return st;
  for (int v = 0; v < g->nvals; v++) {
    const bc_value *val = &g->vals[v];
    if (val->type != BC_VT_F32 || val->kind == BC_VAL_SCRATCH) continue;
    if (val->kind != BC_VAL_INPUT && (val->def < 0 || val->def >= E->N)) continue;  // not computed
    if (numel(g, v) > 0x7fffffffLL)
      return bc_error(E->ctx, BC_EINPUT, "error: value %%%d has more than 2^31-1 elements; "
                      "the emitted backward cannot take it", v);
    int def = val->def, end = def >= 0 ? bwd_time(E, def) : 2 * E->N;
    if (!caller_mem(g, v)) {
      int hi = E->minr[v] >= 0 ? bwd_time(E, E->minr[v]) : def;
      // An AddLayerNorm's sum output is also the input of its own backward.
      if (def >= 0 && g->nodes[def].op == BC_OP_ADD_LN && g->nodes[def].out[1] == v)
        hi = bwd_time(E, def);
      if ((E->val_buf[v] = add_buf(E, bc_fmt(E->ctx, "v%d", v), numel(g, v), def, hi)) < 0)
        return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
    }
    int start = bcI_is_output(g, v) ? E->N : E->maxr[v] >= 0 ? bwd_time(E, E->maxr[v]) : end;
    if ((E->grad_buf[v] = add_buf(E, bc_fmt(E->ctx, "d%d", v), numel(g, v), start, end)) < 0)
      return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  for (int i = 0; i < E->N; i++)
    if (node_buffers(E, &g->nodes[i]) < 0) return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  int *lo = malloc((size_t)(E->nbufs + 1) * sizeof(int)), *hi = malloc((size_t)(E->nbufs + 1) * sizeof(int));
  int64_t *sz = malloc((size_t)(E->nbufs + 1) * sizeof(int64_t));
  int64_t *off = malloc((size_t)(E->nbufs + 1) * sizeof(int64_t));
  if (!lo || !hi || !sz || !off) st = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < E->nbufs; i++) {
    lo[i] = E->bufs[i].lo;
    hi[i] = E->bufs[i].hi;
    sz[i] = E->bufs[i].size;
  }
  if (!st) st = bcM_place_intervals(E->ctx, 2 * E->N + 1, E->nbufs, lo, hi, sz, off, &E->arena);
  for (int i = 0; !st && i < E->nbufs; i++) E->bufs[i].off = off[i];
  if (!st && E->arena > BC_MAX_WORKSPACE / (int64_t)sizeof(float))
    st = bc_error(E->ctx, BC_ENOMEM, "error: the backward needs a workspace of %lld bytes, over "
                  "the limit of %lld bytes", (long long)E->arena * 4, (long long)BC_MAX_WORKSPACE);
  free(lo);
  free(hi);
  free(sz);
  free(off);
  return st;
}

// --- sizes as C ----------------------------------------------------------------

// Entries from..to-1 of shape s multiplied: "6", "rt0", "2*rt0" (ctx memory).
static const char *prod(G *E, const bc_shape *s, int from, int to) {
  int64_t k = 1;
  const char *syms = "";
  for (int i = from; i < to; i++) {
    if (s->sym[i] > 0) syms = bc_fmt(E->ctx, "%s*%s", syms, E->rtname[s->sym[i] - 1]);
    else k *= s->d[i];
  }
  if (!*syms) return bc_fmt(E->ctx, "%lld", (long long)k);
  if (k == 1) return syms + 1;
  return bc_fmt(E->ctx, "%lld%s", (long long)k, syms);
}

// B, T (C expressions) and D of value v.
typedef bcG_dims dims;  // ops.h
static dims dims_of(G *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  dims r;
  r.D = s->d[s->rank - 1];
  r.T = s->rank >= 2 ? prod(E, s, s->rank - 2, s->rank - 1) : "1";
  r.B = s->rank >= 3 ? prod(E, s, 0, s->rank - 2) : "1";
  r.rows = s->rank >= 2 ? prod(E, s, 0, s->rank - 1) : "1";
  return r;
}

// Names in the body.
static const char *V(G *E, int v) {
  const bc_graph *g = E->g;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v) return bc_fmt(E->ctx, "out%d", i);
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == v) return bc_fmt(E->ctx, "in%d", i);
  return E->bufs[E->val_buf[v]].name;
}
static const char *D_(G *E, int v) { return E->bufs[E->grad_buf[v]].name; }
static const char *S(G *E, int i, int k) { return E->bufs[E->save[i][k]].name; }
static const char *TMP(G *E, int i, int k) { return E->bufs[E->temp[i][k]].name; }
static const char *W(G *E, const bc_node *n, int slot) {
  return n->param[slot] >= 0 ? bc_fmt(E->ctx, "w[%d]", n->param[slot]) : "0";
}
static const char *DW(G *E, const bc_node *n, int slot) {
  return n->param[slot] >= 0 ? bc_fmt(E->ctx, "dw[%d]", n->param[slot]) : "0";
}

// p + off as C, leaving out "+ 0".
static const char *at(G *E, const char *p, int64_t off) {
  return off ? bc_fmt(E->ctx, "%s + %lld", p, (long long)off) : p;
}

// A matrix as the GEMMs read it: rows r0.. of a stored (out, in) param, or
// of its (in, out) transpose (io); p / dp point at its first element.
typedef bcG_wmat wmat;  // ops.h

static wmat wpiece(G *E, const bc_node *n, int slot, int bslot, int64_t r0, int64_t in,
                   int64_t total) {
  wmat m = {.io = n->in_out};
  int64_t off = m.io ? r0 : r0 * in;
  m.ld = m.io ? total : in;
  m.p = at(E, W(E, n, slot), off);
  m.dp = at(E, DW(E, n, slot), off);
  m.bias = bslot >= 0 && n->param[bslot] >= 0 ? at(E, W(E, n, bslot), r0) : "0";
  m.dbias = bslot >= 0 && n->param[bslot] >= 0 ? at(E, DW(E, n, bslot), r0) : NULL;
  return m;
}

#define SG "cblas_sgemm(BCRT_ROW_MAJOR, "
#define NT "BCRT_NO_TRANS"
#define TR "BCRT_TRANS"

// y[m, out] (ld ldy) = bias + x[m, in] W^T
static void lin_fwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                    wmat W, const char *y, int64_t ldy) {
  kput(E, "  bcrt_fill_cols(%s, %lld, %lld, %s, %s);\n", m, (long long)out, (long long)ldy,
      W.bias, y);
  put(&E->t, "  " SG NT ", %s, %s, %lld, %lld,\n              1.0f, %s, %lld, %s, %lld, 1.0f, %s, %lld);\n",
      W.io ? NT : TR, m, (long long)out, (long long)in, x, (long long)ldx, W.p, (long long)W.ld, y,
      (long long)ldy);
}

// dW += dy^T x, db += colsum dy, and (dx non-NULL) dx += dy W (beta: 1
// accumulates, 0 overwrites).  dx is written last, so it may be x's buffer.
static void lin_bwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                    wmat W, const char *dy, int64_t lddy, const char *dx, int64_t lddx,
                    const char *beta) {
  if (W.io)
    put(&E->t, "  " SG TR ", " NT ", %lld, %lld, %s,\n              1.0f, %s, %lld, %s, %lld, 1.0f, %s, %lld);\n",
        (long long)in, (long long)out, m, x, (long long)ldx, dy, (long long)lddy, W.dp, (long long)W.ld);
  else
    put(&E->t, "  " SG TR ", " NT ", %lld, %lld, %s,\n              1.0f, %s, %lld, %s, %lld, 1.0f, %s, %lld);\n",
        (long long)out, (long long)in, m, dy, (long long)lddy, x, (long long)ldx, W.dp, (long long)W.ld);
  if (W.dbias)
    kput(E, "  bcrt_colsum_add(%s, %lld, %lld, %s, %s);\n", m, (long long)out, (long long)lddy, dy,
        W.dbias);
  if (dx)
    put(&E->t, "  " SG NT ", %s, %s, %lld, %lld,\n              1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
        W.io ? TR : NT, m, (long long)in, (long long)out, dy, (long long)lddy, W.p, (long long)W.ld,
        beta, dx, (long long)lddx);
}

// A float literal that reads back as (float)v: "0.125f", "1.0f", "1e-05f".
static const char *fl(G *E, double v) {
  char b[64];
  snprintf(b, sizeof b, "%.9g", (double)(float)v);
  return bc_fmt(E->ctx, "%s%sf", b, strpbrk(b, ".e") ? "" : ".0");
}

// The C name of attention node n's lengths input in slot 2 (queries, and
// self-attention keys) or 3 (cross-attention keys); NULL when absent.
static const char *len_of(G *E, const bc_node *n, int slot) {
  if (n->nin <= slot || n->in[slot] < 0) return NULL;
  for (int i = 0; i < E->g->ninputs; i++)
    if (E->g->inputs[i] == n->in[slot]) return bc_fmt(E->ctx, "len%d", i);
  return NULL;
}

static const char *act_name(bc_act a) { return bcE_act_macro(a); }

// The FFN's activation a from the kept pre-activation(s) into dst:
// act(pre), or act(gate) * pre when gated.
static void ffn_act(G *E, const bc_node *n, const char *rows, const char *dst) {
  if (bc_act_gated(n->act))
    kput(E, "  bcrt_glu_act(%s, %lld, %s, %s, %s, %s);\n", rows, (long long)n->hidden,
         act_name(n->act), S(E, n->id, 0), S(E, n->id, 1), dst);
  else
    kput(E, "  bcrt_act(%s, %lld, %s, %s, %s);\n", rows, (long long)n->hidden, act_name(n->act),
         S(E, n->id, 0), dst);
}

// Attention pieces: Q, K, V matrices (packed or separate) and O.
static void attn_w(G *E, const bc_node *n, int64_t d, int64_t kvd, wmat *q, wmat *k, wmat *v,
                   wmat *o) {
  if (n->param[4] >= 0) {
    *q = wpiece(E, n, 0, 1, 0, d, d);
    *k = wpiece(E, n, 4, 5, 0, d, kvd);
    *v = wpiece(E, n, 6, 7, 0, d, kvd);
  } else {
    int64_t tot = d + 2 * kvd;
    *q = wpiece(E, n, 0, 1, 0, d, tot);
    *k = wpiece(E, n, 0, 1, d, d, tot);
    *v = wpiece(E, n, 0, 1, d + kvd, d, tot);
  }
  *o = wpiece(E, n, 2, 3, 0, d, d);
}

// --- forward, per node ------------------------------------------------------------

// One attention node's geometry and buffers: queries x [B, T, D]; keys and
// values from x (self) or from kv [B, S, D] (cross); Q rows ldq apart in qb,
// K rows ldk apart in kb with V kvd columns after K.
typedef struct {
  dims s, kv;
  bool cross;
  int64_t d, H, dh, kvd, group, ldq, ldk;
  const char *x, *kvx, *qb, *kb, *dqb, *dkb, *len, *kvlen, *P, *cat;
  wmat q, k, v, o;
  bool packed;  // self-attention over one packed q|k|v matrix: one GEMM for all three
  wmat qkv;
} att;

static att att_of(G *E, const bc_node *n) {
  att a = {.s = dims_of(E, n->in[0]), .cross = n->nin > 1 && n->in[1] >= 0};
  a.kv = a.cross ? dims_of(E, n->in[1]) : a.s;
  a.d = a.s.D;
  a.H = n->heads;
  a.dh = a.d / a.H;
  a.kvd = n->kv_heads * a.dh;
  a.group = a.H / n->kv_heads;
  a.x = V(E, n->in[0]);
  a.kvx = a.cross ? V(E, n->in[1]) : a.x;
  a.len = len_of(E, n, 2);
  a.kvlen = a.cross ? len_of(E, n, 3) : a.len;
  a.P = S(E, n->id, 1);
  a.cat = S(E, n->id, 2);
  if (a.cross) {
    a.ldq = a.d;
    a.ldk = 2 * a.kvd;
    a.qb = S(E, n->id, 0);
    a.kb = S(E, n->id, 3);
    a.dqb = TMP(E, n->id, 0);
    a.dkb = TMP(E, n->id, 3);
  } else {
    a.ldq = a.ldk = a.d + 2 * a.kvd;
    a.qb = S(E, n->id, 0);
    a.kb = bc_fmt(E->ctx, "%s + %lld", a.qb, (long long)a.d);
    a.dqb = TMP(E, n->id, 0);
    a.dkb = bc_fmt(E->ctx, "%s + %lld", a.dqb, (long long)a.d);
  }
  attn_w(E, n, a.d, a.kvd, &a.q, &a.k, &a.v, &a.o);
  a.packed = !a.cross && n->param[4] < 0;
  if (a.packed) a.qkv = wpiece(E, n, 0, 1, 0, a.d, a.d + 2 * a.kvd);
  return a;
}

// Q, K and V from the inputs (forward).
static void att_proj_fwd(G *E, const att *a) {
  if (a->packed) {
    lin_fwd(E, a->s.rows, a->ldq, a->d, a->x, a->d, a->qkv, a->qb, a->ldq);
    return;
  }
  lin_fwd(E, a->s.rows, a->d, a->d, a->x, a->d, a->q, a->qb, a->ldq);
  lin_fwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->k, a->kb, a->ldk);
  lin_fwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->v,
          bc_fmt(E->ctx, "%s + %lld", a->kb, (long long)a->kvd), a->ldk);
}

// Their backward: weights, biases and the inputs' gradients dx, dkv.
static void att_proj_bwd(G *E, const att *a, const char *dx, const char *dkv) {
  if (a->packed) {
    lin_bwd(E, a->s.rows, a->ldq, a->d, a->x, a->d, a->qkv, a->dqb, a->ldq, dx, a->d, "1.0f");
    return;
  }
  lin_bwd(E, a->s.rows, a->d, a->d, a->x, a->d, a->q, a->dqb, a->ldq, dx, a->d, "1.0f");
  lin_bwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->k, a->dkb, a->ldk, dkv, a->d, "1.0f");
  lin_bwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->v,
          bc_fmt(E->ctx, "%s + %lld", a->dkb, (long long)a->kvd), a->ldk, dkv, a->d, "1.0f");
}

// Opens the loops over batch rows and heads, naming T, S, nk (valid keys),
// and the offsets qo, ko of head h's Q and K columns in batch row b.
static void att_loops(G *E, const att *a) {
  put(&E->t, "  for (long b = 0; b < %s; b++) {\n", a->s.B);
  put(&E->t, "    const long T = %s, S = %s, nk = %s;  // queries, keys, valid keys\n", a->s.T,
      a->cross ? a->kv.T : "T", a->kvlen ? bc_fmt(E->ctx, "%s ? %s[b] : S", a->kvlen, a->kvlen) : "S");
  put(&E->t, "    for (long h = 0; h < %lld; h++) {\n", (long long)a->H);
  put(&E->t, "      const long qo = b*T*%lld + h*%lld, ko = b*S*%lld + (h/%lld)*%lld;\n",
      (long long)a->ldq, (long long)a->dh, (long long)a->ldk, (long long)a->group,
      (long long)a->dh);
  put(&E->t, "      float *ph = %s + (b*%lld + h)*T*S;  // softmax weights [T, S]\n", a->P,
      (long long)a->H);
}

// Padded query rows (past the lengths) of p [B, T, D]: zeroed.
static void zero_padded_rows(G *E, const att *a, const char *p, const char *why) {
  if (!a->len) return;
  kput(E, "  if (%s)  // %s\n"
          "    for (long b = 0; b < %s; b++)\n"
          "      bcrt_fill_rows(%s - %s[b], %lld, 0, %s + (b*%s + %s[b])*%lld);\n",
       a->len, why, a->s.B, a->s.T, a->len, (long long)a->d, p, a->s.T, a->len, (long long)a->d);
}

void bcG_fwd_attention(G *E, const bc_node *n) {
  att a = att_of(E, n);
  att_proj_fwd(E, &a);
  const char *th = fl(E, n->rope_theta);
  if (n->rope)  // rotary positions on Q and K (row r is position r % T)
    kput(E, "  bcrt_rope(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n"
            "  bcrt_rope(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n",
         a.s.rows, a.s.T, (long long)a.H, (long long)a.dh, (long long)a.ldq, th, a.qb, a.s.rows,
         a.s.T, (long long)n->kv_heads, (long long)a.dh, (long long)a.ldk, th, a.kb);
  att_loops(E, &a);
  put(&E->t, "      " SG NT ", " TR ", T, nk, %lld, %s, %s + qo, %lld, %s + ko, %lld, 0.0f, ph, S);\n",
      (long long)a.dh, fl(E, 1.0 / sqrt((double)a.dh)), a.qb, (long long)a.ldq, a.kb,
      (long long)a.ldk);
  kput(E, "      bcrt_softmax(T, nk, S, %d, 0, ph);\n", n->causal ? 1 : 0);
  kput(E, "      if (nk < S) bcrt_fill_cols(T, S - nk, S, 0, ph + nk);\n");
  put(&E->t, "      " SG NT ", " NT ", T, %lld, nk, 1.0f, ph, S, %s + ko + %lld, %lld, 0.0f, "
             "%s + b*T*%lld + h*%lld, %lld);\n",
      (long long)a.dh, a.kb, (long long)a.kvd, (long long)a.ldk, a.cat, (long long)a.d,
      (long long)a.dh, (long long)a.d);
  put(&E->t, "    }\n  }\n");
  lin_fwd(E, a.s.rows, a.d, a.d, a.cat, a.d, a.o, V(E, n->out[0]), a.d);
  zero_padded_rows(E, &a, V(E, n->out[0]), "padded query rows are exactly zero");
}

void bcG_fwd_layernorm(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  const char *x = V(E, n->in[0]);
  const char *eps = fl(E, n->eps);
  kput(E, "  bcrt_layernorm(%s, %lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D, x,
      W(E, n, 0), W(E, n, 1), eps, V(E, n->out[0]));
}

void bcG_fwd_rmsnorm(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  const char *x = V(E, n->in[0]);
  const char *eps = fl(E, n->eps);
  kput(E, "  bcrt_rmsnorm(%s, %lld, %s, %s, %s, %s);\n", s.rows, (long long)s.D, x,
      W(E, n, 0), eps, V(E, n->out[0]));
}

// AddLayerNorm and DualAddLayerNorm.
void bcG_fwd_add_ln(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  const char *x = V(E, n->in[0]);
  const char *eps = fl(E, n->eps);
  bool rms = n->op == BC_OP_RMSNORM || n->rms;
  bool dual = n->op == BC_OP_DUAL_ADD_LN;
  const char *sum = !dual && n->out[1] >= 0 ? V(E, n->out[1]) : S(E, n->id, 0);
  int a = dual ? 1 : 0, b = dual ? 2 : 1, yo = dual ? 1 : 0;
  if (dual && n->out[0] >= 0)
    kput(E, "  bcrt_add((long)%s*%lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
        fl(E, n->alpha), x, fl(E, n->beta), V(E, n->in[2]), V(E, n->out[0]));
  double ca = dual ? n->alpha2 : n->alpha, cb = dual ? n->beta2 : n->beta;
  if (rms)
    kput(E, "  bcrt_add_rmsnorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
        (long long)s.D, fl(E, ca), V(E, n->in[a]), fl(E, cb), V(E, n->in[b]), W(E, n, 0), eps,
        sum, n->out[yo] >= 0 ? V(E, n->out[yo]) : sum);
  else
    kput(E, "  bcrt_add_layernorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
        (long long)s.D, fl(E, ca), V(E, n->in[a]), fl(E, cb), V(E, n->in[b]), W(E, n, 0),
        W(E, n, 1), eps, sum, n->out[yo] >= 0 ? V(E, n->out[yo]) : sum);
}

void bcG_fwd_ffn(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  const char *x = V(E, n->in[0]);
  int64_t f = n->hidden;
  wmat up = wpiece(E, n, 0, 1, 0, s.D, f), dn = wpiece(E, n, 2, 3, 0, f, s.D);
  lin_fwd(E, s.rows, f, s.D, x, s.D, up, S(E, n->id, 0), f);
  if (bc_act_gated(n->act))
    lin_fwd(E, s.rows, f, s.D, x, s.D, wpiece(E, n, 4, 5, 0, s.D, f), S(E, n->id, 1), f);
  ffn_act(E, n, s.rows, TMP(E, n->id, 1));
  lin_fwd(E, s.rows, s.D, f, TMP(E, n->id, 1), f, dn, V(E, n->out[0]), s.D);
}

static void fwd_node(G *E, const bc_node *n) {
  const bc_op_def *d = bcT_def(n->op);
  if (d) d->grad_fwd(E, n);  // bcG_check refused anything else
}

// --- backward, per node ------------------------------------------------------------

// dst += k * src over value v's elements.
static void axpy(G *E, int v, double k, const char *src, const char *dst) {
  dims s = dims_of(E, v);
  kput(E, "  bcrt_add((long)%s*%lld, 1.0f, %s, %s, %s, %s);\n", s.rows, (long long)s.D, dst,
      fl(E, k), src, dst);
}

// What op files use (ops.h).
bcG_dims bcG_dims_of(G *E, int v) { return dims_of(E, v); }
void bcG_kput(G *E, const char *fmt, ...) {
  if (E->gemm_only) return;
  va_list ap;
  va_start(ap, fmt);
  vput(&E->t, fmt, ap);
  va_end(ap);
}
const char *bcG_fl(G *E, double v) { return fl(E, v); }
const char *bcG_val(G *E, int v) { return V(E, v); }
const char *bcG_dval(G *E, int v) { return D_(E, v); }
void bcG_axpy(G *E, int v, double k, const char *src, const char *dst) { axpy(E, v, k, src, dst); }
wmat bcG_wpiece(G *E, const bc_node *n, int slot, int bslot, int64_t r0, int64_t in,
                int64_t total) {
  return wpiece(E, n, slot, bslot, r0, in, total);
}
void bcG_lin_fwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                 wmat W, const char *y, int64_t ldy) {
  lin_fwd(E, m, out, in, x, ldx, W, y, ldy);
}
void bcG_lin_bwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                 wmat W, const char *dy, int64_t lddy, const char *dx, int64_t lddx,
                 const char *beta) {
  lin_bwd(E, m, out, in, x, ldx, W, dy, lddy, dx, lddx, beta);
}

void bcG_bwd_attention(G *E, const bc_node *n) {
  att a = att_of(E, n);
  const char *dy = D_(E, n->out[0]), *dcat = TMP(E, n->id, 1), *dP = TMP(E, n->id, 2);
  const char *dx = D_(E, n->in[0]), *dkv = a.cross ? D_(E, n->in[1]) : dx;
  zero_padded_rows(E, &a, dy, "padded query rows were zeroed: no gradient flows through them");
  lin_bwd(E, a.s.rows, a.d, a.d, a.cat, a.d, a.o, dy, a.d, dcat, a.d, "0.0f");
  kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a.s.rows, (long long)a.ldq, a.dqb);
  if (a.cross) kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a.kv.rows, (long long)a.ldk, a.dkb);
  att_loops(E, &a);
  put(&E->t, "      const float *doh = %s + b*T*%lld + h*%lld;\n", dcat, (long long)a.d,
      (long long)a.dh);
  put(&E->t, "      // dP = dO V^T;  dV += P^T dO;  dS = softmax'(dP);  dQ += s dS K;  dK += s dS^T Q\n");
  put(&E->t, "      " SG NT ", " TR ", T, nk, %lld, 1.0f, doh, %lld, %s + ko + %lld, %lld, 0.0f, %s, S);\n",
      (long long)a.dh, (long long)a.d, a.kb, (long long)a.kvd, (long long)a.ldk, dP);
  put(&E->t, "      " SG TR ", " NT ", nk, %lld, T, 1.0f, ph, S, doh, %lld, 1.0f, %s + ko + %lld, %lld);\n",
      (long long)a.dh, (long long)a.d, a.dkb, (long long)a.kvd, (long long)a.ldk);
  kput(E, "      bcrt_softmax_bwd(T, nk, S, ph, %s);\n", dP);
  const char *sc = fl(E, 1.0 / sqrt((double)a.dh));
  put(&E->t, "      " SG NT ", " NT ", T, %lld, nk, %s, %s, S, %s + ko, %lld, 1.0f, %s + qo, %lld);\n",
      (long long)a.dh, sc, dP, a.kb, (long long)a.ldk, a.dqb, (long long)a.ldq);
  put(&E->t, "      " SG TR ", " NT ", nk, %lld, T, %s, %s, S, %s + qo, %lld, 1.0f, %s + ko, %lld);\n",
      (long long)a.dh, sc, dP, a.qb, (long long)a.ldq, a.dkb, (long long)a.ldk);
  put(&E->t, "    }\n  }\n");
  const char *th = fl(E, n->rope_theta);
  if (n->rope)  // back through the rotations: their transposes
    kput(E, "  bcrt_rope_bwd(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n"
            "  bcrt_rope_bwd(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n",
         a.s.rows, a.s.T, (long long)a.H, (long long)a.dh, (long long)a.ldq, th, a.dqb, a.s.rows,
         a.s.T, (long long)n->kv_heads, (long long)a.dh, (long long)a.ldk, th, a.dkb);
  att_proj_bwd(E, &a, dx, dkv);
}

void bcG_bwd_norms(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  bool rms = n->op == BC_OP_RMSNORM || n->rms;
  const char *eps = fl(E, n->eps);
  if (n->op == BC_OP_LAYERNORM || n->op == BC_OP_RMSNORM) {
    if (rms)
      kput(E, "  bcrt_rmsnorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
          V(E, n->in[0]), W(E, n, 0), eps, D_(E, n->out[0]), D_(E, n->in[0]), DW(E, n, 0));
    else
      kput(E, "  bcrt_layernorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
          (long long)s.D, V(E, n->in[0]), W(E, n, 0), eps, D_(E, n->out[0]), D_(E, n->in[0]),
          DW(E, n, 0), DW(E, n, 1));
    return;
  }
  bool dual = n->op == BC_OP_DUAL_ADD_LN;
  const char *sum = !dual && n->out[1] >= 0 ? V(E, n->out[1]) : S(E, n->id, 0);
  const char *ds = TMP(E, n->id, 0);
  int a = dual ? 1 : 0, b = dual ? 2 : 1, yo = dual ? 1 : 0;
  double ca = dual ? n->alpha2 : n->alpha, cb = dual ? n->beta2 : n->beta;
  if (!dual && n->out[1] >= 0)
    kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);  // the sum is an output too\n", s.rows,
        (long long)s.D, D_(E, n->out[1]), ds);
  else
    kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", s.rows, (long long)s.D, ds);
  if (n->out[yo] >= 0) {
    if (rms)
      kput(E, "  bcrt_rmsnorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
          sum, W(E, n, 0), eps, D_(E, n->out[yo]), ds, DW(E, n, 0));
    else
      kput(E, "  bcrt_layernorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
          (long long)s.D, sum, W(E, n, 0), eps, D_(E, n->out[yo]), ds, DW(E, n, 0), DW(E, n, 1));
  }
  axpy(E, n->in[a], ca, ds, D_(E, n->in[a]));
  axpy(E, n->in[b], cb, ds, D_(E, n->in[b]));
  if (dual && n->out[0] >= 0) {
    axpy(E, n->in[0], n->alpha, D_(E, n->out[0]), D_(E, n->in[0]));
    axpy(E, n->in[2], n->beta, D_(E, n->out[0]), D_(E, n->in[2]));
  }
}

void bcG_bwd_ffn(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  int64_t f = n->hidden;
  wmat up = wpiece(E, n, 0, 1, 0, s.D, f), dn = wpiece(E, n, 2, 3, 0, f, s.D);
  const char *da = TMP(E, n->id, 0);  // first the activation again, then its gradient
  ffn_act(E, n, s.rows, da);
  lin_bwd(E, s.rows, s.D, f, da, f, dn, D_(E, n->out[0]), s.D, da, f, "0.0f");
  if (bc_act_gated(n->act)) {
    kput(E, "  bcrt_glu_bwd(%s, %lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)f,
         act_name(n->act), S(E, n->id, 0), S(E, n->id, 1), da, TMP(E, n->id, 2));
    lin_bwd(E, s.rows, f, s.D, V(E, n->in[0]), s.D, wpiece(E, n, 4, 5, 0, s.D, f),
            TMP(E, n->id, 2), f, D_(E, n->in[0]), s.D, "1.0f");
  } else {
    kput(E, "  bcrt_act_bwd(%s, %lld, %s, %s, %s);\n", s.rows, (long long)f, act_name(n->act),
         S(E, n->id, 0), da);
  }
  lin_bwd(E, s.rows, f, s.D, V(E, n->in[0]), s.D, up, da, f, D_(E, n->in[0]), s.D, "1.0f");
}

static void bwd_node(G *E, const bc_node *n) {
  const bc_op_def *d = bcT_def(n->op);
  if (d) d->grad_bwd(E, n);  // bcG_check refused anything else
}

// --- the function -------------------------------------------------------------------

static void zero_value(G *E, int v, const char *p) {
  dims s = dims_of(E, v);
  kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", s.rows, (long long)s.D, p);
}

static void prologue(G *E) {
  const bc_graph *g = E->g;
  const char *m = g->model;
  put(&E->t, "\n// The training step (issue 14): forward keeping activations, then the reverse\n"
             "// walk.  dy: one array per output (NULL: not in the loss); dw: one array per\n"
             "// parameter (overwritten); dx: NULL or one per input (NULL entries skipped).\n"
             "// Workspace: %lld bytes (64-byte aligned).\n",
      (long long)bcY_workspace_bytes_of(E->arena));
  put(&E->t, "int %s_backward(const float *const *w, void *const *io, const long *rt,\n"
             "    const float *const *dy, float *const *dw, float *const *dx, void *workspace);\n", m);
  put(&E->t, "int %s_backward(const float *const *w, void *const *io, const long *rt,\n"
             "    const float *const *dy, float *const *dw, float *const *dx, void *workspace) {\n", m);
  put(&E->t, "  if (!w || !io || !dy || !dw || !workspace || ((unsigned long)workspace & 63u)) return 1;\n");
  if (g->nrt) put(&E->t, "  if (!rt) return 1;\n");
  else put(&E->t, "  (void)rt;\n");
  if (g->nparams)
    put(&E->t, "  for (int i = 0; i < %d; i++)\n    if (!w[i] || !dw[i]) return 1;\n", g->nparams);
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *dm = &g->dims[i];
    if (dm->rt < 0) continue;
    put(&E->t, "  const long rt%d = rt[%d];  // run-time dim %d: 1..%lld\n", dm->rt, dm->rt, dm->rt,
        (long long)dm->value);
    put(&E->t, "  if (rt%d < 1 || rt%d > %lld) return 2;\n", dm->rt, dm->rt, (long long)dm->value);
  }
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (g->vals[v].type == BC_VT_I32) {
      put(&E->t, "  const int *len%d = (const int *)io[%d];  // lengths (NULL: full)\n  (void)len%d;\n",
          i, i, i);
      continue;
    }
    put(&E->t, "  const float *in%d = (const float *)io[%d];\n  if (!in%d) return 1;\n  (void)in%d;\n",
        i, i, i, i);
  }
  for (int i = 0; i < g->noutputs; i++)
    put(&E->t, "  float *out%d = (float *)io[%d];\n  if (!out%d) return 1;\n  (void)out%d;\n", i,
        g->ninputs + i, i, i);
  for (int i = 0; i < E->N; i++) {  // lengths against the axis they mask
    const bc_node *n = &g->nodes[i];
    for (int slot = 2; n->op == BC_OP_ATTENTION && slot < 4; slot++) {
      const char *len = len_of(E, n, slot);
      if (!len) continue;
      dims s = dims_of(E, n->in[slot == 2 ? 0 : 1]);
      put(&E->t, "  if (%s)\n    for (long b = 0; b < %s; b++)\n"
                 "      if (%s[b] < 1 || %s[b] > %s) return 3;\n", len, s.B, len, len, s.T);
    }
  }
  put(&E->t, "  float *const ws = (float *)workspace;  // %lld floats\n", (long long)E->arena);
  for (int i = 0; i < E->nbufs; i++)
    put(&E->t, "  float *%s = ws + %lld;\n", E->bufs[i].name, (long long)E->bufs[i].off);
  for (int i = 0; i < g->ninputs; i++) {  // input gradients: into dx when given
    int v = g->inputs[i];
    if (g->vals[v].type != BC_VT_F32) continue;
    put(&E->t, "  if (dx && dx[%d]) %s = dx[%d];\n", i, D_(E, v), i);
  }
  for (int p = 0; p < g->nparams; p++) {
    const bc_shape *s = &g->params[p].shape;
    int64_t cols = s->rank ? s->d[s->rank - 1] : 1;
    kput(E, "  bcrt_fill_rows(%lld, %lld, 0, dw[%d]);\n", (long long)(bc_shape_numel(s) / (cols ? cols : 1)),
        (long long)cols, p);
  }
}

// Gradient buffers that start at time t: zeroed, or (outputs, at the start
// of the backward) seeded with dy.
static void start_grads(G *E, int t) {
  const bc_graph *g = E->g;
  for (int v = 0; v < g->nvals; v++) {
    if (E->grad_buf[v] < 0 || E->bufs[E->grad_buf[v]].lo != t) continue;
    int oi = -1;
    for (int i = 0; i < g->noutputs; i++)
      if (g->outputs[i] == v && oi < 0) oi = i;
    if (oi >= 0 && t == E->N) {
      dims s = dims_of(E, v);
      kput(E, "  if (dy[%d]) bcrt_copy((long)%s*%lld, dy[%d], %s);\n  else ", oi, s.rows,
          (long long)s.D, oi, D_(E, v));
      zero_value(E, v, D_(E, v));
    } else {
      zero_value(E, v, D_(E, v));
    }
  }
}

// Names the node's parameters in comments: w[3] = layers.0.norm1.weight.
// Any byte outside [A-Za-z0-9_.] prints as '?' (graph text never reaches
// the code unchecked, comments included).
static void param_comments(G *E, const bc_node *n) {
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    int p = n->param[k];
    if (p < 0) continue;
    char nm[BC_MAX_PARAM_NAME + 1];
    snprintf(nm, sizeof nm, "%s", E->g->params[p].name);
    for (char *c = nm; *c; c++)
      if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '.')) *c = '?';
    put(&E->t, "  //   w[%d] = %s\n", p, nm);
  }
}

static void body(G *E) {
  const bc_graph *g = E->g;
  for (int i = 0; i < E->N; i++) {
    const bc_node *n = &g->nodes[i];
    put(&E->t, "\n  // ---- forward n%d: %s  line %d:%d\n", i, bcI_op_name(n->op), n->loc.line,
        n->loc.col);
    param_comments(E, n);
    fwd_node(E, n);
  }
  if (E->forward_only) {  // bench: the forward half alone
    put(&E->t, "  (void)dy; (void)dx;\n  return 0;\n}\n");
    return;
  }
  put(&E->t, "\n  // ==== backward: seed the outputs with dy\n");
  start_grads(E, E->N);
  for (int i = E->N - 1; i >= 0; i--) {
    const bc_node *n = &g->nodes[i];
    put(&E->t, "\n  // ---- backward n%d: %s  line %d:%d\n", i, bcI_op_name(n->op), n->loc.line,
        n->loc.col);
    if (bwd_time(E, i) != E->N) start_grads(E, bwd_time(E, i));
    bwd_node(E, n);
  }
  start_grads(E, 2 * E->N);  // inputs nothing reads
  put(&E->t, "  return 0;\n}\n");
}

int bcG_emit(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o, char **csrc,
             int64_t *ws_bytes) {
  *csrc = NULL;
  if (!g->planned)
    return bc_error(ctx, BC_EINTERNAL, "internal error: the backward needs a planned graph");
  G E = {.ctx = ctx, .g = g, .N = g->nnodes, .gemm_only = o && o->gemm_only,
         .forward_only = o && o->backward_fwd_only};
  int st = BC_OK;
  E.rtname = calloc((size_t)(g->ndims ? g->ndims : 1), sizeof *E.rtname);
  if (!E.rtname) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < g->ndims; i++)
    if (g->dims[i].rt >= 0) E.rtname[i] = bc_fmt(ctx, "rt%d", g->dims[i].rt);
  if (!st) st = plan(&E);
  if (!st) {
    prologue(&E);
    body(&E);
    if (E.t.oom) st = bc_error(ctx, BC_ENOMEM, "error: out of memory emitting the backward");
  }
  if (!st) {
    *csrc = bc_strndup(ctx, E.t.p, E.t.len);
    if (!*csrc) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    *ws_bytes = bcY_workspace_bytes_of(E.arena);
  }
  free(E.t.p);
  free(E.bufs);
  free(E.val_buf);
  free(E.grad_buf);
  free(E.save);
  free(E.temp);
  free(E.minr);
  free(E.maxr);
  free(E.rtname);
  return st;
}
