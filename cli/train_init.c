// train_init.c — the initialisation schemes of `blockc train --init`
// (train.h; docs/training.md states the same rules).
//
// A parameter's role is its slot in the FIRST node (in graph order) that
// reads it (bc.h's slot table), so a tied LM head (a Linear reading an
// Embedding's table) is initialised as the embedding.  fan_in is the
// matrix's input width: shape[1] of a (out, in) matrix, shape[0] of a node
// with layout=in_out (GPT-2's Conv1D).  One bc_rng stream seeded with
// --seed draws every value, parameters in parameter order, elements in
// storage order; constants draw nothing.
//
//   torch  (what PyTorch's modules do at construction)
//     Linear, FFN up/down/gate weights: kaiming_uniform(a=sqrt(5)), i.e.
//       U(-1/sqrt(fan_in), 1/sqrt(fan_in)); their biases the same bound.
//     Attention: the Q|K|V weights (packed or separate) xavier_uniform
//       (nn.MultiheadAttention's in_proj: U(-a, a), a = sqrt(6/(fan_in+fan_out))
//       over the whole packed matrix), their biases 0; the out projection
//       weight kaiming_uniform(a=sqrt(5)) (nn.Linear), its bias 0.
//     LayerNorm / RMSNorm (and fused add+norms): weight 1, bias 0.
//     Embedding and learned Positions tables: N(0, 1) (nn.Embedding).
//     Param (a learned scale or gate): 1, as a norm weight (both schemes).
//   gpt2   (GPT-2 / Hugging Face _init_weights / llm.c; Param 1)
//     every matrix and table N(0, 0.02); the residual output projections
//     (Attention's out weight, FFN's down weight) N(0, 0.02 / sqrt(R)) with
//     R the number of Attention and FFN nodes (2N for N blocks); biases 0;
//     norms 1 / 0.
//   xavier bcW_init_random (xavier-uniform matrices, zero biases, norm 1).
//
// Then every parameter with an init override in the graph file (init=...,
// bc_param.init) is drawn again from its own stream (bcW_apply_inits): the
// override wins over every scheme and moves no other parameter's values.
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  R_MATRIX,     // a Linear / FFN weight
  R_BIAS,       // its bias (torch: U(+-1/sqrt(fan_in)))
  R_QKV,        // an attention in-projection weight
  R_ZERO_BIAS,  // attention biases
  R_OUT,        // a residual output projection (attention out, FFN down)
  R_NORM_W, R_NORM_B,
  R_TABLE,      // Embedding / learned Positions
  R_OTHER
} role;

typedef struct {
  role r;
  int64_t fan_in, fan_out;
  float one;    // R_NORM_W's value: 1, or 1 - offset for an RMSNorm with offset= (issue 23)
} param_role;

// fan_in / fan_out of matrix parameter p read by node n.
static void fans(const bc_node *n, const bc_param *p, param_role *pr) {
  int64_t a = p->shape.rank > 0 ? p->shape.d[0] : 1, b = p->shape.rank > 1 ? p->shape.d[1] : 1;
  pr->fan_in = n->in_out ? a : b;
  pr->fan_out = n->in_out ? b : a;
}

// The role of slot k of node n (its weight's fans for biases: slot k-1).
static role slot_role(const bc_node *n, int k) {
  switch (n->op) {
  case BC_OP_LAYERNORM: case BC_OP_RMSNORM: case BC_OP_ADD_LN: case BC_OP_DUAL_ADD_LN:
    return k == 0 ? R_NORM_W : R_NORM_B;
  case BC_OP_ATTENTION:
    if (k == 8 || k == 10 || k == 12) return R_NORM_W;  // q_norm, k_norm weights; head_scale
    if (k == 9 || k == 11) return R_NORM_B;
    if (k == 0 || k == 4 || k == 6) return R_QKV;
    if (k == 2) return R_OUT;
    return R_ZERO_BIAS;
  case BC_OP_FFN:
    if (k == 2) return R_OUT;
    return (k % 2) ? R_BIAS : R_MATRIX;
  case BC_OP_LINEAR: return k == 0 ? R_MATRIX : R_BIAS;
  case BC_OP_EMBEDDING: case BC_OP_POSITIONS: return R_TABLE;
  case BC_OP_PARAM: return R_NORM_W;  // a learned scale: ones (bc_param.unit)
  default: return R_OTHER;
  }
}

// Roles of every parameter from its first reader; *resid: R.
static int find_roles(bc_ctx *ctx, const bc_graph *g, param_role *pr, int *resid) {
  bool *seen = calloc((size_t)g->nparams + 1, 1);
  if (!seen) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *resid = 0;
  for (int p = 0; p < g->nparams; p++) pr[p] = (param_role){R_OTHER, 1, 1, 1.0f};
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    *resid += n->op == BC_OP_ATTENTION || n->op == BC_OP_FFN;
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int p = n->param[k];
      if (p < 0 || seen[p]) continue;
      seen[p] = true;
      pr[p].r = slot_role(n, k);
      bool rms = n->op == BC_OP_RMSNORM ||
                 ((n->op == BC_OP_ADD_LN || n->op == BC_OP_DUAL_ADD_LN) && n->rms);
      if (pr[p].r == R_NORM_W && rms) pr[p].one = (float)(1.0 - n->offset);
      // A bias takes the fans of the weight before it (slot k - 1).
      int wslot = (pr[p].r == R_BIAS || pr[p].r == R_ZERO_BIAS) ? k - 1 : k;
      if (wslot >= 0 && n->param[wslot] >= 0 && g->params[n->param[wslot]].shape.rank >= 2)
        fans(n, &g->params[n->param[wslot]], &pr[p]);
    }
  }
  free(seen);
  return BC_OK;
}

static void fill_uniform(bc_rng *r, float *x, int64_t n, double a) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)((2.0 * bc_rng_uniform(r) - 1.0) * a);
}
static void fill_normal(bc_rng *r, float *x, int64_t n, double std) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(bc_rng_normal(r) * std);
}
static void fill_const(float *x, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) x[i] = v;
}

static void init_torch(bc_rng *r, const param_role *pr, float *x, int64_t n) {
  double kaiming = 1.0 / sqrt((double)(pr->fan_in > 0 ? pr->fan_in : 1));
  switch (pr->r) {
  case R_MATRIX: case R_BIAS: case R_OUT: fill_uniform(r, x, n, kaiming); break;
  case R_QKV: fill_uniform(r, x, n, sqrt(6.0 / (double)(pr->fan_in + pr->fan_out))); break;
  case R_TABLE: fill_normal(r, x, n, 1.0); break;
  case R_NORM_W: fill_const(x, n, pr->one); break;
  case R_ZERO_BIAS: case R_NORM_B: case R_OTHER: fill_const(x, n, 0.0f); break;
  }
}

static void init_gpt2(bc_rng *r, const param_role *pr, float *x, int64_t n, int resid) {
  switch (pr->r) {
  case R_MATRIX: case R_QKV: case R_TABLE: fill_normal(r, x, n, 0.02); break;
  case R_OUT: fill_normal(r, x, n, 0.02 / sqrt((double)(resid > 0 ? resid : 1))); break;
  case R_NORM_W: fill_const(x, n, pr->one); break;
  case R_BIAS: case R_ZERO_BIAS: case R_NORM_B: case R_OTHER: fill_const(x, n, 0.0f); break;
  }
}

int tr_init_weights(bc_ctx *ctx, const bc_graph *g, cli_init scheme, uint64_t seed,
                    bc_weights *w) {
  int st = bcW_init_random(ctx, g, seed, w);
  if (st || scheme == CLI_INIT_XAVIER) return st;
  param_role *pr = calloc((size_t)g->nparams + 1, sizeof *pr);
  int resid = 0;
  st = pr ? find_roles(ctx, g, pr, &resid) : bc_error(ctx, BC_ENOMEM, "error: out of memory");
  bc_rng r;
  bc_rng_seed(&r, seed);
  for (int p = 0; !st && p < g->nparams; p++) {
    int64_t n = bc_shape_numel(&g->params[p].shape);
    if (scheme == CLI_INIT_TORCH) init_torch(&r, &pr[p], w->p[p], n);
    else init_gpt2(&r, &pr[p], w->p[p], n, resid);
  }
  free(pr);
  if (!st) st = bcW_apply_inits(ctx, g, seed, w);  // the graph file's init= wins over the scheme
  if (st) bcW_free(w);
  return st;
}
