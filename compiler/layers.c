// layers.c — finding the run of identical layers of a graph.
//
// The parser unrolls `for i in 0..N as layers.{i} { ... }`, so a Transformer
// stack reaches the back end as N copies of the same node sequence.  The
// emitter turns a run of copies that are identical up to the parameters
// they read into one `<model>_layer()` function called in a loop (as
// llm.c's layer loop), and the planner lays the run out periodically so that
// every trip addresses the same buffers.  Both ask bcI_find_layers.
//
// What "layer" means:
//   * A parameter belongs to layer i of a stack when its dotted name has an
//     all-digits component ("layers.7.linear1.weight": 7, stack "layers",
//     member "linear1.weight"); the stack is that of the first such
//     parameter (cli/analyze.c reports per layer with the same rule).
//   * The period is the node distance between the first nodes of two
//     consecutive layers; the run starts at (or up to a few nodes before,
//     when a pass fused nodes across the boundary) a layer's first node.
//   * Trips t and t+1 of a run are identical when node j of each has the
//     same op, attributes, output and scratch shapes, parameter shapes, reads
//     parameter m of its own layer (param ids param0 + t*nparams + m, named
//     <stack>.<index>.<member> with the same member), and each input is a
//     value of its own trip or of the trip before (the same node and slot one
//     period earlier), or the same value defined before the run.  Trip 0 may
//     read values from before the run where trip 1 reads trip 0's values:
//     those are the layer function's "carried-in" arguments.  Every value a
//     trip defines lives in the arena, except that the last trip's outputs
//     (not scratch) may be graph outputs where the trip before has arena
//     values: the stream of a Post-LN stack, whose last layer writes y.
//     Those are the layer function's "carried-out" arguments (a pointer to
//     the arena buffer on every trip but the last, to the output on it).
#include "ops.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int bcI_layer_of_name(const char *name, size_t *stack_len) {
  const char *c = name;
  while (*c) {
    const char *e = strchr(c, '.');
    size_t len = e ? (size_t)(e - c) : strlen(c);
    bool digits = len > 0 && len <= 6 && c > name;
    for (size_t k = 0; digits && k < len; k++) digits = isdigit((unsigned char)c[k]);
    if (digits) {
      *stack_len = (size_t)(c - name - 1);
      return atoi(c);
    }
    if (!e) break;
    c = e + 1;
  }
  return -1;
}

const char *bcI_layer_member(const char *name, size_t stack_len) {
  const char *p = name + stack_len + 1;
  while (isdigit((unsigned char)*p)) p++;
  return *p == '.' ? p + 1 : p;
}

// --- identity of two nodes ---------------------------------------------------

static bool attrs_eq(const bc_node *a, const bc_node *b) {
  const bc_op_def *d = bcT_def(a->op);
  return a->op == b->op && a->nin == b->nin && a->nout == b->nout && a->nscratch == b->nscratch &&
         a->in_out == b->in_out && d && d->same_attrs(a, b);
}

// Output slot of value v in its defining node, -1.
static int out_slot(const bc_graph *g, int v) {
  int d = g->vals[v].def;
  if (d < 0) return -1;
  for (int k = 0; k < g->nodes[d].nout; k++)
    if (g->nodes[d].out[k] == v) return k;
  return -1;
}

// Values written by a and b (outputs, then scratch) correspond.  With
// `last` (b is of the run's last trip), b's outputs may be graph outputs.
static bool defs_eq(const bc_graph *g, const bc_node *a, const bc_node *b, bool last) {
  for (int k = 0; k < a->nout + a->nscratch; k++) {
    int u = k < a->nout ? a->out[k] : a->scratch[k - a->nout];
    int w = k < b->nout ? b->out[k] : b->scratch[k - b->nout];
    if ((u < 0) != (w < 0)) return false;
    if (u < 0) continue;
    bool w_ok = !bcI_in_caller_memory(g, w) || (last && k < b->nout);
    if (bcI_in_caller_memory(g, u) || !w_ok || g->vals[u].type != g->vals[w].type ||
        !bc_shape_eq(&g->vals[u].shape, &g->vals[w].shape))
      return false;
  }
  return true;
}

typedef struct {
  const bc_graph *g;
  int s, p, q, param0;   // run start, period, params per trip, trip 0's first param
  int *carry0;           // per value defined in trip 0: what trip 0 read in its place, -1
} finder;

// Input k of node a (trip t) against input k of node b = a + p (trip t+1).
static bool input_eq(finder *F, int t, const bc_node *a, const bc_node *b, int k) {
  const bc_graph *g = F->g;
  int u = a->in[k], w = b->in[k];
  if ((u < 0) != (w < 0)) return false;
  if (u < 0) return true;
  int du = g->vals[u].def, dw = g->vals[w].def;
  int trip_b = F->s + (t + 1) * F->p;  // first node of b's trip
  if (t == 0 && dw >= F->s && dw < trip_b) {
    // Trip 1 reads trip 0's value where trip 0 read one from before the
    // run: a carried-in argument of the layer function, always the same one.
    if (du >= F->s || (F->carry0[w] >= 0 && F->carry0[w] != u) ||
        g->vals[u].type != g->vals[w].type || !bc_shape_eq(&g->vals[u].shape, &g->vals[w].shape))
      return false;
    F->carry0[w] = u;
    return true;
  }
  if (dw >= trip_b - F->p)  // w is of b's trip or the one before: u one period earlier
    return du >= F->s && dw == du + F->p && out_slot(g, u) == out_slot(g, w) && out_slot(g, u) >= 0;
  return u == w && du < F->s;  // the same value from before the run
}

static bool params_eq(const finder *F, const bc_node *a, const bc_node *b) {
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    int u = a->param[k], w = b->param[k];
    if ((u < 0) != (w < 0)) return false;
    if (u >= 0 && w != u + F->q) return false;
  }
  return true;
}

// Trip t and trip t+1 of the run at F->s are identical (`last`: trip t+1
// would be the run's last, which may write graph outputs).
static bool trips_eq(finder *F, int t, bool last) {
  const bc_graph *g = F->g;
  int a0 = F->s + t * F->p;
  if (a0 + 2 * F->p > g->nnodes) return false;
  for (int j = 0; j < F->p; j++) {
    const bc_node *a = &g->nodes[a0 + j], *b = &g->nodes[a0 + F->p + j];
    if (!attrs_eq(a, b) || !defs_eq(g, a, b, last) || !params_eq(F, a, b)) return false;
    for (int k = 0; k < a->nin; k++)
      if (!input_eq(F, t, a, b, k)) return false;
    // A trip's parameters are its own layer's block.
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int u = a->param[k];
      if (u >= 0 && (u < F->param0 + t * F->q || u >= F->param0 + (t + 1) * F->q)) return false;
    }
  }
  return true;
}

// Parameters [param0 + t*q, param0 + (t+1)*q) are layer index0 + t of the
// stack: named <stack>.<index0 + t>.<member> with trip 0's members and shapes.
static bool block_like(const bc_graph *g, int param0, int q, size_t slen, int index0, int t) {
  if (param0 + t * q < 0 || param0 + (t + 1) * q > g->nparams || index0 + t < 0) return false;
  for (int m = 0; m < q; m++) {
    const bc_param *a = &g->params[param0 + m], *b = &g->params[param0 + t * q + m];
    size_t sl;
    if (bcI_layer_of_name(b->name, &sl) != index0 + t || sl != slen ||
        strncmp(a->name, b->name, slen) ||
        strcmp(bcI_layer_member(a->name, slen), bcI_layer_member(b->name, slen)) ||
        !bc_shape_eq(&a->shape, &b->shape))
      return false;
  }
  return true;
}

// How many of the first `count` blocks from param0 are layers alike.
static int params_periodic(const bc_graph *g, int param0, int q, int count, size_t slen,
                           int index0) {
  int t = 0;
  while (t < count && block_like(g, param0, q, slen, index0, t)) t++;
  return t;
}

bool bcI_layer_params_at(const bc_graph *g, int t) {
  const bc_layers *L = &g->layers;
  return L->count >= 2 && L->stack &&
         block_like(g, L->param0, L->nparams, strlen(L->stack), L->index0, t);
}

// Trips of the run starting at s with period p (1 when trip 0 matches nothing).
static int run_length(finder *F, size_t slen, bc_layers *L) {
  const bc_graph *g = F->g;
  for (int v = 0; v < g->nvals; v++) F->carry0[v] = -1;
  // Parameters of trip 0 and trip 1 give param0 and the block size q.
  int lo0 = -1, lo1 = -1;
  for (int j = 0; j < F->p && F->s + F->p + j < g->nnodes; j++)
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int u = g->nodes[F->s + j].param[k], w = g->nodes[F->s + F->p + j].param[k];
      if (u >= 0 && (lo0 < 0 || u < lo0)) lo0 = u;
      if (w >= 0 && (lo1 < 0 || w < lo1)) lo1 = w;
    }
  if (lo0 < 0 || lo1 <= lo0) return 1;
  F->param0 = lo0;
  F->q = lo1 - lo0;
  size_t sl;
  int index0 = bcI_layer_of_name(g->params[lo0].name, &sl);
  if (index0 < 0 || sl != slen) return 1;
  int count = 1;
  while (trips_eq(F, count - 1, false)) count++;
  if (trips_eq(F, count - 1, true)) count++;  // a last trip that writes graph outputs
  count = params_periodic(g, F->param0, F->q, count, slen, index0);
  L->index0 = index0;
  return count;
}

int bcI_find_layers(const bc_graph *g, bc_layers *L) {
  memset(L, 0, sizeof *L);
  // The stack and the first node of each of its first layers.
  enum { NFIRST = 4 };
  int first[NFIRST];
  size_t slen = 0;
  const char *stack = NULL;
  for (int i = 0; i < NFIRST; i++) first[i] = -1;
  int idx0 = -1;
  for (int j = 0; j < g->nnodes; j++)
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int p = g->nodes[j].param[k];
      size_t sl;
      int i = p >= 0 ? bcI_layer_of_name(g->params[p].name, &sl) : -1;
      if (i < 0) continue;
      if (!stack) {
        stack = g->params[p].name;
        slen = sl;
        idx0 = i;
      }
      if (sl != slen || strncmp(g->params[p].name, stack, slen) || i < idx0 || i - idx0 >= NFIRST)
        continue;
      if (first[i - idx0] < 0) first[i - idx0] = j;
    }
  if (!stack) return BC_OK;
  finder F = {.g = g};
  F.carry0 = malloc((size_t)(g->nvals ? g->nvals : 1) * sizeof(int));
  if (!F.carry0) return bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
  bc_layers best = {0};
  for (int i = 0; i + 1 < NFIRST; i++) {
    if (first[i] < 0 || first[i + 1] <= first[i]) continue;
    int p = first[i + 1] - first[i];
    for (int d = 0; d < p && d <= 4; d++) {
      if (first[i] - d < 0) continue;
      F.s = first[i] - d;
      F.p = p;
      bc_layers cand = {0};
      int n = run_length(&F, slen, &cand);
      if (n >= 2 && n > best.count) {
        best = (bc_layers){.first = F.s, .period = p, .count = n, .param0 = F.param0,
                           .nparams = F.q, .index0 = cand.index0};
      }
    }
  }
  free(F.carry0);
  if (best.count >= 2) {
    best.stack = bc_strndup(g->ctx, stack, slen);
    if (!best.stack) return bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    *L = best;
  }
  return BC_OK;
}

int bcI_layer_value(const bc_graph *g, int t, int j, int k) {
  const bc_layers *L = &g->layers;
  if (t < 0 || t >= L->count || j < 0 || j >= L->period) return -1;
  const bc_node *n = &g->nodes[L->first + t * L->period + j];
  if (k < 0 || k >= n->nout + n->nscratch) return -1;
  return k < n->nout ? n->out[k] : n->scratch[k - n->nout];
}

int bcI_layer_carried_to(const bc_graph *g, int v) {
  const bc_layers *L = &g->layers;
  if (L->count < 2 || v < 0 || v >= g->nvals || g->vals[v].def >= L->first) return -1;
  for (int j = 0; j < L->period; j++) {
    const bc_node *a = &g->nodes[L->first + j], *b = &g->nodes[L->first + L->period + j];
    for (int k = 0; k < a->nin; k++) {
      int c = b->in[k];
      if (a->in[k] == v && c >= 0 && c != v && g->vals[c].def >= L->first) return c;
    }
  }
  return -1;
}

int bcI_layer_carried_from(const bc_graph *g, int v) {
  const bc_layers *L = &g->layers;
  for (int j = 0; L->count >= 2 && j < L->period; j++) {
    const bc_node *a = &g->nodes[L->first + j], *b = &g->nodes[L->first + L->period + j];
    for (int k = 0; k < b->nin; k++)
      if (b->in[k] == v) return a->in[k];
  }
  return -1;
}
