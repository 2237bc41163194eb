// test_wdtype.c — `--weight-dtype`: the whole-model families with their
// matrices as bf16, f16, q8_0 or q4_0, on every path.
//
// What must hold (docs/weight-types.md):
//   - the compiled code with a weight type computes the model whose
//     matrices are the rounded ones (bcY_round_weights): it agrees with the
//     interpreter (double) on those weights, and with the f32 build on
//     them, to float summation order — at few rows (the streaming kernel)
//     and at many (a prefill past BCRT_SMALL_M);
//   - rounding is idempotent (quantizing quantized values changes none),
//     which is what makes the packed copy hold exactly the interpreter's
//     weights;
//   - the rounding is real: the logits move away from the f32 model's by an
//     amount of the type's order, and not more (the accuracy table of the
//     doc is printed here: max relative error, top-1 agreement, KL);
//   - decoding through the step entry gives the forward's logits;
//   - a weight-typed build refuses a NULL packed copy, the AOT pair records
//     the type in its header and runs the same numbers, and the CLI's flag
//     is checked (unknown types, training).
#include "testutil.h"
#include "aot.h"
#include "blockc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *path;
  bc_define defs[8];
  int ndefs;
} family;

// Small members of the two LM families: LLaMA (RMSNorm, GQA, SwiGLU, an
// untied head, PyTorch's (out, in) matrices) and GPT-2 (learned positions,
// a head tied to the token table, Conv1D's (in, out) matrices).  F and D
// are not multiples of 32 everywhere, so blocks have k tails.
static const family FAMS[] = {
    {"graphs/llama_lm.blk", {{"D", 72}, {"H", 4}, {"KV", 2}, {"N", 2}, {"F", 136}, {"V", 97}, {"T", 100}}, 7},
    {"graphs/gpt2_lm.blk", {{"D", 48}, {"H", 4}, {"N", 2}, {"V", 101}, {"P", 100}, {"T", 100}}, 6},
};
enum { NFAM = sizeof FAMS / sizeof FAMS[0], TFULL = 90, TSMALL = 7 };

typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_compiled c;
  void *ws;
  int64_t V;
} model;

static void model_new(model *m, const family *f, int wt, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->ctx = tu_ctx(&m->errs);
  m->g = bcP_parse_file(m->ctx, f->path, f->defs, f->ndefs);
  if (!m->g) print_error("%s\n", m->errs.buf);
  assert_non_null(m->g);
  m->g->weight_type = wt;
  assert_int_equal(bcO_run_until(m->g, NULL), BC_OK);
  assert_int_equal(bcW_init_random(m->ctx, m->g, seed, &m->w), BC_OK);
  assert_int_equal(bcY_round_weights(m->ctx, m->g, &m->w), BC_OK);
  int st = bcD_compile(m->ctx, m->g, NULL, &m->c);
  if (st) print_error("%s\n", m->errs.buf);
  assert_int_equal(st, BC_OK);
  assert_int_equal(bcD_pack(m->ctx, &m->c, &m->w), BC_OK);
  m->ws = tu_ws_alloc(m->c.ws_bytes);
  m->V = m->g->vals[m->g->output].shape.d[2];
}

static void model_free(model *m) {
  free(m->ws);
  bcD_free(&m->c);
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
}

static void fill_ids(int32_t *ids, int T, int64_t V, unsigned seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (int t = 0; t < T; t++) {
    s = s * 1664525u + 1013904223u;
    ids[t] = (int32_t)((s >> 8) % (uint32_t)V);
  }
}

// io for ids [1, T] (lengths absent: full) and logits [1, T, V].
static void bind(const model *m, int32_t *ids, float *logits, void **io) {
  for (int i = 0; i < m->g->ninputs; i++)
    io[i] = bcI_is_tokens(m->g, m->g->inputs[i]) ? (void *)ids : NULL;
  io[m->g->ninputs] = logits;
}

static void run_jit(const model *m, const float *const *w, int T, int32_t *ids, float *y, int want) {
  void *io[4];
  long rt[1] = {T};
  assert_int_equal(m->g->nrt, 1);
  bind(m, ids, y, io);
  assert_int_equal(m->c.run(w, io, rt, m->ws), want);
}

static void run_interp(model *m, const bc_weights *w, int T, int32_t *ids, float *y) {
  void *io[4];
  long rt[1] = {T};
  bind(m, ids, y, io);
  int st = bcR_run_io(m->ctx, m->g, w, io, rt);
  if (st) print_error("%s\n", m->errs.buf);
  assert_int_equal(st, BC_OK);
}

// max |a - b| / max |b|
static double rel_err(const float *a, const float *b, size_t n) {
  double d = tu_max_abs_diff(a, b, n), s = tu_max_abs(b, n);
  return s > 0 ? d / s : d;
}

// The fraction of the T positions whose logits agree to tol (relative to
// the largest logit of all).
static double positions_within(const float *a, const float *b, int T, int64_t V, double tol) {
  double s = tu_max_abs(b, (size_t)T * (size_t)V);
  int ok = 0;
  for (int t = 0; t < T; t++)
    ok += tu_max_abs_diff(a + t * V, b + t * V, (size_t)V) <= tol * (s > 0 ? s : 1);
  return (double)ok / T;
}

// Top-1 agreement and mean KL(p_ref || p) of the next-token distributions.
static void dist_stats(const float *y, const float *ref, int T, int64_t V, double *top1, double *kl) {
  int agree = 0;
  double sum = 0;
  for (int t = 0; t < T; t++) {
    const float *a = y + t * V, *b = ref + t * V;
    int64_t ia = 0, ib = 0;
    double ma = a[0], mb = b[0];
    for (int64_t v = 1; v < V; v++) {
      if (a[v] > ma) ma = a[v], ia = v;
      if (b[v] > mb) mb = b[v], ib = v;
    }
    agree += ia == ib;
    double za = 0, zb = 0;
    for (int64_t v = 0; v < V; v++) za += exp(a[v] - ma), zb += exp(b[v] - mb);
    for (int64_t v = 0; v < V; v++) {
      double pb = exp(b[v] - mb) / zb, la = a[v] - ma - log(za), lb = b[v] - mb - log(zb);
      sum += pb * (lb - la);
    }
  }
  *top1 = (double)agree / T;
  *kl = sum / T;
}

// The f32 build's error bound against the double interpreter, relative to
// the largest logit: float accumulation over k <= 136 terms per product and
// two layers, measured ~1e-6; 1e-4 leaves room for other machines' BLAS.
#define F32_TOL 1e-4
// q8_0 / q4_0: their products quantize the activations, so where two builds
// (or a build and the double interpreter) round an activation within float
// rounding of a rounding boundary differently, it is one code step (max|x| /
// 127) apart, and that difference travels through the layers: measured up to
// 3.0e-4 of the largest logit (the -march=native build against the
// interpreter) and 9.6e-3 (a -O1 build without FMA, SAN=1, against the
// interpreter and the AOT build).  So these types are held to Q_TOL at most
// and, what a wrong kernel could not pass, Q_POS of the positions to F32_TOL.
#define Q_TOL 3e-2
#define Q_POS 0.75

// Per type: the largest relative logit error against the f32 model it may
// show, and the least it must (rounding that changed nothing would be a
// bug).  Measured with these seeds (docs/weight-types.md): bf16 6.0e-3 and
// 1.3e-2, f16 6.1e-4 and 1.2e-3, q8_0 1.5e-2 and 2.0e-2, q4_0 0.24 and 0.36 (tiny random models,
// whose logits are close together); the bounds are about 2-3x those.
static const struct {
  int wt;
  double max_err, min_err;
} TYPES[] = {{BC_WT_BF16, 0.04, 1e-4}, {BC_WT_F16, 4e-3, 1e-4}, {BC_WT_Q8_0, 0.06, 1e-4},
             {BC_WT_Q4_0, 0.8, 1e-2}};
enum { NTYPES = sizeof TYPES / sizeof TYPES[0] };

static void families_match_interp_and_f32(void **state) {
  (void)state;
  for (int fi = 0; fi < NFAM; fi++) {
    model f32;
    model_new(&f32, &FAMS[fi], BC_WT_F32, 7);
    int64_t V = f32.V;
    int32_t ids[TFULL];
    fill_ids(ids, TFULL, V, 3 + (unsigned)fi);
    size_t n = (size_t)TFULL * (size_t)V;
    float *yref = malloc(n * sizeof *yref), *y = malloc(n * sizeof *y), *yi = malloc(n * sizeof *yi),
          *yf = malloc(n * sizeof *yf);
    assert_true(yref && y && yi && yf);
    run_jit(&f32, (const float *const *)f32.w.p, TFULL, ids, yref, BC_RUN_OK);
    for (int ti = 0; ti < NTYPES; ti++) {
      model q;
      model_new(&q, &FAMS[fi], TYPES[ti].wt, 7);
      const char *name = bc_weight_type_name(TYPES[ti].wt);
      // every matrix is packed; the packed copy is smaller than the f32 weights (bf16 half)
      assert_true(q.c.packed_floats > 0);
      for (int T = TSMALL; T <= TFULL; T += TFULL - TSMALL) {  // few rows, then many
        size_t nt = (size_t)T * (size_t)V;
        run_jit(&q, (const float *const *)q.w.p, T, ids, y, BC_RUN_OK);
        run_interp(&q, &q.w, T, ids, yi);
        double e_interp = rel_err(y, yi, nt);
        // the f32 build on the rounded weights (no packed copy: cblas): the same model
        float *packed = q.w.p[q.w.n];
        q.w.p[q.w.n] = NULL;
        run_jit(&f32, (const float *const *)q.w.p, T, ids, yf, BC_RUN_OK);
        q.w.p[q.w.n] = packed;
        // (q8_0 and q4_0 products also quantize their inputs, which the
        // interpreter models and the f32 build does not: for them the f32
        // build must differ, by more than float rounding)
        // And an input within float rounding of a rounding boundary of its
        // block can quantize one step (max|x| / 127) apart in the float
        // kernels and the double interpreter: for them the bound is
        // Q_TOL, and most positions must still agree to F32_TOL.
        bool blocks = TYPES[ti].wt == BC_WT_Q8_0 || TYPES[ti].wt == BC_WT_Q4_0;
        double e_f32 = rel_err(y, yf, nt), tol = blocks ? Q_TOL : F32_TOL;
        double exact = positions_within(y, yi, T, V, F32_TOL);
        printf("  %-20s %-5s T=%d: vs interpreter %.3g (%.0f%% of positions to %g), vs f32 build "
               "on the rounded weights %.3g\n", FAMS[fi].path, name, T, e_interp, 100 * exact,
               F32_TOL, e_f32);
        if (e_interp > tol || exact < (blocks ? Q_POS : 1.0) || (e_f32 > F32_TOL) != blocks)
          print_error("%s %s T=%d: vs interpreter %.3g (%.0f%% of positions), vs f32 build on "
                      "the rounded weights %.3g\n", FAMS[fi].path, name, T, e_interp, 100 * exact, e_f32);
        assert_true(e_interp <= tol && exact >= (blocks ? Q_POS : 1.0));
        assert_true((e_f32 > F32_TOL) == blocks);
      }
      double e = rel_err(y, yref, n), top1, kl;
      dist_stats(y, yref, TFULL, V, &top1, &kl);
      printf("  %-20s %-5s vs f32: max rel logit error %.2e, top-1 agreement %.3f, KL %.2e\n",
             FAMS[fi].path, name, e, top1, kl);
      if (e > TYPES[ti].max_err || e < TYPES[ti].min_err)
        print_error("%s %s: relative error %.3g outside [%g, %g]\n", FAMS[fi].path, name, e,
                    TYPES[ti].min_err, TYPES[ti].max_err);
      assert_true(e <= TYPES[ti].max_err && e >= TYPES[ti].min_err);
      // rounding the rounded weights again changes none of them
      bc_weights again = {0};
      assert_int_equal(bcW_init_random(q.ctx, q.g, 7, &again), BC_OK);
      assert_int_equal(bcY_round_weights(q.ctx, q.g, &again), BC_OK);
      assert_int_equal(bcY_round_weights(q.ctx, q.g, &again), BC_OK);
      for (int p = 0; p < q.g->nparams; p++)
        assert_memory_equal(again.p[p], q.w.p[p],
                            (size_t)bc_shape_numel(&q.g->params[p].shape) * sizeof(float));
      bcW_free(&again);
      // no packed copy: refused, never read as floats
      float *saved = q.w.p[q.w.n];
      q.w.p[q.w.n] = NULL;
      run_jit(&q, (const float *const *)q.w.p, TSMALL, ids, y, BC_RUN_EINVAL);
      q.w.p[q.w.n] = saved;
      model_free(&q);
    }
    free(yref);
    free(y);
    free(yi);
    free(yf);
    model_free(&f32);
  }
}

// Prefill 40 positions, then one position per call: the forward's logits.
static void step_matches_forward(void **state) {
  (void)state;
  for (int ci = 0; ci < 2 * NFAM; ci++) {  // q4_0, then f16
    int fi = ci % NFAM;
    model q;
    model_new(&q, &FAMS[fi], ci < NFAM ? BC_WT_Q4_0 : BC_WT_F16, 11);
    assert_non_null(q.c.step);
    int64_t V = q.V;
    enum { T = 48, P0 = 40 };
    int32_t ids[T];
    fill_ids(ids, T, V, 5);
    float *y = malloc((size_t)T * (size_t)V * sizeof *y), *ys = malloc((size_t)T * (size_t)V * sizeof *ys);
    void *cache = aligned_alloc(64, (size_t)q.c.cache_bytes);
    assert_true(y && ys && cache);
    run_jit(&q, (const float *const *)q.w.p, T, ids, y, BC_RUN_OK);
    for (int pos = 0; pos < T;) {
      int t = pos ? 1 : P0;
      void *io[4];
      long rt[1] = {t};
      bind(&q, ids + pos, ys + (size_t)pos * (size_t)V, io);
      assert_int_equal(q.c.step((const float *const *)q.w.p, io, rt, pos, cache,
                                (size_t)q.c.cache_bytes, q.ws), BC_RUN_OK);
      pos += t;
    }
    double e = rel_err(ys, y, (size_t)T * (size_t)V);
    if (e > F32_TOL) print_error("%s: step vs forward %.3g\n", FAMS[fi].path, e);
    assert_true(e <= F32_TOL);
    free(cache);
    free(y);
    free(ys);
    model_free(&q);
  }
}

// The AOT pair: the header states the type, the module (cc -O3, its own
// <model>_pack) computes what the JIT does.
static void aot_pair_case(int wt, const char *name, const char *macro) {
  model q;
  model_new(&q, &FAMS[0], wt, 5);
  bc_aot_pair p;
  assert_int_equal(bcA_generate(q.ctx, &(bc_aot_gen){.path = FAMS[0].path, .defs = FAMS[0].defs,
                                                     .ndefs = FAMS[0].ndefs, .graph = q.g}, &p),
                   BC_OK);
  char want[128];
  snprintf(want, sizeof want, "#define LLAMA_LM_WEIGHT_DTYPE \"%s\"", name);
  assert_non_null(strstr(p.h_src, want));
  snprintf(want, sizeof want, "#define LLAMA_LM_WEIGHT_TYPE %s", macro);
  assert_non_null(strstr(p.h_src, want));
  snprintf(want, sizeof want, "bcrt_pack_nt_wt(%s", macro);
  assert_non_null(strstr(p.c_src, want));
  assert_null(strstr(p.c_src, "  bcrt_linear("));  // no product reads the float matrices
  char dir[512];
  assert_non_null(tu_mktmpdir(dir, sizeof dir, "wdtype"));
  bc_aot *a = NULL;
  tu_aot_build(q.ctx, &q.errs, q.g, p.c_src, p.h_src, dir, &a);
  assert_non_null(a);
  const void *wp = bcA_args(q.ctx, a, q.g, &q.w);
  assert_non_null(wp);
  int32_t ids[TFULL];
  fill_ids(ids, TFULL, q.V, 9);
  size_t n = (size_t)TFULL * (size_t)q.V;
  float *y = malloc(n * sizeof *y), *ya = malloc(n * sizeof *ya);
  assert_true(y && ya);
  run_jit(&q, (const float *const *)q.w.p, TFULL, ids, y, BC_RUN_OK);
  void *io[4];
  long rt[1] = {TFULL};
  bind(&q, ids, ya, io);
  assert_int_equal(bcA_run(a)(wp, io, rt, q.ws), BC_RUN_OK);
  // (q8_0 between two builds: see Q_TOL)
  bool blocks = wt == BC_WT_Q8_0 || wt == BC_WT_Q4_0;
  double e = rel_err(ya, y, n), same = positions_within(ya, y, TFULL, q.V, F32_TOL);
  if (e > (blocks ? Q_TOL : F32_TOL) || same < (blocks ? Q_POS : 1.0))
    print_error("aot vs jit %.3g (%.0f%% of positions to %g)\n", e, 100 * same, F32_TOL);
  assert_true(e <= (blocks ? Q_TOL : F32_TOL) && same >= (blocks ? Q_POS : 1.0));
  free(y);
  free(ya);
  bcA_free(a);
  tu_rm_rf(dir);
  model_free(&q);
}

static void aot_pair_records_and_matches(void **state) {
  (void)state;
  aot_pair_case(BC_WT_Q8_0, "q8_0", "BCRT_WT_Q8_0");
  aot_pair_case(BC_WT_F16, "f16", "BCRT_WT_F16");
}

// f16: a finite weight that would round to Inf (|w| >= 65520) is refused,
// naming its tensor; 65504 and the floats just below 65520 (which round to
// it) are kept.
static void f16_overflow_refused(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  const family *f = &FAMS[0];
  bc_graph *g = bcP_parse_file(ctx, f->path, f->defs, f->ndefs);
  assert_non_null(g);
  g->weight_type = BC_WT_F16;
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  bc_weights w = {0};
  assert_int_equal(bcW_init_random(ctx, g, 3, &w), BC_OK);
  int p = -1;
  for (int i = 0; i < g->nparams && p < 0; i++)
    if (strstr(g->params[i].name, "layers.1.mlp.down_proj")) p = i;
  assert_true(p >= 0);
  w.p[p][5] = 65504.0f, w.p[p][6] = -65519.99609375f, w.p[p][7] = INFINITY;  // kept (Inf stays Inf)
  assert_int_equal(bcY_round_weights(ctx, g, &w), BC_OK);
  assert_true(w.p[p][5] == 65504.0f && w.p[p][6] == -65504.0f && isinf(w.p[p][7]));
  w.p[p][9] = -65520.0f;
  errs.len = 0, errs.buf[0] = '\0';
  assert_int_equal(bcY_round_weights(ctx, g, &w), BC_EINPUT);
  if (!strstr(errs.buf, "tensor 'model.layers.1.mlp.down_proj.weight' has weight -65520 (element 9)"))
    print_error("%s\n", errs.buf);
  assert_non_null(strstr(errs.buf, "tensor 'model.layers.1.mlp.down_proj.weight' has weight -65520 (element 9)"));
  assert_non_null(strstr(errs.buf, "65504"));
  assert_true(w.p[p][9] == -65520.0f);  // nothing rounded
  bcW_free(&w);
  bc_ctx_free(ctx);
}

// The library: blockc_set_weight_dtype gives the same logits as the
// internal path above (same seed, same code), frees the float matrices
// once packed, and refuses misuse.
static void keep_msg(void *opaque, const char *msg) { snprintf((char *)opaque, 512, "%s", msg); }

static void api(void **state) {
  (void)state;
  char msg[512] = "";
  const family *f = &FAMS[0];
  model q;
  model_new(&q, f, BC_WT_Q8_0, 7);
  blockc_model *m = blockc_new();
  assert_non_null(m);
  blockc_set_error_func(m, msg, keep_msg);
  for (int i = 0; i < f->ndefs; i++)
    assert_int_equal(blockc_set_dim(m, f->defs[i].name, f->defs[i].value), BLOCKC_OK);
  assert_int_equal(blockc_set_weight_dtype(m, "q8_0"), BLOCKC_EUSAGE);  // no graph yet
  assert_int_equal(blockc_load_graph(m, f->path), BLOCKC_OK);
  assert_int_equal(blockc_set_weight_dtype(m, "q3"), BLOCKC_EUSAGE);
  assert_non_null(strstr(msg, "'q3' is not f32, bf16, f16, q8_0 or q4_0"));
  assert_int_equal(blockc_set_weight_dtype(m, "f16"), BLOCKC_OK);
  assert_int_equal(blockc_set_weight_dtype(m, NULL), BLOCKC_EUSAGE);
  assert_int_equal(blockc_set_weight_dtype(m, "q8_0"), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 7), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  assert_int_equal(blockc_set_weight_dtype(m, "f32"), BLOCKC_EUSAGE);  // after compiling
  assert_int_equal(blockc_compile_backward(m), BLOCKC_EUSAGE);
  assert_non_null(strstr(msg, "the backward reads f32 weights"));
  assert_null(blockc_train_new(m, NULL));
  int32_t ids[TSMALL];
  fill_ids(ids, TSMALL, q.V, 2);
  size_t n = (size_t)TSMALL * (size_t)q.V;
  float *y = malloc(n * sizeof *y), *ya = malloc(n * sizeof *ya);
  assert_true(y && ya);
  run_jit(&q, (const float *const *)q.w.p, TSMALL, ids, y, BC_RUN_OK);
  size_t wsz = blockc_workspace_size(m);
  void *ws = tu_ws_alloc((int64_t)wsz);
  const void *in[2] = {ids, NULL};
  void *out[1] = {ya};
  long long dims[1] = {TSMALL};
  assert_int_equal(blockc_run(m, in, out, dims, ws, wsz), BLOCKC_OK);
  assert_memory_equal(y, ya, n * sizeof *y);
  free(ws);
  free(y);
  free(ya);
  blockc_delete(m);
  // the same release on the internal path: the matrices' floats go, the run still works
  int64_t freed = bcD_release_packed(q.g, &q.w);
  assert_true(freed > 0);
  int nulls = 0;
  for (int p = 0; p < q.g->nparams; p++) nulls += !q.w.p[p];
  assert_true(nulls > 0 && nulls < q.g->nparams);  // the norms and the token table stay
  float *y2 = malloc(n * sizeof *y2);
  run_jit(&q, (const float *const *)q.w.p, TSMALL, ids, y2, BC_RUN_OK);
  free(y2);
  model_free(&q);
}

static void cli_flag(void **state) {
  (void)state;
  tu_run_result *r = malloc(sizeof *r);
  assert_non_null(r);
  TU_RUN(r, "run", "graphs/llama_lm.blk", "-D", "D=64", "-D", "F=96", "-D", "V=50", "-D", "N=1",
         "--length", "T=9", "--weight-dtype", "q4_0", "--backend", "interp");
  tu_expect_run(r, 0, "output [1, 9, 50]", NULL);
  TU_RUN(r, "run", "graphs/llama_lm.blk", "-D", "D=64", "-D", "F=96", "-D", "V=50", "-D", "N=1",
         "--length", "T=9", "--weight-dtype", "q5_9");
  tu_expect_run(r, 2, NULL, "--weight-dtype expects f32, bf16, f16, q8_0 or q4_0, got 'q5_9'");
  TU_RUN(r, "run", "graphs/llama_lm.blk", "-D", "D=64", "-D", "F=96", "-D", "V=50", "-D", "N=1",
         "--length", "T=9", "--weight-dtype", "f16");
  tu_expect_run(r, 0, "output [1, 9, 50]", NULL);
  TU_RUN(r, "emit", "graphs/llama_lm.blk", "-o", "build/never", "--backward", "--weight-dtype",
         "q8_0");
  tu_expect_run(r, 2, NULL, "is for inference");
  assert_false(tu_exists("build/never"));
  TU_RUN(r, "grad", "graphs/llama_lm.blk", "--weight-dtype", "q8_0");
  tu_expect_run(r, 2, NULL, "--weight-dtype");
  free(r);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(families_match_interp_and_f32),
      cmocka_unit_test(step_matches_forward),
      cmocka_unit_test(aot_pair_records_and_matches),
      cmocka_unit_test(f16_overflow_refused),
      cmocka_unit_test(api),
      cmocka_unit_test(cli_flag),
  };
  return tu_run_tiered(__FILE__, quick, sizeof quick / sizeof quick[0], NULL, 0);
}
