// emit_grad.c — the emitted training step: `<model>_backward`, a forward
// that keeps what the backward needs, then the reverse walk, as C.
//
//   int <model>_backward(const float *const *w, void *const *io, const long *rt,
//                        const float *const *dy, float *const *dw,
//                        float *const *dx, void *workspace);
//   int <model>_backward_pool(w, io, rt, dy, dw, dx, int BC_training,
//                             unsigned long long BC_seed, unsigned long long BC_step,
//                             void *workspace, bcrt_pool *pool);
//
// _backward_pool is the body: its products and attention split over pool
// (NULL: the calling thread alone; the bits are the same for every pool),
// and the entries below call it with NULL.
//
// A graph with dropout (bcI_has_dropout) gets the body as
//   int <model>_backward_ex(w, io, rt, dy, dw, dx, int BC_training,
//                           unsigned long long BC_seed, unsigned long long BC_step,
//                           void *workspace);
// (BC_training != 0: dropout active with the masks of (seed, step);
// runtime/src/rng.c) and `<model>_backward` as the call with BC_training = 0;
// the layer functions then take the same three.  Graphs without dropout
// emit exactly what they did before.
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
//     heads; FFN: the pre-activation and the activation; a fused
//     add+norm: the sum)
//     until its own backward.  LayerNorm's mean and 1/std are recomputed by
//     bcrt_layernorm_bwd from the input instead of kept.
//   - Every float value has one gradient buffer, zeroed at the backward of
//     its last reader (outputs: seeded with dy when the backward starts),
//     accumulated (+=) by every reader, dead after its defining node's
//     backward.  An input's gradient goes straight into dx[i] when given.
//   - Parameter gradients accumulate into dw (zeroed first), so shared
//     weights sum their uses; a matrix read by one node only, whose one
//     dW GEMM covers it, is not zeroed: that GEMM overwrites it (beta 0,
//     the same bits; dw_overwrites).
//   - The step's GEMMs call bcrt_sgemm_pool (cblas_sgemm's arguments after
//     the pool): the runtime's choice of cblas_sgemm or its own bcrt_sgemm
//     (sgemm.c), in fixed tiles over the caller's pool, so the bits are the
//     same for every thread count.
// All those intervals are placed by the planner's own placement
// (bcM_place_intervals), so the arena is liveness-planned like the forward's.
//
// Per op: Linear-like products are three GEMMs (dx += dy W, dW += dy^T x,
// db += colsum dy); weights are read in place in their stored layout
// (packed q|k|v row blocks, layout=in_out) through the transpose flag and
// leading dimension, never copied.  Attention is one tiled kernel each way
// (runtime/src/attention.c, FlashAttention-2's schedule): the forward keeps
// each query row's log sum exp, never a [T, S] matrix of weights, and the
// backward recomputes the weights tile by tile from it: dP = dO V^T,
// dV += P^T dO, dS = P (dP - rowsum(dO O)), dQ += s dS K, dK += s dS^T Q,
// in (row, K|V head, key block) and (row, head, query block) tasks over
// the pool.  Supported: the seed set (Add, LayerNorm and the fused
// forms, self-attention causal or not with lengths, FFN relu/gelu/gelu_tanh,
// Linear), RMSNorm, gated FFNs (swiglu, geglu), rotary positions and
// grouped-query attention, cross-attention (kv=, kv_lengths=); anything
// else is an error naming the node.
//
// The layer run (g->layers) is two loops over one layer's code, forward
// l = 0..L-1 and backward l = L-1..0 (llm.c's), see "the layer loop".
//
// From the graph file only numbers and checked names reach the code: a
// value's buffer is named after it when the name is a safe identifier
// (bcE_name_ok: "x_12", its gradient "d_x_12"), else v<id>/d<id>; saves and
// temporaries s<node>_..., t<node>_...; parameters w[i] (lw[m] in a layer
// function); comments carry op names, line:col and sanitised parameter names.
#include "ops.h"

#include "blockc_rt.h"  // bcrt_drop_threshold

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

enum { MAX_SAVE = 7, MAX_TEMP = 9 };

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
  bool *used;           // per buffer: named by the entry's code (declared in its prologue)
  bool *dw_set;         // per param: its gradient's one dW GEMM writes it (beta 0): not zeroed first
  // The layer loop (g->layers; see "the layer loop" below).  A buffer of
  // trip t is member t of its family, named after the template trip's
  // (trip 1) member: offset off0 + t*stride (stride 0: one buffer for all).
  bool lay;             // the run is looped, forward and backward
  const char *why;      // why not, when g->layers has a run
  int *fam;             // per buffer: the template member of its family, -1
  int *trip;            // per buffer: its trip, -1
  int64_t *stride;      // per buffer (template members): floats from one trip's member to the next
  bool *hoist;          // per value: from before the run, its gradient zeroed before the loop
  int *extra;           // per carried-in value: trip 0's own buffer for its gradient, -1
  bool in_layer;        // emitting a layer function (the template trip's nodes)
  bool *lused;          // per buffer: named by the layer function being emitted
  unsigned char *argk;  // per value: an argument of it: 1 value, 2 gradient, 4 lengths
  int *args;            // (value << 2 | kind) in first-use order
  int nargs;
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

static int input_index_of(const bc_graph *g, int v) {
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == v) return i;
  return -1;
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
  if (n->head_dim && n->param[4] < 0) return "a packed QKV projection with head_dim=";
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
  int64_t dh = bc_head_dim(n, d), qd = n->heads * dh, kvd = n->kv_heads * dh;
  bc_btd kv = s;
  bool cross = n->nin > 1 && n->in[1] >= 0;
  if (cross) btd_of(g, n->in[1], &kv);
  // Self: one q|k|v buffer [rows, QD + 2 kvd]; cross: q [rows, QD] and
  // k|v [kv rows, 2 kvd] (slot 3); QD = H*dh (D unless head_dim=).
  int64_t ldq = cross ? qd : qd + 2 * kvd;
  if (SAVE(0, cross ? "q" : "qkv", rows * ldq) < 0 ||
      SAVE(1, "lse", s.b * n->heads * s.t) < 0 || SAVE(2, "heads", rows * qd) < 0 ||
      TEMP(0, cross ? "dq" : "dqkv", rows * ldq) < 0 || TEMP(1, "dheads", rows * qd) < 0)
    return -1;
  if (cross && (SAVE(3, "kv", kv.b * kv.t * 2 * kvd) < 0 ||
                TEMP(3, "dkv", kv.b * kv.t * 2 * kvd) < 0))
    return -1;
  // Issue 23.  qk_norm: the projections before the norm (saves 4, 5) and
  // their gradients (temps 7, 8); softcap: one head's raw scores,
  // recomputed in the backward (temp 6); head_scale: the heads before
  // their scales (save 6).
  if (n->qk_norm && (SAVE(4, cross ? "qpre" : "qkvpre", rows * ldq) < 0 ||
                     TEMP(7, cross ? "dqpre" : "dqkvpre", rows * ldq) < 0))
    return -1;
  if (n->qk_norm && cross && (SAVE(5, "kvpre", kv.b * kv.t * 2 * kvd) < 0 ||
                              TEMP(8, "dkvpre", kv.b * kv.t * 2 * kvd) < 0))
    return -1;
  if (n->head_scale && SAVE(6, "headsu", rows * qd) < 0) return -1;
  return 0;
}

// What op files use (ops.h): n's buffers.
int64_t bcG_rows_bound(G *E, const bc_node *n) { return frame_of(E, n).rows; }
int bcG_save_buf(G *E, const bc_node *n, int k, const char *nm, int64_t size) {
  frame f = frame_of(E, n);
  return SAVE(k, nm, size);
}
int bcG_temp_buf(G *E, const bc_node *n, int k, const char *nm, int64_t size) {
  frame f = frame_of(E, n);
  return TEMP(k, nm, size);
}
int bcG_fwd_temp_buf(G *E, const bc_node *n, int k, const char *nm, int64_t size) {
  frame f = frame_of(E, n);
  return f.tp[k] = add_buf(E, bc_fmt(E->ctx, "f%s_%s", f.id, nm), size, f.lo, f.lo);
}
#undef SAVE
#undef TEMP

static int node_buffers(G *E, const bc_node *n) {
  const bc_op_def *d = bcT_def(n->op);
  return d ? d->grad_buffers(E, n) : -1;
}

// A value's buffer: named after the value when its name is a safe
// identifier (bcE_name_ok), with its id appended ("x_12", gradient
// "d_x_12"), else v<id> / d<id>.  Every other name of the code ends in a
// letter or is one of the fixed ones, so none can meet another.
static const char *buf_name(G *E, int v, bool grad) {
  const char *nm = E->g->vals[v].name;
  if (!nm || strlen(nm) > 24 || !bcE_name_ok(E->g, nm))
    return bc_fmt(E->ctx, grad ? "d%d" : "v%d", v);
  return bc_fmt(E->ctx, grad ? "d_%s_%d" : "%s_%d", nm, v);
}

static int layer_plan(G *E);
static int place(G *E);

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
      if ((E->val_buf[v] = add_buf(E, buf_name(E, v, false), numel(g, v), def, hi)) < 0)
        return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
    }
    int start = bcI_is_output(g, v) ? E->N : E->maxr[v] >= 0 ? bwd_time(E, E->maxr[v]) : end;
    if ((E->grad_buf[v] = add_buf(E, buf_name(E, v, true), numel(g, v), start, end)) < 0)
      return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  for (int i = 0; i < E->N; i++)
    if (node_buffers(E, &g->nodes[i]) < 0) return bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  if ((st = layer_plan(E))) return st;
  return place(E);
}

// --- the layer loop: its plan -------------------------------------------------------
//
// g->layers (layers.c) becomes two functions called in loops, as llm.c's
// layer loop: <model>_layer_train_forward for l = 0..count-1 and
// <model>_layer_backward for l = count-1..0, whose bodies are the template
// trip's (trip 1's) nodes.  Trip t's buffers are the members t of
// families placed as one: at one offset when the members' lives are
// disjoint (gradients, temporaries), else count members stride floats
// apart (what the forward keeps for the backward).  A layer function
// reaches its trip's members from ws and l, its parameters and their
// gradients from w and dw plus the trip's block; what the trip reads from
// the trip before (for l == 0 from before the run), what every trip reads
// from before the run, and what the last trip writes to a graph output are
// arguments.  The loop needs every trip to zero the same gradients at the
// same nodes; gradients of values from before the run that every trip
// accumulates into are zeroed before the loop instead.

// Trip, node and output slot of value v in the run (false outside it).
static bool run_slot(const bc_graph *g, int v, int *t, int *j, int *k) {
  const bc_layers *L = &g->layers;
  int d = g->vals[v].def;
  if (d < L->first || d >= L->first + L->count * L->period) return false;
  *t = (d - L->first) / L->period;
  *j = (d - L->first) % L->period;
  for (*k = 0; *k < g->nodes[d].nout; (*k)++)
    if (g->nodes[d].out[*k] == v) return true;
  return false;
}

// The node whose backward zeroes v's gradient (-1: none, or the seeding).
static int zero_node(const G *E, int v) {
  int b = E->grad_buf[v], t = b >= 0 && !bcI_is_output(E->g, v) ? E->bufs[b].lo : -1;
  return t >= E->N && t < 2 * E->N ? 2 * E->N - 1 - t : -1;
}

// Before the run and read by the template trip itself (every trip).
static bool invariant(const G *E, int v) {
  const bc_layers *L = &E->g->layers;
  if (E->g->vals[v].def >= L->first) return false;
  for (int j = 0; j < L->period; j++) {
    const bc_node *n = &E->g->nodes[L->first + L->period + j];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] == v) return true;
  }
  return false;
}

// The node of the trip at which the template zeroes trip-0 value c's gradient.
static int template_zero(const G *E, int c) {
  return zero_node(E, c) - E->g->layers.first - E->g->layers.period;
}

// What the template trip's code names the value whose gradient trip t
// zeroes at node z of the trip: its member of trip 1, or of trip 0 for the
// trip before's (for t == 0, a value from before the run: the carried-in
// value it stands for that the template zeroes at z).
static int zero_image(const G *E, int v, int t, int z) {
  const bc_graph *g = E->g;
  int vt, j, k;
  if (run_slot(g, v, &vt, &j, &k)) {
    if (vt == t) return bcI_layer_value(g, 1, j, k);
    if (vt == t - 1) return bcI_layer_value(g, 0, j, k);
    return -1;
  }
  for (int c = 0; t == 0 && c < g->nvals; c++)
    if (run_slot(g, c, &vt, &j, &k) && vt == 0 && bcI_layer_carried_from(g, c) == v &&
        template_zero(E, c) == z)
      return c;
  return -1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

// The (node in the trip, image) pairs of the gradients trip t zeroes,
// sorted into out (n of them); false when one has no image.
static bool zero_set(const G *E, int t, int *out, int *n) {
  const bc_layers *L = &E->g->layers;
  *n = 0;
  for (int v = 0; v < E->g->nvals; v++) {
    int z = zero_node(E, v) - L->first - t * L->period;
    if (E->grad_buf[v] < 0 || E->hoist[v] || z < 0 || z >= L->period) continue;
    int im = zero_image(E, v, t, z);
    if (im < 0) return false;
    out[(*n)++] = z * E->g->nvals + im;
  }
  for (int c = 0; t == 0 && c < E->g->nvals; c++)  // zeroed by the template in its own buffer
    if (E->extra[c] >= 0) out[(*n)++] = template_zero(E, c) * E->g->nvals + c;
  qsort(out, (size_t)*n, sizeof *out, cmp_int);
  return true;
}

// Member buf of trip t joins the family of the template's tbuf.
static bool join(G *E, int buf, int tbuf, int t) {
  if ((buf < 0) != (tbuf < 0)) return false;
  if (buf >= 0) {
    E->fam[buf] = tbuf;
    E->trip[buf] = t;
  }
  return true;
}

// The families: false (E->why set) when a trip's buffers differ from the template's.
static bool families(G *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  for (int t = 0; t < L->count; t++)
    for (int j = 0; j < L->period; j++) {
      int i = L->first + t * L->period + j, i1 = L->first + L->period + j;
      for (int k = 0; k < g->nodes[i].nout; k++) {
        int v = g->nodes[i].out[k], v1 = g->nodes[i1].out[k];
        if ((v < 0) != (v1 < 0)) return false;
        if (v < 0) continue;
        bool out_last = t == L->count - 1 && caller_mem(g, v);  // carried out
        if ((!out_last && !join(E, E->val_buf[v], E->val_buf[v1], t)) ||
            !join(E, E->grad_buf[v], E->grad_buf[v1], t))
          return false;
      }
      for (int k = 0; k < MAX_SAVE; k++)
        if (!join(E, E->save[i][k], E->save[i1][k], t)) return false;
      for (int k = 0; k < MAX_TEMP; k++)
        if (!join(E, E->temp[i][k], E->temp[i1][k], t)) return false;
    }
  return true;
}

// A value from before the run standing for several carried-in values in
// trip 0 (ResiDual's two streams both start as x): all but the one the
// template zeroes where trip 0 zeroes it get a buffer of their own for
// trip 0, added to its gradient after the loop.
static int extras(G *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  int t, j, k;
  for (int c = 0; c < g->nvals; c++) {
    int v = bcI_layer_carried_from(g, c);
    if (!run_slot(g, c, &t, &j, &k) || t != 0 || v < 0 || E->grad_buf[v] < 0 ||
        zero_image(E, v, 0, zero_node(E, v) - L->first) == c)
      continue;
    int run_end = L->first + L->count * L->period;
    E->extra[c] = add_buf(E, bc_fmt(E->ctx, "%s_in", E->bufs[E->grad_buf[c]].name), numel(g, c),
                          bwd_time(E, run_end - 1), bwd_time(E, L->first));
    if (E->extra[c] < 0) return BC_ENOMEM;
  }
  return BC_OK;
}

static const char *no_loop(G *E, const char *why) {
  E->why = why;
  return NULL;
}

// Whether the run can be looped; sets fam, trip, hoist.
static const char *loopable(G *E, int *zs, int *z1) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  if (!families(E)) return no_loop(E, "a trip's buffers differ from the others'");
  int run_end = L->first + L->count * L->period;
  for (int v = 0; v < g->nvals; v++) {  // gradients every trip adds to: zeroed before the loop
    int z = zero_node(E, v);
    if (!invariant(E, v) || z < L->first || z >= run_end) continue;
    if (bcI_layer_carried_to(g, v) >= 0)
      return no_loop(E, "a value from before the layers is read both as trip 0's stream and by "
                     "every trip");
    E->hoist[v] = true;
    E->bufs[E->grad_buf[v]].lo = bwd_time(E, run_end - 1);
  }
  if (extras(E)) return no_loop(E, "out of memory");
  int n1, n;
  if (!zero_set(E, 1, z1, &n1)) return no_loop(E, "the layers' gradients are not zeroed alike");
  for (int t = 0; t < L->count; t++)
    if (!zero_set(E, t, zs, &n) || n != n1 || memcmp(zs, z1, (size_t)n * sizeof *zs))
      return no_loop(E, "the layers' gradients are not zeroed alike");
  return "";
}

// Dropout in the layer loop: trip t's node j has key_node k0 + t*kp (the
// parser unrolls each trip's calls alike), so a layer function computes its
// nodes' keys from l.  Whether that holds for every dropout node of the run.
static bool drop_keys_linear(const bc_graph *g) {
  const bc_layers *L = &g->layers;
  for (int j = 0; j < L->period; j++) {
    const bc_node *n0 = &g->nodes[L->first + j];
    if (!(n0->dropout > 0)) continue;
    int kp = g->nodes[L->first + L->period + j].key_node - n0->key_node;
    for (int t = 0; t < L->count; t++)
      if (g->nodes[L->first + t * L->period + j].key_node != n0->key_node + t * kp) return false;
  }
  return true;
}

static int layer_plan(G *E) {
  const bc_graph *g = E->g;
  // Room for the buffers and the extras (at most one per value) to come.
  size_t nv = (size_t)(g->nvals ? g->nvals : 1), nb = (size_t)E->nbufs + nv;
  E->used = calloc(nb, sizeof *E->used);
  E->lused = calloc(nb, sizeof *E->lused);
  E->fam = malloc(nb * sizeof *E->fam);
  E->trip = malloc(nb * sizeof *E->trip);
  E->stride = calloc(nb, sizeof *E->stride);
  E->hoist = calloc(nv, sizeof *E->hoist);
  E->dw_set = calloc((size_t)(g->nparams ? g->nparams : 1), sizeof *E->dw_set);
  E->argk = calloc(nv, sizeof *E->argk);
  E->extra = malloc(nv * sizeof *E->extra);
  E->args = malloc(3 * nv * sizeof *E->args);
  int *zs = malloc(nv * sizeof *zs), *z1 = malloc(nv * sizeof *z1);
  int st = E->used && E->lused && E->fam && E->trip && E->stride && E->hoist && E->dw_set && E->argk && E->args &&
                   E->extra && zs && z1 ? BC_OK : bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  for (size_t i = 0; !st && i < nb; i++) E->fam[i] = E->trip[i] = -1;
  for (int v = 0; !st && v < g->nvals; v++) E->extra[v] = -1;
  if (!st && g->layers.count >= 2 && !drop_keys_linear(g)) {
    E->why = "a dropout node's key (its creation index) does not step alike from trip to trip";
  } else if (!st && g->layers.count >= 2) {
    E->lay = loopable(E, zs, z1) != NULL;
    if (!E->lay) {  // back to no families and the gradients' own start times
      for (int i = 0; i < E->nbufs; i++) E->fam[i] = E->trip[i] = -1;
      for (int v = 0; v < g->nvals; v++)
        if (E->extra[v] >= 0) {  // unused: no room
          E->bufs[E->extra[v]].lo = E->bufs[E->extra[v]].hi = 0;
          E->bufs[E->extra[v]].size = 1;
          E->extra[v] = -1;
        }
      for (int v = 0; v < g->nvals; v++)
        if (E->hoist[v]) {
          E->hoist[v] = false;
          int z = E->maxr[v];
          E->bufs[E->grad_buf[v]].lo = bcI_is_output(g, v) ? E->N : bwd_time(E, z);
        }
    }
  }
  free(zs);
  free(z1);
  return st;
}

// Whether two members of template f's family live at once (members: by
// trip, count of them).
static bool overlapping(const G *E, const int *members, int count) {
  for (int t = 0; t < count; t++)
    for (int u = t + 1; u < count; u++) {
      const gbuf *x = &E->bufs[members[t]], *y = &E->bufs[members[u]];
      if (x->lo <= y->hi && y->lo <= x->hi) return true;
    }
  return false;
}

// Places the buffers: a family's members at one offset when no two of
// them live at once, else as one item of count members stride floats apart
// over their joined lives.
static int place(G *E) {
  int count = E->lay ? E->g->layers.count : 1;
  size_t nb = (size_t)(E->nbufs + 1);
  int *lo = malloc(nb * sizeof(int)), *hi = malloc(nb * sizeof(int)), *item = malloc(nb * sizeof(int));
  int *share = malloc(nb * sizeof(int)), *members = malloc(nb * (size_t)count * sizeof(int));
  int64_t *sz = malloc(nb * sizeof(int64_t)), *off = malloc(nb * sizeof(int64_t));
  int st = lo && hi && item && share && members && sz && off
               ? BC_OK : bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < E->nbufs; i++)
    if (E->fam[i] >= 0) members[(size_t)E->fam[i] * (size_t)count + (size_t)E->trip[i]] = i;
  for (int i = 0; !st && i < E->nbufs; i++)
    if (E->fam[i] == i && overlapping(E, members + (size_t)i * (size_t)count, count))
      E->stride[i] = (E->bufs[i].size + 15) / 16 * 16;
  int n = 0;  // items: every buffer but the members of a strided family, one item for those
  for (int i = 0; !st && i < E->nbufs; i++) {
    int f = E->fam[i];
    if (f >= 0 && E->stride[f] && f != i) continue;
    item[i] = n;
    share[n] = f >= 0 && !E->stride[f] ? f : -1;
    lo[n] = E->bufs[i].lo;
    hi[n] = E->bufs[i].hi;
    sz[n++] = f >= 0 && E->stride[f] ? E->stride[f] * count : E->bufs[i].size;
  }
  for (int i = 0; !st && i < E->nbufs; i++) {  // a strided family lives while any member does
    int f = E->fam[i], k = f >= 0 ? item[f] : -1;
    if (f < 0 || !E->stride[f]) continue;
    if (E->bufs[i].lo < lo[k]) lo[k] = E->bufs[i].lo;
    if (E->bufs[i].hi > hi[k]) hi[k] = E->bufs[i].hi;
  }
  if (!st) st = bcM_place_shared(E->ctx, 2 * E->N + 1, n, lo, hi, sz, share, off, &E->arena);
  for (int i = 0; !st && i < E->nbufs; i++) {
    int f = E->fam[i];
    E->bufs[i].off = f >= 0 && E->stride[f] ? off[item[f]] + E->trip[i] * E->stride[f] : off[item[i]];
  }
  if (!st && E->arena > BC_MAX_WORKSPACE / (int64_t)sizeof(float))
    st = bc_error(E->ctx, BC_ENOMEM, "error: the backward needs a workspace of %lld bytes, over "
                  "the limit of %lld bytes", (long long)E->arena * 4, (long long)BC_MAX_WORKSPACE);
  free(lo);
  free(hi);
  free(item);
  free(share);
  free(members);
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
  r.D = s->rank ? s->d[s->rank - 1] : 1;  // a scalar (a loss): one element
  r.T = s->rank >= 2 ? prod(E, s, s->rank - 2, s->rank - 1) : "1";
  r.B = s->rank >= 3 ? prod(E, s, 0, s->rank - 2) : "1";
  r.rows = s->rank >= 2 ? prod(E, s, 0, s->rank - 1) : "1";
  return r;
}

// Names in the body.  Outside a layer function: in<i>, out<i>, the
// buffers' names.  In one: the template trip's buffers, its parameters
// lw[m] and their gradients ldw[m] (the trip's block of w and dw), and
// arguments for what comes from outside the trip (layer_arg).
static const char *raw_v(G *E, int v) {
  const bc_graph *g = E->g;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v) return bc_fmt(E->ctx, "out%d", i);
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == v) return bc_fmt(E->ctx, "in%d", i);
  return E->bufs[E->val_buf[v]].name;
}

// Buffer b, named by the code being emitted.
static const char *use(G *E, int b) {
  if (E->used) (E->in_layer ? E->lused : E->used)[b] = true;
  return E->bufs[b].name;
}

// Value v of the template trip whose counterpart in the last trip is a
// graph output (carried out: an argument).
static bool carried_out(const G *E, int v) {
  int t, j, k;
  return run_slot(E->g, v, &t, &j, &k) && t == 1 &&
         caller_mem(E->g, bcI_layer_value(E->g, E->g->layers.count - 1, j, k));
}

static bool in_template(const G *E, int v) {
  int t, j, k;
  return run_slot(E->g, v, &t, &j, &k) && t == 1;
}

// In a layer function: the argument for v (kind 1 its value, 2 its
// gradient, 4 its lengths), recorded in first-use order.
static const char *layer_arg(G *E, int v, int kind) {
  if (!(E->argk[v] & kind)) {
    E->argk[v] |= (unsigned char)kind;
    E->args[E->nargs++] = v << 2 | (kind == 4 ? 3 : kind);
  }
  if (kind == 2) return E->bufs[E->grad_buf[v]].name;
  if (kind == 4) return bc_fmt(E->ctx, "len%d", input_index_of(E->g, v));
  return in_template(E, v) ? E->bufs[E->val_buf[v]].name : raw_v(E, v);
}

static const char *V(G *E, int v) {
  if (E->in_layer && (!in_template(E, v) || carried_out(E, v))) return layer_arg(E, v, 1);
  return E->val_buf[v] >= 0 ? use(E, E->val_buf[v]) : raw_v(E, v);
}
static const char *D_(G *E, int v) {
  if (E->in_layer && !in_template(E, v)) return layer_arg(E, v, 2);
  return use(E, E->grad_buf[v]);
}
static const char *S(G *E, int i, int k) { return use(E, E->save[i][k]); }
static const char *TMP(G *E, int i, int k) { return use(E, E->temp[i][k]); }
// Param p as the code names it: w[p], or lw[m] (m: its member of the trip).
static const char *param_ref(G *E, int p, const char *w) {
  if (!E->in_layer) return bc_fmt(E->ctx, "%s[%d]", w, p);
  return bc_fmt(E->ctx, "l%s[%d]", w, p - E->g->layers.param0 - E->g->layers.nparams);
}
static const char *W(G *E, const bc_node *n, int slot) {
  return n->param[slot] >= 0 ? param_ref(E, n->param[slot], "w") : "0";
}
static const char *DW(G *E, const bc_node *n, int slot) {
  return n->param[slot] >= 0 ? param_ref(E, n->param[slot], "dw") : "0";
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
  wmat m = {.io = n->in_out, .whole = r0 == 0 && n->param[slot] >= 0, .dparam = n->param[slot]};
  int64_t off = m.io ? r0 : r0 * in;
  m.ld = m.io ? total : in;
  m.p = at(E, W(E, n, slot), off);
  m.dp = at(E, DW(E, n, slot), off);
  m.bias = bslot >= 0 && n->param[bslot] >= 0 ? at(E, W(E, n, bslot), r0) : "0";
  m.dbias = bslot >= 0 && n->param[bslot] >= 0 ? at(E, DW(E, n, bslot), r0) : NULL;
  return m;
}

#define SG "bcrt_sgemm_pool(pool, BCRT_ROW_MAJOR, "
#define NT "BCRT_NO_TRANS"
#define TR "BCRT_TRANS"

// y[m, out] (ld ldy) = bias + x[m, in] W^T
static void lin_fwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                    wmat W, const char *y, int64_t ldy) {
  bool bias = strcmp(W.bias, "0") != 0;  // without one the product overwrites y (beta 0)
  if (bias)
    kput(E, "  bcrt_fill_cols(%s, %lld, %lld, %s, %s);\n", m, (long long)out, (long long)ldy,
        W.bias, y);
  put(&E->t, "  " SG NT ", %s, %s, %lld, %lld,\n              1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
      W.io ? NT : TR, m, (long long)out, (long long)in, x, (long long)ldx, W.p, (long long)W.ld,
      bias ? "1.0f" : "0.0f", y, (long long)ldy);
}

// Nodes reading param p (each slot counted).
static int param_uses(const G *E, int p) {
  int u = 0;
  for (int i = 0; i < E->g->nnodes; i++)
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) u += E->g->nodes[i].param[k] == p;
  return u;
}

// Whether the dW GEMM of W (out x in) may overwrite the gradient (beta 0)
// instead of adding to a zeroed one: it covers the whole param, and the
// param has no other reader (so no other term).  In the layer function the
// same code serves the param of every trip (its template is trip 1's, the
// loop runs trips 0..count-1), so all of them must qualify;
// those that do are marked, and the prologue does not zero them.  The bits
// are the same: the product's sum starts from +0 and alpha is 1, so it is
// never -0, and 0 + s == s.
static bool dw_overwrites(G *E, wmat W, int64_t out, int64_t in) {
  const bc_graph *g = E->g;
  int p = W.dparam;
  if (!W.whole || p < 0 || p >= g->nparams || E->dw_set[p] ||
      bc_shape_numel(&g->params[p].shape) != out * in || W.ld != (W.io ? out : in))
    return false;
  const bc_layers *L = &g->layers;
  int trips = E->in_layer ? L->count : 1, step = E->in_layer ? L->nparams : 0, q0 = p - step;
  if (!E->in_layer) q0 = p;
  for (int t = 0; t < trips; t++) {
    int q = q0 + t * step;
    if (q < 0 || q >= g->nparams || param_uses(E, q) != 1 || E->dw_set[q]) return false;
  }
  for (int t = 0; t < trips; t++) E->dw_set[q0 + t * step] = true;
  return true;
}

// dW += dy^T x, db += colsum dy, and (dx non-NULL) dx += dy W (beta: 1
// accumulates, 0 overwrites).  dx is written last, so it may be x's buffer.
static void lin_bwd(G *E, const char *m, int64_t out, int64_t in, const char *x, int64_t ldx,
                    wmat W, const char *dy, int64_t lddy, const char *dx, int64_t lddx,
                    const char *beta) {
  const char *wbeta = dw_overwrites(E, W, out, in) ? "0.0f" : "1.0f";
  if (W.io)
    put(&E->t, "  " SG TR ", " NT ", %lld, %lld, %s,\n              1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
        (long long)in, (long long)out, m, x, (long long)ldx, dy, (long long)lddy, wbeta, W.dp,
        (long long)W.ld);
  else
    put(&E->t, "  " SG TR ", " NT ", %lld, %lld, %s,\n              1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
        (long long)out, (long long)in, m, dy, (long long)lddy, x, (long long)ldx, wbeta, W.dp,
        (long long)W.ld);
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
  int i = input_index_of(E->g, n->in[slot]);
  if (i < 0) return NULL;
  return E->in_layer ? layer_arg(E, n->in[slot], 4) : bc_fmt(E->ctx, "len%d", i);
}


// Attention pieces: Q, K, V matrices (packed or separate) and O.
static void attn_w(G *E, const bc_node *n, int64_t d, int64_t qd, int64_t kvd, wmat *q, wmat *k,
                   wmat *v, wmat *o) {
  if (n->param[4] >= 0) {
    *q = wpiece(E, n, 0, 1, 0, d, qd);
    *k = wpiece(E, n, 4, 5, 0, d, kvd);
    *v = wpiece(E, n, 6, 7, 0, d, kvd);
  } else {
    int64_t tot = d + 2 * kvd;
    *q = wpiece(E, n, 0, 1, 0, d, tot);
    *k = wpiece(E, n, 0, 1, d, d, tot);
    *v = wpiece(E, n, 0, 1, d + kvd, d, tot);
  }
  *o = wpiece(E, n, 2, 3, 0, qd, d);
}

// --- forward, per node ------------------------------------------------------------

// One attention node's geometry and buffers: queries x [B, T, D]; keys and
// values from x (self) or from kv [B, S, D] (cross); Q rows ldq apart in qb,
// K rows ldk apart in kb with V kvd columns after K; the heads cat [B, T, qd]
// (qd = H*dh: D unless head_dim=).
typedef struct {
  dims s, kv;
  bool cross;
  int64_t d, qd, H, dh, kvd, group, ldq, ldk;
  const char *x, *kvx, *qb, *kb, *dqb, *dkb, *len, *kvlen, *lse, *cat;
  wmat q, k, v, o;
  bool packed;  // self-attention over one packed q|k|v matrix: one GEMM for all three
  wmat qkv;
} att;

static att att_of(G *E, const bc_node *n) {
  att a = {.s = dims_of(E, n->in[0]), .cross = n->nin > 1 && n->in[1] >= 0};
  a.kv = a.cross ? dims_of(E, n->in[1]) : a.s;
  a.d = a.s.D;
  a.H = n->heads;
  a.dh = bc_head_dim(n, a.d);
  a.qd = a.H * a.dh;
  a.kvd = n->kv_heads * a.dh;
  a.group = a.H / n->kv_heads;
  a.x = V(E, n->in[0]);
  a.kvx = a.cross ? V(E, n->in[1]) : a.x;
  a.len = len_of(E, n, 2);
  a.kvlen = a.cross ? len_of(E, n, 3) : a.len;
  a.lse = S(E, n->id, 1);
  a.cat = S(E, n->id, 2);
  if (a.cross) {
    a.ldq = a.qd;
    a.ldk = 2 * a.kvd;
    a.qb = S(E, n->id, 0);
    a.kb = S(E, n->id, 3);
    a.dqb = TMP(E, n->id, 0);
    a.dkb = TMP(E, n->id, 3);
  } else {
    a.ldq = a.ldk = a.qd + 2 * a.kvd;
    a.qb = S(E, n->id, 0);
    a.kb = bc_fmt(E->ctx, "%s + %lld", a.qb, (long long)a.qd);
    a.dqb = TMP(E, n->id, 0);
    a.dkb = bc_fmt(E->ctx, "%s + %lld", a.dqb, (long long)a.qd);
  }
  attn_w(E, n, a.d, a.qd, a.kvd, &a.q, &a.k, &a.v, &a.o);
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
  lin_fwd(E, a->s.rows, a->qd, a->d, a->x, a->d, a->q, a->qb, a->ldq);
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
  lin_bwd(E, a->s.rows, a->qd, a->d, a->x, a->d, a->q, a->dqb, a->ldq, dx, a->d, "1.0f");
  lin_bwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->k, a->dkb, a->ldk, dkv, a->d, "1.0f");
  lin_bwd(E, a->kv.rows, a->kvd, a->d, a->kvx, a->d, a->v,
          bc_fmt(E->ctx, "%s + %lld", a->dkb, (long long)a->kvd), a->ldk, dkv, a->d, "1.0f");
}

// The factor of q.k: scale=, or 1/sqrt(dh).
static const char *att_scale(G *E, const bc_node *n, const att *a) {
  return fl(E, n->scale > 0 ? n->scale : 1.0 / sqrt((double)a->dh));
}

// The arguments the tiled kernels (bcrt_attention_train, _bwd) share: the
// geometry from B to dh, Q and K|V, the valid keys, the masks, the scale,
// the cap, and dropout's key, threshold and scale (training only).
static const char *att_args(G *E, const bc_node *n, const att *a) {
  const char *drop = "0, 0u, 1.0f";
  if (n->dropout > 0)
    drop = bc_fmt(E->ctx, "BC_training ? %s : 0, BC_training ? %uu : 0u, %s", bcG_drop_key(E, n),
                  bcrt_drop_threshold(n->dropout), fl(E, 1.0 / (1.0 - n->dropout)));
  return bc_fmt(E->ctx,
                "%s, %s, %lld, %lld, %lld,\n      %s, %lld, %s, %lld, %s, %lld, %s, %s, %d, %lld, "
                "%s, %s,\n      %s",
                a->s.B, a->s.T, (long long)a->H, (long long)a->group, (long long)a->dh, a->qb,
                (long long)a->ldq, a->kb, (long long)a->ldk, a->kv.T, (long long)a->kvd,
                a->kvlen ? a->kvlen : "0", a->kv.T, n->causal ? 1 : 0, (long long)n->window,
                att_scale(E, n, a), n->softcap > 0 ? fl(E, n->softcap) : "0.0f", drop);
}

// Padded query rows (past the lengths) of p [B, T, D]: zeroed.
static void zero_padded_rows(G *E, const att *a, const char *p, const char *why) {
  if (!a->len) return;
  kput(E, "  if (%s)  // %s\n"
          "    for (int b = 0; b < %s; b++)\n"
          "      bcrt_fill_rows(%s - %s[b], %lld, 0, %s + (b*%s + %s[b])*%lld);\n",
       a->len, why, a->s.B, a->s.T, a->len, (long long)a->d, p, a->s.T, a->len, (long long)a->d);
}

// QK-norm (issue 23): q and k as projected kept (saves 4, 5), then
// normalised in place, per head or over each projection row.
static void att_qk_norm_fwd(G *E, const bc_node *n, const att *a) {
  int64_t wq = n->qk_norm_per_head ? a->dh : a->qd, wk = n->qk_norm_per_head ? a->dh : a->kvd;
  const char *eps = fl(E, n->qk_norm_eps);
  if (a->cross) {
    kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", a->s.rows, (long long)a->ldq, a->qb,
         S(E, n->id, 4));
    kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", a->kv.rows, (long long)a->ldk, a->kb,
         S(E, n->id, 5));
  } else {
    kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", a->s.rows, (long long)a->ldq, a->qb,
         S(E, n->id, 4));
  }
  kput(E, "  bcrt_seg_norm(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s);  // q_norm\n", a->s.rows,
       (long long)(n->qk_norm_per_head ? a->H : 1), (long long)wq, (long long)a->ldq,
       W(E, n, 8), W(E, n, 9), eps, n->qk_norm == 1, a->qb);
  kput(E, "  bcrt_seg_norm(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s);  // k_norm\n", a->kv.rows,
       (long long)(n->qk_norm_per_head ? n->kv_heads : 1), (long long)wk, (long long)a->ldk,
       W(E, n, 10), W(E, n, 11), eps, n->qk_norm == 1, a->kb);
}

// Its backward: the gradients of the normalised q, k (a->dqb, a->dkb) to
// those of the projections (temps 7, 8, with V's columns copied over);
// a's dqb and dkb then point there for att_proj_bwd.
static void att_qk_norm_bwd(G *E, const bc_node *n, att *a) {
  int64_t wq = n->qk_norm_per_head ? a->dh : a->qd, wk = n->qk_norm_per_head ? a->dh : a->kvd;
  const char *eps = fl(E, n->qk_norm_eps);
  const char *dq = TMP(E, n->id, 7);
  const char *dk = a->cross ? TMP(E, n->id, 8) : bc_fmt(E->ctx, "%s + %lld", dq, (long long)a->qd);
  const char *xq = S(E, n->id, 4);
  const char *xk = a->cross ? S(E, n->id, 5) : bc_fmt(E->ctx, "%s + %lld", xq, (long long)a->qd);
  kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a->s.rows, (long long)a->ldq, dq);
  if (a->cross) kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a->kv.rows, (long long)a->ldk, dk);
  kput(E, "  bcrt_seg_norm_bwd(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s, %s, %s, %s);\n",
       a->s.rows, (long long)(n->qk_norm_per_head ? a->H : 1), (long long)wq, (long long)a->ldq,
       xq, W(E, n, 8), eps, n->qk_norm == 1, a->dqb, dq, DW(E, n, 8), DW(E, n, 9));
  kput(E, "  bcrt_seg_norm_bwd(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s, %s, %s, %s);\n",
       a->kv.rows, (long long)(n->qk_norm_per_head ? n->kv_heads : 1), (long long)wk,
       (long long)a->ldk, xk, W(E, n, 10), eps, n->qk_norm == 1, a->dkb, dk, DW(E, n, 10),
       DW(E, n, 11));
  kput(E, "  bcrt_copy_rows(%s, %lld, %s + %lld, %lld, %s + %lld, %lld);  // dV as it is\n",
       a->kv.rows, (long long)a->kvd, a->dkb, (long long)a->kvd, (long long)a->ldk, dk,
       (long long)a->kvd, (long long)a->ldk);
  a->dqb = dq;
  a->dkb = dk;
}

void bcG_fwd_attention(G *E, const bc_node *n) {
  att a = att_of(E, n);
  att_proj_fwd(E, &a);
  if (n->qk_norm) att_qk_norm_fwd(E, n, &a);
  const char *th = fl(E, n->rope_theta);
  if (n->rope)  // rotary positions on Q and K (row r is position r % T)
    kput(E, "  bcrt_rope(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n"
            "  bcrt_rope(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n",
         a.s.rows, a.s.T, (long long)a.H, (long long)a.dh, (long long)a.ldq, th, a.qb, a.s.rows,
         a.s.T, (long long)n->kv_heads, (long long)a.dh, (long long)a.ldk, th, a.kb);
  // tiled, an online softmax: no [T, S] weights; each row's log sum exp kept
  put(&E->t, "  bcrt_attention_train(pool, %s,\n      %s, %lld, %s);\n", att_args(E, n, &a), a.cat,
      (long long)a.qd, a.lse);
  if (n->head_scale) {  // NormFormer: the heads kept, then scaled
    kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", a.s.rows, (long long)a.qd, a.cat,
         S(E, n->id, 6));
    kput(E, "  bcrt_head_scale(%s, %lld, %lld, %lld, %s, %s);\n", a.s.rows, (long long)a.H,
         (long long)a.dh, (long long)a.qd, W(E, n, 12), a.cat);
  }
  lin_fwd(E, a.s.rows, a.d, a.qd, a.cat, a.qd, a.o, V(E, n->out[0]), a.d);
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
  if (n->offset != 0)
    kput(E, "  bcrt_rmsnorm_off(%s, %lld, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D, x,
         W(E, n, 0), fl(E, n->offset), eps, V(E, n->out[0]));
  else
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
  if (!dual && bcT_add_extra(n)) {  // scaled / activated operands (fuse-scale, fuse-act)
    const char *y = n->out[0] >= 0 ? V(E, n->out[0]) : sum;
    if (rms)
      kput(E, "  bcrt_add_rmsnorm_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s, %s, %s, %s);\n",
          s.rows, (long long)s.D, fl(E, ca), V(E, n->in[0]), bcG_scale(E, n, 2),
          bcT_opact_rt(n, 0), fl(E, cb), V(E, n->in[1]), bcG_scale(E, n, 3), bcT_opact_rt(n, 1),
          W(E, n, 0), eps, sum, y);
    else
      kput(E,
          "  bcrt_add_layernorm_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s, %s, %s, %s, %s);\n",
          s.rows, (long long)s.D, fl(E, ca), V(E, n->in[0]), bcG_scale(E, n, 2),
          bcT_opact_rt(n, 0), fl(E, cb), V(E, n->in[1]), bcG_scale(E, n, 3), bcT_opact_rt(n, 1),
          W(E, n, 0), W(E, n, 1), eps, sum, y);
    return;
  }
  if (rms && n->offset != 0)
    kput(E, "  bcrt_add_rmsnorm_off(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
        (long long)s.D, fl(E, ca), V(E, n->in[a]), fl(E, cb), V(E, n->in[b]), W(E, n, 0),
        fl(E, n->offset), eps, sum, n->out[yo] >= 0 ? V(E, n->out[yo]) : sum);
  else if (rms)
    kput(E, "  bcrt_add_rmsnorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
        (long long)s.D, fl(E, ca), V(E, n->in[a]), fl(E, cb), V(E, n->in[b]), W(E, n, 0), eps,
        sum, n->out[yo] >= 0 ? V(E, n->out[yo]) : sum);
  else
    kput(E, "  bcrt_add_layernorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
        (long long)s.D, fl(E, ca), V(E, n->in[a]), fl(E, cb), V(E, n->in[b]), W(E, n, 0),
        W(E, n, 1), eps, sum, n->out[yo] >= 0 ? V(E, n->out[yo]) : sum);
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
const bc_graph *bcG_graph(const G *E) { return E->g; }
void bcG_put(G *E, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vput(&E->t, fmt, ap);
  va_end(ap);
}
const char *bcG_fl(G *E, double v) { return fl(E, v); }
const char *bcG_val(G *E, int v) { return V(E, v); }
const char *bcG_dval(G *E, int v) { return D_(E, v); }
const char *bcG_scale(G *E, const bc_node *n, int k) {
  int v = k < n->nin ? n->in[k] : -1;
  if (v < 0) return "0, 0";
  return bc_fmt(E->ctx, "%s, %lld", V(E, v), (long long)bc_shape_numel(&E->g->vals[v].shape));
}
void bcG_scaled_bwd(G *E, const bc_node *n, const char *ds) {
  dims s = dims_of(E, n->in[0]);
  for (int side = 0; side < 2; side++) {
    int sv = 2 + side < n->nin ? n->in[2 + side] : -1;
    kput(E, "  bcrt_add_sc_bwd(%s, %lld, %s, %s, %s, %s, %d, %s, %s);\n", s.rows, (long long)s.D,
         fl(E, side ? n->beta : n->alpha), ds, V(E, n->in[side]), bcG_scale(E, n, 2 + side),
         bcT_opact_rt(n, side), D_(E, n->in[side]), sv >= 0 ? D_(E, sv) : "0");
  }
}
const char *bcG_saved(G *E, const bc_node *n, int k) { return S(E, n->id, k); }
const char *bcG_temp(G *E, const bc_node *n, int k) { return TMP(E, n->id, k); }
void bcG_axpy(G *E, int v, double k, const char *src, const char *dst) { axpy(E, v, k, src, dst); }
const char *bcG_drop_key(G *E, const bc_node *n) {
  if (E->in_layer) {  // n is the template trip's (trip 1's) node: trip l's key steps by kp
    const bc_layers *L = &E->g->layers;
    int kp = n->key_node - E->g->nodes[n->id - L->period].key_node;
    return bc_fmt(E->ctx, "bcrt_drop_key(BC_seed, BC_step, %d + %d*(l - 1))", n->key_node, kp);
  }
  return bc_fmt(E->ctx, "bcrt_drop_key(BC_seed, BC_step, %d)", n->key_node);
}
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
  const char *dy = D_(E, n->out[0]), *dcat = TMP(E, n->id, 1);
  const char *dx = D_(E, n->in[0]), *dkv = a.cross ? D_(E, n->in[1]) : dx;
  zero_padded_rows(E, &a, dy, "padded query rows were zeroed: no gradient flows through them");
  lin_bwd(E, a.s.rows, a.d, a.qd, a.cat, a.qd, a.o, dy, a.d, dcat, a.qd, "0.0f");
  if (n->head_scale)
    kput(E, "  bcrt_head_scale_bwd(%s, %lld, %lld, %lld, %s, %s, %s, %s);\n", a.s.rows,
         (long long)a.H, (long long)a.dh, (long long)a.qd, S(E, n->id, 6), W(E, n, 12), dcat,
         DW(E, n, 12));
  kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a.s.rows, (long long)a.ldq, a.dqb);
  if (a.cross) kput(E, "  bcrt_fill_rows(%s, %lld, 0, %s);\n", a.kv.rows, (long long)a.ldk, a.dkb);
  // tiled: the weights recomputed from the kept log sum exps
  put(&E->t, "  bcrt_attention_bwd(pool, %s,\n      %s, %s, %lld, %s, %s, %s);\n", att_args(E, n, &a),
      n->head_scale ? S(E, n->id, 6) : a.cat, dcat, (long long)a.qd, a.lse, a.dqb, a.dkb);
  const char *th = fl(E, n->rope_theta);
  if (n->rope)  // back through the rotations: their transposes
    kput(E, "  bcrt_rope_bwd(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n"
            "  bcrt_rope_bwd(%s, %s, 0, %lld, %lld, %lld, %s, %s);\n",
         a.s.rows, a.s.T, (long long)a.H, (long long)a.dh, (long long)a.ldq, th, a.dqb, a.s.rows,
         a.s.T, (long long)n->kv_heads, (long long)a.dh, (long long)a.ldk, th, a.dkb);
  if (n->qk_norm) att_qk_norm_bwd(E, n, &a);
  att_proj_bwd(E, &a, dx, dkv);
}

void bcG_bwd_norms(G *E, const bc_node *n) {
  dims s = dims_of(E, n->in[0]);
  bool rms = n->op == BC_OP_RMSNORM || n->rms;
  const char *eps = fl(E, n->eps);
  if (n->op == BC_OP_LAYERNORM || n->op == BC_OP_RMSNORM) {
    if (rms && n->offset != 0)
      kput(E, "  bcrt_rmsnorm_bwd_off(%s, %lld, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
           (long long)s.D, V(E, n->in[0]), W(E, n, 0), fl(E, n->offset), eps, D_(E, n->out[0]),
           D_(E, n->in[0]), DW(E, n, 0));
    else if (rms)
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
    if (rms && n->offset != 0)
      kput(E, "  bcrt_rmsnorm_bwd_off(%s, %lld, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
           (long long)s.D, sum, W(E, n, 0), fl(E, n->offset), eps, D_(E, n->out[yo]), ds,
           DW(E, n, 0));
    else if (rms)
      kput(E, "  bcrt_rmsnorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
          sum, W(E, n, 0), eps, D_(E, n->out[yo]), ds, DW(E, n, 0));
    else
      kput(E, "  bcrt_layernorm_bwd(%s, %lld, %s, %s, %s, %s, %s, %s, %s);\n", s.rows,
          (long long)s.D, sum, W(E, n, 0), eps, D_(E, n->out[yo]), ds, DW(E, n, 0), DW(E, n, 1));
  }
  if (!dual && bcT_add_extra(n)) {
    bcG_scaled_bwd(E, n, ds);
    return;
  }
  axpy(E, n->in[a], ca, ds, D_(E, n->in[a]));
  axpy(E, n->in[b], cb, ds, D_(E, n->in[b]));
  if (dual && n->out[0] >= 0) {
    axpy(E, n->in[0], n->alpha, D_(E, n->out[0]), D_(E, n->in[0]));
    axpy(E, n->in[2], n->beta, D_(E, n->out[0]), D_(E, n->in[2]));
  }
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
  put(&E->t, "\n// The training step: forward keeping activations, then the reverse\n"
             "// walk.  dy: one array per output (NULL: not in the loss); dw: one array per\n"
             "// parameter (overwritten); dx: NULL or one per input (NULL entries skipped).\n"
             "// Workspace: %lld bytes (64-byte aligned).\n",
      (long long)bcY_workspace_bytes_of(E->arena));
  if (E->why) put(&E->t, "// No layer loop here: %s.\n", E->why);
  bool drop = bcI_has_dropout(g);
  put(&E->t, "// %s_backward_pool: the body, its products and attention split over pool\n"
             "// (NULL: the calling thread; the same bits for every pool)%s; %s_backward\n"
             "// is the call with NULL%s.\n", m,
      drop ? ", dropout with the masks of (BC_seed, BC_step) when BC_training != 0" : "", m,
      drop ? bc_fmt(E->ctx, " and BC_training = 0, %s_backward_ex with NULL", m) : "");
  put(&E->t, "int %s_backward_pool(const float *const *w, void *const *io, const long *rt,\n"
             "    const float *const *dy, float *const *dw, float *const *dx, int BC_training,\n"
             "    unsigned long long BC_seed, unsigned long long BC_step, void *workspace,\n"
             "    bcrt_pool *pool);\n", m);
  put(&E->t, "int %s_backward(const float *const *w, void *const *io, const long *rt,\n"
             "    const float *const *dy, float *const *dw, float *const *dx, void *workspace) {\n"
             "  return %s_backward_pool(w, io, rt, dy, dw, dx, 0, 0, 0, workspace, 0);\n}\n", m, m);
  if (drop)  // the entry with dropout's generator (runtime/src/rng.c)
    put(&E->t, "int %s_backward_ex(const float *const *w, void *const *io, const long *rt,\n"
               "    const float *const *dy, float *const *dw, float *const *dx, int BC_training,\n"
               "    unsigned long long BC_seed, unsigned long long BC_step, void *workspace) {\n"
               "  return %s_backward_pool(w, io, rt, dy, dw, dx, BC_training, BC_seed, BC_step,\n"
               "                          workspace, 0);\n}\n", m, m);
  put(&E->t, "int %s_backward_pool(const float *const *w, void *const *io, const long *rt,\n"
             "    const float *const *dy, float *const *dw, float *const *dx, int BC_training,\n"
             "    unsigned long long BC_seed, unsigned long long BC_step, void *workspace,\n"
             "    bcrt_pool *pool) {\n", m);
  put(&E->t, "  (void)BC_training;\n  (void)BC_seed;\n  (void)BC_step;\n  (void)pool;\n");
  put(&E->t, "  if (!w || !io || !dy || !dw || !workspace || ((unsigned long)workspace & 63u)) return 1;\n");
  if (g->nrt) put(&E->t, "  if (!rt) return 1;\n");
  else put(&E->t, "  (void)rt;\n");
  if (g->nparams)
    put(&E->t, "  for (int i = 0; i < %d; i++)\n    if (!w[i] || !dw[i]) return 1;\n", g->nparams);
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *dm = &g->dims[i];
    if (dm->rt < 0) continue;
    // An int, as the kernels take it, once rt[k] is known to be in range.
    put(&E->t, "  if (rt[%d] < 1 || rt[%d] > %lld) return 2;\n", dm->rt, dm->rt, (long long)dm->value);
    put(&E->t, "  const int rt%d = (int)rt[%d];  // run-time dim %d: 1..%lld\n", dm->rt, dm->rt, dm->rt,
        (long long)dm->value);
  }
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    int64_t V = bcI_tokens_vocab(g, v);
    if (bcI_is_tokens(g, v)) {  // token ids, each 0..V-1, checked before anything is written
      put(&E->t, "  const int *in%d = (const int *)io[%d];  // token ids\n  if (!in%d) return 1;\n",
          i, i, i);
      int64_t ig = 0;
      bool targets = bcI_tokens_ignore(g, v, &ig);  // CrossEntropy targets: ignore_index passes
      if (V > 0 && targets)
        put(&E->t, "  for (long i = 0; i < (long)%s; i++)\n    if ((in%d[i] < 0 || in%d[i] > %lld) && "
            "in%d[i] != %lld) return 6;\n", prod(E, &g->vals[v].shape, 0, g->vals[v].shape.rank),
            i, i, (long long)(V - 1), i, (long long)ig);
      else if (V > 0)
        put(&E->t, "  for (long i = 0; i < (long)%s; i++)\n    if (in%d[i] < 0 || in%d[i] > %lld) return 6;\n",
            prod(E, &g->vals[v].shape, 0, g->vals[v].shape.rank), i, i, (long long)(V - 1));
      continue;
    }
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
      put(&E->t, "  if (%s)\n    for (int b = 0; b < %s; b++)\n"
                 "      if (%s[b] < 1 || %s[b] > %s) return 3;\n", len, s.B, len, len, s.T);
    }
  }
  for (int i = 0; i < E->N; i++) {  // the ops' own checks (a learned table's length)
    const bc_op_def *d = bcT_def(g->nodes[i].op);
    if (d && d->grad_emit_check) d->grad_emit_check(E, &g->nodes[i]);
  }
  put(&E->t, "  float *const ws = (float *)workspace;  // %lld floats\n", (long long)E->arena);
  for (int i = 0; i < g->ninputs; i++)  // declared for dx below
    if (g->vals[g->inputs[i]].type == BC_VT_F32) E->used[E->grad_buf[g->inputs[i]]] = true;
  for (int i = 0; i < E->nbufs; i++)
    if (E->used[i])
      put(&E->t, "  float *%s = ws + %lld;\n", E->bufs[i].name, (long long)E->bufs[i].off);
  bool any_dx = false;
  for (int i = 0; i < g->ninputs; i++) {  // input gradients: into dx when given
    int v = g->inputs[i];
    if (g->vals[v].type != BC_VT_F32) continue;
    put(&E->t, "  if (dx && dx[%d]) %s = dx[%d];\n", i, D_(E, v), i);
    any_dx = true;
  }
  if (!any_dx) put(&E->t, "  (void)dx;  // no float input: token ids get no gradient\n");
  for (int p = 0; p < g->nparams; p++) {
    if (E->dw_set[p]) continue;  // its dW GEMM overwrites it (dw_overwrites)
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
    if (E->grad_buf[v] < 0 || E->bufs[E->grad_buf[v]].lo != t || E->hoist[v]) continue;
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
// Graph text for a comment: bytes outside [A-Za-z0-9_.] as '?'.
static const char *safe_text(G *E, const char *s) {
  char *t = bc_fmt(E->ctx, "%s", s);
  for (char *c = t; c && *c; c++)
    if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '.')) *c = '?';
  return t ? t : "?";
}

static void param_comments(G *E, const bc_node *n) {
  const bc_layers *L = &E->g->layers;
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    int p = n->param[k];
    if (p < 0) continue;
    const char *name = E->g->params[p].name;
    if (E->in_layer)  // the member, for every trip
      put(&E->t, "  //   %s = %s.<l>.%s\n", param_ref(E, p, "w"), safe_text(E, L->stack),
          safe_text(E, bcI_layer_member(name, strlen(L->stack))));
    else
      put(&E->t, "  //   %s = %s\n", param_ref(E, p, "w"), safe_text(E, name));
  }
}

static void node_head(G *E, const char *what, const bc_node *n) {
  put(&E->t, "\n  // ---- %s n%d%s: %s  line %d:%d\n", what, n->id,
      E->in_layer ? bc_fmt(E->ctx, " (+%d per layer)", E->g->layers.period) : "",
      bcI_op_name(n->op), n->loc.line, n->loc.col);
}

// --- the layer loop: its functions ----------------------------------------------------

// ws + offset of trip `l - back`'s member of template buffer f's family.
static const char *member_at(G *E, int f, int back) {
  int64_t off0 = E->bufs[f].off - E->stride[f];
  if (!E->stride[f]) return bc_fmt(E->ctx, "ws + %lld", (long long)E->bufs[f].off);
  return bc_fmt(E->ctx, "ws + %lld + %lld*%s", (long long)off0, (long long)E->stride[f],
                back ? "(l - 1)" : "l");
}

// The caller's expression for argument a (value << 2 | kind) of trip l.
static const char *call_arg(G *E, int a) {
  const bc_graph *g = E->g;
  int v = a >> 2, kind = a & 3, count = g->layers.count;
  if (kind == 3) return bc_fmt(E->ctx, "len%d", input_index_of(g, v));
  if (in_template(E, v)) {  // carried out: the graph output on the last trip
    int t, j, k;
    run_slot(g, v, &t, &j, &k);
    return bc_fmt(E->ctx, "l == %d ? %s : %s", count - 1, V(E, bcI_layer_value(g, count - 1, j, k)),
                  member_at(E, E->val_buf[v], 0));
  }
  if (g->vals[v].def < g->layers.first) return kind == 1 ? V(E, v) : D_(E, v);  // every trip's
  int first = bcI_layer_carried_from(g, v);  // the trip before's, for l == 0 from before the run
  int f = kind == 1 ? E->val_buf[v] : E->grad_buf[v], tf = E->fam[f];
  const char *l0 = kind == 1 ? V(E, first) : E->extra[v] >= 0 ? use(E, E->extra[v]) : D_(E, first);
  return bc_fmt(E->ctx, "l == 0 ? %s : %s", l0, member_at(E, tf, 1));
}

// The layer function's text: its body made with in_layer set, then its
// signature and the buffers it names.
static void layer_function(G *E, bool backward, int *args, int *nargs) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  gtext head = E->t;
  E->t = (gtext){0};
  E->in_layer = true;
  E->nargs = 0;
  memset(E->argk, 0, (size_t)(g->nvals ? g->nvals : 1) * sizeof *E->argk);
  memset(E->lused, 0, (size_t)(E->nbufs ? E->nbufs : 1) * sizeof *E->lused);
  for (int j0 = 0; j0 < L->period; j0++) {
    int j = backward ? L->period - 1 - j0 : j0;
    const bc_node *n = &g->nodes[L->first + L->period + j];
    node_head(E, backward ? "backward" : "forward", n);
    if (backward) {
      start_grads(E, bwd_time(E, n->id));
      bwd_node(E, n);
    } else {
      param_comments(E, n);
      fwd_node(E, n);
    }
  }
  gtext body = E->t;
  E->t = head;
  put(&E->t, "\n// Trip l of the layers %s.<%d..%d>: the %s of nodes n%d..n%d for l = 0,\n"
             "// then every %d nodes%s; lw%s: the trip's parameters%s.\n",
      safe_text(E, L->stack), L->index0, L->index0 + L->count - 1,
      backward ? "backward" : "forward", L->first, L->first + L->period - 1, L->period,
      backward ? "" : ", keeping what the backward reads", backward ? ", ldw" : "",
      backward ? " and their gradients" : "");
  int nused = 0;  // arguments named but not read (a gemm-only build's) are left out
  for (int i = 0; i < E->nargs; i++) {
    int v = E->args[i] >> 2, kind = E->args[i] & 3;
    if (bcE_uses_ident(&body, layer_arg(E, v, kind == 3 ? 4 : kind))) E->args[nused++] = E->args[i];
  }
  E->nargs = nused;
  put(&E->t, "static void %s_layer_%s(const float *const *lw%s", g->model,
      backward ? "backward" : "train_forward", backward ? ", float *const *ldw" : "");
  for (int i = 0; i < E->nargs; i++) {
    int v = E->args[i] >> 2, kind = E->args[i] & 3;
    const char *type = kind == 3 ? "const int *" : kind == 2 || carried_out(E, v) ? "float *" : "const float *";
    put(&E->t, ",\n    %s%s", type, layer_arg(E, v, kind == 3 ? 4 : kind));
  }
  for (int i = 0; i < g->ndims; i++)
    if (E->rtname[i]) put(&E->t, ", int %s", E->rtname[i]);
  bool drop = bcI_has_dropout(g);
  if (drop) put(&E->t, ",\n    int BC_training, unsigned long long BC_seed, unsigned long long BC_step");
  put(&E->t, ", float *ws, long l, bcrt_pool *pool) {\n");
  for (int i = 0; i < g->ndims; i++)
    if (E->rtname[i]) put(&E->t, "  (void)%s;\n", E->rtname[i]);
  if (drop) put(&E->t, "  (void)BC_training;\n  (void)BC_seed;\n  (void)BC_step;\n");
  put(&E->t, "  (void)lw;\n%s  (void)ws;\n  (void)l;\n  (void)pool;\n", backward ? "  (void)ldw;\n" : "");
  for (int b = 0; b < E->nbufs; b++)
    if (E->lused[b] && bcE_uses_ident(&body, E->bufs[b].name))
      put(&E->t, "  float *%s = %s;\n", E->bufs[b].name, member_at(E, b, 0));
  put(&E->t, "%.*s}\n", (int)body.len, body.p ? body.p : "");
  E->t.oom |= body.oom;
  free(body.p);
  memcpy(args, E->args, (size_t)E->nargs * sizeof *args);
  *nargs = E->nargs;
  E->in_layer = false;
}

// The loop calling it, in the entry.
static void layer_loop(G *E, bool backward, const int *args, int nargs) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  put(&E->t, "\n  // ---- %s n%d..n%d: layers %s.%d..%d, %d nodes each\n",
      backward ? "backward" : "forward", L->first, L->first + L->count * L->period - 1,
      safe_text(E, L->stack),
      L->index0, L->index0 + L->count - 1, L->period);
  if (backward)
    put(&E->t, "  for (long l = %d; l >= 0; l--)\n", L->count - 1);
  else
    put(&E->t, "  for (long l = 0; l < %d; l++)\n", L->count);
  put(&E->t, "    %s_layer_%s(w + %d + %d*l%s", g->model, backward ? "backward" : "train_forward",
      L->param0, L->nparams, backward ? bc_fmt(E->ctx, ", dw + %d + %d*l", L->param0, L->nparams) : "");
  for (int i = 0; i < nargs; i++) put(&E->t, ",\n        %s", call_arg(E, args[i]));
  for (int i = 0; i < g->ndims; i++)
    if (E->rtname[i]) put(&E->t, ", %s", E->rtname[i]);
  if (bcI_has_dropout(g)) put(&E->t, ", BC_training, BC_seed, BC_step");
  put(&E->t, ", ws, l, pool);\n");
}

static void body(G *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  int lo = E->lay ? L->first : E->N, hi = E->lay ? L->first + L->count * L->period : E->N;
  size_t na = (size_t)(3 * (g->nvals ? g->nvals : 1));
  int *fa = malloc(na * sizeof *fa), *ba = malloc(na * sizeof *ba), nfa = 0, nba = 0;
  if (!fa || !ba) {
    E->t.oom = true;
    free(fa);
    free(ba);
    return;
  }
  if (E->lay) {
    layer_function(E, false, fa, &nfa);
    if (!E->forward_only) layer_function(E, true, ba, &nba);
  }
  gtext head = E->t;
  E->t = (gtext){0};
  for (int i = 0; i < E->N; i++) {
    const bc_node *n = &g->nodes[i];
    if (E->lay && i == lo) {
      layer_loop(E, false, fa, nfa);
      i = hi - 1;
      continue;
    }
    node_head(E, "forward", n);
    param_comments(E, n);
    fwd_node(E, n);
  }
  if (E->forward_only) {  // bench: the forward half alone
    put(&E->t, "  (void)dy; (void)dx;\n  return 0;\n}\n");
  } else {
    put(&E->t, "\n  // ==== backward: seed the outputs with dy\n");
    start_grads(E, E->N);
    for (int i = E->N - 1; i >= 0; i--) {
      const bc_node *n = &g->nodes[i];
      if (E->lay && i == hi - 1) {
        for (int v = 0; v < g->nvals; v++)  // the gradients every layer adds to
          if (E->hoist[v]) zero_value(E, v, D_(E, v));
        layer_loop(E, true, ba, nba);
        for (int v = 0; v < g->nvals; v++)  // trip 0's own buffers: into their value's gradient
          if (E->extra[v] >= 0) {
            int x = bcI_layer_carried_from(g, v);
            axpy(E, x, 1.0, use(E, E->extra[v]), D_(E, x));
          }
        i = lo;
        continue;
      }
      node_head(E, "backward", n);
      if (bwd_time(E, i) != E->N) start_grads(E, bwd_time(E, i));
      bwd_node(E, n);
    }
    start_grads(E, 2 * E->N);  // inputs nothing reads
    put(&E->t, "  return 0;\n}\n");
  }
  gtext code = E->t;
  E->t = head;
  for (int b = 0; b < E->nbufs; b++)  // named but not read (att_of's names)
    if (E->used[b] && !bcE_uses_ident(&code, E->bufs[b].name)) E->used[b] = false;
  prologue(E);
  put(&E->t, "%.*s", (int)code.len, code.p ? code.p : "");
  E->t.oom |= code.oom;
  free(code.p);
  free(fa);
  free(ba);
}

// The emitter's state for g, planned (note: only the loop's reason is wanted).
static int start(G *E, bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o) {
  *E = (G){.ctx = ctx, .g = g, .N = g->nnodes, .gemm_only = o && o->gemm_only,
           .forward_only = o && o->backward_fwd_only};
  if (!g->planned)
    return bc_error(ctx, BC_EINTERNAL, "internal error: the backward needs a planned graph");
  E->rtname = calloc((size_t)(g->ndims ? g->ndims : 1), sizeof *E->rtname);
  if (!E->rtname) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0) E->rtname[i] = bc_fmt(ctx, "rt%d", g->dims[i].rt);
  return plan(E);
}

static void release(G *E) {
  free(E->t.p);
  free(E->bufs);
  free(E->val_buf);
  free(E->grad_buf);
  free(E->save);
  free(E->temp);
  free(E->minr);
  free(E->maxr);
  free(E->rtname);
  free(E->used);
  free(E->lused);
  free(E->fam);
  free(E->trip);
  free(E->stride);
  free(E->hoist);
  free(E->dw_set);
  free(E->extra);
  free(E->argk);
  free(E->args);
}

int bcG_emit(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o, char **csrc,
             int64_t *ws_bytes) {
  *csrc = NULL;
  G E;
  int st = start(&E, ctx, g, o);
  if (!st) {
    body(&E);
    if (E.t.oom) st = bc_error(ctx, BC_ENOMEM, "error: out of memory emitting the backward");
  }
  if (!st) {
    *csrc = bc_strndup(ctx, E.t.p, E.t.len);
    if (!*csrc) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    *ws_bytes = bcY_workspace_bytes_of(E.arena);
  }
  release(&E);
  return st;
}

const char *bcG_layer_note(bc_ctx *ctx, const bc_graph *g) {
  G E;
  int st = start(&E, ctx, g, NULL);
  const char *why = st ? NULL : E.why ? bc_fmt(ctx, "no layer loop in the backward: %s", E.why) : "";
  release(&E);
  return why;
}
