// train.c — `blockc train`: next-token training of a graph on a token file.
//
// The run: the graph is parsed with --batch as dim B (and --seq as dim T
// when T is fixed; a run-time T keeps its bound, which --seq must not
// pass), the data files are read and checked against the vocabulary, the
// weights come from --weights, --init or --resume, and the emitted whole
// training step (`<model>_train_step`, JIT or AOT; emit_train.c) is
// compiled once.  Each optimizer step draws --accum micro-batches
// (train_data.c's windows) into as many io tables and makes one call that
// computes the loss and the gradient of their mean (dropout active, masks
// of --seed and the micro-batch's index), checks both are finite, clips
// the global norm (torch.nn.utils.clip_grad_norm_), and updates
// (torch.optim.AdamW or SGD) at the schedule's learning rate (llm.c's
// schedulers.h; inverse_sqrt as fairseq's).  Progress goes to
// stdout, --log gets one JSON object per step, --svg the loss plot, --out
// the checkpoint pair (train_io.c).  Everything that decides the
// trajectory is in the checkpoint, so a resumed run continues bit for bit.
//
// The loss: a graph with a scalar output `loss` and a tokens input
// `targets` (its own CrossEntropy) trains on it as it is; a whole-model
// graph (a tokens input `ids`, an output `logits` [B, T, V], no loss) gets
// one from bcX_with_lm_loss: loss = CrossEntropy(logits, targets), the
// mean over the B*T positions, the targets the ids shifted by one.  The
// step's update is the runtime's optimizer kernels (bcrt_adamw_scaled,
// bcrt_sgd_scaled, bcrt_sumsq, bcrt_clip_coef, bcrt_lr_at: torch.optim's
// arithmetic).
//
// Sequence-to-sequence graphs (several token inputs) take one 2-D pair file
// per token input (--data NAME=FILE; train_pairs.c): the decoder's input is
// fed row[:-1] and `targets` row[1:] (teacher forcing), the lengths inputs
// the rows' lengths.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "train.h"
#include "aot.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct trainer {
  bc_ctx *ctx;
  const cli_opts *o;
  const cli_train_opts *t;
  bc_graph *g;
  int ids_in;            // the tokens input fed tok[s .. s+T)
  int tgt_in;            // the tokens input `targets` fed tok[s+1 .. s+T]
  int logits_out;        // index among the outputs (of the graph as loaded)
  int loss_out;          // index of `loss` among the outputs (of the trained graph)
  int64_t V;
  long B, T;
  long *rt;              // run-time dims (T's value; the rest at their bounds)
  bc_compiled c;         // jit
  bc_aot *a;             // aot
  bc_train_fn trn;       // the emitted <model>_train_step
  bc_train_pool_fn trnp; // its pool body <model>_train_step_pool (NULL: an older module)
  struct bcrt_pool *pool; // --threads N > 1 (cli_pool; OpenBLAS then at one thread)
  bc_train_init_fn trn_init;
  bc_train_layout tl;
  void *state;           // its state: header, exp_avg / momentum block, exp_avg_sq block
  int ntab;              // io tables: the K micro-batches of one call
  void *ws, *bws;
  void **io;             // ntab tables of ninputs + noutputs pointers
  int32_t *ids, *tgt;    // ntab micro-batches of B*T
  bc_weights w;
  float **m1, **m2;      // views of the state: AdamW exp_avg / exp_avg_sq; SGD momentum_buffer (m1)
  bool *decay;           // per parameter: weight decay applies (rank >= 2)
  tr_tokens data, val;
  bool s2s;              // several token inputs: the pair files of tr_pairs
  tr_pairs pairs;
  int32_t *pbuf;         // their ids, targets and lengths: ntab tables of pstride
  size_t pstride;
  tr_state s;
  FILE *log;
  double *px, *py, *vx, *vy;  // the plot's points
  int np, nv;
} trainer;

// --- setup ------------------------------------------------------------------

static int dim_index(const bc_graph *g, const char *name) {
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, name)) return i;
  return -1;
}

// A sequence-to-sequence graph: dim B from --batch; its sequence dims come
// from the pair files (--seq is refused).
static int load_s2s_graph(trainer *tr, const bc_graph *g0) {
  const cli_opts *o = tr->o;
  if (dim_index(g0, "B") < 0)
    return bc_error(tr->ctx, BC_EINPUT, "%s: error: train sets the graph's dim B (--batch); this "
                    "graph has no dim B", o->graph);
  if (tr->T)
    return bc_error(tr->ctx, BC_EUSAGE, "blockc: error: --seq: a sequence-to-sequence graph takes "
                    "its sequence lengths from the --data NAME=FILE rows");
  bc_define defs[CLI_MAX_DEFS + 1];
  int n = 0;
  for (int i = 0; i < o->ndefs; i++) {
    if (strcmp(o->defs[i].name, "B")) defs[n++] = o->defs[i];
    else if (o->defs[i].value != tr->B)
      return bc_error(tr->ctx, BC_EUSAGE, "blockc: error: -D B=%lld disagrees with --batch %ld "
                      "(train sets dim B from --batch)", (long long)o->defs[i].value, tr->B);
  }
  defs[n++] = (bc_define){"B", tr->B};
  tr->g = bcP_parse_file(tr->ctx, o->graph, defs, n);
  return tr->g ? BC_OK : BC_EINPUT;
}

// Parses GRAPH with -D B=--batch (and T=--seq for a fixed T).
static int load_graph(trainer *tr) {
  const cli_opts *o = tr->o;
  bc_ctx *ctx = tr->ctx;
  bc_graph *g0 = cli_load(ctx, o);
  if (!g0) return BC_EINPUT;
  int ntok = 0;
  for (int i = 0; i < g0->ninputs; i++)
    ntok += bcI_is_tokens(g0, g0->inputs[i]) && strcmp(g0->vals[g0->inputs[i]].name, "targets");
  if ((tr->s2s = ntok > 1)) return load_s2s_graph(tr, g0);
  if (!tr->T) return bc_error(ctx, BC_EUSAGE, "blockc: error: train needs --seq");
  int b = dim_index(g0, "B"), t = dim_index(g0, "T");
  if (b < 0 || t < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: train sets the graph's dims B (--batch) and T "
                    "(--seq); this graph has no dim %s", o->graph, b < 0 ? "B" : "T");
  bool t_rt = g0->dims[t].rt >= 0;
  if (t_rt && tr->T > g0->dims[t].value)
    return bc_error(ctx, BC_EINPUT, "%s: error: --seq %ld is larger than the bound of T (%lld); "
                    "-D T=%ld raises it", o->graph, tr->T, (long long)g0->dims[t].value, tr->T);
  bc_define defs[CLI_MAX_DEFS + 2];
  int n = 0;
  for (int i = 0; i < o->ndefs; i++) {
    bool isb = !strcmp(o->defs[i].name, "B"), ist = !strcmp(o->defs[i].name, "T") && !t_rt;
    if ((isb && o->defs[i].value != tr->B) || (ist && o->defs[i].value != tr->T))
      return bc_error(ctx, BC_EUSAGE, "blockc: error: -D %s=%lld disagrees with --%s %ld (train "
                      "sets dim %s from --%s)", o->defs[i].name, (long long)o->defs[i].value,
                      isb ? "batch" : "seq", isb ? tr->B : tr->T, o->defs[i].name,
                      isb ? "batch" : "seq");
    if (!isb && !ist) defs[n++] = o->defs[i];
  }
  defs[n++] = (bc_define){"B", tr->B};
  if (!t_rt) defs[n++] = (bc_define){"T", tr->T};
  tr->g = bcP_parse_file(ctx, o->graph, defs, n);
  return tr->g ? BC_OK : BC_EINPUT;
}

// --label-smoothing on the CrossEntropy that bcX_with_lm_loss added to lg
// (its last node).
static bc_graph *smoothed(trainer *tr, bc_graph *lg) {
  if (lg && lg->nnodes > 0 && lg->nodes[lg->nnodes - 1].op == BC_OP_CROSS_ENTROPY)
    lg->nodes[lg->nnodes - 1].smoothing = tr->t->label_smoothing;
  return lg;
}

// A sequence-to-sequence graph: the target token input (train_pairs.c),
// the loss on its logits (or the graph's own scalar output `loss` of a
// tokens input `targets`), and the pairing plan of the trained graph.
static int s2s_io(trainer *tr) {
  bc_ctx *ctx = tr->ctx;
  const bc_graph *g = tr->g;
  int lo = -1, own = -1, ti = -1;
  for (int k = 0; k < g->noutputs; k++) {
    if (!strcmp(g->output_names[k], "loss")) own = k;
    if (!strcmp(g->output_names[k], "logits") || g->noutputs == 1) lo = k;
  }
  for (int i = 0; i < g->ninputs; i++)
    if (bcI_is_tokens(g, g->inputs[i]) && !strcmp(g->vals[g->inputs[i]].name, "targets")) ti = i;
  if (own >= 0 && (ti < 0 || bc_shape_numel(&g->vals[g->outputs[own]].shape) != 1))
    return bc_error(ctx, BC_EINPUT, "%s: error: the output `loss` must be a scalar loss of a "
                    "tokens input `targets` (the target rows shifted by one)", tr->o->graph);
  if (own < 0 && lo < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: train needs an output named `logits` [B, T, V] "
                    "(or a scalar output `loss` of a tokens input `targets`)", tr->o->graph);
  const char *tgt = NULL;
  if (own >= 0 && tr->o->given[CLI_OPT_LABEL_SMOOTHING])
    return bc_error(ctx, BC_EUSAGE, "%s: error: --label-smoothing applies to the loss train adds; "
                    "this graph has its own output `loss` (set label_smoothing= on its "
                    "CrossEntropy)", tr->o->graph);
  int st = own >= 0 ? tr_pairs_target(ctx, tr->o->graph, g, &g->vals[g->inputs[ti]].shape,
                                      "the input `targets`", &tgt)
                    : tr_pairs_target(ctx, tr->o->graph, g, &g->vals[g->outputs[lo]].shape,
                                      bc_fmt(ctx, "the output `%s`", g->output_names[lo]), &tgt);
  bc_graph *lg = st ? NULL
                 : own >= 0 ? tr->g
                            : smoothed(tr, bcX_with_lm_loss(ctx, g, g->output_names[lo], tgt, false));
  if (!lg) return BC_EINPUT;
  tr->g = lg;
  if ((st = tr_pairs_plan(ctx, tr->o->graph, lg, tgt, &tr->pairs))) return st;
  tr->pairs.pad = (int32_t)tr->t->pad_id;
  tr->tgt_in = tr->pairs.targets_input, tr->loss_out = -1;
  for (int i = 0; i < tr->pairs.n; i++)
    if (tr->pairs.s[i].target) tr->ids_in = tr->pairs.s[i].input;
  for (int k = 0; k < lg->noutputs; k++)
    if (!strcmp(lg->output_names[k], "loss")) tr->loss_out = k;
  tr->V = bcI_tokens_vocab(lg, lg->inputs[tr->ids_in]);
  return tr->loss_out < 0 ? bc_error(ctx, BC_EINTERNAL, "internal error: no loss output") : BC_OK;
}

// The inputs and outputs training feeds and reads.
static int find_io(trainer *tr) {
  bc_ctx *ctx = tr->ctx;
  const bc_graph *g = tr->g;
  tr->ids_in = tr->logits_out = -1;
  int ntok = 0;
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    if (bcI_is_tokens(g, g->inputs[i]) && !strcmp(v->name, "targets")) continue;
    if (bcI_is_tokens(g, g->inputs[i])) {
      ntok++;
      if (tr->ids_in < 0 || !strcmp(v->name, "ids")) tr->ids_in = i;
    } else if (!bcI_is_lengths(g, g->inputs[i])) {
      return bc_error(ctx, BC_EINPUT, "%s: error: input '%s' is a float input: train feeds token "
                      "ids only (a graph with a tokens input `ids` and an output `logits`)",
                      tr->o->graph, v->name);
    }
  }
  if (ntok > 1) return s2s_io(tr);
  if (ntok != 1)
    return bc_error(ctx, BC_EINPUT, "%s: error: train needs a graph with one tokens input (`ids`); "
                    "this one has %d", tr->o->graph, ntok);
  tr->V = bcI_tokens_vocab(g, g->inputs[tr->ids_in]);
  for (int k = 0; k < g->noutputs; k++)
    if (!strcmp(g->output_names[k], "loss")) {  // the graph's own loss
      if (tr->o->given[CLI_OPT_LABEL_SMOOTHING])
        return bc_error(ctx, BC_EUSAGE, "%s: error: --label-smoothing applies to the loss train "
                        "adds; this graph has its own output `loss` (set label_smoothing= on its "
                        "CrossEntropy)", tr->o->graph);
      return BC_OK;
    }
  for (int k = 0; k < g->noutputs; k++)
    if (!strcmp(g->output_names[k], "logits") || g->noutputs == 1) tr->logits_out = k;
  if (tr->logits_out < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: train needs an output named `logits` [B, T, V]",
                    tr->o->graph);
  const bc_shape *ls = &g->vals[g->outputs[tr->logits_out]].shape;
  const bc_shape *is = &g->vals[g->inputs[tr->ids_in]].shape;
  if (ls->rank != 3 || ls->d[0] != tr->B || ls->d[2] != tr->V || is->rank != 2 ||
      is->d[0] != tr->B)
    return bc_error(ctx, BC_EINPUT, "%s: error: the output `%s` must be [B, T, V] logits over the "
                    "vocabulary of `%s` (V = %lld) with B = --batch", tr->o->graph,
                    g->output_names[tr->logits_out], g->vals[g->inputs[tr->ids_in]].name,
                    (long long)tr->V);
  bc_graph *lg = smoothed(tr, bcX_with_lm_loss(ctx, g, g->output_names[tr->logits_out],
                                                g->vals[g->inputs[tr->ids_in]].name, false));
  if (!lg) return BC_EINPUT;
  tr->g = lg;
  return BC_OK;
}

// The trained graph's inputs `ids` / `targets` and scalar output `loss`.
static int find_loss(trainer *tr) {
  const bc_graph *g = tr->g;
  tr->tgt_in = tr->loss_out = -1;
  const char *ids = NULL;
  for (int i = 0; i < g->ninputs; i++) {
    const char *name = g->vals[g->inputs[i]].name;
    if (!bcI_is_tokens(g, g->inputs[i])) continue;
    if (!strcmp(name, "targets")) tr->tgt_in = i;
    else tr->ids_in = i, ids = name;
  }
  for (int k = 0; k < g->noutputs; k++)
    if (!strcmp(g->output_names[k], "loss")) tr->loss_out = k;
  if (tr->tgt_in < 0 || tr->loss_out < 0 || bc_shape_numel(&g->vals[g->outputs[tr->loss_out]].shape) != 1)
    return bc_error(tr->ctx, BC_EINPUT, "%s: error: the output `loss` must be a scalar loss of a "
                    "tokens input `targets` (the ids shifted by one)", tr->o->graph);
  const bc_shape *a = &g->vals[g->inputs[tr->ids_in]].shape, *b = &g->vals[g->inputs[tr->tgt_in]].shape;
  if (a->rank != 2 || b->rank != 2 || a->d[0] != b->d[0] || a->d[1] != b->d[1] || a->sym[1] != b->sym[1])
    return bc_error(tr->ctx, BC_EINPUT, "%s: error: `targets` must have the shape of `%s`",
                    tr->o->graph, ids);
  return BC_OK;
}

// The pair files of a sequence-to-sequence graph (train_pairs.c).
static int read_pairs(trainer *tr) {
  const cli_train_opts *t = tr->t;
  const char *gp = tr->o->graph;
  int st = tr_pairs_load(tr->ctx, gp, tr->g, &tr->pairs, 0, t->data, t->ndata, "--data");
  if (!st && t->nval) st = tr_pairs_load(tr->ctx, gp, tr->g, &tr->pairs, 1, t->vals, t->nval, "--val");
  for (int i = 0; !st && i < tr->pairs.n; i++)
    if (tr->pairs.s[i].target) tr->T = tr->pairs.s[i].width[0];
  return st;
}

static int read_data(trainer *tr) {
  const cli_train_opts *t = tr->t;
  if (tr->s2s) return read_pairs(tr);
  const char *ids = tr->g->vals[tr->g->inputs[tr->ids_in]].name;
  if (tr->o->given[CLI_OPT_PAD_ID])
    return bc_error(tr->ctx, BC_EUSAGE, "blockc: error: --pad-id: only the 2-D pair files of a "
                    "sequence-to-sequence graph (several token inputs) are padded");
  if (t->nval > 1 || (t->nval && t->vals[0].name && strcmp(t->vals[0].name, ids)))
    return bc_error(tr->ctx, BC_EUSAGE, "blockc: error: train takes one --val FILE (or --val "
                    "%s=FILE): the graph has one tokens input", ids);
  if (t->ndata != 1 || (t->data[0].name && strcmp(t->data[0].name, tr->g->vals[tr->g->inputs[tr->ids_in]].name)))
    return bc_error(tr->ctx, BC_EUSAGE, "blockc: error: train takes one --data FILE (or --data "
                    "%s=FILE): the graph has one tokens input", tr->g->vals[tr->g->inputs[tr->ids_in]].name);
  int st = tr_tokens_read(tr->ctx, t->data[0].path, &tr->data);
  if (!st) st = tr_tokens_check(tr->ctx, &tr->data, tr->V, tr->T);
  if (!st && t->val) st = tr_tokens_read(tr->ctx, t->val, &tr->val);
  if (!st && t->val) st = tr_tokens_check(tr->ctx, &tr->val, tr->V, tr->T);
  return st;
}

static int init_weights(trainer *tr) {
  const cli_opts *o = tr->o;
  bc_load_opts lo = {.allow_extra = o->allow_extra, .prefix = o->weights_prefix,
                     .max_memory = o->max_memory};
  if (tr->t->resume) {
    bc_load_opts ro = {.max_memory = o->max_memory};
    return bcW_load_opts(tr->ctx, tr->g, tr->t->resume, &ro, &tr->w);
  }
  if (o->weights) return bcW_load_opts(tr->ctx, tr->g, o->weights, &lo, &tr->w);
  return tr_init_weights(tr->ctx, tr->g, tr->t->init, o->seed, &tr->w);
}

static int compile(trainer *tr) {
  bc_ctx *ctx = tr->ctx;
  int64_t bws = 0, fws = 0;
  int st;
  if (tr->o->backend == CLI_BACKEND_AOT) {
    bc_aot_pair p;
    st = bcA_generate(ctx, &(bc_aot_gen){.path = tr->o->graph, .graph = tr->g, .backward = true,
                                         .train = true}, &p);
    bc_aot_fn fn;
    bool hit = false;
    const char *so = NULL;
    bc_aot_opts ao = {.cc = tr->o->cc};
    if (!st) st = bcA_build(ctx, tr->g, p.c_src, p.h_src, &ao, &tr->a, &fn, &hit, &so);
    if (!st) {
      tr->trn = bcA_train(tr->a), tr->trn_init = bcA_train_init(tr->a);
      tr->trnp = bcA_train_pool(tr->a);
      st = bcU_layout(ctx, tr->g, p.bwd_ws, &tr->tl);
    }
    if (!st) printf("aot module %s (%s)\n", so, hit ? "cache hit" : "built");
  } else {
    bc_emit_opts eo = {.backward = true, .train = true};
    st = bcD_compile(ctx, tr->g, &eo, &tr->c);
    if (!st) tr->trn = tr->c.train, tr->trn_init = tr->c.train_init, tr->tl = tr->c.tl;
    if (!st) tr->trnp = tr->c.train_pool;
  }
  if (!st && (!tr->trn || !tr->trn_init))
    st = bc_error(ctx, BC_EINTERNAL, "internal error: no training step built");
  // the step's workspace holds the gradient (emit_train.c); accumulation's block only for K > 1
  if (!st) bws = tr->t->accum > 1 ? tr->tl.ws_bytes : tr->tl.ws1_bytes;
  fws = st ? 0 : bcY_workspace_bytes(tr->g);
  bc_mem_use use = {.what = "train", .forward = true,
                    .backward_bytes = bws + tr->tl.state_bytes};
  if (!st) st = bcW_check_memory_use(ctx, tr->g, &use, tr->o->max_memory);
  if (!st && (!(tr->bws = aligned_alloc(64, (size_t)bws)) || !(tr->ws = aligned_alloc(64, (size_t)(fws ? fws : 64)))))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory for the training workspaces (%lld bytes)",
                  (long long)(bws + fws));
  return st;
}

// The int32 arrays of the pair batches: per io table, each token input's
// B x bound ids, `targets` (B x the target's bound), each lengths input's B.
static size_t pairs_table(const trainer *tr) {
  size_t n = 0;
  for (int i = 0; i < tr->pairs.n; i++) {
    const tr_seq *s = &tr->pairs.s[i];
    n += (size_t)tr->B * (size_t)s->bound * (s->target ? 2 : 1) + (s->len_input >= 0 ? (size_t)tr->B : 0);
  }
  return n;
}

static int32_t *alloc_pairs(trainer *tr) {
  tr->pstride = pairs_table(tr);
  return malloc(tr->pstride * (size_t)tr->ntab * sizeof(int32_t) + 1);
}

static void bind_pairs(const trainer *tr, void **io, int32_t *p) {
  for (int i = 0; i < tr->pairs.n; i++) {
    const tr_seq *s = &tr->pairs.s[i];
    size_t bt = (size_t)tr->B * (size_t)s->bound;
    io[s->input] = p, p += bt;
    if (s->target) io[tr->pairs.targets_input] = p, p += bt;
    if (s->len_input >= 0) io[s->len_input] = p, p += tr->B;
  }
}

// The arrays of one micro-batch: ids, logits, run-time dims.
static int alloc_io(trainer *tr) {
  const bc_graph *g = tr->g;
  int n = g->ninputs + g->noutputs, K = tr->ntab;
  size_t bt = (size_t)tr->B * (size_t)tr->T;
  tr->io = calloc((size_t)n * (size_t)K, sizeof *tr->io);
  tr->rt = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *tr->rt);
  if (!tr->s2s) {
    tr->ids = malloc(bt * (size_t)K * sizeof *tr->ids);
    tr->tgt = malloc(bt * (size_t)K * sizeof *tr->tgt);
  } else if (!(tr->pbuf = alloc_pairs(tr))) {
    return bc_error(tr->ctx, BC_ENOMEM, "error: out of memory for a batch");
  }
  if (!tr->io || !tr->rt || (!tr->s2s && (!tr->ids || !tr->tgt)))
    return bc_error(tr->ctx, BC_ENOMEM, "error: out of memory for a batch");
  for (int d = 0; d < g->ndims; d++)
    if (g->dims[d].rt >= 0)
      tr->rt[g->dims[d].rt] = !tr->s2s && !strcmp(g->dims[d].name, "T") ? tr->T : (long)g->dims[d].value;
  for (int t = 0; t < K; t++) {
    void **io = tr->io + (size_t)t * (size_t)n;
    if (tr->s2s) {
      bind_pairs(tr, io, tr->pbuf + (size_t)t * tr->pstride);
    } else {
      io[tr->ids_in] = tr->ids + (size_t)t * bt;
      io[tr->tgt_in] = tr->tgt + (size_t)t * bt;
    }
    for (int k = 0; k < g->noutputs; k++) {
      bc_shape s = bcI_shape_at(g, &g->vals[g->outputs[k]].shape, tr->rt);
      int64_t m = bc_shape_numel(&s);
      if (!(io[g->ninputs + k] = malloc((size_t)(m ? m : 1) * sizeof(float))))
        return bc_error(tr->ctx, BC_ENOMEM, "error: out of memory for output '%s'", g->output_names[k]);
    }
  }
  return BC_OK;
}

// --- one micro-batch ---------------------------------------------------------

static int forward(trainer *tr) {
  int rc;
  if (tr->a) {
    const void *args = bcA_args(tr->ctx, tr->a, tr->g, &tr->w);
    if (!args) return BC_ENOMEM;
    rc = bcA_run_pool(tr->a)(args, tr->io, tr->rt, tr->ws, tr->pool);
  } else {
    rc = tr->c.run_pool((const float *const *)tr->w.p, tr->io, tr->rt, tr->ws, tr->pool);
  }
  return rc ? bc_error(tr->ctx, BC_EINTERNAL, "internal error: the forward returned status %d", rc)
            : BC_OK;
}

// Window starts of the next micro-batch of the training data, into io table t.
static void next_batch(trainer *tr, int t) {
  int64_t starts[BC_MAX_DIM > 4096 ? 4096 : BC_MAX_DIM];
  if (tr->s2s) {  // pairs: row r of micro-batch k is pair (k*B + r) mod P, or a draw
    for (long r = 0; r < tr->B; r++)
      starts[r] = tr->t->order == CLI_ORDER_SEQUENTIAL ? tr_pair_seq(tr->s.micro, tr->B, r, tr->pairs.rows[0])
                                                       : tr_pair_rand(&tr->s.rng, tr->pairs.rows[0]);
    tr->s.micro++;
    tr_pairs_fill(&tr->pairs, 0, starts, tr->B,
                  tr->io + (size_t)t * (size_t)(tr->g->ninputs + tr->g->noutputs), tr->rt);
    return;
  }
  for (long r = 0; r < tr->B; r++)
    starts[r] = tr->t->order == CLI_ORDER_SEQUENTIAL
                    ? tr_window_seq(tr->s.micro, tr->B, r, tr->T, tr->data.n)
                    : tr_window_rand(&tr->s.rng, tr->T, tr->data.n);
  tr->s.micro++;
  size_t bt = (size_t)tr->B * (size_t)tr->T;
  tr_fill(&tr->data, starts, tr->B, tr->T, tr->ids + t * bt, tr->tgt + t * bt);
}

static double loss_value(const trainer *tr) {
  return *(const float *)tr->io[tr->g->ninputs + tr->loss_out];
}

// Mean loss over --eval-batches sequential batches of --val (from its start).
static int eval_loss(trainer *tr, double *loss) {
  double sum = 0;
  int64_t starts[BC_MAX_DIM > 4096 ? 4096 : BC_MAX_DIM];
  for (long j = 0; j < tr->t->eval_batches; j++) {
    if (tr->s2s) {
      for (long r = 0; r < tr->B; r++) starts[r] = tr_pair_seq(j, tr->B, r, tr->pairs.rows[1]);
      tr_pairs_fill(&tr->pairs, 1, starts, tr->B, tr->io, tr->rt);
    } else {
      for (long r = 0; r < tr->B; r++) starts[r] = tr_window_seq(j, tr->B, r, tr->T, tr->val.n);
      tr_fill(&tr->val, starts, tr->B, tr->T, tr->ids, tr->tgt);
    }
    int st = forward(tr);
    if (st) return st;
    sum += loss_value(tr);
  }
  *loss = sum / (double)tr->t->eval_batches;
  return BC_OK;
}

// --- the optimizer -------------------------------------------------------------

// The schedule's learning rate of 0-based step `step` (bcrt_lr_at: llm.c's
// schedulers.h; inverse_sqrt as fairseq's).
static double lr_at(const cli_train_opts *t, long step) {
  static const int kind[] = {[CLI_SCHED_CONSTANT] = BCRT_LR_CONSTANT, [CLI_SCHED_LINEAR] = BCRT_LR_LINEAR,
                             [CLI_SCHED_COSINE] = BCRT_LR_COSINE,
                             [CLI_SCHED_INVERSE_SQRT] = BCRT_LR_INVERSE_SQRT};
  return bcrt_lr_at(kind[t->schedule], step, t->steps, t->warmup, t->lr, t->min_lr);
}

// --- progress ------------------------------------------------------------------

static void log_step(trainer *tr, double loss, double lr, double norm, double ms, double val) {
  if (!tr->log) return;
  fprintf(tr->log, "{\"step\":%ld,\"loss\":", tr->s.step);
  cli_json_num(loss, tr->log);
  fputs(",\"lr\":", tr->log);
  cli_json_num(lr, tr->log);
  fputs(",\"grad_norm\":", tr->log);
  cli_json_num(norm, tr->log);
  fputs(",\"ms\":", tr->log);
  cli_json_num(ms, tr->log);
  if (!isnan(val)) {
    fputs(",\"val_loss\":", tr->log);
    cli_json_num(val, tr->log);
  }
  fputs("}\n", tr->log);
  fflush(tr->log);
}

static void fmt_eta(double ms, char *buf, size_t n) {
  long s = (long)(ms / 1000 + 0.5);
  snprintf(buf, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

static bool weights_finite(const trainer *tr, int *bad) {
  for (int p = 0; p < tr->g->nparams; p++) {
    int64_t n = bc_shape_numel(&tr->g->params[p].shape);
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(tr->w.p[p][i])) return *bad = p, false;
  }
  return true;
}

static int save(trainer *tr) {
  int bad;
  if (!weights_finite(tr, &bad))
    return bc_error(tr->ctx, BC_EINPUT, "error: step %ld: the update made '%s' non-finite (lower "
                    "--lr); %s was not written", tr->s.step, tr->g->params[bad].name, tr->t->out);
  return tr_save(tr->ctx, tr->t->out, tr->g, &tr->w, tr->m1, tr->m2, &tr->s);
}

static const char *stopped(const trainer *tr) {
  return tr->t->out ? ", the last checkpoint written is kept" : "";
}

// One optimizer step through the emitted <model>_train_step: K micro-batches
// in K io tables, then one call (accumulation, clip, update in generated C).
// Dropout: micro-batch j (0-based, among all drawn: the state's count, set
// from the checkpoint's blockc.micro on --resume) drops with the masks of
// (--seed, j), as <model>_backward_ex(training 1, --seed, j) would.
static int train_step(trainer *tr, double *loss, double *lr, double *norm) {
  const cli_train_opts *t = tr->t;
  static const int kind[] = {[CLI_SCHED_CONSTANT] = BCRT_LR_CONSTANT, [CLI_SCHED_LINEAR] = BCRT_LR_LINEAR,
                             [CLI_SCHED_COSINE] = BCRT_LR_COSINE,
                             [CLI_SCHED_INVERSE_SQRT] = BCRT_LR_INVERSE_SQRT};
  bcrt_train_hparams hp = {
      .optimizer = t->optimizer == CLI_OPTIM_SGD ? BCRT_OPT_SGD : BCRT_OPT_ADAMW,
      .schedule = kind[t->schedule], .lr = t->lr, .min_lr = t->min_lr, .warmup = t->warmup,
      .steps = t->steps, .beta1 = t->beta1, .beta2 = t->beta2, .eps = t->eps,
      .weight_decay = t->weight_decay,
      .momentum = tr->o->given[CLI_OPT_BETA1] ? t->beta1 : 0, .clip = t->clip,
      .accum = (int)t->accum, .decay_mask = (const unsigned char *)tr->decay,
      .dropout_seed = tr->o->seed};
  for (int k = 0; k < tr->ntab; k++) next_batch(tr, k);
  float l = 0, gn = 0;
  int rc = tr->trnp ? tr->trnp(tr->w.p, tr->io, tr->rt, &hp, tr->state, tr->bws, &l, &gn, tr->pool)
                    : tr->trn(tr->w.p, tr->io, tr->rt, &hp, tr->state, tr->bws, &l, &gn);
  long step = tr->s.step + 1;
  *loss = l, *norm = gn, *lr = lr_at(t, tr->s.step);
  if (rc == 8 || !isfinite(l) || !isfinite(gn)) {
    if (!isfinite(l))
      return bc_error(tr->ctx, BC_EINPUT, "error: step %ld: the loss is %s (lower --lr or check "
                      "the data); stopped%s", step, isnan(l) ? "nan" : "inf", stopped(tr));
    return bc_error(tr->ctx, BC_EINPUT, "error: step %ld: the gradient norm is not finite (%g); "
                    "stopped%s", step, (double)gn, stopped(tr));
  }
  if (rc)
    return bc_error(tr->ctx, BC_EINTERNAL, "internal error: the train step returned status %d", rc);
  tr->s.step = step;
  return BC_OK;
}

static int push(double **x, double **y, int *n, double vx, double vy) {
  double *a = realloc(*x, (size_t)(*n + 1) * sizeof **x), *b = a ? realloc(*y, (size_t)(*n + 1) * sizeof **y) : NULL;
  if (a) *x = a;
  if (!b) return BC_ENOMEM;
  *y = b;
  (*x)[*n] = vx, (*y)[*n] = vy, (*n)++;
  return BC_OK;
}

static int loop(trainer *tr) {
  const cli_train_opts *t = tr->t;
  long every = t->steps <= 100 ? 1 : t->steps / 100;
  long end = t->stop_after && t->stop_after < t->steps ? t->stop_after : t->steps;
  double total_ms = 0, last_loss = NAN, last_val = NAN;
  long done = 0;
  int st = BC_OK;
  while (!st && tr->s.step < end) {
    double t0 = cli_now_ms(), loss = 0, lr = 0, norm = 0, val = NAN;
    st = train_step(tr, &loss, &lr, &norm);
    if (st) break;
    double ms = cli_now_ms() - t0;
    total_ms += ms, done++, last_loss = loss;
    long s = tr->s.step;
    if (t->val && ((t->eval_every && s % t->eval_every == 0) || s == t->steps))
      st = eval_loss(tr, &val);
    if (st) break;
    if (s % every == 0 || s == end || !isnan(val)) {
      char eta[32];
      fmt_eta(total_ms / (double)done * (double)(t->steps - s), eta, sizeof eta);
      printf("step %*ld/%ld  loss %.4f  lr %.3e  grad norm %.4f  %.1f ms  %.0f tok/s  ETA %s",
             (int)snprintf(NULL, 0, "%ld", t->steps), s, t->steps, loss, lr, norm, ms,
             (double)(tr->B * tr->T * t->accum) / (ms / 1000.0), eta);
      if (!isnan(val)) printf("  val loss %.4f", val);
      putchar('\n');
      fflush(stdout);
    }
    log_step(tr, loss, lr, norm, ms, val);
    if (!isnan(val)) last_val = val;
    if (push(&tr->px, &tr->py, &tr->np, (double)s, loss) ||
        (!isnan(val) && push(&tr->vx, &tr->vy, &tr->nv, (double)s, val)))
      st = bc_error(tr->ctx, BC_ENOMEM, "error: out of memory");
    if (!st && t->out && t->save_every && s % t->save_every == 0 && s != end) st = save(tr);
  }
  if (!st && t->out) st = save(tr);
  if (!st && done)
    printf("trained %ld step%s (to step %ld of %ld) in %.1f s: %.1f ms/step, %.0f tok/s, final "
           "loss %.4f%s", done, done == 1 ? "" : "s", tr->s.step, t->steps, total_ms / 1000,
           total_ms / (double)done,
           (double)(tr->B * tr->T * t->accum) * (double)done / (total_ms / 1000.0), last_loss,
           isnan(last_val) ? "" : "");
  if (!st && done && !isnan(last_val)) printf(", val loss %.4f", last_val);
  if (!st && done) putchar('\n');
  if (!st && tr->s.step < t->steps)
    printf("stopped after step %ld (--stop-after)%s\n", tr->s.step,
           t->out ? bc_fmt(tr->ctx, "; continue with --resume %s", t->out) : "");
  if (tr->o->svg && tr->np) {
    int s2 = tr_write_svg(tr->ctx, tr->o->svg, tr->px, tr->py, tr->np, tr->vx, tr->vy, tr->nv);
    if (!st) st = s2;
  }
  return st;
}

// --- the command ----------------------------------------------------------------

static int check_opts(bc_ctx *ctx, const cli_opts *o) {
  const cli_train_opts *t = &o->tr;
  bool named = false;  // --data NAME=FILE: maybe sequence-to-sequence (no --seq; load_graph tells)
  for (int i = 0; i < t->ndata; i++) named |= t->data[i].name != NULL;
  const char *miss = !t->ndata ? "--data" : !t->steps ? "--steps" : !t->batch ? "--batch"
                     : !t->seq && !named ? "--seq" : NULL;
  if (miss) return bc_error(ctx, BC_EUSAGE, "blockc: error: train needs %s", miss);
  if (o->backend == CLI_BACKEND_INTERP)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: train runs on --backend jit or aot (the "
                    "interpreter has no training step)");
  if (t->batch > 4096)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld: at most 4096 rows", t->batch);
  if (t->resume && o->weights)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: --resume and --weights: the checkpoint holds "
                    "the weights (give one)");
  if (t->warmup > t->steps)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: --warmup %ld is more than --steps %ld",
                    t->warmup, t->steps);
  const cli_file *f[3] = {0};
  cli_file fo = {NULL, t->out, "--out", t->out}, fl = {NULL, t->log, "--log", t->log},
           fs = {NULL, o->svg, "--svg", o->svg};
  int n = 0;
  if (t->out) f[n++] = &fo;
  if (t->log) f[n++] = &fl;
  if (o->svg) f[n++] = &fs;
  return cli_check_distinct(ctx, f, n);
}

static void trainer_free(trainer *tr) {
  free(tr->m1), free(tr->m2), free(tr->state);  // the moments live in the state
  bcW_free(&tr->w);
  if (tr->io)
    for (int t = 0; t < tr->ntab; t++)
      for (int k = 0; k < tr->g->noutputs; k++)
        free(tr->io[(size_t)t * (size_t)(tr->g->ninputs + tr->g->noutputs) + (size_t)(tr->g->ninputs + k)]);
  free(tr->io), free(tr->rt), free(tr->ids), free(tr->tgt), free(tr->pbuf);
  bcrt_pool_free(tr->pool);
  tr_pairs_free(&tr->pairs);
  free(tr->decay), free(tr->ws), free(tr->bws);
  free(tr->px), free(tr->py), free(tr->vx), free(tr->vy);
  tr_tokens_free(&tr->data);
  tr_tokens_free(&tr->val);
  if (tr->log) fclose(tr->log);
  bcD_free(&tr->c);
  bcA_free(tr->a);
}

// The weight-decay rule: --decay matrices (rank >= 2: matrices and tables,
// not biases and norm gains; the default, PyTorch users' usual groups) or
// all (llm.c), then --no-decay GLOBs exempt names (fnmatch).  A glob that
// matches no parameter is an error (a typo would silently decay).  The rule
// is printed; it is not in the checkpoint: a --resume passes the same flags.
static int decay_rule(trainer *tr) {
  const bc_graph *g = tr->g;
  const cli_train_opts *t = tr->t;
  int nd = 0;
  for (int p = 0; p < g->nparams; p++)
    tr->decay[p] = t->decay == CLI_DECAY_ALL || g->params[p].shape.rank >= 2;
  for (int k = 0; k < t->nno_decay; k++) {
    int hits = 0;
    for (int p = 0; p < g->nparams; p++)
      if (!fnmatch(t->no_decay[k], g->params[p].name, 0)) tr->decay[p] = false, hits++;
    if (!hits)
      return bc_error(tr->ctx, BC_EINPUT, "%s: error: --no-decay '%s' matches no parameter (names "
                      "as `blockc weights` lists them, e.g. '%s')", tr->o->graph, t->no_decay[k],
                      g->nparams ? g->params[0].name : "");
  }
  for (int p = 0; p < g->nparams; p++) nd += tr->decay[p];
  if (t->weight_decay <= 0) return BC_OK;
  if (!t->nno_decay && t->decay == CLI_DECAY_MATRICES)  // tools/train_check.py reads this line
    printf("weight decay %g on the %d parameters of rank >= 2 (matrices, tables); not on the %d "
           "biases and norm gains\n", t->weight_decay, nd, g->nparams - nd);
  else
    printf("weight decay %g on %d of the %d parameters (--decay %s%s)\n", t->weight_decay, nd,
           g->nparams, t->decay == CLI_DECAY_ALL ? "all" : "matrices",
           t->nno_decay ? ", less the --no-decay names" : "");
  return BC_OK;
}

// The optimizer state, fresh or from --resume; the weight-decay rule.
static int init_state(trainer *tr) {
  const bc_graph *g = tr->g;
  tr->s = (tr_state){.optimizer = tr->t->optimizer, .graph_id = tr_graph_id(g)};
  bcrt_rng_seed(&tr->s.rng, tr->o->seed ^ 0x6461746164617461ULL);  // "datadata"
  // The moments are views of the emitted step's state (emit_train.c):
  // a 64-byte header, then two blocks, parameter p 16-float aligned in each.
  tr->state = aligned_alloc(64, (size_t)tr->tl.state_bytes);
  tr->m1 = calloc((size_t)g->nparams + 1, sizeof *tr->m1);
  tr->m2 = calloc((size_t)g->nparams + 1, sizeof *tr->m2);
  tr->decay = calloc((size_t)g->nparams + 1, 1);
  if (!tr->state || !tr->m1 || !tr->m2 || !tr->decay)
    return bc_error(tr->ctx, BC_ENOMEM, "error: out of memory");
  tr->trn_init(tr->state);
  float *b1 = (float *)((char *)tr->state + 64), *b2 = b1 + (tr->tl.total * 4 + 63) / 64 * 16;
  int64_t off = 0;
  for (int p = 0; p < g->nparams; p++) {
    tr->m1[p] = b1 + off, tr->m2[p] = b2 + off;
    off += (bc_shape_numel(&g->params[p].shape) + 15) / 16 * 16;
  }
  int st = decay_rule(tr);
  if (st) return st;
  if (!tr->t->resume) return BC_OK;
  st = tr_load_optim(tr->ctx, tr->t->resume, g, tr->m1, tr->m2, &tr->s);
  if (!st) {  // the header's step count, optimizer and micro-batches drawn (emit_train.c)
    long long *h = tr->state;
    h[1] = tr->s.step;
    h[4] = tr->t->optimizer == CLI_OPTIM_SGD ? BCRT_OPT_SGD : BCRT_OPT_ADAMW;
    h[5] = tr->s.micro;  // dropout's mask index: the sequential data position
  }
  if (!st && tr->s.step >= tr->t->steps)
    st = bc_error(tr->ctx, BC_EINPUT, "%s: error: the checkpoint is at step %ld: nothing to do "
                  "with --steps %ld", tr->t->resume, tr->s.step, tr->t->steps);
  if (!st) printf("resumed %s at step %ld\n", tr->t->resume, tr->s.step);
  return st;
}

int cli_train(bc_ctx *ctx, const cli_opts *o) {
  trainer tr = {.ctx = ctx, .o = o, .t = &o->tr, .B = o->tr.batch, .T = o->tr.seq};
  int st = check_opts(ctx, o);
  if (!st) st = load_graph(&tr);
  if (!st) st = find_io(&tr);
  if (!st && !tr.s2s) st = find_loss(&tr);
  if (!st) st = read_data(&tr);
  if (!st) st = init_weights(&tr);
  if (!st) {
    tr.ntab = (int)o->tr.accum;
    st = compile(&tr);
  }
  if (!st) st = alloc_io(&tr);
  if (!st) st = init_state(&tr);
  if (!st && o->tr.log && !(tr.log = fopen(o->tr.log, o->tr.resume ? "a" : "w")))
    st = bc_error(ctx, BC_EIO, "%s: error: cannot open the log for writing", o->tr.log);
  if (!st) st = cli_pool(ctx, o->threads, &tr.pool);  // every product and attention over it
  if (!st) {
    long long nf = 0;
    for (int p = 0; p < tr.g->nparams; p++) nf += (long long)bc_shape_numel(&tr.g->params[p].shape);
    if (tr.s2s)
      printf("training %s: %d parameters (%lld floats), B=%ld T=%ld accum=%ld, %lld train pairs%s, "
             "backend %s\n", tr.g->model, tr.g->nparams, nf, tr.B, tr.T, o->tr.accum,
             (long long)tr.pairs.rows[0],
             o->tr.val ? bc_fmt(ctx, ", %lld val pairs", (long long)tr.pairs.rows[1]) : "",
             cli_backend_name(o->backend));
    else
      printf("training %s: %d parameters (%lld floats), B=%ld T=%ld accum=%ld, %lld train tokens%s, "
             "backend %s\n", tr.g->model, tr.g->nparams, nf, tr.B, tr.T, o->tr.accum,
             (long long)tr.data.n, o->tr.val ? bc_fmt(ctx, ", %lld val tokens", (long long)tr.val.n) : "",
             cli_backend_name(o->backend));
    st = loop(&tr);
  }
  trainer_free(&tr);
  return st;
}
