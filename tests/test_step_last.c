// test_step_last.c — the last-position step entry: `<model>_step_last_pool`
// (and _step_last / _abi), blockc_step_last, and their use by `blockc
// generate` and `blockc bench --decode` (prefill_last_ms).
//
// The entry runs the layers and the cache writes exactly as
// `<model>_step_rows_pool` does, then the graph's row-wise tail (the nodes
// after the last attention and the layer run: the final norm, the LM head,
// Gemma 2's last FFN and soft-cap) for each batch row's last new position
// only, writing every output as [B, 1, ...].  The oracle is step_rows on a
// copy of the same cache: after every call the two caches must be
// byte-for-byte equal (the layers are the same code), and row b of the
// compact output must equal row b*t + t-1 of step_rows' output.
//
// Tolerance, not bit equality: with t > BCRT_SMALL_M (64) positions the
// full step runs the tail's products as a GEMM of B*t rows (OpenBLAS), the
// last-position entry as B rows through the small-M packed kernel: the
// float32 sums may be taken in another order: llama_lm and gpt2_lm at
// their shipped sizes (K = 512 / 768) and t = 128 differ by about 1e-6
// relative to max|y| (measured: 8.3e-7 and 1.2e-6; 4-5% of the logits
// equal).  At this suite's sizes (K = 32) OpenBLAS sums in the kernel's
// order and the rows come out equal (printed); with t <= 64 both run the
// small-M kernel, which computes each row alone: equal bits by
// construction.  The check allows 2e-5 * (1 + max|y|), as test_step.c and
// test_step_rows.c do.
//
// The schedule puts B = 3 rows at different positions (a prefill of 70
// positions, a row rewinding, a row restarting at 0, single steps) and runs
// B = 1 too; llama_lm (the layer loop, rotary), gpt2_lm (learned positions,
// the tied head) and gemma2_lm (no layer loop: the tail holds the last
// layer's FFN; a soft-cap) on the JIT, llama_lm on the AOT module (cc).
// Graphs without a tail (the Post-LN decoder, whose last norm is in the
// layer run; a graph with an attention's output as an output) have no such
// entry, as documented: no symbol, blockc_has_step_last 0, blockc_step_last
// BLOCKC_EUSAGE, and generate falls back to the full step.
//
// Hostile arguments give the same status as step_rows' with nothing written.
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

enum { R = 3, TMAX = 80, V = 50, SENTINEL_ROWS = 4 };
static const float SENT = 12345.0f;

typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_compiled c;
  void *ws, *cache;
  long rows;                          // batch rows
  bc_aot_step_rows_fn aot_rows, aot_last;  // the AOT module's entries, used when set
} model;

static model *model_new(const char *path, const bc_define *defs, int ndefs) {
  model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->ctx = tu_ctx(&m->errs);
  m->g = bcP_parse_file(m->ctx, path, defs, ndefs);
  if (!m->g) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcW_init_random(m->ctx, m->g, 5, &m->w), BC_OK);
  if (bcD_compile(m->ctx, m->g, NULL, &m->c)) fail_msg("%s: %s", path, m->errs.buf);
  assert_int_equal(bcD_pack(m->ctx, &m->c, &m->w), BC_OK);
  m->ws = cli_workspace(m->ctx, m->g);
  assert_non_null(m->ws);
  if (!m->c.step_rows_pool) fail_msg("%s: no step entry: %s", path, m->errs.buf);
  m->cache = aligned_alloc(64, (size_t)m->c.cache_bytes);
  assert_non_null(m->cache);
  m->rows = bcY_step_rows(m->g, NULL);
  for (int d = 0; d < m->g->ndims; d++)  // a run-time batch: R rows of its bound
    if (m->g->dims[d].rt >= 0 && !strcmp(m->g->dims[d].name, "B")) {
      assert_true(m->g->dims[d].value >= R);
      m->rows = R;
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

static int32_t token(int r, long p) { return (int32_t)((r * 17 + p * 7 + 3) % V); }

// One call: row b's t new positions from pos[b]; y the logits ([B, t, V],
// or [B, 1, V] for last).  ids NULL: the schedule's tokens.
static int call(model *m, bool last, const long *pos, long t, const int32_t *ids_in, float *y) {
  int32_t ids[R * TMAX];
  for (long b = 0; b < m->rows; b++)
    for (long i = 0; i < t; i++) ids[b * t + i] = token((int)b, (pos ? pos[b] : 0) + i);
  const bc_graph *g = m->g;
  void *io[3] = {ids_in ? (void *)ids_in : ids, NULL, y};
  if (g->ninputs == 1) io[1] = y;  // no lengths input
  long rt[2] = {0, 0};
  assert_true(g->nrt <= 2);
  for (int d = 0; d < g->ndims; d++)  // T, and a run-time batch B
    if (g->dims[d].rt >= 0) rt[g->dims[d].rt] = !strcmp(g->dims[d].name, "B") ? m->rows : t;
  const float *const *w = (const float *const *)m->w.p;
  size_t cb = (size_t)m->c.cache_bytes;
  if (m->aot_rows)
    return last ? m->aot_last((const void *)w, io, rt, pos, m->cache, cb, m->ws)
                : m->aot_rows((const void *)w, io, rt, pos, m->cache, cb, m->ws);
  return last ? m->c.step_last_pool(w, io, rt, pos, m->cache, cb, m->ws, NULL)
              : m->c.step_rows_pool(w, io, rt, pos, m->cache, cb, m->ws, NULL);
}

typedef struct {
  long pos[R];
  long t;
} sched;

static const sched schedule[] = {
    {{0, 0, 0}, 70},    // prefill: t > BCRT_SMALL_M (the GEMM in the full step)
    {{70, 5, 70}, 3},   // row 1 rewinds to 5
    {{73, 8, 0}, 5},    // row 2 restarts
    {{78, 13, 5}, 1},   // one position each
    {{40, 14, 6}, 40},  // row 0 rewinds, 40 new positions (every row below the bound)
};

// step_last against step_rows on the same cache, the whole schedule.
static void check_last(const char *what, model *m) {
  size_t cb = (size_t)m->c.cache_bytes;
  unsigned char *before = malloc(cb), *after_full = malloc(cb);
  size_t nfull = (size_t)(R * TMAX * V), nlast = (size_t)((R + SENTINEL_ROWS) * V);
  float *y = malloc(nfull * sizeof *y), *yl = malloc(nlast * sizeof *yl);
  assert_true(before && after_full && y && yl);
  double worst = 0;
  long exact = 0, total = 0;
  for (size_t k = 0; k < sizeof schedule / sizeof schedule[0]; k++) {
    const sched *s = &schedule[k];
    long pos[R];
    for (long b = 0; b < m->rows; b++) pos[b] = s->pos[m->rows == 1 ? 0 : b];
    memcpy(before, m->cache, cb);
    int rc = call(m, false, pos, s->t, NULL, y);
    if (rc) fail_msg("%s call %zu: step_rows returned %d", what, k, rc);
    memcpy(after_full, m->cache, cb);
    memcpy(m->cache, before, cb);
    for (size_t i = 0; i < nlast; i++) yl[i] = SENT;
    rc = call(m, true, pos, s->t, NULL, yl);
    if (rc) fail_msg("%s call %zu: step_last returned %d", what, k, rc);
    if (memcmp(after_full, m->cache, cb))
      fail_msg("%s call %zu: the caches of step_rows and step_last differ", what, k);
    for (size_t i = (size_t)(m->rows * V); i < nlast; i++)
      if (yl[i] != SENT) fail_msg("%s call %zu: step_last wrote past [B, 1, V] (float %zu)", what, k, i);
    for (long b = 0; b < m->rows; b++) {
      const float *full = y + (size_t)((b * s->t + s->t - 1) * V), *one = yl + (size_t)(b * V);
      double mx = tu_max_abs(full, V), d = tu_max_abs_diff(full, one, V);
      for (int i = 0; i < V; i++) exact += full[i] == one[i];
      total += V;
      worst = fmax(worst, d / (1 + mx));
      if (!(d <= 2e-5 * (1 + mx)))
        fail_msg("%s call %zu row %ld (pos %ld, t %ld): differs by %g (max|y| %g)", what, k, b,
                 pos[b], s->t, d, mx);
    }
  }
  printf("  %s: B=%ld step_last vs step_rows' last rows: max diff %.3g * (1 + max|y|), %ld of "
         "%ld equal; caches equal\n", what, m->rows, worst, exact, total);
  free(before);
  free(after_full);
  free(y);
  free(yl);
}

#define SMALL {"D", 32}, {"H", 4}, {"N", 3}, {"T", TMAX}, {"V", V}

static void run_graph(const char *path, const bc_define *defs, int ndefs) {
  bc_define d[16];
  assert_true(ndefs + 1 <= 16);
  memcpy(d, defs, (size_t)ndefs * sizeof *defs);
  for (int B = 1; B <= R; B += R - 1) {
    d[ndefs] = (bc_define){"B", B};
    model *m = model_new(path, d, ndefs + 1);
    assert_true(bcY_step_tail(m->g) > 0);
    assert_non_null(m->c.step_last_pool);
    assert_non_null(strstr(m->c.csrc, "_step_last_pool("));
    assert_int_equal(m->rows, B);
    char what[128];
    snprintf(what, sizeof what, "%s (jit)", path);
    check_last(what, m);
    model_free(m);
  }
}

// Sinusoidal positions (before the first attention) and a run-time batch
// dim B <= 4 (3 rows at run time): the compaction's row count is B's value.
static const char sin_graph[] =
    "model sinlm\n"
    "dim B <= 4\n"
    "dim T <= 80\n"
    "dim D = 32\n"
    "dim H = 4\n"
    "dim V = 50\n"
    "input ids : tokens[B, T]\n"
    "x = Positions(Embedding(ids, vocab=V, dim=D, params=emb), kind=sinusoidal)\n"
    "for i in 0..3 as layers.{i} {\n"
    "    x = Add(x, Attention(LayerNorm(x, params=ln1), heads=H, causal=true, params=attn))\n"
    "    x = Add(x, FFN(LayerNorm(x, params=ln2), hidden=64, act=gelu, params=(fc1, fc2)))\n"
    "}\n"
    "logits = Linear(LayerNorm(x, params=lnf), out=V, bias=false, params=head)\n"
    "output logits\n";

static void test_last_rt_batch(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".blk");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(sin_graph, f);
  fclose(f);
  model *m = model_new(path, NULL, 0);
  assert_true(bcY_step_tail(m->g) > 0);
  assert_int_equal(m->rows, R);
  check_last("sinlm (run-time B)", m);
  model_free(m);
  remove(path);
}

static void test_last_llama(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL, {"KV", 2}};
  run_graph("graphs/llama_lm.blk", defs, 6);
}

static void test_last_gpt2(void **state) {
  (void)state;
  const bc_define defs[] = {SMALL, {"P", TMAX}};
  run_graph("graphs/gpt2_lm.blk", defs, 6);
}

// No layer loop (the layers alternate windows): the tail begins after the
// last attention, inside the last layer (its norms and FFN), and ends in a
// soft-cap.
static void test_last_gemma2(void **state) {
  (void)state;
  const bc_define defs[] = {{"D", 32}, {"H", 4}, {"KV", 2}, {"N", 2}, {"T", TMAX}, {"V", V},
                            {"F", 64}, {"W", 16}};
  run_graph("graphs/gemma2_lm.blk", defs, 8);
  model *m = model_new("graphs/gemma2_lm.blk", defs, 8);
  const bc_graph *g = m->g;
  int tail = bcY_step_tail(g), ffn = 0;
  for (int i = tail; i < g->nnodes; i++) ffn += g->nodes[i].op == BC_OP_FFN;
  assert_int_equal(ffn, 1);
  model_free(m);
}

// The AOT module (cc): the header's contract and declarations, and the same
// schedule through <model>_step_last_abi against _step_rows_abi.
static void test_last_aot(void **state) {
  (void)state;
  const bc_define d3[] = {SMALL, {"KV", 2}, {"B", R}};
  model *m = model_new("graphs/llama_lm.blk", d3, 7);
  bc_graph *g;
  char *c, *h, dir[256];
  if (tu_aot_pair(m->ctx, "graphs/llama_lm.blk", d3, 7, false, &g, &c, &h)) fail_msg("%s", m->errs.buf);
  assert_non_null(strstr(h, "int llama_lm_step_last(const llama_lm_weights *w, const llama_lm_io "
                            "*io, const long *pos,"));
  assert_non_null(strstr(h, "int llama_lm_step_last_abi("));
  assert_non_null(strstr(h, "int llama_lm_step_last_pool("));
  assert_non_null(strstr(h, "#define LLAMA_LM_STEP_LAST 1"));
  assert_non_null(strstr(h, "written compactly as"));
  assert_non_null(strstr(c, "static int llama_lm_step_any("));
  tu_mktmpdir(dir, sizeof dir, "last");
  bc_aot *a;
  tu_aot_build(m->ctx, &m->errs, g, c, h, dir, &a);
  assert_non_null(m->aot_rows = bcA_step_rows(a));
  assert_non_null(m->aot_last = bcA_step_last(a));
  assert_non_null(bcA_step_last_pool(a));
  const float *const *aw = bcA_args(m->ctx, a, g, &m->w);  // the module's llama_lm_pack
  assert_non_null(aw);
  m->w.p[m->w.n] = (float *)aw[m->w.n];
  check_last("graphs/llama_lm.blk (aot)", m);
  model_free(m);
  bcA_free(a);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// A hostile call: step_last's status is step_rows', and neither writes the
// cache or the output.
static void expect_same_refusal(model *m, const long *pos, long t, const int32_t *ids, void *cache,
                                size_t cb, void *ws, bool len, int want, const char *what) {
  size_t n = (size_t)m->c.cache_bytes;
  unsigned char *before = malloc(n);
  float *y = malloc((size_t)(R * TMAX * V) * sizeof *y);
  assert_true(before && y);
  memcpy(before, m->cache, n);
  int32_t lens[R] = {1, 1, 1};
  int32_t dflt[R * TMAX];
  for (long i = 0; i < R * TMAX; i++) dflt[i] = 1;
  for (int last = 0; last < 2; last++) {
    for (size_t i = 0; i < (size_t)(R * TMAX * V); i++) y[i] = SENT;
    void *io[3] = {ids ? (void *)ids : dflt, len ? lens : NULL, y};
    long rt[1] = {t};
    const float *const *w = (const float *const *)m->w.p;
    int rc = last ? m->c.step_last_pool(w, io, rt, pos, cache, cb, ws, NULL)
                  : m->c.step_rows_pool(w, io, rt, pos, cache, cb, ws, NULL);
    if (rc != want) fail_msg("%s: %s returned %d, want %d", what, last ? "step_last" : "step_rows", rc, want);
    if (memcmp(before, m->cache, n)) fail_msg("%s: the cache was written", what);
    for (size_t i = 0; i < (size_t)(R * TMAX * V); i++)
      if (y[i] != SENT) fail_msg("%s: the output was written", what);
  }
  free(before);
  free(y);
}

static void test_last_hostile(void **state) {
  (void)state;
  const bc_define d3[] = {SMALL, {"KV", 2}, {"B", R}};
  model *m = model_new("graphs/llama_lm.blk", d3, 7);
  float *y = malloc((size_t)(R * V) * sizeof *y);
  assert_non_null(y);
  const long zero[R] = {0, 0, 0};
  assert_int_equal(call(m, true, zero, 10, NULL, y), BC_RUN_OK);  // every row holds 10
  size_t cb = (size_t)m->c.cache_bytes;
  int32_t bad[R * 2] = {1, 2, 3, V, 4, 5};  // row 1's second id is past the vocab
  expect_same_refusal(m, NULL, 1, NULL, m->cache, cb, m->ws, false, BC_RUN_EINVAL, "pos NULL");
  expect_same_refusal(m, (const long[R]){10, -1, 10}, 1, NULL, m->cache, cb, m->ws, false,
                      BC_RUN_EINVAL, "a negative row");
  expect_same_refusal(m, (const long[R]){10, 11, 10}, 1, NULL, m->cache, cb, m->ws, false,
                      BC_RUN_ESEQ, "a row skipping ahead");
  expect_same_refusal(m, (const long[R]){10, 75, 10}, 6, NULL, m->cache, cb, m->ws, false,
                      BC_RUN_ECACHE, "a row past the cache");
  expect_same_refusal(m, (const long[R]){10, 10, 10}, 0, NULL, m->cache, cb, m->ws, false,
                      BC_RUN_EDIM, "t = 0");
  expect_same_refusal(m, (const long[R]){0, 0, 0}, TMAX + 1, NULL, m->cache, cb, m->ws, false,
                      BC_RUN_EDIM, "t past the bound");
  expect_same_refusal(m, (const long[R]){10, 10, 10}, 2, bad, m->cache, cb, m->ws, false,
                      BC_RUN_ETOKEN, "a token id past the vocab");
  expect_same_refusal(m, zero, 1, NULL, m->cache, cb, m->ws, true, BC_RUN_EINVAL, "a lengths input");
  expect_same_refusal(m, zero, 1, NULL, m->cache, cb - 64, m->ws, false, BC_RUN_EINVAL,
                      "a small cache");
  expect_same_refusal(m, zero, 1, NULL, m->cache, cb, (char *)m->ws + 4, false, BC_RUN_EINVAL,
                      "a misaligned workspace");
  // A misaligned cache (a copy one float in, so the real one stays as it is).
  unsigned char *mis = aligned_alloc(64, cb + 64);
  assert_non_null(mis);
  expect_same_refusal(m, zero, 1, NULL, mis + 4, cb, m->ws, false, BC_RUN_EINVAL,
                      "a misaligned cache");
  free(mis);
  // Another model's cache (its header) at pos > 0: ESEQ.
  model *o = model_new("graphs/gpt2_lm.blk", (const bc_define[]){SMALL, {"P", TMAX}, {"B", R}}, 7);
  assert_int_equal(call(o, true, zero, 10, NULL, y), BC_RUN_OK);
  unsigned char *other = aligned_alloc(64, cb);
  assert_non_null(other);
  size_t ob = (size_t)o->c.cache_bytes;
  memset(other, 0, cb);
  memcpy(other, o->cache, ob < cb ? ob : cb);
  expect_same_refusal(m, (const long[R]){10, 10, 10}, 1, NULL, other, cb, m->ws, false,
                      BC_RUN_ESEQ, "another model's cache");
  free(other);
  model_free(o);
  free(y);
  model_free(m);
}

// --- graphs without a tail ------------------------------------------------------------

// An attention's output is an output: it is not reached through row-wise
// nodes from the mixing part, so there is no last-position entry.
static const char two_out[] =
    "model twoout\n"
    "dim T <= 9\n"
    "dim D = 16\n"
    "dim V = 20\n"
    "input ids : tokens[1, T]\n"
    "x = Embedding(ids, vocab=V, dim=D, params=emb)\n"
    "a = Attention(LayerNorm(x, params=ln1), heads=2, causal=true, params=attn)\n"
    "x = Add(x, a)\n"
    "logits = Linear(LayerNorm(x, params=lnf), out=V, bias=false, params=head)\n"
    "output logits\n"
    "output a\n";

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

static void test_last_no_tail(void **state) {
  (void)state;
  const bc_define dd[] = {{"D", 16}, {"H", 2}, {"N", 3}, {"T", 9}, {"S", 5}};
  model *m = model_new("graphs/decoder_post_ln.blk", dd, 5);
  assert_int_equal(bcY_step_tail(m->g), -1);  // the last norm is in the layer run
  assert_non_null(m->c.step_rows_pool);
  assert_null(m->c.step_last_pool);
  assert_null(strstr(m->c.csrc, "step_last"));
  assert_null(strstr(m->c.csrc, "step_any"));
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(m->ctx, "graphs/decoder_post_ln.blk", dd, 5, false, &g, &c, &h))
    fail_msg("%s", m->errs.buf);
  assert_null(strstr(h, "int decoder_post_ln_step_last"));
  assert_non_null(strstr(h, "#define DECODER_POST_LN_STEP_LAST 0"));
  assert_non_null(strstr(h, "(No decoder_post_ln_step_last:"));
  model_free(m);

  char path[256];
  tu_tmp_path(path, sizeof path, ".blk");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(two_out, f);
  fclose(f);
  tu_errors errs;
  memset(&errs, 0, sizeof errs);
  blockc_model *am = blockc_new();
  assert_non_null(am);
  blockc_set_error_func(am, &errs, on_error);
  assert_int_equal(blockc_has_step_last(am), 0);  // not compiled
  if (blockc_load_graph(am, path) || blockc_init_weights(am, 3) || blockc_compile(am))
    fail_msg("%s", errs.buf);
  assert_int_equal(blockc_has_step_last(am), 0);
  size_t cn = blockc_cache_size(am), wn = blockc_workspace_size(am);
  void *cache = aligned_alloc(64, cn), *ws = aligned_alloc(64, wn);
  assert_true(cache && ws);
  int ids[3] = {1, 2, 3};
  float lg[3 * 20], at[3 * 16];
  const void *in[2] = {ids, NULL};
  void *out[2] = {lg, at};
  long long dims[1] = {3}, pos[1] = {0};
  errs.len = 0;
  assert_int_equal(blockc_step_last(am, in, out, dims, pos, cache, cn, ws, wn), BLOCKC_EUSAGE);
  assert_non_null(strstr(errs.buf, "no last-position step entry"));
  assert_int_equal(blockc_step_rows(am, in, out, dims, pos, cache, cn, ws, wn), BLOCKC_OK);
  // blockc_generate falls back to the full step
  blockc_generate_options go = {0};
  go.max_new_tokens = 3;
  int gen[3];
  size_t n = 0;
  assert_int_equal(blockc_generate(am, ids, 3, &go, gen, 3, &n, NULL, NULL), BLOCKC_OK);
  assert_int_equal(n, 3);
  free(cache);
  free(ws);
  blockc_delete(am);
  // bench --decode: prefill_last_ms is null, the text says why
  static tu_run_result r;
  TU_RUN(&r, "bench", path, "--decode", "--context", "4", "--iters", "2", "--json");
  tu_expect_run(&r, 0, "\"prefill_ms\": ", NULL);
  assert_non_null(strstr(r.out, "\"prefill_last_ms\": null, "));
  TU_RUN(&r, "bench", path, "--decode", "--context", "4", "--iters", "2");
  tu_expect_run(&r, 0, "prefill1  none  (twoout has no last-position step entry", NULL);
  remove(path);
}

// --- the API and generate -------------------------------------------------------------

static blockc_model *api_llama(tu_errors *errs) {
  blockc_model *m = blockc_new();
  assert_non_null(m);
  memset(errs, 0, sizeof *errs);
  blockc_set_error_func(m, errs, on_error);
  const char *nm[] = {"D", "H", "KV", "N", "T", "V"};
  const long long val[] = {32, 4, 2, 3, TMAX, V};
  for (int i = 0; i < 6; i++) assert_int_equal(blockc_set_dim(m, nm[i], val[i]), BLOCKC_OK);
  if (blockc_load_graph(m, "graphs/llama_lm.blk") || blockc_init_weights(m, 9) || blockc_compile(m))
    fail_msg("%s", errs->buf);
  return m;
}

static int argmax(const float *x, int n) {
  int k = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[k]) k = i;
  return k;
}

static void test_last_api_generate(void **state) {
  (void)state;
  tu_errors errs;
  blockc_model *m = api_llama(&errs);
  assert_int_equal(blockc_has_step_last(m), 1);
  size_t cn = blockc_cache_size(m), wn = blockc_workspace_size(m);
  void *c1 = aligned_alloc(64, cn), *c2 = aligned_alloc(64, cn), *ws = aligned_alloc(64, wn);
  float *y = malloc((size_t)(TMAX * V) * sizeof *y), yl[2 * V];
  assert_true(c1 && c2 && ws && y);
  memset(c1, 0, cn);  // the rows past the positions filled are never written: equal bytes
  memset(c2, 0, cn);
  enum { P = 70, NEW = 8 };
  int ids[TMAX];
  for (int i = 0; i < P; i++) ids[i] = (i * 13 + 5) % V;
  const void *in[2] = {ids, NULL};
  void *out[1] = {y}, *outl[1] = {yl};
  long long dims[1] = {P}, pos[1] = {0};
  assert_int_equal(blockc_step_rows(m, in, out, dims, pos, c1, cn, ws, wn), BLOCKC_OK);
  for (int i = 0; i < 2 * V; i++) yl[i] = SENT;
  assert_int_equal(blockc_step_last(m, in, outl, dims, pos, c2, cn, ws, wn), BLOCKC_OK);
  assert_memory_equal(c1, c2, cn);
  double mx = tu_max_abs(y + (P - 1) * V, V);
  assert_true(tu_max_abs_diff(y + (P - 1) * V, yl, V) <= 2e-5 * (1 + mx));
  assert_true(yl[V] == SENT);
  // the API's refusals match blockc_step_rows'
  long long past[1] = {TMAX - 2}, neg[1] = {-1}, ahead[1] = {P + 1};
  const struct {
    const long long *p;
    long long t;
    int want;
    const char *msg;
  } bad[] = {{NULL, P, BLOCKC_EUSAGE, "pos is NULL"},
             {neg, P, BLOCKC_EUSAGE, "negative"},
             {past, P, BLOCKC_EINPUT, "exceed the cache"},
             {ahead, 5, BLOCKC_EUSAGE, ""},
             {pos, 0, BLOCKC_EINPUT, ""},
             {pos, TMAX + 1, BLOCKC_EINPUT, ""}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    errs.len = 0;
    dims[0] = bad[k].t;
    int rc = blockc_step_rows(m, in, out, dims, bad[k].p, c1, cn, ws, wn);
    if (rc != bad[k].want) fail_msg("case %zu: blockc_step_rows returned %d: %s", k, rc, errs.buf);
    errs.len = 0;
    rc = blockc_step_last(m, in, outl, dims, bad[k].p, c2, cn, ws, wn);
    if (rc != bad[k].want) fail_msg("case %zu: blockc_step_last returned %d: %s", k, rc, errs.buf);
    // (a dim out of range is check_run's message, the same for every entry)
    if (bad[k].t == P && !strstr(errs.buf, "blockc_step_last"))
      fail_msg("case %zu: %s", k, errs.buf);
    if (!strstr(errs.buf, bad[k].msg) || !errs.len) fail_msg("case %zu: %s", k, errs.buf);
  }
  dims[0] = P;
  assert_int_equal(blockc_step_last(m, in, outl, dims, pos, c2, cn - 64, ws, wn), BLOCKC_EUSAGE);
  assert_int_equal(blockc_step_last(m, in, outl, dims, pos, c2, cn, ws, wn - 64), BLOCKC_EUSAGE);
  assert_int_equal(blockc_step_last(NULL, in, outl, dims, pos, c2, cn, ws, wn), BLOCKC_EUSAGE);
  // Greedy generation (the prompt through blockc_step_last) gives the ids of
  // a loop over blockc_step with every position's logits.
  int ref[NEW];
  assert_int_equal(blockc_step(m, in, out, dims, 0, c1, cn, ws, wn), BLOCKC_OK);
  ref[0] = argmax(y + (P - 1) * V, V);
  for (int k = 1; k < NEW; k++) {
    const void *si[2] = {&ref[k - 1], NULL};
    long long one[1] = {1};
    assert_int_equal(blockc_step(m, si, out, one, P + k - 1, c1, cn, ws, wn), BLOCKC_OK);
    ref[k] = argmax(y, V);
  }
  blockc_generate_options go = {0};
  go.max_new_tokens = NEW;
  int gen[NEW];
  size_t n = 0;
  assert_int_equal(blockc_generate(m, ids, P, &go, gen, NEW, &n, NULL, NULL), BLOCKC_OK);
  assert_int_equal(n, NEW);
  assert_memory_equal(gen, ref, sizeof ref);
  // The CLI: jit (the prompt through <model>_step_last) and the interpreter
  // (every position, double) pick the same greedy ids; so does the AOT module.
  char prompt[TMAX * 4];
  size_t pl = 0;
  for (int i = 0; i < P; i++) pl += (size_t)snprintf(prompt + pl, sizeof prompt - pl, "%s%d", i ? "," : "", ids[i]);
  static tu_run_result rj, ri, ra;
#define GEN(r, ...)                                                                               \
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D",   \
         "N=3", "-D", "T=80", "-D", "V=50", "--random-weights", "9", "--prompt-ids", prompt,    \
         "--max-new-tokens", "8", "--ids", __VA_ARGS__)
  GEN(&rj, "--backend", "jit");
  tu_expect_run(&rj, 0, NULL, "prompt eval");
  GEN(&ri, "--backend", "interp");
  tu_expect_run(&ri, 0, NULL, NULL);
  if (strcmp(rj.out, ri.out)) fail_msg("jit ids %s, interp ids %s", rj.out, ri.out);
  if (tu_have("cc")) {
    GEN(&ra, "--backend", "aot");
    tu_expect_run(&ra, 0, NULL, NULL);
    if (strcmp(rj.out, ra.out)) fail_msg("jit ids %s, aot ids %s", rj.out, ra.out);
  }
#undef GEN
  free(c1);
  free(c2);
  free(ws);
  free(y);
  blockc_delete(m);
}

// bench --decode: prefill_ms as before, and prefill_last_ms next to it.
static void test_last_bench(void **state) {
  (void)state;
  static tu_run_result r;
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--iters", "3", "--json");
  tu_expect_run(&r, 0, "\"prefill_ms\": ", NULL);
  double p = -1, pl = -1;
  const char *k = strstr(r.out, "\"prefill_ms\": "), *kl = strstr(r.out, "\"prefill_last_ms\": ");
  if (!k || !kl || sscanf(k + strlen("\"prefill_ms\": "), "%lf", &p) != 1 ||
      sscanf(kl + strlen("\"prefill_last_ms\": "), "%lf", &pl) != 1 || !(p > 0) || !(pl > 0))
    fail_msg("no positive prefill_ms and prefill_last_ms in %s", r.out);
  assert_true(kl > k);  // after prefill_ms
  TU_RUN(&r, "bench", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "N=3",
         "-D", "V=50", "-D", "T=16", "--decode", "--context", "9", "--iters", "3", "--batch", "2");
  tu_expect_run(&r, 0, "prefill1 ", NULL);
  assert_non_null(strstr(r.out, "llama_lm_step_last"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_last_llama),
      cmocka_unit_test(test_last_gpt2),
      cmocka_unit_test(test_last_gemma2),
      cmocka_unit_test(test_last_rt_batch),
      cmocka_unit_test(test_last_aot),
      cmocka_unit_test(test_last_hostile),
      cmocka_unit_test(test_last_no_tail),
      cmocka_unit_test(test_last_api_generate),
      cmocka_unit_test(test_last_bench),
  };
  return tu_run_tiered(__FILE__, tests, sizeof tests / sizeof tests[0], NULL, 0);
}
