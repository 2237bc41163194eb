// api.c — the embedding API of blockc.h, a thin layer over the compiler.
//
// A blockc_model is a bc_ctx plus the stages' results: the parsed graph,
// its weights and the compiled model (bc_compiled, from the compile
// driver). Each call checks that the previous stage has happened and that
// its arguments make sense, so misuse is a status code and a message, never
// a crash.  Runs are reentrant; their messages go through the model's
// error sink under a per-model lock, since the sink is shared.
#define _POSIX_C_SOURCE 200809L
#include "blockc.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"
#include "blockc_rt.h"  // bcrt_train_hparams, bcrt_lr_at
#include "ops.h"

// The public codes are the internal ones.
_Static_assert((int)BLOCKC_OK == (int)BC_OK && (int)BLOCKC_EINPUT == (int)BC_EINPUT &&
                   (int)BLOCKC_EUSAGE == (int)BC_EUSAGE && (int)BLOCKC_EIO == (int)BC_EIO &&
                   (int)BLOCKC_ENOMEM == (int)BC_ENOMEM && (int)BLOCKC_EINTERNAL == (int)BC_EINTERNAL,
               "blockc.h and bc.h status codes differ");

#define MAX_DEFS 64
#define MAX_IO 256   // inputs + outputs a model may have for blockc_run
#define MAX_RT 64    // run-time dims

struct blockc_model {
  bc_ctx *ctx;
  bc_define defs[MAX_DEFS];
  int ndefs;
  bc_graph *g;
  bc_weights w;
  bool have_weights;
  char *wprefix;         // blockc_set_weights_options (malloc'ed; NULL: none)
  bool allow_extra;
  bc_compiled c;
  bc_compiled cb;        // blockc_compile_backward: the module with <model>_backward
  bcrt_pool *pool;       // blockc_set_threads (n > 1), else NULL
  pthread_mutex_t lock;  // serialises messages reported by concurrent runs
};

// Without a model there is no sink: stderr.
static int null_model(const char *fn) {
  fprintf(stderr, "blockc: error: %s: the model is NULL\n", fn);
  return BLOCKC_EUSAGE;
}

blockc_model *blockc_new(void) {
  blockc_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  if (!(m->ctx = bc_ctx_new()) || pthread_mutex_init(&m->lock, NULL) != 0) {
    bc_ctx_free(m->ctx);
    free(m);
    return NULL;
  }
  return m;
}

void blockc_delete(blockc_model *m) {
  if (!m) return;
  bcD_free(&m->c);
  bcD_free(&m->cb);
  bcrt_pool_free(m->pool);
  bcW_free(&m->w);
  free(m->wprefix);
  bc_ctx_free(m->ctx);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

void blockc_set_error_func(blockc_model *m, void *opaque, blockc_error_fn fn) {
  if (m) bc_set_error_fn(m->ctx, opaque, fn);
}

static int misuse(blockc_model *m, const char *what) {
  return bc_error(m->ctx, BC_EUSAGE, "blockc: error: %s", what);
}

// A message from a (possibly concurrent) run.
static int report(const blockc_model *m, int st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int report(const blockc_model *m, int st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
  pthread_mutex_lock(lock);
  bc_error(m->ctx, st, "blockc: error: %s", msg);
  pthread_mutex_unlock(lock);
  return st;
}

void openblas_set_num_threads(int n);  // OpenBLAS; cblas.h is not included

int blockc_set_threads(blockc_model *m, int n) {
  if (!m) return null_model("blockc_set_threads");
  if (n < 1 || n > BCRT_POOL_MAX_THREADS)
    return report(m, BC_EUSAGE, "blockc_set_threads: %d threads: want 1..%d", n,
                  BCRT_POOL_MAX_THREADS);
  bcrt_pool *p = NULL;
  if (n > 1 && !(p = bcrt_pool_create(n)))
    return report(m, BC_ENOMEM, "blockc_set_threads: cannot start %d threads", n - 1);
  bcrt_pool_free(m->pool);
  m->pool = p;
  openblas_set_num_threads(1);
  return BLOCKC_OK;
}

int blockc_threads(const blockc_model *m) { return m ? bcrt_pool_nthreads(m->pool) : 0; }

int blockc_set_dim(blockc_model *m, const char *name, long long value) {
  if (!m) return null_model("blockc_set_dim");
  if (m->g) return misuse(m, "blockc_set_dim must be called before the graph is loaded");
  if (!name || !*name || strlen(name) > BC_MAX_IDENT) return misuse(m, "blockc_set_dim: invalid dim name");
  if (value < 1 || value > BC_MAX_DIM)
    return bc_error(m->ctx, BC_EUSAGE, "blockc: error: blockc_set_dim: %s = %lld is outside 1..%lld",
                    name, value, (long long)BC_MAX_DIM);
  for (int i = 0; i < m->ndefs; i++)
    if (!strcmp(m->defs[i].name, name)) {
      m->defs[i].value = value;
      return BLOCKC_OK;
    }
  if (m->ndefs == MAX_DEFS) return misuse(m, "blockc_set_dim: too many dim overrides (limit 64)");
  const char *copy = bc_strdup(m->ctx, name);
  if (!copy) return bc_error(m->ctx, BC_ENOMEM, "error: out of memory");
  m->defs[m->ndefs++] = (bc_define){copy, value};
  return BLOCKC_OK;
}

int blockc_load_graph(blockc_model *m, const char *path) {
  if (!m) return null_model("blockc_load_graph");
  if (!path) return misuse(m, "blockc_load_graph: path is NULL");
  if (m->g) return misuse(m, "a graph is already loaded");
  m->g = bcP_parse_file(m->ctx, path, m->defs, m->ndefs);
  return m->g ? BLOCKC_OK : BLOCKC_EINPUT;
}

int blockc_load_graph_string(blockc_model *m, const char *name, const char *text) {
  if (!m) return null_model("blockc_load_graph_string");
  if (!name || !text) return misuse(m, "blockc_load_graph_string: name or text is NULL");
  if (m->g) return misuse(m, "a graph is already loaded");
  m->g = bcP_parse_string(m->ctx, name, text, m->defs, m->ndefs);
  return m->g ? BLOCKC_OK : BLOCKC_EINPUT;
}

// The packed copy of the weights for the compiled code's small-M GEMMs:
// made when both the code and the weights exist, again when either changes.
static int pack(blockc_model *m) {
  if (!m->c.run || !m->have_weights) return BLOCKC_OK;
  int st = bcY_round_weights(m->ctx, m->g, &m->w);  // a weight type's values
  if (!st) st = bcD_pack(m->ctx, &m->c, &m->w);
  // a weight type: the float matrices are done with once packed
  if (!st && bcD_release_packed(m->g, &m->w) < 0)
    st = bc_error(m->ctx, BC_ENOMEM, "blockc: error: out of memory");
  if (st) m->have_weights = false;
  return st;
}

// Prefixes are parameter-name prefixes: as long as names may be.
#define MAX_PREFIX 4096

int blockc_set_weights_options(blockc_model *m, const char *prefix, int allow_extra) {
  if (!m) return null_model("blockc_set_weights_options");
  if (allow_extra != 0 && allow_extra != 1)
    return misuse(m, "blockc_set_weights_options: allow_extra must be 0 or 1");
  char *copy = NULL;
  if (prefix && *prefix) {
    size_t n = strnlen(prefix, MAX_PREFIX + 1);
    if (n > MAX_PREFIX)
      return misuse(m, "blockc_set_weights_options: the prefix is longer than 4096 bytes");
    if (!(copy = malloc(n + 1))) return bc_error(m->ctx, BC_ENOMEM, "blockc: error: out of memory");
    memcpy(copy, prefix, n + 1);
  }
  free(m->wprefix);
  m->wprefix = copy;
  m->allow_extra = allow_extra == 1;
  return BLOCKC_OK;
}

int blockc_load_weights(blockc_model *m, const char *path) {
  if (!m) return null_model("blockc_load_weights");
  if (!path) return misuse(m, "blockc_load_weights: path is NULL");
  if (!m->g) return misuse(m, "load a graph before its weights");
  bcW_free(&m->w);
  bc_load_opts lo = {.allow_extra = m->allow_extra, .prefix = m->wprefix,
                     .api = "blockc_set_weights_options"};
  int st = bcW_load_opts(m->ctx, m->g, path, &lo, &m->w);
  m->have_weights = st == BC_OK;
  return st ? st : pack(m);
}

int blockc_init_weights(blockc_model *m, unsigned long long seed) {
  if (!m) return null_model("blockc_init_weights");
  if (!m->g) return misuse(m, "load a graph before initialising its weights");
  bcW_free(&m->w);
  int st = bcW_init_random(m->ctx, m->g, seed, &m->w);
  m->have_weights = st == BC_OK;
  return st ? st : pack(m);
}

int blockc_compile(blockc_model *m) {
  if (!m) return null_model("blockc_compile");
  if (!m->g) return misuse(m, "load a graph before compiling");
  if (m->c.run) return BLOCKC_OK;
  int st = bcD_compile(m->ctx, m->g, NULL, &m->c);
  return st ? st : pack(m);
}

int blockc_set_weight_dtype(blockc_model *m, const char *dtype) {
  if (!m) return null_model("blockc_set_weight_dtype");
  if (!m->g) return misuse(m, "load a graph before setting its weight dtype");
  if (m->c.run || m->cb.backward)
    return misuse(m, "blockc_set_weight_dtype must be called before blockc_compile");
  int wt = bc_weight_type_parse(dtype);
  if (wt < 0)
    return bc_error(m->ctx, BC_EUSAGE,
                    "blockc: error: blockc_set_weight_dtype: '%s' is not f32, bf16, f16, q8_0 or q4_0",
                    dtype ? dtype : "(null)");
  m->g->weight_type = wt;
  return BLOCKC_OK;
}

const char *blockc_c_source(const blockc_model *m) { return m ? m->c.csrc : NULL; }

size_t blockc_workspace_size(const blockc_model *m) {
  return m && m->c.run ? (size_t)m->c.ws_bytes : 0;
}

// --- introspection ----------------------------------------------------------------

static int io_value(const blockc_model *m, int i, bool out) {
  if (!m || !m->g || i < 0 || i >= (out ? m->g->noutputs : m->g->ninputs)) return -1;
  return out ? m->g->outputs[i] : m->g->inputs[i];
}

int blockc_num_inputs(const blockc_model *m) { return m && m->g ? m->g->ninputs : -1; }
int blockc_num_outputs(const blockc_model *m) { return m && m->g ? m->g->noutputs : -1; }

const char *blockc_input_name(const blockc_model *m, int i) {
  int v = io_value(m, i, false);
  return v < 0 ? NULL : m->g->vals[v].name;
}

const char *blockc_output_name(const blockc_model *m, int i) {
  return io_value(m, i, true) < 0 ? NULL : m->g->output_names[i];
}

int blockc_input_is_lengths(const blockc_model *m, int i) {
  int v = io_value(m, i, false);
  return v < 0 ? -1 : bcI_is_lengths(m->g, v);
}

int blockc_input_is_tokens(const blockc_model *m, int i) {
  int v = io_value(m, i, false);
  return v < 0 ? -1 : bcI_is_tokens(m->g, v);
}

static int shape_of(const blockc_model *m, int v, long long shape[4], const char *names[4]) {
  if (v < 0 || !shape) return -1;
  const bc_shape *s = &m->g->vals[v].shape;
  for (int k = 0; k < s->rank && k < 4; k++) {
    shape[k] = s->d[k];
    if (names) names[k] = s->sym[k] > 0 ? m->g->dims[s->sym[k] - 1].name : NULL;
  }
  return s->rank;
}

int blockc_input_shape(const blockc_model *m, int i, long long shape[4], const char *dim_names[4]) {
  return shape_of(m, io_value(m, i, false), shape, dim_names);
}

int blockc_output_shape(const blockc_model *m, int i, long long shape[4], const char *dim_names[4]) {
  return shape_of(m, io_value(m, i, true), shape, dim_names);
}

int blockc_num_dims(const blockc_model *m) { return m && m->g ? m->g->nrt : -1; }

static const bc_dim *rt_dim(const blockc_model *m, int k) {
  if (!m || !m->g) return NULL;
  for (int i = 0; i < m->g->ndims; i++)
    if (m->g->dims[i].rt == k && k >= 0) return &m->g->dims[i];
  return NULL;
}

const char *blockc_dim_name(const blockc_model *m, int k) {
  const bc_dim *d = rt_dim(m, k);
  return d ? d->name : NULL;
}

long long blockc_dim_bound(const blockc_model *m, int k) {
  const bc_dim *d = rt_dim(m, k);
  return d ? d->value : -1;
}

size_t blockc_input_size(const blockc_model *m) {
  return m && m->g ? (size_t)bc_shape_numel(&m->g->vals[m->g->input].shape) : 0;
}

size_t blockc_output_size(const blockc_model *m) {
  return m && m->g ? (size_t)bc_shape_numel(&m->g->vals[m->g->output].shape) : 0;
}

// --- running ------------------------------------------------------------------------

// Bytes of io entry i at the actual sizes.
static size_t io_bytes(const bc_graph *g, int i, const long *rt) {
  int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  return (size_t)bc_shape_numel(&s) * 4;  // float32 and int32 alike
}

static const char *io_name(const bc_graph *g, int i) {
  return i < g->ninputs ? g->vals[g->inputs[i]].name : g->output_names[i - g->ninputs];
}

static int check_arrays(const blockc_model *m, void *const *io, const long *rt, void *ws,
                        size_t ws_size, int64_t need, const char *sizer);

// Everything the compiled code cannot check with a message: the order of
// calls, the workspace's size, NULL arrays, run-time dims, overlaps.
static int check_run(const blockc_model *m, void *const *io, const long *rt, void *ws,
                     size_t ws_size) {
  if (!m->c.run) return report(m, BC_EUSAGE, "compile the model before running it");
  return check_arrays(m, io, rt, ws, ws_size, m->c.ws_bytes, "blockc_workspace_size");
}

// check_run's part shared with blockc_backward: need bytes of workspace
// (as the function named `sizer` says).
static int check_arrays(const blockc_model *m, void *const *io, const long *rt, void *ws,
                        size_t ws_size, int64_t need, const char *sizer) {
  const bc_graph *g = m->g;
  if (!m->have_weights) return report(m, BC_EUSAGE, "load or initialise weights before running");
  if (!ws || ((uintptr_t)ws & 63))
    return report(m, BC_EUSAGE, "the workspace is %s (it must be 64-byte aligned)", ws ? "misaligned" : "NULL");
  if (ws_size < (size_t)need)
    return report(m, BC_EUSAGE, "the workspace has %zu bytes; the model needs %lld (%s)",
                  ws_size, (long long)need, sizer);
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (d->rt >= 0 && (rt[d->rt] < 1 || rt[d->rt] > d->value))
      return report(m, BC_EINPUT, "run-time dim %s = %ld is outside 1..%lld", d->name, rt[d->rt],
                    (long long)d->value);
  }
  int n = g->ninputs + g->noutputs;
  for (int i = 0; i < n; i++) {
    bool lengths = i < g->ninputs && bcI_is_lengths(g, g->inputs[i]);
    if (!io[i] && !lengths)
      return report(m, BC_EUSAGE, "%s '%s' is NULL", i < g->ninputs ? "input" : "output", io_name(g, i));
  }
  for (int i = g->ninputs; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (j == i || !io[j]) continue;
      const char *a = io[i], *b = io[j];
      if (a < b + io_bytes(g, j, rt) && b < a + io_bytes(g, i, rt))
        return report(m, BC_EUSAGE, "output '%s' overlaps %s '%s'", io_name(g, i),
                      j < g->ninputs ? "input" : "output", io_name(g, j));
    }
  return BLOCKC_OK;
}

// A status of compiled code as an API status (fn names the entry).
static int run_status(const blockc_model *m, int rc, void *const *io, const long *rt,
                      const char *fn) {
  int st;
  if (rc == BC_RUN_OK) return BLOCKC_OK;
  if (rc == BC_RUN_ELEN || rc == BC_RUN_EDIM || rc == BC_RUN_ETOKEN || rc == BC_RUN_EPOS) {  // the check says which
    pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
    pthread_mutex_lock(lock);
    st = bcR_check_io(m->ctx, m->g, io, rt);
    pthread_mutex_unlock(lock);
    return st ? st : report(m, BC_EINPUT, "%s", rc == BC_RUN_ETOKEN ? "a token id is outside 0..the vocab - 1"
                                                : rc == BC_RUN_EPOS ? "a position is past a learned Positions table"
                                                                    : "a length is outside 1..its axis");
  }
  return report(m, rc == BC_RUN_EINVAL ? BC_EUSAGE : BC_EINTERNAL,
                "%sthe compiled model returned status %d", fn, rc);
}

static int run_io(const blockc_model *m, void *const *io, const long *rt, void *ws, size_t ws_size) {
  int st = check_run(m, io, rt, ws, ws_size);
  if (st) return st;
  return run_status(m, m->c.run_pool((const float *const *)m->w.p, io, m->g->nrt ? rt : NULL, ws,
                                     m->pool),
                    io, rt, "");
}

// The ABI's arrays from blockc_run's arguments (fn names the caller).
static int gather(const blockc_model *m, const char *fn, const void *const *inputs,
                  void *const *outputs, const long long *dims, void **io, long *rt) {
  if (!m->g) return report(m, BC_EUSAGE, "load and compile a graph before running it");
  const bc_graph *g = m->g;
  if ((!inputs && g->ninputs) || !outputs) return report(m, BC_EUSAGE, "%s: inputs or outputs is NULL", fn);
  if (g->nrt && !dims) return report(m, BC_EUSAGE, "%s: the model has run-time dims: dims is NULL", fn);
  if (g->ninputs + g->noutputs > MAX_IO || g->nrt > MAX_RT)
    return report(m, BC_EUSAGE, "%s: more than %d inputs and outputs or %d run-time dims", fn,
                  MAX_IO, MAX_RT);
  for (int i = 0; i < g->ninputs; i++) io[i] = (void *)inputs[i];
  for (int i = 0; i < g->noutputs; i++) io[g->ninputs + i] = outputs[i];
  for (int k = 0; k < g->nrt; k++) {
    long long d = dims[k];
    rt[k] = d < 0 ? -1 : d > 0x7fffffff ? 0x7fffffff : (long)d;  // out of range either way
  }
  return BLOCKC_OK;
}

int blockc_run(const blockc_model *m, const void *const *inputs, void *const *outputs,
               const long long *dims, void *workspace, size_t workspace_size) {
  if (!m) return null_model("blockc_run");
  void *io[MAX_IO];
  long rt[MAX_RT];
  int st = gather(m, "blockc_run", inputs, outputs, dims, io, rt);
  return st ? st : run_io(m, io, rt, workspace, workspace_size);
}

size_t blockc_cache_size(const blockc_model *m) {
  return m && m->c.step ? (size_t)m->c.cache_bytes : 0;
}

// The step entry's own preconditions, with messages (the compiled code
// only returns a status): pos[b] for the nrows batch rows.
static int check_step(const blockc_model *m, void *const *io, const long *rt, const long *pos,
                      long nrows, void *cache, size_t cache_size, const char *who) {
  const bc_graph *g = m->g;
  if (!m->c.step || !m->c.step_pool || !m->c.step_rows_pool) {
    pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
    pthread_mutex_lock(lock);
    int st = bcY_step_check(m->ctx, g);
    pthread_mutex_unlock(lock);
    return st ? BLOCKC_EUSAGE : report(m, BC_EUSAGE, "%s: the model has no step entry", who);
  }
  if (!cache || ((uintptr_t)cache & 63))
    return report(m, BC_EUSAGE, "%s: the cache is %s (blockc_cache_size bytes, 64-byte "
                  "aligned)", who, cache ? "misaligned" : "NULL");
  if (cache_size < (size_t)m->c.cache_bytes)
    return report(m, BC_EUSAGE, "%s: the cache has %zu bytes; this model needs "
                  "blockc_cache_size = %zu (a cache made for a smaller model?)", who, cache_size,
                  (size_t)m->c.cache_bytes);
  long hi = 0;
  for (long b = 0; b < nrows; b++) {
    if (pos[b] < 0)
      return nrows > 1 && pos[b] != pos[0]
                 ? report(m, BC_EUSAGE, "%s: row %ld: pos = %ld is negative", who, b, pos[b])
                 : report(m, BC_EUSAGE, "%s: pos = %ld is negative", who, pos[b]);
    hi = pos[b] > hi ? pos[b] : hi;
  }
  for (int i = 0; i < g->ninputs; i++)
    if (io[i] && bcI_is_lengths(g, g->inputs[i]))
      return report(m, BC_EUSAGE, "%s: lengths input '%s' must be NULL (the step entry "
                    "has no padding)", who, io_name(g, i));
  const bc_dim *T = &g->dims[bcY_step_dim(g)];
  long t = rt[T->rt];
  for (long b = 0; b < nrows && t >= 1 && t <= T->value; b++)
    if (pos[b] > T->value - t) {
      if (nrows > 1 && pos[b] != pos[0])
        return report(m, BC_EINPUT, "%s: row %ld: pos %ld + %ld new positions exceed the "
                      "cache's %lld per row (the bound of %s); start a new sequence at pos 0",
                      who, b, pos[b], t, (long long)T->value, T->name);
      return report(m, BC_EINPUT, "%s: pos %ld + %ld new positions exceed the cache's %lld "
                    "(the bound of %s); start a new sequence at pos 0", who, pos[b], t,
                    (long long)T->value, T->name);
    }
  if (t >= 1 && t <= T->value) {  // a learned Positions table: pos + t past its max=
    pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
    pthread_mutex_lock(lock);
    int st = bcT_run_checks(m->ctx, g, rt, hi, true, who);
    pthread_mutex_unlock(lock);
    if (st) return st;
  }
  char why[320];
  if (t >= 1 && t <= T->value &&
      bcY_cache_refusal(g, m->c.cache_id, cache, pos, nrows, rt, why, sizeof why))
    return report(m, BC_EUSAGE, "%s: %s", who, why);
  return BLOCKC_OK;
}

// blockc_step and blockc_step_rows: pos (one for every row) or rows (one per row);
// last: blockc_step_last (rows given).
static int step_any(const blockc_model *m, const char *who, const void *const *inputs,
                    void *const *outputs, const long long *dims, long long pos,
                    const long long *rows, bool last, void *cache, size_t cache_size,
                    void *workspace, size_t workspace_size) {
  if (!m) return null_model(who);
  void *io[MAX_IO];
  long rt[MAX_RT];
  int st = gather(m, who, inputs, outputs, dims, io, rt);
  if (!st && !m->c.run) st = report(m, BC_EUSAGE, "compile the model before stepping it");
  if (!st) st = check_run(m, io, rt, workspace, workspace_size);
  if (st) return st;
  if (!rows && (pos < LONG_MIN || pos > LONG_MAX))
    return report(m, BC_EUSAGE, "%s: pos = %lld is out of range", who, pos);
  if (!m->c.step_rows_pool) return check_step(m, io, rt, NULL, 0, cache, cache_size, who);
  long nrows = bcY_step_rows(m->g, m->g->nrt ? rt : NULL);
  if (nrows < 1) return report(m, BC_EINTERNAL, "%s: %ld batch rows", who, nrows);
  long *p = malloc((size_t)nrows * sizeof *p);
  if (!p) return report(m, BC_ENOMEM, "%s: out of memory", who);
  for (long b = 0; b < nrows; b++) {
    long long v = rows ? rows[b] : pos;
    if (v < LONG_MIN || v > LONG_MAX) {
      free(p);
      return report(m, BC_EUSAGE, "%s: row %ld: pos = %lld is out of range", who, b, v);
    }
    p[b] = (long)v;
  }
  st = check_step(m, io, rt, p, nrows, cache, cache_size, who);
  int rc = BC_RUN_OK;
  if (!st && last)
    rc = m->c.step_last_pool((const float *const *)m->w.p, io, m->g->nrt ? rt : NULL, p, cache,
                             cache_size, workspace, m->pool);
  else if (!st)
    rc = rows ? m->c.step_rows_pool((const float *const *)m->w.p, io, m->g->nrt ? rt : NULL, p,
                                    cache, cache_size, workspace, m->pool)
              : m->c.step_pool((const float *const *)m->w.p, io, m->g->nrt ? rt : NULL,
                               (long)pos, cache, cache_size, workspace, m->pool);
  free(p);
  if (st) return st;
  if (rc == BC_RUN_OK) return BLOCKC_OK;
  if (rc == BC_RUN_ETOKEN)
    return run_status(m, rc, io, rt, last ? "blockc_step_last: " : rows ? "blockc_step_rows: " : "blockc_step: ");
  return report(m, rc == BC_RUN_EINVAL || rc == BC_RUN_ESEQ       ? BC_EUSAGE
                   : rc == BC_RUN_ECACHE || rc == BC_RUN_EPOS     ? BC_EINPUT
                                                                  : BC_EINTERNAL,
                "%s: the compiled model returned status %d", who, rc);
}

int blockc_step(const blockc_model *m, const void *const *inputs, void *const *outputs,
                const long long *dims, long long pos, void *cache, size_t cache_size,
                void *workspace, size_t workspace_size) {
  return step_any(m, "blockc_step", inputs, outputs, dims, pos, NULL, false, cache, cache_size,
                  workspace, workspace_size);
}

int blockc_step_rows(const blockc_model *m, const void *const *inputs, void *const *outputs,
                     const long long *dims, const long long *pos, void *cache,
                     size_t cache_size, void *workspace, size_t workspace_size) {
  if (m && !pos) return report(m, BC_EUSAGE, "blockc_step_rows: pos is NULL (one per batch row)");
  return step_any(m, "blockc_step_rows", inputs, outputs, dims, 0, pos, false, cache, cache_size,
                  workspace, workspace_size);
}

int blockc_has_step_last(const blockc_model *m) {
  return m && m->c.step && m->c.step_last_pool ? 1 : 0;
}

int blockc_step_last(const blockc_model *m, const void *const *inputs, void *const *outputs,
                     const long long *dims, const long long *pos, void *cache,
                     size_t cache_size, void *workspace, size_t workspace_size) {
  if (m && !pos) return report(m, BC_EUSAGE, "blockc_step_last: pos is NULL (one per batch row)");
  if (m && m->c.step && !m->c.step_last_pool)
    return report(m, BC_EUSAGE, "blockc_step_last: model %s has no last-position step entry "
                  "(some output is not computed by row-wise nodes after the last attention and "
                  "the layer loop); use blockc_step_rows and read row t-1", m->g->model);
  return step_any(m, "blockc_step_last", inputs, outputs, dims, 0, pos, true, cache, cache_size,
                  workspace, workspace_size);
}

int blockc_forward_ws(const blockc_model *m, const float *x, float *y, void *workspace,
                      size_t workspace_size) {
  if (!m) return null_model("blockc_forward");
  if (m->c.run && !m->c.forward)
    return report(m, BC_EUSAGE, "blockc_forward needs one float input, one output and fixed dims; "
                  "this model has %d inputs, %d outputs and %d run-time dims: use blockc_run",
                  m->g->ninputs, m->g->noutputs, m->g->nrt);
  if (!m->g || !m->c.run) return report(m, BC_EUSAGE, "compile the model before running it");
  void *io[2] = {(void *)x, y};
  return run_io(m, io, NULL, workspace, workspace_size);
}

int blockc_forward(const blockc_model *m, const float *x, float *y, void *workspace) {
  return blockc_forward_ws(m, x, y, workspace, blockc_workspace_size(m));
}

// --- the training step ---------------------------------------------------

int blockc_compile_backward(blockc_model *m) {
  if (!m) return null_model("blockc_compile_backward");
  if (!m->g) return misuse(m, "load a graph before compiling its backward");
  if (m->cb.backward) return BLOCKC_OK;
  if (m->g->weight_type != BC_WT_F32)
    return bc_error(m->ctx, BC_EUSAGE, "blockc: error: blockc_compile_backward: the model's "
                    "weight dtype is %s; the backward reads f32 weights",
                    bc_weight_type_name(m->g->weight_type));
  bc_emit_opts eo = {.backward = true};
  return bcD_compile(m->ctx, m->g, &eo, &m->cb);
}

size_t blockc_backward_workspace_size(const blockc_model *m) {
  return m && m->cb.backward ? (size_t)m->cb.bwd_ws_bytes : 0;
}

int blockc_num_params(const blockc_model *m) { return m && m->g ? m->g->nparams : -1; }

const char *blockc_param_name(const blockc_model *m, int i) {
  return m && m->g && i >= 0 && i < m->g->nparams ? m->g->params[i].name : NULL;
}

size_t blockc_param_size(const blockc_model *m, int i) {
  return m && m->g && i >= 0 && i < m->g->nparams
             ? (size_t)bc_shape_numel(&m->g->params[i].shape) : 0;
}

// blockc_backward and blockc_backward_ex (who: the caller's name); rng
// NULL or not training: no dropout.
static int backward_call(const blockc_model *m, const char *who, const void *const *inputs,
                         void *const *outputs, const float *const *dy, float *const *dparams,
                         float *const *dinputs, const long long *dims,
                         const blockc_train_rng *rng, void *workspace, size_t workspace_size) {
  void *io[MAX_IO];
  long rt[MAX_RT];
  int st = gather(m, who, inputs, outputs, dims, io, rt);
  if (st) return st;
  if (!m->cb.backward)
    return report(m, BC_EUSAGE, "%s: call blockc_compile_backward first", who);
  if (!dy || !dparams)
    return report(m, BC_EUSAGE, "%s: %s is NULL", who, dy ? "dparams" : "dy");
  for (int p = 0; p < m->g->nparams; p++)
    if (!dparams[p])
      return report(m, BC_EUSAGE, "%s: dparams[%d] ('%s') is NULL", who, p,
                    m->g->params[p].name);
  if ((st = check_arrays(m, io, rt, workspace, workspace_size, m->cb.bwd_ws_bytes,
                         "blockc_backward_workspace_size")))
    return st;
  const float *const *w = (const float *const *)m->w.p;
  const long *r = m->g->nrt ? rt : NULL;
  bool drop = rng && rng->training && m->cb.backward_ex;  // the pool body: m's threads
  int rc = m->cb.backward_pool(w, io, r, dy, dparams, dinputs, drop, drop ? rng->seed : 0,
                               drop ? rng->step : 0, workspace, m->pool);
  return run_status(m, rc, io, rt,
                    strcmp(who, "blockc_backward") ? "blockc_backward_ex: " : "blockc_backward: ");
}

int blockc_backward(const blockc_model *m, const void *const *inputs, void *const *outputs,
                    const float *const *dy, float *const *dparams, float *const *dinputs,
                    const long long *dims, void *workspace, size_t workspace_size) {
  if (!m) return null_model("blockc_backward");
  return backward_call(m, "blockc_backward", inputs, outputs, dy, dparams, dinputs, dims, NULL,
                       workspace, workspace_size);
}

int blockc_backward_ex(const blockc_model *m, const void *const *inputs, void *const *outputs,
                       const float *const *dy, float *const *dparams, float *const *dinputs,
                       const long long *dims, const blockc_train_rng *rng, void *workspace,
                       size_t workspace_size) {
  if (!m) return null_model("blockc_backward_ex");
  return backward_call(m, "blockc_backward_ex", inputs, outputs, dy, dparams, dinputs, dims, rng,
                       workspace, workspace_size);
}

// --- blockc_generate: the token loop of generate.c over blockc_step --------------

// What one generation binds: the model's arrays at the prompt's size.
typedef struct api_gen {
  const blockc_model *m;
  int tok, logits;        // the tokens input, the logits output (io indices)
  long vocab;
  int tdim;               // the stepped dim's index in dims
  void *io[MAX_IO];
  long long dims[MAX_RT];
  void *cache, *ws;
  size_t cache_bytes, ws_bytes;
} api_gen;

static int api_gen_step(void *opaque, const int32_t *ids, long t, long pos, float *logits) {
  api_gen *a = opaque;
  const bc_graph *g = a->m->g;
  a->io[a->tok] = (void *)ids;
  a->dims[a->tdim] = t;
  // A prompt (t > 1): the last position's logits only, when the model has that entry.
  bool last = t > 1 && blockc_has_step_last(a->m);
  long long p1[1] = {pos};  // B == 1 (api_gen_bind)
  int st = last ? blockc_step_last(a->m, (const void *const *)a->io, a->io + g->ninputs, a->dims,
                                   p1, a->cache, a->cache_bytes, a->ws, a->ws_bytes)
                : blockc_step(a->m, (const void *const *)a->io, a->io + g->ninputs, a->dims, pos,
                              a->cache, a->cache_bytes, a->ws, a->ws_bytes);
  size_t row = last ? 0 : (size_t)(t - 1);
  if (!st) memcpy(logits, (const float *)a->io[a->logits] + row * (size_t)a->vocab,
                  (size_t)a->vocab * sizeof *logits);
  return st;
}

// generate.c's messages go to the model's sink, under its lock.
static void api_gen_forward(void *opaque, const char *msg) {
  const blockc_model *m = opaque;
  pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
  pthread_mutex_lock(lock);
  m->ctx->on_error(m->ctx->error_opaque, msg);
  pthread_mutex_unlock(lock);
}

// The tokens input and the logits output of g, or a message saying why g
// cannot generate.
static int api_gen_bind(const blockc_model *m, api_gen *a) {
  const bc_graph *g = m->g;
  a->tok = a->logits = -1;
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    if (v->type == BC_VT_F32)
      return report(m, BC_EUSAGE, "blockc_generate: input '%s' is float (generation feeds token "
                    "ids only)", v->name);
    if (v->shape.rank != 2) continue;  // lengths: left out
    if (a->tok >= 0) return report(m, BC_EUSAGE, "blockc_generate: the graph has two token inputs");
    a->tok = i;
  }
  if (a->tok < 0) return report(m, BC_EUSAGE, "blockc_generate: the graph has no token-ids input "
                                "(`input ids : tokens[B, T]`)");
  for (int i = 0; i < g->noutputs; i++)
    if (!strcmp(g->output_names[i], "logits") || g->noutputs == 1) a->logits = g->ninputs + i;
  if (a->logits < 0)
    return report(m, BC_EUSAGE, "blockc_generate: the graph has several outputs and none is "
                  "named 'logits'");
  const bc_shape *ls = &g->vals[g->outputs[a->logits - g->ninputs]].shape;
  const bc_shape *ts = &g->vals[g->inputs[a->tok]].shape;
  int seq = bcY_step_dim(g);
  if (seq < 0 || !m->c.step) {
    pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
    pthread_mutex_lock(lock);
    int st = bcY_step_check(m->ctx, g);  // names the node that prevents stepping
    pthread_mutex_unlock(lock);
    return st ? BLOCKC_EUSAGE : report(m, BC_EUSAGE, "blockc_generate: the model has no step entry");
  }
  if (ls->rank != 3 || ls->sym[0] || ls->d[0] != 1 || ls->sym[1] != seq + 1 || ls->sym[2] ||
      ts->sym[0] || ts->d[0] != 1 || ts->sym[1] != seq + 1)
    return report(m, BC_EUSAGE, "blockc_generate: needs token ids [1, %s] and logits [1, %s, V] "
                  "(batch 1, the stepped dim second)", g->dims[seq].name, g->dims[seq].name);
  a->vocab = (long)ls->d[2];
  a->tdim = g->dims[seq].rt;
  return BLOCKC_OK;
}

// Outputs at the prompt's size (the largest call), the cache and workspace.
static int api_gen_alloc(const blockc_model *m, api_gen *a, long nprompt) {
  const bc_graph *g = m->g;
  for (int k = 0; k < g->ndims; k++)
    if (g->dims[k].rt >= 0) a->dims[g->dims[k].rt] = g->dims[k].value;
  a->dims[a->tdim] = nprompt;
  long rt[MAX_RT];
  for (int k = 0; k < g->nrt; k++) rt[k] = (long)a->dims[k];
  for (int i = g->ninputs; i < g->ninputs + g->noutputs; i++)
    if (!(a->io[i] = malloc(io_bytes(g, i, rt) + 4))) return report(m, BC_ENOMEM, "out of memory");
  a->cache_bytes = (size_t)m->c.cache_bytes;
  a->ws_bytes = (size_t)m->c.ws_bytes;
  a->cache = aligned_alloc(64, (a->cache_bytes + 63) / 64 * 64);
  a->ws = aligned_alloc(64, (a->ws_bytes + 63) / 64 * 64 + 64);
  if (!a->cache || !a->ws) return report(m, BC_ENOMEM, "blockc_generate: out of memory for the "
                                         "%zu-byte cache", a->cache_bytes);
  return BLOCKC_OK;
}

static void api_gen_free(const bc_graph *g, api_gen *a) {
  for (int i = g->ninputs; i < g->ninputs + g->noutputs; i++) free(a->io[i]);
  free(a->cache);
  free(a->ws);
}

typedef struct api_gen_cb {
  blockc_token_fn fn;
  void *opaque;
} api_gen_cb;

static int api_gen_token(void *opaque, int32_t id) {
  api_gen_cb *c = opaque;
  return c->fn ? c->fn(c->opaque, (int)id) : 0;
}

int blockc_generate(const blockc_model *m, const int *prompt_ids, size_t n_prompt,
                    const blockc_generate_options *opts, int *out_ids, size_t out_cap,
                    size_t *n_out, blockc_token_fn on_token, void *opaque) {
  if (!m) return null_model("blockc_generate");
  if (n_out) *n_out = 0;
  if (!opts || !n_out || (!prompt_ids && n_prompt) || (!out_ids && out_cap))
    return report(m, BC_EUSAGE, "blockc_generate: opts, n_out, prompt_ids or out_ids is NULL");
  if (!m->g || !m->c.run) return report(m, BC_EUSAGE, "blockc_generate: compile the model first");
  if (!m->have_weights) return report(m, BC_EUSAGE, "load or initialise weights before generating");
  if (opts->n_stop < 0 || (opts->n_stop && !opts->stop_ids))
    return report(m, BC_EUSAGE, "blockc_generate: n_stop is negative or stop_ids is NULL");
  if (opts->max_new_tokens < 0 || (unsigned long long)opts->max_new_tokens > out_cap)
    return report(m, BC_EUSAGE, "blockc_generate: max_new_tokens %lld is negative or above "
                  "out_cap %zu", opts->max_new_tokens, out_cap);
  api_gen *a = calloc(1, sizeof *a);
  if (!a) return report(m, BC_ENOMEM, "out of memory");
  a->m = m;
  int st = api_gen_bind(m, a);
  const bc_dim *T = st ? NULL : &m->g->dims[bcY_step_dim(m->g)];
  if (!st && (n_prompt < 1 || n_prompt > (size_t)T->value))
    st = report(m, n_prompt ? BC_EINPUT : BC_EUSAGE, "blockc_generate: the prompt has %zu tokens; "
                "the model holds 1..%lld positions (the bound of %s)", n_prompt,
                (long long)T->value, T->name);
  if (!st) st = api_gen_alloc(m, a, (long)n_prompt);
  bc_ctx *ctx = st ? NULL : bc_ctx_new();
  if (!st && !ctx) st = report(m, BC_ENOMEM, "out of memory");
  if (!st) {
    bc_set_error_fn(ctx, (void *)m, api_gen_forward);
    bc_gen_opts go = {.max_new = (long)opts->max_new_tokens, .temperature = opts->temperature,
                      .top_k = opts->top_k, .top_p = opts->top_p > 0 ? opts->top_p : 1.0,
                      .seed = opts->seed, .stop = (const int32_t *)opts->stop_ids,
                      .nstop = opts->n_stop};
    api_gen_cb cb = {on_token, opaque};
    bc_gen_result r;
    st = bcX_generate(ctx, a->vocab, (long)T->value, (const int32_t *)prompt_ids, (long)n_prompt,
                      &go, api_gen_step, a, api_gen_token, &cb, (int32_t *)out_ids,
                      (long)out_cap, &r);
    *n_out = (size_t)r.n;
  }
  bc_ctx_free(ctx);
  if (m->g) api_gen_free(m->g, a);
  free(a);
  return st;
}

// --- training: blockc_train_* over the emitted <model>_train_step ----------------

#define TRAIN_MAX_META 32

struct blockc_train {
  blockc_model *m;
  bc_compiled c;            // the module with <model>_backward and <model>_train_step
  bcrt_train_hparams hp;    // hp.decay_mask -> mask (owned)
  unsigned char *mask;
  void *state, *ws;
  size_t ws_size;           // bytes of ws: the step's for hp.accum (and the forward's)
  float **outs;             // accum sets of the outputs at their bounds
  int outs_k;
  int nmeta, nread;         // blockc_train_set_meta's pairs; the last load's
  char *mkey[TRAIN_MAX_META], *mval[TRAIN_MAX_META];
  char *rkey[TRAIN_MAX_META], *rval[TRAIN_MAX_META];
};

void blockc_train_defaults(blockc_train_hparams *hp) {
  if (!hp) return;
  *hp = (blockc_train_hparams){.optimizer = BLOCKC_OPT_ADAMW, .schedule = BLOCKC_LR_CONSTANT,
                               .lr = 3e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                               .weight_decay = 0.01, .clip = 1.0, .accum = 1};
}

_Static_assert(BLOCKC_OPT_ADAMW == BCRT_OPT_ADAMW && BLOCKC_OPT_SGD == BCRT_OPT_SGD &&
                   BLOCKC_LR_CONSTANT == BCRT_LR_CONSTANT && BLOCKC_LR_LINEAR == BCRT_LR_LINEAR &&
                   BLOCKC_LR_COSINE == BCRT_LR_COSINE &&
                   BLOCKC_LR_INVERSE_SQRT == BCRT_LR_INVERSE_SQRT,
               "blockc.h and blockc_rt.h optimizer constants differ");

// Checks hp and copies it (and its mask) into t.
static int train_hparams(blockc_train *t, const blockc_train_hparams *hp) {
  blockc_model *m = t->m;
  if (!hp) return report(m, BC_EUSAGE, "blockc_train: hparams is NULL");
  if (hp->optimizer != BLOCKC_OPT_ADAMW && hp->optimizer != BLOCKC_OPT_SGD)
    return report(m, BC_EUSAGE, "blockc_train: optimizer %d is neither BLOCKC_OPT_ADAMW nor "
                  "BLOCKC_OPT_SGD", hp->optimizer);
  if (hp->schedule < BLOCKC_LR_CONSTANT || hp->schedule > BLOCKC_LR_INVERSE_SQRT)
    return report(m, BC_EUSAGE, "blockc_train: schedule %d is not a BLOCKC_LR_* value", hp->schedule);
  if (hp->accum < 1 || hp->accum > 65536)
    return report(m, BC_EUSAGE, "blockc_train: accum = %d is outside 1..65536", hp->accum);
  if (hp->warmup < 0 || hp->steps < 0)
    return report(m, BC_EUSAGE, "blockc_train: warmup and steps must be >= 0");
  double v[] = {hp->lr, hp->min_lr, hp->beta1, hp->beta2, hp->eps, hp->weight_decay, hp->momentum,
                hp->clip};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!(v[i] - v[i] == 0.0)) return report(m, BC_EUSAGE, "blockc_train: a hyper-parameter is not finite");
  if (!(hp->lr >= 0) || !(hp->beta1 >= 0 && hp->beta1 < 1) || !(hp->beta2 >= 0 && hp->beta2 < 1) ||
      !(hp->eps > 0 || hp->optimizer == BLOCKC_OPT_SGD) || !(hp->momentum >= 0))
    return report(m, BC_EUSAGE, "blockc_train: lr >= 0, 0 <= beta1, beta2 < 1, eps > 0 and "
                  "momentum >= 0 are required");
  if (t->c.train && ((long long *)t->state)[1] > 0 && hp->optimizer != t->hp.optimizer)
    return report(m, BC_EUSAGE, "blockc_train: the optimizer cannot change after a step");
  int np = m->g->nparams;
  if (hp->decay_mask) {
    if (!t->mask && !(t->mask = malloc((size_t)(np ? np : 1))))
      return report(m, BC_ENOMEM, "blockc_train: out of memory");
    memcpy(t->mask, hp->decay_mask, (size_t)np);
  }
  t->hp = (bcrt_train_hparams){.optimizer = hp->optimizer, .schedule = hp->schedule, .lr = hp->lr,
                               .min_lr = hp->min_lr, .warmup = hp->warmup, .steps = hp->steps,
                               .beta1 = hp->beta1, .beta2 = hp->beta2, .eps = hp->eps,
                               .weight_decay = hp->weight_decay, .momentum = hp->momentum,
                               .nesterov = hp->nesterov != 0, .clip = hp->clip,
                               .accum = hp->accum, .decay_mask = hp->decay_mask ? t->mask : NULL,
                               .dropout_seed = hp->dropout_seed};
  return BLOCKC_OK;
}

// The workspace for hp.accum (accum > 1 adds the accumulation block; the
// forward's for blockc_train_eval), grown when needed.
static size_t train_ws_need(const blockc_train *t) {
  size_t need = (size_t)(t->hp.accum > 1 ? t->c.tl.ws_bytes : t->c.tl.ws1_bytes);
  if ((size_t)t->c.ws_bytes > need) need = (size_t)t->c.ws_bytes;
  return (need + 63) / 64 * 64;
}

static int train_workspace(blockc_train *t) {
  size_t need = train_ws_need(t);
  if (t->ws && t->ws_size >= need) return BLOCKC_OK;
  free(t->ws);
  t->ws_size = 0;
  if (!(t->ws = aligned_alloc(64, need)))
    return report(t->m, BC_ENOMEM, "blockc_train: out of memory for the workspace (%zu bytes)", need);
  t->ws_size = need;
  return BLOCKC_OK;
}

// Output buffers for accum micro-batches (at the bounds), and the workspace.
static int train_outputs(blockc_train *t) {
  const bc_graph *g = t->m->g;
  int k = t->hp.accum;
  if (t->c.train) {
    int st = train_workspace(t);
    if (st) return st;
  }
  if (t->outs && t->outs_k == k) return BLOCKC_OK;
  for (int i = 0; t->outs && i < t->outs_k * g->noutputs; i++) free(t->outs[i]);
  free(t->outs);
  t->outs_k = 0;
  if (!(t->outs = calloc((size_t)k * (size_t)g->noutputs, sizeof *t->outs)))
    return report(t->m, BC_ENOMEM, "blockc_train: out of memory");
  t->outs_k = k;
  for (int j = 0; j < k * g->noutputs; j++) {
    size_t n = (size_t)bc_shape_numel(&g->vals[g->outputs[j % g->noutputs]].shape);
    if (!(t->outs[j] = calloc(n ? n : 1, sizeof(float))))
      return report(t->m, BC_ENOMEM, "blockc_train: out of memory for the outputs");
  }
  return BLOCKC_OK;
}

void blockc_train_free(blockc_train *t) {
  if (!t) return;
  if (t->m && t->c.train) blockc_train_sync(t);
  bcD_free(&t->c);
  for (int i = 0; t->outs && i < t->outs_k * t->m->g->noutputs; i++) free(t->outs[i]);
  free(t->outs);
  for (int i = 0; i < t->nmeta; i++) free(t->mkey[i]), free(t->mval[i]);
  for (int i = 0; i < t->nread; i++) free(t->rkey[i]), free(t->rval[i]);
  free(t->mask);
  free(t->state);
  free(t->ws);
  free(t);
}

blockc_train *blockc_train_new(blockc_model *m, const blockc_train_hparams *hp) {
  if (!m) return null_model("blockc_train_new"), NULL;
  if (!m->g) return misuse(m, "blockc_train_new: load a graph first"), NULL;
  if (!m->have_weights) return misuse(m, "blockc_train_new: load or initialise weights first"), NULL;
  if (m->g->weight_type != BC_WT_F32)
    return misuse(m, "blockc_train_new: the model has a weight dtype (blockc_set_weight_dtype); "
                  "training reads f32 weights"), NULL;
  blockc_train *t = calloc(1, sizeof *t);
  if (!t) return bc_error(m->ctx, BC_ENOMEM, "blockc: error: out of memory"), NULL;
  t->m = m;
  bc_emit_opts eo = {.backward = true, .train = true};
  int st = train_hparams(t, hp);
  if (!st) st = bcD_compile(m->ctx, m->g, &eo, &t->c);
  if (!st) st = train_outputs(t);
  if (!st && !(t->state = aligned_alloc(64, (size_t)t->c.tl.state_bytes)))
    st = report(m, BC_ENOMEM, "blockc_train_new: out of memory for the optimizer state (%lld bytes)",
                (long long)t->c.tl.state_bytes);
  if (st) {
    t->c.train = NULL;  // no sync of a half-made trainer
    blockc_train_free(t);
    return NULL;
  }
  t->c.train_init(t->state);
  return t;
}

int blockc_train_set_hparams(blockc_train *t, const blockc_train_hparams *hp) {
  if (!t) return null_model("blockc_train_set_hparams");
  int st = train_hparams(t, hp);
  return st ? st : train_outputs(t);
}

long long blockc_train_steps_done(const blockc_train *t) {
  return t ? ((const long long *)t->state)[1] : -1;
}

double blockc_train_lr(const blockc_train *t, long long s) {
  if (!t) return 0.0;
  return bcrt_lr_at(t->hp.schedule, (long)s, t->hp.steps, t->hp.warmup, t->hp.lr, t->hp.min_lr);
}

int blockc_train_sync(blockc_train *t) {
  if (!t) return null_model("blockc_train_sync");
  return pack(t->m);
}

int blockc_train_step(blockc_train *t, const void *const *inputs, const long long *dims,
                      float *loss_out, float *grad_norm_out) {
  if (!t) return null_model("blockc_train_step");
  blockc_model *m = t->m;
  const bc_graph *g = m->g;
  int K = t->hp.accum, nio = g->ninputs + g->noutputs;
  void **io = malloc((size_t)K * (size_t)nio * sizeof *io);
  if (!io) return report(m, BC_ENOMEM, "blockc_train_step: out of memory");
  long rt[MAX_RT];
  int st = BLOCKC_OK;
  for (int k = 0; !st && k < K; k++) {
    st = gather(m, "blockc_train_step", inputs ? inputs + (size_t)k * (size_t)g->ninputs : NULL,
                (void *const *)t->outs + (size_t)k * (size_t)g->noutputs, dims, io + (size_t)k * nio, rt);
    if (!st)
      st = check_arrays(m, io + (size_t)k * nio, rt, t->ws, t->ws_size, (int64_t)train_ws_need(t),
                        "blockc_train");
  }
  float loss = 0, norm = 0;
  int rc = st ? 0 : t->c.train_pool(m->w.p, io, g->nrt ? rt : NULL, &t->hp, t->state, t->ws, &loss,
                                    &norm, m->pool);
  if (!st && rc == 8) {
    st = report(m, BC_EINPUT, "blockc_train_step: step %lld: %s is not finite (%g); nothing updated",
                blockc_train_steps_done(t) + 1, !(loss - loss == 0.0f) ? "the loss" : "the gradient norm",
                !(loss - loss == 0.0f) ? (double)loss : (double)norm);
    st = BLOCKC_ENONFINITE;
  } else if (!st && rc) {
    for (int k = 0; k < K && !st; k++) {
      int r = run_status(m, rc, io + (size_t)k * nio, rt, "blockc_train_step: ");
      if (r && (k == K - 1 || rc == BC_RUN_EINVAL || r != BC_EINTERNAL)) st = r;
    }
  }
  free(io);
  if (loss_out) *loss_out = loss;
  if (grad_norm_out) *grad_norm_out = norm;
  return st;
}

int blockc_train_eval(blockc_train *t, const void *const *inputs, const long long *dims,
                      float *loss_out) {
  if (!t) return null_model("blockc_train_eval");
  blockc_model *m = t->m;
  const bc_graph *g = m->g;
  void *io[MAX_IO];
  long rt[MAX_RT];
  int st = gather(m, "blockc_train_eval", inputs, (void *const *)t->outs, dims, io, rt);
  if (!st) st = check_arrays(m, io, rt, t->ws, t->ws_size, t->c.ws_bytes, "blockc_train");
  if (st) return st;
  // the parameters as they are now, with no packed copy (cblas everywhere):
  // the model's packed copy may hold weights of before the last steps
  const float **w = malloc((size_t)(g->nparams + 1) * sizeof *w);
  if (!w) return report(m, BC_ENOMEM, "blockc_train_eval: out of memory");
  for (int p = 0; p < g->nparams; p++) w[p] = m->w.p[p];
  w[g->nparams] = NULL;
  int rc = t->c.run(w, io, g->nrt ? rt : NULL, t->ws);
  free(w);
  if ((st = run_status(m, rc, io, rt, "blockc_train_eval: "))) return st;
  int v = g->outputs[t->c.tl.loss];
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  double sum = 0;
  const float *y = io[g->ninputs + t->c.tl.loss];
  for (int64_t i = 0; i < bc_shape_numel(&s); i++) sum += y[i];
  if (loss_out) *loss_out = (float)sum;
  return BLOCKC_OK;
}

int blockc_train_param_decay(const blockc_train *t, int p) {
  if (!t || p < 0 || p >= t->m->g->nparams) return -1;
  return t->hp.decay_mask ? t->hp.decay_mask[p] != 0 : t->m->g->params[p].shape.rank >= 2;
}

// --- checkpoints --------------------------------------------------------------------

static const char *const train_reserved[] = {"format", "blockc_train", "step", "optimizer", "nparams",
                                             "micro_batches"};

int blockc_train_set_meta(blockc_train *t, const char *key, const char *value) {
  if (!t) return null_model("blockc_train_set_meta");
  if (!key || !value || !*key) return report(t->m, BC_EUSAGE, "blockc_train_set_meta: empty key or NULL value");
  if (strlen(key) > 255 || strlen(value) > 4095)
    return report(t->m, BC_EUSAGE, "blockc_train_set_meta: key over 255 or value over 4095 bytes");
  for (size_t i = 0; i < sizeof train_reserved / sizeof *train_reserved; i++)
    if (!strcmp(key, train_reserved[i]))
      return report(t->m, BC_EUSAGE, "blockc_train_set_meta: '%s' is reserved", key);
  int i = 0;
  while (i < t->nmeta && strcmp(t->mkey[i], key)) i++;
  if (i == TRAIN_MAX_META) return report(t->m, BC_EUSAGE, "blockc_train_set_meta: more than 32 keys");
  char *k = strdup(key), *v = strdup(value);
  if (!k || !v) {
    free(k);
    free(v);
    return report(t->m, BC_ENOMEM, "blockc_train_set_meta: out of memory");
  }
  if (i < t->nmeta) free(t->mkey[i]), free(t->mval[i]);
  else t->nmeta++;
  t->mkey[i] = k;
  t->mval[i] = v;
  return BLOCKC_OK;
}

const char *blockc_train_get_meta(const blockc_train *t, const char *key) {
  if (!t || !key) return NULL;
  for (int i = 0; i < t->nread; i++)
    if (!strcmp(t->rkey[i], key)) return t->rval[i];
  return NULL;
}

// Float offset of parameter p in a state block (emit_train.c's layout).
static int64_t train_offset(const bc_graph *g, int p) {
  int64_t off = 0;
  for (int i = 0; i < p; i++) off += (bc_shape_numel(&g->params[i].shape) + 15) / 16 * 16;
  return off;
}

// The moment tensors' names: "exp_avg" / "exp_avg_sq" (AdamW), "momentum_buffer" (SGD).
static int train_moments(const blockc_train *t, const char *pre[2]) {
  if (t->hp.optimizer == BCRT_OPT_ADAMW) {
    pre[0] = "exp_avg";
    pre[1] = "exp_avg_sq";
    return 2;
  }
  pre[0] = "momentum_buffer";
  return 1;
}

static int train_write(blockc_train *t, const char *path, bool with_state) {
  if (!t) return null_model("blockc_train_save");
  if (!path) return report(t->m, BC_EUSAGE, "blockc_train_save: path is NULL");
  blockc_model *m = t->m;
  const bc_graph *g = m->g;
  const char *pre[2];
  int nm = with_state ? train_moments(t, pre) : 0, np = g->nparams, n = np * (1 + nm);
  const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
  bc_shape *shapes = calloc((size_t)(n ? n : 1), sizeof *shapes);
  const float **data = calloc((size_t)(n ? n : 1), sizeof *data);
  int st = names && shapes && data ? BLOCKC_OK : report(m, BC_ENOMEM, "blockc_train_save: out of memory");
  const float *block = (const float *)((const char *)t->state + 64);
  for (int p = 0; !st && p < np; p++) {
    names[p] = g->params[p].name;
    shapes[p] = g->params[p].shape;
    data[p] = m->w.p[p];
    for (int k = 0; k < nm; k++) {
      int j = np * (1 + k) + p;
      names[j] = bc_fmt(m->ctx, "%s.%s", pre[k], g->params[p].name);
      shapes[j] = g->params[p].shape;
      data[j] = block + (int64_t)k * t->c.tl.total + train_offset(g, p);
      if (!names[j]) st = report(m, BC_ENOMEM, "blockc_train_save: out of memory");
    }
  }
  const char *keys[TRAIN_MAX_META + 5], *vals[TRAIN_MAX_META + 5];
  int nk = 0;
  if (with_state) {
    keys[nk] = "blockc_train", vals[nk++] = "1";
    keys[nk] = "step", vals[nk++] = bc_fmt(m->ctx, "%lld", blockc_train_steps_done(t));
    keys[nk] = "optimizer", vals[nk++] = t->hp.optimizer == BCRT_OPT_ADAMW ? "adamw" : "sgd";
    keys[nk] = "nparams", vals[nk++] = bc_fmt(m->ctx, "%d", np);
    keys[nk] = "micro_batches", vals[nk++] = bc_fmt(m->ctx, "%lld", ((const long long *)t->state)[5]);
    for (int i = 0; i < t->nmeta; i++) keys[nk] = t->mkey[i], vals[nk++] = t->mval[i];
  }
  if (!st) st = bcS_write_meta(m->ctx, path, n, names, shapes, data, nk, keys, vals);
  free(names);
  free(shapes);
  free(data);
  if (!st) st = blockc_train_sync(t);
  return st;
}

int blockc_train_save(blockc_train *t, const char *path) { return train_write(t, path, true); }
int blockc_train_save_weights(blockc_train *t, const char *path) { return train_write(t, path, false); }

// One tensor of the checkpoint into dst, its shape checked; all finite.
static int train_read_tensor(blockc_train *t, const bc_st_file *f, const char *name,
                             const bc_shape *want, float *dst) {
  bc_ctx *ctx = t->m->ctx;
  const bc_st_tensor *x = bcS_find(f, name);
  if (!x)
    return bc_error(ctx, BC_EINPUT, "%s: error: no tensor '%s': a checkpoint of another graph or "
                    "optimizer?", f->path, name);
  bool same = x->rank == want->rank;
  for (int k = 0; same && k < want->rank; k++) same = x->shape[k] == want->d[k];
  if (!same) {
    char a[96];
    bc_shape_str(want, a, sizeof a);
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' does not have the shape %s the graph "
                    "gives it: a checkpoint of another graph?", f->path, name, a);
  }
  int st = bcS_read_f32(ctx, f, x, dst);
  int64_t n = bc_shape_numel(want);
  for (int64_t i = 0; !st && i < n; i++)
    if (!(dst[i] - dst[i] == 0.0f))
      st = bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' holds a non-finite value at %lld",
                    f->path, name, (long long)i);
  return st;
}

// The step and the micro-batches trained (dropout's mask index; a file
// without it, of before the count: step * accum).
static int train_read_meta(blockc_train *t, const bc_st_file *f, long long *step, long long *micro) {
  bc_ctx *ctx = t->m->ctx;
  char *keys[TRAIN_MAX_META + 8], *vals[TRAIN_MAX_META + 8];
  int n = bcS_read_meta(ctx, f, TRAIN_MAX_META + 8, keys, vals);
  if (n < 0) return BC_EIO;
  const char *opt = NULL, *stp = NULL, *mark = NULL, *mic = NULL;
  for (int i = 0; i < n; i++) {
    if (!strcmp(keys[i], "micro_batches")) mic = vals[i];
    if (!strcmp(keys[i], "optimizer")) opt = vals[i];
    if (!strcmp(keys[i], "step")) stp = vals[i];
    if (!strcmp(keys[i], "blockc_train")) mark = vals[i];
  }
  int st = BC_OK;
  char *end = NULL;
  long long s = stp ? strtoll(stp, &end, 10) : -1;
  char *mend = NULL;
  long long mb = mic ? strtoll(mic, &mend, 10) : s * t->hp.accum;
  if (mic && (!mend || *mend || mb < 0)) mb = -1;
  const char *want = t->hp.optimizer == BCRT_OPT_ADAMW ? "adamw" : "sgd";
  if (!mark || !stp || !opt || !end || *end || s < 0 || mb < 0)
    st = bc_error(ctx, BC_EINPUT, "%s: error: not a training checkpoint (its __metadata__ lacks "
                  "blockc_train, step or optimizer, or has a bad step or micro_batches)", f->path);
  else if (strcmp(opt, want))
    st = bc_error(ctx, BC_EINPUT, "%s: error: the checkpoint's optimizer is '%.32s', this run's "
                  "is '%s'", f->path, opt, want);
  *step = s;
  *micro = mb;
  if (!st) {
    for (int i = 0; i < t->nread; i++) free(t->rkey[i]), free(t->rval[i]);
    t->nread = 0;
    for (int i = 0; i < n; i++) {
      bool reserved = false;
      for (size_t r = 0; r < sizeof train_reserved / sizeof *train_reserved; r++)
        reserved |= !strcmp(keys[i], train_reserved[r]);
      if (!reserved && t->nread < TRAIN_MAX_META) {
        t->rkey[t->nread] = keys[i], t->rval[t->nread++] = vals[i];
        keys[i] = vals[i] = NULL;
      }
    }
  }
  for (int i = 0; i < n; i++) free(keys[i]), free(vals[i]);
  return st;
}

int blockc_train_load(blockc_train *t, const char *path) {
  if (!t) return null_model("blockc_train_load");
  if (!path) return report(t->m, BC_EUSAGE, "blockc_train_load: path is NULL");
  blockc_model *m = t->m;
  const bc_graph *g = m->g;
  bc_st_file *f = NULL;
  int st = bcS_open(m->ctx, path, &f);
  if (st) return st;
  long long step = 0, micro = 0;
  st = train_read_meta(t, f, &step, &micro);
  const char *pre[2];
  int nm = train_moments(t, pre);
  int64_t wfl = 0;
  for (int p = 0; p < g->nparams; p++) wfl += bc_shape_numel(&g->params[p].shape);
  float *wtmp = st ? NULL : malloc((size_t)(wfl ? wfl : 1) * sizeof(float));
  char *stmp = st ? NULL : aligned_alloc(64, (size_t)t->c.tl.state_bytes);
  if (!st && (!wtmp || !stmp)) st = report(m, BC_ENOMEM, "blockc_train_load: out of memory");
  if (!st) memcpy(stmp, t->state, (size_t)t->c.tl.state_bytes);
  float *block = stmp ? (float *)(stmp + 64) : NULL;
  int64_t woff = 0;
  for (int p = 0; !st && p < g->nparams; p++) {
    const bc_shape *s = &g->params[p].shape;
    st = train_read_tensor(t, f, g->params[p].name, s, wtmp + woff);
    woff += bc_shape_numel(s);
    for (int k = 0; !st && k < nm; k++) {
      const char *name = bc_fmt(m->ctx, "%s.%s", pre[k], g->params[p].name);
      st = name ? train_read_tensor(t, f, name, s, block + k * t->c.tl.total + train_offset(g, p))
                : BC_ENOMEM;
    }
  }
  bcS_close(f);
  if (!st) {  // all read and checked: commit
    woff = 0;
    for (int p = 0; p < g->nparams; p++) {
      int64_t n = bc_shape_numel(&g->params[p].shape);
      memcpy(m->w.p[p], wtmp + woff, (size_t)n * sizeof(float));
      woff += n;
    }
    for (int i = 0; i < t->nread && !st; i++)  // carried into the next saves
      st = blockc_train_set_meta(t, t->rkey[i], t->rval[i]);
    ((long long *)stmp)[1] = step;
    ((long long *)stmp)[4] = step > 0 ? t->hp.optimizer : -1;
    ((long long *)stmp)[5] = micro;
    memcpy(t->state, stmp, (size_t)t->c.tl.state_bytes);
    st = blockc_train_sync(t);
  }
  free(wtmp);
  free(stmp);
  return st;
}
