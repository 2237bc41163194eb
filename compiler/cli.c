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

void cli_json_str(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p < 0x20 || *p > 0x7e) fprintf(out, "\\u%04x", *p);  // bytes, not code points
    else fputc(*p, out);
  }
  fputc('"', out);
}

void cli_json_num(double v, FILE *out) {
  if (isfinite(v)) fprintf(out, "%.17g", v);
  else fputs("null", out);
}

int cli_layer_notes(bc_ctx *ctx, const cli_opts *o, const bc_graph *g) {
  if (!o->verbose) return BC_OK;
  const char *notes = bcE_layer_notes(ctx, g), *bwd = o->backward ? bcG_layer_note(ctx, g) : "";
  if (!notes || !bwd) return BC_EINTERNAL;
  if (*bwd) notes = bc_fmt(ctx, "%s%s\n", notes, bwd);
  for (const char *p = notes; *p;) {
    const char *e = strchr(p, '\n');
    fprintf(stderr, "%s: note: %.*s\n", g->path ? g->path : g->model, (int)(e - p), p);
    p = e + 1;
  }
  if (!*notes) fprintf(stderr, "%s: note: every layer is in the layer loop\n", g->path ? g->path : g->model);
  return BC_OK;
}

double cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

// CPU time of the calling thread in ms: with one BLAS thread all the work
// runs there, so other processes on the machine barely change it.
double cli_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
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
// The memory budget (--max-memory) is checked before anything is allocated.
int cli_weights(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bc_weights *w) {
  int st = bcW_check_memory(ctx, g, o->max_memory);
  if (st) return st;
  if (!o->weights) return bcW_init_random(ctx, g, o->seed, w);
  bc_load_opts lo = {.allow_extra = o->allow_extra, .prefix = o->weights_prefix,
                     .max_memory = o->max_memory};
  st = bcW_load_opts(ctx, g, o->weights, &lo, w);
  if (!st && lo.ignored)
    fprintf(stderr, "blockc: note: %s: ignored %d tensor%s the graph does not use (--allow-extra)\n",
            o->weights, lo.ignored, lo.ignored == 1 ? "" : "s");
  return st;
}

// --- binding the run's arrays to the graph ------------------------------------

static const char *io_name(const bc_graph *g, int i) {
  return i < g->ninputs ? g->vals[g->inputs[i]].name : g->output_names[i - g->ninputs];
}

static int io_value(const bc_graph *g, int i) {
  return i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
}

// "x, mem, len": the names of the graph's inputs (or outputs).
static const char *name_list(bc_ctx *ctx, const bc_graph *g, bool inputs) {
  const char *s = "";
  int lo = inputs ? 0 : g->ninputs, hi = inputs ? g->ninputs : g->ninputs + g->noutputs;
  for (int i = lo; i < hi; i++) s = bc_fmt(ctx, "%s%s%s", s, i > lo ? ", " : "", io_name(g, i));
  return s;
}

// The --input/--output entry for array i of the graph, or NULL.  A bare FILE
// stands for the only float input (or the only output).
static const cli_file *file_for(const cli_opts *o, const bc_graph *g, int i) {
  bool in = i < g->ninputs;
  const cli_file *f = in ? o->inputs : o->outputs;
  int n = in ? o->ninputs : o->noutputs;
  for (int k = 0; k < n; k++)
    if (f[k].name ? !strcmp(f[k].name, io_name(g, i)) : g->vals[io_value(g, i)].type == BC_VT_F32)
      return &f[k];
  return NULL;
}

// Every --input/--output names an array the graph has, and a bare FILE is
// only used where it is unambiguous.
static int check_names(bc_ctx *ctx, const cli_opts *o, const bc_graph *g) {
  int nfloat = 0;
  for (int i = 0; i < g->ninputs; i++) nfloat += g->vals[g->inputs[i]].type == BC_VT_F32;
  for (int side = 0; side < 2; side++) {
    const cli_file *f = side ? o->outputs : o->inputs;
    int n = side ? o->noutputs : o->ninputs, count = side ? g->noutputs : nfloat;
    const char *what = side ? "output" : "input";
    for (int k = 0; k < n; k++) {
      if (!f[k].name && count != 1)
        return bc_error(ctx, BC_EUSAGE,
                        "blockc: error: --%s %s: %s has %d %s%ss (%s); name one with --%s "
                        "NAME=FILE",
                        what, f[k].path, o->graph, count, side ? "" : "float ", what,
                        name_list(ctx, g, !side), what);
      if (!f[k].name) continue;
      bool found = false;
      int lo = side ? g->ninputs : 0, hi = side ? g->ninputs + g->noutputs : g->ninputs;
      for (int i = lo; i < hi; i++) found |= !strcmp(io_name(g, i), f[k].name);
      if (!found)
        return bc_error(ctx, BC_EUSAGE, "blockc: error: --%s %s=...: %s has no %s '%s' (its %ss: %s)",
                        what, f[k].name, o->graph, what, f[k].name, what, name_list(ctx, g, !side));
    }
  }
  return BC_OK;
}

// Takes run-time dim values from an input array's actual shape s, checking
// them against values other inputs already gave.
static int take_rt(bc_ctx *ctx, const bc_graph *g, int i, const bc_shape *s, const char *path,
                   long *rt, const char **from) {
  const bc_shape *want = &g->vals[io_value(g, i)].shape;
  for (int a = 0; a < want->rank; a++) {
    if (!want->sym[a]) continue;
    const bc_dim *d = &g->dims[want->sym[a] - 1];
    if (from[d->rt] && rt[d->rt] != s->d[a])
      return bc_error(ctx, BC_EINPUT,
                      "%s: error: input '%s' has %s = %lld (axis %d), but '%s' has %s = %ld",
                      path, io_name(g, i), d->name, (long long)s->d[a], a, from[d->rt], d->name,
                      rt[d->rt]);
    rt[d->rt] = (long)s->d[a];
    from[d->rt] = io_name(g, i);
  }
  return BC_OK;
}

static int read_float_input(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, int i,
                            const char *path, cli_io *io, long *rt, const char **from) {
  const bc_shape *want = &g->vals[io_value(g, i)].shape;
  const char *who = g->ninputs == 1 ? o->graph : bc_fmt(ctx, "%s (input '%s')", o->graph, io_name(g, i));
  float *x;
  int st = bcN_read_expect(ctx, path, want, who, &io->shape[i], &x);
  if (st) return st;
  io->p[i] = x;
  int64_t n = bc_shape_numel(&io->shape[i]);
  for (int64_t k = 0; k < n; k++)
    if (!isfinite(x[k]))
      return bc_error(ctx, BC_EINPUT, "%s: error: input %s%s%selement %lld is not finite", path,
                      g->ninputs > 1 ? "'" : "", g->ninputs > 1 ? io_name(g, i) : "",
                      g->ninputs > 1 ? "' " : "", (long long)k);
  return take_rt(ctx, g, i, &io->shape[i], path, rt, from);
}

static int read_lengths(bc_ctx *ctx, const bc_graph *g, int i, const char *path, cli_io *io) {
  int32_t *len;
  bc_shape s;
  int st = bcN_read_i32(ctx, path, &s, &len);
  if (st) return st;
  io->p[i] = len;
  bc_shape want = bcI_shape_at(g, &g->vals[io_value(g, i)].shape, io->rt);
  if (!bc_shape_eq(&s, &want)) {
    char a[96], b[96];
    return bc_error(ctx, BC_EINPUT, "%s: error: lengths input '%s' has shape %s; the batch needs %s",
                    path, io_name(g, i), bc_shape_str(&s, a, sizeof a),
                    bc_shape_str(&want, b, sizeof b));
  }
  return BC_OK;
}

// Seeded N(0, 1) for inputs without a file.  The first input keeps the
// stream the single-input CLI always used, so old runs reproduce.
static int random_input(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, int i, cli_io *io) {
  io->shape[i] = bcI_shape_at(g, &g->vals[io_value(g, i)].shape, io->rt);
  int64_t n = bc_shape_numel(&io->shape[i]);
  float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
  if (!x) return bc_error(ctx, BC_ENOMEM, "error: out of memory for input '%s'", io_name(g, i));
  bc_rng r;
  bc_rng_seed(&r, (o->seed ^ 0x9e3779b97f4a7c15ULL) + (uint64_t)i);
  for (int64_t k = 0; k < n; k++) x[k] = (float)bc_rng_normal(&r);
  io->p[i] = x;
  return BC_OK;
}

// Run-time dims no input file fixed: --length NAME=VALUE, else the bound.
static int rt_from_flags(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, long *rt,
                         const char **from) {
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0 && !from[g->dims[i].rt]) rt[g->dims[i].rt] = (long)g->dims[i].value;
  for (int k = 0; k < o->nlens; k++) {
    int d = -1;
    for (int i = 0; i < g->ndims && d < 0; i++)
      if (!strcmp(g->dims[i].name, o->lens[k].name)) d = i;
    if (d < 0 || g->dims[d].rt < 0)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --length %s: %s has no run-time dim of that "
                      "name (declare it `dim %s <= N`)", o->lens[k].name, o->graph, o->lens[k].name);
    if (o->lens[k].value < 1 || o->lens[k].value > g->dims[d].value)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --length %s=%lld is outside 1..%lld (the "
                      "bound; -D %s=N changes it)", o->lens[k].name, (long long)o->lens[k].value,
                      (long long)g->dims[d].value, o->lens[k].name);
    if (from[g->dims[d].rt])
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --length %s: input '%s' already gives %s = %ld",
                      o->lens[k].name, from[g->dims[d].rt], o->lens[k].name, rt[g->dims[d].rt]);
    rt[g->dims[d].rt] = (long)o->lens[k].value;
  }
  return BC_OK;
}

int cli_io_bind(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, cli_io *io) {
  memset(io, 0, sizeof *io);
  io->n = g->ninputs + g->noutputs;
  io->p = calloc((size_t)io->n, sizeof *io->p);
  io->shape = calloc((size_t)io->n, sizeof *io->shape);
  io->rt = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *io->rt);
  const char **from = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *from);
  int st = io->p && io->shape && io->rt && from ? check_names(ctx, o, g)
                                                : bc_error(ctx, BC_ENOMEM, "error: out of memory");
  // Float inputs given as files first: they fix the run-time dims.
  for (int i = 0; i < g->ninputs && !st; i++) {
    const cli_file *f = file_for(o, g, i);
    if (f && g->vals[g->inputs[i]].type == BC_VT_F32)
      st = read_float_input(ctx, o, g, i, f->path, io, io->rt, from);
  }
  if (!st) st = rt_from_flags(ctx, o, g, io->rt, from);
  for (int i = 0; i < g->ninputs && !st; i++) {
    const cli_file *f = file_for(o, g, i);
    if (g->vals[g->inputs[i]].type == BC_VT_I32) {
      io->shape[i] = bcI_shape_at(g, &g->vals[g->inputs[i]].shape, io->rt);
      if (f) st = read_lengths(ctx, g, i, f->path, io);
    } else if (!f) {
      st = random_input(ctx, o, g, i, io);
    }
  }
  for (int i = g->ninputs; i < io->n && !st; i++) {
    io->shape[i] = bcI_shape_at(g, &g->vals[io_value(g, i)].shape, io->rt);
    int64_t n = bc_shape_numel(&io->shape[i]);
    if (!(io->p[i] = malloc((size_t)(n ? n : 1) * sizeof(float))))
      st = bc_error(ctx, BC_ENOMEM, "error: out of memory for output '%s'", io_name(g, i));
  }
  if (!st) st = bcR_check_io(ctx, g, io->p, io->rt);
  free(from);
  return st;
}

int cli_io_write(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, const cli_io *io) {
  for (int i = g->ninputs; i < io->n; i++) {
    if (g->noutputs > 1) printf("%s: ", io_name(g, i));
    cli_print_stats(&io->shape[i], io->p[i]);
  }
  for (int i = g->ninputs; i < io->n; i++) {
    const cli_file *f = file_for(o, g, i);
    int st = f ? bcN_write(ctx, f->path, &io->shape[i], io->p[i]) : BC_OK;
    if (st) return st;
  }
  return BC_OK;
}

void cli_io_free(cli_io *io) {
  for (int i = 0; io->p && i < io->n; i++) free(io->p[i]);
  free(io->p);
  free(io->shape);
  free(io->rt);
  memset(io, 0, sizeof *io);
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
  bc_compiled c;
  int st = bcD_compile(ctx, g, eo, &c);
  if (!st && !c.forward) {
    bcD_free(&c);
    st = bc_error(ctx, BC_EINTERNAL, "internal error: %s has no forward(x, y) entry (several "
                  "inputs or outputs, or run-time dims)", g->model);
  }
  *j = st ? NULL : c.jit;
  *fn = st ? NULL : c.forward;
  return st;
}

// Workspace for a planned graph: 64-byte aligned, as the emitter assumes.
void *cli_workspace(bc_ctx *ctx, const bc_graph *g) {
  size_t bytes = (size_t)bcM_workspace_bytes(g);
  void *ws = aligned_alloc(64, bytes);
  if (!ws) bc_error(ctx, BC_ENOMEM, "error: cannot allocate a %zu-byte workspace", bytes);
  return ws;
}

// The run's status from a compiled entry: BC_RUN_E* codes become messages
// (the arrays were checked by cli_io_bind, so these mean a blockc bug).
static int run_status(bc_ctx *ctx, int rc) {
  if (rc == BC_RUN_OK) return BC_OK;
  return bc_error(ctx, BC_EINTERNAL, "internal error: the compiled model returned status %d", rc);
}

int cli_run(bc_ctx *ctx, const cli_opts *o) {
  double t0 = cli_now_ms();
  bc_graph *g = load(ctx, o);
  if (!g) return BC_EINPUT;
  bc_weights w = {0};
  cli_io io = {0};
  bc_compiled c = {0};
  void *ws = NULL;
  int st = cli_weights(ctx, o, g, &w);
  if (!st) st = cli_io_bind(ctx, o, g, &io);
  double t1 = cli_now_ms(), tc = 0, tf = 0;
  if (!st && !strcmp(o->backend, "interp")) {
    st = bcR_run_io(ctx, g, &w, io.p, io.rt);
    tf = cli_now_ms() - t1;
  } else if (!st && !strcmp(o->backend, "jit")) {
    bc_emit_opts eo = {0};
    st = bcD_compile(ctx, g, &eo, &c);
    tc = cli_now_ms() - t1;
    if (!st) st = bcW_check_memory(ctx, g, o->max_memory);  // now with the planned workspace
    if (!st) st = bcD_pack(ctx, &c, &w);  // small-M GEMMs read the packed copy
    if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
    if (!st && o->stepwise) {
      cli_step s = {.jit = c.step, .cache_bytes = c.cache_bytes};
      cli_set_threads(o->threads);
      st = cli_run_stepwise(ctx, g, &s, &w, &io, o->chunk, ws, &tf);
    } else if (!st) {
      cli_set_threads(o->threads);
      double t2 = cli_now_ms();
      st = run_status(ctx, c.run((const float *const *)w.p, io.p, io.rt, ws));
      tf = cli_now_ms() - t2;
    }
  } else if (!st && !strcmp(o->backend, "aot")) {
    st = cli_run_aot_io(ctx, o, g, &w, &io, &tc, &tf);
  } else if (!st) {
    st = bc_error(ctx, BC_EUSAGE, "blockc: error: backend '%s' is not available in this build",
                  o->backend);
  }
  if (!st) {
    st = cli_io_write(ctx, o, g, &io);
    if (o->stepwise)
      printf("backend %s  stepwise (chunk %ld)  load %.2f ms  compile %.2f ms  steps %.2f ms\n",
             o->backend, o->chunk > 0 ? o->chunk : 1, t1 - t0, tc, tf);
    else
      printf("backend %s  load %.2f ms  compile %.2f ms  forward %.2f ms\n", o->backend, t1 - t0,
             tc, tf);
  }
  bcD_free(&c);
  free(ws);
  cli_io_free(&io);
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
  if ((st = cli_layer_notes(ctx, o, g))) return st;
  fputs(c, stdout);
  return BC_OK;
}
