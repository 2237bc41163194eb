// common.c — what every blockc command shares: loading the graph with its
// -D overrides, the weights (a file or the seeded init, under the memory
// budget), binding --input/--output arrays to the graph's inputs and outputs,
// printing an output's statistics, the JIT compile and workspace, clocks and
// JSON.  It calls the library only; the commands (run.c, bench.c, ...) call it.
#define _XOPEN_SOURCE 700  // realpath
#include "common.h"

#include "blockc_rt.h"  // bcrt_pool

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void openblas_set_num_threads(int n);  // OpenBLAS; cblas.h is not included

void cli_set_threads(int n) { openblas_set_num_threads(n); }

int cli_pool(bc_ctx *ctx, int n, struct bcrt_pool **pool) {
  *pool = NULL;
  openblas_set_num_threads(1);
  if (n <= 1) return BC_OK;
  if (!(*pool = bcrt_pool_create(n)))
    return bc_error(ctx, BC_ENOMEM, "error: --threads %d: cannot start %d threads", n, n - 1);
  return BC_OK;
}

// The one place backend names are spelled and compared.
static const char *const backend_names[] = {"jit", "interp", "aot"};

const char *cli_backend_name(cli_backend b) { return backend_names[b]; }

bool cli_backend_parse(const char *name, cli_backend *b) {
  for (int i = 0; i < (int)(sizeof backend_names / sizeof *backend_names); i++)
    if (!strcmp(name, backend_names[i])) return *b = (cli_backend)i, true;
  return false;
}

// The length of the well-formed UTF-8 sequence of 2 to 4 bytes at p (no
// overlong forms, surrogates or code points past U+10FFFF), or 0.
static int utf8_seq(const unsigned char *p) {
  int n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (!n || p[0] > 0xf4) return 0;
  unsigned cp = p[0] & (0x7f >> n);
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  return overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ? 0 : n;
}

// JSON is UTF-8: well-formed sequences pass through (so "é" stays "é"),
// controls and DEL are \u escapes, and a byte that is not UTF-8 becomes
// U+FFFD (JSON cannot carry raw bytes).
void cli_json_str(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n = *p >= 0x80 ? utf8_seq(p) : 1;
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\u%04x", *p);
    else if (n) fwrite(p, 1, (size_t)n, out);
    else fputs("\\ufffd", out);
    p += n ? n : 1;
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

// With a GGUF --weights file, the dims it states (and the user did not set
// with -D) are taken from it, and so are its norms' eps and rope theta:
// `blockc generate graphs/llama_lm.blk --weights model.gguf` needs no -D.
// What was taken is said on stderr.
bc_graph *cli_load(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = bcP_parse_file(ctx, o->graph, o->defs, o->ndefs);
  if (g) g->weight_type = o->weight_type;  // --weight-dtype
  if (!g || !o->weights || !bcF_is_gguf(o->weights)) return g;
  bc_define *d;
  int n;
  if (bcF_gguf_defs(ctx, o->weights, g, o->defs, o->ndefs, &d, &n)) return NULL;
  if (n > o->ndefs) {
    if (!(g = bcP_parse_file(ctx, o->graph, d, n))) return NULL;
    g->weight_type = o->weight_type;
    fprintf(stderr, "blockc: note: %s: dims from the file:", o->weights);
    for (int i = o->ndefs; i < n; i++) fprintf(stderr, " %s=%lld", d[i].name, (long long)d[i].value);
    fputc('\n', stderr);
  }
  char note[256];
  if (bcF_gguf_apply(ctx, o->weights, g, note, sizeof note)) return NULL;
  if (*note) fprintf(stderr, "blockc: note: %s: %s\n", o->weights, note);
  if (!o->given[CLI_OPT_WEIGHT_DTYPE]) {  // the file's own block type, as it is
    if (bcF_gguf_weight_type(ctx, o->weights, g, o->weights_prefix, &g->weight_type, note,
                             sizeof note))
      return NULL;
    if (*note) fprintf(stderr, "blockc: note: %s: %s\n", o->weights, note);
  }
  return g;
}

// Weights from --weights, or the seeded deterministic init.
// The memory budget (--max-memory) is checked before anything is allocated.
int cli_weights(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bc_weights *w) {
  bc_mem_use use = {.forward = true,
                    .what = o->command && strcmp(o->command, "run") ? o->command : NULL};
  int st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  if (st) return st;
  if (!o->weights) {
    st = bcW_init_random(ctx, g, o->seed, w);
  } else {
    bc_load_opts lo = {.allow_extra = o->allow_extra, .prefix = o->weights_prefix,
                       .max_memory = o->max_memory};
    st = bcW_load_opts(ctx, g, o->weights, &lo, w);
    if (!st && lo.ignored)
      fprintf(stderr, "blockc: note: %s: ignored %d tensor%s the graph does not use (--allow-extra)\n",
              o->weights, lo.ignored, lo.ignored == 1 ? "" : "s");
  }
  // --weight-dtype: every backend computes with the matrices as stored (the
  // interpreter too, so it stays the oracle of the compiled code).
  if (!st) st = bcY_round_weights(ctx, g, w);
  return st;
}

// --- binding the run's arrays to the graph ------------------------------------

static const char *io_name(const bc_graph *g, int i) {
  return i < g->ninputs ? g->vals[g->inputs[i]].name : g->output_names[i - g->ninputs];
}

static int io_count(const bc_graph *g) { return g->ninputs + g->noutputs; }

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

// Whether a bare --input FILE may stand for input i: a float or tokens input.
static bool bare_ok(const bc_graph *g, int i) {
  return g->vals[g->inputs[i]].type == BC_VT_F32 || bcI_is_tokens(g, g->inputs[i]);
}

// The --input/--output entry for array i of the graph, or NULL.  A bare FILE
// stands for the only float (or tokens) input, or the only output.
static const cli_file *file_for(const cli_opts *o, const bc_graph *g, int i) {
  bool in = i < g->ninputs;
  const cli_file *f = in ? o->inputs : o->outputs;
  int n = in ? o->ninputs : o->noutputs;
  for (int k = 0; k < n; k++)
    if (f[k].name ? !strcmp(f[k].name, io_name(g, i)) : !in || bare_ok(g, i))
      return &f[k];
  return NULL;
}

const char *cli_input_file(const cli_opts *o, const bc_graph *g, int i) {
  const cli_file *f = i < g->ninputs ? file_for(o, g, i) : NULL;
  return f ? f->path : NULL;
}

// Every --input/--output names an array the graph has, and a bare FILE is
// only used where it is unambiguous.
static int check_names(bc_ctx *ctx, const cli_opts *o, const bc_graph *g) {
  int nfloat = 0, ntok = 0;
  for (int i = 0; i < g->ninputs; i++) nfloat += bare_ok(g, i), ntok += bcI_is_tokens(g, g->inputs[i]);
  for (int side = 0; side < 2; side++) {
    const cli_file *f = side ? o->outputs : o->inputs;
    int n = side ? o->noutputs : o->ninputs, count = side ? g->noutputs : nfloat;
    const char *what = side ? "output" : "input";
    for (int k = 0; k < n; k++) {
      if (!f[k].name && count != 1)
        return bc_error(ctx, BC_EUSAGE,
                        "blockc: error: --%s %s: %s has %d %s%ss (%s); name one with --%s "
                        "NAME=FILE",
                        what, f[k].path, o->graph, count,
                        side ? "" : ntok ? "float or tokens " : "float ", what,
                        name_list(ctx, g, !side), what);
      if (!f[k].name) continue;
      bool found = false;
      int lo = side ? g->ninputs : 0, hi = side ? g->ninputs + g->noutputs : g->ninputs;
      for (int i = lo; i < hi; i++) found |= !strcmp(io_name(g, i), f[k].name);
      if (!found)
        return bc_error(ctx, BC_EUSAGE, "blockc: error: --%s %s=...: %s has no %s '%s' (its %ss: %s)",
                        what, f[k].name, o->graph, what, f[k].name, what, name_list(ctx, g, !side));
    }
    const char *bare_for = NULL;  // the array a bare FILE stands for
    for (int i = side ? g->ninputs : 0; count == 1 && !bare_for && i < (side ? io_count(g) : g->ninputs); i++)
      if (side || bare_ok(g, i)) bare_for = io_name(g, i);
    int st = cli_check_bare_named(ctx, f, n, bare_for, what);
    if (st) return st;
  }
  const cli_file *outs[CLI_MAX_FILES];
  for (int k = 0; k < o->noutputs; k++) outs[k] = &o->outputs[k];
  return cli_check_distinct(ctx, outs, o->noutputs);
}

int cli_check_bare_named(bc_ctx *ctx, const cli_file *f, int n, const char *bare_for,
                         const char *what) {
  const cli_file *bare = NULL;
  for (int k = 0; k < n && !bare; k++)
    if (!f[k].name) bare = &f[k];
  for (int k = 0; bare && bare_for && k < n; k++)
    if (f[k].name && !strcmp(f[k].name, bare_for))
      return bc_error(ctx, BC_EUSAGE, "blockc: error: %s %s and %s %s both give %s '%s' (give it "
                      "once)", f[k].flag, f[k].arg, bare->flag, bare->arg, what, bare_for);
  return BC_OK;
}

// What identifies the file at path: device and inode when it exists (so a
// symlink or ./ leads to the same key), else the real path of its directory
// and its base name.
typedef struct file_key {
  bool exists;
  dev_t dev;
  ino_t ino;
  char path[PATH_MAX + 256];
} file_key;

static void key_of(const char *path, file_key *k) {
  struct stat st;
  memset(k, 0, sizeof *k);
  if (stat(path, &st) == 0) {
    k->exists = true;
    k->dev = st.st_dev;
    k->ino = st.st_ino;
    return;
  }
  const char *slash = strrchr(path, '/');
  char dir[PATH_MAX], real[PATH_MAX];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
           slash ? path : ".");
  if (realpath(dir, real)) snprintf(k->path, sizeof k->path, "%s/%s", real, slash ? slash + 1 : path);
  else snprintf(k->path, sizeof k->path, "%s", path);
}

static bool same_key(const file_key *a, const file_key *b) {
  if (a->exists != b->exists) return false;
  return a->exists ? a->dev == b->dev && a->ino == b->ino : !strcmp(a->path, b->path);
}

int cli_check_distinct(bc_ctx *ctx, const cli_file *const *f, int n) {
  file_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
  if (!keys) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int st = BC_OK;
  for (int k = 0; k < n && !st; k++) {
    key_of(f[k]->path, &keys[k]);
    for (int j = 0; j < k && !st; j++)
      if (same_key(&keys[j], &keys[k]))
        st = bc_error(ctx, BC_EUSAGE, "blockc: error: %s %s and %s %s name the same file (one "
                      "would replace the other)", f[j]->flag, f[j]->arg, f[k]->flag, f[k]->arg);
  }
  free(keys);
  return st;
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

// Token ids from a file ('<i4' or '<i8', each value range-checked into
// int32): the shape fixes run-time dims as a float input's does; the ids
// themselves are checked against the vocab by bcR_check_io.
static int read_tokens(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, int i, const char *path,
                       cli_io *io, long *rt, const char **from) {
  const bc_shape *want = &g->vals[io_value(g, i)].shape;
  const char *who = bc_fmt(ctx, "%s (tokens input '%s')", o->graph, io_name(g, i));
  int32_t *ids;
  int st = bcN_read_i32_expect(ctx, path, want, who, &io->shape[i], &ids);
  if (st) return st;
  io->p[i] = ids;
  return take_rt(ctx, g, i, &io->shape[i], path, rt, from);
}

// Seeded ids uniform in 0..V-1 for a tokens input without a file.
static int random_tokens(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, int i, cli_io *io) {
  io->shape[i] = bcI_shape_at(g, &g->vals[io_value(g, i)].shape, io->rt);
  int64_t n = bc_shape_numel(&io->shape[i]), V = bcI_tokens_vocab(g, io_value(g, i));
  int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
  if (!ids) return bc_error(ctx, BC_ENOMEM, "error: out of memory for input '%s'", io_name(g, i));
  bc_rng r;
  bc_rng_seed(&r, (o->seed ^ 0x9e3779b97f4a7c15ULL) + (uint64_t)i);
  for (int64_t k = 0; k < n; k++) ids[k] = V > 0 ? (int32_t)(bc_rng_next(&r) % (uint64_t)V) : 0;
  io->p[i] = ids;
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
    else if (f && bcI_is_tokens(g, g->inputs[i]))
      st = read_tokens(ctx, o, g, i, f->path, io, io->rt, from);
  }
  if (!st) st = rt_from_flags(ctx, o, g, io->rt, from);
  for (int i = 0; i < g->ninputs && !st; i++) {
    const cli_file *f = file_for(o, g, i);
    if (bcI_is_tokens(g, g->inputs[i])) {
      if (!f) st = random_tokens(ctx, o, g, i, io);
    } else if (g->vals[g->inputs[i]].type == BC_VT_I32) {
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
  size_t bytes = (size_t)bcY_workspace_bytes(g);
  void *ws = aligned_alloc(64, bytes);
  if (!ws) bc_error(ctx, BC_ENOMEM, "error: cannot allocate a %zu-byte workspace", bytes);
  return ws;
}

bc_train_rng cli_grad_rng(const cli_opts *o) {
  bc_train_rng r = {o->drop_seed, o->drop_step,
                    o->given[CLI_OPT_DROPOUT_SEED] || o->given[CLI_OPT_STEP]};
  return r;
}
