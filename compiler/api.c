// api.c — the embedding API of blockc.h, a thin layer over the compiler.
//
// A blockc_model is a bc_ctx plus the stages' results: the parsed graph,
// its weights, the emitted C and the JIT'ed function. Each call checks that
// the previous stage has happened, so misuse is a status code and a
// message, never a crash.
#define _POSIX_C_SOURCE 200809L
#include "blockc.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "bc.h"

#define MAX_DEFS 64

struct blockc_model {
  bc_ctx *ctx;
  bc_define defs[MAX_DEFS];
  int ndefs;
  bc_graph *g;
  bc_weights w;
  bool have_weights;
  char *csrc;
  bc_jit *jit;
  bc_forward_fn fn;
};

blockc_model *blockc_new(void) {
  blockc_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  if (!(m->ctx = bc_ctx_new())) {
    free(m);
    return NULL;
  }
  return m;
}

void blockc_delete(blockc_model *m) {
  if (!m) return;
  bcJ_free(m->jit);
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
  free(m);
}

void blockc_set_error_func(blockc_model *m, void *opaque, blockc_error_fn fn) {
  bc_set_error_fn(m->ctx, opaque, fn);
}

static int misuse(blockc_model *m, const char *what) {
  return bc_error(m->ctx, BC_EUSAGE, "blockc: error: %s", what);
}

int blockc_set_dim(blockc_model *m, const char *name, long long value) {
  if (m->g) return misuse(m, "blockc_set_dim must be called before the graph is loaded");
  if (!name || !*name || strlen(name) > BC_MAX_IDENT) return misuse(m, "invalid dim name");
  for (int i = 0; i < m->ndefs; i++)
    if (!strcmp(m->defs[i].name, name)) {
      m->defs[i].value = value;
      return BLOCKC_OK;
    }
  if (m->ndefs == MAX_DEFS) return misuse(m, "too many dim overrides (limit 64)");
  m->defs[m->ndefs++] = (bc_define){bc_strdup(m->ctx, name), value};
  return BLOCKC_OK;
}

static int loaded(blockc_model *m) {
  if (!m->g) return BC_EINPUT;
  return BLOCKC_OK;
}

int blockc_load_graph(blockc_model *m, const char *path) {
  if (m->g) return misuse(m, "a graph is already loaded");
  m->g = bcP_parse_file(m->ctx, path, m->defs, m->ndefs);
  return loaded(m);
}

int blockc_load_graph_string(blockc_model *m, const char *name, const char *text) {
  if (m->g) return misuse(m, "a graph is already loaded");
  m->g = bcP_parse_string(m->ctx, name, text, m->defs, m->ndefs);
  return loaded(m);
}

int blockc_load_weights(blockc_model *m, const char *path) {
  if (!m->g) return misuse(m, "load a graph before its weights");
  bcW_free(&m->w);
  int st = bcW_load(m->ctx, m->g, path, &m->w);
  m->have_weights = st == BC_OK;
  return st;
}

int blockc_init_weights(blockc_model *m, unsigned long long seed) {
  if (!m->g) return misuse(m, "load a graph before initialising its weights");
  bcW_free(&m->w);
  int st = bcW_init_random(m->ctx, m->g, seed, &m->w);
  m->have_weights = st == BC_OK;
  return st;
}

int blockc_compile(blockc_model *m) {
  if (!m->g) return misuse(m, "load a graph before compiling");
  if (m->jit) return BLOCKC_OK;
  int st = bcO_run_until(m->g, NULL);
  if (st) return st;
  bc_emit_opts eo = {0};
  if (!(m->csrc = bcE_emit_c(m->ctx, m->g, &eo))) return BC_EINTERNAL;
  return bcJ_compile(m->ctx, m->csrc, bc_fmt(m->ctx, "%s_forward", m->g->model), &m->jit, &m->fn);
}

const char *blockc_c_source(const blockc_model *m) { return m->csrc; }

size_t blockc_workspace_size(const blockc_model *m) {
  if (!m->g || !m->g->planned) return 0;
  return (size_t)bcM_workspace_bytes(m->g);
}

size_t blockc_input_size(const blockc_model *m) {
  return m->g ? (size_t)bc_shape_numel(&m->g->vals[m->g->input].shape) : 0;
}

size_t blockc_output_size(const blockc_model *m) {
  return m->g ? (size_t)bc_shape_numel(&m->g->vals[m->g->output].shape) : 0;
}

int blockc_forward(const blockc_model *m, const float *x, float *y, void *workspace) {
  // No error reporting here: the sink is not thread-safe and forward is.
  if (!m->fn || !m->have_weights || !x || !y || !workspace || ((uintptr_t)workspace & 63))
    return BLOCKC_EUSAGE;
  return m->fn((const float *const *)m->w.p, x, y, workspace) ? BLOCKC_EINTERNAL : BLOCKC_OK;
}
