// test_grad.c — the reference backward (grad.c) against central finite
// differences of its own double forward, on small graphs covering every op
// and option: Add (alpha/beta), LayerNorm (affine or not), Attention (causal
// or not, several heads, cross-attention with kv=, padding lengths), FFN
// with each activation, Linear, Mul (broadcast), Positions (learned and
// sinusoidal), and the fused AddLayerNorm /
// DualAddLayerNorm the passes produce.
//
// Finite differences: the loss L = sum(y * dy) is evaluated by the tape's
// double forward, so its rounding noise is ~1e-16 |L|.  Each parameter (and
// input) element w is moved to the float values w+ = fl(w + h), w- = fl(w - h)
// and the derivative is (L(w+) - L(w-)) / (w+ - w-), dividing by the step
// actually taken.  With h = 2e-4 the truncation error h^2 |L'''| / 6 is
// <= 2.5e-6 here (measured; it was 25x larger at h = 1e-3, as h^2 predicts);
// the analytic gradient is returned as float (relative error 6e-8).  So the
// tolerance, on max |fd - g| over every element of a graph, is
// 5e-6 * max(1, max |g|) (max |g| ~ 6-9 here): >= 14x the errors measured
// (printed by each test), while a wrong term in any backward formula moves
// some element by O(|g|).
// ReLU's kink is avoided by the seeds (a pre-activation within h of 0 would
// break a finite difference, not the gradient); the relu case is checked
// with a smaller step.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "attn_graphs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct gcase {
  tu_errors e;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  void **io;          // inputs then outputs
  float **dy;         // per output
  long rt[8];
  const long *rtp;
} gcase;

static void fill_weights(gcase *c, uint64_t seed) { tu_grad_weights(c->ctx, c->g, seed, &c->w); }

// Parses text, fills weights, random float inputs (lengths from `lens`,
// one array per lengths input in order), outputs and dy.
static gcase *case_new(const char *text, const long *rt, int32_t *const *lens, uint64_t seed) {
  gcase *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->ctx = tu_ctx(&c->e);
  c->g = tu_parse(c->ctx, text);
  if (!c->g) fail_msg("parse: %s", c->e.buf);
  if (rt) {
    memcpy(c->rt, rt, (size_t)c->g->nrt * sizeof *rt);
    c->rtp = c->rt;
  }
  fill_weights(c, seed);
  bc_rng r;
  bc_rng_seed(&r, seed * 7 + 1);
  int n = c->g->ninputs + c->g->noutputs, nl = 0;
  c->io = calloc((size_t)n, sizeof *c->io);
  c->dy = calloc((size_t)c->g->noutputs, sizeof *c->dy);
  for (int i = 0; i < n; i++) {
    int v = i < c->g->ninputs ? c->g->inputs[i] : c->g->outputs[i - c->g->ninputs];
    if (c->g->vals[v].type == BC_VT_I32) {
      c->io[i] = lens[nl++];
      continue;
    }
    bc_shape s = bcI_shape_at(c->g, &c->g->vals[v].shape, c->rtp);
    int64_t ne = bc_shape_numel(&s);
    float *a = malloc((size_t)ne * sizeof *a);
    assert_non_null(a);
    for (int64_t k = 0; k < ne; k++) a[k] = i < c->g->ninputs ? (float)bc_rng_normal(&r) : 0.0f;
    c->io[i] = a;
    if (i >= c->g->ninputs) {
      float *d = malloc((size_t)ne * sizeof *d);
      assert_non_null(d);
      for (int64_t k = 0; k < ne; k++) d[k] = (float)bc_rng_normal(&r);
      c->dy[i - c->g->ninputs] = d;
    }
  }
  return c;
}

static void case_free(gcase *c) {
  for (int i = 0; i < c->g->ninputs + c->g->noutputs; i++) {
    int v = i < c->g->ninputs ? c->g->inputs[i] : c->g->outputs[i - c->g->ninputs];
    if (c->g->vals[v].type == BC_VT_F32) free(c->io[i]);
  }
  for (int i = 0; i < c->g->noutputs; i++) free(c->dy[i]);
  free(c->io);
  free(c->dy);
  bcW_free(&c->w);
  bc_ctx_free(c->ctx);
  free(c);
}

// sum over outputs of sum(y * dy), from the tape's double values.
static double loss64(gcase *c) {
  bc_tape *t;
  int st = bcR_tape_forward(c->ctx, c->g, &c->w, c->io, c->rtp, &t);
  if (st) fail_msg("tape forward: %s", c->e.buf);
  double L = 0;
  for (int i = 0; i < c->g->noutputs; i++) {
    bc_shape s;
    const double *y = bcR_tape_value(t, c->g->outputs[i], &s);
    assert_non_null(y);
    for (int64_t k = 0, n = bc_shape_numel(&s); k < n; k++) L += y[k] * c->dy[i][k];
  }
  bcR_tape_free(t);
  return L;
}

// Central difference of the loss in float element *p.
static double fd(gcase *c, float *p, double h) {
  float w0 = *p, wp = (float)(w0 + h), wm = (float)(w0 - h);
  *p = wp;
  double lp = loss64(c);
  *p = wm;
  double lm = loss64(c);
  *p = w0;
  return (lp - lm) / ((double)wp - (double)wm);
}

typedef struct fdres { double err, gmax; int64_t n; } fdres;

static void fd_cmp(fdres *r, double num, double g) {
  double e = fabs(num - g);
  if (!(e <= r->err)) r->err = e;  // NaN sticks
  if (fabs(g) > r->gmax) r->gmax = fabs(g);
  r->n++;
}

// Every parameter and float-input element against finite differences;
// prints the worst error and asserts it is within tol * max(1, max |g|).
static void fd_check(gcase *c, double h, double tol, const char *what) {
  bc_weights dw;
  int nin = c->g->ninputs;
  float **dx = calloc((size_t)nin, sizeof *dx);
  assert_non_null(dx);
  for (int i = 0; i < nin; i++) {
    int v = c->g->inputs[i];
    if (c->g->vals[v].type != BC_VT_F32) continue;
    bc_shape s = bcI_shape_at(c->g, &c->g->vals[v].shape, c->rtp);
    dx[i] = calloc((size_t)bc_shape_numel(&s), sizeof(float));
  }
  int st = bcR_grad(c->ctx, c->g, &c->w, c->io, c->rtp, (const float *const *)c->dy, &dw, dx);
  if (st) fail_msg("bcR_grad: %s", c->e.buf);
  fdres r = {0};
  for (int p = 0; p < c->g->nparams; p++)
    for (int64_t k = 0, n = bc_shape_numel(&c->g->params[p].shape); k < n; k++)
      fd_cmp(&r, fd(c, &c->w.p[p][k], h), dw.p[p][k]);
  for (int i = 0; i < nin; i++) {
    if (!dx[i]) continue;
    bc_shape s = bcI_shape_at(c->g, &c->g->vals[c->g->inputs[i]].shape, c->rtp);
    for (int64_t k = 0, n = bc_shape_numel(&s); k < n; k++)
      fd_cmp(&r, fd(c, (float *)c->io[i] + k, h), dx[i][k]);
  }
  print_message("%-28s %5lld elements: max |fd - grad| = %.2e, max |grad| = %.3g\n", what,
                (long long)r.n, r.err, r.gmax);
  assert_true(r.gmax > 1e-2);  // the loss really depends on the parameters
  assert_true(r.err <= tol * fmax(1.0, r.gmax));
  for (int i = 0; i < nin; i++) free(dx[i]);
  free(dx);
  bcW_free(&dw);
}

#define TOL 5e-6
#define H 2e-4

static const char *post_ln =
    "model m\ndim B = 2\ndim T = 3\ndim D = 4\ndim H = 2\ndim F = 6\ninput x : [B, T, D]\n"
    "for i in 0..2 as layers.{i} {\n"
    "  x = LayerNorm(Add(x, Attention(x, heads=H, causal=false, params=self_attn)), params=norm1)\n"
    "  x = LayerNorm(Add(x, FFN(x, hidden=F, act=gelu, params=(linear1, linear2))), params=norm2)\n"
    "}\noutput x\n";

static const char *pre_ln_causal =
    "model m\ndim B = 2\ndim T = 3\ndim D = 6\ndim H = 3\ndim F = 5\ninput x : [B, T, D]\n"
    "for i in 0..2 as layers.{i} {\n"
    "  x = Add(x, Attention(LayerNorm(x, params=norm1), heads=H, causal=true, params=self_attn))\n"
    "  x = Add(x, FFN(LayerNorm(x, params=norm2), hidden=F, act=gelu_tanh, params=(linear1, linear2)))\n"
    "}\ny = LayerNorm(x, params=norm)\noutput y\n";

static const char *residual =
    "model m\ndim B = 1\ndim T = 4\ndim D = 4\ndim H = 2\ndim F = 6\ninput x : [B, T, D]\n"
    "xa = x\nxd = x\n"
    "for i in 0..2 as layers.{i} {\n"
    "  a = Attention(xa, heads=H, causal=true, params=self_attn)\n"
    "  xd = Add(xd, a)\n  xa = LayerNorm(Add(xa, a), params=norm1)\n"
    "  f = FFN(xa, hidden=F, act=gelu, params=(linear1, linear2))\n"
    "  xd = Add(xd, f)\n  xa = LayerNorm(Add(xa, f), params=norm2)\n"
    "}\ny = Add(xa, LayerNorm(xd, eps=1e-7, params=norm))\noutput y\n";

static const char *llama =
      "model m\ndim B = 2\ndim T = 4\ndim D = 8\ninput x : [B, T, D]\n"
      "for i in 0..2 as layers.{i} {\n"
      "  a = Attention(RMSNorm(x, params=n1), heads=4, kv_heads=2, causal=true, rope=true, "
      "q=q, k=k, v=v, o=o, bias=false)\n"
      "  x = Add(x, a)\n"
      "  x = Add(x, FFN(RMSNorm(x, params=n2), hidden=6, act=swiglu, gate=g, up=u, down=d, "
      "bias=false))\n"
      "}\ny = RMSNorm(x, params=nf)\noutput y\n";

static const char *gpt2 =
      "model m\ndim T = 5\ndim D = 6\ninput x : [T, D]\n"
      "h = Attention(LayerNorm(x, params=ln1), heads=2, causal=true, qkv=c, o=p, layout=in_out)\n"
      "x = Add(x, h)\n"
      "z = RMSNorm(Add(x, FFN(x, hidden=7, act=geglu, gate=g, up=u, down=d, layout=in_out)), "
      "params=n)\n"
      "y = Linear(z, out=3, params=head, layout=in_out)\noutput y\n";

// Issue 23: QK-norm (RMS per head, LayerNorm over the projection, on self-
// and cross-attention), sliding windows, soft-caps, scale=, head scales,
// RMSNorm offset= (plain and fused), Softcap, geglu_tanh.
static void test_attention_options(void **state) {
  (void)state;
  int32_t len[2] = {5, 3};
  int32_t *lens[1] = {len};
  long rt[1] = {5};
  gcase *c = case_new(ATTN_OPTS_SELF, rt, lens, 21);
  fd_check(c, H, TOL, "qk_norm rms/window/softcap");
  case_free(c);
  c = case_new(ATTN_OPTS_PACKED, NULL, NULL, 22);
  fd_check(c, H, TOL, "qk_norm ln/cross/head_scale");
  case_free(c);
  c = case_new(HEAD_DIM_SELF, rt, lens, 24);
  fd_check(c, H, TOL, "head_dim > D/H, GQA, rope, qk_norm");
  case_free(c);
  c = case_new(HEAD_DIM_CROSS, NULL, NULL, 25);
  fd_check(c, H, TOL, "head_dim < D/H, cross, full-width qk_norm");
  case_free(c);
  c = case_new(NORM_OFFSET, NULL, NULL, 23);
  fd_check(c, H, TOL, "rms offset/softcap/geglu_tanh");
  assert_int_equal(bcO_run_until(c->g, NULL), BC_OK);  // fused: AddLayerNorm with offset
  fd_check(c, H, TOL, "the same after the passes");
  case_free(c);
}

static void test_post_ln(void **state) {
  (void)state;
  gcase *c = case_new(post_ln, NULL, NULL, 1);
  fd_check(c, H, TOL, "post_ln gelu");
  case_free(c);
}

static void test_pre_ln_causal(void **state) {
  (void)state;
  gcase *c = case_new(pre_ln_causal, NULL, NULL, 2);
  fd_check(c, H, TOL, "pre_ln causal gelu_tanh");
  case_free(c);
}

static void test_residual(void **state) {
  (void)state;
  gcase *c = case_new(residual, NULL, NULL, 3);
  fd_check(c, H, TOL, "residual causal");
  case_free(c);
}

// relu, Linear (changes the width), LayerNorm without affine, Add with
// alpha/beta, a second output and an output that is also read downstream.
static void test_relu_linear_misc(void **state) {
  (void)state;
  const char *src =
      "model m\ndim T = 3\ndim D = 4\ninput x : [T, D]\n"
      "f = FFN(x, hidden=5, act=relu, params=(l1, l2))\n"
      "z = Add(x, f, alpha=0.7, beta=-1.3)\n"
      "n = LayerNorm(z, affine=false)\n"
      "y = Linear(n, out=3, params=proj)\n"
      "output y\noutput z\n";
  gcase *c = case_new(src, NULL, NULL, 4);
  fd_check(c, 1e-4, TOL, "relu/linear/no-affine/2 outs");
  case_free(c);
}

// Mul: the broadcast operand's gradient sums over the batch axis (g, and
// the [T, D] temporary s), in either argument order; Mul(u, u) counts u
// twice; a same-shape product; a run-time T.
static void test_mul(void **state) {
  (void)state;
  const char *src =
      "model m\ndim B = 2\ndim T <= 4\ndim D = 3\ninput x : [B, T, D]\ninput g : [T, D]\n"
      "s = Linear(g, out=D, params=gs)\nh = Linear(x, out=D, params=hx)\n"
      "u = Mul(s, h)\nv = Mul(u, u)\nw = Mul(v, g)\n"
      "y = Add(Mul(w, x), Mul(g, LayerNorm(w, params=n)))\noutput y\n";
  long rt[1] = {3};
  gcase *c = case_new(src, rt, NULL, 6);
  fd_check(c, H, TOL, "mul broadcast");
  case_free(c);
}

// Param ([1], [D], [T, D]), Add broadcasting each (either order, with
// alpha/beta: the small operand's gradient sums over the broadcast axes and
// takes its coefficient), Mul by a Param, and Act with every activation, in
// a layer loop (ReZero, LayerScale, Admin and a highway gate's wirings).
static void test_param_act_broadcast(void **state) {
  (void)state;
  const char *src =
      "model m\ndim B = 2\ndim T = 3\ndim D = 4\ninput x : [B, T, D]\n"
      "for i in 0..2 as layers.{i} {\n"
      "  a = Param(shape=[1], params=alpha)\n"
      "  g = Param(shape=[D], params=gamma)\n"
      "  x = Add(x, Mul(a, Act(Linear(x, out=D, params=l1), act=gelu)))\n"
      "  x = LayerNorm(Add(Mul(x, g), Act(Linear(x, out=D, params=l2), act=tanh)), params=n)\n"
      "  t = Act(Linear(x, out=D, params=gate), act=sigmoid)\n"
      "  x = Add(Mul(t, Act(x, act=silu)), Add(Param(shape=[T, D], params=pe), x, alpha=0.5), beta=-1.5)\n"
      "  x = Add(Param(shape=[D], params=bias), Act(x, act=gelu_tanh), alpha=-0.75, beta=1.25)\n"
      "  x = Add(Act(x, act=relu), Param(shape=[1], params=c), beta=2)\n"
      "}\noutput x\n";
  gcase *c = case_new(src, NULL, NULL, 11);
  fd_check(c, H, TOL, "param/act/broadcast add");
  case_free(c);
}

// Positions: a learned table (its row t gathers dy[b, t] over the batch;
// rows past T get no gradient) and the sinusoid (dx = dy), at an odd D,
// a run-time T below both max= and its bound, with attention after them so
// the loss is not linear in x.
static void test_positions(void **state) {
  (void)state;
  const char *src =
      "model m\ndim B = 2\ndim T <= 6\ndim D = 5\ninput x : [B, T, D]\n"
      "h = Positions(x, max=5, params=wpe)\n"
      "s = Positions(LayerNorm(h, params=n0), kind=sinusoidal)\n"
      "y = Add(s, Attention(LayerNorm(s, params=n1), heads=1, causal=true, params=sa))\n"
      "output y\n";
  long rt[1] = {4};
  gcase *c = case_new(src, rt, NULL, 9);
  fd_check(c, H, TOL, "positions learned+sinusoid");
  bc_weights dw;
  if (bcR_grad(c->ctx, c->g, &c->w, c->io, c->rtp, (const float *const *)c->dy, &dw, NULL))
    fail_msg("%s", c->e.buf);
  int p = bcI_find_param(c->g, "wpe.weight");
  assert_true(p >= 0);
  for (int k = 4 * 5; k < 5 * 5; k++) assert_true(dw.p[p][k] == 0.0f);  // position 4: unused
  bcW_free(&dw);
  case_free(c);
}

// Cross-attention with kv=, padding lengths on both sides and run-time dims.
static void test_cross_attention_lengths(void **state) {
  (void)state;
  const char *src =
      "model m\ndim B = 2\ndim T <= 4\ndim S <= 5\ndim D = 4\n"
      "input x : [B, T, D]\ninput mem : [B, S, D]\ninput len : lengths[B]\n"
      "input mlen : lengths[B]\n"
      "a = Attention(x, heads=2, causal=true, lengths=len, params=sa)\n"
      "c = Attention(LayerNorm(a, params=n1), kv=mem, heads=2, lengths=len, kv_lengths=mlen, "
      "params=ca)\n"
      "y = Add(c, x)\noutput y\n";
  int32_t len[2] = {2, 3}, mlen[2] = {4, 1};
  int32_t *lens[2] = {len, mlen};
  long rt[2] = {3, 4};
  gcase *c = case_new(src, rt, lens, 5);
  fd_check(c, H, TOL, "cross-attn + lengths");
  case_free(c);
}

// Gradients of the parsed graph and of the same graph after every pass
// (AddLayerNorm, DualAddLayerNorm, in-place marks) agree to float rounding.
static void check_fused_same(const char *src, const char *what, int want_fused_op) {
  gcase *a = case_new(src, NULL, NULL, 9);
  gcase *b = case_new(src, NULL, NULL, 9);
  assert_int_equal(bcO_run_until(b->g, NULL), BC_OK);
  int fused = 0;
  for (int i = 0; i < b->g->nnodes; i++) fused += (int)b->g->nodes[i].op == want_fused_op;
  assert_true(fused > 0);
  bc_weights da, db;
  float *dxa = calloc(64, sizeof(float)), *dxb = calloc(64, sizeof(float));
  assert_int_equal(bcR_grad(a->ctx, a->g, &a->w, a->io, NULL, (const float *const *)a->dy, &da,
                            &dxa), BC_OK);
  assert_int_equal(bcR_grad(b->ctx, b->g, &b->w, b->io, NULL, (const float *const *)b->dy, &db,
                            &dxb), BC_OK);
  assert_int_equal(a->g->nparams, b->g->nparams);
  double err = 0, gmax = 0;
  for (int p = 0; p < a->g->nparams; p++) {
    int q = bcI_find_param(b->g, a->g->params[p].name);
    assert_true(q >= 0);
    for (int64_t k = 0, n = bc_shape_numel(&a->g->params[p].shape); k < n; k++) {
      err = fmax(err, fabs((double)da.p[p][k] - db.p[q][k]));
      gmax = fmax(gmax, fabs((double)da.p[p][k]));
    }
  }
  for (int k = 0; k < 4 * 4; k++) err = fmax(err, fabs((double)dxa[k] - dxb[k]));
  print_message("%-28s %d fused nodes: max |unfused - fused| = %.2e (max |g| %.3g)\n", what,
                fused, err, gmax);
  assert_true(err <= 1e-6 * fmax(1.0, gmax));
  free(dxa);
  free(dxb);
  bcW_free(&da);
  bcW_free(&db);
  case_free(a);
  case_free(b);
}

static void test_fused_add_ln(void **state) {
  (void)state;
  check_fused_same(post_ln, "post_ln fused", BC_OP_ADD_LN);
}

static void test_fused_dual(void **state) {
  (void)state;
  check_fused_same(residual, "residual fused", BC_OP_DUAL_ADD_LN);
}

// fuse-scale's and fuse-act's Add and AddLayerNorm (ReZero, LayerScale,
// Admin wirings, activated branches): the same gradients as the unfused
// graph, and finite differences.
static const char *scaled =
    "model m\ndim B = 2\ndim T = 3\ndim D = 4\ninput x : [B, T, D]\n"
    "for i in 0..2 as layers.{i} {\n"
    "  a = Param(shape=[1], params=alpha)\n"
    "  x = Add(x, Mul(a, Act(Linear(x, out=D, params=l0), act=gelu_tanh)), alpha=0.5)\n"
    "  x = LayerNorm(Add(Mul(x, Param(shape=[D], params=omega)), Linear(x, out=D, params=l1)), params=n1)\n"
    "  x = Add(x, Mul(Act(Linear(RMSNorm(x, params=n2), out=D, params=l2), act=silu), Param(shape=[D], params=g)), beta=-2)\n"
    "  x = LayerNorm(Add(Act(Linear(x, out=D, params=l3), act=tanh), x), params=n3)\n"
    "}\ny = LayerNorm(x, params=nf)\noutput y\n";

static void test_fused_scale(void **state) {
  (void)state;
  check_fused_same(scaled, "scaled fused", BC_OP_ADD_LN);
  gcase *c = case_new(scaled, NULL, NULL, 8);
  assert_int_equal(bcO_run_until(c->g, NULL), BC_OK);
  int n4 = 0, acts = 0;
  for (int i = 0; i < c->g->nnodes; i++) {
    n4 += c->g->nodes[i].nin == 4;
    acts += c->g->nodes[i].op == BC_OP_ACT;
  }
  assert_int_equal(n4, 6);    // every Mul folded (fuse-scale)
  assert_int_equal(acts, 0);  // and every Act (fuse-act)
  fd_check(c, H, TOL, "scaled after passes");
  case_free(c);
}

// The fused ops against finite differences too (not only against the
// unfused graph, which shares the per-op formulas).
static void test_fused_fd(void **state) {
  (void)state;
  gcase *c = case_new(residual, NULL, NULL, 6);
  assert_int_equal(bcO_run_until(c->g, NULL), BC_OK);
  fd_check(c, H, TOL, "residual after passes");
  case_free(c);
}

// The tape's forward is the interpreter's: outputs agree to float rounding.
static void test_forward_matches_interp(void **state) {
  (void)state;
  const char *srcs[] = {post_ln, pre_ln_causal, residual, llama, gpt2};
  for (int s = 0; s < 5; s++) {
    gcase *c = case_new(srcs[s], NULL, NULL, 11);
    bc_shape sh = bcI_shape_at(c->g, &c->g->vals[c->g->output].shape, NULL);
    int64_t n = bc_shape_numel(&sh);
    float *y1 = malloc((size_t)n * sizeof *y1);
    assert_int_equal(bcR_run_io(c->ctx, c->g, &c->w, c->io, NULL), BC_OK);
    memcpy(y1, c->io[c->g->ninputs], (size_t)n * sizeof *y1);
    bc_tape *t;
    assert_int_equal(bcR_tape_forward(c->ctx, c->g, &c->w, c->io, NULL, &t), BC_OK);
    double err = tu_max_abs_diff(y1, c->io[c->g->ninputs], (size_t)n);
    print_message("tape forward vs bcR_run_io: max abs diff %.2e\n", err);
    assert_true(err <= 1e-5);
    bcR_tape_free(t);
    free(y1);
    case_free(c);
  }
}

// Without dy for an output, that output is not in the loss: the gradient of
// a graph whose only output has no dy is zero everywhere.
static void test_null_dy_is_zero(void **state) {
  (void)state;
  gcase *c = case_new(post_ln, NULL, NULL, 12);
  const float *dy[1] = {NULL};
  bc_weights dw;
  assert_int_equal(bcR_grad(c->ctx, c->g, &c->w, c->io, NULL, dy, &dw, NULL), BC_OK);
  for (int p = 0; p < dw.n; p++)
    for (int64_t k = 0, n = bc_shape_numel(&c->g->params[p].shape); k < n; k++)
      assert_true(dw.p[p][k] == 0.0f);
  bcW_free(&dw);
  case_free(c);
}

// A bad run-time value is reported, not computed.
static void test_bad_lengths_reported(void **state) {
  (void)state;
  const char *src = "model m\ndim B = 1\ndim T = 3\ndim D = 4\ninput x : [B, T, D]\n"
                    "input len : lengths[B]\n"
                    "y = Attention(x, heads=2, lengths=len, params=sa)\noutput y\n";
  int32_t len[1] = {1};
  int32_t *lens[1] = {len};
  gcase *c = case_new(src, NULL, lens, 13);
  len[0] = 9;
  bc_weights dw;
  assert_int_equal(bcR_grad(c->ctx, c->g, &c->w, c->io, NULL, (const float *const *)c->dy, &dw,
                            NULL), BC_EINPUT);
  assert_non_null(strstr(c->e.buf, "outside 1..3"));
  case_free(c);
}


// Issue 10's nodes: RMSNorm (plain and fused into AddLayerNorm with rms),
// gated FFNs (swiglu, geglu), separate q/k/v with grouped-query heads and
// rotary positions, packed qkv= and FFN matrices stored (in, out), bias=false.
static void test_llama_style(void **state) {
  (void)state;
  const char *src = llama;
  gcase *c = case_new(src, NULL, NULL, 31);
  fd_check(c, H, TOL, "rms/gqa/rope/swiglu");
  case_free(c);
}

static void test_gpt2_style(void **state) {
  (void)state;
  const char *src = gpt2;
  gcase *c = case_new(src, NULL, NULL, 32);
  fd_check(c, H, TOL, "in_out/packed/geglu/rms");
  case_free(c);
  gcase *f = case_new(src, NULL, NULL, 33);
  assert_int_equal(bcO_run_until(f->g, NULL), BC_OK);
  int fused = 0;
  for (int i = 0; i < f->g->nnodes; i++) fused += f->g->nodes[i].op == BC_OP_ADD_LN && f->g->nodes[i].rms;
  assert_int_equal(fused, 1);
  fd_check(f, H, TOL, "... after passes (rms fused)");
  case_free(f);
}

// ---------------------------------------------------------------------------
// The commands: blockc grad and blockc analyze, run as a user would.
// ---------------------------------------------------------------------------

typedef struct {
  int status;
  char out[1 << 16];
  char err[1 << 14];
} run_result;

static void run_blockc(run_result *r, const char *const *args) {
  const char *argv[48];
  int n = 0;
  argv[n++] = tu_blockc();
  for (int i = 0; args[i] && n < 47; i++) argv[n++] = args[i];
  argv[n] = NULL;
  r->status = tu_spawn((char *const *)argv, r->out, sizeof r->out, r->err, sizeof r->err);
}

#define RUN(r, ...)                            \
  do {                                         \
    const char *a_[] = {__VA_ARGS__, NULL};    \
    run_blockc(r, a_);                         \
  } while (0)

static void expect_run(const run_result *r, int status, const char *in_out, const char *in_err) {
  if (r->status != status || (in_out && !strstr(r->out, in_out)) ||
      (in_err && !strstr(r->err, in_err))) {
    print_error("status %d (want %d)\nstdout: %s\nstderr: %s\n", r->status, status, r->out, r->err);
    fail();
  }
}

static run_result RR;

// `blockc grad` with weights, input and dy from files writes exactly what
// bcR_grad computes in process: every parameter under its own name, and dx.
static void test_cli_grad_matches_api(void **state) {
  (void)state;
  gcase *c = case_new(post_ln, NULL, NULL, 21);
  char gp[256], wp[256], xp[256], dyp[256], op[256], dxp[256];
  tu_tmp_path(gp, sizeof gp, ".blk");
  tu_tmp_path(wp, sizeof wp, ".safetensors");
  tu_tmp_path(xp, sizeof xp, ".npy");
  tu_tmp_path(dyp, sizeof dyp, ".npy");
  tu_tmp_path(op, sizeof op, ".safetensors");
  tu_tmp_path(dxp, sizeof dxp, ".npy");
  tu_write_bytes(gp, post_ln, strlen(post_ln));
  const char **names = calloc((size_t)c->g->nparams, sizeof *names);
  bc_shape *shapes = calloc((size_t)c->g->nparams, sizeof *shapes);
  for (int p = 0; p < c->g->nparams; p++) {
    names[p] = c->g->params[p].name;
    shapes[p] = c->g->params[p].shape;
  }
  assert_int_equal(bcS_write(c->ctx, wp, c->g->nparams, names, shapes,
                             (const float *const *)c->w.p), BC_OK);
  bc_shape xs = c->g->vals[c->g->input].shape;
  assert_int_equal(bcN_write(c->ctx, xp, &xs, c->io[0]), BC_OK);
  assert_int_equal(bcN_write(c->ctx, dyp, &xs, c->dy[0]), BC_OK);
  RUN(&RR, "grad", gp, "--backend", "interp", "--weights", wp, "--input", xp, "--dy", dyp, "-o", op,
      "--dx", dxp);
  expect_run(&RR, 0, "24 parameter gradients", NULL);
  bc_weights dw;
  float dx[24];
  float *dxv[1] = {dx};
  assert_int_equal(bcR_grad(c->ctx, c->g, &c->w, c->io, NULL, (const float *const *)c->dy, &dw,
                            dxv), BC_OK);
  bc_st_file *f;
  assert_int_equal(bcS_open(c->ctx, op, &f), BC_OK);
  assert_int_equal(f->ntensors, c->g->nparams);
  for (int p = 0; p < c->g->nparams; p++) {
    const bc_st_tensor *t = bcS_find(f, names[p]);
    assert_non_null(t);
    int64_t n = bc_shape_numel(&shapes[p]);
    float *got = malloc((size_t)n * sizeof *got);
    assert_int_equal(bcS_read_f32(c->ctx, f, t, got), BC_OK);
    assert_true(tu_max_abs_diff(got, dw.p[p], (size_t)n) == 0.0);
    free(got);
  }
  bcS_close(f);
  bc_shape ds;
  float *dxf;
  assert_int_equal(bcN_read(c->ctx, dxp, &ds, &dxf), BC_OK);
  assert_true(bc_shape_eq(&ds, &xs));
  assert_true(tu_max_abs_diff(dxf, dx, 24) == 0.0);
  free(dxf);
  bcW_free(&dw);
  free(names);
  free(shapes);
  remove(gp); remove(wp); remove(xp); remove(dyp); remove(op); remove(dxp);
  case_free(c);
}

static void test_cli_grad_errors(void **state) {
  (void)state;
  char op[256], dyp[256];
  tu_tmp_path(op, sizeof op, ".safetensors");
  tu_tmp_path(dyp, sizeof dyp, ".npy");
  RUN(&RR, "grad", "graphs/tiny.blk");
  expect_run(&RR, 2, NULL, "grad needs -o");
  // dy of the wrong shape: exit 1, the shapes named, nothing written.
  bc_ctx *ctx = bc_ctx_new();
  bc_shape s = {.rank = 3, .d = {2, 5, 7}};
  float z[70] = {0};
  assert_int_equal(bcN_write(ctx, dyp, &s, z), BC_OK);
  bc_ctx_free(ctx);
  RUN(&RR, "grad", "graphs/tiny.blk", "--dy", dyp, "-o", op);
  expect_run(&RR, 1, NULL, "dy has shape [2, 5, 7] but output 'y' has [2, 5, 8]");
  FILE *fp = fopen(op, "rb");
  assert_null(fp);
  RUN(&RR, "grad", "graphs/tiny.blk", "--dy", "nope=x.npy", "-o", op);
  expect_run(&RR, 2, NULL, "has no output 'nope'");
  RUN(&RR, "analyze", "graphs/tiny.blk", "-o", op);  // -o is --admin-omega's file only
  expect_run(&RR, 2, NULL, "analyze writes -o only with --admin-omega");
  remove(dyp);
}

// A graph without a layer loop cannot be analyzed: a message, exit 1.
static void test_cli_analyze_no_layers(void **state) {
  (void)state;
  char gp[256];
  tu_tmp_path(gp, sizeof gp, ".blk");
  const char *src = "model m\ninput x : [2, 4]\ny = LayerNorm(x, params=norm)\noutput y\n";
  tu_write_bytes(gp, src, strlen(src));
  RUN(&RR, "analyze", gp);
  expect_run(&RR, 1, NULL, "no layers");
  remove(gp);
}

// The number after "key": at or after *p in analyze --json's output;
// *p moves past it.
static double json_num_after(const char **p, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *q = strstr(*p, k);
  assert_non_null(q);
  char *end;
  double v = strtod(q + strlen(k), &end);
  assert_true(end > q + strlen(k));
  *p = end;
  return v;
}

// analyze --json: one entry per layer with the documented keys; ResiDual's
// xa stream is Post-LN's computation, so with the same seed and dims its
// rms and cos_prev equal post_ln's exactly, while its gradients differ.
static void test_cli_analyze_json(void **state) {
  (void)state;
  const char *dims[] = {"-D", "N=5", "-D", "T=6", "-D", "D=16", "-D", "H=2"};
  double rms[2][5], cosp[2][5], gn[2][5];
  const char *graphs[2] = {"graphs/post_ln.blk", "graphs/residual.blk"};
  for (int k = 0; k < 2; k++) {
    RUN(&RR, "analyze", graphs[k], dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6],
        dims[7], "--json", "--seed", "3");
    expect_run(&RR, 0, "\"layers\"", NULL);
    const char *loss = strstr(RR.out, "\"loss\": \"");
    assert_non_null(loss);
    assert_non_null(strstr(loss, "sum(y * dy)"));
    const char *p = strstr(RR.out, "\"layers\": [");
    assert_non_null(p);
    for (int i = 0; i < 5; i++) {
      assert_int_equal(json_num_after(&p, "layer"), i);
      gn[k][i] = json_num_after(&p, "grad_norm");
      rms[k][i] = json_num_after(&p, "rms");
      cosp[k][i] = json_num_after(&p, "cos_prev");
      assert_true(gn[k][i] > 0 && isfinite(gn[k][i]));
      assert_true(fabs(rms[k][i] - 1.0) < 1e-3);  // a LayerNorm output with w = 1, b = 0
      assert_true(cosp[k][i] > -1 && cosp[k][i] < 1);
      const char *os = strstr(p, "\"other_streams\": [");
      assert_non_null(os);
      os += strlen("\"other_streams\": [");
      const char *xd = "{\"stream\": \"xd\", \"rms\": ";
      if (k == 1) assert_true(!strncmp(os, xd, strlen(xd)));
      if (k == 0) assert_true(*os == ']');
    }
    assert_null(strstr(p, "\"layer\": "));  // exactly 5 layers
    assert_true(loss > p);
  }
  for (int i = 0; i < 5; i++) {
    assert_true(rms[0][i] == rms[1][i] && cosp[0][i] == cosp[1][i]);
    assert_true(gn[0][i] != gn[1][i]);
  }
}

// --svg with several graphs: one file, two curves (grad norm, cosine) per
// graph, each graph named in the legend.
static void test_cli_analyze_svg(void **state) {
  (void)state;
  char sp[256];
  tu_tmp_path(sp, sizeof sp, ".svg");
  RUN(&RR, "analyze", "graphs/post_ln.blk", "graphs/pre_ln.blk", "graphs/residual.blk", "-D",
      "N=3", "-D", "T=4", "-D", "D=16", "-D", "H=2", "--svg", sp);
  expect_run(&RR, 0, "wrote", NULL);
  FILE *f = fopen(sp, "rb");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  assert_true(!strncmp(buf, "<svg", 4));
  int lines = 0;
  for (const char *p = buf; (p = strstr(p, "<polyline")); p++) lines++;
  assert_int_equal(lines, 7);  // 3 grad norms, 3 main cosines, ResiDual's xd
  assert_non_null(strstr(buf, "pre_ln (graphs/pre_ln.blk)"));
  assert_non_null(strstr(buf, "</svg>"));
  remove(sp);
}

// analyze --admin-omega (docs/analysis.md): every parameter written, the
// omegas replaced by Admin's profiled values and the rest bit for bit the
// seeded weights (`blockc weights`, same seed); omega_1 = sqrt(Var[x]) of
// the given input, each omega one value in every element, growing down the
// stack (each adds a branch's variance); and the errors: a graph without
// an Admin residual, -o without --admin-omega, several graphs.
// (tools/wirings_check.py checks every value against PyTorch profiling.)
static void test_cli_analyze_admin_omega(void **state) {
  (void)state;
  char wp[256], op[256], xp[256];
  tu_tmp_path(wp, sizeof wp, ".safetensors");
  tu_tmp_path(op, sizeof op, ".safetensors");
  tu_tmp_path(xp, sizeof xp, ".npy");
#define ADM "graphs/admin.blk", "-D", "N=3", "-D", "D=16", "-D", "H=2", "-D", "F=24", "-D", "T=7"
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape xs = {.rank = 3, .d = {1, 7, 16}};
  float x[7 * 16];
  double mean = 0, var = 0;
  bc_rng r;
  bc_rng_seed(&r, 9);
  for (int k = 0; k < 7 * 16; k++) x[k] = (float)(2.0 * bc_rng_normal(&r) + 0.5), mean += x[k];
  mean /= 7 * 16;
  for (int k = 0; k < 7 * 16; k++) var += (x[k] - mean) * (x[k] - mean);
  var /= 7 * 16;
  assert_int_equal(bcN_write(ctx, xp, &xs, x), BC_OK);
  RUN(&RR, "weights", ADM, "--seed", "4", "-o", wp);
  expect_run(&RR, 0, NULL, NULL);
  RUN(&RR, "analyze", ADM, "--seed", "4", "--input", xp, "--admin-omega", "-o", op);
  expect_run(&RR, 0, "admin omega layers.0.omega1", NULL);
  expect_run(&RR, 0, "admin omega layers.2.omega2", NULL);
  const bc_define d[] = {{"N", 3}, {"D", 16}, {"H", 2}, {"F", 24}, {"T", 7}};
  bc_graph *g = bcP_parse_file(ctx, "graphs/admin.blk", d, 5);
  assert_non_null(g);
  bc_weights w0, w1;
  assert_int_equal(bcW_load(ctx, g, wp, &w0), BC_OK);
  assert_int_equal(bcW_load(ctx, g, op, &w1), BC_OK);
  double prev = 0;
  int nomega = 0;
  for (int p = 0; p < g->nparams; p++) {
    int64_t n = bc_shape_numel(&g->params[p].shape);
    if (!strstr(g->params[p].name, ".omega")) {
      assert_memory_equal(w0.p[p], w1.p[p], (size_t)n * sizeof(float));
      continue;
    }
    for (int64_t k = 1; k < n; k++) assert_true(w1.p[p][k] == w1.p[p][0]);
    double om = w1.p[p][0];
    if (!nomega++) assert_true(fabs(om - sqrt(var)) <= 1e-6 * sqrt(var));  // Var[x_0]
    assert_true(om > prev);
    prev = om;
  }
  assert_int_equal(nomega, 6);
  // --json names each omega with its value.
  RUN(&RR, "analyze", ADM, "--seed", "4", "--input", xp, "--admin-omega", "-o", op, "--json");
  expect_run(&RR, 0, "\"admin_omega\": [{\"param\": \"layers.0.omega1\", \"omega\": ", NULL);
  RUN(&RR, "analyze", "graphs/post_ln.blk", "-D", "N=2", "-D", "D=16", "-D", "H=2", "-D", "T=4",
      "--admin-omega", "-o", op);
  expect_run(&RR, 1, NULL, "graphs/post_ln.blk: error: analyze --admin-omega: no Admin residual");
  RUN(&RR, "analyze", ADM, "-o", op);
  expect_run(&RR, 2, NULL, "analyze writes -o only with --admin-omega");
  RUN(&RR, "analyze", ADM, "graphs/admin.blk", "--admin-omega", "-o", op);
  expect_run(&RR, 2, NULL, "--admin-omega takes one GRAPH");
#undef ADM
  bcW_free(&w0);
  bcW_free(&w1);
  bc_ctx_free(ctx);
  remove(wp);
  remove(op);
  remove(xp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_post_ln),
      cmocka_unit_test(test_attention_options),
      cmocka_unit_test(test_pre_ln_causal),
      cmocka_unit_test(test_residual),
      cmocka_unit_test(test_relu_linear_misc),
      cmocka_unit_test(test_cross_attention_lengths),
      cmocka_unit_test(test_mul),
      cmocka_unit_test(test_param_act_broadcast),
      cmocka_unit_test(test_fused_scale),
      cmocka_unit_test(test_fused_add_ln),
      cmocka_unit_test(test_fused_dual),
      cmocka_unit_test(test_fused_fd),
      cmocka_unit_test(test_forward_matches_interp),
      cmocka_unit_test(test_null_dy_is_zero),
      cmocka_unit_test(test_bad_lengths_reported),
      cmocka_unit_test(test_llama_style),
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_gpt2_style),
      cmocka_unit_test(test_cli_grad_matches_api),
      cmocka_unit_test(test_cli_grad_errors),
      cmocka_unit_test(test_cli_analyze_no_layers),
      cmocka_unit_test(test_cli_analyze_json),
      cmocka_unit_test(test_cli_analyze_svg),
      cmocka_unit_test(test_cli_analyze_admin_omega),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
