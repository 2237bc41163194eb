// test_generate.c — the token loop (compiler/generate.c) over a scripted
// step: the prompt in one call at pos 0, then one token per call at the
// following positions; stop ids (kept in the output), the bound of the
// stepped dim, max_new = 0, the token callback, bad prompts and options
// with their messages, NaN logits, and sampled generation reproducible from
// its seed and equal to bcrt_sample driven by hand.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

#define V 11

// The scripted model: the next token's logits peak at (last id * 3 + pos) % V,
// with a smooth shape so sampling has several plausible tokens.
typedef struct script {
  int calls;
  long t[64], pos[64];
  int32_t last[64];
  bool nan_at_call;        // call index nan_call gives NaN logits
  int nan_call;
  int fail_call;           // -1: never; else that call fails with BC_EINPUT
  bc_ctx *ctx;
} script;

static int script_step(void *opaque, const int32_t *ids, long t, long pos, float *logits) {
  script *s = opaque;
  int k = s->calls++;
  assert_true(k < 64);
  s->t[k] = t;
  s->pos[k] = pos;
  s->last[k] = ids[t - 1];
  if (k == s->fail_call) return bc_error(s->ctx, BC_EINPUT, "error: the step failed");
  int peak = (int)((ids[t - 1] * 3 + pos + t - 1) % V);
  for (int v = 0; v < V; v++) {
    int d = abs(v - peak);
    logits[v] = s->nan_at_call && k == s->nan_call ? NAN : -0.7f * (float)d;
  }
  return BC_OK;
}

static int run(script *s, tu_errors *errs, const int32_t *prompt, long np, long bound,
               const bc_gen_opts *o, int32_t *out, bc_gen_result *r) {
  bc_ctx *ctx = tu_ctx(errs);
  s->ctx = ctx;
  int st = bcX_generate(ctx, V, bound, prompt, np, o, script_step, s, NULL, NULL, out, 64, r);
  bc_ctx_free(ctx);
  return st;
}

static void test_greedy_loop(void **state) {
  (void)state;
  script s = {.fail_call = -1};
  tu_errors errs;
  int32_t prompt[3] = {4, 1, 7}, out[64];
  bc_gen_opts o = {.max_new = 5, .top_p = 1};
  bc_gen_result r;
  assert_int_equal(run(&s, &errs, prompt, 3, 100, &o, out, &r), BC_OK);
  assert_int_equal(r.n, 5);
  assert_int_equal(r.end, BC_GEN_MAX);
  assert_int_equal(r.prompt, 3);
  assert_int_equal(r.steps, 4);  // the 5th token is never fed back
  assert_int_equal(s.calls, 5);
  assert_int_equal(s.t[0], 3);   // the prompt in one call at pos 0
  assert_int_equal(s.pos[0], 0);
  int32_t last = 7;
  long pos = 2;
  for (int i = 0; i < 5; i++) {
    int32_t want = (int32_t)((last * 3 + pos) % V);
    assert_int_equal(out[i], want);
    if (i + 1 < 5) {  // then fed back at the next position, one token
      assert_int_equal(s.t[i + 1], 1);
      assert_int_equal(s.pos[i + 1], pos + 1);
      assert_int_equal(s.last[i + 1], want);
    }
    last = want;
    pos++;
  }
}

static void test_stop_and_bound(void **state) {
  (void)state;
  tu_errors errs;
  int32_t prompt[3] = {4, 1, 7}, out[64], first[64];
  bc_gen_opts o = {.max_new = 20, .top_p = 1};
  bc_gen_result r;
  script s = {.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 3, 100, &o, first, &r), BC_OK);
  // Stop at the third token's id: three tokens, the stop id kept.
  int32_t stop[2] = {first[2], 10000};
  int want = first[0] == stop[0] ? 1 : first[1] == stop[0] ? 2 : 3;
  o.stop = stop;
  o.nstop = 1;
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 3, 100, &o, out, &r), BC_OK);
  assert_int_equal(r.end, BC_GEN_STOP);
  assert_int_equal(r.n, want);
  assert_int_equal(out[r.n - 1], stop[0]);
  // The bound: 3 prompt positions of 5, so tokens come from the logits of
  // positions 2, 3 and 4; the last is kept, never fed.
  o.nstop = 0;
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 3, 5, &o, out, &r), BC_OK);
  assert_int_equal(r.end, BC_GEN_BOUND);
  assert_int_equal(r.n, 3);
  assert_int_equal(s.calls, 3);
  assert_int_equal(s.pos[2], 4);
  assert_memory_equal(out, first, 3 * sizeof *out);
  // A prompt that fills the bound still gives one token.
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 3, 3, &o, out, &r), BC_OK);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.end, BC_GEN_BOUND);
  // max_new = 0: nothing is run.
  o.max_new = 0;
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 3, 5, &o, out, &r), BC_OK);
  assert_int_equal(r.n, 0);
  assert_int_equal(s.calls, 0);
}

static int stop_after_two(void *opaque, int32_t id) {
  (void)id;
  return ++*(int *)opaque == 2;
}

static void test_callback(void **state) {
  (void)state;
  script s = {.fail_call = -1};
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  s.ctx = ctx;
  int32_t prompt[1] = {2}, out[64];
  bc_gen_opts o = {.max_new = 9, .top_p = 1};
  bc_gen_result r;
  int seen = 0;
  assert_int_equal(bcX_generate(ctx, V, 100, prompt, 1, &o, script_step, &s, stop_after_two,
                                &seen, out, 64, &r), BC_OK);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.end, BC_GEN_CALLBACK);
  bc_ctx_free(ctx);
}

static void expect_fail(const int32_t *prompt, long np, long bound, const bc_gen_opts *o,
                        int want_st, const char *want) {
  script s = {.fail_call = -1};
  tu_errors errs;
  int32_t out[64];
  bc_gen_result r;
  assert_int_equal(run(&s, &errs, prompt, np, bound, o, out, &r), want_st);
  if (!strstr(errs.buf, want)) fail_msg("expected '%s' in: %s", want, errs.buf);
}

static void test_errors(void **state) {
  (void)state;
  int32_t prompt[4] = {1, 2, 3, 4}, bad[2] = {1, V};
  bc_gen_opts o = {.max_new = 3, .top_p = 1};
  expect_fail(prompt, 4, 3, &o, BC_EINPUT, "the prompt has 4 tokens; the model holds 3 positions");
  expect_fail(prompt, 0, 3, &o, BC_EUSAGE, "the prompt is empty");
  expect_fail(bad, 2, 9, &o, BC_EINPUT, "prompt token 1: id 11 is outside 0..10");
  bc_gen_opts t = o;
  t.temperature = -1;
  expect_fail(prompt, 2, 9, &t, BC_EUSAGE, "temperature -1");
  t = o;
  t.top_p = 0;
  expect_fail(prompt, 2, 9, &t, BC_EUSAGE, "top-p 0 is outside (0, 1]");
  t = o;
  t.top_k = -2;
  expect_fail(prompt, 2, 9, &t, BC_EUSAGE, "top-k -2 is negative");
  int32_t stop[1] = {V};
  t = o;
  t.stop = stop;
  t.nstop = 1;
  expect_fail(prompt, 2, 9, &t, BC_EUSAGE, "stop id 11 is outside 0..10");
  // NaN logits at the second call: an error naming the position; the first
  // token is in the output.
  script s = {.fail_call = -1, .nan_at_call = true, .nan_call = 1};
  tu_errors errs;
  int32_t out[64];
  bc_gen_result r;
  assert_int_equal(run(&s, &errs, prompt, 2, 9, &o, out, &r), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "the logits of position 2 are all NaN or -inf"));
  assert_int_equal(r.n, 1);
  // A failing step: its status, no more calls.
  s = (script){.fail_call = 1};
  assert_int_equal(run(&s, &errs, prompt, 2, 9, &o, out, &r), BC_EINPUT);
  assert_int_equal(s.calls, 2);
}

// Sampled generation: a pure function of the seed, equal to bcrt_sample
// applied by hand to the same logits.
static void test_sampling_reproducible(void **state) {
  (void)state;
  tu_errors errs;
  int32_t prompt[2] = {3, 5}, a[64], b[64], c[64];
  bc_gen_opts o = {.max_new = 30, .temperature = 1.3, .top_k = 6, .top_p = 0.9, .seed = 77};
  bc_gen_result r;
  script s = {.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 2, 100, &o, a, &r), BC_OK);
  assert_int_equal(r.n, 30);
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 2, 100, &o, b, &r), BC_OK);
  assert_memory_equal(a, b, sizeof(int32_t) * 30);
  o.seed = 78;
  s = (script){.fail_call = -1};
  assert_int_equal(run(&s, &errs, prompt, 2, 100, &o, c, &r), BC_OK);
  assert_true(memcmp(a, c, sizeof(int32_t) * 30) != 0);
  // By hand.
  bcrt_rng rng;
  bcrt_rng_seed(&rng, 77);
  int32_t scratch[V], last = 5;
  float logits[V];
  long pos = 1;
  for (int i = 0; i < 30; i++) {
    int peak = (int)((last * 3 + pos) % V);
    for (int v = 0; v < V; v++) logits[v] = -0.7f * (float)abs(v - peak);
    int id = bcrt_sample(logits, V, 1.3, 6, 0.9, &rng, scratch);
    assert_int_equal(a[i], id);
    last = id;
    pos++;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_loop),
      cmocka_unit_test(test_stop_and_bound),
      cmocka_unit_test(test_callback),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_sampling_reproducible),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
