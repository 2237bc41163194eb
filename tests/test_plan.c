// test_plan.c — the memory planner: scratch buffers, live ranges, offsets,
// the lower bound, and bcM_check.  Every plan is also checked by this
// file's own brute-force pairwise test, which shares no code with plan.c.
#include "testutil.h"
#include "ir_builders.h"

#include <stdio.h>
#include <string.h>

// --- an independent checker ----------------------------------------------------------
//
// For every pair of values that need arena storage, recompute live ranges
// straight from the nodes and fail if two simultaneously live values share
// a float, unless one is the other's in-place successor (alias chain).

static bool in_chain(const bc_graph *g, int v, int w) {
  for (int x = v, steps = 0; x >= 0 && steps <= g->nvals; x = g->vals[x].alias, steps++)
    if (x == w) return true;
  return false;
}

static void brute_force_check(const bc_graph *g) {
  int nv = g->nvals;
  int *first = malloc((size_t)nv * sizeof(int)), *last = malloc((size_t)nv * sizeof(int));
  bool *arena = calloc((size_t)nv, sizeof(bool));
  for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) last[n->in[k]] = i;  // an absent optional input is -1
    for (int k = 0; k < n->nout; k++) {
      int v = n->out[k];
      if (v < 0) continue;
      first[v] = last[v] = i;
      arena[v] = !bcI_in_caller_memory(g, v);
    }
    for (int k = 0; k < n->nscratch; k++) {
      int v = n->scratch[k];
      first[v] = last[v] = i;
      arena[v] = true;
      assert_int_equal(g->vals[v].kind, BC_VAL_SCRATCH);
    }
  }
  for (int v = 0; v < nv; v++) {
    if (!arena[v]) continue;
    const bc_value *a = &g->vals[v];
    int64_t na = bc_shape_numel(&a->shape);
    assert_true(a->offset >= 0);
    assert_int_equal(a->offset % 16, 0);
    assert_true(a->offset + na <= g->arena_floats);
    for (int w = v + 1; w < nv; w++) {
      if (!arena[w]) continue;
      const bc_value *b = &g->vals[w];
      int64_t nb = bc_shape_numel(&b->shape);
      bool time = first[v] <= last[w] && first[w] <= last[v];
      bool space = a->offset < b->offset + nb && b->offset < a->offset + na;
      if (!time || !space) continue;
      // In place: the older value is read for the last time where the newer
      // one is written, and the newer one names it (possibly via a chain).
      bool handover = (in_chain(g, v, w) && last[w] == first[v]) ||
                      (in_chain(g, w, v) && last[v] == first[w]);
      if (!handover)
        fail_msg("%%%d [%d,%d] @%lld+%lld and %%%d [%d,%d] @%lld+%lld overlap", v, first[v],
                 last[v], (long long)a->offset, (long long)na, w, first[w], last[w],
                 (long long)b->offset, (long long)nb);
    }
  }
  free(first);
  free(last);
  free(arena);
}

static void check_plan(const bc_graph *g) {
  assert_true(g->planned);
  assert_int_equal(bcM_check(g), BC_OK);
  brute_force_check(g);
  assert_true(g->arena_floats >= g->arena_lower_bound);
  assert_int_equal(g->vals[g->input].offset, -1);
  assert_int_equal(g->vals[g->output].offset, -1);
}

// --- Transformer stacks at a realistic size -------------------------------------------------

static const char *wname[] = {"Post-LN", "Pre-LN", "ResiDual"};

static void test_ratio(void **state) {
  (void)state;
  for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = ib_stack(ctx, (ib_wiring)w, 6, 1, 128, 512, 8, 2048);
    assert_non_null(g);
    bc_graph *raw = bcI_clone(g);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    check_plan(g);
    double r = (double)g->arena_floats / (double)g->arena_lower_bound;
    // The planner must also cope with unfused, not-in-place graphs.
    assert_int_equal(bcM_plan(raw), BC_OK);
    check_plan(raw);
    double rr = (double)raw->arena_floats / (double)raw->arena_lower_bound;
    print_message("%-8s 6 layers D=512 T=128 F=2048 H=8: arena %lld floats (%.2f MiB), lower "
                  "bound %lld, ratio %.4f, layer loop %d x %d nodes  [unfused: arena %lld, "
                  "bound %lld, ratio %.4f, loop %d x %d]\n",
                  wname[w], (long long)g->arena_floats, (double)g->arena_floats * 4 / 1048576.0,
                  (long long)g->arena_lower_bound, r, g->layers.count, g->layers.period,
                  (long long)raw->arena_floats, (long long)raw->arena_lower_bound, rr,
                  raw->layers.count, raw->layers.period);
    // The stack is laid out periodically (layers 0..4 or all 6 as one loop)
    // and still within 10% of the liveness bound.
    assert_true(g->layers.count >= 5);
    assert_true(raw->layers.count >= 5);
    assert_true(r <= 1.10);
    assert_true(rr <= 1.10);
    bc_ctx_free(ctx);
  }
}

// Other shapes: scores-dominated (long T, small D), FFN-dominated, batched,
// single layer, and sizes that are not multiples of the 16-float alignment.
static void test_ratio_sweep(void **state) {
  (void)state;
  static const int64_t cfg[][6] = {
      // N  B   T     D    H   F
      {6, 1, 1024, 64, 8, 256},
      {6, 1, 16, 1024, 16, 8192},
      {4, 4, 64, 256, 4, 1024},
      {1, 1, 128, 512, 8, 2048},
      {3, 1, 7, 12, 3, 20},
      {12, 2, 33, 96, 6, 200},
  };
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
      tu_errors errs;
      bc_ctx *ctx = tu_ctx(&errs);
      const int64_t *k = cfg[c];
      bc_graph *g = ib_stack(ctx, (ib_wiring)w, (int)k[0], k[1], k[2], k[3], k[4], k[5]);
      assert_non_null(g);
      assert_int_equal(bcO_run_until(g, NULL), BC_OK);
      check_plan(g);
      double r = (double)g->arena_floats / (double)g->arena_lower_bound;
      if (r > 1.10)
        fail_msg("%s N=%lld B=%lld T=%lld D=%lld H=%lld F=%lld: arena %lld vs bound %lld (%.3f)",
                 wname[w], (long long)k[0], (long long)k[1], (long long)k[2], (long long)k[3],
                 (long long)k[4], (long long)k[5], (long long)g->arena_floats,
                 (long long)g->arena_lower_bound, r);
      bc_ctx_free(ctx);
    }
  }
}

// Near BC_MAX_NODES the passes, the planner and bcM_check must stay linear
// (long alias chains such as ResiDual's xd stream span the whole graph).
static void test_huge_graph(void **state) {
  (void)state;
  for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = ib_stack_ex(ctx, (ib_wiring)w, 24000, 1, 8, 16, 2, 32, true);  // <= 192002 nodes
    assert_non_null(g);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    assert_int_equal(bcM_check(g), BC_OK);
    assert_true(g->arena_floats <= g->arena_lower_bound * 11 / 10);
    bc_ctx_free(ctx);
  }
}

// The scratch table the emitter relies on.
static void test_scratch_shapes(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = ib_stack(ctx, IB_POST_LN, 1, 2, 16, 32, 4, 64);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  const bc_node *a = &g->nodes[0], *f = &g->nodes[2];
  assert_int_equal(a->op, BC_OP_ATTENTION);
  assert_int_equal(a->nscratch, 2);
  // The projections and the heads' outputs; no scores (bcrt_attention
  // keeps a tile on its stack).
  bc_shape want[2] = {{.rank = 2, .d = {32, 96}}, {.rank = 2, .d = {32, 32}}};
  for (int k = 0; k < 2; k++) {
    const bc_value *s = &g->vals[a->scratch[k]];
    char b1[96], b2[96];
    if (!bc_shape_eq(&s->shape, &want[k]))
      fail_msg("scratch %d is %s, want %s", k, bc_shape_str(&s->shape, b1, sizeof b1),
               bc_shape_str(&want[k], b2, sizeof b2));
    assert_int_equal(s->kind, BC_VAL_SCRATCH);
    assert_int_equal(s->first_use, 0);
    assert_int_equal(s->last_use, 0);
  }
  assert_int_equal(f->op, BC_OP_FFN);
  assert_int_equal(f->nscratch, 1);
  bc_shape h = {.rank = 2, .d = {32, 64}};
  assert_true(bc_shape_eq(&g->vals[f->scratch[0]].shape, &h));
  assert_int_equal(g->nodes[1].nscratch, 0);
  check_plan(g);
  bc_ctx_free(ctx);
}

static void test_aliases_share_storage(void **state) {
  (void)state;
  for (int w = IB_POST_LN; w <= IB_RESIDUAL; w++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = ib_stack(ctx, (ib_wiring)w, 3, 1, 8, 16, 2, 32);
    assert_non_null(g);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    check_plan(g);
    int n = 0;
    for (int v = 0; v < g->nvals; v++) {
      int a = g->vals[v].alias;
      if (a < 0) continue;
      n++;
      assert_int_equal(g->vals[v].offset, g->vals[a].offset);
      assert_true(g->vals[a].last_use <= g->vals[v].first_use);
    }
    assert_true(n > 0);
    bc_ctx_free(ctx);
  }
}

static void test_idempotent(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = ib_stack(ctx, IB_RESIDUAL, 2, 1, 8, 16, 2, 32);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  int nv = g->nvals;
  int64_t arena = g->arena_floats, lb = g->arena_lower_bound;
  bc_value *before = malloc((size_t)nv * sizeof *before);
  memcpy(before, g->vals, (size_t)nv * sizeof *before);
  assert_int_equal(bcM_plan(g), BC_OK);
  assert_int_equal(g->nvals, nv);  // scratch reused, not recreated
  assert_int_equal(g->arena_floats, arena);
  assert_int_equal(g->arena_lower_bound, lb);
  for (int v = 0; v < nv; v++) {
    assert_int_equal(g->vals[v].offset, before[v].offset);
    assert_int_equal(g->vals[v].first_use, before[v].first_use);
    assert_int_equal(g->vals[v].last_use, before[v].last_use);
    assert_int_equal(g->vals[v].alias, before[v].alias);
  }
  // The whole pipeline again is a no-op too.
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->nvals, nv);
  assert_int_equal(g->arena_floats, arena);
  free(before);
  check_plan(g);
  bc_ctx_free(ctx);
}

// --- edge cases ------------------------------------------------------------------------------

static void test_identity(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  bc_graph *g = ib_finish(&b, b.g->input);
  assert_non_null(g);
  assert_int_equal(bcM_plan(g), BC_OK);
  assert_int_equal(g->arena_floats, 0);
  check_plan(g);
  bc_ctx_free(ctx);
}

// The graph output is an ADD_LN's sum; its LN result is not read by anyone
// (no dce was run), so it still needs a buffer for the kernel to write.
static void test_output_is_add_ln_sum(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int s = ib_add(&b, b.g->input, a, "s");
  int h = ib_ln(&b, s, 0, "norm1", "h");
  bc_graph *g = ib_finish(&b, s);
  assert_non_null(g);
  assert_int_equal(bcO_fuse_add_ln(g), BC_OK);
  assert_int_equal(g->nnodes, 2);
  assert_int_equal(g->nodes[1].op, BC_OP_ADD_LN);
  assert_int_equal(g->nodes[1].out[0], h);
  assert_int_equal(g->nodes[1].out[1], s);
  assert_int_equal(bcO_inplace(g), BC_OK);
  assert_int_equal(g->vals[s].alias, -1);
  assert_int_equal(g->vals[h].alias, a);  // a dies here; h is written over it
  assert_int_equal(bcM_plan(g), BC_OK);
  check_plan(g);
  assert_int_equal(g->vals[s].offset, -1);
  assert_true(g->vals[h].offset >= 0);
  bc_ctx_free(ctx);
}

static void test_value_read_twice(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 4, 8, 2, 16);
  int a = ib_attn(&b, b.g->input, 0);
  int t = ib_add(&b, a, a, "t");
  int u = ib_add(&b, t, t, "u");
  int y = ib_add(&b, u, b.g->input, "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->vals[t].alias, a);
  assert_int_equal(g->vals[u].alias, t);
  check_plan(g);
  assert_int_equal(g->vals[u].offset, g->vals[a].offset);
  bc_ctx_free(ctx);
}

static void test_workspace_limit(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  // Rows 2^21, D = 512: each activation is 2^30 floats (4 GiB), the FFN's
  // hidden layer 2^31.  Two residual values, the hidden layer and the FFN
  // output are live at once: 5 * 2^30 floats = 20 GiB > 16 GiB.
  ib b = ib_new(ctx, 1, 1 << 21, 512, 8, 1024);
  int x = b.g->input;
  int s1 = ib_add(&b, x, x, "s1");
  int s2 = ib_add(&b, x, s1, "s2");
  int f = ib_ffn(&b, s2, 0);
  int t = ib_add(&b, f, s1, "t");
  int y = ib_add(&b, t, s2, "y");
  bc_graph *g = ib_finish(&b, y);
  assert_non_null(g);
  int rc = bcO_run_until(g, NULL);
  assert_int_equal(rc, BC_ENOMEM);
  assert_non_null(strstr(errs.buf, "over the limit of 17179869184 bytes"));
  assert_false(g->planned);
  bc_ctx_free(ctx);
}

static void test_scratch_elems_limit(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  ib b = ib_new(ctx, 1, 1 << 20, 64, 16, 128);  // scores: 16 * 2^40 elements
  int a = ib_attn(&b, b.g->input, 0);
  bc_graph *g = ib_finish(&b, a);
  assert_non_null(g);
  assert_int_not_equal(bcM_plan(g), BC_OK);
  assert_non_null(strstr(errs.buf, "more than 2147483648 elements"));
  assert_non_null(strstr(errs.buf, "t.blk:10:10"));
  bc_ctx_free(ctx);
}

// --- bcM_check catches bad plans ------------------------------------------------------------------

static void test_check_detects_overlap(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = ib_stack(ctx, IB_POST_LN, 2, 1, 8, 16, 2, 32);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(bcM_check(g), BC_OK);
  // Put the attention's head outputs on top of its qkv buffer.
  const bc_node *a = &g->nodes[0];
  int q = a->scratch[0], s = a->scratch[1];
  g->vals[s].offset = g->vals[q].offset;
  assert_int_equal(bcM_check(g), BC_EINTERNAL);
  char want1[32], want2[32];
  snprintf(want1, sizeof want1, "%%%d ", q);
  snprintf(want2, sizeof want2, "%%%d ", s);
  assert_non_null(strstr(errs.buf, want1));
  assert_non_null(strstr(errs.buf, want2));
  assert_non_null(strstr(errs.buf, "overlap"));
  bc_ctx_free(ctx);
}

static void test_check_detects_bad_alias(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = ib_stack(ctx, IB_PRE_LN, 1, 1, 8, 16, 2, 32);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  // n2 = ADD_LN(x, a) -> (h2, s), n3 = FFN(h2) -> f, n4 = ADD_LN(s, f) -> y.
  // Claim f reuses s's buffer although s is still read at n4: bcM_check
  // must refuse the shared storage.
  int s = g->nodes[2].out[1], f = g->nodes[3].out[0];
  assert_int_equal(g->nodes[4].in[0], s);
  assert_int_equal(g->vals[f].alias, -1);
  g->vals[f].alias = s;
  g->vals[f].offset = g->vals[s].offset;
  assert_int_equal(bcM_check(g), BC_EINTERNAL);
  assert_non_null(strstr(errs.buf, "live"));
  // And the planner refuses to plan it.
  errs.len = 0;
  assert_int_equal(bcM_plan(g), BC_EINTERNAL);
  assert_non_null(strstr(errs.buf, "cannot reuse"));
  bc_ctx_free(ctx);
}

static void test_check_unplanned(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = ib_stack(ctx, IB_POST_LN, 1, 1, 8, 16, 2, 32);
  assert_non_null(g);
  assert_int_equal(bcM_check(g), BC_EINTERNAL);
  bc_ctx_free(ctx);
}

// --- the shipped graphs: the arena today ------------------------------------------------------
//
// Every graphs/*.blk at its default dims (and residual at a deeper size):
// the forward arena equals its liveness lower bound, and the backward's
// arena (bcM_place_shared via bcG_emit) is the size recorded when the
// training step became a layer loop (its buffers of one layer share one
// offset on every trip: 0-3.5% over the unrolled step's, e.g. bert 77070336
// -> 77922304 bytes); placement found the same sizes before and after it
// was rewritten to be near-linear, and they must not grow.  Issue 22: the
// FFN keeps its activation for the backward instead of recomputing it (one
// [rows, F] save a layer: bert 77922304 -> 96796672, post_ln 26804224 ->
// 33095680; ~3% of a GPT-2 training step, docs/analysis.md).  Issue 26:
// the forward has no [T, S] score buffer (bcrt_attention tiles on its
// stack): post_ln 409600 -> 393216 floats at these dims; the training
// step keeps each row's log sum exp instead of the [B, H, T, S] weights
// (bcrt_attention_train / _bwd): post_ln 33095680 -> 29908992 bytes, bert
// 96796672 -> 87367680.
typedef struct {
  const char *file;
  int64_t n;             // -D N=n, 0: the default
  int64_t fwd, bwd_ws;   // forward arena (floats, = its lower bound); backward workspace bytes
} shipped;

static const shipped shipped_plans[] = {
    {"bert", 0, 589824, 87367680},
    {"decoder_post_ln", 0, 393216, 41205760},
    {"decoder_pre_ln", 0, 458752, 41205760},
    {"decoder_residual", 0, 458752, 46710784},
    {"deepnorm", 0, 393216, 29908992},
    {"gpt2", 0, 688128, 87367680},
    {"llama", 0, 548864, 28008448},
    {"peri_ln", 0, 458752, 33054720},
    {"post_ln", 0, 393216, 29908992},
    {"pre_ln", 0, 458752, 29908992},
    {"pre_ln_nonorm", 0, 458752, 29908992},
    {"residual", 0, 458752, 33841152},
    {"tiny", 0, 560, 12736},
    {"transformer", 0, 458752, 68755456},
    {"residual", 24, 57344, 16048128},
};

static void test_shipped_arenas(void **state) {
  (void)state;
  int bad = 0;
  for (size_t i = 0; i < sizeof shipped_plans / sizeof shipped_plans[0]; i++) {
    const shipped *s = &shipped_plans[i];
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    char path[128];
    snprintf(path, sizeof path, "graphs/%s.blk", s->file);
    bc_define d[] = {{"N", s->n}, {"D", 64}, {"H", 2}};
    bc_graph *g = bcP_parse_file(ctx, path, d, s->n ? 3 : 0);
    if (!g) fail_msg("%s: %s", path, errs.buf);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    check_plan(g);
    char *bsrc = NULL;
    int64_t bwd = 0;
    int rc = bcG_check(NULL, g) == BC_OK ? bcG_emit(ctx, g, NULL, &bsrc, &bwd) : BC_OK;
    assert_int_equal(rc, BC_OK);
    if (g->arena_floats != s->fwd || g->arena_lower_bound != s->fwd || bwd != s->bwd_ws) {
      print_message("%s N=%lld: forward arena %lld (bound %lld), backward workspace %lld bytes; "
                    "want %lld (= the bound) and %lld\n", s->file, (long long)s->n,
                    (long long)g->arena_floats, (long long)g->arena_lower_bound, (long long)bwd,
                    (long long)s->fwd, (long long)s->bwd_ws);
      bad++;
    }
    bc_ctx_free(ctx);
  }
  if (bad) fail_msg("%d of the shipped plans changed (every one listed above)", bad);
}

// --- placement against a reference -------------------------------------------------------------
//
// bcM_place_intervals must give exactly the first planner's answer: buffers
// taken by size (largest first), then longer live range, earlier start,
// lower index; each at the lowest offset whose [offset, offset + size)
// meets no buffer placed before it that is live at a common time.  The
// reference finds that offset by trying 0 and the end of every conflicting
// buffer (quadratic, independent of plan.c's data structures).

typedef struct { int lo, hi, i; int64_t size; } ref_buf;

static int cmp_ref(const void *pa, const void *pb) {
  const ref_buf *a = pa, *b = pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->hi - a->lo != b->hi - b->lo) return a->hi - a->lo > b->hi - b->lo ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static bool ref_fits(const ref_buf *bs, int nplaced, const int64_t *off, const ref_buf *b,
                     int64_t at) {
  for (int k = 0; k < nplaced; k++) {
    const ref_buf *o = &bs[k];
    if (o->size && o->lo <= b->hi && b->lo <= o->hi && off[o->i] < at + b->size &&
        at < off[o->i] + o->size)
      return false;
  }
  return true;
}

static int64_t ref_place(int n, const int *lo, const int *hi, const int64_t *size, int64_t *off) {
  ref_buf *bs = malloc((size_t)n * sizeof *bs);
  for (int i = 0; i < n; i++) bs[i] = (ref_buf){lo[i], hi[i], i, (size[i] + 15) / 16 * 16};
  qsort(bs, (size_t)n, sizeof *bs, cmp_ref);
  int64_t top = 0;
  for (int k = 0; k < n; k++) {
    int64_t best = 0;
    if (!ref_fits(bs, k, off, &bs[k], 0)) {
      best = INT64_MAX;
      for (int j = 0; j < k; j++) {
        int64_t at = off[bs[j].i] + bs[j].size;
        if (at < best && ref_fits(bs, k, off, &bs[k], at)) best = at;
      }
    }
    off[bs[k].i] = best;
    if (best + bs[k].size > top) top = best + bs[k].size;
  }
  free(bs);
  return top;
}

static void test_place_matches_reference(void **state) {
  (void)state;
  unsigned seed = 12345;
  for (int trial = 0; trial < 300; trial++) {
    int ntimes = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 60;
    int n = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 80;
    int lo[80], hi[80];
    int64_t size[80], off[80], want[80], total, want_total;
    for (int i = 0; i < n; i++) {
      int a = (int)((seed = seed * 1103515245u + 12345u) >> 16) % ntimes;
      int b = (int)((seed = seed * 1103515245u + 12345u) >> 16) % ntimes;
      lo[i] = a < b ? a : b;
      hi[i] = a < b ? b : a;
      // few size classes (ties exercise the order), some unaligned, some 0
      size[i] = (int64_t)((seed = seed * 1103515245u + 12345u) >> 16) % 5 * 24;
    }
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    assert_int_equal(bcM_place_intervals(ctx, ntimes, n, lo, hi, size, off, &total), BC_OK);
    want_total = ref_place(n, lo, hi, size, want);
    if (total != want_total) fail_msg("trial %d: arena %lld, want %lld", trial, (long long)total, (long long)want_total);
    for (int i = 0; i < n; i++)
      if (off[i] != want[i])
        fail_msg("trial %d: buffer %d [%d, %d] size %lld at %lld, want %lld", trial, i, lo[i],
                 hi[i], (long long)size[i], (long long)off[i], (long long)want[i]);
    bc_ctx_free(ctx);
  }
}

// A backward's shape: n activations nested around the middle ([i, 2n - i],
// all live at once, so each is placed on top of the others) and n short
// gradient buffers between them.  The first planner walked every time step
// of every live range and every buffer live there: about n^3 / 3 steps
// (3 * 10^11 for n = 10^4, minutes).  Now the cost must stay within a small
// multiple of n log n, and doubling n may not much more than double it.
static int64_t nested_work(int n, int64_t *total) {
  int m = 2 * n;
  int *lo = malloc((size_t)m * sizeof(int)), *hi = malloc((size_t)m * sizeof(int));
  int64_t *size = malloc((size_t)m * sizeof(int64_t)), *off = malloc((size_t)m * sizeof(int64_t));
  for (int i = 0; i < n; i++) {
    lo[i] = i;
    hi[i] = 2 * n - i;
    size[i] = 64 + 16 * (i % 3);
    lo[n + i] = hi[n + i] = 2 * n - i;  // a gradient at the activation's backward
    size[n + i] = 32;
  }
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  int64_t work = -1;
  assert_int_equal(bcM_place_intervals_ex(ctx, 2 * n + 1, m, lo, hi, size, off, total, &work),
                   BC_OK);
  bc_ctx_free(ctx);
  free(lo);
  free(hi);
  free(size);
  free(off);
  return work;
}

static void test_place_near_linear(void **state) {
  (void)state;
  int64_t t1, t2;
  int64_t w1 = nested_work(10000, &t1), w2 = nested_work(20000, &t2);
  print_message("placement steps: n=10000 %lld (%.1f per buffer), n=20000 %lld (%.1f)\n",
                (long long)w1, (double)w1 / 20000, (long long)w2, (double)w2 / 40000);
  // The activations are all live at the middle: the arena is their sum.
  int64_t acts = 0;
  for (int i = 0; i < 10000; i++) acts += 64 + 16 * (i % 3);
  assert_true(t1 >= acts);
  assert_true(w1 > 0);
  assert_true(w1 <= 40 * 20000 * 15);  // 40 steps per buffer and level of the tree
  assert_true(w2 <= w1 * 25 / 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ratio),
      cmocka_unit_test(test_ratio_sweep),
      cmocka_unit_test(test_huge_graph),
      cmocka_unit_test(test_scratch_shapes),
      cmocka_unit_test(test_aliases_share_storage),
      cmocka_unit_test(test_idempotent),
      cmocka_unit_test(test_identity),
      cmocka_unit_test(test_output_is_add_ln_sum),
      cmocka_unit_test(test_value_read_twice),
      cmocka_unit_test(test_workspace_limit),
      cmocka_unit_test(test_scratch_elems_limit),
      cmocka_unit_test(test_check_detects_overlap),
      cmocka_unit_test(test_check_detects_bad_alias),
      cmocka_unit_test(test_check_unplanned),
      cmocka_unit_test(test_shipped_arenas),
      cmocka_unit_test(test_place_matches_reference),
      cmocka_unit_test(test_place_near_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
