// layout.c — where things live in memory: the sizes and layouts every
// user of a compiled graph needs, decided once.
//
// The emitter writes code against these layouts, and the weights binder,
// the embedding API, the AOT builder, bench and `run --stepwise` allocate
// and check against the same numbers, so none of them asks the emitter:
//
//   workspace   the planned arena (plan.c) in bytes, rounded up to 64, then
//               the portable GEMM's packing buffers, sized for the graph's
//               largest product (bcY_workspace_bytes; the backward's,
//               bcY_workspace_bytes_of);
//   packed      the copy of the GEMM weights that small-M products read
//               (every product, with a weight type), block by block
//               (bcY_pack_layout, bcY_packed_floats, bcY_round_weights);
//   KV cache    whether the graph can be stepped at all (bcY_step_check),
//               the cache's header and K|V blocks (bcY_cache_layout,
//               bcY_cache_bytes), the model identity the header records and
//               the check of a cache handed back by a caller
//               (bcY_cache_id, bcY_cache_refusal), and what one decode step
//               reads (bcY_cache_read_bytes).
//
// The AOT header states these sizes as <MODEL>_WORKSPACE_BYTES,
// _PACKED_FLOATS/_BYTES and _CACHE_BYTES.
#include "ops.h"  // bc.h, and the op table (a loss blocks the step entry)
#include "blockc_rt.h"  // BCRT_PACK_NR, BCRT_SMALL_M, BCRT_SGEMM_WS_FOR

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef bcY_pblock pblock;

static int kvv_of(const bc_node *n) { return n->nin > 1 ? n->in[1] : -1; }

// --- workspace ---------------------------------------------------------------------

int64_t bcY_workspace_bytes_of(int64_t floats) {
  int64_t b = floats * (int64_t)sizeof(float);
  b = (b + 63) / 64 * 64;
  return b ? b : 64;
}

int64_t bcY_arena_bytes(const bc_graph *g) {
  int64_t b = (g->arena_floats > 0 ? g->arena_floats : 1) * (int64_t)sizeof(float);
  return (b + 63) / 64 * 64;
}

// The largest of a shape's dims (at their bounds) and of its row count (the
// product of all but the last).
static int64_t shape_bound(const bc_shape *s) {
  int64_t big = 1, rows = 1;
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->d[i] > 0 ? s->d[i] : 1;
    if (d > big) big = d;
    if (i + 1 < s->rank) rows = rows > INT32_MAX / d ? INT32_MAX : rows * d;
  }
  return rows > big ? rows : big;
}

// An upper bound of m and of k over every matrix product the forward and
// step entries run: each is a value's or parameter's dim, a value's row
// count (B*T, S*B), or a head's T or head dim, never more than the largest
// of these over the whole graph.
static int64_t gemm_bound(const bc_graph *g) {
  int64_t big = 1;
  for (int v = 0; v < g->nvals; v++) {
    int64_t b = shape_bound(&g->vals[v].shape);
    if (b > big) big = b;
  }
  for (int p = 0; p < g->nparams; p++) {
    int64_t b = shape_bound(&g->params[p].shape);
    if (b > big) big = b;
  }
  return big;
}

int64_t bcY_gemm_ws_bytes(const bc_graph *g) {
  int64_t b = gemm_bound(g);
  return (int64_t)BCRT_SGEMM_WS_FOR(b, b);
}

int64_t bcY_workspace_bytes(const bc_graph *g) {
  return bcY_arena_bytes(g) + bcY_gemm_ws_bytes(g);
}

// --- packed weights ---------------------------------------------------------------
//
// Every weight matrix a GEMM with few rows may read (its row count is a
// run-time expression, or a number <= BCRT_SMALL_M) gets a copy in one
// float buffer, `packed`, in the panel layout of bcrt_pack_nt (bcrt_pack_nn
// for layout=in_out), written once by the emitted <model>_pack.  A block is
// output rows [row0, row0 + rows) of the param's (out, in) matrix: the whole
// matrix, or for a cross-attention's packed in_proj its Q rows and its K|V
// rows separately (they multiply different inputs).  Blocks start at
// multiples of 16 floats (64 bytes).  The emitted code names a block only
// through emit.c's pk_of, and `packed` itself is w->packed, the member
// after the parameters (JIT and AOT alike): NULL there means cblas
// everywhere.
//
// With a weight type (g->weight_type: bf16, f16, q8_0, q4_0) the copy is of that
// type and is the only form of the matrices the code reads: every matrix of
// a Linear / Attention / FFN gets its blocks whatever its row count (a
// prefill reads the same bf16 or quantized weights as a decode step), each
// bcrt_pack_wt_bytes long (a multiple of 64 bytes) and counted in units of
// 4 bytes so offsets stay float offsets.  bcY_round_weights (below) gives
// the interpreter the same values.

// bcY_pack_layout's blocks under construction; head[p]: param p's first block
// (-1: none), so finding a block again (tied weights) only visits that
// param's blocks and the layout stays linear in the graph.
typedef struct {
  bcY_pblock *b;
  int nb;
  int *head;
  int64_t total;
  unsigned *covered;  // optional: per node, the param slots whose matrix has its block
} playout;

// The fewest rows value v can have: its fixed axes times 1 per run-time dim.
static int64_t min_rows(const bc_graph *g, int v) {
  const bc_shape *s = &g->vals[v].shape;
  int64_t r = 1;
  for (int i = 0; i + 1 < s->rank; i++) {
    int k = s->sym[i];
    bool rt = k > 0 && k <= g->ndims && g->dims[k - 1].rt >= 0;
    r *= rt ? 1 : s->d[i];
  }
  return r;
}

// Adds the block of rows [row0, row0 + rows) of node n's (out, in) matrix
// in param slot `slot`, read by a GEMM over the rows of value v, unless
// that GEMM never has few rows, the param is absent or misshapen (emission
// reports that), or the block exists.
static void add_block(const bc_graph *g, const bc_node *n, int slot, int64_t row0, int64_t rows,
                      int64_t out, int64_t in, int v, playout *L) {
  int p = n->param[slot];
  bool every = g->weight_type != BC_WT_F32;  // a weight type: every product reads the copy
  if (p < 0 || p >= g->nparams || v < 0 || v >= g->nvals ||
      (!every && min_rows(g, v) > BCRT_SMALL_M) ||
      rows <= 0 || in <= 0 || in > INT32_MAX || out > INT32_MAX ||
      bc_shape_numel(&g->params[p].shape) != out * in)
    return;
  if (L->covered) L->covered[n - g->nodes] |= 1u << slot;
  for (int i = L->head[p]; i >= 0; i = L->b[i].next)
    if (L->b[i].row0 == row0 && L->b[i].rows == rows && L->b[i].in_out == n->in_out) return;
  L->b[L->nb] = (bcY_pblock){.param = p, .row0 = row0, .rows = rows, .k = in, .out = out,
                         .in_out = n->in_out, .off = L->total, .next = L->head[p]};
  L->head[p] = L->nb++;
  if (every) {  // bytes, a multiple of 64: 16-float units
    L->total += (int64_t)(bcrt_pack_wt_bytes(g->weight_type, (int)rows, (int)in) / 4);
    return;
  }
  int64_t panels = (rows + BCRT_PACK_NR - 1) / BCRT_PACK_NR;
  L->total += (panels * BCRT_PACK_NR * in + 15) / 16 * 16;
}

// The packed blocks of every GEMM weight, in node order; b has room for
// 5 per node.  Returns the count (-1: out of memory); *total: the buffer's
// size in floats.
static int pack_layout(const bc_graph *g, bcY_pblock *b, int64_t *total, unsigned *covered) {
  playout L = {.b = b, .head = malloc((size_t)(g->nparams > 0 ? g->nparams : 1) * sizeof(int)),
               .covered = covered};
  *total = 0;
  if (!L.head) return -1;
  for (int p = 0; p < g->nparams; p++) L.head[p] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    int x = n->nin > 0 ? n->in[0] : -1;
    if (x < 0 || x >= g->nvals) continue;
    const bc_shape *sh = &g->vals[x].shape;
    int64_t D = sh->rank ? sh->d[sh->rank - 1] : 0;
    if (n->op == BC_OP_ATTENTION && n->heads > 0 && (n->head_dim || D % n->heads == 0)) {
      int kvv = kvv_of(n), kv = kvv >= 0 ? kvv : x;
      int64_t dh = bc_head_dim(n, D), qd = n->heads * dh;
      int64_t kvd = (n->kv_heads ? n->kv_heads : n->heads) * dh, rows = D + 2 * kvd;
      if (n->param[4] >= 0) {
        add_block(g, n, 0, 0, qd, qd, D, x, &L);
        add_block(g, n, 4, 0, kvd, kvd, D, kv, &L);
        add_block(g, n, 6, 0, kvd, kvd, D, kv, &L);
      } else if (kvv < 0) {
        add_block(g, n, 0, 0, rows, rows, D, x, &L);
      } else {
        add_block(g, n, 0, 0, D, rows, D, x, &L);
        add_block(g, n, 0, D, 2 * kvd, rows, D, kvv, &L);
      }
      add_block(g, n, 2, 0, D, D, qd, x, &L);
    } else if (n->op == BC_OP_FFN) {
      int64_t F = n->hidden;
      add_block(g, n, 0, 0, F, F, D, x, &L);
      add_block(g, n, 4, 0, F, F, D, x, &L);
      add_block(g, n, 2, 0, D, D, F, x, &L);
    } else if (n->op == BC_OP_LINEAR) {
      add_block(g, n, 0, 0, n->hidden, n->hidden, D, x, &L);
    }
  }
  free(L.head);
  // Packing f32 weights is only a speed-up: a copy over the workspace limit
  // is not made (every GEMM then calls cblas), rather than failing the
  // build.  Another weight type needs it: emission says it is too big.
  if (g->weight_type == BC_WT_F32 && L.total > BC_MAX_WORKSPACE / (int64_t)sizeof(float))
    L.nb = 0, L.total = 0;
  *total = L.total;
  return L.nb;
}

int bcY_pack_layout(const bc_graph *g, bcY_pblock *b, int64_t *total) {
  return pack_layout(g, b, total, NULL);
}

static bcY_pblock *alloc_blocks(const bc_graph *g) {
  return malloc((size_t)(g->nnodes > 0 ? g->nnodes : 1) * BCY_PBLOCKS_PER_NODE * sizeof(bcY_pblock));
}

bcY_pblock *bcY_pack_blocks(const bc_graph *g, int *nb, int64_t *total) {
  bcY_pblock *b = alloc_blocks(g);
  *total = 0;
  *nb = b ? bcY_pack_layout(g, b, total) : -1;
  if (*nb < 0) {
    free(b);
    return NULL;
  }
  return b;
}

void bcY_pack_block(int wt, const bcY_pblock *b, const float *w, void *dst) {
  if (b->in_out)
    bcrt_pack_nn_wt(wt, (int)b->rows, (int)b->k, w + b->row0, (int)b->out, dst);
  else
    bcrt_pack_nt_wt(wt, (int)b->rows, (int)b->k, w + b->row0 * b->k, dst);
}

int bcY_packed_only(const bc_graph *g, bool *only) {
  for (int p = 0; p < g->nparams; p++) only[p] = false;
  if (g->weight_type == BC_WT_F32 || g->nnodes <= 0) return 0;
  bcY_pblock *b = alloc_blocks(g);
  unsigned *covered = calloc((size_t)g->nnodes, sizeof *covered);
  bool *other = calloc((size_t)(g->nparams > 0 ? g->nparams : 1), sizeof *other);
  int64_t total;
  int nb = b && covered && other ? pack_layout(g, b, &total, covered) : -1;
  for (int i = 0; i < nb; i++) only[b[i].param] = true;
  for (int i = 0; nb >= 0 && i < g->nnodes; i++)  // a slot reading the param otherwise
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int p = g->nodes[i].param[k];
      if (p >= 0 && p < g->nparams && !(k < 32 && (covered[i] >> k & 1u))) other[p] = true;
    }
  int n = 0;
  for (int p = 0; nb >= 0 && p < g->nparams; p++) n += only[p] = only[p] && !other[p];
  free(b);
  free(covered);
  free(other);
  return nb < 0 ? -1 : n;
}

static const char *const wt_names[BC_WT_COUNT] = {
    [BC_WT_F32] = "f32", [BC_WT_BF16] = "bf16", [BC_WT_Q8_0] = "q8_0", [BC_WT_Q4_0] = "q4_0",
    [BC_WT_F16] = "f16"};
_Static_assert(BC_WT_F32 == BCRT_WT_F32 && BC_WT_BF16 == BCRT_WT_BF16 &&
                   BC_WT_Q8_0 == BCRT_WT_Q8_0 && BC_WT_Q4_0 == BCRT_WT_Q4_0 &&
                   BC_WT_F16 == BCRT_WT_F16 && BC_WT_COUNT == BCRT_WT_COUNT,
               "bc_weight_type numbers the runtime's BCRT_WT_* types");

const char *bc_weight_type_name(int wt) {
  return wt >= 0 && wt < BC_WT_COUNT ? wt_names[wt] : NULL;
}

int bc_weight_type_parse(const char *name) {
  for (int i = 0; name && i < BC_WT_COUNT; i++)
    if (!strcmp(name, wt_names[i])) return i;
  return -1;
}

int64_t bcY_packed_floats(const bc_graph *g) {
  if (!g->planned || g->nnodes <= 0) return 0;
  int nb;
  int64_t total;
  free(bcY_pack_blocks(g, &nb, &total));
  return nb < 0 ? -1 : total;
}

// Block b of the packed layout, rounded through the weight type in place:
// packed into tmp, unpacked into dq (rows x k, row-major), written back
// where the block's weights are (transposed for layout=in_out).
static void round_block(int wt, const pblock *b, float *w, void *tmp, float *dq) {
  int rows = (int)b->rows, k = (int)b->k;
  bcY_pack_block(wt, b, w, tmp);
  if (b->in_out) {
    bcrt_unpack_wt(wt, rows, k, tmp, dq);
    for (int64_t kk = 0; kk < b->k; kk++)
      for (int64_t j = 0; j < b->rows; j++) w[kk * b->out + b->row0 + j] = dq[j * b->k + kk];
  } else {
    bcrt_unpack_wt(wt, rows, k, tmp, w + b->row0 * b->k);
  }
}

int bcY_round_weights(bc_ctx *ctx, const bc_graph *g, bc_weights *w) {
  if (g->weight_type == BC_WT_F32 || g->nnodes <= 0) return BC_OK;
  if (!w || w->n != g->nparams)
    return bc_error(ctx, BC_EINTERNAL, "internal error: weights of another graph");
  int nb;
  int64_t total, big = 0;
  size_t bytes = 0;
  pblock *b = bcY_pack_blocks(g, &nb, &total);
  for (int i = 0; i < nb; i++) {
    size_t n = bcrt_pack_wt_bytes(g->weight_type, (int)b[i].rows, (int)b[i].k);
    if (b[i].rows * b[i].k > big) big = b[i].rows * b[i].k;
    if (n > bytes) bytes = n;
  }
  void *tmp = nb > 0 ? malloc(bytes) : NULL;
  float *dq = nb > 0 ? malloc((size_t)big * sizeof *dq) : NULL;
  int st = nb < 0 || (nb > 0 && (!tmp || !dq)) ? BC_ENOMEM : BC_OK;
  int big_p = -1;  // f16: a parameter with a finite weight that would round to +-Inf
  int64_t big_i = 0;
  for (int i = 0; !st && g->weight_type == BC_WT_F16 && big_p < 0 && i < nb; i++) {
    const float *v = w->p[b[i].param];
    int64_t n = v ? bc_shape_numel(&g->params[b[i].param].shape) : 0;
    for (int64_t j = 0; j < n; j++)
      if (isfinite(v[j]) && fabsf(v[j]) >= 65520.0f) {  // f16's largest is 65504
        big_p = b[i].param, big_i = j;
        break;
      }
  }
  if (big_p >= 0) {
    free(b), free(tmp), free(dq);
    return bc_error(ctx, BC_EINPUT, "error: --weight-dtype f16: tensor '%s' has weight %g (element %lld), "
                    "past f16's largest finite value 65504: it would round to infinity (scale the "
                    "weights or use bf16 or f32)", g->params[big_p].name, (double)w->p[big_p][big_i],
                    (long long)big_i);
  }
  for (int i = 0; !st && i < nb; i++)
    if (w->p[b[i].param]) round_block(g->weight_type, &b[i], w->p[b[i].param], tmp, dq);
  free(b);
  free(tmp);
  free(dq);
  return st ? bc_error(ctx, st, "error: out of memory rounding the weights to %s",
                       bc_weight_type_name(g->weight_type))
            : BC_OK;
}

// --- the step entry's KV cache ----------------------------------------------------

// Why g cannot be stepped (NULL: it can), with the offending node in *at
// (NULL when no node is to blame); *seq: the stepped sequence dim.
static const char *step_blocker(const bc_graph *g, const bc_node **at, int *seq) {
  int sym = 0;
  *at = NULL;
  *seq = -1;
  for (int i = 0; i < g->nnodes; i++) {  // a loss is a mean over every position
    const bc_op_def *d = bcT_def(g->nodes[i].op);
    if (d && d->scalar) {
      *at = &g->nodes[i];
      return "this loss reduces over every position (a training graph has no step entry)";
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || kvv_of(n) >= 0 || n->in[0] < 0) continue;
    const bc_shape *sh = &g->vals[n->in[0]].shape;
    *at = n;
    if (!n->causal)
      return "this self-attention is not causal (every position sees the later ones)";
    if (sh->rank < 2 || !sh->sym[sh->rank - 2])
      return "the sequence axis of this self-attention is not a run-time dim (declare it "
             "`dim T <= N`)";
    if (sym && sh->sym[sh->rank - 2] != sym)
      return "this self-attention's sequence axis is another run-time dim than an earlier one's";
    sym = sh->sym[sh->rank - 2];
  }
  *at = NULL;
  if (!sym) return "it has no causal self-attention (nothing to cache)";
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || kvv_of(n) < 0) continue;
    const bc_shape *ks = &g->vals[kvv_of(n)].shape;
    if (ks->rank >= 2 && ks->sym[ks->rank - 2] == sym) {
      *at = n;
      return "this cross-attention's keys come from the stepped sequence";
    }
  }
  if (bcY_cache_layout(g, NULL) > BC_MAX_WORKSPACE / (int64_t)sizeof(float))
    return "its KV cache would be over the 16 GiB workspace limit";
  *seq = sym - 1;
  return NULL;
}

int bcY_step_check(bc_ctx *ctx, const bc_graph *g) {
  const bc_node *at;
  int seq;
  const char *why = step_blocker(g, &at, &seq);
  if (!why) return BC_OK;
  if (!ctx) return BC_EINPUT;
  if (at && at->loc.src)
    return bc_error_at(ctx, at->loc, "model %s cannot be stepped (no step entry): %s", g->model, why);
  return bc_error(ctx, BC_EINPUT, "%s: error: model %s cannot be stepped (no step entry): %s",
                  g->path ? g->path : g->model, g->model, why);
}

// The cache layout: the header (cache_header_floats), then one K|V block
// per attention node, in node order, each rounded up to 64 bytes: [Bmax,
// Tmax, 2*KV*dh] for a causal self-attention, [Bmax, Smax, 2*KV*dh] for a
// cross-attention (its memory).  off (optional) receives each node's
// offset in floats (-1: no block).  Returns the total in floats.
static int64_t cache_header_floats(const bc_graph *g);

int64_t bcY_cache_layout(const bc_graph *g, int64_t *off) {
  int64_t total = cache_header_floats(g);
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (off) off[i] = -1;
    if (n->op != BC_OP_ATTENTION || n->heads <= 0) continue;
    int kvv = kvv_of(n);
    const bc_shape *sh = &g->vals[n->in[0]].shape;
    const bc_shape *ks = kvv >= 0 ? &g->vals[kvv].shape : sh;
    if (ks->rank < 2) continue;
    int64_t D = sh->d[sh->rank - 1], dh = bc_head_dim(n, D), KV = n->kv_heads ? n->kv_heads : n->heads;
    int64_t B = ks->rank == 3 ? ks->d[0] : 1, rows = ks->d[ks->rank - 2];
    if (off) off[i] = total;
    total += (B * rows * 2 * KV * dh + 15) / 16 * 16;
  }
  return total;
}

int bcY_step_dim(const bc_graph *g) {
  const bc_node *at;
  int seq;
  return step_blocker(g, &at, &seq) ? -1 : seq;
}

// The step entry's row-wise tail (bcY_step_tail): ops whose row follows
// from their inputs' same row alone (the op table's rowwise).  Attention
// mixes positions; Positions and Embedding depend on the position or read a
// graph input; losses reduce.
static bool tail_op(bc_op op) { return bcT_def(op) && bcT_def(op)->rowwise; }

// 1: v has the stepped axis as its second last (its rows are [outer, T]),
// 0: v has no stepped axis (a broadcast scale), -1: anything else.
static int tail_axis(const bc_graph *g, int v, int seq) {
  const bc_shape *s = &g->vals[v].shape;
  int at = -1, n = 0;
  for (int a = 0; a < s->rank; a++)
    if (s->sym[a] == seq + 1) at = a, n++;
  if (!n) return 0;
  return n == 1 && s->rank >= 2 && at == s->rank - 2 ? 1 : -1;
}

int bcY_step_tail(const bc_graph *g) {
  int seq = bcY_step_dim(g);
  if (seq < 0 || !g->planned || g->noutputs < 1) return -1;
  int first = 0;  // after the last node that mixes positions, and after the layer run
  for (int i = 0; i < g->nnodes; i++)
    if (!tail_op(g->nodes[i].op)) first = i + 1;
  if (g->layers.count > 0 && g->layers.first + g->layers.count * g->layers.period > first)
    first = g->layers.first + g->layers.count * g->layers.period;
  if (first >= g->nnodes) return -1;
  for (int i = 0; i < g->noutputs; i++) {  // every output a tail value with rows [outer, T]
    int v = g->outputs[i];
    if (v < 0 || v >= g->nvals || g->vals[v].def < first || tail_axis(g, v, seq) != 1) return -1;
  }
  for (int i = first; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0 && tail_axis(g, n->out[k], seq) != 1) return -1;
    for (int k = 0; k < n->nin; k++) {
      int v = n->in[k];
      if (v < 0) continue;
      if (v >= g->nvals) return -1;
      const bc_value *x = &g->vals[v];
      if (x->def >= first) continue;  // the tail's own
      int ax = tail_axis(g, v, seq);
      if (ax < 0) return -1;
      if (ax == 0) continue;  // read as it is
      // Gathered in place: an arena value (not the caller's array) that no
      // other gathered value overlaps unless it is the same buffer.
      if (x->def < 0 || x->is_output || x->offset < 0 || x->type != BC_VT_F32) return -1;
      int64_t lo = x->offset, hi = lo + bc_shape_numel(&x->shape);
      for (int j = first; j < g->nnodes; j++)
        for (int q = 0; q < g->nodes[j].nin; q++) {
          int u = g->nodes[j].in[q];
          if (u < 0 || u >= g->nvals || u == v || g->vals[u].def >= first ||
              tail_axis(g, u, seq) != 1)
            continue;
          int64_t ulo = g->vals[u].offset, uhi = ulo + bc_shape_numel(&g->vals[u].shape);
          if (ulo != lo && ulo < hi && lo < uhi) return -1;
        }
    }
  }
  return first;
}

int64_t bcY_cache_bytes(const bc_graph *g) {
  if (!g->planned || bcY_step_check(NULL, g)) return 0;
  return bcY_cache_layout(g, NULL) * 4;
}

// The cache header (issue 20): unsigned 64-bit words at the start of the
// cache, before the K|V blocks.  Word 0 is the model's identity
// (bcY_cache_id), word 1 the positions filled (the keys and values of
// positions 0 .. filled-1 are valid in every batch row: the least of the
// rows'), word 2 + k the value of run-time dim k for the dims the sequence
// keeps (bcY_cache_keeps), word 2 + nrt + b the positions filled of batch
// row b (b < bcY_cache_rows).  The step entry checks them when a row's pos
// is > 0 and writes them on success.
static int64_t cache_header_floats(const bc_graph *g) {
  return ((2 + (int64_t)g->nrt + bcY_cache_rows(g)) * 8 + 63) / 64 * 16;
}

long bcY_step_rows(const bc_graph *g, const long *rt) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->heads <= 0 || n->in[0] < 0) continue;
    const bc_shape *sh = &g->vals[n->in[0]].shape;
    if (sh->rank != 3) return 1;
    int d = sh->sym[0] - 1;
    if (rt && d >= 0 && d < g->ndims && g->dims[d].rt >= 0) return rt[g->dims[d].rt];
    return (long)sh->d[0];
  }
  return 1;
}

int64_t bcY_cache_rows(const bc_graph *g) {
  int64_t rows = 1;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->heads <= 0 || n->in[0] < 0) continue;
    const bc_shape *sh = &g->vals[n->in[0]].shape;
    if (sh->rank == 3 && sh->d[0] > rows) rows = sh->d[0];
  }
  return rows;
}

// Whether run-time dim k (its index in rt) must stay the same for a whole
// sequence: an axis of some cached keys other than the stepped one (the
// batch, a memory's length), so that the cached rows keep their places.
bool bcY_cache_keeps(const bc_graph *g, int seq, int k) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->heads <= 0 || n->in[0] < 0) continue;
    const bc_shape *ks = &g->vals[kvv_of(n) >= 0 ? kvv_of(n) : n->in[0]].shape;
    for (int a = 0; a < ks->rank; a++) {
      int d = ks->sym[a] - 1;
      if (d >= 0 && d < g->ndims && d != seq && g->dims[d].rt == k) return true;
    }
  }
  return false;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
  return h;
}

static uint64_t fnv_i(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }

static uint64_t fnv_s(uint64_t h, const char *s) { return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1); }

uint64_t bcY_cache_id(const bc_graph *g) {
  uint64_t h = fnv_s(0xcbf29ce484222325ull, "blockc step cache 2");
  h = fnv_s(h, g->model);
  for (int i = 0; i < g->ndims; i++)
    h = fnv_i(fnv_i(fnv_s(h, g->dims[i].name), g->dims[i].value), g->dims[i].rt);
  for (int i = 0; i < g->nparams; i++) {
    const bc_shape *s = &g->params[i].shape;
    h = fnv_i(fnv_s(h, g->params[i].name), s->rank);
    for (int a = 0; a < s->rank; a++) h = fnv_i(h, s->d[a]);
  }
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION) continue;
    h = fnv_i(fnv_i(fnv_i(fnv_i(h, i), n->heads), n->kv_heads), kvv_of(n) >= 0);
    if (n->head_dim) h = fnv_i(h, n->head_dim);  // (absent by default: ids unchanged)
  }
  h = fnv_i(h, bcY_cache_layout(g, NULL));
  return h ? h : 1;  // 0 is what a zeroed cache holds
}

const char *bcY_cache_refusal(const bc_graph *g, uint64_t id, const void *cache, const long *pos,
                              long nrows, const long *rt, char *buf, size_t n) {
  const uint64_t *h = cache;
  int seq = bcY_step_dim(g);
  long hi = 0;
  for (long b = 0; b < nrows; b++) hi = pos[b] > hi ? pos[b] : hi;
  if (hi <= 0 || seq < 0) return NULL;
  if (h[0] != id) {
    snprintf(buf, n, "the cache does not hold a sequence of this model (another model's, or one "
             "never started): start the sequence at pos 0");
    return buf;
  }
  for (int d = 0; d < g->ndims; d++) {
    int k = g->dims[d].rt;
    if (k < 0 || !bcY_cache_keeps(g, seq, k) || h[2 + k] == (uint64_t)rt[k]) continue;
    snprintf(buf, n, "run-time dim %s = %ld differs from the %llu this sequence started with (the "
             "cache keeps what was computed at pos 0); start a new sequence at pos 0",
             g->dims[d].name, rt[k], (unsigned long long)h[2 + k]);
    return buf;
  }
  const uint64_t *filled = h + 2 + g->nrt;
  for (long b = 0; b < nrows && b < bcY_cache_rows(g); b++) {
    if (pos[b] <= 0 || (uint64_t)pos[b] <= filled[b]) continue;
    bool same = true;  // every row at this pos (<model>_step): the message without rows
    for (long c = 0; c < nrows; c++) same &= pos[c] == pos[b];
    if (same)
      snprintf(buf, n, "pos %ld skips ahead of the %llu positions the cache holds (pos may rewind "
               "to 0..%llu, which truncates the sequence, but not skip)", pos[b],
               (unsigned long long)filled[b], (unsigned long long)filled[b]);
    else
      snprintf(buf, n, "row %ld: pos %ld skips ahead of the %llu positions the cache holds for "
               "it (a row's pos may rewind to 0..%llu, which truncates its sequence, but not skip)",
               b, pos[b], (unsigned long long)filled[b], (unsigned long long)filled[b]);
    return buf;
  }
  return NULL;
}

// The KV cache bytes one decode step at context C reads: every causal
// self-attention's K|V rows of C positions, every cross-attention's of its
// memory (bounds: all S rows), for every batch row.
int64_t bcY_cache_read_bytes(const bc_graph *g, long C) {
  int64_t total = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->heads <= 0 || n->in[0] < 0) continue;
    int kvv = n->nin > 1 ? n->in[1] : -1;
    const bc_shape *sh = &g->vals[n->in[0]].shape, *ks = kvv >= 0 ? &g->vals[kvv].shape : sh;
    int64_t D = sh->d[sh->rank - 1], kvd = (n->kv_heads ? n->kv_heads : n->heads) * bc_head_dim(n, D);
    int64_t B = ks->rank == 3 ? ks->d[0] : 1, rows = kvv >= 0 ? ks->d[ks->rank - 2] : C;
    total += B * rows * 2 * kvd * 4;
  }
  return total;
}
