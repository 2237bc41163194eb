// run.c — `blockc check`, `dump`, `run` and `emit-c`: a graph through the
// checker, the IR printer, a backend or the emitter.
//
// Commands load the graph (with -D overrides), then hand it to the stage
// they are about. Weights and inputs come from files or a seeded generator
// (common.c) so any run can be reproduced from its command line; `run
// --backend aot` and `run --stepwise` are aot_cmds.c's and stepwise.c's.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "blockc_rt.h"  // bcrt_pool_free

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_check(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = cli_load(ctx, o);
  if (!g) return BC_EINPUT;
  printf("%s: model %s, dims", o->graph, g->model);
  for (int i = 0; i < g->ndims; i++)
    printf(" %s=%lld", g->dims[i].name, (long long)g->dims[i].value);
  printf(", %d nodes, %d parameter tensors, %lld parameters\n", g->nnodes, g->nparams,
         (long long)bcI_param_count(g));
  return BC_OK;
}

int cli_dump(bc_ctx *ctx, const cli_opts *o) {
  if (o->list_passes) {
    int n;
    const bc_pass *p = bcO_passes(&n);
    for (int i = 0; i < n; i++) printf("%-12s %s\n", p[i].name, p[i].doc);
    if (!o->graph) return BC_OK;
  }
  bc_graph *g = cli_load(ctx, o);
  if (!g) return BC_EINPUT;
  if (o->after) {
    if (!bcO_find(o->after)) {
      int n;
      const bc_pass *p = bcO_passes(&n);
      const char *names = "";
      for (int i = 0; i < n; i++) names = bc_fmt(ctx, "%s%s%s", names, i ? ", " : "", p[i].name);
      return bc_error(ctx, BC_EUSAGE, "blockc: error: unknown pass '%s' (passes: %s)", o->after,
                      names);
    }
    int st = bcO_run_until(g, o->after);
    if (st) return st;
  }
  bcI_dump(g, stdout);
  return BC_OK;
}


// The run's status from a compiled entry: BC_RUN_E* codes become messages
// (the arrays were checked by cli_io_bind, so these mean a blockc bug).
static int run_status(bc_ctx *ctx, int rc) {
  if (rc == BC_RUN_OK) return BC_OK;
  return bc_error(ctx, BC_EINTERNAL, "internal error: the compiled model returned status %d", rc);
}

int cli_run(bc_ctx *ctx, const cli_opts *o) {
  double t0 = cli_now_ms();
  bc_graph *g = cli_load(ctx, o);
  if (!g) return BC_EINPUT;
  bc_weights w = {0};
  cli_io io = {0};
  bc_compiled c = {0};
  void *ws = NULL;
  int st = cli_weights(ctx, o, g, &w);
  if (!st) st = cli_io_bind(ctx, o, g, &io);
  double t1 = cli_now_ms(), tc = 0, tf = 0;
  if (!st && o->backend == CLI_BACKEND_INTERP) {
    st = bcR_run_io(ctx, g, &w, io.p, io.rt);
    tf = cli_now_ms() - t1;
  } else if (!st && o->backend == CLI_BACKEND_JIT) {
    bc_emit_opts eo = {0};
    st = bcD_compile(ctx, g, &eo, &c);
    tc = cli_now_ms() - t1;
    // Now with the planned workspace, the packed copy and the step's KV cache.
    bc_mem_use use = {.forward = true, .cache_bytes = o->stepwise ? c.cache_bytes : 0,
                      .what = o->stepwise ? "run --stepwise" : NULL};
    if (!st) st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
    if (!st) st = bcD_pack(ctx, &c, &w);  // small-M GEMMs read the packed copy
    // a weight type: the float matrices are done with once packed
    if (!st && bcD_release_packed(g, &w) < 0) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
    if (!st && o->stepwise) {
      cli_step s = {.jit = c.step, .cache_bytes = c.cache_bytes, .jit_pool = c.step_pool};
      st = cli_pool(ctx, o->threads, &s.pool);
      if (!st) st = cli_run_stepwise(ctx, g, &s, &w, &io, o->chunk, ws, &tf);
      bcrt_pool_free(s.pool);
    } else if (!st) {
      bcrt_pool *pool = NULL;
      st = cli_pool(ctx, o->threads, &pool);
      double t2 = cli_now_ms();
      if (!st) st = run_status(ctx, c.run_pool((const float *const *)w.p, io.p, io.rt, ws, pool));
      tf = cli_now_ms() - t2;
      bcrt_pool_free(pool);
    }
  } else if (!st) {
    st = cli_run_aot_io(ctx, o, g, &w, &io, &tc, &tf);
  }
  if (!st) {
    st = cli_io_write(ctx, o, g, &io);
    long used = o->stepwise ? cli_step_chunk(g, &io, o->chunk) : 0;
    const char *clamped = o->chunk > used ? bc_fmt(ctx, ", --chunk %ld is past the sequence",
                                                   o->chunk) : "";
    if (o->stepwise)
      printf("backend %s  stepwise (chunk %ld%s)  load %.2f ms  compile %.2f ms  steps %.2f ms\n",
             cli_backend_name(o->backend), used, clamped, t1 - t0, tc, tf);
    else
      printf("backend %s  load %.2f ms  compile %.2f ms  forward %.2f ms\n",
             cli_backend_name(o->backend), t1 - t0,
             tc, tf);
  }
  bcD_free(&c);
  free(ws);
  cli_io_free(&io);
  bcW_free(&w);
  return st;
}

int cli_emit_c(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = cli_load(ctx, o);
  if (!g) return BC_EINPUT;
  int st = bcO_run_until(g, NULL);
  if (st) return st;
  bc_emit_opts eo = {0};
  char *c = bcE_emit_c(ctx, g, &eo);
  if (!c) return BC_EINTERNAL;
  if ((st = cli_layer_notes(ctx, o, g))) return st;
  fputs(c, stdout);
  return BC_OK;
}
