// test_embedding.c — token inputs (`input ids : tokens[B, T]`) and the
// Embedding op through every stage: hand-computed values on the
// interpreter, the JIT and the AOT module (scale= too); token ids outside
// 0..V-1 on each backend, through the API and the CLI, with the exact
// message; the parser's errors with carets; the step entry against the
// full run; the reference backward against finite differences; the emitted
// backward against the reference; a tied LM head (one parameter shared by
// Embedding and Linear) whose gradient is the sum of both uses.
#include "testutil.h"
#include "blockc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- a tiny graph with hand-computed outputs ---------------------------------------

#define SMALL                                                         \
  "model emb\ndim B = 2\ndim T <= 4\ninput ids : tokens[B, T]\n"      \
  "y = Embedding(ids, vocab=5, dim=3, params=wte%s)\noutput y\n"

static char *small_text(const char *extra) {
  static char buf[512];
  snprintf(buf, sizeof buf, SMALL, extra);
  return buf;
}

// wte[v, j] = 10 v + j.
static void set_table(tu_model *m) {
  float w[15];
  for (int v = 0; v < 5; v++)
    for (int j = 0; j < 3; j++) w[v * 3 + j] = (float)(10 * v + j);
  tu_set_param(m, "wte.weight", w);
}

static const int32_t kIds[6] = {4, 0, 2, 1, 1, 3};  // [2, 3]

static void expect_table_rows(const float *y, double scale) {
  for (int r = 0; r < 6; r++)
    for (int j = 0; j < 3; j++)
      if (y[r * 3 + j] != (float)(scale * (10 * kIds[r] + j)))
        fail_msg("row %d col %d: %g, want %g", r, j, (double)y[r * 3 + j], scale * (10 * kIds[r] + j));
}

// A graph file at a fresh temp path (for AOT generation, the CLI).
typedef struct {
  bc_aot *a;
  bc_graph *g;
} aot_mod;

// One AOT cache for the suite (a module built twice is a cache hit), made
// by main and removed at its end.
static char aot_cache[256];

// The AOT module of graph text (weights: w of a graph parsed from the same text).
static bc_aot_run_fn aot_build(bc_ctx *ctx, const tu_errors *errs, const char *text, aot_mod *am) {
  char path[256];
  tu_write_graph(path, sizeof path, text);
  char *c, *h;
  if (tu_aot_pair(ctx, path, NULL, 0, false, &am->g, &c, &h)) fail_msg("%s", errs->buf);
  tu_aot_build(ctx, errs, am->g, c, h, aot_cache, &am->a);
  remove(path);
  return bcA_run(am->a);
}

static void aot_free(aot_mod *am) { bcA_free(am->a); }

static void test_values_every_backend(void **state) {
  (void)state;
  const char *extras[2] = {"", ", scale=sqrt(4) * 1.5"};
  const double scales[2] = {1, 3};
  for (int e = 0; e < 2; e++) {
    tu_model *m = tu_model_new(small_text(extras[e]), NULL, 0, 1);
    set_table(m);
    float y[18];
    long rt[1] = {3};
    void *io[2] = {(void *)kIds, y};
    // interp
    memset(y, 0, sizeof y);
    if (bcR_run_io(m->ctx, m->g, &m->w, io, rt)) fail_msg("%s", m->errs.buf);
    expect_table_rows(y, scales[e]);
    // jit
    bc_compiled c;
    bc_emit_opts eo = {0};
    if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
    assert_non_null(strstr(c.csrc, "bcrt_embedding("));
    void *ws = tu_ws_alloc(c.ws_bytes);
    memset(y, 0, sizeof y);
    assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_OK);
    expect_table_rows(y, scales[e]);
    // aot
    aot_mod am;
    bc_aot_run_fn run = aot_build(m->ctx, &m->errs, small_text(extras[e]), &am);
    memset(y, 0, sizeof y);
    assert_int_equal(run((const void *)m->w.p, io, rt, ws), 0);
    expect_table_rows(y, scales[e]);
    aot_free(&am);
    free(ws);
    bcD_free(&c);
    tu_model_free(m);
  }
}

// Ids outside 0..V-1: the interpreter's message, the JIT's and the AOT
// module's status 6 with nothing written.
static void test_bad_ids_every_backend(void **state) {
  (void)state;
  tu_model *m = tu_model_new(small_text(""), NULL, 0, 1);
  static const struct { int32_t id; int at; const char *msg; } bad[] = {
      {-1, 0, "input ids: row 0, position 0: token id -1 is outside 0..4"},
      {5, 5, "input ids: row 1, position 2: token id 5 is outside 0..4"},
      {2147483647, 4, "input ids: row 1, position 1: token id 2147483647 is outside 0..4"},
      {-2147483647 - 1, 2, "input ids: row 0, position 2: token id -2147483648 is outside 0..4"},
  };
  bc_compiled c;
  bc_emit_opts eo = {0};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  aot_mod am;
  bc_aot_run_fn run = aot_build(m->ctx, &m->errs, small_text(""), &am);
  void *ws = tu_ws_alloc(c.ws_bytes);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    int32_t ids[6];
    memcpy(ids, kIds, sizeof ids);
    ids[bad[k].at] = bad[k].id;
    float y[18];
    for (int i = 0; i < 18; i++) y[i] = 42.0f;
    long rt[1] = {3};
    void *io[2] = {ids, y};
    m->errs.len = 0;
    m->errs.buf[0] = '\0';
    assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
    if (!strstr(m->errs.buf, bad[k].msg)) fail_msg("got: %s\nwant: %s", m->errs.buf, bad[k].msg);
    assert_int_equal(bcR_check_io(m->ctx, m->g, io, rt), BC_EINPUT);
    assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_ETOKEN);
    assert_int_equal(run((const void *)m->w.p, io, rt, ws), BC_RUN_ETOKEN);
    for (int i = 0; i < 18; i++) assert_true(y[i] == 42.0f);  // nothing written
  }
  // A NULL tokens array is refused, not read.
  float y[18];
  long rt[1] = {3};
  void *io[2] = {NULL, y};
  assert_int_equal(bcR_check_io(m->ctx, m->g, io, rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "no array for tokens input 'ids'"));
  assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_EINVAL);
  // The generated header names the status and the io kind.
  char path[256];
  tu_write_graph(path, sizeof path, small_text(""));
  bc_graph *g;
  char *cs, *h;
  assert_int_equal(tu_aot_pair(m->ctx, path, NULL, 0, false, &g, &cs, &h), BC_OK);
  assert_non_null(strstr(h, "EMB_ETOKEN = 6"));
  assert_non_null(strstr(h, "int32 token ids [2, <=4], each 0..4"));
  assert_non_null(strstr(h, "kind is BCRT_IO_TOKENS (int32 token ids"));
  assert_non_null(strstr(cs, "BCRT_IO_TOKENS"));
  assert_non_null(strstr(cs, "return EMB_ETOKEN;"));
  remove(path);
  free(ws);
  aot_free(&am);
  bcD_free(&c);
  tu_model_free(m);
}

// --- the API ------------------------------------------------------------------------

typedef struct {
  char buf[4096];
} api_errs;

static void api_err(void *opaque, const char *msg) {
  api_errs *e = opaque;
  snprintf(e->buf, sizeof e->buf, "%s", msg);
}

#define LM                                                                                    \
  "model tlm\ndim B = 2\ndim T <= 12\ndim V = 13\ndim D = 8\ndim H = 2\n"                     \
  "input ids : tokens[B, T]\n"                                                                \
  "x = Embedding(ids, vocab=V, dim=D, params=wte%s)\n"                                        \
  "for i in 0..2 as h.{i} {\n"                                                                \
  "  a = Attention(LayerNorm(x, params=ln1), heads=H, causal=true, params=attn)\n"            \
  "  x = Add(x, a)\n"                                                                         \
  "  x = Add(x, FFN(LayerNorm(x, params=ln2), hidden=16, params=(fc1, fc2)))\n"               \
  "}\n"                                                                                       \
  "y = Linear(LayerNorm(x, params=ln_f), out=V, bias=false, params=%s)\n"                     \
  "output y\n"

static char *lm_text(const char *scale, const char *head) {
  static char buf[1024];
  snprintf(buf, sizeof buf, LM, scale, head);
  return buf;
}

static void test_api_tokens(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  api_errs e = {{0}};
  blockc_set_error_func(m, &e, api_err);
  assert_int_equal(blockc_load_graph_string(m, "lm.blk", lm_text("", "wte")), BLOCKC_OK);
  assert_int_equal(blockc_input_is_tokens(m, 0), 1);
  assert_int_equal(blockc_input_is_lengths(m, 0), 0);
  assert_int_equal(blockc_input_is_tokens(m, 1), -1);
  assert_int_equal(blockc_num_params(m), 1 + 2 * 12 + 2);  // wte, 2 x 12, ln_f: the head is wte
  assert_int_equal(blockc_init_weights(m, 3), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  assert_int_equal(blockc_compile_backward(m), BLOCKC_OK);
  size_t wn = blockc_workspace_size(m), cn = blockc_cache_size(m);
  size_t bn = blockc_backward_workspace_size(m);
  void *ws = tu_ws_alloc((int64_t)wn), *cache = tu_ws_alloc((int64_t)cn), *bws = tu_ws_alloc((int64_t)bn);
  int32_t ids[2 * 6] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  float y[2 * 6 * 13], dy[2 * 6 * 13];
  tu_fill(dy, 2 * 6 * 13, 5);
  const void *in[1] = {ids};
  void *out[1] = {y};
  long long dims[1] = {6};
  assert_int_equal(blockc_run(m, in, out, dims, ws, wn), BLOCKC_OK);
  float ys[2 * 6 * 13];
  void *outs[1] = {ys};
  assert_int_equal(blockc_step(m, in, outs, dims, 0, cache, cn, ws, wn), BLOCKC_OK);
  tu_expect_close(y, ys, 2 * 6 * 13, 1e-4);
  ids[6 + 5] = 13;  // row 1, position 5: V
  assert_int_equal(blockc_run(m, in, out, dims, ws, wn), BLOCKC_EINPUT);
  const char *want = "input ids: row 1, position 5: token id 13 is outside 0..12";
  if (!strstr(e.buf, want)) fail_msg("blockc_run: %s", e.buf);
  e.buf[0] = '\0';
  assert_int_equal(blockc_step(m, in, outs, dims, 0, cache, cn, ws, wn), BLOCKC_EINPUT);
  if (!strstr(e.buf, want)) fail_msg("blockc_step: %s", e.buf);
  e.buf[0] = '\0';
  int np = blockc_num_params(m);
  float **dw = calloc((size_t)np, sizeof *dw);
  for (int p = 0; p < np; p++) dw[p] = calloc(blockc_param_size(m, p), sizeof(float));
  const float *dys[1] = {dy};
  assert_int_equal(blockc_backward(m, in, out, dys, dw, NULL, dims, bws, bn), BLOCKC_EINPUT);
  if (!strstr(e.buf, want)) fail_msg("blockc_backward: %s", e.buf);
  ids[6 + 5] = 0;
  assert_int_equal(blockc_backward(m, in, out, dys, dw, NULL, dims, bws, bn), BLOCKC_OK);
  const void *none[1] = {NULL};
  assert_int_equal(blockc_run(m, none, out, dims, ws, wn), BLOCKC_EUSAGE);
  for (int p = 0; p < np; p++) free(dw[p]);
  free(dw);
  free(ws), free(cache), free(bws);
  blockc_delete(m);
}

// --- parse errors ----------------------------------------------------------------------

#define TOK "model m\ndim B = 2\ndim T <= 6\ninput ids : tokens[B, T]\n"

static void test_parse_errors(void **state) {
  (void)state;
  tu_expect_error(TOK "y = LayerNorm(ids, params=ln)\noutput y\n", 5, 15,
                  "'ids' is a tokens input (int32 ids): only Embedding reads token ids");
  tu_expect_error(TOK "y = Add(Embedding(ids, vocab=4, dim=2, params=e), ids)\noutput y\n", 5,
                  51, "'ids' is a tokens input");
  tu_expect_error("model m\ninput x : [2, 3, 4]\ny = Embedding(x, vocab=4, dim=2, params=e)\n"
                  "output y\n", 3, 15, "Embedding reads token ids: 'x' is a float value [2, 3, 4]");
  tu_expect_error("model m\ninput len : lengths[2]\ny = Embedding(len, vocab=4, dim=2, params=e)\n"
                  "output y\n", 3, 15, "Embedding reads token ids: 'len' is a lengths input");
  tu_expect_error("model m\ninput ids : tokens[2]\n", 2, 19, "tokens take two axes: tokens[B, T]");
  tu_expect_error("model m\ninput ids : tokens[2, 3, 4]\n", 2, 26, "tokens take two axes");
  tu_expect_error(TOK "output ids\n", 5, 8, "'ids' is a tokens input, not an output");
  tu_expect_error(TOK "y = Embedding(ids, dim=2, params=e)\noutput y\n", 5, 5,
                  "Embedding needs the attribute 'vocab'");
  tu_expect_error(TOK "y = Embedding(ids, vocab=0, dim=2, params=e)\noutput y\n", 5, 26,
                  "vocab must be positive");
  tu_expect_error(TOK "y = Embedding(ids, vocab=4, dim=2, params=e, scale=1e60)\noutput y\n", 5,
                  52, "scale=1e+60 does not fit in float32");
  // A head tied to the embedding must have its shape.
  tu_expect_error(TOK "e = Embedding(ids, vocab=4, dim=2, params=wte)\n"
                  "y = Linear(e, out=5, bias=false, params=wte)\noutput y\n", 6, 41,
                  "parameter 'wte.weight' is used here with shape [5, 2] but earlier with shape [4, 2]");
  // A tokens input as lengths=.
  tu_expect_error(TOK "e = Embedding(ids, vocab=4, dim=2, params=wte)\n"
                  "y = Attention(e, heads=1, lengths=ids, params=a)\noutput y\n", 6, 35,
                  "lengths= takes a lengths input (input len : lengths[B]); 'ids' is a tokens input");
}

// vocab= / dim= that disagree with the checkpoint: the weights loader says which.
static void test_checkpoint_mismatch(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, small_text(""));
  assert_non_null(g);
  assert_int_equal(tu_load_one_tensor(ctx, g, "wte.weight", (bc_shape){.rank = 2, .d = {6, 3}}),
                   BC_EINPUT);
  assert_non_null(strstr(errs.buf, "wte.weight"));
  assert_non_null(strstr(errs.buf, "[6, 3]"));
  assert_non_null(strstr(errs.buf, "[5, 3]"));
  bc_ctx_free(ctx);
}

// --- step entry vs the full run (JIT and AOT) ---------------------------------------

static void test_step_vs_full(void **state) {
  (void)state;
  const char *text = lm_text(", scale=sqrt(D)", "wte");
  tu_model *m = tu_model_new(text, NULL, 0, 7);
  bc_compiled c;
  bc_emit_opts eo = {0};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  assert_non_null(c.step);
  aot_mod am;
  aot_build(m->ctx, &m->errs, text, &am);
  bc_aot_step_fn astep = bcA_step(am.a);
  assert_non_null(astep);
  void *ws = tu_ws_alloc(c.ws_bytes), *cache = tu_ws_alloc(c.cache_bytes);
  enum { T = 11, V = 13 };
  int32_t ids[2 * T];
  for (int i = 0; i < 2 * T; i++) ids[i] = (i * 7 + 3) % V;
  float full[2 * T * V], ref[2 * T * V];
  long rt[1] = {T};
  void *io[2] = {ids, full};
  assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_OK);
  void *rio[2] = {ids, ref};
  if (bcR_run_io(m->ctx, m->g, &m->w, rio, rt)) fail_msg("%s", m->errs.buf);
  tu_expect_close(full, ref, 2 * T * V, 1e-4);
  for (int which = 0; which < 2; which++) {
    float got[2 * T * V];
    const int chunk = 3;
    for (int pos = 0; pos < T; pos += chunk) {
      int t = pos + chunk <= T ? chunk : T - pos;
      int32_t part[2 * chunk];
      float out[2 * chunk * V];
      for (int b = 0; b < 2; b++) memcpy(part + b * t, ids + b * T + pos, (size_t)t * sizeof *part);
      long srt[1] = {t};
      void *sio[2] = {part, out};
      int rc = which ? astep((const void *)m->w.p, sio, srt, pos, cache, (size_t)c.cache_bytes, ws)
                     : c.step((const float *const *)m->w.p, sio, srt, pos, cache,
                              (size_t)c.cache_bytes, ws);
      assert_int_equal(rc, BC_RUN_OK);
      for (int b = 0; b < 2; b++)
        memcpy(got + (b * T + pos) * V, out + b * t * V, (size_t)(t * V) * sizeof *got);
    }
    tu_expect_close(got, full, 2 * T * V, 1e-4);
    // A bad id in a step: status 6.
    int32_t one[2] = {1, V};
    float out[2 * V];
    long srt[1] = {1};
    void *sio[2] = {one, out};
    int rc = which ? astep((const void *)m->w.p, sio, srt, T, cache, (size_t)c.cache_bytes, ws)
                   : c.step((const float *const *)m->w.p, sio, srt, T, cache, (size_t)c.cache_bytes, ws);
    assert_int_equal(rc, BC_RUN_ETOKEN);
  }
  free(ws), free(cache);
  aot_free(&am);
  bcD_free(&c);
  tu_model_free(m);
}

// --- gradients ---------------------------------------------------------------------------

// loss = sum(y * dy) in double through the tape.
static double tape_loss(tu_model *m, void *const *io, const long *rt, const float *dy, int64_t n) {
  bc_tape *tp;
  if (bcR_tape_forward(m->ctx, m->g, &m->w, io, rt, &tp)) fail_msg("%s", m->errs.buf);
  const double *y = bcR_tape_value(tp, m->g->outputs[0], NULL);
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += y[i] * dy[i];
  bcR_tape_free(tp);
  return s;
}

#define TIED                                                                          \
  "model tied\ndim B = 2\ndim T <= 5\ndim V = 7\ndim D = 6\ninput ids : tokens[B, T]\n" \
  "e = Embedding(ids, vocab=V, dim=D, params=wte, scale=2.5)\n"                        \
  "h = LayerNorm(e, params=ln)\n"                                                     \
  "y = Linear(h, out=V, bias=false, params=%s)\noutput y\n"

static char *tied_text(const char *head) {
  static char buf[512];
  snprintf(buf, sizeof buf, TIED, head);
  return buf;
}

enum { GB = 2, GT = 4, GV = 7, GD = 6 };
static const int32_t kGids[GB * GT] = {0, 3, 3, 6, 2, 3, 5, 0};  // repeats: the scatter adds

// The reference gradient of every parameter (dw) for dy.
static void ref_grad(tu_model *m, const float *dy, bc_weights *dw) {
  float y[GB * GT * GV];
  long rt[1] = {GT};
  void *io[2] = {(void *)kGids, y};
  const float *dys[1] = {dy};
  if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, dw, NULL)) fail_msg("%s", m->errs.buf);
}

static void test_ref_backward_vs_fd(void **state) {
  (void)state;
  tu_model *m = tu_model_new(tied_text("wte"), NULL, 0, 3);
  bcW_free(&m->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(m->ctx, m->g, 9, &m->w);
  float dy[GB * GT * GV];
  tu_fill(dy, GB * GT * GV, 11);
  bc_weights dw;
  ref_grad(m, dy, &dw);
  float *w = tu_param(m, "wte.weight");
  int p = bcI_find_param(m->g, "wte.weight");
  float y[GB * GT * GV];
  long rt[1] = {GT};
  void *io[2] = {(void *)kGids, y};
  double worst = 0;
  for (int k = 0; k < GV * GD; k++) {
    float w0 = w[k];
    w[k] = w0 + 1e-2f;
    float hi = w[k];
    double lp = tape_loss(m, io, rt, dy, GB * GT * GV);
    w[k] = w0 - 1e-2f;
    float lo = w[k];
    double lm = tape_loss(m, io, rt, dy, GB * GT * GV);
    w[k] = w0;
    double fd = (lp - lm) / ((double)hi - (double)lo);
    double err = fabs(fd - dw.p[p][k]) / (1 + fabs(fd));
    if (err > worst) worst = err;
  }
  if (worst > 1e-3) fail_msg("wte.weight: reference vs finite differences: %g", worst);
  // Rows no id names get gradient only through the head: row 1 and 4 are
  // never gathered, yet the tied head gives them a gradient.
  double r1 = 0;
  for (int j = 0; j < GD; j++) r1 += fabs(dw.p[p][1 * GD + j]);
  assert_true(r1 > 0);
  bcW_free(&dw);
  tu_model_free(m);
}

// Tied = untied with equal weights, gradients summed: d wte (tied) =
// d wte (untied) + d head (untied).
static void test_tied_gradient_is_the_sum(void **state) {
  (void)state;
  tu_model *t = tu_model_new(tied_text("wte"), NULL, 0, 3);
  tu_model *u = tu_model_new(tied_text("head"), NULL, 0, 3);
  assert_int_equal(u->g->nparams, t->g->nparams + 1);
  bcW_free(&t->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(t->ctx, t->g, 9, &t->w);
  bcW_free(&u->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(u->ctx, u->g, 9, &u->w);
  tu_set_param(u, "wte.weight", tu_param(t, "wte.weight"));
  tu_set_param(u, "head.weight", tu_param(t, "wte.weight"));
  tu_set_param(u, "ln.weight", tu_param(t, "ln.weight"));
  tu_set_param(u, "ln.bias", tu_param(t, "ln.bias"));
  float dy[GB * GT * GV];
  tu_fill(dy, GB * GT * GV, 11);
  bc_weights dt, du;
  ref_grad(t, dy, &dt);
  ref_grad(u, dy, &du);
  const float *gt = dt.p[bcI_find_param(t->g, "wte.weight")];
  const float *ge = du.p[bcI_find_param(u->g, "wte.weight")];
  const float *gh = du.p[bcI_find_param(u->g, "head.weight")];
  float sum[GV * GD];
  double nh = 0, ne = 0;
  for (int k = 0; k < GV * GD; k++) {
    sum[k] = ge[k] + gh[k];
    nh += fabs(gh[k]), ne += fabs(ge[k]);
  }
  assert_true(nh > 0 && ne > 0);  // both uses contribute
  tu_expect_close(gt, sum, GV * GD, 1e-5);
  // The emitted backward (JIT) agrees on the tied graph.
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(t->ctx, t->g, &eo, &c)) fail_msg("%s", t->errs.buf);
  assert_non_null(c.backward);
  assert_non_null(strstr(c.csrc, "bcrt_embedding_bwd("));
  void *ws = tu_ws_alloc(c.bwd_ws_bytes);
  float **dw = calloc((size_t)t->g->nparams, sizeof *dw);
  for (int p = 0; p < t->g->nparams; p++)
    dw[p] = calloc((size_t)bc_shape_numel(&t->g->params[p].shape), sizeof(float));
  float y[GB * GT * GV];
  long rt[1] = {GT};
  void *io[2] = {(void *)kGids, y};
  const float *dys[1] = {dy};
  assert_int_equal(c.backward((const float *const *)t->w.p, io, rt, dys, dw, NULL, ws), BC_RUN_OK);
  for (int p = 0; p < t->g->nparams; p++) {
    int64_t n = bc_shape_numel(&t->g->params[p].shape);
    double scale = 1 + tu_max_abs(dt.p[p], (size_t)n);
    tu_expect_close(dw[p], dt.p[p], n, 1e-5 * scale);
  }
  // A bad id: status 6 from the emitted backward too.
  int32_t bad[GB * GT];
  memcpy(bad, kGids, sizeof bad);
  bad[3] = -5;
  void *bio[2] = {bad, y};
  assert_int_equal(c.backward((const float *const *)t->w.p, bio, rt, dys, dw, NULL, ws),
                   BC_RUN_ETOKEN);
  // The AOT module's <model>_backward (`emit --backward`, cc) agrees too.
  char path[256];
  tu_write_graph(path, sizeof path, tied_text("wte"));
  bc_graph *ag;
  char *cs, *h;
  if (tu_aot_pair(t->ctx, path, NULL, 0, true, &ag, &cs, &h)) fail_msg("%s", t->errs.buf);
  bc_aot *am;
  tu_aot_build(t->ctx, &t->errs, ag, cs, h, aot_cache, &am);
  bc_backward_fn ab = bcA_backward(am);
  assert_non_null(ab);
  for (int p = 0; p < t->g->nparams; p++)
    memset(dw[p], 0xff, (size_t)bc_shape_numel(&t->g->params[p].shape) * sizeof(float));
  assert_int_equal(ab((const float *const *)t->w.p, io, rt, dys, dw, NULL, ws), BC_RUN_OK);
  for (int p = 0; p < t->g->nparams; p++) {
    int64_t n = bc_shape_numel(&t->g->params[p].shape);
    tu_expect_close(dw[p], dt.p[p], n, 1e-5 * (1 + tu_max_abs(dt.p[p], (size_t)n)));
  }
  assert_int_equal(ab((const float *const *)t->w.p, bio, rt, dys, dw, NULL, ws), BC_RUN_ETOKEN);
  bcA_free(am);
  remove(path);
  for (int p = 0; p < t->g->nparams; p++) free(dw[p]);
  free(dw);
  free(ws);
  bcD_free(&c);
  bcW_free(&dt), bcW_free(&du);
  tu_model_free(t), tu_model_free(u);
}

// The emitted backward (JIT) against the reference on the layered LM.
static void test_emitted_backward_lm(void **state) {
  (void)state;
  const char *text = lm_text(", scale=sqrt(D)", "wte");
  tu_model *m = tu_model_new(text, NULL, 0, 5);
  bcW_free(&m->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(m->ctx, m->g, 13, &m->w);
  enum { T = 9, V = 13 };
  int32_t ids[2 * T];
  for (int i = 0; i < 2 * T; i++) ids[i] = (i * 5 + 1) % V;
  float y[2 * T * V], dy[2 * T * V];
  tu_fill(dy, 2 * T * V, 17);
  long rt[1] = {T};
  void *io[2] = {ids, y};
  const float *dys[1] = {dy};
  bc_weights ref;
  if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &ref, NULL)) fail_msg("%s", m->errs.buf);
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  void *ws = tu_ws_alloc(c.bwd_ws_bytes);
  float **dw = calloc((size_t)m->g->nparams, sizeof *dw);
  for (int p = 0; p < m->g->nparams; p++)
    dw[p] = calloc((size_t)bc_shape_numel(&m->g->params[p].shape), sizeof(float));
  assert_int_equal(c.backward((const float *const *)m->w.p, io, rt, dys, dw, NULL, ws), BC_RUN_OK);
  for (int p = 0; p < m->g->nparams; p++) {
    int64_t n = bc_shape_numel(&m->g->params[p].shape);
    double scale = 1e-4 * (1 + tu_max_abs(ref.p[p], (size_t)n));
    if (tu_max_abs_diff(dw[p], ref.p[p], (size_t)n) > scale)
      fail_msg("%s: emitted vs reference %g", m->g->params[p].name,
               tu_max_abs_diff(dw[p], ref.p[p], (size_t)n));
  }
  for (int p = 0; p < m->g->nparams; p++) free(dw[p]);
  free(dw);
  free(ws);
  bcD_free(&c);
  bcW_free(&ref);
  tu_model_free(m);
}

// --- the CLI: .npy ids, random ids, bad ids on every backend -----------------------------

static void write_npy_ids(const char *path, const char *descr, int rows, int cols,
                          const int64_t *v) {
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }",
                   descr, rows, cols);
  int pad = 64 - (10 + n + 1) % 64;
  memset(hdr + n, ' ', (size_t)pad);
  hdr[n + pad] = '\n';
  int hl = n + pad + 1;
  bool i8 = descr[2] == '8';
  size_t dn = (size_t)(rows * cols) * (i8 ? 8 : 4);
  unsigned char *buf = malloc(10 + (size_t)hl + dn);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hl & 255), buf[9] = (unsigned char)(hl >> 8);
  memcpy(buf + 10, hdr, (size_t)hl);
  for (int i = 0; i < rows * cols; i++) {
    if (i8) memcpy(buf + 10 + hl + i * 8, &v[i], 8);
    else {
      int32_t x = (int32_t)v[i];
      memcpy(buf + 10 + hl + i * 4, &x, 4);
    }
  }
  tu_write_bytes(path, buf, 10 + (size_t)hl + dn);
  free(buf);
}

static void test_cli_tokens(void **state) {
  (void)state;
  char gpath[256], ok[256], bad[256], big[256], out[8192], err[8192];
  tu_write_graph(gpath, sizeof gpath, lm_text("", "wte"));
  tu_tmp_path(ok, sizeof ok, ".npy");
  tu_tmp_path(bad, sizeof bad, ".npy");
  tu_tmp_path(big, sizeof big, ".npy");
  int64_t v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  write_npy_ids(ok, "<i4", 2, 6, v);
  v[5] = 50300;
  write_npy_ids(bad, "<i8", 2, 6, v);
  v[5] = 1LL << 40;
  write_npy_ids(big, "<i8", 2, 6, v);
  static const char *const backends[] = {"interp", "jit", "aot"};
  char first[256] = "";
  for (int b = 0; b < 3; b++) {
    char *ra[] = {(char *)tu_blockc(), "run", gpath, "--backend", (char *)backends[b],
                  "--input", ok, NULL};
    if (tu_spawn(ra, out, sizeof out, err, sizeof err)) fail_msg("%s: %s", backends[b], err);
    assert_non_null(strstr(out, "output [2, 6, 13]"));
    const char *f = strstr(out, "first");
    assert_non_null(f);
    if (!first[0]) snprintf(first, sizeof first, "%.40s", f);
    char *rb[] = {(char *)tu_blockc(), "run", gpath, "--backend", (char *)backends[b],
                  "--input", bad, NULL};
    assert_int_equal(tu_spawn(rb, out, sizeof out, err, sizeof err), 1);
    if (!strstr(err, "input ids: row 0, position 5: token id 50300 is outside 0..12"))
      fail_msg("%s: %s", backends[b], err);
    char *rs[] = {(char *)tu_blockc(), "run", gpath, "--backend", (char *)backends[b],
                  "--input", "ids=", NULL};
    char arg[300];
    snprintf(arg, sizeof arg, "ids=%s", bad);
    rs[6] = arg;
    if (b == 1) {  // --stepwise too
      char *st[] = {(char *)tu_blockc(), "run", gpath, "--stepwise", "--chunk", "4", "--input", ok,
                    NULL};
      if (tu_spawn(st, out, sizeof out, err, sizeof err)) fail_msg("stepwise: %s", err);
      assert_non_null(strstr(out, "output [2, 6, 13]"));
    }
    assert_int_equal(tu_spawn(rs, out, sizeof out, err, sizeof err), 1);
  }
  // An int64 id past int32: the reader refuses it.
  char *rg[] = {(char *)tu_blockc(), "run", gpath, "--input", big, NULL};
  assert_int_equal(tu_spawn(rg, out, sizeof out, err, sizeof err), 1);
  assert_non_null(strstr(err, "error"));
  // Random ids (no --input) are valid, on every command that makes inputs.
  char *rr[] = {(char *)tu_blockc(), "run", gpath, "--length", "T=12", NULL};
  if (tu_spawn(rr, out, sizeof out, err, sizeof err)) fail_msg("random: %s", err);
  char gout[256];
  tu_tmp_path(gout, sizeof gout, ".safetensors");
  char *gr[] = {(char *)tu_blockc(), "grad", gpath, "--input", ok, "-o", gout, NULL};
  if (tu_spawn(gr, out, sizeof out, err, sizeof err)) fail_msg("grad: %s", err);
  char *bn[] = {(char *)tu_blockc(), "bench", gpath, "--iters", "2", NULL};
  if (tu_spawn(bn, out, sizeof out, err, sizeof err)) fail_msg("bench: %s", err);
  remove(gout), remove(ok), remove(bad), remove(big), remove(gpath);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_values_every_backend),
      cmocka_unit_test(test_bad_ids_every_backend),
      cmocka_unit_test(test_api_tokens),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_checkpoint_mismatch),
      cmocka_unit_test(test_step_vs_full),
      cmocka_unit_test(test_ref_backward_vs_fd),
      cmocka_unit_test(test_tied_gradient_is_the_sum),
      cmocka_unit_test(test_emitted_backward_lm),
      cmocka_unit_test(test_cli_tokens),
  };
  const struct CMUnitTest lng[] = {{0}};
  tu_mktmpdir(aot_cache, sizeof aot_cache, "emb-aot");
  int rc = tu_run_tiered(__FILE__, quick, sizeof quick / sizeof quick[0], lng, 0);
  tu_rm_rf(aot_cache);
  return rc;
}
