// test_loss.c — the losses (CrossEntropy, MSE) through every stage: forward
// values against hand-computed ones (ignore_index rows, label smoothing) on
// the interpreter, the JIT and the AOT module; the reference backward
// against finite differences and against the closed form (softmax - q) /
// kept; the emitted backward (JIT, AOT) against the reference; every target
// ignored (loss 0, zero gradients); targets outside 0..V-1 on each backend
// with the exact message or status; the parser's errors with carets; the
// training graph of the whole-model graphs (bcX_with_lm_loss) on
// graphs/gpt2_lm.blk and graphs/llama_lm.blk at small dims.
#include "testutil.h"
#include "ops.h"
#include "blockc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One AOT cache for the suite (made by main, removed at its end).
static char aot_cache[256];

// The AOT module of graph text (backward: with <model>_backward).
static bc_aot *aot_of(tu_model *m, const char *text, bool backward) {
  char path[256];
  tu_write_graph(path, sizeof path, text);
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(m->ctx, path, NULL, 0, backward, &g, &c, &h)) fail_msg("%s", m->errs.buf);
  bc_aot *a;
  tu_aot_build(m->ctx, &m->errs, g, c, h, aot_cache, &a);
  remove(path);
  return a;
}

static void clear_errs(tu_model *m) {
  m->errs.len = 0;
  m->errs.buf[0] = '\0';
}

// --- the loss in the test's own words (double) ------------------------------------------
// torch.nn.functional.cross_entropy(x, t, ignore_index=ig, label_smoothing=e), mean.
static double ce_direct(const float *x, const int32_t *t, int rows, int V, int ig, double e) {
  double total = 0;
  int kept = 0;
  for (int r = 0; r < rows; r++) {
    if (t[r] == ig) continue;
    double z = 0, mean = 0;
    for (int c = 0; c < V; c++) z += exp((double)x[r * V + c]);
    for (int c = 0; c < V; c++) mean += -(x[r * V + c] - log(z));
    total += (1 - e) * -(x[r * V + t[r]] - log(z)) + e * mean / V;
    kept++;
  }
  return kept ? total / kept : 0;
}

// --- a loss over logits given as an input ----------------------------------------------
#define CE_G                                                                              \
  "model cel\ndim B = 2\ndim T = 3\ndim V = 4\ninput logits : [B, T, V]\n"                \
  "input targets : tokens[B, T]\nloss = CrossEntropy(logits, targets%s)\noutput loss\n"

static char *ce_text(const char *attrs) {
  static char buf[512];
  snprintf(buf, sizeof buf, CE_G, attrs);
  return buf;
}

// Logits row r: (0, ln 2, ln 3, ln 6) shifted by r: p = (1, 2, 3, 6) / 12 on every row.
static void fill_logits(float *x) {
  for (int r = 0; r < 6; r++) {
    x[r * 4 + 0] = (float)r;
    x[r * 4 + 1] = (float)(r + log(2.0));
    x[r * 4 + 2] = (float)(r + log(3.0));
    x[r * 4 + 3] = (float)(r + log(6.0));
  }
}

typedef struct {
  const char *attrs;
  int32_t t[6];
  double want;
} ce_case;

// Hand-computed: -log p_c = log 12 - log(1, 2, 3, 6)[c]; the smoothing term
// mean_c(-log p_c) = log 12 - log(36)/4 on every row.
static void cases(ce_case *c) {
  double l12 = log(12.0), nl[4] = {l12, l12 - log(2.0), l12 - log(3.0), l12 - log(6.0)};
  double sm = l12 - log(36.0) / 4;
  c[0] = (ce_case){"", {0, 1, 2, 3, 3, 3}, (nl[0] + nl[1] + nl[2] + 3 * nl[3]) / 6};
  c[1] = (ce_case){"", {0, -100, 2, -100, -100, 3}, (nl[0] + nl[2] + nl[3]) / 3};
  c[2] = (ce_case){", ignore_index=1", {0, 1, 2, 1, 1, 3}, (nl[0] + nl[2] + nl[3]) / 3};
  c[3] = (ce_case){", label_smoothing=0.25", {0, -100, 2, -100, -100, 3},
                   0.75 * (nl[0] + nl[2] + nl[3]) / 3 + 0.25 * sm};
  c[4] = (ce_case){", ignore_index=-1, label_smoothing=1", {3, -1, 0, 1, 2, 2}, sm};
}

static void test_ce_forward_every_backend(void **state) {
  (void)state;
  ce_case cs[5];
  cases(cs);
  float x[24];
  fill_logits(x);
  for (int k = 0; k < 5; k++) {
    tu_model *m = tu_model_new(ce_text(cs[k].attrs), NULL, 0, 1);
    double direct = ce_direct(x, cs[k].t, 6, 4, k == 2 ? 1 : k == 4 ? -1 : -100,
                              k == 3 ? 0.25 : k == 4 ? 1 : 0);
    if (fabs(direct - cs[k].want) > 1e-6) fail_msg("case %d: direct %.9g hand %.9g", k, direct, cs[k].want);
    float y = -1;
    void *io[3] = {x, (void *)cs[k].t, &y};
    if (bcR_run_io(m->ctx, m->g, &m->w, io, NULL)) fail_msg("%s", m->errs.buf);
    if (fabs(y - cs[k].want) > 1e-6) fail_msg("case %d interp: %.9g want %.9g", k, y, cs[k].want);
    bc_compiled c;
    bc_emit_opts eo = {0};
    if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
    assert_non_null(strstr(c.csrc, "bcrt_cross_entropy("));
    void *ws = tu_ws_alloc(c.ws_bytes);
    y = -1;
    assert_int_equal(c.run((const float *const *)m->w.p, io, NULL, ws), BC_RUN_OK);
    if (fabs(y - cs[k].want) > 2e-6) fail_msg("case %d jit: %.9g want %.9g", k, y, cs[k].want);
    bc_aot *a = aot_of(m, ce_text(cs[k].attrs), false);
    y = -1;
    assert_int_equal(bcA_run(a)((const void *)m->w.p, io, NULL, ws), 0);
    if (fabs(y - cs[k].want) > 2e-6) fail_msg("case %d aot: %.9g want %.9g", k, y, cs[k].want);
    bcA_free(a);
    free(ws);
    bcD_free(&c);
    tu_model_free(m);
  }
}

// Logits [N, V] with targets [1, N]: the same rows, the same loss.
static void test_ce_rank2(void **state) {
  (void)state;
  const char *text = "model cer\ninput lg : [6, 4]\ninput tg : tokens[1, 6]\n"
                     "l = CrossEntropy(lg, tg, label_smoothing=0.25)\noutput l\n";
  tu_model *m = tu_model_new(text, NULL, 0, 1);
  ce_case cs[5];
  cases(cs);
  float x[24], y = -1;
  fill_logits(x);
  void *io[3] = {x, (void *)cs[3].t, &y};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, NULL)) fail_msg("%s", m->errs.buf);
  assert_true(fabs(y - cs[3].want) < 1e-6);
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
  y = -1;
  assert_int_equal(c.run((const float *const *)m->w.p, io, NULL, ws), BC_RUN_OK);
  assert_true(fabs(y - cs[3].want) < 2e-6);
  // d logits through the emitted backward's dx against the reference's.
  float dl = 2, dxe[24], dxr[24];
  const float *dys[1] = {&dl};
  float *dxs[2] = {dxe, NULL}, *dxs2[2] = {dxr, NULL};
  bc_weights dw;
  if (bcR_grad(m->ctx, m->g, &m->w, io, NULL, dys, &dw, dxs2)) fail_msg("%s", m->errs.buf);
  float *nodw[1] = {NULL};  // no parameters
  assert_int_equal(c.backward((const float *const *)m->w.p, io, NULL, dys, nodw, dxs, ws),
                   BC_RUN_OK);
  tu_expect_close(dxe, dxr, 24, 1e-6);
  assert_true(tu_max_abs(dxr, 24) > 0.01);
  bcW_free(&dw);
  free(ws);
  bcD_free(&c);
  tu_model_free(m);
}

// Large logits: the max is subtracted (no overflow), on every backend.
static void test_ce_large_logits(void **state) {
  (void)state;
  tu_model *m = tu_model_new(ce_text(""), NULL, 0, 1);
  float x[24];
  fill_logits(x);
  for (int i = 0; i < 24; i++) x[i] += 1000.0f;
  int32_t t[6] = {0, 1, 2, 3, 0, 1};
  double want = ce_direct(x, t, 6, 4, -100, 0);  // exp(1000) is inf: compute it shifted
  float xs[24];
  for (int i = 0; i < 24; i++) xs[i] = x[i] - 1000.0f;
  want = ce_direct(xs, t, 6, 4, -100, 0);
  float y = -1;
  void *io[3] = {x, t, &y};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, NULL)) fail_msg("%s", m->errs.buf);
  assert_true(isfinite(y) && fabs(y - want) < 1e-4);
  bc_compiled c;
  bc_emit_opts eo = {0};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  void *ws = tu_ws_alloc(c.ws_bytes);
  y = -1;
  assert_int_equal(c.run((const float *const *)m->w.p, io, NULL, ws), BC_RUN_OK);
  assert_true(isfinite(y) && fabs(y - want) < 1e-4);
  // A NaN logit in a kept row makes the loss NaN (a training run sees it);
  // in an ignored row it is never read.
  for (int nan_row = 0; nan_row < 2; nan_row++) {
    float xn[24];
    memcpy(xn, xs, sizeof xn);
    xn[nan_row * 4 + (nan_row ? 0 : 2)] = NAN;
    int32_t tn[6] = {0, -100, 2, 3, 0, 1};
    void *nio[3] = {xn, tn, &y};
    if (bcR_run_io(m->ctx, m->g, &m->w, nio, NULL)) fail_msg("%s", m->errs.buf);
    assert_true(nan_row ? isfinite(y) : isnan(y));
    assert_int_equal(c.run((const float *const *)m->w.p, nio, NULL, ws), BC_RUN_OK);
    assert_true(nan_row ? isfinite(y) : isnan(y));
  }
  free(ws);
  bcD_free(&c);
  tu_model_free(m);
}

// d loss / d logits by the reference backward equals (softmax - q) / kept.
static void test_ce_ref_grad_closed_form(void **state) {
  (void)state;
  tu_model *m = tu_model_new(ce_text(", label_smoothing=0.25"), NULL, 0, 1);
  float x[24];
  tu_fill(x, 24, 3);
  int32_t t[6] = {0, -100, 2, 3, -100, 1};
  float y, dl = 1.5f, dx0[24];
  void *io[3] = {x, t, &y};
  const float *dys[1] = {&dl};
  float *dx[2] = {dx0, NULL};
  bc_weights dw;
  if (bcR_grad(m->ctx, m->g, &m->w, io, NULL, dys, &dw, dx)) fail_msg("%s", m->errs.buf);
  for (int r = 0; r < 6; r++) {
    double z = 0;
    for (int c = 0; c < 4; c++) z += exp((double)x[r * 4 + c]);
    for (int c = 0; c < 4; c++) {
      double want = t[r] == -100 ? 0
                                 : (exp((double)x[r * 4 + c]) / z - 0.75 * (c == t[r]) - 0.25 / 4) *
                                       1.5 / 4;
      if (fabs(dx0[r * 4 + c] - want) > 1e-6)
        fail_msg("row %d class %d: %g want %g", r, c, (double)dx0[r * 4 + c], want);
    }
  }
  bcW_free(&dw);
  tu_model_free(m);
}

// --- a loss over a Linear head: parameters, finite differences, emitted backward ----------
#define HEAD_G                                                                            \
  "model celh\ndim B = 2\ndim T <= 4\ndim D = 3\ndim V = 5\ninput x : [B, T, D]\n"          \
  "input targets : tokens[B, T]\nlogits = Linear(x, out=V, params=head)\n"                 \
  "loss = CrossEntropy(logits, targets%s)\noutput loss\n"

static char *head_text(const char *attrs) {
  static char buf[512];
  snprintf(buf, sizeof buf, HEAD_G, attrs);
  return buf;
}

enum { HT = 4, HN = 2 * HT };

static double tape_loss(tu_model *m, void *const *io, const long *rt) {
  bc_tape *tp;
  if (bcR_tape_forward(m->ctx, m->g, &m->w, io, rt, &tp)) fail_msg("%s", m->errs.buf);
  double l = bcR_tape_value(tp, m->g->outputs[0], NULL)[0];
  bcR_tape_free(tp);
  return l;
}

// Every parameter's reference gradient against central differences.
static void fd_check(tu_model *m, void *const *io, const long *rt, const bc_weights *dw) {
  double worst = 0;
  for (int p = 0; p < m->g->nparams; p++) {
    float *w = m->w.p[p];
    for (int64_t k = 0; k < bc_shape_numel(&m->g->params[p].shape); k++) {
      float w0 = w[k];
      w[k] = w0 + 1e-2f;
      float hi = w[k];
      double lp = tape_loss(m, io, rt);
      w[k] = w0 - 1e-2f;
      float lo = w[k];
      double lm = tape_loss(m, io, rt);
      w[k] = w0;
      double fd = (lp - lm) / ((double)hi - (double)lo);
      double err = fabs(fd - dw->p[p][k]) / (1 + fabs(fd));
      if (err > worst) worst = err;
    }
  }
  if (worst > 1e-4) fail_msg("reference vs finite differences: %g", worst);
}

// Emitted backward (JIT and AOT) against the reference gradients ref.
static void emitted_vs_ref(tu_model *m, const char *text, void *const *io, const long *rt,
                           const float *const *dys, const bc_weights *ref, double tol) {
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  assert_non_null(c.backward);
  void *ws = tu_ws_alloc(c.bwd_ws_bytes);
  int np = m->g->nparams;
  float **dw = calloc((size_t)np, sizeof *dw);
  for (int p = 0; p < np; p++)
    dw[p] = calloc((size_t)bc_shape_numel(&m->g->params[p].shape), sizeof(float));
  bc_aot *a = aot_of(m, text, true);
  bc_backward_fn ab = bcA_backward(a);
  assert_non_null(ab);
  for (int which = 0; which < 2; which++) {
    for (int p = 0; p < np; p++)
      memset(dw[p], 0xff, (size_t)bc_shape_numel(&m->g->params[p].shape) * sizeof(float));
    int rc = which ? ab((const float *const *)m->w.p, io, rt, dys, dw, NULL, ws)
                   : c.backward((const float *const *)m->w.p, io, rt, dys, dw, NULL, ws);
    assert_int_equal(rc, BC_RUN_OK);
    for (int p = 0; p < np; p++) {
      int64_t n = bc_shape_numel(&m->g->params[p].shape);
      double d = tu_max_abs_diff(dw[p], ref->p[p], (size_t)n);
      if (d > tol * (1 + tu_max_abs(ref->p[p], (size_t)n)))
        fail_msg("%s %s: emitted vs reference %g", which ? "aot" : "jit",
                 m->g->params[p].name, d);
    }
  }
  bcA_free(a);
  for (int p = 0; p < np; p++) free(dw[p]);
  free(dw);
  free(ws);
  bcD_free(&c);
}

static void test_ce_grad_head(void **state) {
  (void)state;
  const char *attrs[3] = {"", ", label_smoothing=0.1", ", ignore_index=4, label_smoothing=0.3"};
  for (int k = 0; k < 3; k++) {
    tu_model *m = tu_model_new(head_text(attrs[k]), NULL, 0, 5);
    bcW_free(&m->w);  // tu_model_new made weights; these replace them
    tu_grad_weights(m->ctx, m->g, 7, &m->w);
    float x[HN * 3];
    tu_fill(x, HN * 3, 9);
    int32_t t[HN] = {0, 4, 2, -100, 1, 4, 3, 3};
    if (k == 2) t[3] = 4, t[6] = 1;  // ignore_index=4: two rows left out (4 is no class here)
    float y;
    long rt[1] = {HT};
    void *io[3] = {x, t, &y};
    float dl = 0.75f;
    const float *dys[1] = {&dl};
    bc_weights dw;
    if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &dw, NULL)) fail_msg("%s", m->errs.buf);
    if (k == 1) {
      int32_t t2[HN] = {0, 4, 2, 3, 1, 4, 3, 3};  // no -100 here: fd over every row
      void *io2[3] = {x, t2, &y};
      bc_weights dw2;
      const float *one[1] = {&(float){1.0f}};
      if (bcR_grad(m->ctx, m->g, &m->w, io2, rt, one, &dw2, NULL)) fail_msg("%s", m->errs.buf);
      fd_check(m, io2, rt, &dw2);
      bcW_free(&dw2);
    }
    const float *one[1] = {&(float){1.0f}};
    bc_weights d1;
    if (bcR_grad(m->ctx, m->g, &m->w, io, rt, one, &d1, NULL)) fail_msg("%s", m->errs.buf);
    fd_check(m, io, rt, &d1);  // dloss = 1: the loss itself
    // dloss scales the gradient.
    for (int p = 0; p < m->g->nparams; p++)
      for (int64_t i = 0; i < bc_shape_numel(&m->g->params[p].shape); i++)
        assert_true(fabs(dw.p[p][i] - 0.75 * d1.p[p][i]) < 1e-7);
    emitted_vs_ref(m, head_text(attrs[k]), io, rt, dys, &dw, 1e-5);
    bcW_free(&d1);
    bcW_free(&dw);
    tu_model_free(m);
  }
}

// A run-time T below its bound: the kernels and checks take the actual rows.
static void test_ce_runtime_T(void **state) {
  (void)state;
  tu_model *m = tu_model_new(head_text(", label_smoothing=0.05"), NULL, 0, 5);
  bcW_free(&m->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(m->ctx, m->g, 7, &m->w);
  float x[2 * 2 * 3], y = -1;
  tu_fill(x, 12, 4);
  int32_t t[4] = {3, -100, 0, 4};
  long rt[1] = {2};
  void *io[3] = {x, t, &y};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, rt)) fail_msg("%s", m->errs.buf);
  // The direct computation from the interpreter's own logits rows.
  float lg[4 * 5];
  const float *W = tu_param(m, "head.weight"), *bias = tu_param(m, "head.bias");
  for (int r = 0; r < 4; r++)
    for (int o = 0; o < 5; o++) {
      double a = bias[o];
      for (int k = 0; k < 3; k++) a += (double)x[r * 3 + k] * W[o * 3 + k];
      lg[r * 5 + o] = (float)a;
    }
  double want = ce_direct(lg, t, 4, 5, -100, (double)0.05f);
  assert_true(fabs(y - want) < 1e-6);
  float dl = 1;
  const float *dys[1] = {&dl};
  bc_weights dw;
  if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &dw, NULL)) fail_msg("%s", m->errs.buf);
  fd_check(m, io, rt, &dw);
  emitted_vs_ref(m, head_text(", label_smoothing=0.05"), io, rt, dys, &dw, 1e-5);
  t[3] = 5;  // past V at the last actual position
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "row 1, position 1: target 5 is outside 0..4"));
  bcW_free(&dw);
  tu_model_free(m);
}

// Every target ignored: loss 0 and zero gradients (PyTorch gives nan).
static void test_ce_all_ignored(void **state) {
  (void)state;
  tu_model *m = tu_model_new(head_text(""), NULL, 0, 5);
  float x[HN * 3];
  tu_fill(x, HN * 3, 9);
  int32_t t[HN];
  for (int i = 0; i < HN; i++) t[i] = -100;
  float y = -1, dl = 1;
  long rt[1] = {HT};
  void *io[3] = {x, t, &y};
  const float *dys[1] = {&dl};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, rt)) fail_msg("%s", m->errs.buf);
  assert_true(y == 0.0f);
  bc_weights dw;
  if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &dw, NULL)) fail_msg("%s", m->errs.buf);
  for (int p = 0; p < dw.n; p++)
    assert_true(tu_max_abs(dw.p[p], (size_t)bc_shape_numel(&m->g->params[p].shape)) == 0);
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
  y = -1;
  assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_OK);
  assert_true(y == 0.0f);
  emitted_vs_ref(m, head_text(""), io, rt, dys, &dw, 0);
  free(ws);
  bcD_free(&c);
  bcW_free(&dw);
  tu_model_free(m);
}

// Targets outside 0..V-1 (not ignore_index): the interpreter's message, the
// JIT's, the AOT module's and the emitted backward's status 6, nothing written.
static void test_ce_bad_targets(void **state) {
  (void)state;
  tu_model *m = tu_model_new(head_text(""), NULL, 0, 5);
  static const struct { int32_t id; int at; const char *msg; } bad[] = {
      {5, 7, "error: input targets: row 1, position 3: target 5 is outside 0..4 and is not "
             "ignore_index -100"},
      {-1, 0, "error: input targets: row 0, position 0: target -1 is outside 0..4 and is not "
              "ignore_index -100"},
      {-101, 2, "row 0, position 2: target -101 is outside 0..4"},
  };
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  bc_aot *a = aot_of(m, head_text(""), true);
  void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
  float **dw = calloc((size_t)m->g->nparams, sizeof *dw);
  for (int p = 0; p < m->g->nparams; p++)
    dw[p] = calloc((size_t)bc_shape_numel(&m->g->params[p].shape), sizeof(float));
  float x[HN * 3], dl = 1;
  tu_fill(x, HN * 3, 9);
  const float *dys[1] = {&dl};
  long rt[1] = {HT};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    int32_t t[HN] = {0, 1, 2, -100, 4, 0, 1, 2};
    t[bad[k].at] = bad[k].id;
    float y = 42.0f;
    void *io[3] = {x, t, &y};
    clear_errs(m);
    assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, io, rt), BC_EINPUT);
    if (!strstr(m->errs.buf, bad[k].msg)) fail_msg("got: %s\nwant: %s", m->errs.buf, bad[k].msg);
    clear_errs(m);
    bc_weights rw;
    assert_int_equal(bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &rw, NULL), BC_EINPUT);
    if (!strstr(m->errs.buf, bad[k].msg)) fail_msg("grad: %s", m->errs.buf);
    assert_int_equal(c.run((const float *const *)m->w.p, io, rt, ws), BC_RUN_ETOKEN);
    assert_int_equal(bcA_run(a)((const void *)m->w.p, io, rt, ws), BC_RUN_ETOKEN);
    assert_int_equal(c.backward((const float *const *)m->w.p, io, rt, dys, dw, NULL, ws),
                     BC_RUN_ETOKEN);
    assert_int_equal(bcA_backward(a)((const float *const *)m->w.p, io, rt, dys, dw, NULL, ws),
                     BC_RUN_ETOKEN);
    assert_true(y == 42.0f);
  }
  // The generated header names the status and the targets' range.
  char path[256];
  tu_write_graph(path, sizeof path, head_text(""));
  bc_graph *g;
  char *cs, *h;
  assert_int_equal(tu_aot_pair(m->ctx, path, NULL, 0, true, &g, &cs, &h), BC_OK);
  assert_non_null(strstr(h, "CELH_ETOKEN = 6   /* a token id outside 0..V-1 (the Embedding's "
                            "vocab), or a bad CrossEntropy target */"));
  assert_non_null(strstr(h, "int32 token ids [2, <=4], each 0..4 or -100 (CrossEntropy targets"));
  assert_non_null(strstr(h, "or a CrossEntropy target outside 0..V-1 that is not its ignore_index"));
  assert_non_null(strstr(cs, "!= -100) return CELH_ETOKEN;"));
  remove(path);
  for (int p = 0; p < m->g->nparams; p++) free(dw[p]);
  free(dw);
  free(ws);
  bcA_free(a);
  bcD_free(&c);
  tu_model_free(m);
}

// An integer in lo..hi from r.
static int rint_in(tu_rng *r, int lo, int hi) {
  int k = lo + (int)((tu_rnd(r) + 1) / 2 * (float)(hi - lo + 1));
  return k > hi ? hi : k;
}

// The CrossEntropy call of test_random_losses.
static const char *bc_fmt_test(double e, int ig) {
  static char buf[128];
  snprintf(buf, sizeof buf, "CrossEntropy(h, t, ignore_index=%d, label_smoothing=%.17g)", ig, e);
  return buf;
}

// Random shapes, vocabularies, ignore_index, smoothing and targets (V = 1 and
// wide rows past the kernels' chunk included): the JIT's loss and emitted
// backward against the interpreter and the reference backward.
static void test_random_losses(void **state) {
  (void)state;
  tu_rng rng = {12345};
  for (int it = 0; it < 24; it++) {
    int B = rint_in(&rng, 1, 3), T = rint_in(&rng, 1, 6), D = rint_in(&rng, 1, 8);
    int V = it == 0 ? 1 : it == 1 ? 2100 : rint_in(&rng, 1, 300);
    int ig = it % 3 == 0 ? -100 : rint_in(&rng, 0, V - 1);
    double e = it % 4 == 0 ? 0 : (tu_rnd(&rng) + 1) / 2;
    bool mse = it % 5 == 4;
    char text[1024];
    snprintf(text, sizeof text,
             "model rl\ndim B = %d\ndim T <= %d\ninput x : [B, T, %d]\n%s"
             "h = Linear(LayerNorm(x, params=ln), out=%d, params=head)\n"
             "l = %s\noutput l\n",
             B, T, D, mse ? "input y : [B, T, 3]\n" : "input t : tokens[B, T]\n", mse ? 3 : V,
             mse ? "MSE(h, y)" : bc_fmt_test(e, ig));
    tu_model *m = tu_model_new(text, NULL, 0, (uint64_t)it + 1);
    bcW_free(&m->w);  // tu_model_new made weights; these replace them
    tu_grad_weights(m->ctx, m->g, (uint64_t)it + 7, &m->w);
    int n = B * T;
    float *x = malloc((size_t)(n * D) * sizeof *x), *yv = malloc((size_t)n * 3 * sizeof *yv);
    int32_t *t = malloc((size_t)n * sizeof *t);
    tu_fill(x, n * D, (unsigned)it + 3);
    tu_fill(yv, n * 3, (unsigned)it + 5);
    for (int i = 0; i < n; i++)
      t[i] = tu_rnd(&rng) < -0.6f ? ig : rint_in(&rng, 0, V - 1);
    long rt[1] = {T - (it % 2 && T > 1)};
    float l_ref = -1, l_jit = -2;
    void *io[3] = {x, mse ? (void *)yv : (void *)t, &l_ref};
    if (bcR_run_io(m->ctx, m->g, &m->w, io, rt)) fail_msg("%s\n%s", text, m->errs.buf);
    float dl = 1;
    const float *dys[1] = {&dl};
    bc_weights ref;
    if (bcR_grad(m->ctx, m->g, &m->w, io, rt, dys, &ref, NULL)) fail_msg("%s", m->errs.buf);
    bc_compiled c;
    bc_emit_opts eo = {.backward = true};
    if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s\n%s", text, m->errs.buf);
    void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
    void *jio[3] = {x, io[1], &l_jit};
    assert_int_equal(c.run((const float *const *)m->w.p, jio, rt, ws), BC_RUN_OK);
    if (fabs(l_jit - l_ref) > 1e-5 * (1 + fabs(l_ref)))
      fail_msg("%s\njit %.9g interp %.9g", text, l_jit, l_ref);
    float **dw = calloc((size_t)m->g->nparams, sizeof *dw);
    for (int p = 0; p < m->g->nparams; p++)
      dw[p] = calloc((size_t)bc_shape_numel(&m->g->params[p].shape), sizeof(float));
    assert_int_equal(c.backward((const float *const *)m->w.p, jio, rt, dys, dw, NULL, ws), BC_RUN_OK);
    for (int p = 0; p < m->g->nparams; p++) {
      int64_t k = bc_shape_numel(&m->g->params[p].shape);
      double d = tu_max_abs_diff(dw[p], ref.p[p], (size_t)k);
      if (d > 1e-5 * (1 + tu_max_abs(ref.p[p], (size_t)k)))
        fail_msg("%s\n%s: emitted vs reference %g", text, m->g->params[p].name, d);
      free(dw[p]);
    }
    free(dw);
    bcW_free(&ref);
    free(ws);
    bcD_free(&c);
    free(x), free(yv), free(t);
    tu_model_free(m);
  }
}

// --- MSE ---------------------------------------------------------------------------------
#define MSE_G                                                                              \
  "model msel\ndim B = 2\ndim T = 2\ndim D = 3\ninput x : [B, T, D]\ninput target : [B, T, 2]\n" \
  "y = Linear(x, out=2, params=lin)\nloss = MSE(y, target)\noutput loss\n"

static void test_mse(void **state) {
  (void)state;
  // Hand-computed: y = x (an identity-like Linear over 2 of the 3 columns).
  tu_model *m = tu_model_new(MSE_G, NULL, 0, 5);
  float W[6] = {1, 0, 0, 0, 1, 0}, b[2] = {0, 0};
  tu_set_param(m, "lin.weight", W);
  tu_set_param(m, "lin.bias", b);
  float x[12] = {1, 2, 9, 3, 4, 9, -1, 0, 9, 2, 2, 9}, t[8] = {0, 0, 1, 1, 0, 0, 2, 5};
  // (y - t): 1 2 2 3 -1 0 0 -3: squares 1 4 4 9 1 0 0 9 = 28, / 8 = 3.5
  float y = -1;
  void *io[3] = {x, t, &y};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, NULL)) fail_msg("%s", m->errs.buf);
  assert_true(fabs(y - 3.5) < 1e-7);
  bc_compiled c;
  bc_emit_opts eo = {.backward = true};
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  assert_non_null(strstr(c.csrc, "bcrt_mse("));
  void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
  y = -1;
  assert_int_equal(c.run((const float *const *)m->w.p, io, NULL, ws), BC_RUN_OK);
  assert_true(fabs(y - 3.5) < 1e-6);
  bc_aot *a = aot_of(m, MSE_G, false);
  y = -1;
  assert_int_equal(bcA_run(a)((const void *)m->w.p, io, NULL, ws), 0);
  assert_true(fabs(y - 3.5) < 1e-6);
  bcA_free(a);
  // d target = -2 (y - t) / n; d lin.bias[j] = sum over rows 2 (y - t)_j / 8.
  float dl = 1, dx0[12], dt0[8];
  const float *dys[1] = {&dl};
  float *dx[2] = {dx0, dt0};
  bc_weights dw;
  if (bcR_grad(m->ctx, m->g, &m->w, io, NULL, dys, &dw, dx)) fail_msg("%s", m->errs.buf);
  const float diff[8] = {1, 2, 2, 3, -1, 0, 0, -3};
  for (int i = 0; i < 8; i++) assert_true(fabs(dt0[i] + 2 * diff[i] / 8) < 1e-7);
  const float *db = dw.p[bcI_find_param(m->g, "lin.bias")];
  assert_true(fabs(db[0] - 2 * (1 + 2 - 1 + 0) / 8.0) < 1e-7);
  assert_true(fabs(db[1] - 2 * (2 + 3 + 0 - 3) / 8.0) < 1e-7);
  bcW_free(&dw);
  // Random weights: finite differences, then the emitted backward.
  bcW_free(&m->w);  // tu_model_new made weights; these replace them
  tu_grad_weights(m->ctx, m->g, 3, &m->w);
  if (bcR_grad(m->ctx, m->g, &m->w, io, NULL, dys, &dw, NULL)) fail_msg("%s", m->errs.buf);
  fd_check(m, io, NULL, &dw);
  emitted_vs_ref(m, MSE_G, io, NULL, dys, &dw, 1e-5);
  bcW_free(&dw);
  free(ws);
  bcD_free(&c);
  tu_model_free(m);
}

// --- parse errors --------------------------------------------------------------------------
#define PE "model m\ndim B = 2\ndim T <= 6\ndim V = 5\ninput ids : tokens[B, T]\n" \
           "input tg : tokens[B, T]\ninput lg : [B, T, V]\n"

static void test_parse_errors(void **state) {
  (void)state;
  tu_expect_error(PE "l = CrossEntropy(lg, lg)\noutput l\n", 8, 22,
                  "CrossEntropy reads token ids: 'lg' is a float value [2, T<=6, 5]");
  tu_expect_error(PE "l = CrossEntropy(ids, tg)\noutput l\n", 8, 18,
                  "'ids' is a tokens input (int32 ids): only Embedding reads token ids, and "
                  "CrossEntropy its targets");
  tu_expect_error("model m\ninput lg : [2, 3, 4]\ninput tg : tokens[2, 4]\n"
                  "l = CrossEntropy(lg, tg)\noutput l\n", 4, 22,
                  "CrossEntropy: targets 'tg' are [2, 4], but logits [2, 3, 4] need [2, 3]");
  tu_expect_error("model m\ninput lg : [6, 4]\ninput tg : tokens[2, 3]\n"
                  "l = CrossEntropy(lg, tg)\noutput l\n", 4, 22,
                  "logits [6, 4] need [1, 6]");
  tu_expect_error(PE "l = CrossEntropy(lg, tg, ignore_index=1.5)\noutput l\n", 8, 39,
                  "ignore_index must be an int32 integer, got 1.5");
  tu_expect_error(PE "l = CrossEntropy(lg, tg, label_smoothing=1.5)\noutput l\n", 8, 42,
                  "label_smoothing must be in [0, 1], got 1.5");
  tu_expect_error(PE "l = CrossEntropy(lg, tg, label_smoothing=-0.1)\noutput l\n", 8, 42,
                  "label_smoothing must be in [0, 1]");
  tu_expect_error(PE "l = CrossEntropy(lg, tg)\ny = Add(l, l)\noutput y\n", 9, 9,
                  "'l' is a scalar (a loss): it can only be a graph output, not an input of Add");
  tu_expect_error(PE "e = Embedding(ids, vocab=V, dim=V, params=wte)\n"
                  "l = CrossEntropy(e, ids)\noutput l\n", 9, 21,
                  "'ids' is already read as ids by Embedding: one tokens input is either ids "
                  "(Embedding) or targets (CrossEntropy)");
  tu_expect_error(PE "l = CrossEntropy(lg, tg)\ne = Embedding(tg, vocab=V, dim=V, params=wte)\n"
                  "output l\noutput e\n", 9, 15, "'tg' is already read as targets by CrossEntropy");
  tu_expect_error(PE "l = CrossEntropy(lg, tg)\nk = CrossEntropy(lg, tg, ignore_index=0)\n"
                  "output l\noutput k\n", 9, 5,
                  "targets 'tg' are already read with ignore_index=-100");
  tu_expect_error("model m\ninput y : [2, 3]\ninput t : [2, 4]\nl = MSE(y, t)\noutput l\n", 4,
                  5, "shape mismatch in MSE: y is [2, 3] but target is [2, 4]");
  tu_expect_error("model m\ninput y : [2, 3]\ninput t : tokens[2, 3]\nl = MSE(y, t)\noutput l\n",
                  4, 12, "'t' is a tokens input");
  tu_expect_error("model m\ninput y : [2, 3]\nl = MSE(y)\noutput l\n", 3, 5, "MSE");
}

// dump and the node's attributes.
static void test_dump_attrs(void **state) {
  (void)state;
  tu_model *m = tu_model_new(ce_text(", ignore_index=0, label_smoothing=0.125"), NULL, 0, 1);
  const bc_node *n = &m->g->nodes[0];
  assert_int_equal(n->op, BC_OP_CROSS_ENTROPY);
  assert_int_equal(n->ignore_index, 0);
  assert_true(n->smoothing == 0.125);
  assert_int_equal(n->loss_vocab, 4);
  assert_int_equal(m->g->vals[n->out[0]].shape.rank, 0);
  bc_sbuf sb = {0};
  bcT_attrs(n, BC_ATTRS_DUMP, &sb);
  assert_non_null(strstr(sb.p, "ignore_index=0 label_smoothing=0.125"));
  free(sb.p);
  tu_model_free(m);
}

// --- the API -----------------------------------------------------------------------------
typedef struct {
  char buf[4096];
} api_errs;

static void api_err(void *opaque, const char *msg) {
  api_errs *e = opaque;
  snprintf(e->buf, sizeof e->buf, "%s", msg);
}

// A scalar output through blockc.h: its shape, blockc_run, blockc_backward
// with dy = [1] (against the reference), a bad target.
static void test_api_loss(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  api_errs e = {{0}};
  blockc_set_error_func(m, &e, api_err);
  assert_int_equal(blockc_load_graph_string(m, "h.blk", head_text(", label_smoothing=0.2")),
                   BLOCKC_OK);
  long long shape[4];
  assert_int_equal(blockc_output_shape(m, 0, shape, NULL), 0);
  assert_int_equal(blockc_input_is_tokens(m, 1), 1);
  assert_int_equal(blockc_init_weights(m, 3), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  assert_int_equal(blockc_compile_backward(m), BLOCKC_OK);
  size_t wn = blockc_workspace_size(m), bn = blockc_backward_workspace_size(m);
  void *ws = tu_ws_alloc((int64_t)wn), *bws = tu_ws_alloc((int64_t)bn);
  float x[HN * 3];
  tu_fill(x, HN * 3, 9);
  int32_t t[HN] = {0, 4, 2, -100, 1, 4, 3, 3};
  float loss = -1;
  const void *in[2] = {x, t};
  void *out[1] = {&loss};
  long long dims[1] = {HT};
  assert_int_equal(blockc_run(m, in, out, dims, ws, wn), BLOCKC_OK);
  // The reference on the same graph and weights (blockc_init_weights is bcW_init_random).
  tu_model *r = tu_model_new(head_text(", label_smoothing=0.2"), NULL, 0, 3);
  float want = -2;
  long rt[1] = {HT};
  void *io[3] = {x, t, &want};
  if (bcR_run_io(r->ctx, r->g, &r->w, io, rt)) fail_msg("%s", r->errs.buf);
  assert_true(fabs(loss - want) < 1e-5);
  float one = 1;
  const float *dys[1] = {&one};
  bc_weights ref;
  if (bcR_grad(r->ctx, r->g, &r->w, io, rt, dys, &ref, NULL)) fail_msg("%s", r->errs.buf);
  int np = blockc_num_params(m);
  float **dw = calloc((size_t)np, sizeof *dw);
  for (int p = 0; p < np; p++) dw[p] = calloc(blockc_param_size(m, p), sizeof(float));
  assert_int_equal(blockc_backward(m, in, out, dys, dw, NULL, dims, bws, bn), BLOCKC_OK);
  for (int p = 0; p < np; p++)
    tu_expect_close(dw[p], ref.p[p], (int64_t)blockc_param_size(m, p), 1e-5);
  t[5] = 5;
  assert_int_equal(blockc_run(m, in, out, dims, ws, wn), BLOCKC_EINPUT);
  if (!strstr(e.buf, "input targets: row 1, position 1: target 5 is outside 0..4 and is not "
                     "ignore_index -100"))
    fail_msg("blockc_run: %s", e.buf);
  e.buf[0] = '\0';
  assert_int_equal(blockc_backward(m, in, out, dys, dw, NULL, dims, bws, bn), BLOCKC_EINPUT);
  assert_non_null(strstr(e.buf, "target 5 is outside 0..4"));
  for (int p = 0; p < np; p++) free(dw[p]);
  free(dw);
  bcW_free(&ref);
  tu_model_free(r);
  free(ws), free(bws);
  blockc_delete(m);
}

// --- the training graph of a whole model ------------------------------------------------------
static void lm_loss_on(const char *file, const bc_define *defs, int ndefs, int V) {
  char path[512];
  snprintf(path, sizeof path, "graphs/%s", file);
  size_t len;
  char *text = tu_slurp(path, &len);
  assert_non_null(text);
  tu_model *m = tu_model_new(text, defs, ndefs, 11);
  free(text);
  enum { T = 5 };
  int32_t ids[T] = {1, 7, 3, 0, 9}, tg[T] = {7, 3, -100, 9, 2};
  long rt[1] = {T};
  float lg[T * 64], lg2[T * 64], loss = -1, loss2 = -1;
  assert_true(V <= 64);
  void *io[3] = {ids, NULL, lg};
  if (bcR_run_io(m->ctx, m->g, &m->w, io, rt)) fail_msg("%s", m->errs.buf);
  double want = ce_direct(lg, tg, T, V, -100, 0);
  for (int keep = 0; keep < 2; keep++) {
    bc_graph *g = bcX_with_lm_loss(m->ctx, m->g, "logits", "ids", keep);
    if (!g) fail_msg("%s", m->errs.buf);
    assert_int_equal(g->ninputs, m->g->ninputs + 1);
    assert_string_equal(g->vals[g->inputs[g->ninputs - 1]].name, "targets");
    assert_true(bcI_is_tokens(g, g->inputs[g->ninputs - 1]));
    assert_int_equal(g->noutputs, keep ? 2 : 1);
    assert_string_equal(g->output_names[g->noutputs - 1], "loss");
    assert_int_equal(bcI_tokens_vocab(g, g->inputs[g->ninputs - 1]), V);
    assert_int_equal(m->g->noutputs, 1);  // the original is untouched
    void *tio[5] = {ids, NULL, tg, keep ? (void *)lg2 : (void *)&loss, &loss2};
    if (bcR_run_io(m->ctx, g, &m->w, tio, rt)) fail_msg("%s", m->errs.buf);
    float got = keep ? loss2 : loss;
    if (fabs(got - want) > 1e-5 * (1 + fabs(want)))
      fail_msg("%s keep=%d interp: %.9g want %.9g", file, keep, got, want);
    if (keep) tu_expect_close(lg2, lg, T * V, 1e-6);
    bc_compiled c;
    bc_emit_opts eo = {.backward = true};
    if (bcD_compile(m->ctx, g, &eo, &c)) fail_msg("%s", m->errs.buf);
    void *ws = tu_ws_alloc(c.bwd_ws_bytes > c.ws_bytes ? c.bwd_ws_bytes : c.ws_bytes);
    loss = loss2 = -1;
    assert_int_equal(c.run((const float *const *)m->w.p, tio, rt, ws), BC_RUN_OK);
    got = keep ? loss2 : loss;
    if (fabs(got - want) > 1e-4 * (1 + fabs(want)))
      fail_msg("%s keep=%d jit: %.9g want %.9g", file, keep, got, want);
    // The training step: d loss (dy = 1 for loss; none for logits) vs the reference.
    float one = 1;
    const float *dys[2] = {keep ? NULL : &one, &one};
    bc_weights ref;
    if (bcR_grad(m->ctx, g, &m->w, tio, rt, dys, &ref, NULL)) fail_msg("%s", m->errs.buf);
    float **dw = calloc((size_t)g->nparams, sizeof *dw);
    for (int p = 0; p < g->nparams; p++)
      dw[p] = calloc((size_t)bc_shape_numel(&g->params[p].shape), sizeof(float));
    assert_int_equal(c.backward((const float *const *)m->w.p, tio, rt, dys, dw, NULL, ws),
                     BC_RUN_OK);
    for (int p = 0; p < g->nparams; p++) {
      int64_t n = bc_shape_numel(&g->params[p].shape);
      double d = tu_max_abs_diff(dw[p], ref.p[p], (size_t)n);
      if (d > 1e-4 * (1 + tu_max_abs(ref.p[p], (size_t)n)))
        fail_msg("%s %s: emitted vs reference %g", file, g->params[p].name, d);
      free(dw[p]);
    }
    free(dw);
    bcW_free(&ref);
    assert_null(c.step);  // a loss: no step entry
    // A bad target: status 6 from the compiled run.
    tg[1] = V;
    assert_int_equal(c.run((const float *const *)m->w.p, tio, rt, ws), BC_RUN_ETOKEN);
    tg[1] = 3;
    free(ws);
    bcD_free(&c);
  }
  tu_model_free(m);
}

static void test_with_lm_loss_gpt2(void **state) {
  (void)state;
  bc_define d[] = {{"D", 16}, {"H", 2}, {"N", 2}, {"V", 37}, {"P", 16}, {"T", 8}};
  lm_loss_on("gpt2_lm.blk", d, 6, 37);
}

static void test_with_lm_loss_llama(void **state) {
  (void)state;
  bc_define d[] = {{"D", 16}, {"H", 4}, {"KV", 2}, {"N", 2}, {"V", 41}, {"T", 8}};
  lm_loss_on("llama_lm.blk", d, 6, 41);
}

// The training graph's backward holds one [B, T, V] buffer more than the
// logits graph's (whose logits and d logits the caller holds): the logits
// in the arena and d logits, each once; the loss keeps [rows] floats.
static void test_lm_loss_backward_memory(void **state) {
  (void)state;
  size_t len;
  char *text = tu_slurp("graphs/gpt2_lm.blk", &len);
  assert_non_null(text);
  enum { T = 32, V = 4099 };
  bc_define d[] = {{"D", 32}, {"H", 2}, {"N", 2}, {"V", V}, {"T", T}};
  tu_model *a = tu_model_new(text, d, 5, 1), *b = tu_model_new(text, d, 5, 1);
  free(text);
  bc_graph *g = bcX_with_lm_loss(b->ctx, b->g, "logits", "ids", false);
  assert_non_null(g);
  bc_emit_opts eo = {.backward = true};
  bc_compiled ca, cb;
  if (bcD_compile(a->ctx, a->g, &eo, &ca)) fail_msg("%s", a->errs.buf);
  if (bcD_compile(b->ctx, g, &eo, &cb)) fail_msg("%s", b->errs.buf);
  double btv = (double)T * V * 4, diff = (double)cb.bwd_ws_bytes - (double)ca.bwd_ws_bytes;
  print_message("backward workspace: logits graph %lld, training graph %lld bytes (+%.3f BTV)\n",
                (long long)ca.bwd_ws_bytes, (long long)cb.bwd_ws_bytes, diff / btv);
  assert_true(diff <= btv + T * 4 + 4096);
  bcD_free(&ca);
  bcD_free(&cb);
  tu_model_free(a);
  tu_model_free(b);
}

static void test_with_lm_loss_refusals(void **state) {
  (void)state;
  tu_model *m = tu_model_new(head_text(""), NULL, 0, 5);
  static const struct { const char *lg, *ids, *msg; } r[] = {
      {"logits", "ids", "cannot add the next-token loss to celh: the graph has no output 'logits'"},
      {"loss", "ids", "the graph has no input 'ids'"},
      {"loss", "targets", "the graph already has an input 'targets'"},
  };
  for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
    clear_errs(m);
    assert_null(bcX_with_lm_loss(m->ctx, m->g, r[k].lg, r[k].ids, false));
    if (!strstr(m->errs.buf, r[k].msg)) fail_msg("got: %s\nwant: %s", m->errs.buf, r[k].msg);
  }
  tu_model_free(m);
  tu_model *e = tu_model_new("model emb\ndim B = 2\ndim T = 3\ninput ids : tokens[B, T]\n"
                             "logits = Embedding(ids, vocab=5, dim=3, params=wte)\noutput logits\n"
                             "y = Linear(logits, out=2, params=l)\noutput y\n", NULL, 0, 1);
  assert_non_null(bcX_with_lm_loss(e->ctx, e->g, "logits", "ids", true));  // [B, T, 3] is fine
  bc_compiled c;
  bc_emit_opts eo = {0};
  if (bcD_compile(e->ctx, e->g, &eo, &c)) fail_msg("%s", e->errs.buf);
  bcD_free(&c);
  clear_errs(e);
  assert_null(bcX_with_lm_loss(e->ctx, e->g, "logits", "ids", true));  // planned in place
  assert_non_null(strstr(e->errs.buf, "it has been compiled (the passes ran on it); give the "
                                      "graph as parsed"));
  tu_model_free(e);
  tu_model *s = tu_model_new("model shp\ninput ids : tokens[2, 3]\ninput x : [2, 4, 5]\n"
                             "e = Embedding(ids, vocab=5, dim=5, params=wte)\noutput e\n"
                             "logits = Add(x, x)\noutput logits\n", NULL, 0, 1);
  clear_errs(s);
  assert_null(bcX_with_lm_loss(s->ctx, s->g, "logits", "ids", false));
  if (!strstr(s->errs.buf, "output 'logits' is [2, 4, 5]: next-token logits over 'ids' [2, 3] "
                           "are [B, T, V]"))
    fail_msg("got: %s", s->errs.buf);
  tu_model_free(s);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_ce_forward_every_backend),
      cmocka_unit_test(test_ce_rank2),
      cmocka_unit_test(test_ce_large_logits),
      cmocka_unit_test(test_ce_ref_grad_closed_form),
      cmocka_unit_test(test_ce_grad_head),
      cmocka_unit_test(test_ce_runtime_T),
      cmocka_unit_test(test_ce_all_ignored),
      cmocka_unit_test(test_ce_bad_targets),
      cmocka_unit_test(test_random_losses),
      cmocka_unit_test(test_mse),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_dump_attrs),
      cmocka_unit_test(test_api_loss),
      cmocka_unit_test(test_with_lm_loss_gpt2),
      cmocka_unit_test(test_with_lm_loss_llama),
      cmocka_unit_test(test_lm_loss_backward_memory),
      cmocka_unit_test(test_with_lm_loss_refusals),
  };
  const struct CMUnitTest lng[] = {{0}};
  tu_mktmpdir(aot_cache, sizeof aot_cache, "loss-aot");
  int rc = tu_run_tiered(__FILE__, quick, sizeof quick / sizeof quick[0], lng, 0);
  tu_rm_rf(aot_cache);
  return rc;
}
