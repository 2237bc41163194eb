// fixture_graphs.h — hand-built Transformer graphs for the emit/JIT suites.
//
// Builds the IR directly (no parser), in any of the wirings the emitter
// must handle, including the fused ops the passes produce, so the emitter
// and JIT can be tested on every op independently of the front end.
// Random weights (biases and LayerNorm affine included, unlike
// bcW_init_random's zeros) make every bias path visible in the output.
#ifndef FIXTURE_GRAPHS_H
#define FIXTURE_GRAPHS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"

typedef enum {
  FX_POST_LN,        // x = LN(x + f(x)), unfused Add + LayerNorm
  FX_POST_LN_FUSED,  // the same as AddLayerNorm nodes (first keeps its sum)
  FX_PRE_LN,         // x = x + f(LN(x)); final LN
  FX_RESIDUAL,       // ResiDual: DualAddLayerNorm nodes; y = xa + LN(xd)
} fx_wiring;

typedef struct {
  int B, T, D, H, F, N;
  fx_wiring wiring;
  bool causal;
  bc_act act;
} fx_cfg;

static const bc_src fx_src = {"fixture.blk", "model fx\n", 9};

static inline bc_loc fx_loc(int line) { return (bc_loc){&fx_src, line, 1, 1}; }

static inline bc_shape fx_shape2(int64_t a, int64_t b) { return (bc_shape){.rank = 2, .d = {a, b}}; }
static inline bc_shape fx_shape1(int64_t a) { return (bc_shape){.rank = 1, .d = {a}}; }

static inline int fx_param(bc_graph *g, int layer, const char *suffix, bc_shape s) {
  char name[128];
  if (layer >= 0) snprintf(name, sizeof name, "layers.%d.%s", layer, suffix);
  else snprintf(name, sizeof name, "%s", suffix);
  return bcI_add_param(g, name, s, fx_loc(1));
}

static inline int fx_val(bc_graph *g, const fx_cfg *c, const char *name) {
  bc_shape s = {.rank = 3, .d = {c->B, c->T, c->D}};
  return bcI_add_value(g, name, s, BC_VAL_TEMP);
}

static inline int fx_node(bc_graph *g, bc_op op, int line, int nin, int a, int b, int cc) {
  int id = bcI_add_node(g, op, fx_loc(line));
  bc_node *n = &g->nodes[id];
  n->nin = nin;
  n->in[0] = a;
  n->in[1] = b;
  n->in[2] = cc;
  n->nout = 1;
  return id;
}

static inline int fx_out(bc_graph *g, int node, int k, int v) {
  g->nodes[node].out[k] = v;
  if (g->nodes[node].nout < k + 1) g->nodes[node].nout = k + 1;
  return v;
}

static inline void fx_ln_params(bc_graph *g, int node, int layer, const char *norm, int D) {
  char w[64], b[64];
  snprintf(w, sizeof w, "%s.weight", norm);
  snprintf(b, sizeof b, "%s.bias", norm);
  g->nodes[node].param[0] = fx_param(g, layer, w, fx_shape1(D));
  g->nodes[node].param[1] = fx_param(g, layer, b, fx_shape1(D));
}

static inline int fx_attention(bc_graph *g, const fx_cfg *c, int layer, int x) {
  int n = fx_node(g, BC_OP_ATTENTION, 10 + layer, 1, x, -1, -1);
  g->nodes[n].heads = c->H;
  g->nodes[n].causal = c->causal;
  g->nodes[n].param[0] = fx_param(g, layer, "self_attn.in_proj_weight", fx_shape2(3 * c->D, c->D));
  g->nodes[n].param[1] = fx_param(g, layer, "self_attn.in_proj_bias", fx_shape1(3 * c->D));
  g->nodes[n].param[2] = fx_param(g, layer, "self_attn.out_proj.weight", fx_shape2(c->D, c->D));
  g->nodes[n].param[3] = fx_param(g, layer, "self_attn.out_proj.bias", fx_shape1(c->D));
  return fx_out(g, n, 0, fx_val(g, c, "a"));
}

static inline int fx_ffn(bc_graph *g, const fx_cfg *c, int layer, int x) {
  int n = fx_node(g, BC_OP_FFN, 20 + layer, 1, x, -1, -1);
  g->nodes[n].hidden = c->F;
  g->nodes[n].act = c->act;
  g->nodes[n].param[0] = fx_param(g, layer, "linear1.weight", fx_shape2(c->F, c->D));
  g->nodes[n].param[1] = fx_param(g, layer, "linear1.bias", fx_shape1(c->F));
  g->nodes[n].param[2] = fx_param(g, layer, "linear2.weight", fx_shape2(c->D, c->F));
  g->nodes[n].param[3] = fx_param(g, layer, "linear2.bias", fx_shape1(c->D));
  return fx_out(g, n, 0, fx_val(g, c, "f"));
}

static inline int fx_sublayer(bc_graph *g, const fx_cfg *c, int layer, int which, int x) {
  return which == 0 ? fx_attention(g, c, layer, x) : fx_ffn(g, c, layer, x);
}

static inline bc_graph *fx_build(bc_ctx *ctx, const fx_cfg *c) {
  bc_graph *g = bcI_new(ctx);
  g->model = "fx";
  g->path = "fixture.blk";
  const char *dn[] = {"B", "T", "D", "H", "F", "N"};
  int dv[] = {c->B, c->T, c->D, c->H, c->F, c->N};
  g->dims = bc_alloc(ctx, 6 * sizeof *g->dims);
  for (int i = 0; i < 6; i++) g->dims[i] = (bc_dim){dn[i], dv[i], fx_loc(1), false, -1};
  g->ndims = 6;
  bc_shape xs = {.rank = 3, .d = {c->B, c->T, c->D}};
  int x = g->input = bcI_add_value(g, "x", xs, BC_VAL_INPUT);
  int xd = x;  // ResiDual's second stream
  static const char *norms[2] = {"norm1", "norm2"};
  for (int l = 0; l < c->N; l++) {
    for (int s = 0; s < 2; s++) {
      int line = 30 + 2 * l + s;
      if (c->wiring == FX_PRE_LN) {
        int ln = fx_node(g, BC_OP_LAYERNORM, line, 1, x, -1, -1);
        fx_ln_params(g, ln, l, norms[s], c->D);
        int h = fx_out(g, ln, 0, fx_val(g, c, "h"));
        int u = fx_sublayer(g, c, l, s, h);
        int add = fx_node(g, BC_OP_ADD, line, 2, x, u, -1);
        x = fx_out(g, add, 0, fx_val(g, c, "x"));
      } else if (c->wiring == FX_POST_LN) {
        int u = fx_sublayer(g, c, l, s, x);
        int add = fx_node(g, BC_OP_ADD, line, 2, x, u, -1);
        g->nodes[add].alpha = 1.25;  // DeepNorm-style up-weighted residual
        int sum = fx_out(g, add, 0, fx_val(g, c, "s"));
        int ln = fx_node(g, BC_OP_LAYERNORM, line, 1, sum, -1, -1);
        fx_ln_params(g, ln, l, norms[s], c->D);
        x = fx_out(g, ln, 0, fx_val(g, c, "x"));
      } else if (c->wiring == FX_POST_LN_FUSED) {
        int u = fx_sublayer(g, c, l, s, x);
        int n = fx_node(g, BC_OP_ADD_LN, line, 2, x, u, -1);
        g->nodes[n].fused_from = "Add@1 + LayerNorm@2";
        g->nodes[n].beta = 0.75;
        fx_ln_params(g, n, l, norms[s], c->D);
        int nx = fx_out(g, n, 0, fx_val(g, c, "x"));
        if (l == 0 && s == 0) {  // keep one sum alive: read it below
          int sum = fx_out(g, n, 1, fx_val(g, c, "s"));
          int add = fx_node(g, BC_OP_ADD, line, 2, nx, sum, -1);
          g->nodes[add].beta = 0.5;
          nx = fx_out(g, add, 0, fx_val(g, c, "x2"));
        }
        x = nx;
      } else {  // FX_RESIDUAL
        int u = fx_sublayer(g, c, l, s, x);
        int n = fx_node(g, BC_OP_DUAL_ADD_LN, line, 3, xd, x, u);
        g->nodes[n].beta = 0.5;  // xd += s * u with s = 0.5
        fx_ln_params(g, n, l, norms[s], c->D);
        xd = fx_out(g, n, 0, fx_val(g, c, "xd"));
        x = fx_out(g, n, 1, fx_val(g, c, "xa"));
      }
    }
  }
  if (c->wiring == FX_PRE_LN || c->wiring == FX_RESIDUAL) {
    int xa = x;
    int ln = fx_node(g, BC_OP_LAYERNORM, 90, 1, c->wiring == FX_RESIDUAL ? xd : x, -1, -1);
    fx_ln_params(g, ln, -1, "norm", c->D);
    g->nodes[ln].eps = 1e-7;
    x = fx_out(g, ln, 0, fx_val(g, c, "y"));
    if (c->wiring == FX_RESIDUAL) {
      int add = fx_node(g, BC_OP_ADD, 91, 2, x, xa, -1);
      x = fx_out(g, add, 0, fx_val(g, c, "y"));
    }
  }
  g->output = x;
  g->vals[x].is_output = true;
  if (bcI_verify(g) != BC_OK) return NULL;
  return g;
}

// A trivial memory plan: every value and scratch buffer its own range.
// (The real planner is tested elsewhere; these tests want the emitter.)
static inline void fx_plan_trivial(bc_graph *g) {
  int nn = g->nnodes;
  for (int i = 0; i < nn; i++) {
    bc_node *n = &g->nodes[i];
    const bc_shape *in = &g->vals[n->in[0]].shape;
    int64_t B = in->d[0], T = in->d[1], D = in->d[2];
    bc_shape s[3];
    int ns = 0;
    if (n->op == BC_OP_ATTENTION) {
      s[0] = fx_shape2(B * T, 3 * D);
      s[1] = fx_shape2(B * T, D);
      s[2] = (bc_shape){.rank = 3, .d = {n->heads, T, T}};
      ns = 3;
    } else if (n->op == BC_OP_FFN) {
      s[0] = fx_shape2(B * T, n->hidden);
      ns = 1;
    }
    for (int k = 0; k < ns; k++) {
      int v = bcI_add_value(g, "", s[k], BC_VAL_SCRATCH);
      g->vals[v].def = i;
      g->nodes[i].scratch[k] = v;
    }
    g->nodes[i].nscratch = ns;
  }
  int64_t off = 0;
  for (int v = 0; v < g->nvals; v++) {
    if (v == g->input || v == g->output) continue;
    g->vals[v].offset = off;
    off += bc_shape_numel(&g->vals[v].shape);
  }
  g->arena_floats = g->arena_lower_bound = off;
  g->planned = true;
}

// The real pipeline: dce, fusions, inplace, plan (scratch + offsets).
static inline bc_graph *fx_build_planned(bc_ctx *ctx, const fx_cfg *c) {
  bc_graph *g = fx_build(ctx, c);
  if (!g || bcO_run_until(g, NULL) != BC_OK || !g->planned) return NULL;
  return g;
}

// Deterministic pseudo-random floats in [-a, a] (no dependence on weights.c).
static inline float fx_rand(uint64_t *s, float a) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return a * (2.0f * (float)((*s >> 40) & 0xffffff) / 16777216.0f - 1.0f);
}

// Xavier-ish matrices, small random biases, LayerNorm weights near 1; the
// packed slot p[n] after them NULL (bc.h: compiled code reads it).
static inline void fx_weights(const bc_graph *g, uint64_t seed, bc_weights *w) {
  w->n = g->nparams;
  w->p = calloc((size_t)g->nparams + 1, sizeof *w->p);
  for (int i = 0; i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    int64_t n = bc_shape_numel(&p->shape);
    w->p[i] = malloc((size_t)n * sizeof(float));
    bool norm = p->shape.rank == 1 && strstr(p->name, "norm") && strstr(p->name, "weight");
    float a = p->shape.rank == 2 ? sqrtf(6.0f / (float)(p->shape.d[0] + p->shape.d[1])) : 0.1f;
    uint64_t s = seed * 1000003u + (uint64_t)i;
    for (int64_t k = 0; k < n; k++) w->p[i][k] = (norm ? 1.0f : 0.0f) + fx_rand(&s, a);
  }
}

static inline void fx_weights_free(bc_weights *w) {
  for (int i = 0; i < w->n; i++) free(w->p[i]);
  free(w->p);
}

static inline float *fx_input(const bc_graph *g, uint64_t seed) {
  int64_t n = bc_shape_numel(&g->vals[g->input].shape);
  float *x = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) x[i] = fx_rand(&seed, 1.0f);
  return x;
}

#endif
