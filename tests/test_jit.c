// test_jit.c — JIT-compiled forward passes against the reference
// interpreter, isolation between compiled models and threads, and the
// error paths of the tcc driver.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture_graphs.h"
#include "io_graphs.h"

// A compiled graph with everything needed to run it.
typedef struct {
  bc_graph *g;
  bc_jit *jit;
  bc_forward_fn fn;
  bc_weights w;
  float *x;
  int64_t ny;
} compiled;

// pipeline: the real passes and planner (fused ops, in-place aliasing,
// reused arena ranges); otherwise the fixture's unfused graph with a
// trivial plan, so every unfused op and every fixture op is JITted too.
static void compile_graph_with(bc_ctx *ctx, const fx_cfg *c, uint64_t seed, bool pipeline,
                               compiled *m) {
  if (pipeline) {
    m->g = fx_build_planned(ctx, c);
  } else {
    m->g = fx_build(ctx, c);
    if (m->g) fx_plan_trivial(m->g);
  }
  assert_non_null(m->g);
  bc_emit_opts o = {0};
  char *src = bcE_emit_c(ctx, m->g, &o);
  assert_non_null(src);
  assert_int_equal(bcJ_compile(ctx, src, "fx_forward", &m->jit, &m->fn), BC_OK);
  assert_non_null(m->fn);
  fx_weights(m->g, seed, &m->w);
  m->x = fx_input(m->g, seed + 99);
  m->ny = bc_shape_numel(&m->g->vals[m->g->output].shape);
}

static void compile_graph(bc_ctx *ctx, const fx_cfg *c, uint64_t seed, compiled *m) {
  compile_graph_with(ctx, c, seed, true, m);
}

static float *run(const compiled *m) {
  float *y = calloc((size_t)m->ny, sizeof(float));
  float *ws = aligned_alloc(64, (size_t)bcY_workspace_bytes(m->g));  // the entry checks alignment
  assert_non_null(ws);
  assert_int_equal(m->fn((const float *const *)m->w.p, m->x, y, ws), 0);
  free(ws);
  return y;
}

static void release(compiled *m) {
  bcJ_free(m->jit);
  fx_weights_free(&m->w);
  free(m->x);
}

// Tolerance.  The interpreter accumulates in double; compiled code in
// float32 (BLAS) with the runtime's float kernels.  A length-K float dot
// product is off by about sqrt(K) * 2^-24 relative to the sum of |terms|
// (K <= 256 here: ~1e-6), and LayerNorm renormalises after each sublayer,
// so errors do not compound much across layers: observed max errors are
// 5e-7..1e-6 for |y| up to ~5.  1e-5 * (1 + max|y|) per layer leaves
// ~20x headroom for the runtime's polynomial exp/erf (a few ulp) yet
// fails on any real bug (a missed bias or a wrong stride is off by ~0.1).
static void check_one(bc_ctx *ctx, const fx_cfg *c, bool pipeline) {
  compiled m;
  compile_graph_with(ctx, c, 1, pipeline, &m);
  float *y = run(&m);
  float *ref = calloc((size_t)m.ny, sizeof(float));
  assert_int_equal(bcR_run(ctx, m.g, &m.w, m.x, ref), BC_OK);
  double ymax = 0;
  for (int64_t i = 0; i < m.ny; i++) ymax = fmax(ymax, fabs(ref[i]));
  double err = tu_max_abs_diff(y, ref, (size_t)m.ny);
  double tol = 1e-5 * (1.0 + ymax) * c->N;
  if (!(err <= tol))
    fail_msg("pipeline %d wiring %d causal %d act %d B%d T%d D%d H%d F%d N%d: max err %g > tol %g", pipeline, c->wiring,
             c->causal, c->act, c->B, c->T, c->D, c->H, c->F, c->N, err, tol);
  free(y);
  free(ref);
  release(&m);
}

static void check_against_interpreter(bc_ctx *ctx, const fx_cfg *c) {
  check_one(ctx, c, true);
  check_one(ctx, c, false);
}

static void test_matches_interpreter_all_wirings(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  for (int wiring = FX_POST_LN; wiring <= FX_RESIDUAL; wiring++)
    for (int causal = 0; causal < 2; causal++)
      for (int act = 0; act <= BC_ACT_GELU_TANH; act++) {  // gated: their own tests
        fx_cfg c = {2, 16, 32, 4, 64, 2, (fx_wiring)wiring, causal, (bc_act)act};
        check_against_interpreter(ctx, &c);
      }
  bc_ctx_free(ctx);
}

// Odd sizes catch stride mix-ups that square power-of-two shapes hide;
// T = 160 exercises causal row blocks with a short last block.
static void test_matches_interpreter_odd_shapes(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  const fx_cfg cs[] = {
      {3, 13, 24, 3, 40, 1, FX_POST_LN, false, BC_ACT_RELU},
      {1, 7, 10, 5, 6, 2, FX_PRE_LN, true, BC_ACT_GELU},
      {1, 160, 16, 2, 24, 1, FX_PRE_LN, true, BC_ACT_GELU_TANH},
      {2, 130, 8, 1, 8, 1, FX_RESIDUAL, true, BC_ACT_RELU},
      {1, 1, 4, 2, 4, 1, FX_POST_LN_FUSED, true, BC_ACT_RELU},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_against_interpreter(ctx, &cs[i]);
  bc_ctx_free(ctx);
}

// Layers as a loop (N = 4, every wiring): Post-LN's last layer writes the
// output (a carried-out argument), Pre-LN's first layer differs; each build must
// have the loop and match the interpreter.  The fused fixture keeps one sum
// of layer 0 alive; laid out periodically its other layers would need 16%
// more arena than the plain plan, over the planner's 3%, but the plain plan
// itself lays layers 1..3 out alike: it loops too (bcM_plan keeps the run).
static void test_layer_loop_matches_interpreter(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  for (int wiring = FX_POST_LN; wiring <= FX_RESIDUAL; wiring++)
    for (int causal = 0; causal < 2; causal++) {
      fx_cfg c = {2, 16, 32, 4, 64, 4, (fx_wiring)wiring, causal, BC_ACT_GELU};
      bc_graph *g = fx_build_planned(ctx, &c);
      assert_non_null(g);
      if (g->layers.count < 2) fail_msg("wiring %d: layer loop %d", wiring, g->layers.count);
      bc_emit_opts o = {0};
      char *src = bcE_emit_c(ctx, g, &o);
      assert_non_null(src);
      assert_non_null(strstr(src, "static void fx_layer("));
      check_one(ctx, &c, true);
    }
  bc_ctx_free(ctx);
}

// Two models compiled side by side keep their own code: running one never
// changes the other's output, bit for bit.
static void test_two_models_are_independent(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg ca = {2, 16, 32, 4, 64, 2, FX_POST_LN, false, BC_ACT_RELU};
  fx_cfg cb = {1, 8, 16, 2, 32, 1, FX_RESIDUAL, true, BC_ACT_GELU};
  compiled a, b;
  compile_graph(ctx, &ca, 1, &a);
  float *ya1 = run(&a);
  compile_graph(ctx, &cb, 2, &b);
  float *yb1 = run(&b);
  float *ya2 = run(&a);
  bcJ_free(b.jit);  // freeing one must not disturb the other
  b.jit = NULL;
  float *ya3 = run(&a);
  assert_memory_equal(ya1, ya2, (size_t)a.ny * sizeof(float));
  assert_memory_equal(ya1, ya3, (size_t)a.ny * sizeof(float));
  assert_true(a.ny != b.ny);
  free(ya1); free(ya2); free(ya3); free(yb1);
  release(&a);
  release(&b);
  bc_ctx_free(ctx);
}

// --- threads -------------------------------------------------------------

typedef struct {
  const compiled *m;
  float *y;
} run_job;

static void *run_thread(void *arg) {
  run_job *j = arg;
  for (int i = 0; i < 20; i++) {
    free(j->y);
    j->y = run(j->m);
  }
  return NULL;
}

// One compiled forward is reentrant: two threads, separate workspaces,
// identical results.
static void test_same_model_two_threads(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = {2, 32, 32, 4, 64, 2, FX_RESIDUAL, true, BC_ACT_GELU};
  compiled m;
  compile_graph(ctx, &c, 3, &m);
  float *want = run(&m);
  run_job jobs[2] = {{&m, NULL}, {&m, NULL}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, run_thread, &jobs[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    assert_memory_equal(want, jobs[i].y, (size_t)m.ny * sizeof(float));
    free(jobs[i].y);
  }
  free(want);
  release(&m);
  bc_ctx_free(ctx);
}

typedef struct {
  const char *src;
  int fails;
} compile_job;

static void *compile_thread(void *arg) {
  compile_job *j = arg;
  bc_ctx *ctx = bc_ctx_new();
  bc_set_error_fn(ctx, NULL, NULL);
  for (int i = 0; i < 25; i++) {
    bc_jit *jit;
    bc_forward_fn fn;
    if (bcJ_compile(ctx, j->src, "fx_forward", &jit, &fn) != BC_OK || !fn) j->fails++;
    bcJ_free(jit);
  }
  bc_ctx_free(ctx);
  return NULL;
}

// tcc 0.9.27 is not reentrant; bcJ_compile/bcJ_free serialise it.
static void test_concurrent_compiles(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = {1, 8, 16, 2, 16, 2, FX_POST_LN_FUSED, false, BC_ACT_RELU};
  bc_graph *g = fx_build_planned(ctx, &c);
  assert_non_null(g);
  bc_emit_opts o = {0};
  const char *src = bcE_emit_c(ctx, g, &o);
  assert_non_null(src);
  compile_job jobs[4] = {{src, 0}, {src, 0}, {src, 0}, {src, 0}};
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, compile_thread, &jobs[i]), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) assert_int_equal(jobs[i].fails, 0);
  bc_ctx_free(ctx);
}

// Shipped graph `name` shrunk with defs (B T D H N, and S for the
// encoder-decoder ones; tiny takes none), parsed and compiled; NULL (the
// test skipped) when not run from the project root.
static bc_graph *shipped(bc_ctx *ctx, const tu_errors *errs, const char *name,
                         const bc_define defs[6], bc_compiled *c) {
  char path[128];
  snprintf(path, sizeof path, "graphs/%s.blk", name);
  if (access(path, R_OK) != 0) return NULL;
  bool tiny = !strcmp(name, "tiny");
  bool s2s = !strncmp(name, "decoder_", 8) || !strcmp(name, "transformer");
  bc_graph *g = bcP_parse_file(ctx, path, defs, tiny ? 0 : s2s ? 6 : 5);
  if (!g) fail_msg("%s: %s", path, errs->buf);
  if (bcD_compile(ctx, g, NULL, c) != BC_OK) fail_msg("%s: %s", path, errs->buf);
  return g;
}

// The shipped graphs, shrunk with -D, through the whole front end: parser,
// passes, planner, bcW_init_random weights, the JIT's <model>_run against
// the interpreter - at the bounds without lengths, and (graphs with run-time
// dims) at shorter lengths with padded rows.  Tolerance 2e-5 relative
// (|a - b| / (1 + |b|)), float vs double sums.
static void test_shipped_graphs(void **state) {
  (void)state;
  static const char *files[] = {"post_ln", "pre_ln", "residual", "deepnorm", "peri_ln", "tiny",
                                "pre_ln_nonorm", "decoder_post_ln", "decoder_pre_ln",
                                "decoder_residual", "transformer"};
  const bc_define defs[] = {{"B", 2}, {"T", 24}, {"D", 48}, {"H", 4}, {"N", 2}, {"S", 10}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_compiled c;
    bc_graph *g = shipped(ctx, &errs, files[i], defs, &c);
    if (!g) skip();  // not run from the project root
    const char *path = g->path;
    assert_non_null(c.run);
    bc_weights w;
    assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
    void *ws = aligned_alloc(64, ((size_t)c.ws_bytes + 63) / 64 * 64 + 64);
    assert_non_null(ws);
    assert_true(g->nrt <= 4);
    int len[2] = {5, 2};
    int *lens[8] = {0};
    for (int k = 0; k < g->ninputs && k < 8; k++)
      if (g->vals[g->inputs[k]].type == BC_VT_I32) lens[k] = len;
    for (int shorter = 0; shorter <= (g->nrt > 0); shorter++) {
      long rt[4] = {0};
      for (int d = 0; d < g->ndims; d++)
        if (g->dims[d].rt >= 0) rt[g->dims[d].rt] = shorter ? (long)g->dims[d].value * 2 / 3 : g->dims[d].value;
      ig_io got, want;
      ig_alloc(&got, g, rt, 11, shorter ? lens : NULL);
      ig_alloc(&want, g, rt, 11, shorter ? lens : NULL);
      assert_int_equal(c.run((const float *const *)w.p, got.io, g->nrt ? got.rt : NULL, ws), BC_RUN_OK);
      if (bcR_run_io(ctx, g, &w, want.io, g->nrt ? want.rt : NULL) != BC_OK) fail_msg("%s: %s", path, errs.buf);
      double err = ig_rel_err(&got, &want, g);
      if (!(err <= 2e-5)) fail_msg("%s (shorter=%d): rel err %g", path, shorter, err);
      ig_free(&got, g);
      ig_free(&want, g);
    }
    free(ws);
    bcD_free(&c);
    bcW_free(&w);
    bc_ctx_free(ctx);
  }
}

// Packed weights: every shipped graph's JIT run with the packed
// copy (bcD_pack) equals the run without it (NULL packed slot: cblas on the
// parameters) within 2e-5 relative, at T on both sides of BCRT_SMALL_M rows
// (B = 2: 2, 10 and 34 rows run the small-M kernel, 66 and 130 cblas); and
// the code really reads the copy: zeroing it changes the T = 1 output.
static void test_packed_equals_unpacked(void **state) {
  (void)state;
  static const char *files[] = {"post_ln", "pre_ln", "residual", "deepnorm", "peri_ln", "tiny",
                                "pre_ln_nonorm", "decoder_post_ln", "decoder_pre_ln",
                                "decoder_residual", "transformer", "gpt2", "llama", "bert"};
  const bc_define defs[] = {{"B", 2}, {"T", 65}, {"D", 16}, {"H", 2}, {"N", 2}, {"S", 6}};
  int read = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_compiled c;
    bc_graph *g = shipped(ctx, &errs, files[i], defs, &c);
    if (!g) skip();  // not run from the project root
    const char *path = g->path;
    assert_non_null(c.pack);
    bc_weights w;
    assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
    assert_null(w.p[w.n]);  // fresh weights: no packed copy
    assert_int_equal(bcD_pack(ctx, &c, &w), BC_OK);
    assert_true(c.packed_floats == bcY_packed_floats(g));
    assert_true(c.packed_floats == 0 ? !w.p[w.n] : w.p[w.n] == c.packed);
    assert_true((c.packed_floats > 0) == (strstr(c.csrc, "bcrt_linear(") != NULL));
    void *ws = aligned_alloc(64, ((size_t)c.ws_bytes + 63) / 64 * 64);
    assert_non_null(ws);
    const long ts[] = {1, 5, 17, 33, 65};
    for (size_t k = 0; k < (g->nrt ? 5u : 1u); k++) {
      long rt[4] = {0};
      assert_true(g->nrt <= 4);
      for (int d = 0; d < g->ndims; d++)
        if (g->dims[d].rt >= 0)
          rt[g->dims[d].rt] = strcmp(g->dims[d].name, "T") ? (long)g->dims[d].value : ts[k];
      ig_io packed, plain;
      ig_alloc(&packed, g, rt, 11, NULL);
      ig_alloc(&plain, g, rt, 11, NULL);
      const long *rtp = g->nrt ? rt : NULL;
      assert_int_equal(c.run((const float *const *)w.p, packed.io, rtp, ws), BC_RUN_OK);
      w.p[w.n] = NULL;
      assert_int_equal(c.run((const float *const *)w.p, plain.io, rtp, ws), BC_RUN_OK);
      w.p[w.n] = c.packed;
      double err = ig_rel_err(&packed, &plain, g);
      if (!(err <= 2e-5)) fail_msg("%s T=%ld: packed vs plain rel err %g", path, ts[k], err);
      if (k == 0 && c.packed_floats > 0) {  // the copy is what the code reads
        memset(c.packed, 0, (size_t)c.packed_floats * sizeof(float));
        assert_int_equal(c.run((const float *const *)w.p, packed.io, rtp, ws), BC_RUN_OK);
        if (!(ig_rel_err(&packed, &plain, g) > 1e-3)) fail_msg("%s: packed copy not read", path);
        assert_int_equal(bcD_pack(ctx, &c, &w), BC_OK);
        read++;
      }
      ig_free(&packed, g);
      ig_free(&plain, g);
    }
    free(ws);
    bcD_free(&c);
    bcW_free(&w);
    bc_ctx_free(ctx);
  }
  assert_true(read >= 12);
}


// --- several inputs and outputs, cross-attention, masks, run-time dims ------

typedef struct {
  bc_ctx *ctx;
  tu_errors errs;
  bc_graph *g;
  bc_compiled c;
  bc_weights w;
  void *ws;
} io_model;

static void io_build(io_model *m, const ig_cfg *cfg) {
  char text[2048];
  m->ctx = tu_ctx(&m->errs);
  m->g = tu_parse(m->ctx, ig_text(text, sizeof text, cfg));
  if (!m->g) fail_msg("parse: %s", m->errs.buf);
  fx_weights(m->g, 7, &m->w);  // same names and shapes: same weights for every cfg
  if (bcD_compile(m->ctx, m->g, NULL, &m->c) != BC_OK) fail_msg("compile: %s", m->errs.buf);
  assert_non_null(m->c.run);
  assert_null(m->c.forward);  // several inputs: no _forward
  m->ws = aligned_alloc(64, (size_t)m->c.ws_bytes);
  assert_non_null(m->ws);
}

static void io_release(io_model *m) {
  bcD_free(&m->c);
  fx_weights_free(&m->w);
  free(m->ws);
  bc_ctx_free(m->ctx);
}

static int io_run(io_model *m, ig_io *a) {
  return m->c.run((const float *const *)m->w.p, a->io, m->g->nrt ? a->rt : NULL, m->ws);
}

// The JIT against the interpreter at several (T, S) up to the bounds, with
// and without lengths; odd dims (D = 18, H = 3, dh = 6), B = 2, S != T.
// Tolerance: 2e-5 relative (|a - b| / (1 + |b|)), float vs double sums.
static void test_cross_attention_masks_vs_interp(void **state) {
  (void)state;
  for (int causal = 0; causal <= 1; causal++) {
    // B = 1 (no batch loop in the code) with causal, B = 2 without.
    ig_cfg cfg = {.B = causal ? 1 : 2, .D = 18, .H = 3, .F = 20, .T = 70, .S = 9, .causal = causal};
    io_model m;
    io_build(&m, &cfg);
    static const long sizes[][2] = {{70, 9}, {65, 4}, {37, 9}, {5, 3}, {1, 1}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      long T = sizes[k][0], S = sizes[k][1];
      int len[2] = {(int)(T > 3 ? T - 3 : 1), (int)T}, mlen[2] = {1, (int)S};
      for (int masked = 0; masked <= 1; masked++) {
        int *lens[4] = {0, 0, masked ? len : NULL, masked ? mlen : NULL};
        ig_io got, want;
        ig_alloc(&got, m.g, (long[]){T, S}, 100 + k, lens);
        ig_alloc(&want, m.g, (long[]){T, S}, 100 + k, lens);
        assert_int_equal(io_run(&m, &got), BC_RUN_OK);
        if (bcR_run_io(m.ctx, m.g, &m.w, want.io, want.rt) != BC_OK) fail_msg("interp: %s", m.errs.buf);
        double err = ig_rel_err(&got, &want, m.g);
        if (!(err <= 2e-5)) fail_msg("causal=%d T=%ld S=%ld masked=%d: rel err %g", causal, T, S, masked, err);
        // c (output 1) is the cross-attention output: rows past len[b] are exactly zero.
        const float *c = got.io[m.g->ninputs + 1];
        for (int b = 0; masked && b < cfg.B; b++)
          for (long t = len[b]; t < T; t++)
            for (int d = 0; d < 18; d++)
              if (c[((long)b * T + t) * 18 + d] != 0.0f || signbit(c[((long)b * T + t) * 18 + d]))
                fail_msg("T=%ld: c[%d, %ld, %d] = %g, not +0", T, b, t, d, c[((long)b * T + t) * 18 + d]);
        ig_free(&got, m.g);
        ig_free(&want, m.g);
      }
    }
    io_release(&m);
  }
}

// A Post-LN stack whose last layer writes two graph outputs, one of them
// (`a`) read again inside the layer: the layer function takes both as
// carried-out pointers (the arena on trips 0..2, the caller's outputs on
// trip 3), so all four layers are one loop; the JIT matches the
// interpreter (2e-5 relative, as above) at several run-time lengths, with
// and without masks, with and without the packed copy.
static void test_layer_loop_carried_out(void **state) {
  (void)state;
  io_model m = {0};
  m.ctx = tu_ctx(&m.errs);
  m.g = tu_parse(m.ctx,
                 "model m\ndim B = 2\ndim T <= 9\ndim D = 16\ndim H = 2\n"
                 "input x : [B, T, D]\ninput len : lengths[B]\n"
                 "for i in 0..4 as layers.{i} {\n"
                 "  a = LayerNorm(Add(x, Attention(x, heads=H, lengths=len, params=self_attn)), "
                 "params=norm1)\n"
                 "  x = LayerNorm(Add(a, FFN(a, hidden=24, params=(linear1, linear2))), params=norm2)\n"
                 "}\noutput a\noutput x\n");
  if (!m.g) fail_msg("parse: %s", m.errs.buf);
  fx_weights(m.g, 11, &m.w);
  if (bcD_compile(m.ctx, m.g, NULL, &m.c) != BC_OK) fail_msg("compile: %s", m.errs.buf);
  assert_int_equal(m.g->layers.count, 4);
  assert_int_equal(m.g->layers.first, 0);
  bc_emit_opts o = {0};
  char *src = bcE_emit_c(m.ctx, m.g, &o);
  assert_non_null(src);
  assert_non_null(strstr(src, "float *a_out,"));
  assert_non_null(strstr(src, "float *x_out,"));
  assert_non_null(strstr(src, "l == 3 ? a : "));
  assert_non_null(strstr(src, "for (int l = 0; l < 4; l++)"));
  assert_null(strstr(src, "w->layers[3]."));  // no layer inline
  m.ws = aligned_alloc(64, (size_t)m.c.ws_bytes);
  assert_non_null(m.ws);
  assert_int_equal(bcD_pack(m.ctx, &m.c, &m.w), BC_OK);
  float *packed = m.w.p[m.w.n];
  assert_non_null(packed);
  static const long Ts[] = {9, 5, 1};
  for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++)
    for (int masked = 0; masked <= 1; masked++)
      for (int pk = 0; pk <= 1; pk++) {
        int len[2] = {(int)(Ts[k] > 2 ? Ts[k] - 2 : 1), (int)Ts[k]};
        int *lens[2] = {NULL, masked ? len : NULL};
        ig_io got, want;
        ig_alloc(&got, m.g, &Ts[k], 200 + k, lens);
        ig_alloc(&want, m.g, &Ts[k], 200 + k, lens);
        m.w.p[m.w.n] = pk ? packed : NULL;
        assert_int_equal(io_run(&m, &got), BC_RUN_OK);
        if (bcR_run_io(m.ctx, m.g, &m.w, want.io, want.rt) != BC_OK) fail_msg("interp: %s", m.errs.buf);
        double err = ig_rel_err(&got, &want, m.g);
        if (!(err <= 2e-5)) fail_msg("T=%ld masked=%d packed=%d: rel err %g", Ts[k], masked, pk, err);
        ig_free(&got, m.g);
        ig_free(&want, m.g);
      }
  m.w.p[m.w.n] = packed;
  io_release(&m);
}

// ONE compiled model with run-time T and S equals, at each length, the
// model compiled for that fixed length: within 1e-5 relative (in practice
// the same GEMM calls with the same sizes, so usually bit-identical).
static void test_runtime_dims_equal_fixed_sizes(void **state) {
  (void)state;
  ig_cfg bounded = {.B = 2, .D = 16, .H = 2, .F = 24, .T = 150, .S = 11, .causal = true};
  io_model m;
  io_build(&m, &bounded);
  static const long sizes[][2] = {{150, 11}, {129, 11}, {75, 6}, {64, 5}, {63, 2}, {2, 1}, {1, 11}};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    ig_cfg fixed = bounded;
    fixed.T = (int)sizes[k][0];
    fixed.S = (int)sizes[k][1];
    fixed.fixT = fixed.fixS = true;
    io_model f;
    io_build(&f, &fixed);
    assert_int_equal(f.g->nrt, 0);
    int len[2] = {fixed.T, fixed.T > 1 ? fixed.T / 2 : 1}, mlen[2] = {fixed.S, 1};
    int *lens[4] = {0, 0, len, mlen};
    ig_io a, b;
    ig_alloc(&a, m.g, sizes[k], 7 + k, lens);
    ig_alloc(&b, f.g, NULL, 7 + k, lens);
    ig_copy_inputs(&b, &a, f.g);
    assert_int_equal(io_run(&m, &a), BC_RUN_OK);
    assert_int_equal(io_run(&f, &b), BC_RUN_OK);
    double err = ig_rel_err(&a, &b, m.g);
    if (!(err <= 1e-5)) fail_msg("T=%ld S=%ld: rel err %g", sizes[k][0], sizes[k][1], err);
    ig_free(&a, m.g);
    ig_free(&b, f.g);
    io_release(&f);
  }
  io_release(&m);
}


// The batch as a run-time dim: B, T and S all chosen per call.
static void test_runtime_batch(void **state) {
  (void)state;
  ig_cfg cfg = {.B = 3, .D = 10, .H = 2, .F = 12, .T = 9, .S = 5, .causal = true, .rtB = true};
  io_model m;
  io_build(&m, &cfg);
  assert_int_equal(m.g->nrt, 3);
  static const long sizes[][3] = {{3, 9, 5}, {1, 4, 2}, {2, 9, 1}};
  for (int k = 0; k < 3; k++) {
    int len[3] = {1, (int)sizes[k][1], 2}, mlen[3] = {(int)sizes[k][2], 1, 1};
    int *lens[4] = {0, 0, len, mlen};
    ig_io got, want;
    ig_alloc(&got, m.g, sizes[k], 3 + k, lens);
    ig_alloc(&want, m.g, sizes[k], 3 + k, lens);
    assert_int_equal(io_run(&m, &got), BC_RUN_OK);
    if (bcR_run_io(m.ctx, m.g, &m.w, want.io, want.rt) != BC_OK) fail_msg("interp: %s", m.errs.buf);
    double err = ig_rel_err(&got, &want, m.g);
    if (!(err <= 2e-5)) fail_msg("B=%ld T=%ld S=%ld: rel err %g", sizes[k][0], sizes[k][1], sizes[k][2], err);
    ig_free(&got, m.g);
    ig_free(&want, m.g);
  }
  io_release(&m);
}


// `blockc bench --length T=7` runs a bounded model at a chosen length.
static void test_bench_length(void **state) {
  (void)state;
  if (access("graphs/post_ln.blk", R_OK) != 0) skip();
  char out[8192], err[4096], cache[256];
  // bench also builds its AOT column: keep that module out of the user's cache.
  tu_mktmpdir(cache, sizeof cache, "test-jit-cache");
  setenv("BLOCKC_CACHE_DIR", cache, 1);
  char *argv[] = {(char *)tu_blockc(), "bench", "graphs/post_ln.blk", "-D", "D=16", "-D", "F=32",
                  "-D", "N=1", "-D", "H=2", "-D", "T=40", "--length", "T=7", "--iters", "2",
                  "--json", NULL, NULL};
  int rc = tu_spawn(argv, out, sizeof out, err, sizeof err);
  if (rc != 0) fail_msg("bench: %d: %s", rc, err);
  assert_non_null(strstr(out, "\"lengths\": {\"T\": 7}"));
  // The packed copy (in_proj 48 -> 64 rows x 16, out_proj and linear1 32 x 16,
  // linear2 32 x 32 floats) and the weight-read floor of the same run.
  assert_non_null(strstr(out, "\"packed_bytes\": 12288, "));
  assert_non_null(strstr(out, "\"read_floor_ms\": "));
  assert_non_null(strstr(out, "\"forward_over_floor\": "));
  // The training step is timed only with --train (issue 20, item 11).
  assert_non_null(strstr(out, "\"backward_ms\": null"));
  argv[18] = "--train";
  rc = tu_spawn(argv, out, sizeof out, err, sizeof err);
  if (rc != 0) fail_msg("bench --train: %d: %s", rc, err);
  // A number, not null (the step minus its forward half: on a loaded
  // machine that difference of two medians can come out below zero).
  const char *b = strstr(out, "\"backward_ms\": ");
  assert_non_null(b);
  char *end;
  double v = strtod(b + 15, &end);
  assert_true(end > b + 15 && isfinite(v));
  argv[18] = NULL;
  argv[14] = "T=41";
  assert_int_equal(tu_spawn(argv, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "--length T=41 is outside 1..40"));
  argv[14] = "D=3";
  assert_int_equal(tu_spawn(argv, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "no run-time dim of that name"));
  unsetenv("BLOCKC_CACHE_DIR");
  char *rm[] = {"/bin/rm", "-rf", cache, NULL};
  assert_int_equal(tu_spawn(rm, NULL, 0, NULL, 0), 0);
}

// Bad run-time values: status codes, checked before anything is computed.
static void test_run_status_codes(void **state) {
  (void)state;
  ig_cfg cfg = {.B = 2, .D = 8, .H = 2, .F = 8, .T = 10, .S = 6};
  io_model m;
  io_build(&m, &cfg);
  int len[2] = {10, 3}, mlen[2] = {6, 6};
  int *lens[4] = {0, 0, len, mlen};
  ig_io a;
  ig_alloc(&a, m.g, (long[]){10, 6}, 1, lens);
  const float *const *w = (const float *const *)m.w.p;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_OK);
  long bad_rt[][2] = {{0, 6}, {11, 6}, {10, 0}, {10, 7}, {-1, 6}};
  for (size_t k = 0; k < 5; k++) assert_int_equal(m.c.run(w, a.io, bad_rt[k], m.ws), BC_RUN_EDIM);
  assert_int_equal(m.c.run(w, a.io, NULL, m.ws), BC_RUN_EINVAL);
  len[1] = 0;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_ELEN);
  len[1] = 11;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_ELEN);
  len[1] = 3;
  mlen[0] = 7;  // past S = 6
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_ELEN);
  mlen[0] = -5;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_ELEN);
  mlen[0] = 6;
  a.rt[0] = 4;  // len[0] = 10 is now past T
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_ELEN);
  a.rt[0] = 10;
  void *x = a.io[0];
  a.io[0] = NULL;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_EINVAL);
  a.io[0] = x;
  void *y = a.io[m.g->ninputs];
  a.io[m.g->ninputs] = NULL;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_EINVAL);
  a.io[m.g->ninputs] = y;
  assert_int_equal(m.c.run(w, a.io, a.rt, (char *)m.ws + 16), BC_RUN_EINVAL);
  assert_int_equal(m.c.run(NULL, a.io, a.rt, m.ws), BC_RUN_EINVAL);
  assert_int_equal(m.c.run(w, NULL, a.rt, m.ws), BC_RUN_EINVAL);
  const float *saved = m.w.p[3];
  m.w.p[3] = NULL;
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_EINVAL);
  m.w.p[3] = (float *)saved;
  a.io[2] = a.io[3] = NULL;  // NULL lengths: full
  assert_int_equal(m.c.run(w, a.io, a.rt, m.ws), BC_RUN_OK);
  ig_free(&a, m.g);
  io_release(&m);
}

// --- errors --------------------------------------------------------------

static void test_compile_error_shows_generated_line(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_jit *jit = (bc_jit *)&errs;  // must be reset to NULL
  bc_forward_fn fn;
  const char *src = "int f(void) {\n  return 0;\n}\nint g(void) { return not_declared_anywhere; }\n";
  assert_int_equal(bcJ_compile(ctx, src, "f", &jit, &fn), BC_EINTERNAL);
  assert_null(jit);
  assert_null(fn);
  assert_non_null(strstr(errs.buf, "a blockc bug"));
  assert_non_null(strstr(errs.buf, "not_declared_anywhere"));
  assert_non_null(strstr(errs.buf, "generated line: int g(void) { return not_declared_anywhere; }"));
  bc_ctx_free(ctx);
}

// Warnings are bugs too (the emitter promises warning-free C).
static void test_warning_is_an_error(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_jit *jit;
  bc_forward_fn fn;
  const char *src = "int f(void) { int *p = 1; return p != 0; }\n";
  assert_int_equal(bcJ_compile(ctx, src, "f", &jit, &fn), BC_EINTERNAL);
  assert_null(jit);
  bc_ctx_free(ctx);
}

// Generated code reaches only the symbols bound explicitly: no libc.
static void test_only_bound_symbols_link(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_jit *jit;
  bc_forward_fn fn;
  const char *src = "int system(const char *cmd);\n"
                    "int f(void) { return system(\"true\"); }\n";
  assert_int_equal(bcJ_compile(ctx, src, "f", &jit, &fn), BC_EINTERNAL);
  assert_non_null(strstr(errs.buf, "system"));
  // #include cannot pull in system headers either.
  errs.len = 0;
  assert_int_equal(bcJ_compile(ctx, "#include <stdio.h>\nint f(void) { return 0; }\n", "f", &jit, &fn),
                   BC_EINTERNAL);
  assert_non_null(strstr(errs.buf, "stdio.h"));
  bc_ctx_free(ctx);
}

static void test_missing_function(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_jit *jit;
  bc_forward_fn fn;
  assert_int_equal(bcJ_compile(ctx, "int f(void) { return 0; }\n", "g_forward", &jit, &fn),
                   BC_EINTERNAL);
  assert_non_null(strstr(errs.buf, "g_forward"));
  assert_null(jit);
  bcJ_free(NULL);
  bc_ctx_free(ctx);
}

// One list of runtime kernels (issue 19): the kernels of blockc_rt.h's
// BCRT_KERNELS lists (read from the header's text), the JIT's allowlist
// (bcJ_symbol) and the declarations the emitted C carries are the same set;
// every bcrt_ call in the JIT C of every shipped graph, forward and training
// step, is one of them.
static bool in_set(char names[][64], int n, const char *s, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && !strncmp(names[i], s, len)) return true;
  return false;
}

static void test_one_kernel_list(void **state) {
  (void)state;
  FILE *f = fopen("runtime/blockc_rt.h", "r");
  assert_non_null(f);
  static char hdr[1 << 17];
  size_t hn = fread(hdr, 1, sizeof hdr - 1, f);
  fclose(f);
  hdr[hn] = '\0';
  static char names[128][64];
  int n = 0;
  for (const char *p = hdr; (p = strstr(p, "  X(")); p += 4) {
    const char *c = strchr(p, ',');
    assert_non_null(c);
    c += 2;
    size_t len = strcspn(c, ",");
    assert_true(len < 64 && n < 128);
    memcpy(names[n], c, len);
    names[n++][len] = '\0';
  }
  assert_true(n >= 30);
  // The allowlist: cblas_sgemm and exactly these, each once.
  int na = 0;
  assert_string_equal(bcJ_symbol(0), "cblas_sgemm");
  for (const char *s; (s = bcJ_symbol(na + 1)); na++) {
    if (!in_set(names, n, s, strlen(s))) fail_msg("JIT symbol %s is no kernel of blockc_rt.h", s);
    for (int j = 1; j <= na; j++)
      if (!strcmp(bcJ_symbol(j), s)) fail_msg("JIT symbol %s listed twice", s);
  }
  assert_int_equal(na, n);
  // The emitted declarations, and the calls of every shipped graph.
  DIR *dir = opendir("graphs");
  assert_non_null(dir);
  int ngraphs = 0;
  for (struct dirent *ent; (ent = readdir(dir));) {
    size_t len = strlen(ent->d_name);
    if (len < 5 || len > 64 || strcmp(ent->d_name + len - 4, ".blk")) continue;
    ngraphs++;
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    char path[300];
    snprintf(path, sizeof path, "graphs/%s", ent->d_name);
    bc_graph *g = bcP_parse_file(ctx, path, NULL, 0);  // default dims
    if (!g) fail_msg("%s: %s", path, errs.buf);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    bc_emit_opts eo = {.backward = true};
    bc_compiled cc;
    if (bcD_compile(ctx, g, &eo, &cc)) fail_msg("%s: %s", path, errs.buf);
    for (int i = 0; ngraphs == 1 && i < n; i++) {
      char decl[80];
      snprintf(decl, sizeof decl, " %s(", names[i]);
      if (!strstr(cc.csrc, decl)) fail_msg("the emitted C does not declare %s", names[i]);
    }
    for (const char *p = cc.csrc; (p = strstr(p, "bcrt_")); p++) {
      size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
      if (p[k] == '(' && !in_set(names, n, p, k))
        fail_msg("%s calls %.*s, not in blockc_rt.h's kernel lists", path, (int)k, p);
    }
    bcD_free(&cc);
    bc_ctx_free(ctx);
  }
  closedir(dir);
  assert_true(ngraphs >= 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_kernel_list),
      cmocka_unit_test(test_matches_interpreter_all_wirings),
      cmocka_unit_test(test_matches_interpreter_odd_shapes),
      cmocka_unit_test(test_layer_loop_matches_interpreter),
      cmocka_unit_test(test_shipped_graphs),
      cmocka_unit_test(test_packed_equals_unpacked),
      cmocka_unit_test(test_cross_attention_masks_vs_interp),
      cmocka_unit_test(test_layer_loop_carried_out),
      cmocka_unit_test(test_runtime_dims_equal_fixed_sizes),
      cmocka_unit_test(test_runtime_batch),
      cmocka_unit_test(test_run_status_codes),
      cmocka_unit_test(test_two_models_are_independent),
      cmocka_unit_test(test_same_model_two_threads),
      cmocka_unit_test(test_concurrent_compiles),
      cmocka_unit_test(test_compile_error_shows_generated_line),
      cmocka_unit_test(test_warning_is_an_error),
      cmocka_unit_test(test_only_bound_symbols_link),
      cmocka_unit_test(test_missing_function),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_bench_length),  // `blockc bench`: an AOT build and the training step
  };
  return tu_run_tiers(tests, long_tests);
}
