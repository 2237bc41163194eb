// test_positions.c — the Positions op (issue 21): y = x + wpe.weight[pos]
// (kind=learned, GPT-2 / BERT) or y = x + the sinusoid of "Attention Is
// All You Need" (kind=sinusoidal), through the interpreter (the oracle),
// the JIT and the AOT module.
//
//   - hand-computed values for both kinds (a learned table written by the
//     test; sin(1), cos(1) and the first rows of the sinusoid as literals),
//     at an odd D (5: the last column is a sine) and an even one (6, a
//     rank-2 [T, D] input);
//   - the sinusoid against a direct transcription of the paper's formula
//     at several D, odd and even, and positions up to 2047;
//   - the step entry (pos > 0, several chunkings) against the full run,
//     for both kinds, JIT and AOT;
//   - a position past max=P: the emitted prologue returns EPOS (7) in the
//     run and step entries and the backward, before anything is written
//     (the cache header is untouched); the interpreter, the API and the CLI
//     say which position and which P;
//   - right-padded batches: positions 0..T-1 on every row, lengths or not;
//   - parse errors with carets; a parameter file whose D differs.
//
// Tolerances: the learned sum x + w of two floats is exact in double, so
// every backend is bit-identical to the interpreter (tolerance 0).  The
// sinusoid's kernel steps its angles by the angle-addition formula (exact
// sin/cos every 32 positions) where the interpreter divides by
// 10000^(2i/D); both work in double and round the sum once, so they agree
// to one float ulp of y (|y| <= 2 here: 2.4e-7).  The
// attention after the positions in the step graphs sums in another order
// (test_step.c's 2e-5 * (1 + max|y|)).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "blockc.h"
#include "cli.h"

#define ULP2 2.4e-7  // one float ulp at |y| < 2

// --- the direct formula -------------------------------------------------------------
// PE[pos, c] of the paper, written out: c = 2i -> sin(pos / 10000^(2i/D)),
// c = 2i + 1 -> cos(pos / 10000^(2i/D)).
static double pe_direct(long pos, long c, long D) {
  long i = c / 2;
  double angle = (double)pos / pow(10000.0, (double)(2 * i) / (double)D);
  return c % 2 == 0 ? sin(angle) : cos(angle);
}

// --- a compiled graph: interpreter, JIT, optionally AOT ------------------------------
typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
  bc_compiled c;
  void *ws, *cache;
  bc_aot *aot;
  char dir[256];
} model;

// The suite's AOT cache (one runtime build for every module): group state.
typedef struct {
  char dir[256];
} suite;

static int suite_setup(void **state) {
  suite *su = calloc(1, sizeof *su);
  if (!su) return -1;
  tu_mktmpdir(su->dir, sizeof su->dir, "positions-cache");
  *state = su;
  return 0;
}

static int suite_teardown(void **state) {
  suite *su = *state;
  tu_rm_rf(su->dir);
  free(su);
  return 0;
}

// text parsed (and with aot, its pair built into the suite's cache).
static model *model_new(const char *text, void **state, bool aot) {
  model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->ctx = tu_ctx(&m->errs);
  tu_mktmpdir(m->dir, sizeof m->dir, "positions");
  char path[400];
  snprintf(path, sizeof path, "%s/p.blk", m->dir);
  tu_write_bytes(path, text, strlen(text));
  char *csrc = NULL, *hsrc = NULL;
  if (aot) {
    if (tu_aot_pair(m->ctx, path, NULL, 0, false, &m->g, &csrc, &hsrc))
      fail_msg("%s", m->errs.buf);
  } else {
    m->g = bcP_parse_file(m->ctx, path, NULL, 0);
    if (!m->g) fail_msg("%s", m->errs.buf);
  }
  assert_int_equal(bcW_init_random(m->ctx, m->g, 5, &m->w), BC_OK);
  for (int p = 0; p < m->g->nparams; p++)  // values of order 1 in every table
    tu_fill(m->w.p[p], bc_shape_numel(&m->g->params[p].shape), 100u + (unsigned)p);
  if (bcD_compile(m->ctx, m->g, NULL, &m->c)) fail_msg("%s", m->errs.buf);
  m->ws = cli_workspace(m->ctx, m->g);
  assert_non_null(m->ws);
  if (m->c.cache_bytes > 0) {
    m->cache = aligned_alloc(64, (size_t)m->c.cache_bytes);
    assert_non_null(m->cache);
  }
  if (aot) {
    tu_aot_build(m->ctx, &m->errs, m->g, csrc, hsrc, ((suite *)*state)->dir, &m->aot);
    assert_non_null(bcA_run(m->aot));
    assert_non_null(strstr(hsrc, "_EPOS = 7"));  // the status enum lists it
  }
  return m;
}

static void model_free(model *m) {
  if (m->aot) bcA_free(m->aot);
  free(m->cache);
  free(m->ws);
  bcD_free(&m->c);
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
  tu_rm_rf(m->dir);
  free(m);
}

static float *param(model *m, const char *name) {
  int p = bcI_find_param(m->g, name);
  assert_true(p >= 0);
  return m->w.p[p];
}

// One call's arrays: every float input and output at sequence length T
// (axis 1 of rank 3, axis 0 of rank 2), inputs filled from seed.
typedef struct {
  int n;
  void *io[8];
  int64_t numel[8];
  long rt[2];
} call;

static void call_new(call *k, const bc_graph *g, long T, unsigned seed) {
  memset(k, 0, sizeof *k);
  k->n = g->ninputs + g->noutputs;
  assert_true(k->n <= 8 && g->nrt <= 2);
  for (int d = 0; d < g->ndims; d++)
    if (g->dims[d].rt >= 0) k->rt[g->dims[d].rt] = T;
  for (int i = 0; i < k->n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    bc_shape s = bcI_shape_at(g, &g->vals[v].shape, k->rt);
    k->numel[i] = bc_shape_numel(&s);
    float *a = calloc((size_t)k->numel[i], sizeof *a);
    assert_non_null(a);
    if (i < g->ninputs) tu_fill(a, k->numel[i], seed + (unsigned)i);
    k->io[i] = a;
  }
}

static void call_free(call *k) {
  for (int i = 0; i < k->n; i++) free(k->io[i]);
}

static float *out(call *k, const bc_graph *g, int i) { return k->io[g->ninputs + i]; }

// --- hand-computed values -------------------------------------------------------------
// Two inputs: x [B=2, T, 5] (odd D) and z [T, 6] (rank 2, even D).
static const char *hand_graph =
    "model pm\ndim B = 2\ndim T <= 8\ndim D = 5\ndim P = 6\n"
    "input x : [B, T, D]\ninput z : [T, 6]\n"
    "l = Positions(x, max=P, params=wpe)\n"
    "s = Positions(x, kind=sinusoidal)\n"
    "e = Positions(z, kind=sinusoidal)\n"
    "a = Attention(LayerNorm(Add(l, s), params=ln), heads=1, causal=true, params=sa)\n"
    "h = Positions(LayerNorm(a, params=ln2), kind=learned, max=P, params=wpe)\n"
    "q = Add(h, a)\noutput l\noutput s\noutput e\noutput q\n";

// What the first three outputs must be at T: l = x + wpe[t], s = x + PE,
// e = z + PE (D = 6), written out by hand for the first positions.
static void check_hand(model *m, call *k, long T, double tol_sin) {
  const bc_graph *g = m->g;
  const float *x = k->io[0], *z = k->io[1], *wpe = param(m, "wpe.weight");
  const float *l = out(k, g, 0), *s = out(k, g, 1), *e = out(k, g, 2);
  // PE rows 0 and 1 at D = 5: [0, 1, 0, 1, 0] and
  // [sin 1, cos 1, sin 10000^-0.4, cos 10000^-0.4, sin 10000^-0.8].
  static const double pe1[5] = {0.8414709848078965, 0.5403023058681398, 0.025116222909773774,
                                0.9996845379152098, 0.0006309573026154199};
  for (long b = 0; b < 2; b++)
    for (long t = 0; t < T; t++)
      for (long c = 0; c < 5; c++) {
        long i = (b * T + t) * 5 + c;
        float want_l = x[i] + wpe[t * 5 + c];  // exact: a float sum rounded once
        assert_true(l[i] == want_l);
        double pe = t == 0 ? (c % 2 ? 1.0 : 0.0) : t == 1 ? pe1[c] : pe_direct(t, c, 5);
        if (fabs(s[i] - (x[i] + pe)) > tol_sin)
          fail_msg("s[%ld, %ld, %ld] = %.9g, want %.9g", b, t, c, s[i], x[i] + pe);
      }
  for (long t = 0; t < T; t++)
    for (long c = 0; c < 6; c++) {
      double pe = pe_direct(t, c, 6);
      if (t == 1 && c == 2) assert_true(fabs(pe - 0.04639922346473128) < 1e-15);  // sin 10000^(-1/3)
      if (fabs(e[t * 6 + c] - (z[t * 6 + c] + pe)) > tol_sin)
        fail_msg("e[%ld, %ld] = %.9g, want %.9g", t, c, e[t * 6 + c], z[t * 6 + c] + pe);
    }
}

static double max_diff(call *a, call *b, int from) {
  double d = 0;
  for (int i = from; i < a->n; i++) {
    double e = tu_max_abs_diff(a->io[i], b->io[i], (size_t)a->numel[i]);
    if (!(e <= d)) d = e;
  }
  return d;
}

static void test_hand_values(void **state) {
  (void)state;
  model *m = model_new(hand_graph, state, true);
  for (long T = 1; T <= 6; T += 5) {
    call ri, rj, ra;
    call_new(&ri, m->g, T, 7), call_new(&rj, m->g, T, 7), call_new(&ra, m->g, T, 7);
    if (bcR_run_io(m->ctx, m->g, &m->w, ri.io, ri.rt)) fail_msg("%s", m->errs.buf);
    check_hand(m, &ri, T, 1e-7);  // the interpreter: one rounding of the exact sum
    assert_int_equal(m->c.run((const float *const *)m->w.p, rj.io, rj.rt, m->ws), BC_RUN_OK);
    check_hand(m, &rj, T, ULP2);
    assert_int_equal(bcA_run(m->aot)((const void *)m->w.p, ra.io, ra.rt, m->ws), BC_RUN_OK);
    check_hand(m, &ra, T, ULP2);
    // The learned outputs are bit-identical; the rest within the sums' order.
    assert_true(tu_max_abs_diff(out(&ri, m->g, 0), out(&rj, m->g, 0), (size_t)ri.numel[2]) == 0);
    double ej = max_diff(&ri, &rj, m->g->ninputs), ea = max_diff(&ri, &ra, m->g->ninputs);
    print_message("T=%ld: max |jit - interp| %.2e, |aot - interp| %.2e\n", T, ej, ea);
    assert_true(ej <= 2e-5 && ea <= 2e-5);
    call_free(&ri), call_free(&rj), call_free(&ra);
  }
  // The last Positions reads a dying LayerNorm: it was planned in place.
  const bc_node *last = NULL;
  for (int i = 0; i < m->g->nnodes; i++)
    if (m->g->nodes[i].op == BC_OP_POSITIONS) last = &m->g->nodes[i];
  assert_non_null(last);
  assert_false(bcI_is_output(m->g, last->out[0]));
  assert_int_equal(m->g->vals[last->out[0]].alias, last->in[0]);
  model_free(m);
}

// --- the sinusoid against the formula at odd and even D --------------------------------
static void test_sinusoid_formula(void **state) {
  (void)state;
  static const long Ds[] = {1, 2, 3, 7, 8, 33, 64, 301};  // 301: more than one 128-pair block
  for (size_t k = 0; k < sizeof Ds / sizeof Ds[0]; k++) {
    long D = Ds[k];
    char text[256];
    snprintf(text, sizeof text,
             "model sm\ndim T <= 2048\ninput x : [T, %ld]\ny = Positions(x, kind=sinusoidal)\n"
             "output y\n", D);
    model *m = model_new(text, state, false);
    long T = 2048;
    call ri, rj;
    call_new(&ri, m->g, T, 3), call_new(&rj, m->g, T, 3);
    if (bcR_run_io(m->ctx, m->g, &m->w, ri.io, ri.rt)) fail_msg("%s", m->errs.buf);
    assert_int_equal(m->c.run((const float *const *)m->w.p, rj.io, rj.rt, m->ws), BC_RUN_OK);
    const float *x = ri.io[0], *yi = out(&ri, m->g, 0), *yj = out(&rj, m->g, 0);
    double ei = 0, ej = 0;
    for (long t = 0; t < T; t++)
      for (long c = 0; c < D; c++) {
        double want = (double)x[t * D + c] + pe_direct(t, c, D);
        ei = fmax(ei, fabs(yi[t * D + c] - want));
        ej = fmax(ej, fabs(yj[t * D + c] - yi[t * D + c]));
      }
    print_message("D=%ld: max |interp - formula| %.2e, |jit - interp| %.2e\n", D, ei, ej);
    assert_true(ei <= 1.2e-7);  // half an ulp at |y| < 2, plus the formula's own rounding
    assert_true(ej <= ULP2);
    if (D % 2) {  // an odd D's last column is the sine of its own frequency
      long t = 1000, c = D - 1;
      double want = sin((double)t / pow(10000.0, (double)(D - 1) / (double)D));
      assert_true(fabs(yi[t * D + c] - (x[t * D + c] + want)) <= 1.2e-7);
    }
    call_free(&ri), call_free(&rj);
    model_free(m);
  }
}

// --- the step entry ---------------------------------------------------------------------
// Steps the whole sequence of full (length T) in chunks through step (JIT)
// or astep (AOT) and compares every output row with full's.
static double step_all(model *m, call *full, long T, long chunk, bool aot) {
  const bc_graph *g = m->g;
  double worst = 0;
  for (long pos = 0; pos < T; pos += chunk) {
    long t = pos + chunk <= T ? chunk : T - pos;
    call part;
    call_new(&part, g, t, 0);
    for (int i = 0; i < part.n; i++) {  // rows pos.. of every input
      int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
      const bc_shape *s = &g->vals[v].shape;
      int64_t outer = s->rank == 3 ? s->d[0] : 1, inner = s->d[s->rank - 1];
      for (int64_t o = 0; o < outer && i < g->ninputs; o++)
        memcpy((float *)part.io[i] + o * t * inner, (float *)full->io[i] + (o * T + pos) * inner,
               (size_t)(t * inner) * sizeof(float));
    }
    int rc = aot ? bcA_step(m->aot)((const void *)m->w.p, part.io, part.rt, pos, m->cache,
                                    (size_t)m->c.cache_bytes, m->ws)
                 : m->c.step((const float *const *)m->w.p, part.io, part.rt, pos, m->cache,
                             (size_t)m->c.cache_bytes, m->ws);
    assert_int_equal(rc, BC_RUN_OK);
    for (int i = g->ninputs; i < part.n; i++) {
      int v = g->outputs[i - g->ninputs];
      const bc_shape *s = &g->vals[v].shape;
      int64_t outer = s->rank == 3 ? s->d[0] : 1, inner = s->d[s->rank - 1];
      for (int64_t o = 0; o < outer; o++) {
        double d = tu_max_abs_diff((float *)part.io[i] + o * t * inner,
                                   (float *)full->io[i] + (o * T + pos) * inner,
                                   (size_t)(t * inner));
        if (!(d <= worst)) worst = d;
      }
    }
    call_free(&part);
  }
  return worst;
}

static void test_step_matches_run(void **state) {
  (void)state;
  model *m = model_new(hand_graph, state, true);
  assert_non_null(m->c.step);
  assert_non_null(bcA_step(m->aot));
  long T = 6;
  call full;
  call_new(&full, m->g, T, 21);
  assert_int_equal(m->c.run((const float *const *)m->w.p, full.io, full.rt, m->ws), BC_RUN_OK);
  double ymax = 0;
  for (int i = m->g->ninputs; i < full.n; i++)
    ymax = fmax(ymax, tu_max_abs(full.io[i], (size_t)full.numel[i]));
  static const long chunks[] = {1, 2, 4, 6};
  for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
    double ej = step_all(m, &full, T, chunks[k], false);
    double ea = step_all(m, &full, T, chunks[k], true);
    print_message("chunk %ld: max |step - run| jit %.2e, aot %.2e\n", chunks[k], ej, ea);
    assert_true(ej <= 2e-5 * (1 + ymax) && ea <= 2e-5 * (1 + ymax));
  }
  call_free(&full);
  model_free(m);
}

// A sinusoidal Positions inside the layer loop: the layer function takes pos.
static void test_step_in_layer_loop(void **state) {
  (void)state;
  const char *text =
      "model lm\ndim T <= 9\ndim D = 6\ninput x : [1, T, D]\n"
      "for i in 0..3 as layers.{i} {\n"
      "  x = Add(x, Attention(LayerNorm(Positions(x, kind=sinusoidal), params=n), heads=2, "
      "causal=true, params=sa))\n}\noutput x\n";
  model *m = model_new(text, state, false);
  assert_true(m->g->layers.count >= 2);
  assert_non_null(strstr(m->c.csrc, "bcrt_pos_sinusoid("));
  assert_non_null(strstr(m->c.csrc, ", pos, "));  // the step entry's absolute position
  long T = 9;
  call full;
  call_new(&full, m->g, T, 31);
  assert_int_equal(m->c.run((const float *const *)m->w.p, full.io, full.rt, m->ws), BC_RUN_OK);
  call ri;
  call_new(&ri, m->g, T, 31);
  if (bcR_run_io(m->ctx, m->g, &m->w, ri.io, ri.rt)) fail_msg("%s", m->errs.buf);
  double ymax = tu_max_abs(out(&full, m->g, 0), (size_t)full.numel[1]);
  assert_true(max_diff(&full, &ri, 1) <= 2e-5 * (1 + ymax));
  for (long chunk = 2; chunk <= 5; chunk += 3)
    assert_true(step_all(m, &full, T, chunk, false) <= 2e-5 * (1 + ymax));
  call_free(&ri), call_free(&full);
  model_free(m);
}

// Right-padded batches: lengths do not shift the positions (as Hugging Face
// without position_ids): every row t of every batch row gets wpe[t], padded
// or not, and the valid rows after a masked attention match the interpreter.
static void test_padded_rows(void **state) {
  const char *text =
      "model pp\ndim B = 2\ndim T <= 6\ndim D = 4\ninput x : [B, T, D]\ninput len : lengths[B]\n"
      "l = Positions(x, max=6, params=wpe)\n"
      "a = Attention(Positions(l, kind=sinusoidal), heads=2, causal=true, lengths=len, params=sa)\n"
      "output l\noutput a\n";
  model *m = model_new(text, state, false);
  long T = 5;
  int32_t len[2] = {2, 5};
  float x[2 * 5 * 4], lj[40], aj[40], li[40], ai[40];
  tu_fill(x, 40, 9);
  void *ioj[4] = {x, len, lj, aj}, *ioi[4] = {x, len, li, ai};
  long rt[1] = {T};
  assert_int_equal(m->c.run((const float *const *)m->w.p, ioj, rt, m->ws), BC_RUN_OK);
  if (bcR_run_io(m->ctx, m->g, &m->w, ioi, rt)) fail_msg("%s", m->errs.buf);
  const float *wpe = param(m, "wpe.weight");
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < 4; c++) {
        int i = (b * (int)T + t) * 4 + c;
        assert_true(lj[i] == x[i] + wpe[t * 4 + c] && li[i] == lj[i]);
        if (t < len[b]) assert_true(fabs(aj[i] - ai[i]) <= 2e-5 * (1 + fabs(ai[i])));
        else assert_true(aj[i] == 0 && ai[i] == 0);  // padded query rows are zeros
      }
  model_free(m);
}

// --- a position past max=P --------------------------------------------------------------
static void api_sink(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  snprintf(e->buf, sizeof e->buf, "%s", msg);
}

// T <= 8 but max=P=6: a cache of 8 positions, a table of 6.
static void test_epos(void **state) {
  (void)state;
  model *m = model_new(hand_graph, state, true);
  call k;
  call_new(&k, m->g, 7, 1);
  const float *const *w = (const float *const *)m->w.p;
  // The run entry with T = 7 > P: EPOS, and the interpreter says why.
  assert_int_equal(m->c.run(w, k.io, k.rt, m->ws), BC_RUN_EPOS);
  assert_int_equal(bcA_run(m->aot)((const void *)w, k.io, k.rt, m->ws), BC_RUN_EPOS);
  m->errs.len = 0;
  assert_int_equal(bcR_run_io(m->ctx, m->g, &m->w, k.io, k.rt), BC_EINPUT);
  assert_non_null(strstr(m->errs.buf, "position 6 is past the learned Positions table (max=6"));
  assert_non_null(strstr(m->errs.buf, "p.blk:8:5"));
  assert_non_null(strstr(m->errs.buf, "'wpe.weight'"));
  call_free(&k);
  // The step entry: pos 3 + 3 new = 6 <= P is fine, pos 4 + 3 = 7 is not;
  // the refusal writes nothing, not even the cache's header.
  call s;
  call_new(&s, m->g, 3, 2);
  assert_int_equal(m->c.step(w, s.io, s.rt, 0, m->cache, (size_t)m->c.cache_bytes, m->ws), 0);
  assert_int_equal(m->c.step(w, s.io, s.rt, 3, m->cache, (size_t)m->c.cache_bytes, m->ws), 0);
  unsigned char *hdr = malloc(64);
  assert_non_null(hdr);
  memcpy(hdr, m->cache, 64);
  float *y0 = out(&s, m->g, 0);
  y0[0] = 12345.0f;
  assert_int_equal(m->c.step(w, s.io, s.rt, 4, m->cache, (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_EPOS);
  assert_int_equal(bcA_step(m->aot)((const void *)w, s.io, s.rt, 4, m->cache,
                                    (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_EPOS);
  assert_true(y0[0] == 12345.0f);
  assert_memory_equal(hdr, m->cache, 64);
  s.rt[0] = 1;  // pos 5 + 1 = 6: the last position of the table
  assert_int_equal(m->c.step(w, s.io, s.rt, 5, m->cache, (size_t)m->c.cache_bytes, m->ws), 0);
  assert_int_equal(m->c.step(w, s.io, s.rt, 6, m->cache, (size_t)m->c.cache_bytes, m->ws),
                   BC_RUN_EPOS);
  free(hdr);
  call_free(&s);
  // The CLI: a full run past P, and --stepwise.
  char path[400], err[4096];
  snprintf(path, sizeof path, "%s/p.blk", m->dir);
  char *argv[] = {(char *)tu_blockc(), "run", path, "--length", "T=7", NULL};
  assert_int_equal(tu_spawn(argv, NULL, 0, err, sizeof err), 1);
  assert_non_null(strstr(err, "position 6 is past the learned Positions table (max=6"));
  char *argv2[] = {(char *)tu_blockc(), "run", path, "--length", "T=8", "--stepwise", NULL};
  assert_int_equal(tu_spawn(argv2, NULL, 0, err, sizeof err), 1);
  assert_non_null(strstr(err, "covers positions 0..7"));
  model_free(m);
}

// The API: blockc_step and blockc_run report BLOCKC_EINPUT naming the
// position and P.
static void test_epos_api(void **state) {
  (void)state;
  blockc_model *m = blockc_new();
  tu_errors e = {0};
  blockc_set_error_func(m, &e, api_sink);
  assert_int_equal(blockc_load_graph_string(m, "p.blk", hand_graph), 0);
  assert_int_equal(blockc_init_weights(m, 3), 0);
  assert_int_equal(blockc_compile(m), 0);
  size_t wn = blockc_workspace_size(m), cn = blockc_cache_size(m);
  void *ws = aligned_alloc(64, wn), *cache = aligned_alloc(64, cn);
  assert_non_null(ws);
  assert_non_null(cache);
  static float x[2 * 8 * 5], z[8 * 6], l[2 * 8 * 5], s[2 * 8 * 5], o[8 * 6], h[2 * 8 * 5];
  tu_fill(x, 80, 1), tu_fill(z, 48, 2);
  const void *in[2] = {x, z};
  void *outs[4] = {l, s, o, h};
  long long dims[1] = {4};
  assert_int_equal(blockc_step(m, in, outs, dims, 0, cache, cn, ws, wn), BLOCKC_OK);
  assert_int_equal(blockc_step(m, in, outs, dims, 4, cache, cn, ws, wn), BLOCKC_EINPUT);
  assert_non_null(strstr(e.buf, "blockc_step: position 6 is past the learned Positions table "
                                "(max=6"));
  assert_non_null(strstr(e.buf, "covers positions 4..7"));
  dims[0] = 2;
  assert_int_equal(blockc_step(m, in, outs, dims, 4, cache, cn, ws, wn), BLOCKC_OK);
  dims[0] = 7;
  e.buf[0] = '\0';
  assert_int_equal(blockc_run(m, in, outs, dims, ws, wn), BLOCKC_EINPUT);
  assert_non_null(strstr(e.buf, "position 6 is past the learned Positions table (max=6"));
  dims[0] = 6;
  assert_int_equal(blockc_run(m, in, outs, dims, ws, wn), BLOCKC_OK);
  free(ws), free(cache);
  blockc_delete(m);
}

// The emitted backward's forward covers positions 0..T-1: T past max= is
// EPOS there too, before anything is written; T = P runs.
static void test_epos_backward(void **state) {
  (void)state;
  model *m = model_new(hand_graph, state, false);
  bc_emit_opts eo = {.backward = true};
  bc_compiled c;
  if (bcD_compile(m->ctx, m->g, &eo, &c)) fail_msg("%s", m->errs.buf);
  assert_non_null(c.backward);
  assert_non_null(strstr(c.csrc, "return 7;  // n"));
  void *ws = aligned_alloc(64, (size_t)c.bwd_ws_bytes);
  assert_non_null(ws);
  call k;
  call_new(&k, m->g, 7, 4);
  const float *dy[4];
  float *dw[16];
  assert_true(m->g->nparams <= 16);
  for (int p = 0; p < m->g->nparams; p++) {
    dw[p] = calloc((size_t)bc_shape_numel(&m->g->params[p].shape), sizeof(float));
    assert_non_null(dw[p]);
  }
  call big;
  call_new(&big, m->g, 8, 5);  // dy: outputs' arrays at the bound, filled
  for (int i = 0; i < 4; i++) dy[i] = big.io[m->g->ninputs + i];
  for (int i = 0; i < 4; i++) tu_fill((float *)dy[i], big.numel[m->g->ninputs + i], 40u + (unsigned)i);
  const float *const *w = (const float *const *)m->w.p;
  float *l = out(&k, m->g, 0);
  l[0] = 777.0f;
  assert_int_equal(c.backward(w, k.io, k.rt, dy, dw, NULL, ws), BC_RUN_EPOS);
  assert_true(l[0] == 777.0f);
  k.rt[0] = 6;
  assert_int_equal(c.backward(w, k.io, k.rt, dy, dw, NULL, ws), BC_RUN_OK);
  for (int p = 0; p < m->g->nparams; p++) free(dw[p]);
  call_free(&k), call_free(&big);
  free(ws);
  bcD_free(&c);
  model_free(m);
}

// --- parse errors ------------------------------------------------------------------------
#define PRE "model m\ndim T <= 8\ndim D = 4\ninput x : [2, T, D]\n"

static void test_parse_errors(void **state) {
  (void)state;
  tu_expect_error(PRE "y = Positions(x, kind=rotary)\noutput y\n", 5, 23,
                  "unknown kind 'rotary' for Positions (expected learned or sinusoidal)");
  tu_expect_error(PRE "y = Positions(x, kind=3)\noutput y\n", 5, 23,
                  "kind of Positions takes a word");
  tu_expect_error(PRE "y = Positions(x, params=wpe)\noutput y\n", 5, 5,
                  "Positions with kind=learned (the default) needs max=");
  tu_expect_error(PRE "y = Positions(x, kind=learned, max=8)\noutput y\n", 5, 5,
                  "Positions with kind=learned needs params=");
  tu_expect_error(PRE "y = Positions(x)\noutput y\n", 5, 5, "needs max= and params=");
  tu_expect_error(PRE "y = Positions(x, kind=sinusoidal, params=wpe)\noutput y\n", 5, 42,
                  "params= does not apply to kind=sinusoidal");
  tu_expect_error(PRE "y = Positions(x, kind=sinusoidal, max=8)\noutput y\n", 5, 39,
                  "max= does not apply to kind=sinusoidal");
  tu_expect_error("model m\ndim D = 4\ninput x : [2, 9, D]\ny = Positions(x, max=8, params=wpe)\n"
                  "output y\n",
                  4, 5, "x [2, 9, 4] has 9 positions on its sequence axis, but max=8: the table "
                  "'wpe.weight' [8, 4] holds positions 0..7 only");
  tu_expect_error(PRE "y = Positions(x, max=0, params=wpe)\noutput y\n", 5, 22, "must be positive");
  tu_expect_error(PRE "y = Positions(x, max=8, params=wpe, theta=1)\noutput y\n", 5, 37,
                  "unknown attribute 'theta' for Positions");
  // The same table under two sizes is a parameter conflict.
  tu_expect_error(PRE "a = Positions(x, max=8, params=wpe)\nb = Positions(a, max=9, params=wpe)\n"
                  "output b\n", 6, 32, "wpe.weight");
  // A run-time sequence dim may be bounded above max: checked at run time.
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "y = Positions(x, max=3, params=wpe)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(g->nodes[0].pos_max, 3);
  assert_int_equal(g->params[g->nodes[0].param[0]].shape.d[0], 3);
  assert_int_equal(g->params[g->nodes[0].param[0]].shape.d[1], 4);
  bc_ctx_free(ctx);
}

// A checkpoint whose table has another D (or more rows) is refused by name.
static void test_weights_shape_mismatch(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_graph *g = tu_parse(ctx, PRE "y = Positions(x, max=8, params=wpe)\noutput y\n");
  assert_non_null(g);
  assert_int_equal(tu_load_one_tensor(ctx, g, "wpe.weight", (bc_shape){.rank = 2, .d = {8, 5}}),
                   BC_EINPUT);
  assert_non_null(strstr(e.buf, "wpe.weight"));
  assert_non_null(strstr(e.buf, "[8, 5]"));
  assert_non_null(strstr(e.buf, "[8, 4]"));
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_values),        cmocka_unit_test(test_sinusoid_formula),
      cmocka_unit_test(test_step_matches_run),   cmocka_unit_test(test_step_in_layer_loop),
      cmocka_unit_test(test_epos),               cmocka_unit_test(test_epos_api),
      cmocka_unit_test(test_epos_backward),      cmocka_unit_test(test_padded_rows),
      cmocka_unit_test(test_parse_errors),       cmocka_unit_test(test_weights_shape_mismatch),
  };
  return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
