// io_graphs.h — graphs with several inputs and outputs, cross-attention,
// lengths masks and run-time dims, for the JIT, AOT and API suites.
//
// ig_text writes a decoder layer as graph text (parsed by the real front
// end): causal self-attention with query/key lengths, cross-attention over a
// memory with its own lengths, an FFN, and three outputs (the layer output
// y, the cross-attention output c, whose padded rows must be exactly zero,
// and x2 after the first norm).  T and S are run-time dims (`<=`) or fixed.
// ig_io holds one buffer per input and output, sized for the bounds and
// filled at the actual sizes.
#ifndef IO_GRAPHS_H
#define IO_GRAPHS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"
#include "fixture_graphs.h"

typedef struct {
  int B, D, H, F;
  int T, S;         // bounds (run-time dims) or values (fixed)
  bool fixT, fixS;  // `dim T = ...` instead of `dim T <= ...`
  bool causal;
  bool rtB;         // `dim B <= ...`: the batch is a run-time dim too (rt[0])
} ig_cfg;

static inline const char *ig_text(char *buf, size_t n, const ig_cfg *c) {
  snprintf(buf, n,
           "model dec\n"
           "dim B %s %d\ndim T %s %d\ndim S %s %d\ndim D = %d\ndim H = %d\ndim F = %d\n"
           "input x : [B, T, D]\ninput mem : [B, S, D]\n"
           "input len : lengths[B]\ninput mem_len : lengths[B]\n"
           "a = Attention(x, heads=H, causal=%s, lengths=len, params=self_attn)\n"
           "x2 = LayerNorm(Add(x, a), params=norm1)\n"
           "c = Attention(x2, kv=mem, heads=H, lengths=len, kv_lengths=mem_len, "
           "params=multihead_attn)\n"
           "x3 = LayerNorm(Add(x2, c), params=norm2)\n"
           "f = FFN(x3, hidden=F, act=gelu, params=(linear1, linear2))\n"
           "y = LayerNorm(Add(x3, f), params=norm3)\n"
           "output y\noutput c\noutput x2\n",
           c->rtB ? "<=" : "=", c->B, c->fixT ? "=" : "<=", c->T, c->fixS ? "=" : "<=", c->S, c->D, c->H, c->F,
           c->causal ? "true" : "false");
  return buf;
}

typedef struct {
  int n;              // ninputs + noutputs
  void *io[16];
  int64_t numel[16];  // actual element counts
  long rt[4];
} ig_io;

static inline int64_t ig_numel_at(const bc_graph *g, int v, const long *rt) {
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  return bc_shape_numel(&s);
}

// Buffers for every input and output (at the bounds, NaN-poisoned so that
// a value written outside the actual sizes or left unwritten shows), float
// inputs random at the actual sizes, lengths from lens[i] (NULL: none).
static inline void ig_alloc(ig_io *a, const bc_graph *g, const long *rt, uint64_t seed,
                            int *const *lens) {
  memset(a, 0, sizeof *a);
  a->n = g->ninputs + g->noutputs;
  for (int k = 0; k < g->nrt && k < 4; k++) a->rt[k] = rt[k];
  for (int i = 0; i < a->n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    a->numel[i] = ig_numel_at(g, v, rt);
    if (i < g->ninputs && g->vals[v].type == BC_VT_I32 && !g->vals[v].tokens) {
      a->io[i] = lens ? lens[i] : NULL;
      continue;
    }
    if (i < g->ninputs && g->vals[v].tokens) {  // token ids: seeded, 0..V-1
      int64_t cap = bc_shape_numel(&g->vals[v].shape), V = bcI_tokens_vocab(g, v);
      int32_t *ids = malloc((size_t)cap * sizeof *ids);
      for (int64_t k = 0; k < cap; k++)
        ids[k] = (int32_t)((uint32_t)(fx_rand(&seed, 1.0f) * 1e6f + 2e6f) % (uint32_t)(V > 0 ? V : 1));
      a->io[i] = ids;
      continue;
    }
    int64_t cap = bc_shape_numel(&g->vals[v].shape);
    float *p = malloc((size_t)cap * sizeof(float));
    for (int64_t k = 0; k < cap; k++) p[k] = NAN;
    if (i < g->ninputs)
      for (int64_t k = 0; k < a->numel[i]; k++) p[k] = fx_rand(&seed, 1.0f);
    a->io[i] = p;
  }
}

static inline void ig_free(ig_io *a, const bc_graph *g) {
  for (int i = 0; i < a->n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    if (!(i < g->ninputs && g->vals[v].type == BC_VT_I32 && !g->vals[v].tokens)) free(a->io[i]);
  }
}

// Copies the inputs of src into a fresh ig_io for graph g (same layout).
static inline void ig_copy_inputs(ig_io *dst, const ig_io *src, const bc_graph *g) {
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (g->vals[v].type == BC_VT_I32 && !g->vals[v].tokens) dst->io[i] = src->io[i];
    else memcpy(dst->io[i], src->io[i], (size_t)src->numel[i] * sizeof(float));
  }
}

// Max over outputs of |a - b| / (1 + |b|); NaN anywhere counts as +inf.
static inline double ig_rel_err(const ig_io *a, const ig_io *b, const bc_graph *g) {
  double worst = 0;
  for (int i = g->ninputs; i < a->n; i++) {
    const float *x = a->io[i], *y = b->io[i];
    for (int64_t k = 0; k < a->numel[i]; k++) {
      double e = fabs((double)x[k] - (double)y[k]) / (1 + fabs((double)y[k]));
      if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
  }
  return worst;
}

// Deterministic weights for any graph: fixture_graphs' fx_weights.
#endif
