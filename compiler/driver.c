// driver.c — the compile driver: passes -> plan -> emit -> tcc, written once.
//
// The CLI (run, bench, emit-c), the embedding API and the AOT path all turn
// a parsed graph into code the same way; this is that way.  Parsing stays
// with the caller (from a file, a string, with -D overrides), and so does
// what happens to the result (run it, time it, write it to disk).
#include "bc.h"

#include <stdlib.h>
#include <string.h>

// The entry points a JIT build defines, by the options it was emitted with.
static int lookup(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o, bc_compiled *c) {
  void (*f)(void) = NULL;
  int st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_run%s", g->model, o->profile ? "_profile" : ""), &f);
  if (st) return st;
  // Back to the functions' real types (through void (*)(void), the generic
  // function pointer that -Wcast-function-type accepts).
  if (o->profile) c->profile = (bc_run_profile_fn)f;
  else c->run = (bc_run_fn)f;
  if (!o->profile) {
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_run_pool", g->model), &f);
    if (st) return st;
    c->run_pool = (bc_run_pool_fn)f;
  }
  if (!o->profile && !o->gemm_only && c->cache_bytes > 0) {
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_step", g->model), &f);
    if (st) return st;
    c->step = (bc_step_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_step_rows", g->model), &f);
    if (st) return st;
    c->step_rows = (bc_step_rows_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_step_pool", g->model), &f);
    if (st) return st;
    c->step_pool = (bc_step_pool_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_step_rows_pool", g->model), &f);
    if (st) return st;
    c->step_rows_pool = (bc_step_rows_pool_fn)f;
    if (bcY_step_tail(g) >= 0) {  // emitted when the graph has a row-wise tail
      st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_step_last_pool", g->model), &f);
      if (st) return st;
      c->step_last_pool = (bc_step_rows_pool_fn)f;
    }
  }
  if (o->backward) {
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_backward", g->model), &f);
    if (st) return st;
    c->backward = (bc_backward_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_backward_pool", g->model), &f);
    if (st) return st;
    c->backward_pool = (bc_backward_pool_fn)f;
    if (bcI_has_dropout(g)) {
      st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_backward_ex", g->model), &f);
      if (st) return st;
      c->backward_ex = (bc_backward_ex_fn)f;
    }
  }
  if (o->train) {
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_train_step", g->model), &f);
    if (st) return st;
    c->train = (bc_train_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_train_step_pool", g->model), &f);
    if (st) return st;
    c->train_pool = (bc_train_pool_fn)f;
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_train_init", g->model), &f);
    if (st) return st;
    c->train_init = (bc_train_init_fn)f;
  }
  if (!o->profile && !o->gemm_only) {
    st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_pack", g->model), &f);
    if (st) return st;
    c->pack = (void (*)(const float *const *, float *))f;
  }
  if (o->profile || !bcE_is_simple(g)) return BC_OK;
  st = bcJ_lookup(ctx, c->jit, bc_fmt(ctx, "%s_forward", g->model), &f);
  if (!st) c->forward = (bc_forward_fn)f;
  return st;
}

int bcD_compile(bc_ctx *ctx, bc_graph *g, const bc_emit_opts *o, bc_compiled *out) {
  bc_emit_opts none = {0};
  if (!o) o = &none;
  memset(out, 0, sizeof *out);
  int st = g->planned ? BC_OK : bcO_run_until(g, NULL);
  if (st) return st;
  out->ws_bytes = bcY_workspace_bytes(g);
  if (!o->profile && !o->gemm_only) out->cache_bytes = bcY_cache_bytes(g);
  if (out->cache_bytes > 0) out->cache_id = bcY_cache_id(g);
  out->packed_floats = bcY_packed_floats(g);
  if (out->packed_floats < 0) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!(out->csrc = bcE_emit_c(ctx, g, o))) return BC_EINTERNAL;
  if (o->backward) {
    char *bsrc;
    if ((st = bcG_emit(ctx, g, o, &bsrc, &out->bwd_ws_bytes))) return st;
    if (!(out->csrc = bc_fmt(ctx, "%s%s", out->csrc, bsrc))) return BC_ENOMEM;
  }
  if (o->train) {
    char *tsrc;
    if (!o->backward)
      return bc_error(ctx, BC_EINTERNAL, "internal error: the train step needs the backward");
    if ((st = bcU_layout(ctx, g, out->bwd_ws_bytes, &out->tl))) return st;
    if (!(tsrc = bcU_emit(ctx, g, &out->tl))) return BC_ENOMEM;
    if (!(out->csrc = bc_fmt(ctx, "%s%s", out->csrc, tsrc))) return BC_ENOMEM;
  }
  if (o->aot) return BC_OK;
  st = bcJ_compile_module(ctx, out->csrc, &out->jit);
  if (!st) st = lookup(ctx, g, o, out);
  if (st) bcD_free(out);
  return st;
}

int bcD_pack(bc_ctx *ctx, bc_compiled *c, bc_weights *w) {
  w->p[w->n] = NULL;
  if (!c->pack || c->packed_floats <= 0) return BC_OK;
  if (!c->packed) {
    size_t bytes = ((size_t)c->packed_floats * sizeof(float) + 63) / 64 * 64;
    c->packed = aligned_alloc(64, bytes);
    if (!c->packed)
      return bc_error(ctx, BC_ENOMEM, "error: out of memory for the packed weights (%lld bytes)",
                      (long long)bytes);
  }
  c->pack((const float *const *)w->p, c->packed);
  w->p[w->n] = c->packed;
  return BC_OK;
}

int64_t bcD_release_packed(const bc_graph *g, bc_weights *w) {
  if (g->weight_type == BC_WT_F32 || !w->p[w->n]) return 0;
  bool *only = calloc((size_t)(g->nparams > 0 ? g->nparams : 1), sizeof *only);
  if (!only || bcY_packed_only(g, only) < 0) {
    free(only);
    return -1;
  }
  int64_t freed = 0;
  for (int i = 0; i < g->nparams && i < w->n; i++)
    if (only[i] && w->p[i]) {
      freed += bc_shape_numel(&g->params[i].shape) * (int64_t)sizeof(float);
      free(w->p[i]);
      w->p[i] = NULL;
    }
  free(only);
  return freed;
}

void bcD_free(bc_compiled *c) {
  if (!c) return;
  free(c->packed);
  bcJ_free(c->jit);
  memset(c, 0, sizeof *c);
}
