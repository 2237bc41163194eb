// cli.c — what each blockc command does, on top of the library.
//
// Commands load the graph (with -D overrides), then hand it to the stage
// they are about: the checker (check), the IR printer (dump), a backend
// (run), the emitter (emit-c). Weights and inputs come from files or a
// seeded generator so any run can be reproduced from its command line.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int n);  // OpenBLAS; cblas.h is not included

void cli_set_threads(int n) { openblas_set_num_threads(n); }

double cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bc_graph *load(bc_ctx *ctx, const cli_opts *o) {
  return bcP_parse_file(ctx, o->graph, o->defs, o->ndefs);
}

int cli_check(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = load(ctx, o);
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
  bc_graph *g = load(ctx, o);
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

// Weights from --weights, or the seeded deterministic init.
int cli_weights(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bc_weights *w) {
  if (o->weights) return bcW_load(ctx, g, o->weights, w);
  return bcW_init_random(ctx, g, o->seed, w);
}

// Input from --input (shape must match the graph's input), or N(0, 1)
// drawn from a stream seeded differently from the weights'.
int cli_input(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, float **x) {
  const bc_shape *want = &g->vals[g->input].shape;
  if (o->input) {
    bc_shape s;
    // The shape is checked against the graph's before any data is read.
    int st = bcN_read_expect(ctx, o->input, want, o->graph, &s, x);
    if (st) return st;
    for (int64_t i = 0, n = bc_shape_numel(&s); i < n; i++)
      if (!isfinite((*x)[i])) {
        free(*x);
        *x = NULL;
        return bc_error(ctx, BC_EINPUT, "%s: error: input element %lld is not finite",
                        o->input, (long long)i);
      }
    return BC_OK;
  }
  int64_t n = bc_shape_numel(want);
  *x = malloc((size_t)n * sizeof(float));
  if (!*x) return bc_error(ctx, BC_ENOMEM, "error: out of memory for the input");
  bc_rng r;
  bc_rng_seed(&r, o->seed ^ 0x9e3779b97f4a7c15ULL);
  for (int64_t i = 0; i < n; i++) (*x)[i] = (float)bc_rng_normal(&r);
  return BC_OK;
}

// Shape, mean, std, min, max and a few leading values of the output.
void cli_print_stats(const bc_shape *s, const float *y) {
  int64_t n = bc_shape_numel(s);
  double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
  int64_t nonfinite = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = y[i];
    if (!isfinite(v)) {
      nonfinite++;
      continue;
    }
    sum += v;
    sq += v * v;
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  int64_t m = n - nonfinite;
  double mean = m ? sum / (double)m : 0, var = m ? sq / (double)m - mean * mean : 0;
  char buf[96];
  printf("output %s  mean %.6g  std %.6g  min %.6g  max %.6g\n", bc_shape_str(s, buf, sizeof buf),
         mean, sqrt(var > 0 ? var : 0), mn, mx);
  printf("first  ");
  for (int64_t i = 0; i < n && i < 6; i++) printf(" %.6f", y[i]);
  printf("\n");
  if (nonfinite) printf("warning: %lld output values are not finite\n", (long long)nonfinite);
}

// Passes, plan, emit, tcc: the graph becomes a callable forward function.
int cli_compile_jit(bc_ctx *ctx, bc_graph *g, const bc_emit_opts *eo, bc_jit **j,
                    bc_forward_fn *fn) {
  int st = g->planned ? BC_OK : bcO_run_until(g, NULL);
  if (st) return st;
  char *c = bcE_emit_c(ctx, g, eo);
  if (!c) return BC_EINTERNAL;
  return bcJ_compile(ctx, c, bc_fmt(ctx, "%s_forward", g->model), j, fn);
}

// Workspace for a planned graph: 64-byte aligned, as the emitter assumes.
void *cli_workspace(bc_ctx *ctx, const bc_graph *g) {
  size_t bytes = (size_t)bcM_workspace_bytes(g);
  void *ws = aligned_alloc(64, bytes);
  if (!ws) bc_error(ctx, BC_ENOMEM, "error: cannot allocate a %zu-byte workspace", bytes);
  return ws;
}

int cli_run(bc_ctx *ctx, const cli_opts *o) {
  double t0 = cli_now_ms();
  bc_graph *g = load(ctx, o);
  if (!g) return BC_EINPUT;
  bc_weights w = {0};
  float *x = NULL, *y = NULL;
  bc_jit *j = NULL;
  bc_forward_fn fn = NULL;
  void *ws = NULL;
  int st = cli_weights(ctx, o, g, &w);
  if (!st) st = cli_input(ctx, o, g, &x);
  const bc_shape *os = &g->vals[g->output].shape;
  if (!st && !(y = malloc((size_t)bc_shape_numel(os) * sizeof(float))))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory for the output");
  double t1 = cli_now_ms(), tc = 0, tf = 0;
  if (!st && !strcmp(o->backend, "interp")) {
    st = bcR_run(ctx, g, &w, x, y);
    tf = cli_now_ms() - t1;
  } else if (!st && !strcmp(o->backend, "jit")) {
    bc_emit_opts eo = {0};
    st = cli_compile_jit(ctx, g, &eo, &j, &fn);
    tc = cli_now_ms() - t1;
    if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
    if (!st) {
      cli_set_threads(o->threads);
      double t2 = cli_now_ms();
      st = fn((const float *const *)w.p, x, y, ws) ? BC_EINTERNAL : BC_OK;
      tf = cli_now_ms() - t2;
    }
  } else if (!st && !strcmp(o->backend, "aot")) {
    st = cli_run_aot(ctx, o, g, &w, x, y, &tc, &tf);
  } else if (!st) {
    st = bc_error(ctx, BC_EUSAGE, "blockc: error: backend '%s' is not available in this build",
                  o->backend);
  }
  if (!st) {
    cli_print_stats(os, y);
    printf("backend %s  load %.2f ms  compile %.2f ms  forward %.2f ms\n", o->backend, t1 - t0,
           tc, tf);
    if (o->output) st = bcN_write(ctx, o->output, os, y);
  }
  bcJ_free(j);
  free(ws);
  free(x);
  free(y);
  bcW_free(&w);
  return st;
}

int cli_emit_c(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = load(ctx, o);
  if (!g) return BC_EINPUT;
  int st = bcO_run_until(g, NULL);
  if (st) return st;
  bc_emit_opts eo = {0};
  char *c = bcE_emit_c(ctx, g, &eo);
  if (!c) return BC_EINTERNAL;
  fputs(c, stdout);
  return BC_OK;
}
