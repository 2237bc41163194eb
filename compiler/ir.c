// ir.c — the graph IR: construction, invariants, copying and the text dump.
//
// A bc_graph is a flat straight-line program. Values are SSA (each written
// by exactly one node, or the input), nodes are stored in execution order,
// and parameters are named the way PyTorch's state_dict names them. The
// parser builds it, the passes rewrite it, the interpreter and the emitter
// read it. `blockc dump` prints it with bcI_dump after any pass, so that
// text form is kept stable and diff-friendly.
#include "ops.h"

#include <stdlib.h>
#include <string.h>

static bool grow(bc_ctx *ctx, void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return true;
  int ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  void *p = bc_alloc(ctx, (size_t)ncap * elem);
  if (!p) return false;
  if (*arr) memcpy(p, *arr, (size_t)*cap * elem);
  *arr = p;  // old block stays in the arena until the context is freed
  *cap = ncap;
  return true;
}

bc_graph *bcI_new(bc_ctx *ctx) {
  bc_graph *g = bc_alloc(ctx, sizeof *g);
  if (!g) return NULL;
  g->ctx = ctx;
  g->model = "model";
  g->path = "";
  g->input = -1;
  g->output = -1;
  return g;
}

int bcI_add_value(bc_graph *g, const char *name, bc_shape shape, bc_valkind kind) {
  if (!grow(g->ctx, (void **)&g->vals, &g->capvals, g->nvals + 1, sizeof(bc_value))) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  bc_value *v = &g->vals[g->nvals];
  memset(v, 0, sizeof *v);
  v->id = g->nvals;
  v->name = name ? name : "";
  v->shape = shape;
  v->kind = kind;
  v->def = -1;
  v->first_use = v->last_use = -1;
  v->offset = -1;
  v->alias = -1;
  return g->nvals++;
}

int bcI_add_node(bc_graph *g, bc_op op, bc_loc loc) {
  int limit = g->ctx->max_nodes > 0 && g->ctx->max_nodes < BC_MAX_NODES ? g->ctx->max_nodes
                                                                         : BC_MAX_NODES;
  if (g->nnodes >= limit) {
    bc_error_at(g->ctx, loc, "graph has more than %d nodes (the limit)", limit);
    return -1;
  }
  if (!grow(g->ctx, (void **)&g->nodes, &g->capnodes, g->nnodes + 1, sizeof(bc_node))) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  bc_node *n = &g->nodes[g->nnodes];
  memset(n, 0, sizeof *n);
  n->id = g->nnodes;
  n->key_node = g->nnodes;
  n->op = op;
  for (int i = 0; i < BC_MAX_NODE_IN; i++) n->in[i] = -1;
  for (int i = 0; i < BC_MAX_NODE_OUT; i++) n->out[i] = -1;
  for (int i = 0; i < BC_MAX_NODE_PARAMS; i++) n->param[i] = -1;
  for (int i = 0; i < BC_MAX_NODE_SCRATCH; i++) n->scratch[i] = -1;
  const bc_op_def *d = bcT_def(op);
  if (d) d->defaults(n);
  n->loc = loc;
  return g->nnodes++;
}

// Parameter names are looked up once per use while parsing, so a linear
// scan would make long stacks quadratic: an FNV-1a hash index keeps it flat.
static uint64_t name_hash(const char *s) { return bc_fnv1a(BC_FNV_OFFSET, s, strlen(s)); }

int bcI_find_param(const bc_graph *g, const char *name) {
  if (!g->param_index_cap) {  // no index (e.g. a clone): scan
    for (int i = 0; i < g->nparams; i++)
      if (strcmp(g->params[i].name, name) == 0) return i;
    return -1;
  }
  size_t mask = (size_t)g->param_index_cap - 1;
  for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    int id = g->param_index[i] - 1;
    if (id < 0) return -1;
    if (strcmp(g->params[id].name, name) == 0) return id;
  }
}

static void index_insert(bc_graph *g, int id) {
  size_t mask = (size_t)g->param_index_cap - 1;
  size_t i = name_hash(g->params[id].name) & mask;
  while (g->param_index[i]) i = (i + 1) & mask;
  g->param_index[i] = id + 1;
}

// Keeps the index at most half full; rebuilt from scratch when it grows.
static bool index_reserve(bc_graph *g, int n) {
  if (g->param_index_cap && 2 * n <= g->param_index_cap) return true;
  int cap = 64;
  while (cap < 2 * n) cap *= 2;
  int *idx = bc_alloc(g->ctx, (size_t)cap * sizeof *idx);
  if (!idx) return false;
  g->param_index = idx;
  g->param_index_cap = cap;
  for (int i = 0; i < g->nparams; i++) index_insert(g, i);
  return true;
}

int bcI_add_param(bc_graph *g, const char *name, bc_shape shape, bc_loc loc) {
  int id = bcI_find_param(g, name);
  if (id >= 0) {
    // The same name used twice is weight tying: legal if the shapes agree.
    bc_param *p = &g->params[id];
    if (!bc_shape_eq(&p->shape, &shape)) {
      char a[96], b[96];
      bc_error_at(g->ctx, loc, "parameter '%s' is used here with shape %s but earlier with shape %s",
                  name, bc_shape_str(&shape, a, sizeof a), bc_shape_str(&p->shape, b, sizeof b));
      bc_note_at(g->ctx, p->loc, "first used here");
      return -1;
    }
    return id;
  }
  if (strlen(name) > BC_MAX_PARAM_NAME) {
    bc_error_at(g->ctx, loc, "parameter name is %zu bytes long (limit %d)", strlen(name),
                BC_MAX_PARAM_NAME);
    return -1;
  }
  if (!grow(g->ctx, (void **)&g->params, &g->capparams, g->nparams + 1, sizeof(bc_param))) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  if (!index_reserve(g, g->nparams + 1)) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  bc_param *p = &g->params[g->nparams];
  p->name = bc_strdup(g->ctx, name);
  p->shape = shape;
  p->loc = loc;
  if (!p->name) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  index_insert(g, g->nparams);
  return g->nparams++;
}

// The table of ops lives in compiler/ops/ (ops.h): one row per op, read by
// every stage.
const bc_op_info *bcI_op_info(bc_op op) {
  const bc_op_def *d = bcT_def(op);
  return d ? &d->info : NULL;
}

const char *bcI_op_name(bc_op op) {
  const bc_op_def *d = bcT_def(op);
  return d ? d->info.name : "?";
}

static bool push_id(bc_graph *g, int **arr, int n, int v) {
  int *a = bc_alloc(g->ctx, (size_t)(n + 1) * sizeof *a);
  if (!a) return false;
  if (n) memcpy(a, *arr, (size_t)n * sizeof *a);
  a[n] = v;
  *arr = a;
  return true;
}

int bcI_add_input(bc_graph *g, int v) {
  if (!push_id(g, &g->inputs, g->ninputs, v)) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  if (g->ninputs++ == 0) g->input = v;
  return v;
}

int bcI_add_output(bc_graph *g, int v, const char *name) {
  const char **names = bc_alloc(g->ctx, (size_t)(g->noutputs + 1) * sizeof *names);
  if (!names || !push_id(g, &g->outputs, g->noutputs, v)) {
    bc_error(g->ctx, BC_ENOMEM, "error: out of memory");
    return -1;
  }
  if (g->noutputs) memcpy(names, g->output_names, (size_t)g->noutputs * sizeof *names);
  names[g->noutputs] = name ? name : "";
  g->output_names = names;
  if (g->noutputs++ == 0) g->output = v;
  g->vals[v].is_output = true;
  return v;
}

bool bcI_is_output(const bc_graph *g, int v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v) return true;
  return false;
}

bool bcI_is_lengths(const bc_graph *g, int v) {
  return v >= 0 && v < g->nvals && g->vals[v].type == BC_VT_I32 && !g->vals[v].tokens;
}

bool bcI_is_tokens(const bc_graph *g, int v) {
  return v >= 0 && v < g->nvals && g->vals[v].type == BC_VT_I32 && g->vals[v].tokens;
}

int64_t bcI_tokens_vocab(const bc_graph *g, int v) {
  int64_t V = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    const bc_op_def *d = bcT_def(n->op);
    if (d && d->tokens && n->nin > 0 && n->in[0] == v && (V == 0 || n->vocab < V)) V = n->vocab;
    if (d && d->targets && n->nin > 1 && n->in[1] == v && (V == 0 || n->loss_vocab < V))
      V = n->loss_vocab;
  }
  return V;
}

bool bcI_tokens_ignore(const bc_graph *g, int v, int64_t *ignore_index) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    const bc_op_def *d = bcT_def(n->op);
    if (d && d->targets && n->nin > 1 && n->in[1] == v) {
      if (ignore_index) *ignore_index = n->ignore_index;
      return true;
    }
  }
  return false;
}

bool bcI_in_caller_memory(const bc_graph *g, int v) {
  const bc_value *val = &g->vals[v];
  return val->kind == BC_VAL_INPUT || v == g->output || val->is_output || bcI_is_output(g, v);
}

bool bcI_as_btd(const bc_shape *s, bc_btd *v) {
  if (s->rank < 1 || s->rank > 3) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->d[i] < 1 || s->d[i] > BC_MAX_DIM) return false;
  v->b = s->rank == 3 ? s->d[0] : 1;
  v->t = s->rank >= 2 ? s->d[s->rank - 2] : 1;
  v->d = s->d[s->rank - 1];
  return v->b * v->t * v->d <= BC_MAX_ELEMS;
}

bc_shape bcI_shape_at(const bc_graph *g, const bc_shape *s, const long *rt) {
  bc_shape r = *s;
  for (int i = 0; i < s->rank; i++)
    if (s->sym[i] > 0 && s->sym[i] <= g->ndims && rt) {
      int k = g->dims[s->sym[i] - 1].rt;
      if (k >= 0) r.d[i] = rt[k], r.sym[i] = 0;
    }
  return r;
}

bool bc_act_gated(bc_act a) {
  return a == BC_ACT_SWIGLU || a == BC_ACT_GEGLU || a == BC_ACT_GEGLU_TANH;
}

const char *bcI_unary_name(bc_unary u) {
  static const char *names[BC_UN_COUNT] = {"relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"};
  return (u >= 0 && u < BC_UN_COUNT) ? names[u] : "?";
}

const char *bcI_act_name(bc_act act) {
  static const char *names[BC_ACT_COUNT] = {"relu", "gelu", "gelu_tanh", "swiglu", "geglu",
                                                   "geglu_tanh"};
  return (act >= 0 && act < BC_ACT_COUNT) ? names[act] : "?";
}

int64_t bcI_param_count(const bc_graph *g) {
  int64_t n = 0;
  for (int i = 0; i < g->nparams; i++) n += bc_shape_numel(&g->params[i].shape);
  return n;
}

// Hand-built graphs (tests) may set only `input` / `output`: the lists are
// derived from them then.  Afterwards the two always name the lists' heads.
static int sync_ends(bc_graph *g) {
  if (g->ninputs == 0 && g->input >= 0 && g->input < g->nvals && bcI_add_input(g, g->input) < 0)
    return BC_ENOMEM;
  if (g->noutputs == 0 && g->output >= 0 && g->output < g->nvals &&
      bcI_add_output(g, g->output, g->vals[g->output].name) < 0)
    return BC_ENOMEM;
  g->input = g->ninputs ? g->inputs[0] : -1;
  g->output = g->noutputs ? g->outputs[0] : -1;
  return BC_OK;
}

static bool is_input(const bc_graph *g, int v) { return v >= 0 && v < g->nvals && g->vals[v].kind == BC_VAL_INPUT; }

int bcI_verify(bc_graph *g) {
  bc_ctx *ctx = g->ctx;
  if (sync_ends(g)) return BC_ENOMEM;
  for (int i = 0; i < g->nvals; i++) {
    if (g->vals[i].kind != BC_VAL_SCRATCH) g->vals[i].def = -1;
  }
  if (g->ninputs < 1) return bc_error(ctx, BC_EINTERNAL, "internal error: graph has no valid input");
  for (int i = 0; i < g->ninputs; i++)
    if (!is_input(g, g->inputs[i]))
      return bc_error(ctx, BC_EINTERNAL, "internal error: graph input %d is %%%d", i, g->inputs[i]);
  if (g->noutputs < 1) return bc_error(ctx, BC_EINTERNAL, "internal error: graph has no valid output");
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] < 0 || g->outputs[i] >= g->nvals)
      return bc_error(ctx, BC_EINTERNAL, "internal error: graph output %d is %%%d", i, g->outputs[i]);
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *n = &g->nodes[i];
    if (n->id != i)
      return bc_error(ctx, BC_EINTERNAL, "internal error: node %d has id %d", i, n->id);
    const bc_op_info *info = bcI_op_info(n->op);
    if (!info || n->nin < info->nin_min || n->nin > info->nin_max || n->nout < info->nout_min ||
        n->nout > info->nout_max || (info->nin_min > 0 && n->in[0] < 0))
      return bc_error(ctx, BC_EINTERNAL, "internal error: node %d (%s) has %d inputs, %d outputs",
                      i, bcI_op_name(n->op), n->nin, n->nout);
    if (n->op == BC_OP_ATTENTION && n->kv_heads == 0) n->kv_heads = n->heads;  // hand-built
    for (int k = 0; k < n->nin; k++) {
      int v = n->in[k];
      if (v < 0 && k >= info->nin_min) continue;  // an absent optional input
      if (v < 0 || v >= g->nvals)
        return bc_error(ctx, BC_EINTERNAL, "internal error: node %d input %d is %d", i, k, v);
      if (!is_input(g, v) && g->vals[v].def < 0)
        return bc_error(ctx, BC_EINTERNAL,
                        "internal error: node %d reads %%%d before it is defined", i, v);
    }
    for (int k = 0; k < n->nout; k++) {
      int v = n->out[k];
      if (v < 0) continue;
      if (v >= g->nvals || is_input(g, v))
        return bc_error(ctx, BC_EINTERNAL, "internal error: node %d output %d is %d", i, k, v);
      if (g->vals[v].def >= 0)
        return bc_error(ctx, BC_EINTERNAL, "internal error: %%%d defined twice (nodes %d, %d)",
                        v, g->vals[v].def, i);
      g->vals[v].def = i;
    }
  }
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    if (!is_input(g, v) && g->vals[v].def < 0)
      return bc_error(ctx, BC_EINTERNAL, "internal error: output %%%d is never defined", v);
  }
  return BC_OK;
}

bc_graph *bcI_clone(const bc_graph *g) {
  bc_ctx *ctx = g->ctx;
  bc_graph *c = bc_alloc(ctx, sizeof *c);
  if (!c) return NULL;
  *c = *g;
  c->vals = bc_alloc(ctx, (size_t)(g->capvals ? g->capvals : 1) * sizeof(bc_value));
  c->nodes = bc_alloc(ctx, (size_t)(g->capnodes ? g->capnodes : 1) * sizeof(bc_node));
  c->params = bc_alloc(ctx, (size_t)(g->capparams ? g->capparams : 1) * sizeof(bc_param));
  c->dims = bc_alloc(ctx, (size_t)(g->ndims ? g->ndims : 1) * sizeof(bc_dim));
  if (!c->vals || !c->nodes || !c->params || !c->dims) return NULL;
  if (g->nvals) memcpy(c->vals, g->vals, (size_t)g->nvals * sizeof(bc_value));
  if (g->nnodes) memcpy(c->nodes, g->nodes, (size_t)g->nnodes * sizeof(bc_node));
  if (g->nparams) memcpy(c->params, g->params, (size_t)g->nparams * sizeof(bc_param));
  if (g->ndims) memcpy(c->dims, g->dims, (size_t)g->ndims * sizeof(bc_dim));
  c->param_index = NULL;  // clones look parameters up by scanning
  c->param_index_cap = 0;
  if (!g->capvals) c->capvals = 1;
  if (!g->capnodes) c->capnodes = 1;
  if (!g->capparams) c->capparams = 1;
  return c;
}

// --- dump -------------------------------------------------------------------
//
//   model residual  (graphs/residual.blk)
//   dims B=1 T=128 D=512 H=8 F=2048 N=6
//   params 38 tensors, 18914304 scalars
//   input  %0 x [1, 128, 512]
//   %1 a [1, 128, 512] = Attention(%0) heads=8 causal=false
//       params layers.0.self_attn.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias}
//       init layers.0.self_attn.in_proj_weight[v]=xavier_normal(0.5)   (init= overrides only)
//       ; residual.blk:13:10
//   output %40
//
// Values print as %id followed by their source name; the trailing comment
// gives the graph line that produced the node.

static void dump_value(const bc_graph *g, int v, FILE *out) {
  const bc_value *val = &g->vals[v];
  char buf[96];
  fprintf(out, "%%%d", v);
  if (val->name && val->name[0]) fprintf(out, " %s", val->name);
  fprintf(out, " %s", bc_shape_str(&val->shape, buf, sizeof buf));
  if (val->offset >= 0 && g->planned) fprintf(out, " @%lld", (long long)val->offset);
  if (val->alias >= 0) fprintf(out, " (in place of %%%d)", val->alias);
}

static void dump_attrs(const bc_node *n, FILE *out) {
  bc_sbuf b = {0};
  bcT_attrs(n, BC_ATTRS_DUMP, &b);
  if (b.len) fputs(b.p, out);
  free(b.p);
}

// "    init fc.weight=normal(0.02)": the graph file's overrides of n's
// parameters (every node that reads a parameter shows its override).
// A block of a packed matrix prints as "sa.in_proj_weight[v]=...".
static void dump_inits(const bc_graph *g, const bc_node *n, FILE *out) {
  bool any = false;
  char buf[64];
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    const bc_param *p = n->param[k] >= 0 ? &g->params[n->param[k]] : NULL;
    if (p && p->init.kind != BC_INIT_NONE) {
      fprintf(out, any ? ", %s=%s" : "    init %s=%s", p->name, bcW_init_str(&p->init, buf, sizeof buf));
      any = true;
    }
    for (int j = 0; p && j < 3; j++) {
      if (p->part[j].kind == BC_INIT_NONE) continue;
      fprintf(out, any ? ", %s[%c]=%s" : "    init %s[%c]=%s", p->name, "qkv"[j],
              bcW_init_str(&p->part[j], buf, sizeof buf));
      any = true;
    }
  }
  if (any) fprintf(out, "\n");
}

void bcI_dump(const bc_graph *g, FILE *out) {
  fprintf(out, "model %s  (%s)\n", g->model, g->path);
  fprintf(out, "dims");
  for (int i = 0; i < g->ndims; i++)
    fprintf(out, " %s=%lld%s", g->dims[i].name, (long long)g->dims[i].value,
            g->dims[i].overridden ? "*" : "");
  fprintf(out, "\nparams %d tensors, %lld scalars\n", g->nparams, (long long)bcI_param_count(g));
  for (int i = 0; i < g->ninputs; i++) {
    fprintf(out, "input  ");
    dump_value(g, g->inputs[i], out);
    fprintf(out, "%s\n", bcI_is_tokens(g, g->inputs[i])    ? " tokens"
                         : g->vals[g->inputs[i]].type == BC_VT_I32 ? " lengths"
                                                                   : "");
  }
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    fprintf(out, "n%d: ", i);
    for (int k = 0; k < n->nout; k++) {
      if (k) fprintf(out, ", ");
      if (n->out[k] < 0) fprintf(out, "_");
      else dump_value(g, n->out[k], out);
    }
    fprintf(out, " = %s(", bcI_op_name(n->op));
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) fprintf(out, k ? ", %%%d" : "%%%d", n->in[k]);
      else fprintf(out, ", _");
    fprintf(out, ")");
    dump_attrs(n, out);
    fprintf(out, "\n");
    bool any = false;
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      if (n->param[k] < 0) continue;
      fprintf(out, any ? ", %s" : "    params %s", g->params[n->param[k]].name);
      any = true;
    }
    if (any) fprintf(out, "\n");
    dump_inits(g, n, out);
    for (int k = 0; k < n->nscratch; k++) {
      fprintf(out, k ? ", " : "    scratch ");
      dump_value(g, n->scratch[k], out);
      if (k == n->nscratch - 1) fprintf(out, "\n");
    }
    if (n->loc.src)
      fprintf(out, "    ; %s:%d:%d%s%s\n", n->loc.src->path, n->loc.line, n->loc.col,
              n->fused_from ? "  fused: " : "", n->fused_from ? n->fused_from : "");
  }
  for (int i = 0; i < g->noutputs; i++) fprintf(out, "output %%%d\n", g->outputs[i]);
  if (g->planned)
    fprintf(out, "arena %lld floats (lower bound %lld)\n", (long long)g->arena_floats,
            (long long)g->arena_lower_bound);
}

bool bcI_has_dropout(const bc_graph *g) {
  for (int i = 0; i < g->nnodes; i++)  // 0 on every op without a dropout
    if (g->nodes[i].dropout > 0) return true;
  return false;
}
