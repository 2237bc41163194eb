// test_generate.c — generation.  The token loop (compiler/generate.c) over
// a scripted step: the prompt in one call at pos 0, then one token per call
// at the following positions; stop ids (kept in the output), the bound of
// the stepped dim, max_new = 0, the token callback, bad prompts and options
// with their messages, NaN logits, and sampled generation reproducible from
// its seed and equal to bcrt_sample driven by hand.  Then `blockc generate`
// on examples/generate/tiny_lm.blk (random weights) and its tokenizer: the
// same ids on jit, interp and aot, greedy and sampled; --json; the bound;
// --stop; text equal to the decoded ids; every usage and input error; and
// blockc_generate giving the CLI's ids.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockc.h"
#include "blockc_rt.h"
#include "blockc_tok.h"

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


// --- blockc generate ------------------------------------------------------------

#define GRAPH "examples/generate/tiny_lm.blk"
#define TOKJ "examples/generate/tokenizer.json"

static tu_run_result R;

#define GEN(r, ...)                                                   \
  do {                                                                \
    const char *a_[] = {"generate", GRAPH, __VA_ARGS__, NULL};        \
    tu_run(r, a_);                                                  \
  } while (0)

// The ids of an --ids run's stdout.
static int parse_ids(const char *s, int *ids, int cap) {
  int n = 0;
  char *end;
  for (long v = strtol(s, &end, 10); end != s && n < cap; v = strtol(s, &end, 10)) {
    ids[n++] = (int)v;
    s = end;
  }
  return n;
}

static void test_cli_backends_agree(void **state) {
  (void)state;
  static char first[3][1 << 16], sampled[3][1 << 16];
  const char *be[3] = {"jit", "interp", "aot"};
  for (int b = 0; b < 3; b++) {
    GEN(&R, "--random-weights", "1", "--prompt-ids", "5,9,200,17", "--max-new-tokens", "24",
        "--backend", be[b]);
    tu_expect_run(&R, 0, NULL, "prompt eval");
    assert_non_null(strstr(R.err, "4 tokens"));
    snprintf(first[b], sizeof first[b], "%s", R.out);
    GEN(&R, "--random-weights", "1", "--prompt-ids", "5,9,200,17", "--max-new-tokens", "24",
        "--backend", be[b], "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95",
        "--seed", "11");
    tu_expect_run(&R, 0, NULL, NULL);
    snprintf(sampled[b], sizeof sampled[b], "%s", R.out);
  }
  int ids[64];
  assert_int_equal(parse_ids(first[0], ids, 64), 24);
  assert_int_equal(parse_ids(sampled[0], ids, 64), 24);
  for (int b = 1; b < 3; b++) {
    if (strcmp(first[0], first[b])) fail_msg("greedy: jit %s vs %s %s", first[0], be[b], first[b]);
    if (strcmp(sampled[0], sampled[b]))
      fail_msg("sampled: jit %s vs %s %s", sampled[0], be[b], sampled[b]);
  }
  assert_true(strcmp(first[0], sampled[0]) != 0);
  // Another seed, other ids; the same seed, the same ids.
  GEN(&R, "--random-weights", "1", "--prompt-ids", "5,9,200,17", "--max-new-tokens", "24",
      "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "12");
  tu_expect_run(&R, 0, NULL, NULL);
  assert_true(strcmp(R.out, sampled[0]) != 0);
}

static void test_cli_json_bound_stop(void **state) {
  (void)state;
  GEN(&R, "--random-weights", "2", "--prompt-ids", "1,2,3", "--max-new-tokens", "5",
      "--temperature", "0.5", "--seed", "3", "--ids");
  tu_expect_run(&R, 0, NULL, NULL);
  int ids[64], n = parse_ids(R.out, ids, 64);
  assert_int_equal(n, 5);
  char want[512];
  snprintf(want, sizeof want, "\"generated_ids\": [%d, %d, %d, %d, %d]", ids[0], ids[1], ids[2],
           ids[3], ids[4]);
  GEN(&R, "--random-weights", "2", "--prompt-ids", "1,2,3", "--max-new-tokens", "5",
      "--temperature", "0.5", "--seed", "3", "--json");
  tu_expect_run(&R, 0, want, NULL);
  const char *keys[] = {"\"prompt_ids\": [1, 2, 3]", "\"text\": null", "\"end\": \"max_new_tokens\"",
                        "\"sampling\": {\"temperature\": 0.5, \"top_k\": 0, \"top_p\": 1, \"seed\": 3, "
                        "\"stop_ids\": []}", "\"prompt_tokens\": 3", "\"generated_tokens\": 5",
                        "\"decode_steps\": 4", "\"decode_ms_per_token\": ", "\"backend\": \"jit\"",
                        "\"vocab\": 264", "\"bound\": 64"};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
    if (!strstr(R.out, keys[k])) fail_msg("no %s in %s", keys[k], R.out);
  assert_int_equal(R.out[0], '{');
  assert_non_null(strstr(R.out, "}}\n"));
  // --stop at the second id: two tokens, the stop id printed.
  char stop[16];
  snprintf(stop, sizeof stop, "%d", ids[1]);
  GEN(&R, "--random-weights", "2", "--prompt-ids", "1,2,3", "--max-new-tokens", "5",
      "--temperature", "0.5", "--seed", "3", "--stop", stop, "--stop", "263");
  tu_expect_run(&R, 0, NULL, "a stop id");
  int m = parse_ids(R.out, ids + 10, 16);
  assert_int_equal(m, ids[0] == ids[1] ? 1 : 2);
  // The bound: 62 prompt positions of 64 leave 3 tokens (the last from
  // position 63), said on stderr.
  char longp[62 * 4 + 1] = "";
  for (int i = 0; i < 62; i++) strcat(longp, i ? ",7" : "7");
  GEN(&R, "--random-weights", "2", "--prompt-ids", longp, "--max-new-tokens", "10", "--ids");
  tu_expect_run(&R, 0, NULL, "stopped at the bound of T: the model holds 64 positions");
  assert_int_equal(parse_ids(R.out, ids, 64), 3);
  assert_non_null(strstr(R.err, "3 of --max-new-tokens 10 generated"));
}

static void test_cli_text(void **state) {
  (void)state;
  GEN(&R, "--random-weights", "4", "--tokenizer", TOKJ, "--prompt", "the cat in the hat",
      "--max-new-tokens", "12", "--temperature", "0.8", "--seed", "1", "--ids");
  tu_expect_run(&R, 0, NULL, NULL);
  int ids[64], n = parse_ids(R.out, ids, 64);
  assert_true(n >= 1 && n <= 12);
  GEN(&R, "--random-weights", "4", "--tokenizer", TOKJ, "--prompt", "the cat in the hat",
      "--max-new-tokens", "12", "--temperature", "0.8", "--seed", "1");
  tu_expect_run(&R, 0, NULL, NULL);
  char err[256];
  blockc_tokenizer *tk = blockc_tokenizer_load(TOKJ, err, sizeof err);
  assert_non_null(tk);
  int32_t keep[64];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (ids[i] != blockc_tokenizer_eos_id(tk)) keep[m++] = ids[i];
  char *text;
  size_t len;
  assert_int_equal(blockc_tokenizer_decode(tk, keep, (size_t)m, 1, &text, &len, err, sizeof err), 0);
  // stdout: the streamed text, then a newline
  if (strlen(R.out) != len + 1 || memcmp(R.out, text, len) || R.out[len] != '\n')
    fail_msg("streamed '%s', decoded '%s'", R.out, text);
  free(text);
  // The prompt's ids are the tokenizer's.
  int32_t *pids;
  size_t np;
  assert_int_equal(blockc_tokenizer_encode(tk, "the cat in the hat", 18, 1, &pids, &np, err,
                                           sizeof err), 0);
  GEN(&R, "--random-weights", "4", "--tokenizer", TOKJ, "--prompt", "the cat in the hat",
      "--max-new-tokens", "1", "--json");
  tu_expect_run(&R, 0, "\"text\": \"", NULL);
  char want[256] = "\"prompt_ids\": [";
  for (size_t i = 0; i < np; i++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? ", " : "", (int)pids[i]);
  strcat(want, "]");
  if (!strstr(R.out, want)) fail_msg("no %s in %s", want, R.out);
  free(pids);
  blockc_tokenizer_free(tk);
}

static void test_cli_errors(void **state) {
  (void)state;
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1,2");
  tu_expect_run(&R, 2, NULL, "generate needs --max-new-tokens N");
  GEN(&R, "--random-weights", "1", "--max-new-tokens", "3");
  tu_expect_run(&R, 2, NULL, "generate needs one prompt");
  GEN(&R, "--prompt-ids", "1", "--max-new-tokens", "3");
  tu_expect_run(&R, 2, NULL, "--weights W.safetensors or --random-weights SEED");
  GEN(&R, "--random-weights", "1", "--prompt", "hi", "--max-new-tokens", "3");
  tu_expect_run(&R, 2, NULL, "--prompt needs --tokenizer");
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1,,2", "--max-new-tokens", "3");
  tu_expect_run(&R, 2, NULL, "--prompt-ids 1,,2: expects token ids separated by commas");
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1,264", "--max-new-tokens", "3");
  tu_expect_run(&R, 1, NULL, "prompt token 1: id 264 is outside 0..263");
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1", "--max-new-tokens", "3", "--top-p", "0");
  tu_expect_run(&R, 2, NULL, "--top-p expects a number in (0, 1]");
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1", "--max-new-tokens", "3", "--temperature",
      "-1");
  tu_expect_run(&R, 2, NULL, "--temperature expects a number >= 0");
  GEN(&R, "--random-weights", "1", "--prompt-ids", "1", "--max-new-tokens", "3", "--stop", "999");
  tu_expect_run(&R, 2, NULL, "stop id 999 is outside 0..263");
  char longp[65 * 2 + 1] = "";
  for (int i = 0; i < 65; i++) strcat(longp, i ? ",7" : "7");
  GEN(&R, "--random-weights", "1", "--prompt-ids", longp, "--max-new-tokens", "3");
  tu_expect_run(&R, 1, NULL, "the prompt has 65 tokens; " GRAPH " holds 64 positions (the bound of T; -D T=N raises it)");
  const char *flt[] = {"generate", "graphs/gpt2.blk", "-D", "N=1", "-D", "D=16", "-D", "H=2",
                       "--random-weights", "1", "--prompt-ids", "1", "--max-new-tokens", "2", NULL};
  tu_run(&R, flt);
  tu_expect_run(&R, 1, NULL, "input 'x' is float; generation feeds token ids only");
  GEN(&R, "--random-weights", "1", "--tokenizer", "/nonexistent/tokenizer.json", "--prompt", "hi",
      "--max-new-tokens", "3");
  tu_expect_run(&R, 1, NULL, "/nonexistent/tokenizer.json");
}

// blockc_generate gives the CLI's ids (the same seeded weights and seed).
typedef struct {
  int n, ids[64];
} seen_ids;

static int on_tok(void *opaque, int id) {
  seen_ids *s = opaque;
  s->ids[s->n++] = id;
  return 0;
}

static void api_sink(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  int k = snprintf(e->buf + e->len, sizeof e->buf - e->len, "%s\n", msg);
  if (k > 0) e->len += (size_t)k < sizeof e->buf - e->len ? (size_t)k : 0;
}

static void test_api_generate(void **state) {
  (void)state;
  GEN(&R, "--random-weights", "6", "--prompt-ids", "3,1,4,1,5", "--max-new-tokens", "20",
      "--temperature", "1.1", "--top-k", "30", "--seed", "9");
  tu_expect_run(&R, 0, NULL, NULL);
  int cli[64], ncli = parse_ids(R.out, cli, 64);
  assert_int_equal(ncli, 20);
  blockc_model *m = blockc_new();
  tu_errors errs = {0};
  blockc_set_error_func(m, &errs, api_sink);
  assert_int_equal(blockc_load_graph(m, GRAPH), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(m, 6), BLOCKC_OK);
  assert_int_equal(blockc_compile(m), BLOCKC_OK);
  int prompt[5] = {3, 1, 4, 1, 5}, out[64];
  size_t n = 99;
  seen_ids seen = {0};
  blockc_generate_options o = {.max_new_tokens = 20, .temperature = 1.1, .top_k = 30, .seed = 9};
  assert_int_equal(blockc_generate(m, prompt, 5, &o, out, 64, &n, on_tok, &seen), BLOCKC_OK);
  assert_int_equal(n, 20);
  assert_memory_equal(out, cli, 20 * sizeof *out);
  assert_int_equal(seen.n, 20);
  assert_memory_equal(seen.ids, cli, 20 * sizeof *out);
  // greedy with a stop id: ends there, the stop id kept
  blockc_generate_options g = {.max_new_tokens = 10};
  int greedy[64];
  assert_int_equal(blockc_generate(m, prompt, 5, &g, greedy, 64, &n, NULL, NULL), BLOCKC_OK);
  assert_int_equal(n, 10);
  g.stop_ids = &greedy[2];
  g.n_stop = 1;
  assert_int_equal(blockc_generate(m, prompt, 5, &g, out, 64, &n, NULL, NULL), BLOCKC_OK);
  assert_true(n <= 3 && out[n - 1] == greedy[2]);
  // misuse and bad input: status and message, nothing generated
  assert_int_equal(blockc_generate(m, prompt, 0, &g, out, 64, &n, NULL, NULL), BLOCKC_EUSAGE);
  assert_int_equal(n, 0);
  int bad[2] = {1, 264};
  assert_int_equal(blockc_generate(m, bad, 2, &g, out, 64, &n, NULL, NULL), BLOCKC_EINPUT);
  assert_non_null(strstr(errs.buf, "prompt token 1: id 264 is outside 0..263"));
  g.max_new_tokens = 100;
  assert_int_equal(blockc_generate(m, prompt, 5, &g, out, 64, &n, NULL, NULL), BLOCKC_EUSAGE);
  assert_int_equal(blockc_generate(m, prompt, 5, NULL, out, 64, &n, NULL, NULL), BLOCKC_EUSAGE);
  int longp[65] = {0};
  g.max_new_tokens = 1;
  assert_int_equal(blockc_generate(m, longp, 65, &g, out, 64, &n, NULL, NULL), BLOCKC_EINPUT);
  blockc_delete(m);
  // A graph without token ids cannot generate.
  blockc_model *f = blockc_new();
  blockc_set_error_func(f, &errs, api_sink);
  assert_int_equal(blockc_load_graph(f, "graphs/tiny.blk"), BLOCKC_OK);
  assert_int_equal(blockc_init_weights(f, 1), BLOCKC_OK);
  assert_int_equal(blockc_compile(f), BLOCKC_OK);
  assert_int_equal(blockc_generate(f, prompt, 5, &g, out, 64, &n, NULL, NULL), BLOCKC_EUSAGE);
  assert_non_null(strstr(errs.buf, "is float (generation feeds token ids only)"));
  blockc_delete(f);
}

// --- examples/generate: the vendored generator -----------------------------------

__attribute__((format(printf, 3, 4)))
static int sh(char *out, size_t n, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  assert_true(len > 0 && (size_t)len < sizeof cmd);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  return tu_spawn(argv, out, n, NULL, 0);
}

// The README's one-line cc and the CMake build, in a folder of their own,
// print the bytes `blockc generate` prints for the same weights, prompt and
// sampling options.
static void test_vendored_generator(void **state) {
  (void)state;
  static char out[1 << 16], ref[1 << 16];
  char dir[256], cwd[512];
  tu_mktmpdir(dir, sizeof dir, "gen");
  assert_non_null(getcwd(cwd, sizeof cwd));
  const char *b = tu_blockc();
  GEN(&R, "--random-weights", "4", "--tokenizer", TOKJ, "--prompt", "the cat in the hat",
      "--max-new-tokens", "12", "--temperature", "0.8", "--seed", "1");
  tu_expect_run(&R, 0, NULL, NULL);
  snprintf(ref, sizeof ref, "%s", R.out);
  if (sh(out, sizeof out,
         "%s emit " GRAPH " -o %s --main generate && "
         "%s weights " GRAPH " -o %s/model.safetensors --seed 4 && "
         "cp " TOKJ " runtime/blockc_rt.c runtime/blockc_rt.h "
         "runtime/blockc_tok.c runtime/blockc_tok.h %s/ && cd %s && "
         "cc -O2 -I. generate.c tiny_lm.c blockc_rt.c blockc_tok.c -lopenblas -lpcre2-8 "
         "-lutf8proc -lm -o generate 2>&1",
         b, dir, b, dir, dir, dir))
    fail_msg("the one-line build failed:\n%s", out);
  // emit --main generate wrote the example (cli/generate_main.inc is not
  // stale) with the model's name defined first.
  if (sh(out, sizeof out, "cd %s && head -3 generate.c && tail -n +4 generate.c | cmp - "
         "%s/examples/generate/generate.c && echo same", dir, cwd))
    fail_msg("emit --main generate differs from examples/generate/generate.c (make "
             "cli/generate_main.inc):\n%s", out);
  assert_non_null(strstr(out, "#define BLOCKC_MODEL tiny_lm\n#define BLOCKC_MODEL_UC TINY_LM\nsame"));
  if (sh(out, sizeof out, "cd %s && ./generate model.safetensors tokenizer.json "
         "'the cat in the hat' -n 12 -t 0.8 -s 1", dir))
    fail_msg("./generate failed:\n%s", out);
  if (strcmp(out, ref)) fail_msg("./generate printed '%s', blockc generate '%s'", out, ref);
  if (sh(out, sizeof out, "cmake -S examples/generate -B %s/build -DBLOCKC_MODEL_DIR=%s "
         "-DBLOCKC_RUNTIME_DIR=%s/runtime >/dev/null && cmake --build %s/build >/dev/null 2>&1 && "
         "cd %s && ./build/generate model.safetensors tokenizer.json 'the cat in the hat' -n 12 "
         "-t 0.8 -s 1", dir, dir, cwd, dir, dir))
    fail_msg("the CMake build failed:\n%s", out);
  if (strcmp(out, ref)) fail_msg("CMake's generate printed '%s', blockc generate '%s'", out, ref);
  // Bad usage and a prompt past the bound: a message and a failing status.
  assert_int_not_equal(sh(out, sizeof out, "cd %s && ./generate model.safetensors "
                          "tokenizer.json hi -q 2>&1", dir), 0);
  assert_non_null(strstr(out, "unknown option"));
  // --main generate on a graph without token ids: an error, nothing written.
  assert_int_equal(sh(out, sizeof out, "%s emit graphs/tiny.blk -o %s/t --main generate 2>&1", b,
                      dir), 1);
  assert_non_null(strstr(out, "--main generate: the model needs one token-ids input"));
  assert_int_not_equal(sh(NULL, 0, "test -e %s/t", dir), 0);
  assert_int_equal(sh(NULL, 0, "rm -rf %s", dir), 0);
}

// bench --decode's floor: every matrix whole (the LM head too; a tied head
// keeps the embedding table whole), only one row of a table that only
// gathers read (the learned positions; the untied embedding).
static long long json_int(const char *s, const char *key) {
  const char *p = strstr(s, key);
  if (!p) fail_msg("no %s in %s", key, s);
  return strtoll(p + strlen(key), NULL, 10);
}

static void test_decode_floor(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_file(ctx, GRAPH, NULL, 0);
  assert_non_null(g);
  long long all = 0, wte = 0, wpe = 0, D = 64;
  for (int k = 0; k < g->nparams; k++) {
    long long n = bc_shape_numel(&g->params[k].shape);
    all += n;
    if (!strcmp(g->params[k].name, "wte.weight")) wte = n;
    if (!strcmp(g->params[k].name, "wpe.weight")) wpe = n;
  }
  bc_ctx_free(ctx);
  assert_true(wte == 264 * D && wpe == 64 * D);
  const char *tied[] = {"bench", GRAPH, "--decode", "--context", "8", "--iters", "3", "--json", NULL};
  tu_run(&R, tied);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_int_equal(json_int(R.out, "\"weight_bytes\": "), 4 * (all - wpe + D));
  assert_int_equal(json_int(R.out, "\"gathered_bytes\": "), 4 * D);
  // The same model with its own head: the embedding table is gathered too.
  char dir[256], path[300], *text = NULL;
  size_t len = 0;
  tu_mktmpdir(dir, sizeof dir, "floor");
  snprintf(path, sizeof path, "%s/untied.blk", dir);
  FILE *f = fopen(GRAPH, "r");
  assert_non_null(f);
  assert_true(getdelim(&text, &len, '\0', f) > 0);
  fclose(f);
  char *head = strstr(text, "params=wte)\noutput");
  assert_non_null(head);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%.*sparams=lm_head)\noutput%s", (int)(head - text), text,
          head + strlen("params=wte)\noutput"));
  fclose(f);
  free(text);
  const char *untied[] = {"bench", path, "--decode", "--context", "8", "--iters", "3", "--json", NULL};
  tu_run(&R, untied);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_int_equal(json_int(R.out, "\"weight_bytes\": "), 4 * (all + wte - wte - wpe + 2 * D));
  assert_int_equal(json_int(R.out, "\"gathered_bytes\": "), 8 * D);
  assert_int_equal(tu_rm_rf(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_loop),
      cmocka_unit_test(test_stop_and_bound),
      cmocka_unit_test(test_callback),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_sampling_reproducible),
      cmocka_unit_test(test_cli_backends_agree),
      cmocka_unit_test(test_cli_json_bound_stop),
      cmocka_unit_test(test_cli_text),
      cmocka_unit_test(test_cli_errors),
      cmocka_unit_test(test_api_generate),
      cmocka_unit_test(test_vendored_generator),
      cmocka_unit_test(test_decode_floor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
