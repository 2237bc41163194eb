// analyze.c — `blockc grad` and `blockc analyze`: gradients and per-layer
// training diagnostics on top of the reference backward (grad.c).
//
// grad     d sum(y * dy) / d every parameter (a safetensors file, one tensor
//          per parameter under its own name) and / d the inputs (--dx .npy).
// analyze  for each layer of a stack: the norm of the layer's parameter
//          gradient, the RMS of the main stream after the layer, and the mean
//          token-wise cosine between that stream and the previous layer's;
//          as a table, JSON, or an SVG plot overlaying several graphs; the
//          report names every input (file or seed, shape) and each run-time
//          dim's value and what set it; a padded batch's rows t >= len[b]
//          are left out.  --admin-omega -o W: Admin's profiled omegas
//          (Liu et al. 2020) written with every other parameter.
//
// What a "layer" is (docs/analysis.md repeats this):
//   * A parameter belongs to layer i when its dotted name has a component
//     that is all digits ("layers.7.linear1.weight": 7); the components
//     before the first such one name the stack ("layers").  The outermost
//     stack is the one the first such parameter (in graph order) belongs to;
//     parameters outside it (a final "norm") are reported apart.
//   * A node belongs to the layer of its parameters.  Layer i's span runs
//     from its first node to just before the next node that has parameters
//     after its last one (so parameter-free residual Adds at a layer's end
//     belong to it; a final norm does not).
//   * The streams after layer i are the values its span defines that are
//     read after the span (or are graph outputs), in definition order; the
//     main stream is the last one defined (x for Post-LN and Pre-LN; for
//     ResiDual xa, the Post-LN stream, with xd reported as a second stream).
//     Layer 0's "previous output" is the graph's first float input.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AN_MAX_STREAMS 4
#define AN_MAX_GRAPHS CLI_MAX_FILES

// ---------------------------------------------------------------------------
// Seeded arrays and option helpers
// ---------------------------------------------------------------------------

static void seeded_normal(float *a, int64_t n, uint64_t seed) {
  bc_rng r;
  bc_rng_seed(&r, seed);
  for (int64_t k = 0; k < n; k++) a[k] = (float)bc_rng_normal(&r);
}

// The stream dy of output i is drawn from (never the inputs' or weights').
static uint64_t dy_seed(uint64_t seed, int i) { return (seed ^ 0xd1b54a32d192ed03ULL) + (uint64_t)i; }

// The --dy / --dx entry for graph input/output `name` (a bare FILE when the
// graph has exactly one such array), or NULL.
static const cli_file *named_file(const cli_file *f, int n, const char *name, bool only) {
  for (int k = 0; k < n; k++)
    if (f[k].name ? !strcmp(f[k].name, name) : only) return &f[k];
  return NULL;
}

// Every --dy/--dx NAME names an output/float input; a bare one is unambiguous.
static int check_files(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bool dy) {
  const cli_file *f = dy ? o->dys : o->dxs;
  int n = dy ? o->ndys : o->ndxs, count = 0;
  const char *flag = dy ? "--dy" : "--dx";
  int cnt = dy ? g->noutputs : g->ninputs;
  for (int i = 0; i < cnt; i++) count += dy || g->vals[g->inputs[i]].type == BC_VT_F32;
  for (int k = 0; k < n; k++) {
    if (!f[k].name && count != 1)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: %s %s: %s has %d %s; name one with %s "
                      "NAME=FILE", flag, f[k].path, o->graph, count,
                      dy ? "outputs" : "float inputs", flag);
    bool found = !f[k].name;
    for (int i = 0; i < cnt && !found; i++) {
      int v = dy ? g->outputs[i] : g->inputs[i];
      const char *nm = dy ? g->output_names[i] : g->vals[v].name;
      found = !strcmp(nm, f[k].name) && g->vals[v].type == BC_VT_F32;
    }
    if (!found)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: %s %s=...: %s has no %s '%s'", flag,
                      f[k].name, o->graph, dy ? "output" : "float input", f[k].name);
  }
  const char *bare_for = NULL;  // the array a bare FILE stands for
  for (int i = 0; count == 1 && !bare_for && i < cnt; i++)
    if (dy || g->vals[g->inputs[i]].type == BC_VT_F32)
      bare_for = dy ? g->output_names[i] : g->vals[g->inputs[i]].name;
  return cli_check_bare_named(ctx, f, n, bare_for, dy ? "dy of output" : "the gradient of input");
}

// grad writes -o and every --dx: no two of them may be one file.
static int check_grad_targets(bc_ctx *ctx, const cli_opts *o) {
  const cli_file *f[CLI_MAX_FILES + 1];
  int n = 0;
  for (int k = 0; k < o->noutputs; k++) f[n++] = &o->outputs[k];
  for (int k = 0; k < o->ndxs && n <= CLI_MAX_FILES; k++) f[n++] = &o->dxs[k];
  return cli_check_distinct(ctx, f, n);
}

// dy for every output: from --dy (shape checked against the output's actual
// shape), else seeded N(0, 1).
static int load_dy(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, const cli_io *io,
                   float **dy) {
  int st = check_files(ctx, o, g, true);
  for (int i = 0; i < g->noutputs && !st; i++) {
    const bc_shape *want = &io->shape[g->ninputs + i];
    const cli_file *f = named_file(o->dys, o->ndys, g->output_names[i], g->noutputs == 1);
    if (f) {
      bc_shape s;
      if ((st = bcN_read(ctx, f->path, &s, &dy[i]))) return st;
      if (!bc_shape_eq(&s, want)) {
        char a[96], b[96];
        return bc_error(ctx, BC_EINPUT, "%s: error: dy has shape %s but output '%s' has %s",
                        f->path, bc_shape_str(&s, a, sizeof a), g->output_names[i],
                        bc_shape_str(want, b, sizeof b));
      }
      for (int64_t k = 0, n = bc_shape_numel(&s); k < n; k++)
        if (!isfinite(dy[i][k]))
          return bc_error(ctx, BC_EINPUT, "%s: error: dy element %lld is not finite", f->path,
                          (long long)k);
      continue;
    }
    int64_t n = bc_shape_numel(want);
    if (!(dy[i] = malloc((size_t)(n ? n : 1) * sizeof(float))))
      return bc_error(ctx, BC_ENOMEM, "error: out of memory for dy");
    seeded_normal(dy[i], n, dy_seed(o->seed, i));
  }
  return st;
}

static double loss_of(const bc_graph *g, const cli_io *io, float *const *dy) {
  double L = 0;
  for (int i = 0; i < g->noutputs; i++) {
    const float *y = io->p[g->ninputs + i];
    for (int64_t k = 0, n = bc_shape_numel(&io->shape[g->ninputs + i]); k < n; k++)
      L += (double)y[k] * dy[i][k];
  }
  return L;
}

// The graph with weights and inputs bound (no output files: -o is not an
// output array here).
typedef struct bound {
  bc_graph *g;
  bc_weights w;
  cli_io io;
  float **dy;
} bound;

static void bound_free(bound *b) {
  for (int i = 0; b->dy && b->g && i < b->g->noutputs; i++) free(b->dy[i]);
  free(b->dy);
  cli_io_free(&b->io);
  bcW_free(&b->w);
}

static int bind_graph(bc_ctx *ctx, const cli_opts *o, const char *path, bound *b) {
  memset(b, 0, sizeof *b);
  if (!(b->g = bcP_parse_file(ctx, path, o->defs, o->ndefs))) return BC_EINPUT;
  cli_opts *bo = malloc(sizeof *bo);  // large: not on the stack
  if (!bo) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *bo = *o;
  bo->graph = path;
  bo->noutputs = 0;
  int st = cli_weights(ctx, bo, b->g, &b->w);
  if (!st) st = cli_io_bind(ctx, bo, b->g, &b->io);
  if (!st && !(b->dy = calloc((size_t)b->g->noutputs, sizeof *b->dy)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) st = load_dy(ctx, bo, b->g, &b->io, b->dy);
  free(bo);
  return st;
}

// ---------------------------------------------------------------------------
// blockc grad
// ---------------------------------------------------------------------------

static int write_grads(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *dw) {
  const char **names = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *names);
  bc_shape *shapes = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *shapes);
  if (!names || !shapes) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int p = 0; p < g->nparams; p++) {
    names[p] = g->params[p].name;
    shapes[p] = g->params[p].shape;
  }
  return bcS_write(ctx, path, g->nparams, names, shapes, (const float *const *)dw->p);
}

static double norm2(const float *a, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += (double)a[k] * a[k];
  return s;
}

static void grad_error_sink(void *opaque, const char *msg) { (void)opaque; (void)msg; }

// The backend grad runs: --backend as given; by default jit when the
// emitted backward covers the graph, else interp with a note.
static cli_backend grad_backend(bc_ctx *ctx, const cli_opts *o, bc_graph *g, int *st) {
  if (o->backend_set) return o->backend;
  bc_ctx *quiet = bc_ctx_new();
  if (!quiet) {
    *st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    return CLI_BACKEND_INTERP;
  }
  bc_set_error_fn(quiet, NULL, grad_error_sink);
  int rc = bcG_check(quiet, g);
  if (rc) {
    const char *m = quiet->last_error ? quiet->last_error : "the emitted backward cannot take it";
    fprintf(stderr, "blockc: note: %.*s\nblockc: note: using --backend interp (the reference "
            "backward)\n", (int)strcspn(m, "\n"), m);
  }
  bc_ctx_free(quiet);
  return rc ? CLI_BACKEND_INTERP : CLI_BACKEND_JIT;
}

// The emitted training step (jit, or aot through aot.c) into dw and dx.
static int grad_compiled(bc_ctx *ctx, const cli_opts *o, cli_backend backend, bound *b,
                         bc_weights *dw, float **dx) {
  const bc_graph *g = b->g;
  bc_mem_use use = {.grads = true, .what = "grad"};
  int st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  if (st) return st;
  dw->n = g->nparams;
  if (!(dw->p = calloc((size_t)(g->nparams ? g->nparams : 1), sizeof *dw->p)))
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int p = 0; p < g->nparams; p++) {
    int64_t n = bc_shape_numel(&g->params[p].shape);
    if (!(dw->p[p] = calloc((size_t)(n ? n : 1), sizeof(float))))
      return bc_error(ctx, BC_ENOMEM, "error: out of memory for '%s'", g->params[p].name);
  }
  if (backend == CLI_BACKEND_AOT)
    return cli_grad_aot(ctx, o, b->g, &b->w, b->io.p, b->io.rt, (const float *const *)b->dy, dw,
                        dx);
  bc_emit_opts eo = {.backward = true};
  bc_compiled c;
  st = bcD_compile(ctx, b->g, &eo, &c);
  use.backward_bytes = st ? 0 : c.bwd_ws_bytes;
  if (!st) st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  void *ws = NULL;
  if (!st && !(ws = aligned_alloc(64, (size_t)c.bwd_ws_bytes)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory for the backward workspace (%lld bytes)",
                  (long long)c.bwd_ws_bytes);
  bc_train_rng rng = cli_grad_rng(o);
  if (!st) {
    int rc = c.backward_ex && rng.training
                 ? c.backward_ex((const float *const *)b->w.p, b->io.p, b->io.rt,
                                 (const float *const *)b->dy, dw->p, dx, 1, rng.seed, rng.step, ws)
                 : c.backward((const float *const *)b->w.p, b->io.p, b->io.rt,
                              (const float *const *)b->dy, dw->p, dx, ws);
    if (rc) st = bc_error(ctx, BC_EINTERNAL, "internal error: the backward returned status %d", rc);
  }
  free(ws);
  bcD_free(&c);
  return st;
}

int cli_grad(bc_ctx *ctx, const cli_opts *o) {
  if (!o->output || o->noutputs != 1)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: grad needs -o GRADS.safetensors (once, no "
                    "NAME=)");
  cli_set_threads(o->threads);
  bound b = {0};
  bc_weights dw = {0};
  float **dx = NULL;
  double t0 = cli_now_ms();
  int st = check_grad_targets(ctx, o);
  if (!st) st = bind_graph(ctx, o, o->graph, &b);
  if (!st) st = check_files(ctx, o, b.g, false);
  if (!st && !(dx = calloc((size_t)b.g->ninputs, sizeof *dx)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < b.g->ninputs; i++) {
    if (b.g->vals[b.g->inputs[i]].type != BC_VT_F32) continue;
    int64_t n = bc_shape_numel(&b.io.shape[i]);
    if (!(dx[i] = calloc((size_t)(n ? n : 1), sizeof(float))))
      st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  double t1 = cli_now_ms();
  cli_backend backend = st ? CLI_BACKEND_INTERP : grad_backend(ctx, o, b.g, &st);
  bc_train_rng drop = cli_grad_rng(o);
  bc_mem_use use = {.grads = true, .tape_bytes = st ? 0 : bcR_tape_bytes(b.g, b.io.rt),
                    .what = "grad --backend interp"};
  if (!st && backend == CLI_BACKEND_INTERP) st = bcW_check_memory_use(ctx, b.g, &use, o->max_memory);
  if (!st && backend == CLI_BACKEND_INTERP)
    st = bcR_grad_ex(ctx, b.g, &b.w, b.io.p, b.io.rt, &drop, (const float *const *)b.dy, &dw,
                     dx);
  else if (!st)
    st = grad_compiled(ctx, o, backend, &b, &dw, dx);
  double t2 = cli_now_ms();
  if (!st) st = write_grads(ctx, o->output, b.g, &dw);
  int nf = 0;
  for (int i = 0; !st && i < b.g->ninputs; i++) nf += b.g->vals[b.g->inputs[i]].type == BC_VT_F32;
  for (int i = 0; !st && i < b.g->ninputs; i++) {
    const char *nm = b.g->vals[b.g->inputs[i]].name;
    const cli_file *f = dx[i] ? named_file(o->dxs, o->ndxs, nm, nf == 1) : NULL;
    if (f) st = bcN_write(ctx, f->path, &b.io.shape[i], dx[i]);
  }
  if (!st) {
    double gn = 0;
    for (int p = 0; p < b.g->nparams; p++) gn += norm2(dw.p[p], bc_shape_numel(&b.g->params[p].shape));
    if (cli_grad_rng(o).training && bcI_has_dropout(b.g))
      printf("dropout: active, seed %llu step %llu\n", (unsigned long long)o->drop_seed,
             (unsigned long long)o->drop_step);
    printf("loss sum(y * dy) = %.9g  (dy: %s)\n", loss_of(b.g, &b.io, b.dy),
           o->ndys ? "from --dy" : "seeded N(0, 1)");
    printf("%d parameter gradients, total norm %.6g -> %s\n", b.g->nparams, sqrt(gn), o->output);
    for (int i = 0; i < b.g->ninputs; i++)
      if (dx[i])
        printf("d%s: norm %.6g%s\n", b.g->vals[b.g->inputs[i]].name,
               sqrt(norm2(dx[i], bc_shape_numel(&b.io.shape[i]))),
               named_file(o->dxs, o->ndxs, b.g->vals[b.g->inputs[i]].name, nf == 1) ? " (written)" : "");
    printf("backend %s  load %.2f ms  %sforward+backward %.2f ms\n",
           backend == CLI_BACKEND_INTERP ? "interp (double)" : cli_backend_name(backend), t1 - t0,
           backend == CLI_BACKEND_INTERP ? "" : "compile+", t2 - t1);
  }
  for (int i = 0; dx && i < b.g->ninputs; i++) free(dx[i]);
  free(dx);
  bcW_free(&dw);
  bound_free(&b);
  return st;
}

// ---------------------------------------------------------------------------
// Layers
// ---------------------------------------------------------------------------

typedef struct layer_info {
  int first, last, end;               // node span [first, end]; last: last node with its params
  int nstreams;
  int stream[AN_MAX_STREAMS];         // value ids, in definition order; main = last
} layer_info;

typedef struct layers {
  int n;
  layer_info *l;
  int *param_layer;                   // per param, -1 outside the stack
  const char *stack;                  // "layers"
} layers;

static int find_layers(bc_ctx *ctx, const bc_graph *g, const char *path, layers *L) {
  memset(L, 0, sizeof *L);
  L->param_layer = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof(int));
  int *node_layer = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof(int));
  int *last_read = bc_alloc(ctx, (size_t)(g->nvals + 1) * sizeof(int));
  if (!L->param_layer || !node_layer || !last_read) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  size_t slen = 0;
  for (int p = 0; p < g->nparams; p++) {
    size_t sl;
    int i = bcI_layer_of_name(g->params[p].name, &sl);
    if (i >= 0 && !L->stack) {
      L->stack = bc_strndup(ctx, g->params[p].name, sl);
      slen = sl;
    }
    bool same = i >= 0 && sl == slen && !strncmp(g->params[p].name, L->stack, sl);
    L->param_layer[p] = same ? i : -1;
    if (same && i + 1 > L->n) L->n = i + 1;
  }
  if (!L->n)
    return bc_error(ctx, BC_EINPUT, "%s: error: analyze: no layers: no parameter name has a "
                    "numeric component (as in `for i in 0..N as layers.{i}`)", path);
  if (!(L->l = bc_alloc(ctx, (size_t)L->n * sizeof *L->l))) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; i < L->n; i++) L->l[i].first = -1;
  for (int v = 0; v < g->nvals; v++) last_read[v] = -1;
  for (int j = 0; j < g->nnodes; j++) {
    const bc_node *n = &g->nodes[j];
    node_layer[j] = -1;
    for (int k = 0; k < BC_MAX_NODE_PARAMS && node_layer[j] < 0; k++)
      if (n->param[k] >= 0) node_layer[j] = L->param_layer[n->param[k]];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) last_read[n->in[k]] = j;
    int i = node_layer[j];
    if (i < 0) continue;
    if (L->l[i].first < 0) L->l[i].first = j;
    L->l[i].last = j;
  }
  for (int i = 0; i < L->n; i++) {
    layer_info *li = &L->l[i];
    if (li->first < 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: analyze: layer %d of '%s' has no nodes", path, i,
                      L->stack);
    li->end = g->nnodes - 1;
    for (int j = li->last + 1; j < g->nnodes; j++) {
      bool has = false;
      for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) has |= g->nodes[j].param[k] >= 0;
      if (has) {
        li->end = j - 1;
        break;
      }
    }
    for (int j = li->first; j <= li->end; j++)
      for (int k = 0; k < g->nodes[j].nout; k++) {
        int v = g->nodes[j].out[k];
        if (v < 0 || !(last_read[v] > li->end || g->vals[v].is_output)) continue;
        if (li->nstreams == AN_MAX_STREAMS)  // keep the last ones: the main stream is last
          memmove(li->stream, li->stream + 1, (AN_MAX_STREAMS - 1) * sizeof(int)), li->nstreams--;
        li->stream[li->nstreams++] = v;
      }
    if (!li->nstreams)
      return bc_error(ctx, BC_EINPUT, "%s: error: analyze: layer %d defines no value read after it",
                      path, i);
  }
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

// Row r of a [B, T, D] value is padding when lens says t >= len[b].
static bool padded_row(const bc_shape *s, const int32_t *lens, int64_t r) {
  if (!lens || s->rank != 3) return false;
  return r % s->d[1] >= lens[r / s->d[1]];
}

static double rms_of(const double *a, const bc_shape *s, const int32_t *lens) {
  int64_t d = s->rank ? s->d[s->rank - 1] : 1, rows = d ? bc_shape_numel(s) / d : 0, n = 0;
  double sum = 0;
  for (int64_t r = 0; r < rows; r++) {
    if (padded_row(s, lens, r)) continue;
    for (int64_t k = 0; k < d; k++) sum += a[r * d + k] * a[r * d + k];
    n += d;
  }
  return n ? sqrt(sum / (double)n) : NAN;
}

// Mean over rows (tokens) of cos(a_row, b_row); rows where either is zero,
// and padded rows, are left out.  NaN when the shapes differ.
static double cos_rows(const double *a, const bc_shape *sa, const double *b, const bc_shape *sb,
                       const int32_t *lens) {
  if (!a || !b || !bc_shape_eq(sa, sb) || sa->rank < 1) return NAN;
  int64_t d = sa->d[sa->rank - 1], rows = bc_shape_numel(sa) / d, used = 0;
  double sum = 0;
  for (int64_t r = 0; r < rows; r++) {
    if (padded_row(sa, lens, r)) continue;
    double ab = 0, aa = 0, bb = 0;
    for (int64_t k = 0; k < d; k++) {
      double x = a[r * d + k], y = b[r * d + k];
      ab += x * y;
      aa += x * x;
      bb += y * y;
    }
    if (aa > 0 && bb > 0) {
      sum += ab / sqrt(aa * bb);
      used++;
    }
  }
  return used ? sum / (double)used : NAN;
}

typedef struct stream_stat { const char *name; double rms, cos_prev; } stream_stat;

typedef struct layer_stat {
  double grad_norm;
  int nstreams;
  stream_stat s[AN_MAX_STREAMS];  // main = s[nstreams - 1]
} layer_stat;

// One graph input as analyze bound it: where its values came from and the
// shape actually used.
typedef struct input_used {
  const char *name, *kind;   // kind: "float", "lengths", "tokens"
  const char *file;          // the --input file, or NULL
  const char *source;        // "FILE", "seeded N(0, 1) from --seed S", "not given: full lengths", ...
  const char *shape;         // "[2, 37, 32]"
  const char *values;        // lengths: "37 20"; else NULL
} input_used;

// One run-time dim: the value this run used, its bound and what chose it.
typedef struct rt_used { const char *name, *from; long value; long long bound; } rt_used;

typedef struct result {
  const char *path, *model, *dims;
  int nlayers;
  layer_stat *ls;
  double loss, other_grad_norm, input_grad_norm, ms;
  const char *stack;
  int ninputs, nrt;
  input_used *inputs;
  rt_used *rts;
  bool masked;               // stream statistics over the valid rows of `len` only
  // --admin-omega: one row per Admin residual (Add(Mul(x, omega), f)).
  int nomega;
  const char **omega_name;
  double *omega, *omega_var;  // the value set, and Var[f] of that residual's branch
} result;

// "B=2 T=37 (<= 128) D=64": a run-time dim at the value this run used.
static const char *dims_str(bc_ctx *ctx, const bc_graph *g, const long *rt) {
  const char *s = "";
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (d->rt >= 0 && rt)
      s = bc_fmt(ctx, "%s%s%s=%ld (<= %lld)", s, i ? " " : "", d->name, rt[d->rt],
                 (long long)d->value);
    else
      s = bc_fmt(ctx, "%s%s%s=%lld", s, i ? " " : "", d->name, (long long)d->value);
  }
  return s;
}

// The per-layer numbers from a tape whose backward produced dw and dx0
// (the gradient of the first float input, value x_in of shape *sx).
static void fill_stats(bc_ctx *ctx, const bc_graph *g, const bc_tape *tp, const layers *L,
                       const bc_weights *dw, int x_in, const float *dx0, const bc_shape *sx,
                       const long *rt, const int32_t *lens, result *r) {
  r->model = g->model;
  r->dims = dims_str(ctx, g, rt);
  r->nlayers = L->n;
  r->stack = L->stack;
  for (int p = 0; p < g->nparams; p++) {
    double s = norm2(dw->p[p], bc_shape_numel(&g->params[p].shape));
    if (L->param_layer[p] >= 0) r->ls[L->param_layer[p]].grad_norm += s;
    else r->other_grad_norm += s;
  }
  r->other_grad_norm = sqrt(r->other_grad_norm);
  r->input_grad_norm = sqrt(norm2(dx0, bc_shape_numel(sx)));
  bc_shape s_in;
  const double *xv = bcR_tape_value(tp, x_in, &s_in);
  for (int i = 0; i < L->n; i++) {
    layer_stat *ls = &r->ls[i];
    const layer_info *li = &L->l[i];
    ls->grad_norm = sqrt(ls->grad_norm);
    ls->nstreams = li->nstreams;
    for (int k = 0; k < li->nstreams; k++) {
      bc_shape s, sp = s_in;
      const double *v = bcR_tape_value(tp, li->stream[k], &s), *prev = xv;
      if (i > 0) {  // the stream at the same position from the end in the previous layer
        int kp = L->l[i - 1].nstreams - (li->nstreams - k);
        prev = kp >= 0 ? bcR_tape_value(tp, L->l[i - 1].stream[kp], &sp) : NULL;
      }
      const char *nm = g->vals[li->stream[k]].name;
      const int32_t *ln = bc_shape_eq(&s, sx) ? lens : NULL;
      ls->s[k] = (stream_stat){nm && *nm ? nm : bc_fmt(ctx, "%%%d", li->stream[k]),
                               rms_of(v, &s, ln), cos_rows(v, &s, prev, &sp, ln)};
    }
  }
}

// What analyze read for each input, and each run-time dim's value and why.
static int describe_inputs(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, const cli_io *io,
                           result *r) {
  r->ninputs = g->ninputs;
  r->nrt = g->nrt;
  r->inputs = bc_alloc(ctx, (size_t)(g->ninputs + 1) * sizeof *r->inputs);
  r->rts = bc_alloc(ctx, (size_t)(g->nrt + 1) * sizeof *r->rts);
  if (!r->inputs || !r->rts) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    input_used *u = &r->inputs[i];
    char sh[96];
    u->name = v->name;
    u->file = cli_input_file(o, g, i);
    bc_shape_str(&io->shape[i], sh, sizeof sh);
    u->shape = bc_strndup(ctx, sh, strlen(sh));
    bool tok = bcI_is_tokens(g, g->inputs[i]);
    u->kind = tok ? "tokens" : v->type == BC_VT_I32 ? "lengths" : "float";
    if (u->file) u->source = u->file;
    else if (tok) u->source = bc_fmt(ctx, "seeded uniform ids from --seed %llu", (unsigned long long)o->seed);
    else if (v->type == BC_VT_I32) u->source = "not given: full lengths";
    else u->source = bc_fmt(ctx, "seeded N(0, 1) from --seed %llu", (unsigned long long)o->seed);
    if (v->type == BC_VT_I32 && !tok && io->p[i]) {
      const int32_t *len = io->p[i];
      const char *t = "";
      for (int64_t k = 0, n = bc_shape_numel(&io->shape[i]); k < n; k++)
        t = bc_fmt(ctx, "%s%s%d", t, k ? " " : "", (int)len[k]);
      u->values = t;
    }
  }
  for (int d = 0; d < g->ndims; d++) {
    const bc_dim *dm = &g->dims[d];
    if (dm->rt < 0) continue;
    rt_used *ru = &r->rts[dm->rt];
    ru->name = dm->name;
    ru->value = io->rt ? io->rt[dm->rt] : (long)dm->value;
    ru->bound = (long long)dm->value;
    ru->from = NULL;
    for (int i = 0; i < g->ninputs && !ru->from; i++) {
      const bc_shape *want = &g->vals[g->inputs[i]].shape;
      if (!r->inputs[i].file || !strcmp(r->inputs[i].kind, "lengths")) continue;
      for (int a = 0; a < want->rank; a++)
        if (want->sym[a] == d + 1) ru->from = bc_fmt(ctx, "the shape of input %s (%s)", r->inputs[i].name, r->inputs[i].file);
    }
    for (int k = 0; k < o->nlens && !ru->from; k++)
      if (!strcmp(o->lens[k].name, dm->name)) ru->from = bc_fmt(ctx, "--length %s=%lld", dm->name, (long long)o->lens[k].value);
    if (!ru->from) ru->from = "the bound (no --input or --length sets it)";
  }
  return BC_OK;
}

// The valid rows of a padded batch: with exactly one lengths input given
// (`len`), a [B, T, D] value of the first float input's shape has its rows
// t >= len[b] left out of the statistics (attention zeroes them, the norms
// do not: they are not data).  NULL: every row counts.
static const int32_t *row_lengths(const bc_graph *g, const cli_io *io, int in0) {
  const int32_t *len = NULL;
  int n = 0;
  for (int i = 0; i < g->ninputs; i++)
    if (g->vals[g->inputs[i]].type == BC_VT_I32 && !bcI_is_tokens(g, g->inputs[i])) {
      n++;
      len = io->p[i];
      if (len && bc_shape_numel(&io->shape[i]) != io->shape[in0].d[0]) return NULL;
    }
  return n == 1 && io->shape[in0].rank == 3 ? len : NULL;
}

// ---------------------------------------------------------------------------
// --admin-omega: Admin's profiling initialisation (Liu et al. 2020, sec. 4.2)
// ---------------------------------------------------------------------------
//
// Admin writes each residual as b_i = x_{i-1} * omega_i + f_i(x_{i-1}) and
// initialises omega_i = sqrt(sum_{j<i} Var[f_j(x_{j-1})]) from one forward
// pass over a profiling batch.  Here the residuals are found by structure:
// every Add(Mul(x, w), f) (either operand order) whose w is a Param node's
// value, in graph order; the stream reaching the first one (the input,
// Admin's embedding output x_0) counts as f_0, so omega_1 = sqrt(Var[x_0])
// rather than 0, which would cut the first residual.  Var is the population
// variance over every element of the batch (valid rows only in a padded
// batch); the profiling pass uses the weights as loaded, omega included
// (Admin profiles at omega = 1: the graph's init=ones).  Each omega tensor
// is set to its scalar in every element (Admin's omega is a vector
// initialised with one value).

static bool is_param_value(const bc_graph *g, const int *def, int v, int *param) {
  int j = v >= 0 ? def[v] : -1;
  if (j < 0) return false;
  const bc_node *n = &g->nodes[j];
  if (n->nin != 0 || n->param[0] < 0) return false;
  *param = n->param[0];
  return true;
}

static double var_of(const double *a, const bc_shape *s, const bc_shape *sx, const int32_t *lens) {
  const int32_t *ln = bc_shape_eq(s, sx) ? lens : NULL;
  int64_t d = s->rank ? s->d[s->rank - 1] : 1, rows = d ? bc_shape_numel(s) / d : 0, n = 0;
  double sum = 0, sq = 0;
  for (int64_t r = 0; r < rows; r++) {
    if (padded_row(s, ln, r)) continue;
    for (int64_t k = 0; k < d; k++) sum += a[r * d + k];
    n += d;
  }
  double mean = n ? sum / (double)n : 0;
  for (int64_t r = 0; r < rows; r++) {
    if (padded_row(s, ln, r)) continue;
    for (int64_t k = 0; k < d; k++) sq += (a[r * d + k] - mean) * (a[r * d + k] - mean);
  }
  return n ? sq / (double)n : NAN;
}

static int admin_omega(bc_ctx *ctx, const cli_opts *o, bound *b, const bc_tape *tp,
                       const int32_t *lens, int in0, result *r) {
  const bc_graph *g = b->g;
  int *def = bc_alloc(ctx, (size_t)(g->nvals + 1) * sizeof *def);
  int *pm = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof *pm);
  int *fv = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof *fv);
  int *xv = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof *xv);
  if (!def || !pm || !fv || !xv) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int v = 0; v < g->nvals; v++) def[v] = -1;
  for (int j = 0; j < g->nnodes; j++)
    for (int k = 0; k < g->nodes[j].nout; k++)
      if (g->nodes[j].out[k] >= 0) def[g->nodes[j].out[k]] = j;
  int n = 0;
  for (int j = 0; j < g->nnodes; j++) {
    const bc_node *a = &g->nodes[j];
    if (a->op != BC_OP_ADD || a->nin != 2) continue;
    for (int side = 0; side < 2; side++) {
      int m = a->in[side] >= 0 ? def[a->in[side]] : -1, p = -1;
      if (m < 0 || g->nodes[m].op != BC_OP_MUL) continue;
      int ms = is_param_value(g, def, g->nodes[m].in[1], &p) ? 1
               : is_param_value(g, def, g->nodes[m].in[0], &p) ? 0 : -1;
      if (ms < 0) continue;
      for (int k = 0; k < n; k++)
        if (pm[k] == p)
          return bc_error(ctx, BC_EINPUT, "%s: error: analyze --admin-omega: parameter '%s' "
                          "scales two residuals; Admin sets one omega per residual", g->path,
                          g->params[p].name);
      pm[n] = p;
      xv[n] = g->nodes[m].in[1 - ms];
      fv[n] = a->in[1 - side];
      n++;
      break;
    }
  }
  if (!n)
    return bc_error(ctx, BC_EINPUT, "%s: error: analyze --admin-omega: no Admin residual: no "
                    "Add(Mul(x, omega), f) with omega a Param (graphs/admin.blk)", g->path);
  r->nomega = n;
  r->omega_name = bc_alloc(ctx, (size_t)n * sizeof *r->omega_name);
  r->omega = bc_alloc(ctx, (size_t)n * sizeof *r->omega);
  r->omega_var = bc_alloc(ctx, (size_t)n * sizeof *r->omega_var);
  if (!r->omega_name || !r->omega || !r->omega_var) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  const bc_shape *sx = &b->io.shape[in0];
  bc_shape s;
  const double *x0 = bcR_tape_value(tp, xv[0], &s);
  double acc = x0 ? var_of(x0, &s, sx, lens) : NAN;
  for (int k = 0; k < n; k++) {
    r->omega_name[k] = g->params[pm[k]].name;
    r->omega[k] = sqrt(acc);
    const double *f = bcR_tape_value(tp, fv[k], &s);
    r->omega_var[k] = f ? var_of(f, &s, sx, lens) : NAN;
    acc += r->omega_var[k];
  }
  for (int k = 0; k < n; k++)
    if (!isfinite(r->omega[k]) || !(r->omega[k] > 0))
      return bc_error(ctx, BC_EINPUT, "%s: error: analyze --admin-omega: omega of '%s' would be "
                      "%g (the profiled variances are not positive and finite)", g->path,
                      r->omega_name[k], r->omega[k]);
  // Every parameter, the omegas replaced: the file --weights then loads.
  const char **names = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *names);
  bc_shape *shapes = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *shapes);
  const float **data = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *data);
  if (!names || !shapes || !data) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int p = 0; p < g->nparams; p++) {
    names[p] = g->params[p].name;
    shapes[p] = g->params[p].shape;
    data[p] = b->w.p[p];
  }
  for (int k = 0; k < n; k++) {
    int64_t cnt = bc_shape_numel(&g->params[pm[k]].shape);
    float *v = bc_alloc(ctx, (size_t)(cnt ? cnt : 1) * sizeof *v);
    if (!v) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
    for (int64_t e = 0; e < cnt; e++) v[e] = (float)r->omega[k];
    data[pm[k]] = v;
  }
  return bcS_write(ctx, o->output, g->nparams, names, shapes, data);
}

static int analyze_one(bc_ctx *ctx, const cli_opts *o, const char *path, result *r) {
  memset(r, 0, sizeof *r);
  r->path = path;
  bound b = {0};
  layers L;
  bc_tape *tp = NULL;
  bc_weights dw = {0};
  float *dx0 = NULL;
  int st = bind_graph(ctx, o, path, &b);
  if (!st) st = find_layers(ctx, b.g, path, &L);
  int in0 = -1;
  for (int i = 0; !st && i < b.g->ninputs && in0 < 0; i++)
    if (b.g->vals[b.g->inputs[i]].type == BC_VT_F32) in0 = i;
  if (!st && in0 < 0) st = bc_error(ctx, BC_EINPUT, "%s: error: analyze: no float input (%s)", path,
                            b.g->ninputs && bcI_is_tokens(b.g, b.g->inputs[0])
                                ? "a graph of token ids has none: analyze reads the stream of a float input"
                                : "analyze reads the stream of a float input");
  if (!st && !(dx0 = calloc((size_t)bc_shape_numel(&b.io.shape[in0]), sizeof *dx0)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  float **dx = NULL;
  if (!st && !(dx = calloc((size_t)b.g->ninputs, sizeof *dx))) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) dx[in0] = dx0;
  if (!st) st = describe_inputs(ctx, o, b.g, &b.io, r);
  const int32_t *lens = st ? NULL : row_lengths(b.g, &b.io, in0);
  r->masked = lens != NULL;
  // A padded batch: padded output rows are not data, so they are not in the
  // loss either (dy = 0 there, as tools/grad_check.py does).
  for (int i = 0; lens && i < b.g->noutputs; i++) {
    const bc_shape *so = &b.io.shape[b.g->ninputs + i];
    if (!bc_shape_eq(so, &b.io.shape[in0])) continue;
    int64_t d = so->d[2], rows = bc_shape_numel(so) / d;
    for (int64_t rr = 0; rr < rows; rr++)
      if (padded_row(so, lens, rr)) memset(b.dy[i] + rr * d, 0, (size_t)d * sizeof(float));
  }
  bc_mem_use use = {.grads = true, .tape_bytes = st ? 0 : bcR_tape_bytes(b.g, b.io.rt),
                    .what = "analyze"};
  if (!st) st = bcW_check_memory_use(ctx, b.g, &use, o->max_memory);
  double t0 = cli_now_ms();
  if (!st) st = bcR_tape_forward(ctx, b.g, &b.w, b.io.p, b.io.rt, &tp);
  if (!st) st = bcR_tape_backward(tp, (const float *const *)b.dy, &dw, dx);
  r->ms = cli_now_ms() - t0;
  if (!st) r->loss = loss_of(b.g, &b.io, b.dy);
  if (!st && !(r->ls = bc_alloc(ctx, (size_t)L.n * sizeof *r->ls)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) fill_stats(ctx, b.g, tp, &L, &dw, b.g->inputs[in0], dx0, &b.io.shape[in0], b.io.rt,
                      lens, r);
  if (!st && o->admin_omega) st = admin_omega(ctx, o, &b, tp, lens, in0, r);
  bcR_tape_free(tp);
  free(dx0);
  free(dx);
  bcW_free(&dw);
  bound_free(&b);
  return st;
}

// ---------------------------------------------------------------------------
// Output: table, JSON, SVG
// ---------------------------------------------------------------------------

static const char *loss_text(bc_ctx *ctx, const cli_opts *o) {
  const char *inputs = !o->ninputs ? "inputs ~ N(0, 1) seeded from the same seed"
                        : bc_fmt(ctx, "inputs from --input %s%s", o->inputs[0].arg,
                                 o->ninputs > 1 ? " ..." : "");
  return bc_fmt(ctx, "sum(y * dy), dy ~ N(0, 1) seeded from --seed %llu; %s; weights %s; "
                "grad_norm = L2 norm of d loss / d (the layer's parameters)",
                (unsigned long long)o->seed, inputs,
                o->weights ? o->weights : "blockc's seeded init (xavier-uniform, zero biases, LN 1/0)");
}

static void print_table(const result *r, const char *loss) {
  printf("%s: model %s, %s\n", r->path, r->model, r->dims);
  for (int i = 0; i < r->ninputs; i++) {
    const input_used *u = &r->inputs[i];
    printf("input %s %s: %s%s%s%s\n", u->name, u->shape, u->source, u->values ? " (" : "",
           u->values ? u->values : "", u->values ? ")" : "");
  }
  for (int k = 0; k < r->nrt; k++)
    printf("run-time dim %s = %ld (bound %lld): from %s\n", r->rts[k].name, r->rts[k].value,
           r->rts[k].bound, r->rts[k].from);
  if (r->masked) printf("padded batch: rms and cos_prev over the valid rows; dy = 0 on padded rows\n");
  printf("loss = %s\n     = %.9g\n", loss, r->loss);
  const layer_stat *l0 = &r->ls[0];
  printf("layer  grad_norm     rms(%s)  cos_prev", l0->s[l0->nstreams - 1].name);
  for (int k = 0; k + 1 < l0->nstreams; k++) printf("  | rms(%s)  cos_prev", l0->s[k].name);
  printf("\n");
  for (int i = 0; i < r->nlayers; i++) {
    const layer_stat *ls = &r->ls[i];
    const stream_stat *m = &ls->s[ls->nstreams - 1];
    printf("%5d  %10.4e  %9.4f  %8.5f", i, ls->grad_norm, m->rms, m->cos_prev);
    for (int k = 0; k + 1 < ls->nstreams; k++)
      printf("  | %9.4f  %8.5f", ls->s[k].rms, ls->s[k].cos_prev);
    printf("\n");
  }
  printf("other parameters (outside '%s'): grad norm %.4e; input grad norm %.4e\n", r->stack,
         r->other_grad_norm, r->input_grad_norm);
  for (int k = 0; k < r->nomega; k++)
    printf("admin omega %-28s = %.6f  (Var of its branch output %.6f)\n", r->omega_name[k],
           r->omega[k], r->omega_var[k]);
  printf("forward+backward %.0f ms (reference interpreter, double)\n\n", r->ms);
}

// "key": value pairs of analyze --json (docs/analysis.md).
static void json_key(const char *indent, const char *key, FILE *out) {
  fprintf(out, "%s", indent);
  cli_json_str(key, out);
  fputs(": ", out);
}

static void json_num_field(const char *indent, const char *key, double v, const char *end, FILE *out) {
  json_key(indent, key, out);
  cli_json_num(v, out);
  fputs(end, out);
}

static void json_str_field(const char *indent, const char *key, const char *v, const char *end, FILE *out) {
  json_key(indent, key, out);
  cli_json_str(v, out);
  fputs(end, out);
}

// One layer: its gradient norm, the main stream's rms and cos_prev, then
// the other streams (ResiDual's xd).
static void layer_json(const layer_stat *l, int i, const char *last, FILE *out) {
  const stream_stat *m = &l->s[l->nstreams - 1];
  fprintf(out, "    {\n");
  json_num_field("      ", "layer", i, ",\n", out);
  json_num_field("      ", "grad_norm", l->grad_norm, ",\n", out);
  json_num_field("      ", "rms", m->rms, ",\n", out);
  json_num_field("      ", "cos_prev", m->cos_prev, ",\n", out);
  json_str_field("      ", "stream", m->name, ",\n", out);
  json_key("      ", "other_streams", out);
  fputs("[", out);
  for (int k = 0; k + 1 < l->nstreams; k++) {
    fputs(k ? ", {" : "{", out);
    json_str_field("", "stream", l->s[k].name, ", ", out);
    json_num_field("", "rms", l->s[k].rms, ", ", out);
    json_num_field("", "cos_prev", l->s[k].cos_prev, "}", out);
  }
  fprintf(out, "]\n    }%s\n", last);
}

static void result_json(const result *r, const char *loss, const char *last, FILE *out) {
  fputs("{\n  \"layers\": [\n", out);
  for (int i = 0; i < r->nlayers; i++) layer_json(&r->ls[i], i, i + 1 < r->nlayers ? "," : "", out);
  fputs("  ],\n", out);
  json_str_field("  ", "loss", loss, ",\n", out);
  json_num_field("  ", "loss_value", r->loss, ",\n", out);
  json_str_field("  ", "graph", r->path, ",\n", out);
  json_str_field("  ", "model", r->model, ",\n", out);
  json_str_field("  ", "dims", r->dims, ",\n", out);
  json_str_field("  ", "stack", r->stack, ",\n", out);
  json_num_field("  ", "other_grad_norm", r->other_grad_norm, ",\n", out);
  json_num_field("  ", "input_grad_norm", r->input_grad_norm, ",\n", out);
  json_key("  ", "inputs", out);
  fputs("[", out);
  for (int i = 0; i < r->ninputs; i++) {
    const input_used *u = &r->inputs[i];
    fputs(i ? ", {" : "{", out);
    json_str_field("", "name", u->name, ", ", out);
    json_str_field("", "kind", u->kind, ", ", out);
    json_key("", "file", out);
    if (u->file) cli_json_str(u->file, out);
    else fputs("null", out);
    fputs(", ", out);
    json_str_field("", "source", u->source, ", ", out);
    if (u->values) json_str_field("", "lengths", u->values, ", ", out);
    json_str_field("", "shape", u->shape, "}", out);
  }
  fputs("],\n", out);
  json_key("  ", "runtime_dims", out);
  fputs("[", out);
  for (int k = 0; k < r->nrt; k++) {
    fputs(k ? ", {" : "{", out);
    json_str_field("", "name", r->rts[k].name, ", ", out);
    json_num_field("", "value", (double)r->rts[k].value, ", ", out);
    json_num_field("", "bound", (double)r->rts[k].bound, ", ", out);
    json_str_field("", "from", r->rts[k].from, "}", out);
  }
  fputs("],\n", out);
  json_key("  ", "padded_rows_excluded", out);
  fputs(r->masked ? "true,\n" : "false,\n", out);
  if (r->nomega) {
    json_key("  ", "admin_omega", out);
    fputs("[", out);
    for (int k = 0; k < r->nomega; k++) {
      fputs(k ? ", {" : "{", out);
      json_str_field("", "param", r->omega_name[k], ", ", out);
      json_num_field("", "omega", r->omega[k], ", ", out);
      json_num_field("", "branch_var", r->omega_var[k], "}", out);
    }
    fputs("],\n", out);
  }
  json_num_field("  ", "ms", r->ms, "\n", out);
  fprintf(out, "}%s\n", last);
}

// Text for SVG: & < > " escaped, non-printable bytes dropped.
static const char *xml(bc_ctx *ctx, const char *s) {
  const char *out = "";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '&') out = bc_fmt(ctx, "%s&amp;", out);
    else if (c == '<') out = bc_fmt(ctx, "%s&lt;", out);
    else if (c == '>') out = bc_fmt(ctx, "%s&gt;", out);
    else if (c == '"') out = bc_fmt(ctx, "%s&quot;", out);
    else if (c >= 0x20 && c < 0x7f) out = bc_fmt(ctx, "%s%c", out, c);
  }
  return out;
}

// A growing text buffer (malloc'ed).
typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

__attribute__((format(printf, 2, 3)))
static void sb(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0 || b->oom) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t cap = (b->cap + (size_t)k + 1) * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                     "#8c564b", "#e377c2", "#17becf"};

typedef struct panel { double x0, y0, w, h, lo, hi; int nx; } panel;

static double px(const panel *p, int i) { return p->x0 + (p->nx > 1 ? p->w * i / (p->nx - 1) : p->w / 2); }
static double py(const panel *p, double v) { return p->y0 + p->h * (1 - (v - p->lo) / (p->hi - p->lo)); }

// The log panel's ticks: 1, 2 and 5 times each power of ten (as log10).
static double log_tick(int i) {
  static const double frac[3] = {0.0, 0.30102999566398120, 0.69897000433601886};
  int dec = i >= 0 ? i / 3 : -((-i + 2) / 3);
  return dec + frac[i - 3 * dec];
}

static void svg_axes(sbuf *b, const panel *p, const char *title, bool log) {
  sb(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n",
     p->x0, p->y0, p->w, p->h);
  sb(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n",
     p->x0 + p->w / 2, p->y0 - 8, title);
  double step = p->hi - p->lo > 0.5 ? 0.1 : p->hi - p->lo > 0.2 ? 0.05 : 0.02;
  int i0 = log ? (int)floor(p->lo) * 3 - 3 : (int)ceil(p->lo / step - 1e-9);
  for (int i = i0; i < i0 + 200; i++) {
    double t = log ? log_tick(i) : i * step;
    if (t < p->lo - 1e-9) continue;
    if (t > p->hi + 1e-9) break;
    double y = py(p, t);
    sb(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", p->x0, y,
       p->x0 + p->w, y);
    if (log)
      sb(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%.0fe%d</text>\n",
         p->x0 - 4, y + 3, pow(10.0, t - floor(t + 1e-9)), (int)floor(t + 1e-9));
    else
      sb(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%.2f</text>\n",
         p->x0 - 4, y + 3, t);
  }
  int xstep = p->nx <= 12 ? 1 : p->nx <= 30 ? 4 : 8;
  for (int i = 0; i < p->nx; i += xstep)
    sb(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n",
       px(p, i), p->y0 + p->h + 13, i);
  sb(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">layer</text>\n",
     p->x0 + p->w / 2, p->y0 + p->h + 28);
}

// One curve: the grad norm (log10), or the cosine of stream k counted from
// the main one (k = 0 main, solid; k > 0 other streams, dashed).
static void svg_series(sbuf *b, const panel *p, const result *r, bool grad, int k,
                       const char *color) {
  sb(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"", color,
     k ? " stroke-dasharray=\"5,3\"" : "");
  for (int i = 0; i < r->nlayers; i++) {
    const layer_stat *l = &r->ls[i];
    int si = l->nstreams - 1 - k;
    double v = grad ? log10(l->grad_norm) : si >= 0 ? l->s[si].cos_prev : NAN;
    if (isfinite(v)) sb(b, "%.1f,%.1f ", px(p, i), py(p, v));
  }
  sb(b, "\"/>\n");
}

static int write_svg(bc_ctx *ctx, const char *path, const result *rs, int n) {
  double glo = INFINITY, ghi = -INFINITY, clo = 1, chi = 1;
  int nx = 1;
  for (int g = 0; g < n; g++) {
    if (rs[g].nlayers > nx) nx = rs[g].nlayers;
    for (int i = 0; i < rs[g].nlayers; i++) {
      const layer_stat *l = &rs[g].ls[i];
      double v = log10(l->grad_norm);
      if (isfinite(v)) glo = fmin(glo, v), ghi = fmax(ghi, v);
      for (int k = 0; k < l->nstreams; k++)
        if (isfinite(l->s[k].cos_prev)) clo = fmin(clo, l->s[k].cos_prev);
    }
  }
  if (!isfinite(glo)) glo = -1, ghi = 1;
  int it = (int)floor(glo) * 3;  // widen to the 1-2-5 ticks around the data
  while (log_tick(it + 1) <= glo) it++;
  glo = log_tick(it);
  while (log_tick(it) < ghi) it++;
  ghi = log_tick(it);
  if (ghi <= glo) ghi = log_tick(it + 1);
  clo = floor(clo * 10) / 10;
  if (clo >= chi) clo = chi - 0.1;
  panel pg = {60, 40, 340, 220, glo, ghi, nx}, pc = {470, 40, 340, 220, clo, chi, nx};
  sbuf b = {0};
  sb(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"840\" height=\"%d\" "
     "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
     330 + 16 * n);
  svg_axes(&b, &pg, "gradient norm of the layer's parameters (log)", true);
  svg_axes(&b, &pc, "cos(layer output, previous layer output)", false);
  bool dashed = false;
  for (int g = 0; g < n; g++) {
    const char *col = colors[g % (int)(sizeof colors / sizeof colors[0])];
    svg_series(&b, &pg, &rs[g], true, 0, col);
    for (int k = 0; k < rs[g].ls[0].nstreams; k++) svg_series(&b, &pc, &rs[g], false, k, col);
    dashed |= rs[g].ls[0].nstreams > 1;
    double y = 310 + 16.0 * g;
    sb(&b, "<line x1=\"60\" y1=\"%.1f\" x2=\"84\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
       y - 4, y - 4, col);
    sb(&b, "<text x=\"90\" y=\"%.1f\" font-size=\"11\">%s (%s): %s</text>\n", y,
       xml(ctx, rs[g].model), xml(ctx, rs[g].path), xml(ctx, rs[g].dims));
  }
  if (dashed)
    sb(&b, "<text x=\"470\" y=\"294\" font-size=\"10\">solid: main stream; dashed: the "
       "other stream (ResiDual: xd)</text>\n");
  sb(&b, "</svg>\n");
  if (b.oom) {
    free(b.p);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory for the SVG");
  }
  const void *parts[1] = {b.p};
  size_t lens[1] = {b.n};
  int st = bc_write_file_atomic(ctx, path, 1, parts, lens);
  free(b.p);
  return st;
}

int cli_analyze(bc_ctx *ctx, const cli_opts *o) {
  cli_set_threads(o->threads);
  int n = o->ngraphs ? o->ngraphs : 1;
  if (o->noutputs && !o->admin_omega)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: analyze writes -o only with --admin-omega");
  if (o->admin_omega && (n != 1 || o->noutputs != 1))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: analyze --admin-omega takes one GRAPH and one "
                    "-o W.safetensors");
  result *rs = bc_alloc(ctx, (size_t)n * sizeof *rs);
  if (!rs) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  const char *loss = loss_text(ctx, o);
  int st = BC_OK;
  for (int g = 0; g < n && !st; g++) {
    st = analyze_one(ctx, o, o->ngraphs ? o->graphs[g] : o->graph, &rs[g]);
    if (!st && !o->json) print_table(&rs[g], loss);
  }
  if (!st && o->json) {
    if (n > 1) printf("[\n");
    for (int g = 0; g < n; g++) result_json(&rs[g], loss, g + 1 < n ? "," : "", stdout);
    if (n > 1) printf("]\n");
  }
  if (!st && o->svg) {
    st = write_svg(ctx, o->svg, rs, n);
    if (!st && !o->json) printf("wrote %s\n", o->svg);
  }
  return st;
}
