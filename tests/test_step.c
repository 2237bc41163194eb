// test_step.c — the step entry (issue 11): token-by-token decoding with a
// KV cache, on the JIT and the AOT module.
//
// The oracle is the compiled full forward (`_run`) over the whole sequence:
// feeding the same rows K positions at a time through `_step` (pos = 0, K,
// 2K, ...) must give the same outputs.  Every shipped graph whose
// self-attentions are causal over a run-time T is checked (gpt2, llama and
// the three decoders, whose cross-attention K/V of the memory are computed
// at pos 0 and kept), with chunks of 1, 3 and the whole sequence, B = 1 and
// B = 2.
//
// Tolerance: the cached path computes the same maths with other GEMM shapes
// (scores of t_new rows against pos + t_new keys instead of one causal
// block), so float32 sums are taken in another order.  Measured max
// difference over these graphs at D=16: 7.2e-7 (llama) on outputs up to 2.9; the
// check allows 2e-5 * (1 + max|y|) (about 1e-5 relative, as the contract
// in bc.h states).
//
// Paths are relative to the project root (make test runs from there).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "blockc.h"
#include "cli.h"

// A compiled model and the shapes of one full-length call.
typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_compiled c;
  void *ws, *cache;
  int seq_rt;          // index in rt of the stepped dim T
  int64_t tmax;        // its bound
  int s_rt;            // index in rt of the memory's dim S (-1: none)
} model;

static model *model_new(const char *path, const bc_define *defs, int ndefs) {
  model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->ctx = tu_ctx(&m->errs);
  m->g = bcP_parse_file(m->ctx, path, defs, ndefs);
  if (!m->g) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcW_init_random(m->ctx, m->g, 11, &m->w), BC_OK);
  if (bcD_compile(m->ctx, m->g, NULL, &m->c)) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcD_pack(m->ctx, &m->c, &m->w), BC_OK);  // w.p[n]: the packed copy
  m->ws = cli_workspace(m->ctx, m->g);
  assert_non_null(m->ws);
  m->seq_rt = m->s_rt = -1;
  for (int d = 0; d < m->g->ndims; d++) {
    if (!strcmp(m->g->dims[d].name, "T")) {
      m->seq_rt = m->g->dims[d].rt;
      m->tmax = m->g->dims[d].value;
    }
    if (!strcmp(m->g->dims[d].name, "S")) m->s_rt = m->g->dims[d].rt;
  }
  if (m->c.cache_bytes > 0) {
    m->cache = aligned_alloc(64, (size_t)m->c.cache_bytes);
    assert_non_null(m->cache);
  }
  return m;
}

static void model_free(model *m) {
  free(m->cache);
  free(m->ws);
  bcD_free(&m->c);
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
  free(m);
}

static void fill(float *x, int64_t n, unsigned seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0);
  }
}

// Where the stepped axis sits in array v's shape: outer rows before it
// (the batch), inner floats after it (the width); -1 if v has no such axis.
static int seq_axis(const bc_graph *g, int v, int seq_rt) {
  const bc_shape *s = &g->vals[v].shape;
  for (int i = 0; i < s->rank; i++)
    if (s->sym[i] && g->dims[s->sym[i] - 1].rt == seq_rt) return i;
  return -1;
}

typedef struct {
  int64_t outer, inner;
} split;

static split split_of(const bc_graph *g, int v, int axis, const long *rt) {
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  split r = {1, 1};
  for (int i = 0; i < s.rank; i++) {
    if (i < axis) r.outer *= s.d[i];
    if (i > axis) r.inner *= s.d[i];
  }
  return r;
}

// Rows [t0, t0 + t) of a [outer, T, inner] array into/out of a
// [outer, t, inner] one.
static void rows_copy(float *full, int64_t T, float *part, int64_t t0, int64_t t, split sp,
                      bool to_part) {
  for (int64_t o = 0; o < sp.outer; o++) {
    float *f = full + (o * T + t0) * sp.inner, *p = part + o * t * sp.inner;
    size_t n = (size_t)(t * sp.inner) * sizeof(float);
    if (to_part) memcpy(p, f, n);
    else memcpy(f, p, n);
  }
}

// The arrays of one full-length call: inputs seeded, outputs allocated; the
// lengths inputs stay NULL.  rt: every run-time dim at its bound except T
// (and S when S > 0).
typedef struct {
  int n;
  float *p[16];
  int64_t numel[16];
  long rt[8];
} arrays;

static void arrays_new_s(const model *m, arrays *a, int64_t T, int64_t S, unsigned seed) {
  const bc_graph *g = m->g;
  memset(a, 0, sizeof *a);
  a->n = g->ninputs + g->noutputs;
  assert_true(a->n <= 16 && g->nrt <= 8 && m->seq_rt >= 0);
  for (int d = 0; d < g->ndims; d++)
    if (g->dims[d].rt >= 0) a->rt[g->dims[d].rt] = (long)g->dims[d].value;
  a->rt[m->seq_rt] = (long)T;
  if (S > 0 && m->s_rt >= 0) a->rt[m->s_rt] = (long)S;
  for (int i = 0; i < a->n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    if (g->vals[v].type == BC_VT_I32) continue;
    bc_shape s = bcI_shape_at(g, &g->vals[v].shape, a->rt);
    a->numel[i] = bc_shape_numel(&s);
    a->p[i] = calloc((size_t)a->numel[i], sizeof(float));
    assert_non_null(a->p[i]);
    if (i < g->ninputs) fill(a->p[i], a->numel[i], seed + (unsigned)i);
  }
}

static void arrays_new(const model *m, arrays *a, int64_t T, unsigned seed) {
  arrays_new_s(m, a, T, 0, seed);
}

static void arrays_free(arrays *a) {
  for (int i = 0; i < a->n; i++) free(a->p[i]);
}

// The oracle: the full forward without packed weights (cblas everywhere).
static int run_full(model *m, arrays *a) {
  const float *packed = m->w.p[m->w.n];
  m->w.p[m->w.n] = NULL;
  int rc = m->c.run((const float *const *)m->w.p, (void *const *)a->p, a->rt, m->ws);
  m->w.p[m->w.n] = (float *)packed;
  return rc;
}

// One call of the step entry: the JIT's, or the AOT module's when aot is
// not NULL; cache has `bytes` bytes.
static int step_call(const model *m, bc_aot_step_fn aot, void *const *io, const long *rt, long pos,
                     void *cache, size_t bytes) {
  if (aot) return aot((const void *)m->w.p, io, rt, pos, cache, bytes, m->ws);
  return m->c.step((const float *const *)m->w.p, io, rt, pos, cache, bytes, m->ws);
}

// Feeds a's inputs chunk positions at a time through the step entry (the
// JIT's, or the AOT module's when aot is not NULL; starting at pos0, 0 for
// a new sequence) and writes the concatenated outputs into out (same layout
// as a's outputs).  Returns the first non-OK status.
static int run_stepwise_from(model *m, bc_aot_step_fn aot, const arrays *a, int64_t T,
                             int64_t chunk, arrays *out, int64_t pos0) {
  const bc_graph *g = m->g;
  for (int64_t pos = pos0; pos < T; pos += chunk) {
    int64_t t = pos + chunk <= T ? chunk : T - pos;
    long rt[8];
    memcpy(rt, a->rt, sizeof rt);
    rt[m->seq_rt] = (long)t;
    void *io[16] = {0};
    for (int i = 0; i < a->n; i++) {
      if (!a->p[i]) continue;
      int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
      int ax = seq_axis(g, v, m->seq_rt);
      if (ax < 0) {  // the memory: whole, every call
        assert_true(i < g->ninputs);
        io[i] = a->p[i];
        continue;
      }
      split sp = split_of(g, v, ax, a->rt);
      io[i] = malloc((size_t)(sp.outer * t * sp.inner) * sizeof(float));
      assert_non_null(io[i]);
      if (i < g->ninputs) rows_copy(a->p[i], T, io[i], pos, t, sp, true);
    }
    int rc = step_call(m, aot, io, rt, (long)pos, m->cache, (size_t)m->c.cache_bytes);
    for (int i = 0; i < a->n; i++) {
      if (!io[i] || io[i] == a->p[i]) continue;
      int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
      if (i >= g->ninputs && rc == 0)
        rows_copy(out->p[i], T, io[i], pos, t, split_of(g, v, seq_axis(g, v, m->seq_rt), a->rt),
                  false);
      free(io[i]);
    }
    if (rc) return rc;
  }
  return 0;
}

static int run_stepwise(model *m, bc_aot_step_fn aot, const arrays *a, int64_t T, int64_t chunk,
                        arrays *out) {
  return run_stepwise_from(m, aot, a, T, chunk, out, 0);
}

static void expect_outputs_close(const model *m, const arrays *want, const arrays *got,
                                 const char *what) {
  for (int i = m->g->ninputs; i < want->n; i++) {
    double mx = 0;
    for (int64_t k = 0; k < want->numel[i]; k++) mx = fmax(mx, fabs(want->p[i][k]));
    double d = tu_max_abs_diff(want->p[i], got->p[i], (size_t)want->numel[i]);
    if (!(d <= 2e-5 * (1 + mx))) fail_msg("%s: output %d differs by %g (max|y| %g)", what, i, d, mx);
  }
}

// Full forward (unpacked) vs stepwise with chunks 1, 3 and the whole
// sequence, with the packed weights in m->w.p[n] and without.  For the
// JIT, also: zeroing the packed copy changes the one-position steps (the
// step entry reads it).
static void check_graph(const char *path, const bc_define *defs, int ndefs,
                        bc_aot_step_fn aot_step, model *given) {
  model *m = given ? given : model_new(path, defs, ndefs);
  if (!m->c.step) fail_msg("%s: no step entry: %s", path, m->errs.buf);
  assert_true(m->c.cache_bytes > 0 && m->c.cache_bytes % 64 == 0);
  float *packed = m->w.p[m->w.n];
  assert_non_null(packed);  // every steppable graph has few-row GEMMs
  int64_t T = m->tmax - 1;  // not the bound: the cache's spare row must not matter
  arrays a, y;
  arrays_new(m, &a, T, 5);
  assert_int_equal(run_full(m, &a), 0);
  const int64_t chunks[] = {1, 3, T};
  for (int pk = 0; pk < 2; pk++) {
    m->w.p[m->w.n] = pk ? packed : NULL;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
      arrays_new(m, &y, T, 5);
      int rc = run_stepwise(m, aot_step, &a, T, chunks[c], &y);
      if (rc) fail_msg("%s chunk %lld: step returned %d", path, (long long)chunks[c], rc);
      char what[256];
      snprintf(what, sizeof what, "%s chunk %lld%s%s", path, (long long)chunks[c],
               aot_step ? " (aot)" : "", pk ? " packed" : "");
      expect_outputs_close(m, &a, &y, what);
      arrays_free(&y);
    }
  }
  if (!aot_step && packed == m->c.packed) {
    memset(packed, 0, (size_t)m->c.packed_floats * sizeof(float));
    arrays_new(m, &y, T, 5);
    assert_int_equal(run_stepwise(m, NULL, &a, T, 1, &y), 0);
    int yi = m->g->ninputs;
    if (!(tu_max_abs_diff(a.p[yi], y.p[yi], (size_t)a.numel[yi]) > 1e-3))
      fail_msg("%s: the step entry does not read the packed copy", path);
    arrays_free(&y);
    assert_int_equal(bcD_pack(m->ctx, &m->c, &m->w), BC_OK);
  }
  arrays_free(&a);
  if (!given) model_free(m);
}

// Small dims: B, then D H N T, then S (encoder-decoder graphs only).
#define SMALL(b) {"B", b}, {"D", 16}, {"H", 2}, {"N", 2}, {"T", 9}, {"S", 6}

static void test_step_equals_full_jit(void **state) {
  (void)state;
  const char *graphs[] = {"graphs/gpt2.blk", "graphs/decoder_pre_ln.blk",
                          "graphs/decoder_post_ln.blk", "graphs/decoder_residual.blk"};
  for (int b = 1; b <= 2; b++) {
    const bc_define defs[] = {SMALL(b)};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++)
      check_graph(graphs[i], defs, strstr(graphs[i], "decoder_") ? 6 : 5, NULL, NULL);
    // LLaMA: RoPE at the absolute position, grouped-query K/V (H=4, KV=2).
    const bc_define ldefs[] = {{"D", 32}, {"H", 4}, {"KV", 2}, {"N", 2}, {"T", 9}, {"B", b}};
    check_graph("graphs/llama.blk", ldefs, 6, NULL, NULL);
  }
}

// Issue 23: a sliding window (and W = T: no window at all), QK-norm, soft-
// cap, scale=, head scales through the step entry, B = 1 and 2; a decoder
// whose cross-attention is QK-normed (its memory's K normed into the cache).
static void test_step_window(void **state) {
  (void)state;
  for (int b = 1; b <= 2; b++) {
    const bc_define defs[] = {{"B", b}};
    check_graph("tests/data/window_step.blk", defs, 1, NULL, NULL);
    const bc_define wide[] = {{"B", b}, {"W", 12}};
    check_graph("tests/data/window_step.blk", wide, 2, NULL, NULL);
    check_graph("tests/data/window_step_x.blk", defs, 1, NULL, NULL);
  }
}

// head_dim= (Qwen3, Gemma 2: heads K wide whatever D is): the KV cache rows
// are 2*KV*K wide; the step entry equals the full forward, B = 1 and 2, heads
// wider (K = 10 > D/H = 6) and narrower (K = 4) than D/H.  (The shipped
// qwen3_lm / gemma2_lm take token ids, which this harness does not feed:
// tools/families_lm_check.py runs them stepwise.)
static void test_step_head_dim(void **state) {
  (void)state;
  for (int b = 1; b <= 2; b++)
    for (int k = 4; k <= 10; k += 6) {
      const bc_define defs[] = {{"B", b}, {"K", k}};
      check_graph("tests/data/head_dim_step.blk", defs, 2, NULL, NULL);
    }
}

// Past the capacity: ECACHE and nothing written; pos < 0 and lengths: EINVAL.
static void test_step_errors(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL(1)};
  model *m = model_new("graphs/decoder_pre_ln.blk", defs, 6);
  assert_non_null(m->c.step);
  arrays a;
  arrays_new(m, &a, 2, 9);
  int yi = m->g->ninputs;  // the output
  for (int64_t k = 0; k < a.numel[yi]; k++) a.p[yi][k] = 42.0f;
  const float *const *w = (const float *const *)m->w.p;
  void *const *io = (void *const *)a.p;
  size_t cb = (size_t)m->c.cache_bytes;
  assert_int_equal(m->c.step(w, io, a.rt, (long)m->tmax - 1, m->cache, cb, m->ws), BC_RUN_ECACHE);
  assert_int_equal(m->c.step(w, io, a.rt, (long)m->tmax, m->cache, cb, m->ws), BC_RUN_ECACHE);
  for (int64_t k = 0; k < a.numel[yi]; k++) assert_true(a.p[yi][k] == 42.0f);
  for (long pos = 0; pos < m->tmax - 2; pos += 2)  // the sequence up to tmax - 2
    assert_int_equal(m->c.step(w, io, a.rt, pos, m->cache, cb, m->ws), BC_RUN_OK);
  assert_int_equal(m->c.step(w, io, a.rt, (long)m->tmax - 2, m->cache, cb, m->ws), BC_RUN_OK);
  assert_int_equal(m->c.step(w, io, a.rt, -1, m->cache, cb, m->ws), BC_RUN_EINVAL);
  assert_int_equal(m->c.step(w, io, a.rt, 0, NULL, cb, m->ws), BC_RUN_EINVAL);
  assert_int_equal(m->c.step(w, io, a.rt, 0, (char *)m->cache + 4, cb, m->ws), BC_RUN_EINVAL);
  int len[1] = {2};
  int li = -1;
  for (int i = 0; i < m->g->ninputs; i++)
    if (m->g->vals[m->g->inputs[i]].type == BC_VT_I32 && li < 0) li = i;
  assert_true(li >= 0);
  a.p[li] = (float *)(void *)len;
  assert_int_equal(m->c.step(w, (void *const *)a.p, a.rt, 0, m->cache, cb, m->ws), BC_RUN_EINVAL);
  a.p[li] = NULL;
  arrays_free(&a);
  model_free(m);
}

// pos = 0 again with another input gives the fresh result: nothing of the
// previous sequence (self K/V, the memory's K/V) survives a reset.
static void test_step_reset(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL(2)};
  model *m = model_new("graphs/decoder_residual.blk", defs, 6);
  int64_t T = 6;
  arrays first, second, y;
  arrays_new(m, &first, T, 21);
  arrays_new(m, &second, T, 77);
  assert_int_equal(run_full(m, &first), 0);
  assert_int_equal(run_full(m, &second), 0);
  int yi = m->g->ninputs;
  // the two sequences' outputs really differ, so a stale cache would show
  assert_true(tu_max_abs_diff(first.p[yi], second.p[yi], (size_t)first.numel[yi]) > 1e-2);
  arrays_new(m, &y, T, 0);
  assert_int_equal(run_stepwise(m, NULL, &first, T, 2, &y), 0);
  expect_outputs_close(m, &first, &y, "first sequence");
  assert_int_equal(run_stepwise(m, NULL, &second, T, 1, &y), 0);
  expect_outputs_close(m, &second, &y, "after reset");
  arrays_free(&first);
  arrays_free(&second);
  arrays_free(&y);
  model_free(m);
}

// --- a cache that does not hold the sequence (issue 20 item 1) ------------------
//
// Every misuse is refused with nothing written: a cache smaller than the
// model's (a smaller model's, or the right one with its size given short),
// pos past the positions the cache holds, a memory whose S differs from the
// one the sequence started with, a cache another model filled or nobody
// started.  pos may rewind (that truncates the sequence).  Every case runs
// and the failures are listed together (before the fix each was accepted:
// status 0, outputs NaN or garbage, and the small cache written past its end).

// One step of t new positions at pos (S: the memory's length, 0 for its
// bound), the output preset to 42.  *ok: written and finite when the call
// succeeded, untouched when it was refused.
static int step_rows(model *m, bc_aot_step_fn aot, long pos, long t, long S, void *cache,
                     size_t bytes, bool *ok) {
  arrays a;
  arrays_new_s(m, &a, t, S, 40 + (unsigned)pos);
  int yi = m->g->ninputs;
  for (int64_t k = 0; k < a.numel[yi]; k++) a.p[yi][k] = 42.0f;
  int rc = step_call(m, aot, (void *const *)a.p, a.rt, pos, cache, bytes);
  bool same = true, finite = true;
  for (int64_t k = 0; k < a.numel[yi]; k++) {
    same &= a.p[yi][k] == 42.0f;
    finite &= isfinite(a.p[yi][k]) != 0;
  }
  *ok = rc ? same : finite;
  arrays_free(&a);
  return rc;
}

// ok is read through a pointer: the call that sets it is another argument.
static void expect_rc(tu_errors *f, const char *what, int rc, int want, const bool *okp) {
  bool ok = *okp;
  if (rc == want && ok) return;
  int n = snprintf(f->buf + f->len, sizeof f->buf - f->len, "  %s: status %d, want %d%s\n", what,
                   rc, want, ok ? "" : rc ? " (output written)" : " (output not finite)");
  if (n > 0 && (size_t)n < sizeof f->buf - f->len) f->len += (size_t)n;
}

// m (with a memory of run-time S) and other (a smaller model) on m's
// cache; aot / oaot their AOT step entries (NULL: the JIT's).
static void check_cache_misuse(model *m, bc_aot_step_fn aot, model *other, bc_aot_step_fn oaot,
                               const char *label) {
  tu_errors f = {0};
  size_t cb = (size_t)m->c.cache_bytes, ob = (size_t)other->c.cache_bytes;
  assert_true(ob < cb && m->s_rt >= 0);
  void *c = m->cache;
  bool ok;
  expect_rc(&f, "start: pos 0, 3 rows, S 4", step_rows(m, aot, 0, 3, 4, c, cb, &ok), 0, &ok);
  expect_rc(&f, "pos 4 skips ahead of the 3 filled", step_rows(m, aot, 4, 1, 4, c, cb, &ok),
            BC_RUN_ESEQ, &ok);
  expect_rc(&f, "S 4 -> 6 at pos 3", step_rows(m, aot, 3, 1, 6, c, cb, &ok), BC_RUN_ESEQ, &ok);
  expect_rc(&f, "S 4 -> 3 at pos 3", step_rows(m, aot, 3, 1, 3, c, cb, &ok), BC_RUN_ESEQ, &ok);
  expect_rc(&f, "continue at pos 3", step_rows(m, aot, 3, 1, 4, c, cb, &ok), 0, &ok);
  expect_rc(&f, "rewind to pos 1", step_rows(m, aot, 1, 1, 4, c, cb, &ok), 0, &ok);
  expect_rc(&f, "pos 3 after the rewind (2 filled)", step_rows(m, aot, 3, 1, 4, c, cb, &ok),
            BC_RUN_ESEQ, &ok);
  expect_rc(&f, "pos 2 = filled", step_rows(m, aot, 2, 1, 4, c, cb, &ok), 0, &ok);
  expect_rc(&f, "another model's step at pos 1 on this cache",
            step_rows(other, oaot, 1, 1, 0, c, cb, &ok), BC_RUN_ESEQ, &ok);
  expect_rc(&f, "the refused call left the sequence: pos 3", step_rows(m, aot, 3, 1, 4, c, cb, &ok),
            0, &ok);
  expect_rc(&f, "another model starts a sequence in this memory",
            step_rows(other, oaot, 0, 2, 0, c, cb, &ok), 0, &ok);
  expect_rc(&f, "pos 1 on the other model's cache", step_rows(m, aot, 1, 1, 4, c, cb, &ok),
            BC_RUN_ESEQ, &ok);
  memset(c, 0, cb);
  expect_rc(&f, "pos 1 on a zeroed cache", step_rows(m, aot, 1, 1, 4, c, cb, &ok), BC_RUN_ESEQ, &ok);
  memset(c, 0xff, cb);
  expect_rc(&f, "pos 1 on a 0xff cache", step_rows(m, aot, 1, 1, 4, c, cb, &ok), BC_RUN_ESEQ, &ok);
  expect_rc(&f, "pos 0 on it: a new sequence", step_rows(m, aot, 0, 1, 4, c, cb, &ok), 0, &ok);
  expect_rc(&f, "the size given 64 bytes short", step_rows(m, aot, 0, 1, 4, c, cb - 64, &ok),
            BC_RUN_EINVAL, &ok);
  expect_rc(&f, "the size given as 0", step_rows(m, aot, 0, 1, 4, c, 0, &ok), BC_RUN_EINVAL, &ok);
  void *small = aligned_alloc(64, ob);  // last: before the fix this wrote past its end
  assert_non_null(small);
  expect_rc(&f, "a smaller model's cache", step_rows(m, aot, 0, 2, 4, small, ob, &ok),
            BC_RUN_EINVAL, &ok);
  free(small);
  if (f.len) fail_msg("%s:\n%s", label, f.buf);
}

// Rewinding truncates: after positions 0..2 of sequence X, pos 2 with
// another row x2' gives the full forward's row 2 of [x0, x1, x2'].
static void check_rewind(model *m, bc_aot_step_fn aot) {
  arrays X, Z, y;
  arrays_new(m, &X, 3, 5);
  arrays_new(m, &Z, 3, 5);
  int64_t D = Z.numel[0] / 3;  // x [1, 3, D] (B = 1)
  fill(Z.p[0] + 2 * D, D, 99);
  assert_int_equal(run_full(m, &Z), 0);
  arrays_new(m, &y, 3, 0);
  assert_int_equal(run_stepwise(m, aot, &X, 3, 1, &y), 0);
  assert_int_equal(run_stepwise_from(m, aot, &Z, 3, 1, &y, 2), 0);
  int yi = m->g->ninputs;
  int64_t W = y.numel[yi] / 3;
  double d = tu_max_abs_diff(y.p[yi] + 2 * W, Z.p[yi] + 2 * W, (size_t)W);
  if (!(d <= 1e-4)) fail_msg("rewound row differs from the full forward by %g", d);
  arrays_free(&X);
  arrays_free(&Z);
  arrays_free(&y);
}

static void test_cache_misuse_jit(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL(1)};
  model *m = model_new("graphs/decoder_pre_ln.blk", defs, 6);
  model *other = model_new("graphs/gpt2.blk", defs, 5);
  check_cache_misuse(m, NULL, other, NULL, "jit");
  check_rewind(m, NULL);
  model_free(other);
  model_free(m);
}

// Graphs that cannot be stepped: no step entry, and a message naming the node.
static void test_not_steppable(void **state) {
  (void)state;
  struct { const char *path, *where, *why; } cases[] = {
      {"graphs/transformer.blk", "graphs/transformer.blk:", "not causal"},
      {"graphs/post_ln.blk", "graphs/post_ln.blk:24:", "not causal"},
      {"graphs/tiny.blk", "graphs/tiny.blk:17:", "not a run-time dim"},
  };
  const bc_define defs[] = {{"D", 16}, {"H", 2}, {"N", 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model *m = model_new(cases[i].path, defs, 3);
    assert_null(m->c.step);
    assert_int_equal(m->c.cache_bytes, 0);
    assert_int_equal(bcY_step_check(NULL, m->g), BC_EINPUT);
    assert_int_equal(bcY_step_check(m->ctx, m->g), BC_EINPUT);
    if (!strstr(m->errs.buf, cases[i].where) || !strstr(m->errs.buf, cases[i].why) ||
        !strstr(m->errs.buf, "cannot be stepped"))
      fail_msg("%s: message: %s", cases[i].path, m->errs.buf);
    assert_null(strstr(m->c.csrc, "_step("));
    model_free(m);
  }
}

// The AOT module's step entry (the code a user vendors), and its header.
static void test_step_aot(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL(2)};
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(ctx, "graphs/gpt2.blk", defs, 5, false, &g, &c, &h)) fail_msg("%s", errs.buf);
  assert_non_null(strstr(h, "#define GPT2_CACHE_BYTES "));
  assert_non_null(strstr(h, "#define GPT2_CACHE_ALIGN 64"));
  assert_non_null(strstr(h, "GPT2_ECACHE = 4"));
  assert_non_null(strstr(h, "int gpt2_step(const gpt2_weights *w, const gpt2_io *io, long pos"));
  assert_non_null(strstr(h, "int gpt2_step_abi("));
  assert_non_null(strstr(h, "#define GPT2_PACKED_FLOATS "));
  assert_non_null(strstr(h, "#define GPT2_PACKED_ALIGN 64"));
  assert_non_null(strstr(h, "void gpt2_pack(const gpt2_weights *w, float *packed);"));
  assert_non_null(strstr(h, "  const float *packed; /* NULL (cblas everywhere), or gpt2_pack's"));
  char dir[256];
  tu_mktmpdir(dir, sizeof dir, "step");
  bc_aot *a;
  tu_aot_build(ctx, &errs, g, c, h, dir, &a);
  bc_aot_step_fn st = bcA_step(a);
  assert_non_null(st);
  model *m = model_new("graphs/gpt2.blk", defs, 5);
  const float *const *aw = bcA_args(ctx, a, g, &m->w);  // the module's gpt2_pack
  assert_non_null(aw);
  assert_non_null(aw[m->w.n]);
  m->w.p[m->w.n] = (float *)aw[m->w.n];
  check_graph("graphs/gpt2.blk", defs, 5, st, m);
  arrays arr;  // past the capacity: GPT2_ECACHE (4), as the JIT's BC_RUN_ECACHE
  arrays_new(m, &arr, 2, 1);
  size_t cb = (size_t)m->c.cache_bytes;
  assert_int_equal(st((const void *)m->w.p, (void *const *)arr.p, arr.rt, (long)m->tmax - 1,
                      m->cache, cb, m->ws), BC_RUN_ECACHE);
  assert_int_equal(st((const void *)m->w.p, (void *const *)arr.p, arr.rt, -1, m->cache, cb, m->ws),
                   BC_RUN_EINVAL);
  arrays_free(&arr);
  model_free(m);
  bcA_free(a);
  bc_ctx_free(ctx);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// An AOT module of path (built in dir) and a model whose weights are the
// module's arguments (its own packed copy); *a to free with bcA_free.
static model *aot_model(const char *path, const bc_define *defs, int ndefs, const char *dir,
                        bc_aot **a, bc_aot_step_fn *st) {
  model *m = model_new(path, defs, ndefs);
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(m->ctx, path, defs, ndefs, false, &g, &c, &h)) fail_msg("%s", m->errs.buf);
  tu_aot_build(m->ctx, &m->errs, g, c, h, dir, a);
  *st = bcA_step(*a);
  assert_non_null(*st);
  const float *const *aw = bcA_args(m->ctx, *a, g, &m->w);
  assert_non_null(aw);
  m->w.p[m->w.n] = (float *)aw[m->w.n];
  return m;
}

// The same misuses on the vendorable code: <model>_step_abi of the modules.
static void test_cache_misuse_aot(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL(1)};
  char dir[256];
  tu_mktmpdir(dir, sizeof dir, "step");
  bc_aot *a, *oa;
  bc_aot_step_fn st, ost;
  model *m = aot_model("graphs/decoder_pre_ln.blk", defs, 6, dir, &a, &st);
  model *other = aot_model("graphs/gpt2.blk", defs, 5, dir, &oa, &ost);
  check_cache_misuse(m, st, other, ost, "aot");
  check_rewind(m, st);
  model_free(other);
  model_free(m);
  bcA_free(oa);
  bcA_free(a);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// --- the embedding API (blockc.h) -------------------------------------------------

static void on_error(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  size_t n = strlen(msg);
  if (e->len + n + 2 < sizeof e->buf) {
    memcpy(e->buf + e->len, msg, n);
    e->len += n;
    e->buf[e->len++] = '\n';
    e->buf[e->len] = '\0';
  }
}

static blockc_model *api_model(const char *path, tu_errors *errs) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  memset(errs, 0, sizeof *errs);
  blockc_set_error_func(m, errs, on_error);
  assert_int_equal(blockc_set_dim(m, "D", 16), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "H", 2), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "N", 2), BLOCKC_OK);
  assert_int_equal(blockc_set_dim(m, "T", 8), BLOCKC_OK);
  if (blockc_load_graph(m, path) || blockc_init_weights(m, 4) || blockc_compile(m))
    fail_msg("%s: %s", path, errs->buf);
  return m;
}

// gpt2 (x [1, T, 16], len; y [1, T, 16]): blockc_step one position at a
// time equals blockc_run over the whole sequence; overflow, misuse and
// non-steppable graphs are errors with messages.
static void test_api_step(void **state) {
  (void)state;
  tu_errors errs;
  blockc_model *m = api_model("graphs/gpt2.blk", &errs);
  size_t cb = blockc_cache_size(m), wb = blockc_workspace_size(m);
  assert_true(cb > 0 && cb % 64 == 0);
  void *cache = aligned_alloc(64, cb), *ws = aligned_alloc(64, wb);
  assert_non_null(cache);
  assert_non_null(ws);
  const int T = 7, D = 16;
  float x[7 * 16], y[7 * 16], ys[7 * 16];
  fill(x, T * D, 3);
  const void *in[2] = {x, NULL};
  void *out[1] = {y};
  long long dims[1] = {T};
  assert_int_equal(blockc_run(m, in, out, dims, ws, wb), BLOCKC_OK);
  for (int p = 0; p < T; p++) {
    const void *si[2] = {x + p * D, NULL};
    void *so[1] = {ys + p * D};
    long long one[1] = {1};
    if (blockc_step(m, si, so, one, p, cache, cb, ws, wb)) fail_msg("pos %d: %s", p, errs.buf);
  }
  double mx = 0;
  for (int k = 0; k < T * D; k++) mx = fmax(mx, fabs(y[k]));
  assert_true(tu_max_abs_diff(y, ys, (size_t)(T * D)) <= 2e-5 * (1 + mx));
  // pos 7 + 2 new positions > the bound 8: BLOCKC_EINPUT, the cache is full
  long long two[1] = {2};
  errs.len = 0;
  assert_int_equal(blockc_step(m, in, out, two, 7, cache, cb, ws, wb), BLOCKC_EINPUT);
  assert_non_null(strstr(errs.buf, "exceed the cache"));
  assert_int_equal(blockc_step(m, in, out, two, -1, cache, cb, ws, wb), BLOCKC_EUSAGE);
  assert_int_equal(blockc_step(m, in, out, two, 0, (char *)cache + 8, cb, ws, wb), BLOCKC_EUSAGE);
  int len[1] = {2};
  const void *with_len[2] = {x, len};
  errs.len = 0;
  assert_int_equal(blockc_step(m, with_len, out, two, 0, cache, cb, ws, wb), BLOCKC_EUSAGE);
  assert_non_null(strstr(errs.buf, "must be NULL"));
  blockc_delete(m);
  // An encoder cannot be stepped: no cache, and blockc_step says which node.
  m = api_model("graphs/pre_ln.blk", &errs);
  assert_int_equal(blockc_cache_size(m), 0);
  assert_int_equal(blockc_step(m, in, out, two, 0, cache, cb, ws, wb), BLOCKC_EUSAGE);
  if (!strstr(errs.buf, "graphs/pre_ln.blk:23:") || !strstr(errs.buf, "not causal"))
    fail_msg("message: %s", errs.buf);
  blockc_delete(m);
  free(cache);
  free(ws);
}

// The same misuses through blockc_step, each BLOCKC_EUSAGE with a message:
// decoder_pre_ln (x [1, T, 16], mem [1, S, 16], len, mem_len; y) with a
// gpt2 (a smaller cache) as the other model.
typedef struct {
  blockc_model *m;
  void *ws;
  size_t wb;
  int nin;
} api_stepper;

static int api_step_rows(const api_stepper *s, long long pos, long long t, long long S,
                         void *cache, size_t cb) {
  float x[8 * 16], mem[6 * 16], y[8 * 16];
  fill(x, t * 16, 7 + (unsigned)pos);
  fill(mem, 6 * 16, 8);
  const void *in[4] = {x, s->nin > 2 ? mem : NULL, NULL, NULL};
  void *out[1] = {y};
  long long dims[2] = {t, S};
  return blockc_step(s->m, in, out, dims, pos, cache, cb, s->ws, s->wb);
}

static void expect_api(tu_errors *f, tu_errors *errs, const char *what, int rc, int want,
                       const char *msg) {
  if (rc == want && (!msg || strstr(errs->buf, msg))) {
    errs->len = 0;
    errs->buf[0] = '\0';
    return;
  }
  int n = snprintf(f->buf + f->len, sizeof f->buf - f->len, "  %s: status %d, want %d, message "
                   "'%s' (want '%s')\n", what, rc, want, errs->buf, msg ? msg : "");
  if (n > 0 && (size_t)n < sizeof f->buf - f->len) f->len += (size_t)n;
  errs->len = 0;
  errs->buf[0] = '\0';
}

static void test_api_cache_misuse(void **state) {
  (void)state;
  tu_errors errs, oerrs, f = {0};
  blockc_model *dm = blockc_new(), *gm = api_model("graphs/gpt2.blk", &oerrs);
  assert_non_null(dm);
  memset(&errs, 0, sizeof errs);
  blockc_set_error_func(dm, &errs, on_error);
  const char *dn[] = {"D", "H", "N", "T", "S"};
  const long long dv[] = {16, 2, 2, 8, 6};
  for (int k = 0; k < 5; k++) assert_int_equal(blockc_set_dim(dm, dn[k], dv[k]), BLOCKC_OK);
  if (blockc_load_graph(dm, "graphs/decoder_pre_ln.blk") || blockc_init_weights(dm, 4) ||
      blockc_compile(dm))
    fail_msg("%s", errs.buf);
  assert_string_equal(blockc_dim_name(dm, 0), "T");
  assert_string_equal(blockc_dim_name(dm, 1), "S");
  api_stepper d = {dm, NULL, blockc_workspace_size(dm), 4};
  api_stepper o = {gm, NULL, blockc_workspace_size(gm), 2};
  size_t cb = blockc_cache_size(dm), ob = blockc_cache_size(gm);
  assert_true(ob > 0 && ob < cb);
  d.ws = aligned_alloc(64, d.wb);
  o.ws = aligned_alloc(64, o.wb);
  void *c = aligned_alloc(64, cb), *small = aligned_alloc(64, ob);
  assert_true(d.ws && o.ws && c && small);
  expect_api(&f, &errs, "start", api_step_rows(&d, 0, 3, 4, c, cb), BLOCKC_OK, NULL);
  expect_api(&f, &errs, "pos 4 skips ahead", api_step_rows(&d, 4, 1, 4, c, cb), BLOCKC_EUSAGE,
             "blockc_step: pos 4 skips ahead of the 3 positions the cache holds");
  expect_api(&f, &errs, "S 4 -> 6", api_step_rows(&d, 3, 1, 6, c, cb), BLOCKC_EUSAGE,
             "blockc_step: run-time dim S = 6 differs from the 4 this sequence started with");
  expect_api(&f, &errs, "rewind", api_step_rows(&d, 1, 1, 4, c, cb), BLOCKC_OK, NULL);
  expect_api(&f, &errs, "pos 3 after the rewind", api_step_rows(&d, 3, 1, 4, c, cb),
             BLOCKC_EUSAGE, "skips ahead of the 2 positions");
  expect_api(&f, &oerrs, "another model at pos 1", api_step_rows(&o, 1, 1, 0, c, cb),
             BLOCKC_EUSAGE, "blockc_step: the cache does not hold a sequence of this model");
  memset(c, 0, cb);
  expect_api(&f, &errs, "a zeroed cache at pos 1", api_step_rows(&d, 1, 1, 4, c, cb),
             BLOCKC_EUSAGE, "does not hold a sequence of this model");
  expect_api(&f, &errs, "size short", api_step_rows(&d, 0, 1, 4, c, cb - 1), BLOCKC_EUSAGE,
             "blockc_step: the cache has");
  expect_api(&f, &errs, "a smaller model's cache", api_step_rows(&d, 0, 2, 4, small, ob),
             BLOCKC_EUSAGE, "blockc_cache_size");
  if (f.len) fail_msg("api:\n%s", f.buf);
  free(c);
  free(small);
  free(d.ws);
  free(o.ws);
  blockc_delete(dm);
  blockc_delete(gm);
}

// --- the command line ----------------------------------------------------------------

// `blockc run --stepwise` prints the full forward's statistics and writes
// the same output (.npy compared within the tolerance); misuse is a usage
// error and a non-causal graph an input error naming the node.
static void test_cli_stepwise(void **state) {
  (void)state;
  char full[256], part[256], out[8192], err[4096];
  tu_tmp_path(full, sizeof full, ".npy");
  tu_tmp_path(part, sizeof part, ".npy");
  char *base[] = {(char *)tu_blockc(), "run", "graphs/decoder_post_ln.blk", "-D", "D=16", "-D",
                  "H=2", "-D", "N=2", "--length", "T=7", "--length", "S=5", "--output", full, NULL};
  assert_int_equal(tu_spawn(base, out, sizeof out, err, sizeof err), 0);
  const char *backends[] = {"jit", "aot"};
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < 2; c++) {
      char *argv[] = {(char *)tu_blockc(), "run", "graphs/decoder_post_ln.blk", "-D", "D=16", "-D",
                      "H=2", "-D", "N=2", "--length", "T=7", "--length", "S=5", "--output", part,
                      "--stepwise", "--chunk", c ? "3" : "1", "--backend", (char *)backends[b], NULL};
      if (tu_spawn(argv, out, sizeof out, err, sizeof err)) fail_msg("%s", err);
      assert_non_null(strstr(out, "stepwise (chunk"));
      bc_shape s1, s2;
      float *a, *p;
      tu_errors e;
      bc_ctx *ctx = tu_ctx(&e);
      assert_int_equal(bcN_read(ctx, full, &s1, &a), BC_OK);
      assert_int_equal(bcN_read(ctx, part, &s2, &p), BC_OK);
      assert_true(bc_shape_eq(&s1, &s2));
      double mx = 0;
      int64_t n = bc_shape_numel(&s1);
      for (int64_t k = 0; k < n; k++) mx = fmax(mx, fabs(a[k]));
      double d = tu_max_abs_diff(a, p, (size_t)n);
      if (!(d <= 2e-5 * (1 + mx))) fail_msg("%s chunk %d: differs by %g", backends[b], c ? 3 : 1, d);
      free(a);
      free(p);
      bc_ctx_free(ctx);
    }
  char *bad[] = {(char *)tu_blockc(), "run", "graphs/post_ln.blk", "--stepwise", NULL};
  assert_int_equal(tu_spawn(bad, out, sizeof out, err, sizeof err), 1);
  assert_non_null(strstr(err, "graphs/post_ln.blk:24:"));
  assert_non_null(strstr(err, "cannot be stepped"));
  char *chunk_only[] = {(char *)tu_blockc(), "run", "graphs/gpt2.blk", "--chunk", "2", NULL};
  assert_int_equal(tu_spawn(chunk_only, out, sizeof out, err, sizeof err), 2);
  char *interp[] = {(char *)tu_blockc(), "run", "graphs/gpt2.blk", "--stepwise", "--backend", "interp", NULL};
  assert_int_equal(tu_spawn(interp, out, sizeof out, err, sizeof err), 2);
  char *lens[] = {(char *)tu_blockc(), "bench", "graphs/gpt2.blk", "-D", "D=16", "-D", "H=2", "-D",
                  "N=1", "--decode", "--context", "9", "--iters", "3", "--json", NULL};
  assert_int_equal(tu_spawn(lens, out, sizeof out, err, sizeof err), 0);
  for (size_t k = 0; k < 6; k++) {
    const char *keys[] = {"\"prefill_ms\": ", "\"decode_ms_per_token\": ", "\"context\": 9",
                          "\"read_floor_kv_ms\": ", "\"decode_over_floor_kv\": ",
                          "\"packed_bytes\": "};
    if (!strstr(out, keys[k])) fail_msg("bench --decode --json: no %s in %s", keys[k], out);
  }
  char *full_ctx[] = {(char *)tu_blockc(), "bench", "graphs/gpt2.blk", "-D", "D=16", "-D", "H=2",
                      "-D", "N=1", "-D", "T=8", "--decode", "--context", "8", NULL};
  assert_int_equal(tu_spawn(full_ctx, out, sizeof out, err, sizeof err), 2);
  remove(full);
  remove(part);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_step_equals_full_jit),
      cmocka_unit_test(test_step_window),
      cmocka_unit_test(test_step_head_dim),
      cmocka_unit_test(test_step_errors),
      cmocka_unit_test(test_step_reset),
      cmocka_unit_test(test_cache_misuse_jit),
      cmocka_unit_test(test_not_steppable),
      cmocka_unit_test(test_api_step),
      cmocka_unit_test(test_api_cache_misuse),
      cmocka_unit_test(test_cli_stepwise),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_step_aot),  // an AOT build of GPT-2 at -O3
      cmocka_unit_test(test_cache_misuse_aot),  // another AOT build
  };
  return tu_run_tiers(tests, long_tests);
}
