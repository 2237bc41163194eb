// test_grad_emit.c — the emitted training step (<model>_backward, emit_grad.c)
// against the reference backward (bcR_grad, double) for every shipped
// encoder wiring, causal and not, at odd dims (D=12, H=3, N=2, B=2, F=4D;
// T bounded at 9 and run at 7, a padded batch with lengths {7, 5} where the
// graph has a lengths input), through the JIT and through the AOT module
// (ResiDual causal in make test, every other wiring in make check);
// every other shipped graph (BERT, GPT-2, LLaMA, the encoder-decoders)
// through the JIT; the API and CLI; the ABI's misuse checks and the error
// for a node it does not cover.
//
// Tolerance, per tensor: max |g - g_ref| <= 1e-4 * max |g_ref|.  The
// emitted step is float32 end to end (GEMMs, kernels, accumulations over
// rows): each gradient is a chain of ~10 float products and sums of up to
// B*T*F = 672 terms per layer, so its rounding is ~1e-6 relative to the
// tensor's scale (measured worst over these 28 runs: printed, ~1e-6);
// 1e-4 leaves room for conditioning (LayerNorm's 1/std, softmax), while a
// wrong term (a missing 1/sqrt(dh), the softmax row dot, LayerNorm's mean
// term, a transposed weight) moves some element by 1e-2..1 relative.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "attn_graphs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "blockc.h"

static const char *const wirings[] = {"post_ln", "pre_ln", "residual", "deepnorm",
                                      "peri_ln", "pre_ln_nonorm", "tiny"};
#define NWIRINGS (int)(sizeof wirings / sizeof wirings[0])

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *s = strdup(buf);
  assert_non_null(s);
  return s;
}

// The graph file with every `causal=` set to `causal` (in place: same length
// either way after padding "true" with a space).
static char *wiring_text(const char *w, bool causal) {
  char path[256];
  snprintf(path, sizeof path, "graphs/%s.blk", w);
  char *s = read_text(path);
  for (char *p = s; (p = strstr(p, "causal=")); p += 7) {
    if (causal && !strncmp(p + 7, "false", 5)) memcpy(p + 7, "true ", 5);
    if (!causal && !strncmp(p + 7, "true", 4)) {
      // "true" -> "false" needs one more byte: rewrite through a copy.
      size_t off = (size_t)(p - s), n = strlen(s);
      char *t = malloc(n + 2);
      assert_non_null(t);
      memcpy(t, s, off + 7);
      memcpy(t + off + 7, "false", 5);
      strcpy(t + off + 12, s + off + 11);
      free(s);
      s = t;
      p = s + off;
    }
  }
  return s;
}

typedef struct run {
  tu_errors e;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w, dw_ref;
  void **io;
  float **dy, **dx, **dx_ref, **y_ref;
  long rt[4];
  const long *rtp;
  int32_t lens[2];
} run;

static int64_t io_numel(run *r, int i) {
  int v = i < r->g->ninputs ? r->g->inputs[i] : r->g->outputs[i - r->g->ninputs];
  bc_shape s = bcI_shape_at(r->g, &r->g->vals[v].shape, r->rtp);
  return bc_shape_numel(&s);
}

static float *fbuf(int64_t n) {
  float *p = calloc((size_t)(n ? n : 1), sizeof *p);
  assert_non_null(p);
  return p;
}

static const bc_define k_defs[] = {{"D", 12}, {"H", 3}, {"N", 2}, {"B", 2}, {"T", 9}, {"F", 48}};

// Parses the wiring, binds seeded weights, inputs and dy, and computes the
// reference gradients.
static run *run_new(const char *text, const bc_define *defs, int ndefs) {
  run *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->ctx = tu_ctx(&r->e);
  r->g = bcP_parse_string(r->ctx, "t.blk", text, defs, ndefs);
  if (!r->g) fail_msg("parse: %s", r->e.buf);
  for (int i = 0; i < r->g->nrt; i++) r->rt[i] = 7;
  r->rtp = r->g->nrt ? r->rt : NULL;
  r->lens[0] = 7;
  r->lens[1] = 5;
  tu_grad_weights(r->ctx, r->g, 11, &r->w);
  int n = r->g->ninputs + r->g->noutputs;
  r->io = calloc((size_t)n, sizeof *r->io);
  r->dy = calloc((size_t)r->g->noutputs, sizeof *r->dy);
  r->y_ref = calloc((size_t)r->g->noutputs, sizeof *r->y_ref);
  r->dx = calloc((size_t)r->g->ninputs, sizeof *r->dx);
  r->dx_ref = calloc((size_t)r->g->ninputs, sizeof *r->dx_ref);
  assert_true(r->io && r->dy && r->y_ref && r->dx && r->dx_ref);
  bc_rng g;
  bc_rng_seed(&g, 5);
  for (int i = 0; i < n; i++) {
    int v = i < r->g->ninputs ? r->g->inputs[i] : r->g->outputs[i - r->g->ninputs];
    if (r->g->vals[v].type == BC_VT_I32) {
      r->io[i] = r->lens;
      continue;
    }
    int64_t ne = io_numel(r, i);
    float *a = fbuf(ne);
    for (int64_t k = 0; i < r->g->ninputs && k < ne; k++) a[k] = (float)bc_rng_normal(&g);
    r->io[i] = a;
    if (i < r->g->ninputs) {
      r->dx[i] = fbuf(ne);
      r->dx_ref[i] = fbuf(ne);
    } else {
      float *d = fbuf(ne);
      for (int64_t k = 0; k < ne; k++) d[k] = (float)bc_rng_normal(&g);
      r->dy[i - r->g->ninputs] = d;
      r->y_ref[i - r->g->ninputs] = fbuf(ne);
    }
  }
  if (bcR_grad(r->ctx, r->g, &r->w, r->io, r->rtp, (const float *const *)r->dy, &r->dw_ref,
               r->dx_ref))
    fail_msg("bcR_grad: %s", r->e.buf);
  for (int i = 0; i < r->g->noutputs; i++)
    memcpy(r->y_ref[i], r->io[r->g->ninputs + i], (size_t)io_numel(r, r->g->ninputs + i) * 4);
  return r;
}

static void run_free(run *r) {
  for (int i = 0; i < r->g->ninputs + r->g->noutputs; i++)
    if (r->io[i] != r->lens) free(r->io[i]);
  for (int i = 0; i < r->g->noutputs; i++) {
    free(r->dy[i]);
    free(r->y_ref[i]);
  }
  for (int i = 0; i < r->g->ninputs; i++) {
    free(r->dx[i]);
    free(r->dx_ref[i]);
  }
  free(r->io); free(r->dy); free(r->y_ref); free(r->dx); free(r->dx_ref);
  bcW_free(&r->w);
  bcW_free(&r->dw_ref);
  bc_ctx_free(r->ctx);
  free(r);
}

// max |a - b| / max(max |b|, floor) (b all zero and floor 0: max |a|).
// The floor matters for gradients that are exactly zero in exact
// arithmetic, such as a separate key projection's bias (softmax does not
// see a constant added to a row of scores): the reference gives ~1e-17,
// float rounding ~1e-8, and only an absolute comparison makes sense.
static double rel_err_floor(const float *a, const float *b, int64_t n, double floor) {
  double e = 0, m = floor;
  for (int64_t k = 0; k < n; k++) {
    double d = fabs((double)a[k] - b[k]);
    if (!(d <= e)) e = d;
    if (fabs((double)b[k]) > m) m = fabs((double)b[k]);
  }
  return m > 0 ? e / m : e;
}

static double rel_err(const float *a, const float *b, int64_t n) {
  return rel_err_floor(a, b, n, 0);
}

// Runs fn and checks y, every dw and dx against the reference; returns the
// worst relative error.
static double check(run *r, bc_backward_fn fn, int64_t ws_bytes, const char *what) {
  bc_weights dw = {.n = r->g->nparams, .p = calloc((size_t)r->g->nparams, sizeof(float *))};
  assert_non_null(dw.p);
  for (int p = 0; p < r->g->nparams; p++) {
    dw.p[p] = fbuf(bc_shape_numel(&r->g->params[p].shape));
    for (int64_t k = 0; k < bc_shape_numel(&r->g->params[p].shape); k++) dw.p[p][k] = NAN;
  }
  for (int i = 0; i < r->g->noutputs; i++)  // y is written by the step
    memset(r->io[r->g->ninputs + i], 0xff, (size_t)io_numel(r, r->g->ninputs + i) * 4);
  void *ws = aligned_alloc(64, (size_t)ws_bytes);
  assert_non_null(ws);
  memset(ws, 0xff, (size_t)ws_bytes);  // NaN everywhere: no read before write
  int rc = fn((const float *const *)r->w.p, r->io, r->rtp, (const float *const *)r->dy, dw.p,
              r->dx, ws);
  assert_int_equal(rc, 0);
  double worst = 0;
  for (int i = 0; i < r->g->noutputs; i++) {
    double e = rel_err(r->io[r->g->ninputs + i], r->y_ref[i], io_numel(r, r->g->ninputs + i));
    if (!(e <= 1e-4)) fail_msg("%s: output %d: rel err %.3g", what, i, e);
  }
  // Floor: 1e-2 of the largest parameter gradient (see rel_err_floor).
  double gmax = 0;
  for (int p = 0; p < r->g->nparams; p++) {
    double m = tu_max_abs(r->dw_ref.p[p], (size_t)bc_shape_numel(&r->g->params[p].shape));
    gmax = m > gmax ? m : gmax;
  }
  for (int p = 0; p < r->g->nparams; p++) {
    double e = rel_err_floor(dw.p[p], r->dw_ref.p[p], bc_shape_numel(&r->g->params[p].shape),
                             1e-2 * gmax);
    if (!(e <= 1e-4)) fail_msg("%s: d %s: rel err %.3g", what, r->g->params[p].name, e);
    if (e > worst) worst = e;
  }
  for (int i = 0; i < r->g->ninputs; i++) {
    if (!r->dx[i]) continue;
    double e = rel_err(r->dx[i], r->dx_ref[i], io_numel(r, i));
    if (!(e <= 1e-4)) fail_msg("%s: d input %d: rel err %.3g", what, i, e);
    if (e > worst) worst = e;
  }
  free(ws);
  bcW_free(&dw);
  return worst;
}

static void test_jit_every_wiring(void **state) {
  (void)state;
  double worst = 0;
  for (int wi = 0; wi < NWIRINGS; wi++)
    for (int causal = 0; causal < 2; causal++) {
      char *text = wiring_text(wirings[wi], causal);
      run *r = run_new(text, k_defs, 6);
      bc_emit_opts eo = {.backward = true};
      bc_compiled c;
      if (bcD_compile(r->ctx, r->g, &eo, &c)) fail_msg("%s: %s", wirings[wi], r->e.buf);
      assert_non_null(c.backward);
      char what[64];
      snprintf(what, sizeof what, "jit %s%s", wirings[wi], causal ? " causal" : "");
      double e = check(r, c.backward, c.bwd_ws_bytes, what);
      printf("  %-28s worst rel err %.2e  (backward arena %lld B, forward %lld B)\n", what, e,
             (long long)c.bwd_ws_bytes, (long long)c.ws_bytes);
      if (e > worst) worst = e;
      // Lengths NULL (full) must work too, and dx NULL.
      for (int i = 0; i < r->g->ninputs; i++)
        if (r->io[i] == r->lens) r->io[i] = NULL;
      bc_weights dw;
      assert_int_equal(bcW_init_random(r->ctx, r->g, 1, &dw), BC_OK);
      void *ws = aligned_alloc(64, (size_t)c.bwd_ws_bytes);
      assert_int_equal(c.backward((const float *const *)r->w.p, r->io, r->rtp,
                                  (const float *const *)r->dy, dw.p, NULL, ws), 0);
      for (int i = 0; i < r->g->ninputs; i++)
        if (!r->io[i]) r->io[i] = r->lens;
      free(ws);
      bcW_free(&dw);
      bcD_free(&c);
      run_free(r);
      free(text);
    }
  printf("  jit: worst rel err over every wiring %.2e (tol 1e-4)\n", worst);
}

// Every other shipped graph (checkpoint families and encoder-decoders:
// RMSNorm, grouped-query attention, RoPE, SwiGLU, layout=in_out, separate
// q/k/v, cross-attention with kv_lengths) at small dims, through the JIT.
// Every graph named, at small dims with N layers, through the JIT's
// backward against the reference.  With `loop`, the emitted step must run
// the layers in its loops, forward and backward (llm.c's l = L-1..0).
static void every_graph(const char *const *graphs, size_t ngraphs, int64_t N, bool loop) {
  const bc_define want[] = {{"B", 2}, {"T", 9}, {"S", 9}, {"D", 12}, {"H", 3},
                            {"KV", 1}, {"F", 20}, {"N", N}};
  for (size_t gi = 0; gi < ngraphs; gi++) {
    char path[128];
    snprintf(path, sizeof path, "graphs/%s.blk", graphs[gi]);
    char *text = read_text(path);
    tu_errors e;
    bc_ctx *ctx = tu_ctx(&e);
    bc_graph *g0 = bcP_parse_string(ctx, "t.blk", text, NULL, 0);
    if (!g0) fail_msg("%s: %s", graphs[gi], e.buf);
    bc_define defs[8];
    int nd = 0;
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
      for (int i = 0; i < g0->ndims; i++)
        if (!strcmp(g0->dims[i].name, want[k].name)) defs[nd++] = want[k];
    bc_ctx_free(ctx);
    run *r = run_new(text, defs, nd);
    bc_emit_opts eo = {.backward = true};
    bc_compiled c;
    if (bcD_compile(r->ctx, r->g, &eo, &c)) fail_msg("%s: %s", graphs[gi], r->e.buf);
    if (loop) {
      const char *m = r->g->model;
      if (!strstr(c.csrc, bc_fmt(r->ctx, "static void %s_layer_backward(", m)) ||
          !strstr(c.csrc, bc_fmt(r->ctx, "    %s_layer_backward(w + ", m)) ||
          !strstr(c.csrc, bc_fmt(r->ctx, "    %s_layer_train_forward(w + ", m)) ||
          strstr(c.csrc, "No layer loop"))
        fail_msg("%s: the backward has no layer loop", graphs[gi]);
    }
    char what[64];
    snprintf(what, sizeof what, "jit %s N=%lld", graphs[gi], (long long)N);
    printf("  %-28s worst rel err %.2e\n", what, check(r, c.backward, c.bwd_ws_bytes, what));
    bcD_free(&c);
    run_free(r);
    free(text);
  }
}

static void test_jit_every_graph(void **state) {
  (void)state;
  static const char *const graphs[] = {"bert", "gpt2", "llama", "decoder_post_ln",
                                       "decoder_pre_ln", "decoder_residual", "transformer",
                                       "parallel", "hyper_connections"};
  every_graph(graphs, sizeof graphs / sizeof graphs[0], 2, false);
}

// Every shipped graph at N = 4 (three or four trips: a carried-in stream,
// Pre-LN's first layer outside the loop, a Post-LN last layer writing y,
// ResiDual's two streams from one x, a decoder's memory every trip reads)
// loops forward and backward, and agrees with the reference.
static void test_layer_loop_every_graph(void **state) {
  (void)state;
  static const char *const graphs[] = {
      "bert", "decoder_post_ln", "decoder_pre_ln", "decoder_residual", "deepnorm",
      "gpt2", "llama", "peri_ln", "post_ln", "pre_ln", "pre_ln_nonorm", "residual", "tiny",
      "transformer",
      // issue 23's research wirings (parallel.blk and hyper_connections.blk
      // are not laid out as a loop: in test_jit_every_graph)
      "sandwich", "gated", "normformer", "rezero", "layerscale", "admin"};
  every_graph(graphs, sizeof graphs / sizeof graphs[0], 4, true);
}

// Through AOT modules (cc -O1, the runtime each time: slow).  The quick
// tier takes ResiDual causal (it also compiles the vendored pair); the
// check tier every other wiring, causal and not.
static bool aot_quick_case(int wi, int causal) { return !strcmp(wirings[wi], "residual") && causal; }

static void aot_wirings(bool quick) {
  char dir[256], path[400], cmd[1400];
  tu_mktmpdir(dir, sizeof dir, "grademit");
  double worst = 0;
  for (int wi = 0; wi < NWIRINGS; wi++)
    for (int causal = 0; causal < 2; causal++) {
      if (aot_quick_case(wi, causal) != quick) continue;
      char *text = wiring_text(wirings[wi], causal);
      run *r = run_new(text, k_defs, 6);
      snprintf(path, sizeof path, "%s/%s%d.blk", dir, wirings[wi], causal);
      tu_write_bytes(path, text, strlen(text));
      bc_graph *g;
      char *c, *h;
      if (tu_aot_pair(r->ctx, path, k_defs, 6, true, &g, &c, &h))
        fail_msg("%s: %s", wirings[wi], r->e.buf);
      assert_non_null(strstr(h, "_BACKWARD_WORKSPACE_BYTES"));
      if (causal) {  // the vendored pair with the backward compiles warning-free
        char pdir[300];
        snprintf(pdir, sizeof pdir, "%s/pair_%s", dir, wirings[wi]);
        assert_int_equal(bcA_write_pair(r->ctx, pdir, g->model, c, h), BC_OK);
        snprintf(cmd, sizeof cmd, "cc -std=c99 -Wall -Wextra -Wpedantic -Wshadow "
                 "-Wmissing-prototypes -Werror -Iruntime -c '%s/%s.c' -o '%s/%s.o'", pdir, g->model,
                 pdir, g->model);
        if (system(cmd) != 0) fail_msg("%s: the pair does not compile warning-free: %s", wirings[wi], cmd);
      }
      bc_aot_opts ao = {.cache_dir = dir, .cflags = "-O1"};
      bc_aot *a;
      bc_aot_fn fwd;
      bool hit;
      const char *so;
      if (bcA_build(r->ctx, g, c, h, &ao, &a, &fwd, &hit, &so)) fail_msg("%s", r->e.buf);
      assert_non_null(bcA_backward(a));
      char *bsrc;
      int64_t bytes;
      assert_int_equal(bcG_emit(r->ctx, g, NULL, &bsrc, &bytes), BC_OK);
      char what[64];
      snprintf(what, sizeof what, "aot %s%s", wirings[wi], causal ? " causal" : "");
      double e = check(r, bcA_backward(a), bytes, what);
      printf("  %-28s worst rel err %.2e\n", what, e);
      if (e > worst) worst = e;
      bcA_free(a);
      run_free(r);
      free(text);
    }
  printf("  aot: worst rel err over %s %.2e (tol 1e-4)\n",
         quick ? "residual causal" : "every other wiring", worst);
  tu_rm_rf(dir);
}

static void test_aot_one_wiring(void **state) {
  (void)state;
  aot_wirings(true);
}

static void test_aot_every_wiring(void **state) {
  (void)state;
  aot_wirings(false);
}

// Misuse: NULL pointers, a misaligned workspace, run-time dims and lengths
// out of range are status codes with nothing crashing.
static void test_abi_misuse(void **state) {
  (void)state;
  char *text = wiring_text("residual", false);
  run *r = run_new(text, k_defs, 6);
  bc_emit_opts eo = {.backward = true};
  bc_compiled c;
  if (bcD_compile(r->ctx, r->g, &eo, &c)) fail_msg("%s", r->e.buf);
  bc_weights dw;
  assert_int_equal(bcW_init_random(r->ctx, r->g, 1, &dw), BC_OK);
  char *ws = aligned_alloc(64, (size_t)c.bwd_ws_bytes + 64);
  const float *const *w = (const float *const *)r->w.p;
  const float *const *dy = (const float *const *)r->dy;
  assert_int_equal(c.backward(NULL, r->io, r->rtp, dy, dw.p, NULL, ws), BC_RUN_EINVAL);
  assert_int_equal(c.backward(w, NULL, r->rtp, dy, dw.p, NULL, ws), BC_RUN_EINVAL);
  assert_int_equal(c.backward(w, r->io, NULL, dy, dw.p, NULL, ws), BC_RUN_EINVAL);
  assert_int_equal(c.backward(w, r->io, r->rtp, NULL, dw.p, NULL, ws), BC_RUN_EINVAL);
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, NULL, NULL, ws), BC_RUN_EINVAL);
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, dw.p, NULL, ws + 4), BC_RUN_EINVAL);
  float *keep = dw.p[0];
  dw.p[0] = NULL;
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, dw.p, NULL, ws), BC_RUN_EINVAL);
  dw.p[0] = keep;
  long bad[1] = {10};  // bound 9
  assert_int_equal(c.backward(w, r->io, bad, dy, dw.p, NULL, ws), BC_RUN_EDIM);
  bad[0] = 0;
  assert_int_equal(c.backward(w, r->io, bad, dy, dw.p, NULL, ws), BC_RUN_EDIM);
  r->lens[1] = 8;  // > T = 7
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, dw.p, NULL, ws), BC_RUN_ELEN);
  r->lens[1] = 0;
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, dw.p, NULL, ws), BC_RUN_ELEN);
  r->lens[1] = 5;
  assert_int_equal(c.backward(w, r->io, r->rtp, dy, dw.p, NULL, ws), BC_RUN_OK);
  free(ws);
  bcW_free(&dw);
  bcD_free(&c);
  run_free(r);
  free(text);
}

// A node the emitted backward does not cover: an error at its file:line:col.
// Every shipped graph is covered, and the parser refuses causal or rotary
// cross-attention, so the node is made here by flipping a parsed decoder's
// cross-attention to causal.
static void test_unsupported_node(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_define d[4] = {{"N", 1}, {"D", 8}, {"H", 2}, {"F", 8}};
  bc_graph *g = bcP_parse_file(ctx, "graphs/decoder_pre_ln.blk", d, 4);
  assert_non_null(g);
  assert_int_equal(bcG_check(ctx, g), BC_OK);
  bc_node *cross = NULL;
  for (int i = 0; i < g->nnodes && !cross; i++)
    if (g->nodes[i].op == BC_OP_ATTENTION && g->nodes[i].nin > 1 && g->nodes[i].in[1] >= 0)
      cross = &g->nodes[i];
  assert_non_null(cross);
  cross->causal = true;
  assert_int_equal(bcG_check(NULL, g), BC_EINPUT);
  assert_int_equal(e.len, 0);  // silent without a context
  // (bcG_emit runs this check first; the forward emitter, which runs before
  // it in bcD_compile, has its own guard for such a node.)
  assert_int_equal(bcG_check(ctx, g), BC_EINPUT);
  char want[64];
  snprintf(want, sizeof want, "graphs/decoder_pre_ln.blk:%d:%d: error", cross->loc.line,
           cross->loc.col);
  assert_non_null(strstr(e.buf, want));
  assert_non_null(strstr(e.buf, "causal or rotary cross-attention"));
  assert_non_null(strstr(e.buf, "--backend interp"));
  bc_ctx_free(ctx);
}

// Beyond the encoders: GPT-2's layout=in_out (packed c_attn read as (in,
// out)), separate q/k/v projections without biases, RMSNorm plain and fused
// (AddRMSNorm), a Linear head that changes the width, rank-2 [T, D] values,
// Mul with broadcasting, Positions (both kinds).
static void test_other_ops(void **state) {
  (void)state;
  static const char *const texts[] = {
      "model m\ndim T = 7\ndim D = 12\ninput x : [T, D]\n"
      "h = Attention(LayerNorm(x, params=ln1), heads=3, causal=true, qkv=c, o=p, layout=in_out)\n"
      "x = Add(x, h)\n"
      "z = RMSNorm(Add(x, FFN(x, hidden=20, act=gelu_tanh, up=u, down=d, layout=in_out)), "
      "params=n)\n"
      "y = Linear(z, out=5, params=head, layout=in_out)\noutput y\n",
      "model m\ndim B = 2\ndim T <= 9\ndim D = 12\ninput x : [B, T, D]\n"
      "a = Attention(RMSNorm(x, params=n1), heads=3, causal=false, q=q, k=k, v=v, o=o, bias=false)\n"
      "x = Add(x, a, alpha=0.5, beta=2)\n"
      "y = Linear(RMSNorm(x, params=n2), out=7, params=head)\noutput y\n",
      // Mul: broadcast operands (a graph input, a [T, D] temporary) in either
      // order, Mul(u, u), a same-shape product, in a layer loop.
      "model m\ndim B = 2\ndim T <= 9\ndim D = 12\ndim N = 4\ninput x : [B, T, D]\n"
      "input g : [T, D]\ns = Linear(g, out=D, params=gs)\nh = Linear(x, out=D, params=hx)\n"
      "u = Mul(s, h)\nv = Mul(u, u)\nz = Mul(Mul(v, g), x)\n"
      "for i in 0..N as layers.{i} {\n  z = Add(z, Mul(Linear(z, out=D, params=p), g))\n}\n"
      "y = Mul(g, LayerNorm(z, params=n))\noutput y\n",
      // Param ([1], [D]) read by Mul and by broadcasting Adds (either order,
      // alpha/beta: the small operand's gradient sums over the copies),
      // Act with every activation, in a layer loop.
    "model m\ndim B = 2\ndim T <= 7\ndim D = 6\ndim N = 3\ninput x : [B, T, D]\n"
    "for i in 0..N as layers.{i} {\n"
    "  a = Param(shape=[1], params=alpha)\n"
    "  g = Param(shape=[D], params=gamma, init=const(0.7))\n"
    "  x = Add(x, Mul(a, Act(Linear(x, out=D, params=l1), act=gelu)))\n"
    "  x = LayerNorm(Add(Mul(x, g), Act(Linear(x, out=D, params=l2), act=tanh)), params=n)\n"
    "  t = Act(Linear(x, out=D, params=gate), act=sigmoid)\n"
    "  x = Add(Mul(t, Act(x, act=silu)), x, beta=-1)\n"
    "  x = Add(Param(shape=[D], params=bias), Act(x, act=gelu_tanh), alpha=-0.75, beta=1.25)\n"
    "  x = Add(Act(x, act=relu), Param(shape=[1], params=c), beta=2)\n"
    "}\n"
    "y = Add(Linear(x, out=D, params=head), Param(shape=[D], params=b2))\noutput y\n",
      // fuse-scale: scaled Adds and AddLayerNorm / AddRMSNorm (the sum kept
      // and not), scales [1] and [D] on either operand.
    "model m\ndim B = 2\ndim T <= 7\ndim D = 6\ninput x : [B, T, D]\n"
    "for i in 0..3 as layers.{i} {\n"
    "  a = Param(shape=[1], params=alpha)\n"
    "  x = Add(x, Mul(a, Linear(x, out=D, params=l0)), alpha=0.5)\n"
    "  x = LayerNorm(Add(Mul(x, Param(shape=[D], params=omega)), Linear(x, out=D, params=l1)), params=n1)\n"
    "  h = RMSNorm(Add(x, Mul(Act(Linear(x, out=D, params=l2), act=silu), Param(shape=[D], params=g)), beta=-2), params=n2)\n"
    "  x = Add(Mul(Param(shape=[1], params=c), h), x)\n"
    "}\ny = LayerNorm(x, params=nf)\noutput y\n",
      // Positions: a learned table (read twice: its gradient sums both) and
      // the sinusoid at an odd D, on a graph input and in place on a
      // temporary; a run-time T whose bound exceeds max= (T = 7 here).
      "model m\ndim B = 2\ndim T <= 11\ndim D = 7\ninput x : [B, T, D]\n"
      "h = Positions(x, max=10, params=wpe)\n"
      "s = Positions(LayerNorm(h, params=n0), kind=sinusoidal)\n"
      "a = Attention(LayerNorm(s, params=n1), heads=1, causal=true, params=sa)\n"
      "y = Positions(Add(s, a), max=10, params=wpe)\noutput y\n",
      // Issue 23: QK-norm, windows, soft-caps, scale=, head scales, RMSNorm
      // offset= (fused too), Softcap, geglu_tanh.
      ATTN_OPTS_SELF, ATTN_OPTS_PACKED, NORM_OFFSET,
      // head_dim= independent of D/H (Qwen3, Gemma 2).
      HEAD_DIM_SELF, HEAD_DIM_CROSS,
  };
  for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
    run *r = run_new(texts[t], NULL, 0);
    bc_emit_opts eo = {.backward = true};
    bc_compiled c;
    if (bcD_compile(r->ctx, r->g, &eo, &c)) fail_msg("%s", r->e.buf);
    char what[32];
    snprintf(what, sizeof what, "other ops %zu", t);
    printf("  %-28s worst rel err %.2e\n", what, check(r, c.backward, c.bwd_ws_bytes, what));
    bcD_free(&c);
    run_free(r);
  }
}

static void api_sink(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  snprintf(e->buf, sizeof e->buf, "%s", msg);
}

// The embedding API: blockc_compile_backward / blockc_backward give the
// gradients bcR_grad gives (same weights, inputs, dy), and misuse is
// BLOCKC_EUSAGE with a message.
static void test_api(void **state) {
  (void)state;
  char *text = wiring_text("pre_ln", true);
  run *r = run_new(text, k_defs, 6);
  blockc_model *m = blockc_new();
  tu_errors e = {0};
  blockc_set_error_func(m, &e, api_sink);
  for (int i = 0; i < 6; i++) assert_int_equal(blockc_set_dim(m, k_defs[i].name, k_defs[i].value), 0);
  assert_int_equal(blockc_load_graph_string(m, "t.blk", text), 0);
  assert_int_equal(blockc_init_weights(m, 11), 0);  // the same init as run_new's before its fill
  assert_int_equal(blockc_num_params(m), r->g->nparams);
  float **dp = calloc((size_t)r->g->nparams, sizeof *dp);
  assert_non_null(dp);
  for (int p = 0; p < r->g->nparams; p++) {
    assert_string_equal(blockc_param_name(m, p), r->g->params[p].name);
    dp[p] = fbuf((int64_t)blockc_param_size(m, p));
  }
  long long dims[1] = {7};
  void *const *outs = r->io + r->g->ninputs;
  const void *const *ins = (const void *const *)r->io;
  assert_int_equal(blockc_backward_workspace_size(m), 0);
  assert_int_equal(blockc_backward(m, ins, outs, (const float *const *)r->dy, dp, NULL, dims,
                                   NULL, 0), BLOCKC_EUSAGE);
  assert_non_null(strstr(e.buf, "blockc_compile_backward"));
  assert_int_equal(blockc_compile_backward(m), 0);
  size_t n = blockc_backward_workspace_size(m);
  assert_true(n > 0 && n % 64 == 0);
  char *ws = aligned_alloc(64, n + 64);
  assert_non_null(ws);
  const float *const *dy = (const float *const *)r->dy;
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, NULL, dims, ws, n - 64), BLOCKC_EUSAGE);
  assert_non_null(strstr(e.buf, "blockc_backward_workspace_size"));
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, NULL, dims, ws + 8, n), BLOCKC_EUSAGE);
  assert_int_equal(blockc_backward(m, ins, outs, NULL, dp, NULL, dims, ws, n), BLOCKC_EUSAGE);
  float *keep = dp[3];
  dp[3] = NULL;
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, NULL, dims, ws, n), BLOCKC_EUSAGE);
  assert_non_null(strstr(e.buf, "dparams[3]"));
  dp[3] = keep;
  long long bad[1] = {10};
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, NULL, bad, ws, n), BLOCKC_EINPUT);
  r->lens[0] = 9;
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, NULL, dims, ws, n), BLOCKC_EINPUT);
  r->lens[0] = 7;
  // The API's weights are bcW_init_random's; the reference with those.
  bc_weights dref;
  bcW_free(&r->w);
  assert_int_equal(bcW_init_random(r->ctx, r->g, 11, &r->w), BC_OK);
  assert_int_equal(bcR_grad(r->ctx, r->g, &r->w, r->io, r->rtp, dy, &dref, NULL), BC_OK);
  assert_int_equal(blockc_backward(m, ins, outs, dy, dp, r->dx, dims, ws, n), BLOCKC_OK);
  for (int p = 0; p < r->g->nparams; p++) {
    double err = rel_err(dp[p], dref.p[p], (int64_t)blockc_param_size(m, p));
    if (!(err <= 1e-4)) fail_msg("api: d %s: rel err %.3g", r->g->params[p].name, err);
  }
  for (int p = 0; p < r->g->nparams; p++) free(dp[p]);
  free(dp);
  free(ws);
  bcW_free(&dref);
  blockc_delete(m);
  run_free(r);
  free(text);
}

// Reads every tensor of a safetensors file written by `blockc grad` into
// one array per graph parameter.
static void read_grads(bc_ctx *ctx, const bc_graph *g, const char *path, float **out) {
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  assert_int_equal(f->ntensors, g->nparams);
  for (int p = 0; p < g->nparams; p++) {
    const bc_st_tensor *t = bcS_find(f, g->params[p].name);
    assert_non_null(t);
    out[p] = fbuf(bc_shape_numel(&g->params[p].shape));
    assert_int_equal(bcS_read_f32(ctx, f, t, out[p]), BC_OK);
  }
  bcS_close(f);
}

// `blockc grad --backend jit|aot|interp` on the same seeded weights, input
// and dy: jit (make test) and aot (make check: a cc -O3 build) agree with
// interp; jit is the default.
static void cli_backends(const char *other) {
  const char *const be[] = {"interp", other};
  char out[2][256], cache[256], so[4096], se[4096];
  tu_mktmpdir(cache, sizeof cache, "grademit");
  setenv("BLOCKC_CACHE_DIR", cache, 1);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_define d[4] = {{"N", 2}, {"D", 12}, {"H", 3}, {"F", 20}};
  bc_graph *g = bcP_parse_file(ctx, "graphs/residual.blk", d, 4);
  assert_non_null(g);
  float **gr[2];
  for (int b = 0; b < 2; b++) {
    tu_tmp_path(out[b], sizeof out[b], ".safetensors");
    char *argv[] = {(char *)tu_blockc(), "grad", "graphs/residual.blk", "-D", "N=2", "-D", "D=12",
                    "-D", "H=3", "-D", "F=20", "--seed", "4", "--backend", (char *)be[b], "-o",
                    out[b], NULL};
    int rc = tu_spawn(argv, so, sizeof so, se, sizeof se);
    if (rc) fail_msg("grad --backend %s: exit %d: %s", be[b], rc, se);
    char want[64];
    snprintf(want, sizeof want, "backend %s", be[b]);
    assert_non_null(strstr(so, want));
    gr[b] = calloc((size_t)g->nparams, sizeof(float *));
    read_grads(ctx, g, out[b], gr[b]);
  }
  for (int b = 1; b < 2; b++)
    for (int p = 0; p < g->nparams; p++) {
      double err = rel_err(gr[b][p], gr[0][p], bc_shape_numel(&g->params[p].shape));
      if (!(err <= 1e-4)) fail_msg("%s: d %s: rel err %.3g", be[b], g->params[p].name, err);
    }
  for (int b = 0; b < 2; b++) {
    for (int p = 0; p < g->nparams; p++) free(gr[b][p]);
    free(gr[b]);
    remove(out[b]);
  }
  // LLaMA (RMSNorm, grouped-query attention, RoPE, SwiGLU) on the default backend: jit.
  char *fb[] = {(char *)tu_blockc(), "grad", "graphs/llama.blk", "-D", "N=1", "-D", "D=16", "-D",
                "H=2", "-D", "KV=1", "-D", "F=24", "-D", "T=4", "-o", out[0], NULL};
  assert_int_equal(tu_spawn(fb, so, sizeof so, se, sizeof se), 0);
  assert_non_null(strstr(so, "backend jit"));
  remove(out[0]);
  bc_ctx_free(ctx);
  tu_rm_rf(cache);
}

static void test_cli_backends(void **state) {
  (void)state;
  cli_backends("jit");
}

static void test_cli_backend_aot(void **state) {
  (void)state;
  cli_backends("aot");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jit_every_wiring),
      cmocka_unit_test(test_aot_one_wiring),
      cmocka_unit_test(test_jit_every_graph),
      cmocka_unit_test(test_layer_loop_every_graph),
      cmocka_unit_test(test_other_ops),
      cmocka_unit_test(test_abi_misuse),
      cmocka_unit_test(test_api),
      cmocka_unit_test(test_cli_backends),
      cmocka_unit_test(test_unsupported_node),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_aot_every_wiring),
      cmocka_unit_test(test_cli_backend_aot),
  };
  return tu_run_tiers(tests, long_tests);
}
