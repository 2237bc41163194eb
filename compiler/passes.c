// passes.c — the rewrites between parsing and planning.
//
// The pipeline is fixed and short: dce, fuse-dual, fuse-add-ln, inplace,
// plan.  Each pass rewrites the graph in place and ends with bcI_verify, so
// a pass that breaks SSA or execution order is caught at the pass that did
// it (and `blockc dump --after NAME` shows exactly what each one changed).
//
// Fusions never move nodes around one at a time: a fused node takes over the
// slot of one of the nodes it replaces, the others are marked dead, and one
// compaction at the end renumbers the nodes.  That keeps every pass linear
// in the graph size even at BC_MAX_NODES.  Value ids are never renumbered:
// values a pass orphans simply stay in the table unused, so `%17` means the
// same thing in every dump of a compilation and the dumps diff cleanly.
#include "ops.h"

#include <stdlib.h>
#include <string.h>

static bool is_graph_output(const bc_graph *g, int v) {
  return v == g->output || g->vals[v].is_output;  // is_output marks every output
}

// The norms a residual Add fuses into: LayerNorm, and RMSNorm (node->rms).
static bool is_norm(bc_op op) { return bcT_def(op) && bcT_def(op)->norm; }

static int oom(bc_graph *g) { return bc_error(g->ctx, BC_ENOMEM, "error: out of memory"); }

// --- working state shared by the passes ---------------------------------------
//
// Who reads each value (distinct reader nodes, CSR layout), where each value
// is defined, and which node slots are dead.  Fusion passes keep all three
// current as they rewrite, so every legality check sees the graph as it is
// at that moment rather than as it was when the pass started.
typedef struct {
  bc_graph *g;
  int *start;   // readers of value v are rd[start[v] .. start[v+1])
  int *rd;      // reader node slots
  int *def;     // defining node slot per value; -1 for the input / undefined
  bool *dead;   // node slots dropped at compaction
} uses;

static void uses_free(uses *u) {
  free(u->start);
  free(u->rd);
  free(u->def);
  free(u->dead);
}

// True if node n reads v through an input slot before k (Add(x, x) reads x
// once as far as reader lists are concerned).
static bool read_earlier(const bc_node *n, int k, int v) {
  for (int j = 0; j < k; j++)
    if (n->in[j] == v) return true;
  return false;
}

static int uses_build(bc_graph *g, uses *u) {
  memset(u, 0, sizeof *u);
  u->g = g;
  int nv = g->nvals, nn = g->nnodes;
  u->start = calloc((size_t)nv + 1, sizeof(int));
  u->def = malloc((size_t)(nv ? nv : 1) * sizeof(int));
  u->dead = calloc((size_t)(nn ? nn : 1), sizeof(bool));
  if (!u->start || !u->def || !u->dead) {
    uses_free(u);
    return oom(g);
  }
  for (int v = 0; v < nv; v++) u->def[v] = -1;
  int total = 0;
  for (int i = 0; i < nn; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0) u->def[n->out[k]] = i;
    for (int k = 0; k < n->nin; k++) {
      if (n->in[k] < 0 || read_earlier(n, k, n->in[k])) continue;
      u->start[n->in[k] + 1]++;
      total++;
    }
  }
  for (int v = 0; v < nv; v++) u->start[v + 1] += u->start[v];
  u->rd = malloc((size_t)(total ? total : 1) * sizeof(int));
  int *fill = malloc((size_t)(nv ? nv : 1) * sizeof(int));
  if (!u->rd || !fill) {
    free(fill);
    uses_free(u);
    return oom(g);
  }
  memcpy(fill, u->start, (size_t)nv * sizeof(int));
  for (int i = 0; i < nn; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0 && !read_earlier(n, k, n->in[k])) u->rd[fill[n->in[k]]++] = i;
  }
  free(fill);
  return BC_OK;
}

static int nreaders(const uses *u, int v) { return u->start[v + 1] - u->start[v]; }

// Earliest slot that reads v (hi bound for defining v), or nnodes if none.
static int first_reader(const uses *u, int v) {
  int m = u->g->nnodes;
  for (int r = u->start[v]; r < u->start[v + 1]; r++)
    if (u->rd[r] < m) m = u->rd[r];
  return m;
}

// A fused node at slot p now reads what nodes a, b, c used to read.
static void move_reads(uses *u, int v, int a, int b, int c, int p) {
  for (int r = u->start[v]; r < u->start[v + 1]; r++)
    if (u->rd[r] == a || u->rd[r] == b || u->rd[r] == c) u->rd[r] = p;
}

// Drops dead slots and renumbers the survivors. Scratch values record their
// node themselves (bcI_verify does not recompute them), so they follow along.
static void compact(bc_graph *g, const bool *dead) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (dead[i]) continue;
    if (n != i) g->nodes[n] = g->nodes[i];
    g->nodes[n].id = n;
    for (int k = 0; k < g->nodes[n].nscratch; k++) g->vals[g->nodes[n].scratch[k]].def = n;
    n++;
  }
  g->nnodes = n;
}

// A structural rewrite invalidates in-place decisions and the memory plan;
// `inplace` and `plan` recompute them from scratch.
static void invalidate_plan(bc_graph *g) {
  for (int v = 0; v < g->nvals; v++) g->vals[v].alias = -1;
  g->planned = false;
}

// "Add t.blk:14:10" — where a fused node came from, for dumps and errors.
static void describe(const bc_node *n, char *buf, size_t len) {
  if (n->loc.src)
    snprintf(buf, len, "%s %s:%d:%d", bcI_op_name(n->op), n->loc.src->path, n->loc.line,
             n->loc.col);
  else
    snprintf(buf, len, "%s n%d", bcI_op_name(n->op), n->id);
}

static int finish(bc_graph *g, uses *u) {
  compact(g, u->dead);
  uses_free(u);
  return bcI_verify(g);
}

// --- dce ------------------------------------------------------------------------
//
// Walks backwards from the output: a node is kept if any of its outputs is
// needed, and then everything it reads is needed.  An ADD_LN whose sum
// nobody reads loses that output (the kernel takes sum = NULL), which saves
// a buffer and a write per element.
int bcO_dce(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  bool *need = calloc((size_t)(g->nvals ? g->nvals : 1), sizeof(bool));
  bool *dead = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof(bool));
  if (!need || !dead) {
    free(need);
    free(dead);
    return oom(g);
  }
  for (int i = 0; i < g->noutputs; i++) need[g->outputs[i]] = true;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    bc_node *n = &g->nodes[i];
    bool live = false;
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0 && need[n->out[k]]) live = true;
    if (!live) {
      dead[i] = true;
      continue;
    }
    if (n->op == BC_OP_ADD_LN && n->nout == 2 && n->out[1] >= 0 && !need[n->out[1]]) {
      n->out[1] = -1;
      n->nout = 1;
    }
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) need[n->in[k]] = true;
  }
  compact(g, dead);
  free(need);
  free(dead);
  invalidate_plan(g);
  return bcI_verify(g);
}

// --- fuse-dual ------------------------------------------------------------------
//
// ResiDual updates two streams from the same sublayer output u:
//
//   xd' = Add(xd, u)                 (A1: the un-normalised stream)
//   s   = Add(xa, u);  xa' = LN(s)   (A2 + L: the normalised stream)
//
// and DUAL_ADD_LN(xd, xa, u) computes xd' and xa' in one pass over u.  We
// require s to be read by L alone and not be the output, since the fused
// kernel never materialises s.  Either Add may have u as its first or its
// second input; the fused node's coefficients are swapped so that alpha /
// alpha2 always multiply xd / xa and beta / beta2 multiply u.
//
// Placement: F must come after the definitions of xd, xa and u (lo) and
// before the first reader of xd' or xa' (hi).  It reuses the slot of A1, A2
// or L — the latest one strictly inside (lo, hi), so the inputs die as late
// as the original program let them and the dump keeps the shape of the
// source.  The slots are not interchangeable: a reader of xd' may sit
// between A1 and A2, or xa may be computed from xd' (then no position works
// at all).  When none of the three slots is legal we leave the graph alone
// (a position between other nodes could exist in contrived graphs; real
// ResiDual stacks always have A1, A2, L adjacent).
// An Add of two operands of one shape (a broadcast Add never fuses: the
// fused kernels read both operands row by row).
static bool add_same(const bc_graph *g, const bc_node *A) {
  return bc_shape_eq(&g->vals[A->in[0]].shape, &g->vals[A->in[1]].shape);
}

// An Add of one shape without scaled operands (fuse-dual's kernel has none).
static bool add_plain(const bc_graph *g, const bc_node *A) {
  return add_same(g, A) && !bcT_add_extra(A);
}

static bool try_dual(uses *u, int li) {
  bc_graph *g = u->g;
  bc_node *L = &g->nodes[li];
  int s = L->in[0];
  int a2 = u->def[s];
  if (a2 < 0 || u->dead[a2] || g->nodes[a2].op != BC_OP_ADD || !add_plain(g, &g->nodes[a2]))
    return false;
  if (nreaders(u, s) != 1 || is_graph_output(g, s)) return false;
  const bc_node *A2 = &g->nodes[a2];
  // ResiDual graphs write Add(xa, u): try u as the second input first.
  for (int side = 1; side >= 0; side--) {
    int uv = A2->in[side], xa = A2->in[1 - side];
    double alpha2 = side == 1 ? A2->alpha : A2->beta;
    double beta2 = side == 1 ? A2->beta : A2->alpha;
    for (int r = u->start[uv]; r < u->start[uv + 1]; r++) {
      int a1 = u->rd[r];
      if (a1 == a2 || u->dead[a1] || g->nodes[a1].op != BC_OP_ADD || !add_plain(g, &g->nodes[a1]))
        continue;
      const bc_node *A1 = &g->nodes[a1];
      bool u_second = A1->in[1] == uv;
      int xd = u_second ? A1->in[0] : A1->in[1];
      double alpha = u_second ? A1->alpha : A1->beta;
      double beta = u_second ? A1->beta : A1->alpha;
      int d = A1->out[0], y = L->out[0];
      if (xa == d || xd == y) continue;  // F would read its own output
      int lo = u->def[xd];
      if (u->def[xa] > lo) lo = u->def[xa];
      if (u->def[uv] > lo) lo = u->def[uv];
      int hi = first_reader(u, d);
      int hy = first_reader(u, y);
      if (hy < hi) hi = hy;
      int cand[3] = {li, a1, a2};  // sorted latest first
      for (int x = 0; x < 3; x++)
        for (int z = x + 1; z < 3; z++)
          if (cand[z] > cand[x]) {
            int t = cand[x];
            cand[x] = cand[z];
            cand[z] = t;
          }
      int p = -1;
      for (int c = 0; c < 3 && p < 0; c++)
        if (cand[c] > lo && cand[c] < hi) p = cand[c];
      if (p < 0) continue;

      char w1[300], w2[300], w3[300];
      describe(A1, w1, sizeof w1);
      describe(A2, w2, sizeof w2);
      describe(L, w3, sizeof w3);
      const char *note = bc_fmt(g->ctx, "%s + %s + %s", w1, w2, w3);
      bc_node f = *A2;  // keeps A2's loc: the source line of the normalised update
      if (p != a2) f.loc = g->nodes[p].loc;
      f.id = p;
      f.op = BC_OP_DUAL_ADD_LN;
      f.nin = 3;
      f.in[0] = xd;
      f.in[1] = xa;
      f.in[2] = uv;
      f.nout = 2;
      f.out[0] = d;
      f.out[1] = y;
      f.alpha = alpha;
      f.beta = beta;
      f.alpha2 = alpha2;
      f.beta2 = beta2;
      f.eps = L->eps;
      f.rms = L->op == BC_OP_RMSNORM;
      f.offset = L->offset;
      for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) f.param[k] = L->param[k];
      f.fused_from = note ? note : "Add + Add + LayerNorm";
      u->dead[a1] = u->dead[a2] = u->dead[li] = true;
      u->dead[p] = false;
      g->nodes[p] = f;
      move_reads(u, xd, a1, a2, li, p);
      move_reads(u, xa, a1, a2, li, p);
      move_reads(u, uv, a1, a2, li, p);
      u->def[d] = u->def[y] = p;
      u->def[s] = -1;
      return true;
    }
  }
  return false;
}

int bcO_fuse_dual(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  uses u;
  if ((rc = uses_build(g, &u))) return rc;
  for (int i = 0; i < g->nnodes; i++)
    if (!u.dead[i] && is_norm(g->nodes[i].op)) try_dual(&u, i);
  invalidate_plan(g);
  return finish(g, &u);
}

// --- fuse-scale -----------------------------------------------------------------
//
// m = Mul(v, s) (either order) where s has 1 element or one per column of m
// (a Param [1] or [D]: ReZero's alpha, LayerScale's gamma, Admin's omega)
// and v has m's shape, read by one Add alone (once), of operands of one
// shape, and not a graph output  ->  the Add reads v in m's slot k and s as
// that operand's scale (input slot 2 + k): y = alpha*(s . v) + beta*b in
// one pass (ops/add.c).  fuse-add-ln then carries the scales into
// AddLayerNorm, so LayerScale's and Admin's scaled residuals cost nothing
// next to the fused add+norm.  The Add's slot is legal for the rewrite: v
// and s are defined before the Mul, which comes before the Add.
// The node (of op `op`) defining operand k of the Add A when the Add is that
// value's one reader and it is not a graph output, the operand is not also
// the other one and has no activation folded in yet; -1 otherwise.
static int sole_operand_def(const bc_graph *g, const uses *u, const bc_node *A, int k, bc_op op) {
  int v = A->in[k], d = u->def[v];
  if (v == A->in[1 - k] || A->opact[k]) return -1;
  if (d < 0 || u->dead[d] || g->nodes[d].op != op) return -1;
  return nreaders(u, v) == 1 && !is_graph_output(g, v) ? d : -1;
}

// The reads of value v by node `from` become reads by node `to`.
static void move_reads_of(uses *u, int v, int from, int to) {
  for (int r = u->start[v]; r < u->start[v + 1]; r++)
    if (u->rd[r] == from) u->rd[r] = to;
}

int bcO_fuse_scale(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  uses u;
  if ((rc = uses_build(g, &u))) return rc;
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *A = &g->nodes[i];
    if (A->op != BC_OP_ADD || !add_same(g, A)) continue;
    for (int k = 0; k < 2; k++) {
      int m = A->in[k], mi = sole_operand_def(g, &u, A, k, BC_OP_MUL);
      if (mi < 0 || (A->nin > 2 + k && A->in[2 + k] >= 0)) continue;
      const bc_node *M = &g->nodes[mi];
      const bc_shape *ms = &g->vals[m].shape;
      int64_t d = ms->rank ? ms->d[ms->rank - 1] : 1;
      int f = -1;
      for (int j = 0; j < 2 && f < 0; j++) {
        const bc_shape *vs = &g->vals[M->in[j]].shape, *ss = &g->vals[M->in[1 - j]].shape;
        int64_t ns = bc_shape_numel(ss);
        if (bc_shape_eq(vs, ms) && ss->rank == 1 && !ss->sym[0] && (ns == 1 || ns == d) &&
            !bc_shape_eq(ss, ms))
          f = j;
      }
      if (f < 0) continue;
      char wm[300], wa[300];
      describe(M, wm, sizeof wm);
      describe(A, wa, sizeof wa);
      const char *note = bc_fmt(g->ctx, "%s + %s", wm, wa);
      for (int j = A->nin; j < 4; j++) A->in[j] = -1;
      A->nin = 4;
      A->in[k] = M->in[f];
      A->in[2 + k] = M->in[1 - f];
      A->fused_from = A->fused_from ? bc_fmt(g->ctx, "%s + %s", wm, A->fused_from)
                                    : (note ? note : "Mul + Add");
      u.dead[mi] = true;
      // The Add now reads v and s (the Mul's inputs) instead of m.
      for (int j = 0; j < 2; j++) move_reads_of(&u, M->in[j], mi, i);
    }
  }
  invalidate_plan(g);
  return finish(g, &u);
}

// --- fuse-act -------------------------------------------------------------------
//
// a = Act(v) read by one Add alone (once), of operands of one shape, not a
// graph output  ->  the Add reads v and applies the activation to that
// operand itself (opact; before its scale, if fuse-scale gave it one: the
// Mul it folded multiplied the Act's output).  fuse-add-ln then carries it
// into AddLayerNorm: `x + act(f)` (and `x + g * act(f)`) next to a norm is
// one pass over the stream.
int bcO_fuse_act(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  uses u;
  if ((rc = uses_build(g, &u))) return rc;
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *A = &g->nodes[i];
    if (A->op != BC_OP_ADD || !add_same(g, A)) continue;
    for (int k = 0; k < 2; k++) {
      int a = A->in[k], ai = sole_operand_def(g, &u, A, k, BC_OP_ACT);
      if (ai < 0) continue;
      const bc_node *X = &g->nodes[ai];
      if (!bc_shape_eq(&g->vals[X->in[0]].shape, &g->vals[a].shape)) continue;
      char wx[300], wa[300];
      describe(X, wx, sizeof wx);
      describe(A, wa, sizeof wa);
      A->fused_from = A->fused_from ? bc_fmt(g->ctx, "%s + %s", wx, A->fused_from)
                                    : bc_fmt(g->ctx, "%s + %s", wx, wa);
      if (!A->fused_from) A->fused_from = "Act + Add";
      A->in[k] = X->in[0];
      A->opact[k] = (int8_t)(1 + X->unary);
      u.dead[ai] = true;
      move_reads_of(&u, X->in[0], ai, i);
    }
  }
  invalidate_plan(g);
  return finish(g, &u);
}

// --- fuse-add-ln ----------------------------------------------------------------
//
// s = Add(a, b); y = LN(s)  ->  y, s = ADD_LN(a, b), s kept only if someone
// else reads it (Pre-LN: the residual stream continues) or it is the output.
//
// The fused node takes the Add's slot, never the LN's.  That is always
// legal: its inputs are the Add's inputs (defined before the Add), the LN
// contributes only weights, and every reader of y came after the LN, hence
// after the Add.  The LN's slot would not be: a reader of s may sit between
// the Add and the LN, and s would then be defined too late.  The cost is
// that y may be born a little earlier than before, which only matters when
// other nodes separate the Add from its LN (never in the shipped wirings).
//
// An Add read by two LNs fuses with the first; the sum stays an output and
// the second LN keeps reading it (once fused the Add is no longer an ADD, so
// it cannot be claimed twice).
int bcO_fuse_add_ln(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  uses u;
  if ((rc = uses_build(g, &u))) return rc;
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *L = &g->nodes[i];
    if (!is_norm(L->op)) continue;
    int s = L->in[0], a = u.def[s];
    if (a < 0 || g->nodes[a].op != BC_OP_ADD || !add_same(g, &g->nodes[a])) continue;
    bc_node *A = &g->nodes[a];
    // The offset RMSNorm's fused kernel (bcrt_add_rmsnorm_off) takes plain
    // operands: an Add with a folded scale or activation stays unfused there.
    if (L->op == BC_OP_RMSNORM && L->offset != 0 && bcT_add_extra(A)) continue;
    bool keep = nreaders(&u, s) > 1 || is_graph_output(g, s);
    char wa[300], wl[300];
    describe(A, wa, sizeof wa);
    describe(L, wl, sizeof wl);
    // A scaled or activated Add already names its Mul / Act parts.
    const char *note = bc_fmt(g->ctx, "%s + %s", A->fused_from ? A->fused_from : wa, wl);
    A->op = BC_OP_ADD_LN;
    A->nout = keep ? 2 : 1;
    A->out[0] = L->out[0];
    A->out[1] = keep ? s : -1;
    A->eps = L->eps;
    A->rms = L->op == BC_OP_RMSNORM;
    A->offset = L->offset;
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) A->param[k] = L->param[k];
    A->fused_from = note ? note : "Add + LayerNorm";
    u.def[L->out[0]] = a;
    u.dead[i] = true;
  }
  invalidate_plan(g);
  return finish(g, &u);
}

// --- inplace --------------------------------------------------------------------
//
// An output may take over the storage of an input that dies at this node
// (this node is its last reader), has the same shape, and lives in the
// arena: not the graph input (the caller's const x) and not the graph output
// (the caller's y, which must survive).  Which outputs may overwrite which
// inputs is a property of the kernel, as an input-slot mask per output in
// the op's row (its file under ops/ says why; the shape test above keeps a
// broadcast operand such as Mul's small one out).  The first ops:
//
//   ADD          y over a or b: bcrt_add is elementwise.
//   LAYERNORM    y over x: a row's statistics are taken before it is written.
//   ADD_LN       y over a or b, and the sum over a or b, but never both
//                outputs over the same input (they are different values);
//                bcrt_add_layernorm reads a[j], b[j] before writing sum[j]
//                and normalises a row only after its sum is complete.
//   DUAL_ADD_LN  xd' over xd, xa' over xa; never over u, which both streams
//                read for the whole row.
//   ATTENTION, FFN: nothing.  Their GEMMs read every input row while output
//                rows are being written.
//
// An input that appears in several slots is eligible only if all of them
// are allowed (Add(x, x) may overwrite x; DUAL_ADD_LN with xd == u may not).
static unsigned inplace_slots(bc_op op, int k) {
  const bc_op_def *d = bcT_def(op);
  return d && k >= 0 && k < BC_MAX_NODE_OUT ? d->inplace[k] : 0u;
}

static unsigned slots_of(const bc_node *n, int v) {
  unsigned m = 0;
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] == v) m |= 1u << k;
  return m;
}

int bcO_inplace(bc_graph *g) {
  int rc = bcI_verify(g);
  if (rc) return rc;
  int *last = malloc((size_t)(g->nvals ? g->nvals : 1) * sizeof(int));
  if (!last) return oom(g);
  for (int v = 0; v < g->nvals; v++) {
    last[v] = -1;
    g->vals[v].alias = -1;  // recomputed from scratch, so the pass is idempotent
  }
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] >= 0) last[g->nodes[i].in[k]] = i;
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *n = &g->nodes[i];
    unsigned taken = 0;  // input slots already given to an output of this node
    for (int k = 0; k < n->nout; k++) {
      int o = n->out[k];
      unsigned allow = inplace_slots(n->op, k);
      if (o < 0 || !allow || is_graph_output(g, o)) continue;
      for (int j = 0; j < n->nin; j++) {
        int v = n->in[j];
        unsigned m = slots_of(n, v);
        if (!(allow >> j & 1u) || (m & ~allow) || (m & taken)) continue;
        if (v < 0 || is_graph_output(g, v) || last[v] != i) continue;
        if (g->vals[v].kind != BC_VAL_TEMP || !bc_shape_eq(&g->vals[v].shape, &g->vals[o].shape))
          continue;
        g->vals[o].alias = v;
        taken |= m;
        break;
      }
    }
  }
  free(last);
  g->planned = false;
  return bcI_verify(g);
}

// --- the pipeline -----------------------------------------------------------------

static const bc_pass pipeline[] = {
    {"dce", "remove nodes whose results never reach the output", bcO_dce},
    {"fuse-dual", "ResiDual: xd += u and xa = LN(xa + u) -> one DualAddLayerNorm", bcO_fuse_dual},
    {"fuse-scale", "Mul by a [D] or [1] value feeding only an Add -> the Add's operand scale",
     bcO_fuse_scale},
    {"fuse-act", "Act feeding only an Add -> the Add's operand activation", bcO_fuse_act},
    {"fuse-add-ln", "Add feeding a LayerNorm -> one AddLayerNorm (sum kept if read)",
     bcO_fuse_add_ln},
    {"inplace", "let outputs reuse the storage of inputs that die at the node", bcO_inplace},
    {"plan", "live ranges, scratch buffers and arena offsets", bcM_plan},
};

const bc_pass *bcO_passes(int *n) {
  *n = (int)(sizeof pipeline / sizeof pipeline[0]);
  return pipeline;
}

const bc_pass *bcO_find(const char *name) {
  int n;
  const bc_pass *p = bcO_passes(&n);
  for (int i = 0; i < n; i++)
    if (name && strcmp(p[i].name, name) == 0) return &p[i];
  return NULL;
}

int bcO_run_until(bc_graph *g, const char *last) {
  if (last && !bcO_find(last))
    return bc_error(g->ctx, BC_EUSAGE,
                    "error: unknown pass '%s' (passes: dce, fuse-dual, fuse-scale, fuse-act, fuse-add-ln, inplace, plan)",
                    last);
  int n;
  const bc_pass *p = bcO_passes(&n);
  for (int i = 0; i < n; i++) {
    int rc = p[i].run(g);
    if (rc) return rc;
    if (last && strcmp(p[i].name, last) == 0) break;
  }
  return BC_OK;
}
