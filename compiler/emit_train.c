// emit_train.c — the emitted whole training step, `<model>_train_step`:
// forward, loss, backward, gradient accumulation, clipping and the
// optimizer update, as C appended after `<model>_backward` (emit_grad.c).
//
//   void <model>_train_init(void *state);
//   int <model>_train_step(float *const *w, void *const *io, const long *rt,
//                          const bcrt_train_hparams *hp, void *state,
//                          void *workspace, float *loss, float *grad_norm);
//   int <model>_train_step_pool(..., float *grad_norm, bcrt_pool *pool);
//
// _train_step_pool is the body (its backward's products and attention over
// pool; NULL: the calling thread), _train_step the call with NULL.
//
// The loss is the graph output named `loss` (else the only output): a
// scalar (CrossEntropy, MSE) or any output, whose elements are then summed.
// Its backward is the emitted backward with dy = 1 for every element.
//   - hp->accum = K micro-batches: io holds K consecutive io tables of
//     <M>_NINPUTS + <M>_NOUTPUTS pointers (as <model>_run_abi's), one per
//     micro-batch, all at the dims rt; their gradients are summed, then
//     multiplied by (float)(1/K) (exact for K a power of two), and *loss is
//     the mean of their losses.  For a mean loss over micro-batches with the
//     same number of counted positions this is the gradient of the big
//     batch's mean.
//   - Clipping: the global norm sqrt(sum over parameters of bcrt_sumsq) is
//     computed after accumulation (double); when hp->clip > 0 every
//     gradient is scaled by bcrt_clip_coef(norm, clip) if that is < 1
//     (torch.nn.utils.clip_grad_norm_; the product is made inside the
//     update's pass, bcrt_adamw_scaled).  *grad_norm receives the norm before
//     clipping (what clip_grad_norm_ returns).
//   - Dropout (a graph with bcI_has_dropout): micro-batch k runs
//     <model>_backward_ex with training on and the masks of
//     (hp->dropout_seed, c + k, node, element), c the state's count of
//     micro-batches trained before this step (header word 5, advanced by K
//     with every step taken): with a constant K, micro-batch k of 0-based
//     step t draws step t*K + k, exactly what `blockc train`'s loop over
//     <model>_backward_ex drew (the index of the micro-batch among all
//     drawn).  Graphs without dropout call <model>_backward.
//   - A non-finite loss or norm: <M>_ENONFINITE (8), and nothing is updated
//     (weights, state, step and micro-batch counts are as before the call).
//   - The update: the state's step count t is incremented, the rate is
//     bcrt_lr_at(hp->schedule, t - 1, hp->steps, hp->warmup, hp->lr,
//     hp->min_lr), and every parameter gets bcrt_adamw (exp_avg,
//     exp_avg_sq) or bcrt_sgd (momentum_buffer) with weight decay where
//     hp->decay_mask (or, when NULL, <model>_train_decay: rank >= 2) says,
//     in chunks over the pool (bcrt_update_pool; the norm's sums too,
//     bcrt_sumsq_pool, added in parameter order).
// state (<M>_TRAIN_STATE_BYTES, 64-byte aligned, caller-owned, set up once
// by <model>_train_init) is a 64-byte header of long longs {magic, step,
// nparams, floats per block, optimizer (-1 before the first step),
// micro-batches trained, 0, 0},
// then the first-moment block (AdamW's exp_avg, SGD's momentum buffer),
// then the second (exp_avg_sq; unused by SGD), parameter p at float offset
// <model>_train_offset[p] of each block.  workspace
// (<M>_TRAIN_WORKSPACE_BYTES, 64-byte aligned; <M>_TRAIN_WORKSPACE_BYTES_K1
// suffices when accum is 1): the backward's, then the gradient block, the
// dy ones, then the accumulation block (read and written for accum > 1 only).
#include "bc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "0x626c6f636b747231LL" /* "blocktr1" */

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }
static int64_t up64(int64_t n) { return (n + 63) / 64 * 64; }

int bcU_loss_output(bc_ctx *ctx, const bc_graph *g) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->output_names && g->output_names[i] && !strcmp(g->output_names[i], "loss")) return i;
  if (g->noutputs == 1) return 0;
  bc_error(ctx, BC_EINPUT,
           "%s: error: training needs the loss: an output named 'loss' (or a single output); "
           "the graph has %d outputs and none is named loss",
           g->path ? g->path : "graph", g->noutputs);
  return -1;
}

int bcU_layout(bc_ctx *ctx, const bc_graph *g, int64_t bwd_ws, bc_train_layout *l) {
  memset(l, 0, sizeof *l);
  if ((l->loss = bcU_loss_output(ctx, g)) < 0) return BC_EINPUT;
  for (int p = 0; p < g->nparams; p++) l->total += up16(bc_shape_numel(&g->params[p].shape));
  l->ones = bc_shape_numel(&g->vals[g->outputs[l->loss]].shape);
  l->bwd_ws = up64(bwd_ws);
  l->ws1_bytes = l->bwd_ws + up64(4 * l->total) + up64(4 * l->ones);
  l->ws_bytes = l->ws1_bytes + up64(4 * l->total);
  l->state_bytes = 64 + 2 * up64(4 * l->total);
  return BC_OK;
}

// The loss output's element count at the actual dims, as a C expression.
static const char *loss_numel(bc_ctx *ctx, const bc_graph *g, int v) {
  const bc_shape *s = &g->vals[v].shape;
  const char *e = "1L";
  for (int i = 0; i < s->rank; i++)
    e = s->sym[i] > 0 ? bc_fmt(ctx, "%s * rt[%d]", e, g->dims[s->sym[i] - 1].rt)
                      : bc_fmt(ctx, "%s * %lldL", e, (long long)s->d[i]);
  return e;
}

static void tables(bc_sbuf *b, const bc_graph *g) {
  const char *m = g->model;
  int np = g->nparams ? g->nparams : 1;
  bc_sb_add(b, "\n/* Elements, float offset in a gradient or state block, and default weight\n"
               " * decay (1: rank >= 2) of each parameter. */\n");
  bc_sb_add(b, "const long %s_train_numel[%d] = {", m, np);
  for (int p = 0; p < g->nparams; p++)
    bc_sb_add(b, "%s%lld", p ? ", " : "", (long long)bc_shape_numel(&g->params[p].shape));
  bc_sb_add(b, "%s};\nconst long %s_train_offset[%d] = {", g->nparams ? "" : "0", m, np);
  int64_t off = 0;
  for (int p = 0; p < g->nparams; p++) {
    bc_sb_add(b, "%s%lld", p ? ", " : "", (long long)off);
    off += up16(bc_shape_numel(&g->params[p].shape));
  }
  bc_sb_add(b, "%s};\n", g->nparams ? "" : "0");
  bc_sb_add(b, "const unsigned char %s_train_decay[%d] = {", m, np);
  for (int p = 0; p < g->nparams; p++) bc_sb_add(b, "%s%d", p ? ", " : "", g->params[p].shape.rank >= 2);
  bc_sb_add(b, "%s};\n", g->nparams ? "" : "0");
}

static void init_fn(bc_sbuf *b, const bc_graph *g, const bc_train_layout *l) {
  bc_sb_add(b,
            "\nvoid %s_train_init(void *state) {\n"
            "  long long *h = (long long *)state;\n"
            "  char *s = (char *)state;\n"
            "  for (long i = 0; i < %lldL; i++) s[i] = 0;\n"
            "  h[0] = %s;\n  h[2] = %d;\n  h[3] = %lldLL;\n  h[4] = -1;\n}\n",
            g->model, (long long)l->state_bytes, MAGIC, g->nparams, (long long)l->total);
}

// The micro-batch loop: forward + backward into the gradient block (the
// accumulation block for k > 0, then added), the loss summed.
static void accumulate(bc_sbuf *b, bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l) {
  const char *m = g->model;
  int v = g->outputs[l->loss], nio = g->ninputs + g->noutputs;
  bool drop = bcI_has_dropout(g);
  const char *call = drop
      ? bc_fmt(ctx, "%s_backward_pool((const float *const *)w, iok, rt, dy, k ? acc : grad, 0, 1,\n"
                    "        hp->dropout_seed, micro + (unsigned long long)k, workspace, pool)", m)
      : bc_fmt(ctx, "%s_backward_pool((const float *const *)w, iok, rt, dy, k ? acc : grad, 0,\n"
                    "        0, 0, 0, workspace, pool)", m);
  if (drop)
    bc_sb_add(b, "  /* dropout: micro-batch k draws the masks of (hp->dropout_seed, micro + k) */\n"
                 "  const unsigned long long micro = (unsigned long long)h[5];\n");
  bc_sb_add(b,
            "  for (long i = 0; i < %lldL; i++) ones[i] = 1.0f;\n"
            "  double lsum = 0.0;\n"
            "  for (int k = 0; k < K; k++) {\n"
            "    void *const *iok = io + (long)k * %d;\n"
            "    int rc = %s;\n"
            "    if (rc) return rc;\n"
            "    const float *y = (const float *)iok[%d];\n"
            "    for (long i = 0, n = %s; i < n; i++) lsum += (double)y[i];\n"
            "    if (k)\n"
            "      for (int p = 0; p < NP; p++)\n"
            "        bcrt_add(%s_train_numel[p], 1.0f, grad[p], 1.0f, acc[p], grad[p]);\n"
            "  }\n"
            "  if (K > 1) {\n"
            "    float s = (float)(1.0 / (double)K);\n"
            "    for (int p = 0; p < NP; p++) bcrt_scale(%s_train_numel[p], grad[p], s);\n"
            "    lsum /= (double)K;\n"
            "  }\n",
            (long long)l->ones, nio, call ? call : "", g->ninputs + l->loss, loss_numel(ctx, g, v),
            m, m);
}

static void step_fn(bc_sbuf *b, bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l) {
  const char *m = g->model;
  int np = g->nparams ? g->nparams : 1;
  bc_sb_add(b,
            "\nint %s_train_step_pool(float *const *w, void *const *io, const long *rt,\n"
            "    const bcrt_train_hparams *hp, void *state, void *workspace, float *loss,\n"
            "    float *grad_norm, bcrt_pool *pool) {\n"
            "  enum { NP = %d };\n"
            "  long long *h = (long long *)state;\n"
            "  if (!w || !io || !hp || !state || !workspace || ((unsigned long)state & 63u) ||\n"
            "      ((unsigned long)workspace & 63u) || hp->accum < 1 ||\n"
            "      (hp->optimizer != BCRT_OPT_ADAMW && hp->optimizer != BCRT_OPT_SGD))\n"
            "    return 1;  /* EINVAL */\n"
            "  if (h[0] != %s || h[2] != %d || h[3] != %lldLL ||\n"
            "      (h[4] >= 0 && h[4] != hp->optimizer))\n"
            "    return 1;  /* EINVAL: not this model's state, or another optimizer's */\n"
            "  int K = hp->accum;\n"
            "  char *ws = (char *)workspace;\n"
            "  float *gblock = (float *)(ws + %lldL), *ablock = (float *)(ws + %lldL);\n"
            "  float *ones = (float *)(ws + %lldL);\n"
            "  float *m1 = (float *)((char *)state + 64), *m2 = (float *)((char *)state + %lldL);\n"
            "  float *grad[%d], *acc[%d];\n"
            "  for (int p = 0; p < NP; p++) {\n"
            "    grad[p] = gblock + %s_train_offset[p];\n"
            "    acc[p] = ablock + %s_train_offset[p];\n"
            "  }\n"
            "  const float *dy[%d] = {0};\n"
            "  dy[%d] = ones;\n",
            m, g->nparams, MAGIC, g->nparams, (long long)l->total, (long long)l->bwd_ws,
            (long long)(l->bwd_ws + up64(4 * l->total) + up64(4 * l->ones)),
            (long long)(l->bwd_ws + up64(4 * l->total)), (long long)(64 + up64(4 * l->total)),
            np, np, m, m, g->noutputs, l->loss);
  accumulate(b, ctx, g, l);
  bc_sb_add(b,
            "  double ssq[%d], ss = 0.0;  /* each parameter's sum over the pool, added in order */\n"
            "  bcrt_sumsq_pool(pool, NP, %s_train_numel, (const float *const *)grad, ssq);\n"
            "  for (int p = 0; p < NP; p++) ss += ssq[p];\n"
            "  double norm = bcrt_sqrt(ss);\n"
            "  if (loss) *loss = (float)lsum;\n"
            "  if (grad_norm) *grad_norm = (float)norm;\n"
            "  if (!(lsum - lsum == 0.0) || !(norm - norm == 0.0)) return 8;  /* ENONFINITE */\n"
            "  double coef = bcrt_clip_coef(norm, hp->clip);\n"
            "  float gs = coef < 1.0 ? (float)coef : 1.0f;  /* clipping, inside the update's pass */\n"
            "  long t = (long)++h[1];\n"
            "  h[4] = hp->optimizer;\n"
            "  h[5] += K;  /* micro-batches trained: dropout's mask index */\n"
            "  double lr = bcrt_lr_at(hp->schedule, t - 1, hp->steps, hp->warmup, hp->lr, hp->min_lr);\n"
            "  const unsigned char *mask = hp->decay_mask ? hp->decay_mask : %s_train_decay;\n"
            "  /* bcrt_adamw_scaled / bcrt_sgd_scaled on every parameter, in chunks over the pool */\n"
            "  bcrt_update_pool(pool, NP, w, (const float *const *)grad, %s_train_numel, %s_train_offset,\n"
            "                   mask, gs, m1, m2, hp, lr, t);\n"
            "  return 0;\n}\n"
            "\nint %s_train_step(float *const *w, void *const *io, const long *rt,\n"
            "    const bcrt_train_hparams *hp, void *state, void *workspace, float *loss,\n"
            "    float *grad_norm) {\n"
            "  return %s_train_step_pool(w, io, rt, hp, state, workspace, loss, grad_norm, 0);\n}\n",
            np, m, m, m, m, m, m);
}

char *bcU_emit(bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l) {
  bc_sbuf b = {0};
  bc_sb_add(&b, "\n/* ==== the training step (blockc emit --train; compiler/emit_train.c) ==== */\n");
  tables(&b, g);
  init_fn(&b, g, l);
  step_fn(&b, ctx, g, l);
  char *s = b.oom ? NULL : bc_strndup(ctx, b.p ? b.p : "", b.len);
  free(b.p);
  if (!s) bc_error(ctx, BC_ENOMEM, "error: out of memory emitting the training step");
  return s;
}

char *bcU_emit_h(bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l, const char *upper) {
  const char *m = g->model, *M = upper;
  // Where dropout's masks come from (state long long 5 counts the
  // micro-batches trained; every graph keeps the count).
  const char *drop =
      bcI_has_dropout(g)
          ? "\n * Dropout (this graph has some) is active: micro-batch k of a call drops\n"
            " * with the masks of (hp->dropout_seed, c + k, node, element), c the\n"
            " * micro-batches trained before the call (long long 5 of the state; the\n"
            " * step adds hp->accum): with a constant accum K, micro-batch k of 0-based\n"
            " * step t draws t*K + k.  The same seed and state give the same masks."
          : "";
  return bc_fmt(
      ctx,
      "\n/* The whole training step (blockc emit --train; docs/training.md): forward,\n"
      " * loss, backward, gradient accumulation over hp->accum micro-batches, clipping\n"
      " * by global norm, and the AdamW / SGD update of every parameter, in place in w\n"
      " * (the weights struct cast to (float *const *)).  The loss is output %d\n"
      " * (%s_TRAIN_LOSS_OUTPUT), its elements summed (a scalar loss: itself).\n"
      " * io: hp->accum consecutive io tables of %s_NINPUTS + %s_NOUTPUTS pointers\n"
      " * as %s_run_abi's, rt as there.\n"
      " * state: %s_TRAIN_STATE_BYTES, 64-byte aligned, set up once with\n"
      " * %s_train_init (the optimizer's moments, the step count (long long 1)\n"
      " * and the micro-batches trained (long long 5): keep it between steps;\n"
      " * exp_avg / momentum_buffer of parameter p at float\n"
      " * 16 + %s_train_offset[p], exp_avg_sq at 16 + %s_TRAIN_BLOCK_FLOATS +\n"
      " * %s_train_offset[p] of it).  workspace: %s_TRAIN_WORKSPACE_BYTES (or\n"
      " * %s_TRAIN_WORKSPACE_BYTES_K1 when hp->accum is 1), 64-byte aligned.  *loss: the\n"
      " * mean loss of the micro-batches; *grad_norm: the global gradient norm\n"
      " * before clipping.  Returns %s_OK, %s_EINVAL (NULL, misaligned,\n"
      " * bad hp, a state of another model or optimizer), %s_ENONFINITE (loss or\n"
      " * norm not finite: nothing updated), or the _run_abi errors.%s */\n"
      "#define %s_ENONFINITE 8\n"
      "#define %s_TRAIN_STATE_BYTES %lldL\n"
      "#define %s_TRAIN_WORKSPACE_BYTES %lldL\n"
      "#define %s_TRAIN_WORKSPACE_BYTES_K1 %lldL\n"
      "#define %s_TRAIN_BLOCK_FLOATS %lldL\n"
      "#define %s_TRAIN_LOSS_OUTPUT %d\n"
      "/* Per parameter: elements, float offset in a state block, default weight\n"
      " * decay (1: rank >= 2; pass your own as hp->decay_mask to override). */\n"
      "extern const long %s_train_numel[%d];\n"
      "extern const long %s_train_offset[%d];\n"
      "extern const unsigned char %s_train_decay[%d];\n"
      "void %s_train_init(void *state);\n"
      "int %s_train_step(float *const *w, void *const *io, const long *rt,\n"
      "    const bcrt_train_hparams *hp, void *state, void *workspace, float *loss,\n"
      "    float *grad_norm);\n"
      "/* The same with its products and attention split over pool (runtime's\n"
      " * bcrt_pool_create; NULL: the calling thread alone, as %s_train_step).  The\n"
      " * result is bit-identical for every pool; OpenBLAS must then run one thread. */\n"
      "int %s_train_step_pool(float *const *w, void *const *io, const long *rt,\n"
      "    const bcrt_train_hparams *hp, void *state, void *workspace, float *loss,\n"
      "    float *grad_norm, bcrt_pool *pool);\n",
      l->loss, M, M, M, m, M, m, m, M, m, M, M, M, M, M, drop, M, M,
      (long long)l->state_bytes, M, (long long)l->ws_bytes, M, (long long)l->ws1_bytes, M,
      (long long)l->total, M, l->loss, m,
      g->nparams ? g->nparams : 1, m, g->nparams ? g->nparams : 1, m, g->nparams ? g->nparams : 1,
      m, m, m, m);
}
