// bench.c — `blockc bench`: where the time goes, from graph file to forward.
//
// Reports the front end (parse, passes + plan, emit), the tcc compile, the
// forward pass (median of --iters runs after two warm-ups) and the same
// GEMM sequence with every elementwise kernel left out (the gemm-only
// build): their ratio is the overhead blockc adds on top of BLAS.  When the
// emitted backward covers the graph, the training step too (time_step): the
// backward's time next to its own GEMM floor.  For
// scale it also times an optimising compiler (`cc -O2 -c`, or --cc) on the
// same C.  --profile builds the profiling variant of the forward, whose
// hook runs before each node, and prints the time per node.  Every build
// goes through the compile driver (bcD_compile) and is called through its
// <model>_run entry, so graphs with several inputs and run-time dims bench
// too: a run-time dim runs at its bound, or at --length NAME=VALUE.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "blockc_rt.h"  // bcrt_pool

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


// One call's arguments: io pointers, run-time dims, workspace.
typedef struct {
  void **io;
  long *rt;
  void *ws;
} bench_io;

typedef struct {
  double compile_parse, compile_passes, compile_emit, compile_tcc;
  double forward, gemm, cc_ms;   // cc_ms < 0: not measured
  double forward_cpu;            // median thread CPU time of forward (robust on a busy machine)
  double aot_forward, aot_build; // < 0: the AOT module could not be built
  double ratio;                  // median of per-run forward/gemm ratios
  // The training step (emitted backward; step_ms < 0: the graph has none):
  // the whole step and its forward half, each in full and GEMMs-only.
  double step_ms, step_gemm, half_ms, half_gemm, bwd_ms, bwd_gemm, bwd_ratio;
  double bwd_cpu, bwd_gemm_cpu, half_cpu;  // the same from thread CPU time
  int64_t bwd_ws_bytes;
  int64_t arena_floats, packed_floats;
  double floor, floor_cpu;       // one read of every weight (cli_read_floor_ms), same run
  int64_t weight_bytes;
} bench_result;

// Times the full forward and the GEMM-only forward alternately, iters
// pairs after two warm-ups (page faults, BLAS buffers): on a noisy machine
// both then see the same disturbances, so their ratio is meaningful. The
// ratio reported is the median of the per-pair ratios.
static int time_pair(bc_ctx *ctx, bc_run_pool_fn fn, bc_run_pool_fn fg, bcrt_pool *pool,
                     const bc_weights *w, const float *const *wgp, const bench_io *a, int iters,
                     const cli_floor *fl, bench_result *r) {
  double *t = malloc((size_t)iters * 6 * sizeof *t);
  if (!t) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  double *tg = t + iters, *tr = t + 2 * iters, *tc = t + 3 * iters, *tf = t + 4 * iters,
         *tfc = t + 5 * iters;
  const float *const *wp = (const float *const *)w->p;
  if (!wgp) wgp = wp;
  int st = 0;
  for (int i = 0; i < 2; i++)
    st |= fn(wp, a->io, a->rt, a->ws, pool) | fg(wgp, a->io, a->rt, a->ws, pool);
  for (int i = 0; i < iters; i++) {
    double c0 = cli_cpu_ms(), t0 = cli_now_ms();
    fn(wp, a->io, a->rt, a->ws, pool);
    double t1 = cli_now_ms();
    tc[i] = cli_cpu_ms() - c0;
    fg(wgp, a->io, a->rt, a->ws, pool);
    double t2 = cli_now_ms();
    t[i] = t1 - t0;
    tg[i] = t2 - t1;
    tr[i] = t[i] / tg[i];
    cli_floor_sample(fl, &tf[i], &tfc[i]);  // the weight-read floor, in the same stretch
  }
  r->forward = cli_median(t, iters);
  r->gemm = cli_median(tg, iters);
  r->ratio = cli_median(tr, iters);
  r->forward_cpu = cli_median(tc, iters);
  r->floor = cli_median(tf, iters);
  r->floor_cpu = cli_median(tfc, iters);
  r->weight_bytes = fl->bytes;
  // The GEMM-only build leaves the outputs unwritten: run the real one last.
  st |= fn(wp, a->io, a->rt, a->ws, pool);
  free(t);
  if (st) return bc_error(ctx, BC_EINTERNAL, "internal error: the compiled run returned an error");
  return BC_OK;
}

// --- the training step ----------------------------------------------
//
// Four builds of <model>_backward: the whole step (forward keeping
// activations, then the backward), the step with every elementwise kernel
// left out (its GEMMs alone), and both stopped after the forward half.
// They run round-robin, iters rounds after two warm-ups, so all four see
// the same disturbances; the backward is the step minus its forward half
// (median of the per-round differences), its GEMM floor likewise.
enum { STEP, STEP_GEMM, HALF, HALF_GEMM, NSTEP };

static int time_step(bc_ctx *ctx, bc_graph *g, const bc_weights *w, const bench_io *a,
                     int iters, int64_t max_memory, bcrt_pool *pool, bench_result *r) {
  bc_compiled c[NSTEP] = {{0}};
  int st = BC_OK;
  for (int k = 0; k < NSTEP && !st; k++) {
    bc_emit_opts eo = {.backward = true, .gemm_only = k == STEP_GEMM || k == HALF_GEMM,
                       .backward_fwd_only = k == HALF || k == HALF_GEMM};
    st = bcD_compile(ctx, g, &eo, &c[k]);
  }
  // Besides the forward's buffers: the step's workspace and the gradients.
  bc_mem_use use = {.forward = true, .backward_bytes = st ? 0 : c[STEP].bwd_ws_bytes,
                    .grads = true, .what = "bench --train"};
  if (!st) st = bcW_check_memory_use(ctx, g, &use, max_memory);
  float **dy = calloc((size_t)g->noutputs, sizeof *dy);
  bc_weights dw = {0};
  void *ws = NULL;
  double *t = calloc((size_t)iters * (2 * NSTEP + 4), sizeof *t), *tc = t + (NSTEP + 2) * iters;
  if (!st && (!dy || !t)) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) st = bcW_init_random(ctx, g, 1, &dw);  // any arrays of the right sizes
  for (int i = 0; !st && i < g->noutputs; i++) {
    bc_shape s = bcI_shape_at(g, &g->vals[g->outputs[i]].shape, a->rt);
    int64_t n = bc_shape_numel(&s);
    if (!(dy[i] = malloc((size_t)(n ? n : 1) * sizeof(float))))
      st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    for (int64_t k = 0; !st && k < n; k++) dy[i][k] = (float)((k * 7919) % 17) / 8.0f - 1.0f;
  }
  if (!st && !(ws = aligned_alloc(64, (size_t)c[STEP].bwd_ws_bytes)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory for the backward workspace");
  const float *const *wp = (const float *const *)w->p;
  for (int i = -2; !st && i < iters; i++)
    for (int k = 0; k < NSTEP; k++) {
      double c0 = cli_cpu_ms(), t0 = cli_now_ms();
      int rc = c[k].backward_pool(wp, a->io, a->rt, (const float *const *)dy, dw.p, NULL, 0, 0, 0,
                                  ws, pool);
      if (i >= 0) {
        t[k * iters + i] = cli_now_ms() - t0;
        tc[k * iters + i] = cli_cpu_ms() - c0;
      }
      if (rc) st = bc_error(ctx, BC_EINTERNAL, "internal error: the backward returned %d", rc);
    }
  if (!st) {
    double *bd = t + NSTEP * iters, *bg = bd + iters;
    for (int i = 0; i < iters; i++) {
      bd[i] = t[STEP * iters + i] - t[HALF * iters + i];
      bg[i] = t[STEP_GEMM * iters + i] - t[HALF_GEMM * iters + i];
    }
    r->step_ms = cli_median(t + STEP * iters, iters);
    r->step_gemm = cli_median(t + STEP_GEMM * iters, iters);
    r->half_ms = cli_median(t + HALF * iters, iters);
    r->half_gemm = cli_median(t + HALF_GEMM * iters, iters);
    r->bwd_ms = cli_median(bd, iters);
    r->bwd_gemm = cli_median(bg, iters);
    r->bwd_ratio = r->bwd_gemm > 0 ? r->bwd_ms / r->bwd_gemm : 0;
    double *cd = tc + NSTEP * iters, *cg = cd + iters;
    for (int i = 0; i < iters; i++) {
      cd[i] = tc[STEP * iters + i] - tc[HALF * iters + i];
      cg[i] = tc[STEP_GEMM * iters + i] - tc[HALF_GEMM * iters + i];
    }
    r->bwd_cpu = cli_median(cd, iters);
    r->bwd_gemm_cpu = cli_median(cg, iters);
    r->half_cpu = cli_median(tc + HALF * iters, iters);
    r->bwd_ws_bytes = c[STEP].bwd_ws_bytes;
    // The GEMM-only builds leave the outputs unwritten: run the real one last.
    st = c[STEP].backward_pool(wp, a->io, a->rt, (const float *const *)dy, dw.p, NULL, 0, 0, 0, ws,
                               pool)
             ? bc_error(ctx, BC_EINTERNAL, "internal error: the backward failed")
             : BC_OK;
  }
  for (int i = 0; dy && i < g->noutputs; i++) free(dy[i]);
  free(dy);
  free(t);
  free(ws);
  bcW_free(&dw);
  for (int k = 0; k < NSTEP; k++) bcD_free(&c[k]);
  return st;
}

// Compiles src with `cc -O2 -c` (no shell: bc_spawn_wait) and returns the
// wall time in ms, or -1 if the compiler is missing or fails.
static double time_cc(const char *cc, const char *src) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096], path[4200], obj[4200];
  snprintf(dir, sizeof dir, "%s/blockc-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return -1;
  snprintf(path, sizeof path, "%s/forward.c", dir);
  snprintf(obj, sizeof obj, "%s/forward.o", dir);
  double ms = -1;
  FILE *f = fopen(path, "w");
  bool ok = f && fputs(src, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  if (ok) {
    // The object goes beside the source, never to /dev/null: some
    // compilers (tcc) unlink their output first, which as root would
    // replace /dev/null with a regular file.
    char *argv[] = {(char *)cc, "-O2", "-w", "-c", path, "-o", obj, NULL};
    int err;
    double t0 = cli_now_ms();
    if (bc_spawn_wait(argv, "/dev/null", &err) == 0) ms = cli_now_ms() - t0;
  }
  unlink(path);
  unlink(obj);
  rmdir(dir);
  return ms;
}

// --- per-node profile ---------------------------------------------------------

typedef struct {
  double *acc;    // ms per node, summed over runs
  double last;
  int prev, n;
} prof_state;

static void prof_mark(void *pctx, int node) {
  prof_state *p = pctx;
  double now = cli_now_ms();
  if (p->prev >= 0 && p->prev < p->n) p->acc[p->prev] += now - p->last;
  p->prev = node;
  p->last = now;
}

typedef struct { int node; double ms; } node_time;

static int cmp_node_time(const void *a, const void *b) {
  const node_time *x = a, *y = b;
  return (x->ms < y->ms) - (x->ms > y->ms);
}

static void print_profile(const bc_graph *g, const double *acc, int iters, FILE *out) {
  double total = 0, per_op[BC_OP_COUNT] = {0};
  node_time *nt = malloc((size_t)(g->nnodes ? g->nnodes : 1) * sizeof *nt);
  if (!nt) return;
  for (int i = 0; i < g->nnodes; i++) {
    nt[i] = (node_time){i, acc[i] / iters};
    total += nt[i].ms;
    per_op[g->nodes[i].op] += nt[i].ms;
  }
  fprintf(out, "profile (mean of %d runs, %.3f ms total):\n", iters, total);
  for (int op = 0; op < BC_OP_COUNT; op++)
    if (per_op[op] > 0)
      fprintf(out, "  %-18s %9.3f ms  %5.1f%%\n", bcI_op_name((bc_op)op), per_op[op],
              total > 0 ? 100 * per_op[op] / total : 0);
  qsort(nt, (size_t)g->nnodes, sizeof *nt, cmp_node_time);
  int show = g->nnodes < 15 ? g->nnodes : 15;
  fprintf(out, "  slowest nodes:\n");
  for (int i = 0; i < show; i++) {
    const bc_node *n = &g->nodes[nt[i].node];
    fprintf(out, "    n%-5d %-18s %9.3f ms  line %d\n", n->id, bcI_op_name(n->op), nt[i].ms,
            n->loc.line);
  }
  free(nt);
}

static int run_profile(bc_ctx *ctx, bc_graph *g, const bc_weights *w, const bench_io *a,
                       int iters, FILE *out) {
  bc_emit_opts eo = {.profile = true};
  bc_compiled c;
  int st = bcD_compile(ctx, g, &eo, &c);
  if (st) return st;
  prof_state p = {.acc = calloc((size_t)g->nnodes + 1, sizeof(double)), .prev = -1, .n = g->nnodes};
  if (!p.acc) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < iters + 1; i++) {
    if (i == 1) memset(p.acc, 0, (size_t)g->nnodes * sizeof(double));  // drop the warm-up
    p.prev = -1;
    c.profile((const float *const *)w->p, a->io, a->rt, a->ws, prof_mark, &p);
  }
  if (!st) print_profile(g, p.acc, iters, out);
  free(p.acc);
  bcD_free(&c);
  return st;
}

// --- output -------------------------------------------------------------------

static void print_result(const cli_opts *o, const bc_graph *g, const bench_result *r,
                         const long *rt, FILE *out) {
  double compile = r->compile_parse + r->compile_passes + r->compile_emit + r->compile_tcc;
  if (o->json) {
    fprintf(out, "{\"graph\": ");
    cli_json_str(o->graph, out);
    fprintf(out, ", \"model\": ");
    cli_json_str(g->model, out);
    fprintf(out,
            ", \"backend\": \"jit\", \"threads\": %d, \"iters\": %d, \"compile_ms\": %.4f, "
            "\"parse_ms\": %.4f, \"passes_ms\": %.4f, \"emit_ms\": %.4f, \"tcc_ms\": %.4f, "
            "\"forward_ms\": %.4f, \"forward_cpu_ms\": %.4f, \"gemm_ms\": %.4f, \"ratio\": %.4f, "
            "\"cc_O2_ms\": ",
            o->threads, o->iters, compile, r->compile_parse, r->compile_passes, r->compile_emit,
            r->compile_tcc, r->forward, r->forward_cpu, r->gemm, r->ratio);
    if (r->cc_ms >= 0) fprintf(out, "%.4f", r->cc_ms);
    else fprintf(out, "null");
    fprintf(out, ", \"aot_forward_ms\": ");
    if (r->aot_forward >= 0) fprintf(out, "%.4f", r->aot_forward);
    else fprintf(out, "null");
    if (r->step_ms >= 0)
      fprintf(out, ", \"train_step_ms\": %.4f, \"train_step_gemm_ms\": %.4f, \"step_forward_ms\": "
              "%.4f, \"backward_ms\": %.4f, \"backward_gemm_ms\": %.4f, \"backward_ratio\": %.4f, "
              "\"backward_arena_bytes\": %lld, \"backward_cpu_ms\": %.4f, \"backward_gemm_cpu_ms\": %.4f",
              r->step_ms, r->step_gemm, r->half_ms, r->bwd_ms, r->bwd_gemm, r->bwd_ratio,
              (long long)r->bwd_ws_bytes, r->bwd_cpu, r->bwd_gemm_cpu);
    else
      fprintf(out, ", \"backward_ms\": null");
    fprintf(out, ", \"arena_bytes\": %lld, \"packed_bytes\": %lld, \"weight_bytes\": %lld, "
            "\"read_floor_ms\": %.4f, \"read_floor_cpu_ms\": %.4f, \"forward_over_floor\": %.3f, "
            "\"forward_over_floor_cpu\": %.3f, \"lengths\": {",
            (long long)r->arena_floats * 4, (long long)r->packed_floats * 4,
            (long long)r->weight_bytes, r->floor, r->floor_cpu,
            r->floor > 0 ? r->forward / r->floor : 0,
            r->floor_cpu > 0 ? r->forward_cpu / r->floor_cpu : 0);
    for (int i = 0, k = 0; i < g->ndims; i++)
      if (g->dims[i].rt >= 0) {
        fprintf(out, k++ ? ", " : "");
        cli_json_str(g->dims[i].name, out);
        fprintf(out, ": %ld", rt[g->dims[i].rt]);
      }
    fprintf(out, "}}\n");
    return;
  }
  fprintf(out, "%s: model %s, %d nodes, workspace %.2f MiB, packed weights %.2f MiB, %d "
          "thread%s\n", o->graph, g->model, g->nnodes, (double)r->arena_floats * 4 / (1 << 20),
          (double)r->packed_floats * 4 / (1 << 20), o->threads, o->threads == 1 ? "" : "s");
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0)
      fprintf(out, "run-time dim %s = %ld (bound %lld)\n", g->dims[i].name, rt[g->dims[i].rt],
              (long long)g->dims[i].value);
  fprintf(out, "compile  %8.3f ms  (parse %.3f, passes+plan %.3f, emit %.3f, tcc %.3f)\n",
          compile, r->compile_parse, r->compile_passes, r->compile_emit, r->compile_tcc);
  if (r->cc_ms >= 0) fprintf(out, "cc -O2   %8.3f ms  (same C, for comparison)\n", r->cc_ms);
  fprintf(out, "forward  %8.3f ms  (median of %d; thread CPU time %.3f ms)\n", r->forward, o->iters,
          r->forward_cpu);
  if (r->aot_forward >= 0)
    fprintf(out, "aot      %8.3f ms  (median of %d; cc -O3 module, %s)\n", r->aot_forward, o->iters,
            r->aot_build > 0 ? "built now" : "cached");
  fprintf(out, "gemm     %8.3f ms  (GEMMs only)\n", r->gemm);
  fprintf(out, "floor    %8.3f ms  (one read of the %.1f MB of weights; thread CPU %.3f ms)  "
          "forward/floor %.2fx (CPU %.2fx)\n", r->floor, (double)r->weight_bytes / 1e6,
          r->floor_cpu, r->floor > 0 ? r->forward / r->floor : 0,
          r->floor_cpu > 0 ? r->forward_cpu / r->floor_cpu : 0);
  fprintf(out, "ratio    %8.3f  (median of per-run forward/gemm, runs alternated)\n", r->ratio);
  if (r->step_ms < 0) {
    fprintf(out, o->train ? "backward (none: the emitted backward does not cover this graph)\n"
                          : "backward (not timed: --train times the training step)\n");
    return;
  }
  fprintf(out, "train step %8.3f ms  (forward keeping activations %.3f + backward; GEMMs only "
          "%.3f; workspace %.2f MiB)\n", r->step_ms, r->half_ms, r->step_gemm,
          (double)r->bwd_ws_bytes / (1 << 20));
  fprintf(out, "backward   %8.3f ms  (step minus its forward half, median of %d; thread CPU "
          "time %.3f ms)\n", r->bwd_ms, o->iters, r->bwd_cpu);
  fprintf(out, "bwd gemm   %8.3f ms  (the same GEMMs, kernels left out; CPU %.3f ms)  ratio %.3f "
          "(CPU %.3f)\n", r->bwd_gemm, r->bwd_gemm_cpu, r->bwd_ratio,
          r->bwd_gemm_cpu > 0 ? r->bwd_cpu / r->bwd_gemm_cpu : 0);
}

// --- the command -----------------------------------------------------------------

// tcc compile time: median of 5 (it is ~1 ms, so one sample is noisy).
static int tcc_timed(bc_ctx *ctx, const char *src, double *ms) {
  double t[5];
  for (int i = 0; i < 5; i++) {
    bc_jit *j = NULL;
    double t0 = cli_now_ms();
    int st = bcJ_compile_module(ctx, src, &j);
    t[i] = cli_now_ms() - t0;
    bcJ_free(j);
    if (st) return st;
  }
  *ms = cli_median(t, 5);
  return BC_OK;
}

// The value of every run-time dim: its bound, or --length NAME=VALUE.
// The run's arrays (cli_io_bind: --input files, seeded random otherwise,
// run-time dims from the files or --length, else their bounds) and a
// workspace.
static int bench_buffers(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, cli_io *io,
                         bench_io *a) {
  int st = cli_io_bind(ctx, o, g, io);
  if (st) return st;
  a->io = io->p;
  a->rt = g->nrt ? io->rt : NULL;
  return (a->ws = cli_workspace(ctx, g)) ? BC_OK : BC_ENOMEM;
}

int cli_bench(bc_ctx *ctx, const cli_opts *o) {
  if (o->decode) return cli_bench_decode(ctx, o);
  if (o->given[CLI_OPT_BATCH])
    return bc_error(ctx, BC_EUSAGE, "blockc: error: bench --batch needs --decode (the rows "
                    "decoded together; -D sets a batch dim otherwise)");
  bench_result r = {.cc_ms = -1, .aot_forward = -1, .aot_build = -1, .step_ms = -1};
  double t0 = cli_now_ms();
  bc_graph *g = bcP_parse_file(ctx, o->graph, o->defs, o->ndefs);
  if (!g) return BC_EINPUT;
  g->weight_type = o->weight_type;
  if (o->weight_type && (o->profile || o->train))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: bench --weight-dtype %s: --profile and --train "
                    "time f32 builds only", bc_weight_type_name(o->weight_type));
  double t1 = cli_now_ms();
  int st = bcO_run_until(g, NULL);
  if (st) return st;
  double t2 = cli_now_ms();
  bc_emit_opts eo = {0}, go = {.gemm_only = true};
  char *src = bcE_emit_c(ctx, g, &eo);
  double t3 = cli_now_ms();
  if (!src) return BC_EINTERNAL;
  r.compile_parse = t1 - t0;
  r.compile_passes = t2 - t1;
  r.compile_emit = t3 - t2;
  r.arena_floats = g->arena_floats;
  r.packed_floats = bcY_packed_floats(g);

  bc_compiled full = {0}, gemm = {0};
  bc_weights w = {0};
  cli_floor fl = {0};
  bench_io a = {0};
  cli_io io = {0};
  st = tcc_timed(ctx, src, &r.compile_tcc);
  if (!st) st = bcD_compile(ctx, g, &eo, &full);
  // The GEMM floor is the f32 one (with a weight type, what the forward is
  // measured against), on the parameters alone (no packed copy: cblas).
  float **wg = NULL;
  if (!st) {
    g->weight_type = BC_WT_F32;
    st = bcD_compile(ctx, g, &go, &gemm);
    g->weight_type = o->weight_type;
  }
  if (!st) st = cli_weights(ctx, o, g, &w);
  if (!st) st = bcD_pack(ctx, &full, &w);  // the f32 gemm-only build reads the same blocks
  if (!st && o->weight_type) {
    if (!(wg = malloc((size_t)(w.n + 1) * sizeof *wg))) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    for (int i = 0; !st && i < w.n; i++) wg[i] = w.p[i];
    if (wg) wg[w.n] = NULL;
  }
  if (!st) st = cli_floor_init(ctx, &fl, g, &w, 0, 0);
  if (!st) st = bench_buffers(ctx, o, g, &io, &a);
  if (!st) {
    bcrt_pool *pool = NULL;
    st = cli_pool(ctx, o->threads, &pool);
    if (!st)
      st = time_pair(ctx, full.run_pool, gemm.run_pool, pool, &w, (const float *const *)wg, &a,
                     o->iters, &fl, &r);
    // The training step on the same pool: its products and attention split over it.
    if (!st && o->train && bcG_check(NULL, g) == BC_OK)
      st = time_step(ctx, g, &w, &a, o->iters, o->max_memory, pool, &r);
    bcrt_pool_free(pool);
  }
  if (!st) r.cc_ms = time_cc(o->cc ? o->cc : "cc", src);
  // AOT column: not fatal (a machine without a C compiler still benches the JIT).
  if (!st && cli_bench_aot(ctx, o, g, &w, a.io, a.rt, a.ws, &r.aot_build, &r.aot_forward))
    fprintf(stderr, "blockc: note: no AOT column (the AOT module could not be built)\n");
  if (!st) print_result(o, g, &r, io.rt, stdout);
  fflush(stdout);
  if (!st && o->profile) st = run_profile(ctx, g, &w, &a, o->iters, o->json ? stderr : stdout);
  cli_floor_free(&fl);
  free(wg);
  bcD_free(&full);
  bcD_free(&gemm);
  free(a.ws);
  cli_io_free(&io);
  bcW_free(&w);
  return st;
}
