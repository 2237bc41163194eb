// aot_cmds.c — the command-line side of the AOT backend: `blockc emit -o
// DIR [--backward]`, `blockc run --backend aot`, `blockc grad --backend
// aot` and bench's AOT column.  They call the
// library's aot.c (bcA_generate, bcA_write_pair, bcA_build) and the CLI's
// helpers (common.h) and stepwise.c; aot.c knows nothing of the CLI, so the
// dependency points one way: aot_cmds.c -> aot.c.
#define _POSIX_C_SOURCE 200809L
#include "aot.h"
#include "cli.h"
#include "blockc_rt.h"  // bcrt_pool

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_main.inc"  // bc_generate_main: examples/generate/generate.c

// emit --main generate needs a graph with token ids in and logits out.
static int check_generate_main(bc_ctx *ctx, const cli_opts *o, const bc_graph *g) {
  int tok = 0, logits = 0;
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    tok += v->type == BC_VT_I32 && v->shape.rank == 2;
    if (v->type == BC_VT_F32) tok = -99;
  }
  for (int i = 0; i < g->noutputs; i++)
    logits += g->vals[g->outputs[i]].shape.rank == 3 &&
              (g->noutputs == 1 || !strcmp(g->output_names[i], "logits"));
  if (tok != 1 || logits != 1 || bcY_step_dim(g) < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: --main generate: the model needs one token-ids "
                    "input (`input ids : tokens[1, T]`), no float input, a logits [1, T, V] output "
                    "and a step entry", o->graph);
  return BC_OK;
}

// DIR/generate.c: the example generator with this model's name defined first.
static int write_generate_main(bc_ctx *ctx, const cli_opts *o, const bc_graph *g) {
  char uc[BC_MAX_IDENT + 1];
  size_t n = strlen(g->model);
  for (size_t i = 0; i <= n && i <= BC_MAX_IDENT; i++)
    uc[i] = (char)toupper((unsigned char)g->model[i]);
  const char *head = bc_fmt(ctx, "/* Written by `blockc emit --main generate` for model %s. */\n"
                            "#define BLOCKC_MODEL %s\n#define BLOCKC_MODEL_UC %s\n", g->model,
                            g->model, uc);
  const char *path = bc_fmt(ctx, "%s/generate.c", o->output);
  if (!head || !path) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  const void *parts[2] = {head, bc_generate_main};
  size_t lens[2] = {strlen(head), strlen(bc_generate_main)};
  int st = bc_write_file_atomic(ctx, path, 2, parts, lens);
  if (!st)
    printf("wrote %s; build it with blockc_rt.{c,h} and blockc_tok.{c,h} beside it:\n"
           "  cc -O3 -march=native -I. generate.c %s.c blockc_rt.c blockc_tok.c -lopenblas "
           "-lpcre2-8 -lutf8proc -lm -o generate\n", path, g->model);
  return st;
}

int cli_emit(bc_ctx *ctx, const cli_opts *o) {
  if (!o->output)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: emit needs -o DIR (the directory for "
                    "<model>.c and <model>.h)");
  bc_aot_pair p;
  bc_aot_gen in = {.path = o->graph, .defs = o->defs, .ndefs = o->ndefs, .backward = o->backward,
                   .train = o->train, .weight_type = o->weight_type};
  if (o->weight_type && (o->backward || o->train))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: emit --weight-dtype %s is for inference: "
                    "--backward and --train read f32 weights", bc_weight_type_name(o->weight_type));
  int st = bcA_generate(ctx, &in, &p);
  if (!st) st = cli_layer_notes(ctx, o, p.g);
  if (!st && o->main_prog) st = check_generate_main(ctx, o, p.g);
  if (!st && !o->weights_c && o->weights)
    st = bc_error(ctx, BC_EUSAGE, "blockc: error: emit: --weights goes with --weights-c");
  const char *wc = NULL;
  bc_weights w = {0};
  if (!st && o->weights_c) {
    st = cli_weights(ctx, o, p.g, &w);
    if (!st && !(wc = bcA_weights_c(ctx, p.g, &w, o->max_memory > 0 ? o->max_memory : BC_MAX_MEMORY)))
      st = BC_ENOMEM;
    bcW_free(&w);
  }
  if (!st) st = bcA_write_files(ctx, o->output, p.g->model, p.c_src, p.h_src, wc);
  if (!st)
    printf("wrote %s/%s.c and %s/%s.h%s%s%s%s\n", o->output, p.g->model, o->output, p.g->model,
           wc ? " and " : "", wc ? o->output : "", wc ? "/" : "", wc ? bc_fmt(ctx, "%s_weights.c", p.g->model) : "");
  if (!st && o->main_prog) st = write_generate_main(ctx, o, p.g);
  return st;
}

// `blockc run --backend aot`: the graph (parsed by cli_run) through the
// same emission as `blockc emit`, built or found in the cache, then run
// through the module's <model>_run_abi (io and rt as for bc_run_fn).
int cli_run_aot_io(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                   cli_io *io, double *compile_ms, double *forward_ms) {
  double t0 = cli_now_ms();
  bc_aot_pair p;
  int st = bcA_generate(ctx, &(bc_aot_gen){o->graph, o->defs, o->ndefs, g, false, false, 0}, &p);
  bc_aot *a = NULL;
  bc_aot_fn fn = NULL;
  bool hit = false;
  const char *so = NULL;
  bc_aot_opts ao = {.cc = o->cc};
  if (!st && o->stepwise) st = bcY_step_check(ctx, g);
  bc_mem_use use = {.forward = true, .cache_bytes = o->stepwise ? bcY_cache_bytes(g) : 0,
                    .what = o->stepwise ? "run --stepwise" : NULL};
  if (!st) st = bcW_check_memory_use(ctx, g, &use, o->max_memory);  // before the build
  if (!st) st = bcA_build(ctx, g, p.c_src, p.h_src, &ao, &a, &fn, &hit, &so);
  *compile_ms = cli_now_ms() - t0;
  void *ws = NULL;
  if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
  bc_weights aw = {0};  // w with the module's packed copy in the last slot
  if (!st) aw = (bc_weights){.n = w->n, .p = (float **)bcA_args(ctx, a, g, w)};
  if (!st && !aw.p) st = BC_ENOMEM;
  if (!st) {
    printf("aot module %s (%s)\n", so, hit ? "cache hit" : "built");
    bcrt_pool *pool = NULL;
    st = cli_pool(ctx, o->threads, &pool);
    if (!st && o->stepwise) {
      cli_step s = {.aot = bcA_step(a), .cache_bytes = bcY_cache_bytes(g),
                    .aot_pool = bcA_step_pool(a), .pool = pool};
      st = cli_run_stepwise(ctx, g, &s, &aw, io, o->chunk, ws, forward_ms);
    } else if (!st) {
      double t1 = cli_now_ms();
      int rc = bcA_run_pool(a)((const void *)aw.p, io->p, io->rt, ws, pool);
      *forward_ms = cli_now_ms() - t1;
      if (rc) st = bc_error(ctx, BC_EINTERNAL, "internal error: AOT run returned status %d", rc);
    }
    bcrt_pool_free(pool);
  }
  free(ws);
  bcA_free(a);
  return st;
}

// `blockc bench`'s AOT column: the module's run, median of iters runs
// after two warm-ups (as the JIT's).  Failures (no C compiler) are reported
// and leave *forward_ms negative; bench carries on with the JIT numbers.
int cli_bench_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                  void *const *io, const long *rt, void *ws, double *build_ms,
                  double *forward_ms) {
  *forward_ms = *build_ms = -1;
  double t0 = cli_now_ms();
  bc_aot_pair p;
  bc_aot *a = NULL;
  bc_aot_fn fn = NULL;
  bool hit;
  const char *so;
  bc_aot_opts ao = {.cc = o->cc};
  int st = bcA_generate(ctx, &(bc_aot_gen){o->graph, o->defs, o->ndefs, g, false, false, 0}, &p);
  if (!st) st = bcA_build(ctx, g, p.c_src, p.h_src, &ao, &a, &fn, &hit, &so);
  if (st) return st;
  *build_ms = hit ? 0 : cli_now_ms() - t0;
  double *t = malloc((size_t)o->iters * sizeof *t);
  if (!t) {
    bcA_free(a);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  const void *wp = bcA_args(ctx, a, g, w);  // with the module's own <model>_pack
  if (!wp) {
    free(t);
    bcA_free(a);
    return BC_ENOMEM;
  }
  bcrt_pool *pool = NULL;  // --threads, as the JIT column's
  st = cli_pool(ctx, o->threads, &pool);
  for (int i = 0; !st && i < 2; i++) bcA_run_pool(a)(wp, io, rt, ws, pool);
  for (int i = 0; !st && i < o->iters; i++) {
    double t1 = cli_now_ms();
    bcA_run_pool(a)(wp, io, rt, ws, pool);
    t[i] = cli_now_ms() - t1;
  }
  bcrt_pool_free(pool);
  if (!st) *forward_ms = cli_median(t, o->iters);
  free(t);
  bcA_free(a);
  return st;
}

// `blockc grad --backend aot`: the pair with <model>_backward, built (or
// found in the cache) like run's, and one call.
int cli_grad_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                 void *const *io, const long *rt, const float *const *dy, bc_weights *dw,
                 float **dx) {
  bc_aot_pair p;
  int st = bcA_generate(ctx, &(bc_aot_gen){o->graph, o->defs, o->ndefs, g, true, false, 0}, &p);
  int64_t bytes = st ? 0 : p.bwd_ws;
  bc_aot *a = NULL;
  bc_aot_fn fn = NULL;
  bool hit = false;
  const char *so = NULL;
  bc_aot_opts ao = {.cc = o->cc};
  bc_mem_use use = {.backward_bytes = bytes, .grads = true, .what = "grad"};
  if (!st) st = bcW_check_memory_use(ctx, g, &use, o->max_memory);  // before the build
  if (!st) st = bcA_build(ctx, g, p.c_src, p.h_src, &ao, &a, &fn, &hit, &so);
  if (!st && !bcA_backward(a))
    st = bc_error(ctx, BC_EINTERNAL, "internal error: %s has no %s_backward", so, g->model);
  void *ws = NULL;
  if (!st && !(ws = aligned_alloc(64, (size_t)bytes)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory for the backward workspace (%lld bytes)",
                  (long long)bytes);
  if (!st) {
    printf("aot module %s (%s)\n", so, hit ? "cache hit" : "built");
    cli_set_threads(o->threads);
    bc_train_rng rng = cli_grad_rng(o);
    int rc = bcA_backward_ex(a) && rng.training
                 ? bcA_backward_ex(a)((const float *const *)w->p, io, rt, dy, dw->p, dx, 1,
                                      rng.seed, rng.step, ws)
                 : bcA_backward(a)((const float *const *)w->p, io, rt, dy, dw->p, dx, ws);
    if (rc) st = bc_error(ctx, BC_EINTERNAL, "internal error: AOT backward returned status %d", rc);
  }
  free(ws);
  bcA_free(a);
  return st;
}
