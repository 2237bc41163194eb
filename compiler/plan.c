// plan.c — the memory planner: scratch buffers, live ranges, arena offsets.
//
// Generated code gets one workspace (the arena) and every intermediate value
// lives at a fixed float offset inside it; the graph input and output stay
// in the caller's x and y (offset -1).  Planning is three steps:
//
//   1. Scratch.  Nodes that need temporaries get them as ordinary values of
//      kind BC_VAL_SCRATCH, listed in node->scratch in a fixed order the
//      emitter relies on:
//        ATTENTION  [0] qkv    [B*T, 3D]  packed Q, K, V projections (cross-
//                                         attention: q [B*T, D] then kv [B*S, 2D])
//                   [1] heads  [B*T, D]   concatenated head outputs ([B*T, H*dh]
//                                         with head_dim=; the projections then
//                                         [B*T, H*dh + 2*KV*dh])
//                   (no scores: bcrt_attention tiles them on its stack; the
//                   T x T limit below still bounds T)
//        FFN        [0] hidden [B*T, F], [1] gate [B*T, F] (gated activations only)
//      They are live only at their node.
//   2. Liveness.  A value lives from its defining node to its last reader
//      (both inclusive: at the node that reads x and writes y both exist).
//      Values linked by `alias` (set by the inplace pass) form a group that
//      shares storage; the group lives over the union of its members.
//   3. Offsets.  Greedy by size: groups are placed largest first, each at
//      the lowest 64-byte-aligned offset that does not collide with any
//      already placed group whose live range overlaps its own.  Transformer
//      graphs have a handful of size classes repeating every layer, which is
//      the case this heuristic handles near-optimally (Pisarchyk & Lee,
//      "Efficient Memory Management for Deep Neural Net Inference", 2020).
//      The layer run (bcI_find_layers, set in g->layers) is laid out
//      periodically: a value of one trip and its counterparts in the other
//      trips form one slot placed at one offset (their live ranges are
//      disjoint), so the emitted layer function addresses the same buffers
//      on every trip.  Liveness still decides what may share: the arena of
//      a Transformer stack stays at its lower bound.
//
// The lower bound reported next to the arena size is the largest total size
// of groups live at any one node: no assignment can do better.  bcM_check
// verifies a plan independently of how it was made.
#include "ops.h"

#include "blockc_rt.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 16  // floats: 64 bytes, a cache line and an AVX-512 vector

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int oom(bc_graph *g) { return bc_error(g->ctx, BC_ENOMEM, "error: out of memory"); }

// --- scratch ------------------------------------------------------------------------

static bc_shape shape2(int64_t a, int64_t b) { return (bc_shape){.rank = 2, .d = {a, b, 0, 0}}; }

// a*b*c, or -1 when it is over BC_MAX_ELEMS (the products below can
// overflow int64 for absurd dims that are individually legal).
static int64_t elems(int64_t a, int64_t b, int64_t c) {
  if (a <= 0 || b <= 0 || c <= 0) return 0;
  if (a > BC_MAX_ELEMS / b) return -1;
  if (a * b > BC_MAX_ELEMS / c) return -1;
  return a * b * c;
}

// The scratch values node n needs (see the table at the top of the file):
// the op table's planner entries.
BC_SCRATCH(bcM_no_scratch) {
  (void)g, (void)n, (void)sh, (void)names;
  *cnt = 0;
  return BC_OK;
}

BC_SCRATCH(bcM_scratch_ffn) {
  *cnt = 0;
  const bc_shape *x = &g->vals[n->in[0]].shape;
  int64_t d = x->rank ? x->d[x->rank - 1] : 1;
  int64_t rows = d ? bc_shape_numel(x) / d : 0;
  if (elems(rows, n->hidden, 1) < 0)
    return bc_error_at(g->ctx, n->loc,
                       "FFN hidden activations [%lld, %lld] have more than %lld elements "
                       "(the limit)",
                       (long long)rows, (long long)n->hidden, (long long)BC_MAX_ELEMS);
  sh[0] = shape2(rows, n->hidden);
  names[0] = "hidden";
  *cnt = 1;
  if (bc_act_gated(n->act)) {  // the gate projection, multiplied into hidden
    sh[1] = shape2(rows, n->hidden);
    names[1] = "gate";
    *cnt = 2;
  }
  return BC_OK;
}

BC_SCRATCH(bcM_scratch_attention) {
  *cnt = 0;
  const bc_shape *x = &g->vals[n->in[0]].shape;
  int64_t d = x->rank ? x->d[x->rank - 1] : 1;
  int64_t t = x->rank >= 2 ? x->d[x->rank - 2] : 1;
  int64_t rows = d ? bc_shape_numel(x) / d : 0;
  if (elems(rows, 3, d) < 0 || elems(1, t, t) < 0)
    return bc_error_at(g->ctx, n->loc,
                       "attention buffers ([%lld, %lld] projections, [%lld, %lld] scores) "
                       "have more than %lld elements (the limit)",
                       (long long)rows, (long long)(3 * d), (long long)t, (long long)t,
                       (long long)BC_MAX_ELEMS);
  // head_dim= (issue 23 follow-up): Q is H*dh wide and K, V KV*dh each.
  int64_t dh = bc_head_dim(n, d), qd = n->heads * dh;
  int64_t kvd = (n->kv_heads ? n->kv_heads : n->heads) * dh;
  if (n->head_dim && (elems(rows, qd + 2 * kvd, 1) < 0 || elems(rows, qd, 1) < 0))
    return bc_error_at(g->ctx, n->loc, "attention buffers ([%lld, %lld] projections) have more "
                       "than %lld elements (the limit)", (long long)rows,
                       (long long)(qd + 2 * kvd), (long long)BC_MAX_ELEMS);
  sh[0] = n->head_dim ? shape2(rows, qd + 2 * kvd) : shape2(rows, 3 * d);
  sh[1] = shape2(rows, n->head_dim ? qd : d);
  int kv = n->nin > 1 ? n->in[1] : -1;
  if (kv >= 0) {  // cross-attention: q [B*T, D], then kv [B*S, 2D]; scores [T, S]
    const bc_shape *m = &g->vals[kv].shape;
    int64_t s = m->rank >= 2 ? m->d[m->rank - 2] : 1, mrows = d ? bc_shape_numel(m) / d : 0;
    if (elems(rows + 2 * mrows, d, 1) < 0 || elems(1, t, s) < 0)
      return bc_error_at(g->ctx, n->loc,
                         "cross-attention buffers ([%lld, %lld] keys/values, [%lld, %lld] "
                         "scores) have more than %lld elements (the limit)",
                         (long long)mrows, (long long)(2 * d), (long long)t, (long long)s,
                         (long long)BC_MAX_ELEMS);
    // (head_dim=: q [B*T, H*dh] then kv [B*S, 2*KV*dh], in a buffer as wide
    // as the wider of the two)
    int64_t w = n->head_dim ? (qd > kvd ? qd : kvd) : d;
    if (elems(rows + 2 * mrows, w, 1) < 0)
      return bc_error_at(g->ctx, n->loc, "cross-attention buffers have more than %lld elements "
                         "(the limit)", (long long)BC_MAX_ELEMS);
    sh[0] = shape2(rows + 2 * mrows, w);
  }
  names[0] = "qkv";
  names[1] = "heads";
  *cnt = 2;
  return BC_OK;
}

static int scratch_for(bc_graph *g, const bc_node *n, bc_shape sh[], const char *names[],
                       int *cnt) {
  const bc_op_def *def = bcT_def(n->op);
  if (!def) return bc_error(g->ctx, BC_EINTERNAL, "internal error: plan: node %d has op %d", n->id, (int)n->op);
  return def->scratch(g, n, sh, names, cnt);
}

// Creates missing scratch values; values from an earlier run are reused (and
// re-shaped, should a pass have changed the node), so planning twice gives
// the same value table and the same plan.
static int make_scratch(bc_graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    bc_shape sh[BC_MAX_NODE_SCRATCH];
    const char *names[BC_MAX_NODE_SCRATCH];
    int cnt, rc;
    if ((rc = scratch_for(g, &g->nodes[i], sh, names, &cnt))) return rc;
    if (g->nodes[i].nscratch != cnt) {
      for (int k = 0; k < cnt; k++) {
        int v = bcI_add_value(g, names[k], sh[k], BC_VAL_SCRATCH);
        if (v < 0) return BC_ENOMEM;
        g->nodes[i].scratch[k] = v;
      }
      g->nodes[i].nscratch = cnt;
    }
    for (int k = 0; k < cnt; k++) {
      bc_value *v = &g->vals[g->nodes[i].scratch[k]];
      v->shape = sh[k];
      v->kind = BC_VAL_SCRATCH;
      v->def = i;
      v->alias = -1;
    }
  }
  return BC_OK;
}

// --- liveness and groups --------------------------------------------------------------

// Sets first_use / last_use for every value the nodes touch and marks those
// that need arena storage.  Values no node touches any more (left behind by
// passes) keep -1 everywhere.
static void live_ranges(bc_graph *g, bool *arena) {
  for (int v = 0; v < g->nvals; v++) {
    g->vals[v].first_use = g->vals[v].last_use = -1;
    g->vals[v].offset = -1;
    arena[v] = false;
  }
  for (int i = 0; i < g->ninputs && g->nnodes > 0; i++)
    g->vals[g->inputs[i]].first_use = g->vals[g->inputs[i]].last_use = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) g->vals[n->in[k]].last_use = i;
    for (int k = 0; k < n->nout; k++) {
      int v = n->out[k];
      if (v < 0) continue;
      g->vals[v].first_use = g->vals[v].last_use = i;
      arena[v] = !bcI_in_caller_memory(g, v);
    }
    for (int k = 0; k < n->nscratch; k++) {
      int v = n->scratch[k];
      g->vals[v].first_use = g->vals[v].last_use = i;
      arena[v] = true;
    }
  }
  // Outputs must survive to the end (the caller reads them after forward).
  for (int i = 0; i < g->noutputs && g->nnodes > 0; i++)
    if (g->vals[g->outputs[i]].kind != BC_VAL_INPUT) g->vals[g->outputs[i]].last_use = g->nnodes - 1;
}

// Checks every alias the inplace pass (or anyone) set: both values in the
// arena, the target dead by the time the aliasing value is written, and at
// most one value reusing a given buffer.  Anything else would silently
// corrupt data, so it is a compiler bug, not something to plan around.
static int check_aliases(bc_graph *g, const bool *arena, int *taken) {
  for (int v = 0; v < g->nvals; v++) taken[v] = -1;
  for (int v = 0; v < g->nvals; v++) {
    int w = g->vals[v].alias;
    if (w < 0 || !arena[v]) continue;
    const bc_value *a = &g->vals[v];
    if (w >= g->nvals || !arena[w])
      return bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: %%%d is marked in place of %%%d, which is not in the arena",
                      v, w);
    const bc_value *b = &g->vals[w];
    if (!(b->first_use < a->first_use && b->last_use <= a->first_use))
      return bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: %%%d (nodes %d..%d) cannot reuse %%%d (nodes %d..%d): "
                      "%%%d is still live",
                      v, a->first_use, a->last_use, w, b->first_use, b->last_use, w);
    if (taken[w] >= 0)
      return bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: both %%%d and %%%d are marked in place of %%%d", taken[w],
                      v, w);
    taken[w] = v;
  }
  return BC_OK;
}

// root[v]: the first value of v's alias chain (whose storage the chain
// shares), -1 for values outside the arena.  Chains strictly go back in time
// (check_aliases), so they end; marking the walked path makes it linear.
static void alias_roots(const bc_graph *g, const bool *arena, int *root) {
  for (int v = 0; v < g->nvals; v++) root[v] = -1;
  for (int v = 0; v < g->nvals; v++) {
    if (!arena[v] || root[v] >= 0) continue;
    int t = v;
    while (root[t] < 0 && g->vals[t].alias >= 0) t = g->vals[t].alias;
    int r = root[t] >= 0 ? root[t] : t;
    for (int x = v; x != t; x = g->vals[x].alias) root[x] = r;
    root[t] = r;
  }
}

typedef struct {
  int root;          // value id naming the group
  int lo, hi;        // live range in node indices
  int64_t size;      // floats, aligned
  int64_t offset;
} group;

// What the placement works on: one alias group, or (the layer run) the
// groups of one value of every trip, which then share one offset.  Its live
// set is the intervals ivs[first .. first + niv), disjoint and sorted.
typedef struct {
  int root;          // smallest member root: ties are broken by it
  int lo, len;       // first live node; live nodes summed over the intervals
  int64_t size, offset;
  int first, niv;
} slot;

typedef struct { int lo, hi; } ival;

static int cmp_slot(const void *pa, const void *pb) {
  const slot *a = pa, *b = pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return a->root < b->root ? -1 : a->root > b->root;
}

static int cmp_slot_time(const void *pa, const void *pb) {
  const slot *a = pa, *b = pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return a->root < b->root ? -1 : a->root > b->root;
}

// --- placement ------------------------------------------------------------------------
//
// Slots are placed one after another (in the order given) each at the
// lowest offset p where [p, p + size) meets no placed slot live at any of
// its nodes.  To find p without visiting every such slot, the placed
// slots' offset ranges are kept in a segment tree over node indices: each
// tree node holds two sets of merged runs (sorted, disjoint [begin, end)
// in floats),
//   cov: the slots whose live interval covers the node's time range but not
//        its parent's (the interval's canonical pieces), and
//   sub: every slot live somewhere in the node's range (what it and all its
//        descendants hold, merged).
// The slots live during a query interval are then exactly those in `sub`
// of its canonical pieces and in `cov` of the pieces' ancestors: O(log n)
// run sets, whose runs are merged (a stack of activations placed on top of
// one another is one run).  The lowest free p is found by a sweep over
// those sets in the order of their runs (a heap keyed by a run's begin).
// A query or insertion costs O(log n) sets times a binary search (plus the
// runs stepped over), where walking every node of every live range, as
// the first planner did, cost the live ranges' lengths times the number
// of live buffers (N^3 and worse for a backward, whose activations all
// live across the middle).
typedef struct {
  int64_t *r;    // r[2i], r[2i+1]: run i
  int n, cap;
} runs;

typedef struct {
  runs cov, sub;
} tnode;

typedef struct {
  tnode *nd;        // 2 * ntimes nodes, node id (l + r) | (l != r)
  int ntimes;
  const runs **q;   // the sets of the current query
  int nq, capq;
  int *stamp;       // per tree node: 2 * query + (sub collected) of its last collection
  int *heap, *cur;  // query sweep: heap of set indices, each set's current run
  int query;
  bool oom;
  int64_t work;     // sets visited, runs stepped over and moved: the cost
} tree;

static int tid(int l, int r) { return (l + r) | (l != r); }

// First run of L whose end is > x (>= x with `touch`: runs that merely
// touch [x, ...) are merged with it on insertion).
static int first_end(const runs *L, int64_t x, bool touch, int64_t *work) {
  int lo = 0, hi = L->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    ++*work;
    if (L->r[2 * mid + 1] > x || (touch && L->r[2 * mid + 1] == x)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// Adds [b, e) (not empty) to L, merging every run it overlaps or touches.
static bool runs_add(runs *L, int64_t b, int64_t e, int64_t *work) {
  int i = first_end(L, b, true, work), j = i;
  while (j < L->n && L->r[2 * j] <= e) j++;  // runs i..j-1 meet [b, e)
  *work += j - i + 1;
  if (j > i) {  // they become run i
    if (L->r[2 * i] < b) b = L->r[2 * i];
    if (L->r[2 * j - 1] > e) e = L->r[2 * j - 1];
    memmove(L->r + 2 * (i + 1), L->r + 2 * j, (size_t)(L->n - j) * 2 * sizeof *L->r);
    L->n -= j - i - 1;
  } else {  // a run of its own at i
    if (L->n == L->cap) {
      int cap = L->cap ? 2 * L->cap : 2;
      int64_t *r = realloc(L->r, (size_t)cap * 2 * sizeof *r);
      if (!r) return false;
      L->r = r;
      L->cap = cap;
    }
    memmove(L->r + 2 * (i + 1), L->r + 2 * i, (size_t)(L->n - i) * 2 * sizeof *L->r);
    L->n++;
  }
  L->r[2 * i] = b;
  L->r[2 * i + 1] = e;
  return true;
}

// Enters [b, e) at the nodes of time range [lo, hi] (the tree node for
// [l, r] is visited).
static void tree_add(tree *T, int l, int r, int lo, int hi, int64_t b, int64_t e) {
  if (hi < l || r < lo || T->oom) return;
  tnode *nd = &T->nd[tid(l, r)];
  if (!runs_add(&nd->sub, b, e, &T->work)) T->oom = true;
  if (lo <= l && r <= hi) {
    if (!runs_add(&nd->cov, b, e, &T->work)) T->oom = true;
    return;
  }
  int mid = l + (r - l) / 2;
  tree_add(T, l, mid, lo, hi, b, e);
  tree_add(T, mid + 1, r, lo, hi, b, e);
}

static void collect(tree *T, const runs *L) {
  T->work++;
  if (!L->n) return;
  if (T->nq == T->capq) {
    int cap = T->capq ? 2 * T->capq : 64;
    const runs **q = realloc(T->q, (size_t)cap * sizeof *q);
    if (!q) {
      T->oom = true;
      return;
    }
    T->q = q;
    T->capq = cap;
  }
  T->q[T->nq++] = L;
}

// The run sets holding every slot placed so far that is live in [lo, hi]
// (each tree node's set once per query).
static void tree_query(tree *T, int l, int r, int lo, int hi) {
  if (hi < l || r < lo) return;
  int id = tid(l, r);
  bool inside = lo <= l && r <= hi;
  if (T->stamp[id] != 2 * T->query + inside) {
    T->stamp[id] = 2 * T->query + inside;
    collect(T, inside ? &T->nd[id].sub : &T->nd[id].cov);
  }
  if (inside) return;
  int mid = l + (r - l) / 2;
  tree_query(T, l, mid, lo, hi);
  tree_query(T, mid + 1, r, lo, hi);
}

// Heap of the query's sets by the begin of their current run.
static int64_t run_begin(const tree *T, int k) { return T->q[k]->r[2 * T->cur[k]]; }

static void sift_down(tree *T, int n, int i) {
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && run_begin(T, T->heap[c + 1]) < run_begin(T, T->heap[c])) c++;
    if (run_begin(T, T->heap[i]) <= run_begin(T, T->heap[c])) return;
    int t = T->heap[i];
    T->heap[i] = T->heap[c];
    T->heap[c] = t;
    i = c;
    T->work++;
  }
}

// The lowest p >= 0 where [p, p + size) meets no run of the query's sets:
// the set whose current run begins first is taken; a run ending by p is
// stepped over (binary search to the first one ending after p), one that
// begins before p + size moves p to its end, and the first run that
// begins at p + size or later ends the sweep (every other begins later).
static int64_t lowest_free(tree *T, int64_t size) {
  int n = 0;
  for (int k = 0; k < T->nq; k++) {
    T->cur[k] = 0;
    T->heap[n++] = k;
  }
  for (int i = n / 2 - 1; i >= 0; i--) sift_down(T, n, i);
  int64_t p = 0;
  while (n > 0) {
    int k = T->heap[0];
    const runs *L = T->q[k];
    int64_t e = L->r[2 * T->cur[k] + 1];
    if (e > p && run_begin(T, k) >= p + size) break;
    if (e > p) p = e;
    T->cur[k] = first_end(L, p, false, &T->work);
    if (T->cur[k] == L->n) T->heap[0] = T->heap[--n];
    sift_down(T, n, 0);
  }
  return p;
}

static void tree_free(tree *T) {
  for (int i = 0; T->nd && i < 2 * T->ntimes; i++) {
    free(T->nd[i].cov.r);
    free(T->nd[i].sub.r);
  }
  free(T->nd);
  free(T->q);
  free(T->stamp);
  free(T->heap);
  free(T->cur);
}

// Places gs[0..nslots) in that order; *work (may be NULL) gets the cost.
static int place(bc_ctx *ctx, int ntimes, slot *gs, int nslots, const ival *ivs,
                 int64_t *arena_floats, int64_t *work) {
  tree T = {.ntimes = ntimes > 0 ? ntimes : 1, .query = -1};
  size_t nn = 2 * (size_t)T.ntimes;
  T.nd = calloc(nn, sizeof *T.nd);
  T.stamp = malloc(nn * sizeof *T.stamp);
  T.heap = malloc(2 * nn * sizeof *T.heap);  // a query takes each set at most once
  T.cur = malloc(2 * nn * sizeof *T.cur);
  T.oom = !T.nd || !T.stamp || !T.heap || !T.cur;
  for (size_t i = 0; !T.oom && i < nn; i++) T.stamp[i] = -1;
  int64_t top = 0;
  for (int i = 0; i < nslots && !T.oom; i++) {
    slot *gr = &gs[i];
    T.query = i;
    T.nq = 0;
    for (int k = gr->first; k < gr->first + gr->niv; k++)
      tree_query(&T, 0, T.ntimes - 1, ivs[k].lo, ivs[k].hi);
    if (T.oom) break;
    gr->offset = lowest_free(&T, gr->size);
    if (gr->offset + gr->size > top) top = gr->offset + gr->size;
    for (int k = gr->first; gr->size > 0 && k < gr->first + gr->niv; k++)
      tree_add(&T, 0, T.ntimes - 1, ivs[k].lo, ivs[k].hi, gr->offset, gr->offset + gr->size);
  }
  bool oom = T.oom;
  if (work) *work = T.work;
  tree_free(&T);
  if (oom) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *arena_floats = top;
  return BC_OK;
}

// Largest total size of groups live at one node.
static int64_t lower_bound(const bc_graph *g, const group *gs, int ngroups, int64_t *diff) {
  for (int t = 0; t <= g->nnodes; t++) diff[t] = 0;
  for (int i = 0; i < ngroups; i++) {
    diff[gs[i].lo] += gs[i].size;
    diff[gs[i].hi + 1] -= gs[i].size;
  }
  int64_t cur = 0, best = 0;
  for (int t = 0; t < g->nnodes; t++) {
    cur += diff[t];
    if (cur > best) best = cur;
  }
  return best;
}

// --- the layer run ----------------------------------------------------------------------
//
// Every value a trip of the layer run defines (outputs and scratch) shares
// one offset with its counterparts in the other trips, so that the layer
// function addresses the same buffers on every trip.  lead[i] is the group
// whose slot group i joins (itself when alone).  The counterparts' live
// ranges must be disjoint (a value read after its next trip redefines it
// cannot share storage); otherwise the run is dropped and the plan is the
// plain one.

static int find_lead(int *lead, int i) {
  while (lead[i] != i) i = lead[i] = lead[lead[i]];
  return i;
}

// lead[i]: the smallest group index of group i's slot.  False when a
// trip's value is not in the arena (no run can be laid out), except for the
// last trip's graph outputs (bc_layers): those have no slot.
static bool periodic_leads(const bc_graph *g, const int *root, const int *gid, int ngroups,
                           int *lead) {
  for (int i = 0; i < ngroups; i++) lead[i] = i;
  const bc_layers *L = &g->layers;
  for (int t = 1; t < L->count; t++)
    for (int j = 0; j < L->period; j++) {
      const bc_node *a = &g->nodes[L->first + j], *b = &g->nodes[L->first + t * L->period + j];
      for (int k = 0; k < a->nout + a->nscratch; k++) {
        int u = k < a->nout ? a->out[k] : a->scratch[k - a->nout];
        int w = k < b->nout ? b->out[k] : b->scratch[k - b->nout];
        if (u < 0 && w < 0) continue;
        if (t == L->count - 1 && k < b->nout && w >= 0 && bcI_in_caller_memory(g, w)) continue;
        if (u < 0 || w < 0 || root[u] < 0 || root[w] < 0) return false;
        int x = find_lead(lead, gid[root[u]]), y = find_lead(lead, gid[root[w]]);
        if (x != y) lead[x > y ? x : y] = x < y ? x : y;
      }
    }
  for (int i = 0; i < ngroups; i++) find_lead(lead, i);
  return true;
}

// Where v is defined in the run: trip, node and slot (false outside it).
static bool run_pos(const bc_graph *g, int v, int *t, int *j, int *k) {
  const bc_layers *L = &g->layers;
  int d = v >= 0 ? g->vals[v].def : -1;
  if (d < L->first || d >= L->first + L->count * L->period) return false;
  *t = (d - L->first) / L->period;
  *j = (d - L->first) % L->period;
  const bc_node *n = &g->nodes[d];
  for (*k = 0; *k < n->nout + n->nscratch; (*k)++)
    if (bcI_layer_value(g, *t, *j, *k) == v) return true;
  return false;
}

// In-place links inside the run follow trip 1's: a value reuses its own
// trip's counterpart of what trip 1's value reuses (or the previous trip's,
// for a stream carried from trip to trip).  Other links are dropped (the
// value gets storage of its own, which is always correct): e.g. trip 0,
// whose stream starts in caller memory, reuses a temporary instead.
// Without `carried`, links to the previous trip are dropped too (a stream
// that moves between buffers, as Pre-LN's, needs that to be periodic).
static void periodic_aliases(bc_graph *g, bool carried) {
  const bc_layers *L = &g->layers;
  for (int j = 0; j < L->period; j++) {
    const bc_node *n1 = &g->nodes[L->first + L->period + j];
    for (int k = 0; k < n1->nout; k++) {
      int v1 = n1->out[k], a1 = v1 >= 0 ? g->vals[v1].alias : -1;
      int at = 0, aj = 0, ak = 0;
      bool in_run = a1 >= 0 && run_pos(g, a1, &at, &aj, &ak) && (at == 1 || (at == 0 && carried));
      for (int t = 0; t < L->count; t++) {
        int v = bcI_layer_value(g, t, j, k);
        if (v < 0) continue;
        int want = in_run ? bcI_layer_value(g, t - 1 + at, aj, ak) : -1;
        if (g->vals[v].alias != want) g->vals[v].alias = -1;
      }
    }
  }
}

typedef struct { int lead, lo, i; } member;

static int cmp_member(const void *pa, const void *pb) {
  const member *a = pa, *b = pb;
  if (a->lead != b->lead) return a->lead < b->lead ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

// The slots of the groups: members sorted by lead then time (m), their
// intervals in ivs.  False when two members of a slot are live at once.
static bool make_slots(const group *gs, int ngroups, member *m, slot *sl, int *nslots, ival *ivs) {
  qsort(m, (size_t)ngroups, sizeof *m, cmp_member);
  int n = 0;
  for (int k = 0; k < ngroups; k++) {
    const group *gr = &gs[m[k].i];
    ivs[k] = (ival){gr->lo, gr->hi};
    if (k > 0 && m[k].lead == m[k - 1].lead) {
      slot *s = &sl[n - 1];
      if (ivs[k - 1].hi >= gr->lo) return false;
      s->niv++;
      s->len += gr->hi - gr->lo;
      if (gr->size > s->size) s->size = gr->size;
      if (gr->root < s->root) s->root = gr->root;
      continue;
    }
    sl[n++] = (slot){gr->root, gr->lo, gr->hi - gr->lo, gr->size, -1, k, 1};
  }
  *nslots = n;
  return true;
}

typedef struct {
  group *gs;
  int *lead;
  member *m;
  slot *sl;
  ival *ivs;
  int *alias;        // the in-place links as the passes set them
} planbufs;

// Plans the groups; with `periodic`, the layer run's counterparts share
// slots, and *placed = false (nothing planned) when they cannot.
static int plan_groups(bc_graph *g, const bool *arena, const int *root, planbufs *pb,
                       int *gid, int64_t *diff, bool periodic, bool *placed) {
  group *gs = pb->gs;
  int ngroups = 0;
  for (int v = 0; v < g->nvals; v++) {
    gid[v] = -1;
    if (arena[v] && root[v] == v) {
      gid[v] = ngroups;
      gs[ngroups++] = (group){v, g->vals[v].first_use, g->vals[v].last_use, 0, -1};
    }
  }
  for (int v = 0; v < g->nvals; v++) {
    if (!arena[v]) continue;
    group *gr = &gs[gid[root[v]]];
    const bc_value *val = &g->vals[v];
    if (val->first_use < gr->lo) gr->lo = val->first_use;
    if (val->last_use > gr->hi) gr->hi = val->last_use;
    int64_t sz = align_up(bc_shape_numel(&val->shape));
    if (sz > gr->size) gr->size = sz;
  }
  g->arena_lower_bound = lower_bound(g, gs, ngroups, diff);
  *placed = false;
  if (periodic && !periodic_leads(g, root, gid, ngroups, pb->lead)) return BC_OK;
  for (int i = 0; i < ngroups; i++)
    pb->m[i] = (member){periodic ? pb->lead[i] : i, gs[i].lo, i};
  int nslots;
  if (!make_slots(gs, ngroups, pb->m, pb->sl, &nslots, pb->ivs)) return BC_OK;
  *placed = true;
  qsort(pb->sl, (size_t)nslots, sizeof *pb->sl, cmp_slot);
  int rc = place(g->ctx, g->nnodes, pb->sl, nslots, pb->ivs, &g->arena_floats, NULL);
  if (rc) return rc;
  if (periodic && g->arena_floats > g->arena_lower_bound) {
    // A layer run's slots span the whole run: placed first among their
    // size they can leave holes; placing each size class in time order
    // instead may pack tighter.  The better of the two orders is kept.
    int64_t first = g->arena_floats;
    qsort(pb->sl, (size_t)nslots, sizeof *pb->sl, cmp_slot_time);
    if ((rc = place(g->ctx, g->nnodes, pb->sl, nslots, pb->ivs, &g->arena_floats, NULL)))
      return rc;
    if (g->arena_floats > first) {
      qsort(pb->sl, (size_t)nslots, sizeof *pb->sl, cmp_slot);
      if ((rc = place(g->ctx, g->nnodes, pb->sl, nslots, pb->ivs, &g->arena_floats, NULL)))
      return rc;
    }
  }
  for (int k = 0; k < nslots; k++)
    for (int j = pb->sl[k].first; j < pb->sl[k].first + pb->sl[k].niv; j++)
      gs[pb->m[j].i].offset = pb->sl[k].offset;
  for (int v = 0; v < g->nvals; v++)
    if (arena[v]) g->vals[v].offset = gs[gid[root[v]]].offset;
  return BC_OK;
}

// One plan: mode 0 plain (the passes' in-place links, no layer run); 1 and
// 2 the layer run `run` periodically, keeping (1) or dropping (2) the
// in-place links from trip to trip; 3 plain again.  *ok: the plan is made
// (a periodic one may not be possible).
static int plan_with(bc_graph *g, const bool *arena, int *root, planbufs *pb, int *gid,
                     int64_t *diff, const bc_layers *run, int mode, bool *ok) {
  bool periodic = mode == 1 || mode == 2;
  for (int v = 0; v < g->nvals; v++) g->vals[v].alias = pb->alias[v];
  g->layers = periodic ? *run : (bc_layers){0};
  if (periodic) periodic_aliases(g, mode == 1);
  alias_roots(g, arena, root);
  int rc = plan_groups(g, arena, root, pb, gid, diff, periodic, ok);
  if (!rc && !*ok) g->layers = (bc_layers){0};
  return rc;
}

// The plain plan may happen to be periodic over the run (Pre-LN decoders:
// the stream cycles through three buffers, back where it started after one
// layer); then the run is kept.  Otherwise g->layers_dropped says why not.
static void keep_plain_run(bc_graph *g, const bc_layers *run, int64_t plain, int64_t periodic) {
  g->layers = *run;
  for (int t = 0; t < run->count; t++)
    for (int j = 0; j < run->period; j++)
      for (int k = 0; k < BC_MAX_NODE_OUT + BC_MAX_NODE_SCRATCH; k++) {
        int u = bcI_layer_value(g, 1, j, k), v = bcI_layer_value(g, t, j, k);
        if (t == run->count - 1 && v >= 0 && bcI_in_caller_memory(g, v)) continue;
        if ((u < 0) == (v < 0) && (u < 0 || (g->vals[u].offset >= 0 &&
                                             g->vals[u].offset == g->vals[v].offset)))
          continue;
        g->layers = (bc_layers){0};
        g->layers_dropped =
            periodic ? bc_fmt(g->ctx, "laid out alike, layers %d..%d need a %lld-float arena, "
                              "over 3%% more than the plain plan's %lld", run->index0,
                              run->index0 + run->count - 1, (long long)periodic, (long long)plain)
                     : bc_fmt(g->ctx, "layers %d..%d cannot be laid out alike (a value of one "
                              "is not in the arena, or two would overlap)", run->index0,
                              run->index0 + run->count - 1);
        return;
      }
}

// Items of one share id in order of time: one slot, its intervals theirs.
typedef struct { int64_t key; int lo, i; } shared_item;

static int cmp_shared(const void *pa, const void *pb) {
  const shared_item *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return a->lo != b->lo ? (a->lo < b->lo ? -1 : 1) : (a->i > b->i) - (a->i < b->i);
}

// bcM_place_intervals, _ex and bcM_place_shared: items of one share id
// become one slot whose live set is their intervals; *work (may be NULL)
// receives the placement's cost in steps.
static int place_items(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                       const int64_t *size, const int *share, int64_t *offset, int64_t *total,
                       int64_t *work) {
  slot *sl = malloc((size_t)(n ? n : 1) * sizeof *sl);
  ival *ivs = malloc((size_t)(n ? n : 1) * sizeof *ivs);
  shared_item *it = malloc((size_t)(n ? n : 1) * sizeof *it);
  int rc = sl && ivs && it ? BC_OK : bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int ns = 0;
  for (int i = 0; !rc && i < n; i++)
    it[i] = (shared_item){share && share[i] >= 0 ? share[i] : (int64_t)INT32_MAX + 1 + i, lo[i], i};
  if (!rc) qsort(it, (size_t)n, sizeof *it, cmp_shared);
  for (int k = 0; !rc && k < n; k++) {
    int i = it[k].i;
    ivs[k] = (ival){lo[i], hi[i]};
    if (k > 0 && it[k].key == it[k - 1].key) {
      slot *s = &sl[ns - 1];
      if (ivs[k - 1].hi >= lo[i])
        rc = bc_error(ctx, BC_EINTERNAL, "internal error: shared buffers %d and %d live at once",
                      it[k - 1].i, i);
      s->niv++;
      s->len += hi[i] - lo[i];
      if (align_up(size[i]) > s->size) s->size = align_up(size[i]);
      if (i < s->root) s->root = i;
    } else {
      sl[ns++] = (slot){i, lo[i], hi[i] - lo[i], align_up(size[i]), -1, k, 1};
    }
  }
  if (!rc) qsort(sl, (size_t)ns, sizeof *sl, cmp_slot);
  if (!rc) rc = place(ctx, ntimes, sl, ns, ivs, total, work);
  for (int k = 0; !rc && k < ns; k++)
    for (int j = sl[k].first; j < sl[k].first + sl[k].niv; j++) offset[it[j].i] = sl[k].offset;
  free(sl);
  free(ivs);
  free(it);
  return rc;
}

int bcM_place_intervals(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                        const int64_t *size, int64_t *offset, int64_t *total) {
  return place_items(ctx, ntimes, n, lo, hi, size, NULL, offset, total, NULL);
}

int bcM_place_intervals_ex(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                           const int64_t *size, int64_t *offset, int64_t *total, int64_t *work) {
  return place_items(ctx, ntimes, n, lo, hi, size, NULL, offset, total, work);
}

int bcM_place_shared(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                     const int64_t *size, const int *share, int64_t *offset, int64_t *total) {
  return place_items(ctx, ntimes, n, lo, hi, size, share, offset, total, NULL);
}

int bcM_plan(bc_graph *g) {
  g->planned = false;
  g->layers_dropped = NULL;
  int rc = bcI_verify(g);
  if (rc) return rc;
  if ((rc = make_scratch(g))) return rc;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1);
  bool *arena = malloc(nv * sizeof(bool));
  int *root = malloc(nv * sizeof(int));
  int *gid = malloc(nv * sizeof(int));
  planbufs pb = {malloc(nv * sizeof(group)), malloc(nv * sizeof(int)), malloc(nv * sizeof(member)),
                 malloc(nv * sizeof(slot)), malloc(nv * sizeof(ival)), malloc(nv * sizeof(int))};
  int64_t *diff = malloc(((size_t)g->nnodes + 1) * sizeof(int64_t));
  if (!arena || !root || !gid || !pb.gs || !pb.lead || !pb.m || !pb.sl || !pb.ivs || !pb.alias || !diff) {
    rc = oom(g);
    goto out;
  }
  live_ranges(g, arena);
  if ((rc = check_aliases(g, arena, gid))) goto out;
  if ((rc = bcI_find_layers(g, &g->layers))) goto out;
  for (int v = 0; v < g->nvals; v++) pb.alias[v] = g->vals[v].alias;
  // The plain plan gives the reference size; then the layer run
  // periodically, keeping in-place streams from trip to trip, else without
  // them, accepted when the arena stays within 3% of the plain one; else
  // the plain plan again.
  bc_layers run = g->layers;
  bool ok = false;
  if ((rc = plan_with(g, arena, root, &pb, gid, diff, NULL, 0, &ok))) goto out;
  int64_t plain = g->arena_floats;
  int64_t periodic = 0;  // the smallest periodic arena over the plain one's 3%
  for (int mode = 1; run.count >= 2 && mode <= 3 && !(mode == 3 && ok); mode++) {
    if ((rc = plan_with(g, arena, root, &pb, gid, diff, &run, mode, &ok))) goto out;
    if (ok && mode < 3 && g->arena_floats - plain > plain * 3 / 100 &&
        (!periodic || g->arena_floats < periodic))
      periodic = g->arena_floats;
    ok = ok && g->arena_floats - plain <= plain * 3 / 100;
    if (ok) break;
  }
  if (run.count >= 2 && !g->layers.count) keep_plain_run(g, &run, plain, periodic);
  if (g->arena_floats > BC_MAX_WORKSPACE / (int64_t)sizeof(float)) {
    rc = bc_error(g->ctx, BC_ENOMEM,
                  "error: the graph needs a workspace of %lld bytes, over the limit of %lld "
                  "bytes",
                  (long long)g->arena_floats * (long long)sizeof(float),
                  (long long)BC_MAX_WORKSPACE);
    goto out;
  }
  g->planned = true;
  rc = bcI_verify(g);
out:
  free(arena);
  free(root);
  free(gid);
  free(pb.gs);
  free(pb.lead);
  free(pb.m);
  free(pb.sl);
  free(pb.ivs);
  free(pb.alias);
  free(diff);
  return rc;
}

// --- bcM_check ----------------------------------------------------------------------------
//
// Re-derives everything from the nodes (which values need storage, their
// live ranges, alias groups) instead of trusting the fields the planner
// wrote, then sweeps over node indices: at every node the buffers of the
// distinct groups live there, sorted by offset, must not overlap.  Two
// members of one group may be live at the same node only as a hand-over
// (one is read for the last time where the other is written).

typedef struct {
  int v;                 // a member live at this node (named in messages)
  int64_t begin, end;    // floats
} span;

static int cmp_span(const void *pa, const void *pb) {
  const span *a = pa, *b = pb;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  return a->v < b->v ? -1 : a->v > b->v;
}

static int fail(const bc_graph *g, const char *fmt, int a, int b, int t) {
  const bc_value *va = &g->vals[a], *vb = &g->vals[b];
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, va->name, (long long)va->offset,
           (long long)(va->offset + bc_shape_numel(&va->shape)), b, vb->name,
           (long long)vb->offset, (long long)(vb->offset + bc_shape_numel(&vb->shape)), t);
  return bc_error(g->ctx, BC_EINTERNAL, "internal error: memory plan: %s", msg);
}

typedef struct {
  int *first, *last, *root, *seen, *rep, *bucket, *nextv, *active;
  bool *arena;
  span *spans;
} checker;

static int check_storage(const bc_graph *g, const checker *c) {
  for (int v = 0; v < g->nvals; v++) {
    const bc_value *val = &g->vals[v];
    if (!c->arena[v]) {
      if (c->first[v] >= 0 && val->offset != -1)
        return bc_error(g->ctx, BC_EINTERNAL,
                        "internal error: memory plan: %%%d lives in caller memory but has "
                        "offset %lld", v, (long long)val->offset);
      continue;
    }
    int64_t n = bc_shape_numel(&val->shape);
    if (val->offset < 0 || val->offset % ALIGN || val->offset + n > g->arena_floats)
      return bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: memory plan: %%%d %s at offset %lld (%lld floats) is "
                      "outside the %lld-float arena or misaligned",
                      v, val->name, (long long)val->offset, (long long)n,
                      (long long)g->arena_floats);
    if (val->offset != g->vals[c->root[v]].offset)
      return bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: memory plan: %%%d is in place of %%%d but at offset %lld, "
                      "not %lld", v, c->root[v], (long long)val->offset,
                      (long long)g->vals[c->root[v]].offset);
  }
  return BC_OK;
}

static int check_sweep(const bc_graph *g, checker *c) {
  for (int t = 0; t < g->nnodes; t++) c->bucket[t] = -1;
  for (int v = g->nvals - 1; v >= 0; v--) {
    c->seen[v] = -1;
    if (c->arena[v]) {
      c->nextv[v] = c->bucket[c->first[v]];
      c->bucket[c->first[v]] = v;
    }
  }
  int nactive = 0;
  for (int t = 0; t < g->nnodes; t++) {
    int keep = 0;
    for (int i = 0; i < nactive; i++)
      if (c->last[c->active[i]] >= t) c->active[keep++] = c->active[i];
    nactive = keep;
    for (int v = c->bucket[t]; v >= 0; v = c->nextv[v]) c->active[nactive++] = v;
    int nspans = 0;
    for (int i = 0; i < nactive; i++) {
      int v = c->active[i], r = c->root[v];
      if (c->seen[r] == t) {
        int w = c->rep[r];  // same group, both live at t: must be a hand-over
        bool handover = (c->last[w] == t && c->first[v] == t) || (c->last[v] == t && c->first[w] == t);
        if (!handover)
          return fail(g, "%%%d %s [%lld, %lld) and %%%d %s [%lld, %lld) share storage but are "
                         "both live at node %d", w, v, t);
        continue;
      }
      c->seen[r] = t;
      c->rep[r] = v;
      int64_t off = g->vals[v].offset;
      c->spans[nspans++] = (span){v, off, off + bc_shape_numel(&g->vals[v].shape)};
    }
    qsort(c->spans, (size_t)nspans, sizeof *c->spans, cmp_span);
    int maxi = -1;  // span reaching furthest so far
    for (int i = 0; i < nspans; i++) {
      if (maxi >= 0 && c->spans[i].begin < c->spans[maxi].end)
        return fail(g, "%%%d %s [%lld, %lld) and %%%d %s [%lld, %lld) overlap in the arena and "
                       "are both live at node %d", c->spans[maxi].v, c->spans[i].v, t);
      if (maxi < 0 || c->spans[i].end > c->spans[maxi].end) maxi = i;
    }
  }
  return BC_OK;
}

int bcM_check(const bc_graph *g) {
  if (!g->planned)
    return bc_error(g->ctx, BC_EINTERNAL, "internal error: memory plan: graph is not planned");
  size_t nv = (size_t)(g->nvals ? g->nvals : 1), nn = (size_t)(g->nnodes ? g->nnodes : 1);
  checker c = {0};
  c.first = malloc(nv * sizeof(int));
  c.last = malloc(nv * sizeof(int));
  c.root = malloc(nv * sizeof(int));
  c.seen = malloc(nv * sizeof(int));
  c.rep = malloc(nv * sizeof(int));
  c.nextv = malloc(nv * sizeof(int));
  c.active = malloc(nv * sizeof(int));
  c.bucket = malloc(nn * sizeof(int));
  c.arena = malloc(nv * sizeof(bool));
  c.spans = malloc(nv * sizeof(span));
  int rc = BC_OK;
  if (!c.first || !c.last || !c.root || !c.seen || !c.rep || !c.nextv || !c.active ||
      !c.bucket || !c.arena || !c.spans) {
    rc = bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    goto out;
  }
  for (int v = 0; v < g->nvals; v++) {
    c.first[v] = c.last[v] = -1;
    c.arena[v] = false;
  }
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) c.last[n->in[k]] = i;
    for (int k = 0; k < n->nout + n->nscratch; k++) {
      int v = k < n->nout ? n->out[k] : n->scratch[k - n->nout];
      if (v < 0) continue;
      c.first[v] = c.last[v] = i;
      c.arena[v] = k >= n->nout || !bcI_in_caller_memory(g, v);
    }
  }
  // Group roots from the alias links, in definition order: an alias must
  // name a value defined strictly earlier, whose root is then known (this
  // also rules out cycles and keeps the check linear on long chains).
  for (int v = 0; v < g->nvals; v++) c.root[v] = v;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nout + n->nscratch; k++) {
      int v = k < n->nout ? n->out[k] : n->scratch[k - n->nout];
      int w = v >= 0 ? g->vals[v].alias : -1;
      if (w < 0 || !c.arena[v]) continue;
      if (w >= g->nvals || !c.arena[w] || c.first[w] < 0 || c.first[w] >= i) {
        rc = bc_error(g->ctx, BC_EINTERNAL,
                      "internal error: memory plan: %%%d is in place of %%%d, which is not an "
                      "earlier arena value", v, w);
        goto out;
      }
      c.root[v] = c.root[w];
    }
  }
  if ((rc = check_storage(g, &c))) goto out;
  rc = check_sweep(g, &c);
out:
  free(c.first);
  free(c.last);
  free(c.root);
  free(c.seen);
  free(c.rep);
  free(c.nextv);
  free(c.active);
  free(c.bucket);
  free(c.arena);
  free(c.spans);
  return rc;
}
