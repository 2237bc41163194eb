// ir_builders.h — hand-built, unfused Transformer IRs for the pass and
// planner suites.
//
// Graphs are built the way the parser unrolls a graph file: plain Add /
// LayerNorm / Attention / FFN nodes in execution order, each with a source
// location in a fake "t.blk" (line = 10 + node index, col 10) so fusion
// notes can be checked verbatim.  The three wirings are the ones the passes
// target: Post-LN, Pre-LN (the sum feeds the next residual) and ResiDual
// (two streams sharing each sublayer output).
#ifndef IR_BUILDERS_H
#define IR_BUILDERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"

typedef enum { IB_POST_LN, IB_PRE_LN, IB_RESIDUAL } ib_wiring;

typedef struct {
  bc_graph *g;
  int64_t B, T, D, H, F;
  bool tie;  // every layer shares layer 0's weights (cheap huge graphs)
} ib;

static const bc_src ib_src = {"t.blk", "", 0};

static inline ib ib_new(bc_ctx *ctx, int64_t B, int64_t T, int64_t D, int64_t H, int64_t F) {
  ib b = {bcI_new(ctx), B, T, D, H, F, false};
  b.g->model = "t";
  b.g->path = "t.blk";
  b.g->input = bcI_add_value(b.g, "x", (bc_shape){.rank = 3, .d = {B, T, D, 0}}, BC_VAL_INPUT);
  return b;
}

static inline int ib_val(ib *b, const char *name) {
  return bcI_add_value(b->g, name, (bc_shape){.rank = 3, .d = {b->B, b->T, b->D, 0}}, BC_VAL_TEMP);
}

static inline int ib_node(ib *b, bc_op op, int nin, int a, int c) {
  bc_loc loc = {&ib_src, 10 + b->g->nnodes, 10, 1};
  int id = bcI_add_node(b->g, op, loc);
  bc_node *n = &b->g->nodes[id];
  n->nin = nin;
  n->in[0] = a;
  n->in[1] = c;
  n->nout = 1;
  return id;
}

static inline int ib_p(ib *b, int layer, const char *suffix, bc_shape s) {
  char name[128];
  if (layer >= 0) snprintf(name, sizeof name, "layers.%d.%s", b->tie ? 0 : layer, suffix);
  else snprintf(name, sizeof name, "%s", suffix);
  return bcI_add_param(b->g, name, s, (bc_loc){0});
}

static inline bc_shape ib_s1(int64_t a) { return (bc_shape){.rank = 1, .d = {a, 0, 0, 0}}; }
static inline bc_shape ib_s2(int64_t a, int64_t c) { return (bc_shape){.rank = 2, .d = {a, c, 0, 0}}; }

static inline int ib_add(ib *b, int x, int y, const char *name) {
  int n = ib_node(b, BC_OP_ADD, 2, x, y);
  return b->g->nodes[n].out[0] = ib_val(b, name);
}

static inline int ib_ln(ib *b, int x, int layer, const char *norm, const char *name) {
  int n = ib_node(b, BC_OP_LAYERNORM, 1, x, -1);
  char w[64], bb[64];
  snprintf(w, sizeof w, "%s.weight", norm);
  snprintf(bb, sizeof bb, "%s.bias", norm);
  b->g->nodes[n].param[0] = ib_p(b, layer, w, ib_s1(b->D));
  b->g->nodes[n].param[1] = ib_p(b, layer, bb, ib_s1(b->D));
  return b->g->nodes[n].out[0] = ib_val(b, name);
}

static inline int ib_attn(ib *b, int x, int layer) {
  int n = ib_node(b, BC_OP_ATTENTION, 1, x, -1);
  bc_node *nd = &b->g->nodes[n];
  nd->heads = b->H;
  nd->param[0] = ib_p(b, layer, "self_attn.in_proj_weight", ib_s2(3 * b->D, b->D));
  nd = &b->g->nodes[n];
  nd->param[1] = ib_p(b, layer, "self_attn.in_proj_bias", ib_s1(3 * b->D));
  nd->param[2] = ib_p(b, layer, "self_attn.out_proj.weight", ib_s2(b->D, b->D));
  nd->param[3] = ib_p(b, layer, "self_attn.out_proj.bias", ib_s1(b->D));
  return b->g->nodes[n].out[0] = ib_val(b, "a");
}

static inline int ib_ffn(ib *b, int x, int layer) {
  int n = ib_node(b, BC_OP_FFN, 1, x, -1);
  bc_node *nd = &b->g->nodes[n];
  nd->hidden = b->F;
  nd->act = BC_ACT_GELU;
  nd->param[0] = ib_p(b, layer, "linear1.weight", ib_s2(b->F, b->D));
  nd->param[1] = ib_p(b, layer, "linear1.bias", ib_s1(b->F));
  nd->param[2] = ib_p(b, layer, "linear2.weight", ib_s2(b->D, b->F));
  nd->param[3] = ib_p(b, layer, "linear2.bias", ib_s1(b->D));
  return b->g->nodes[n].out[0] = ib_val(b, "f");
}

static inline int ib_sub(ib *b, int x, int layer, int which) {
  return which == 0 ? ib_attn(b, x, layer) : ib_ffn(b, x, layer);
}

static inline bc_graph *ib_finish(ib *b, int y) {
  b->g->output = y;
  b->g->vals[y].is_output = true;
  return bcI_verify(b->g) == BC_OK ? b->g : NULL;
}

// An N-layer stack; every layer has an attention and an FFN sublayer.
//   Post-LN:  x = LN(x + f(x))
//   Pre-LN:   x = x + f(LN(x)), then a final LN
//   ResiDual: u = f(xa); xd = xd + u; xa = LN(xa + u); y = xa + LN(xd)
static inline bc_graph *ib_stack_ex(bc_ctx *ctx, ib_wiring w, int N, int64_t B, int64_t T,
                                    int64_t D, int64_t H, int64_t F, bool tie) {
  static const char *norms[2] = {"norm1", "norm2"};
  ib b = ib_new(ctx, B, T, D, H, F);
  b.tie = tie;
  int x = b.g->input, xd = x;
  for (int l = 0; l < N; l++) {
    for (int s = 0; s < 2; s++) {
      if (w == IB_POST_LN) {
        int u = ib_sub(&b, x, l, s);
        int sum = ib_add(&b, x, u, "s");
        x = ib_ln(&b, sum, l, norms[s], "x");
      } else if (w == IB_PRE_LN) {
        int h = ib_ln(&b, x, l, norms[s], "h");
        int u = ib_sub(&b, h, l, s);
        x = ib_add(&b, x, u, "x");
      } else {
        int u = ib_sub(&b, x, l, s);
        xd = ib_add(&b, xd, u, "xd");
        int sum = ib_add(&b, x, u, "s");
        x = ib_ln(&b, sum, l, norms[s], "xa");
      }
    }
  }
  if (w == IB_PRE_LN) x = ib_ln(&b, x, -1, "norm", "y");
  if (w == IB_RESIDUAL) {
    int n = ib_ln(&b, xd, -1, "norm", "n");
    x = ib_add(&b, x, n, "y");
  }
  return ib_finish(&b, x);
}

static inline bc_graph *ib_stack(bc_ctx *ctx, ib_wiring w, int N, int64_t B, int64_t T,
                                 int64_t D, int64_t H, int64_t F) {
  return ib_stack_ex(ctx, w, N, B, T, D, H, F, false);
}

static inline int ib_count(const bc_graph *g, bc_op op) {
  int c = 0;
  for (int i = 0; i < g->nnodes; i++) c += g->nodes[i].op == op;
  return c;
}

// Deterministic weights in [-a, a] (LayerNorm weights around 1) and input,
// independent of weights.c.
static inline float ib_rand(uint64_t *s, float a) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return a * (2.0f * (float)((*s >> 40) & 0xffffff) / 16777216.0f - 1.0f);
}

static inline void ib_weights(const bc_graph *g, uint64_t seed, bc_weights *w) {
  w->n = g->nparams;
  w->p = calloc((size_t)g->nparams + 1, sizeof *w->p);  // + the NULL packed slot (bc.h)
  for (int i = 0; i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    int64_t n = bc_shape_numel(&p->shape);
    w->p[i] = malloc((size_t)n * sizeof(float));
    bool norm = p->shape.rank == 1 && strstr(p->name, "norm") && strstr(p->name, "weight");
    uint64_t s = seed * 1000003u + (uint64_t)i;
    float a = p->shape.rank == 2 ? 0.3f : 0.1f;
    for (int64_t k = 0; k < n; k++) w->p[i][k] = (norm ? 1.0f : 0.0f) + ib_rand(&s, a);
  }
}

static inline void ib_weights_free(bc_weights *w) {
  for (int i = 0; i < w->n; i++) free(w->p[i]);
  free(w->p);
}

#endif
