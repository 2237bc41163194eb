// test_train.c — `blockc train`: the token readers and their errors, the
// batch windows, the initialisation schemes, and (through the real binary,
// as test_cli.c) a tiny LM whose loss falls, the --log fields, the --svg
// plot, the resume identity and the hostile inputs of docs/hostile-inputs.md.
#define _GNU_SOURCE
#include "testutil.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static tu_run_result R;

// A tiny GPT-2-style LM over bytes: graphs/gpt2_lm.blk at D=32, 2 layers, V=64.
#define LM "graphs/gpt2_lm.blk", "-D", "D=32", "-D", "H=2", "-D", "N=2", "-D", "V=64", "-D", \
           "P=32", "-D", "T=32"

// n tokens of a repeating pattern (learnable) in 0..V-1 as an llm.c .bin.
static void write_bin(const char *path, int n, int V) {
  size_t len = 1024 + 2 * (size_t)n;
  unsigned char *d = calloc(len, 1);
  assert_non_null(d);
  int32_t h[3] = {20240520, 1, n};
  memcpy(d, h, sizeof h);
  for (int i = 0; i < n; i++) {
    int v = (i * 7 + i / 5) % V;
    d[1024 + 2 * i] = (unsigned char)v, d[1024 + 2 * i + 1] = 0;
  }
  tu_write_bytes(path, d, len);
  free(d);
}

// A 1-D .npy of n elements of descr with the given raw data.
static void write_npy(const char *path, const char *descr, const char *shape, const void *data,
                      size_t bytes) {
  char hdr[128];
  int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                   shape);
  while ((10 + k + 1) % 64) hdr[k++] = ' ';
  hdr[k++] = '\n';
  unsigned char *d = malloc(10 + (size_t)k + bytes + 1);
  assert_non_null(d);
  memcpy(d, "\x93NUMPY\x01\x00", 8);
  d[8] = (unsigned char)(k & 255), d[9] = (unsigned char)(k >> 8);
  memcpy(d + 10, hdr, (size_t)k);
  if (bytes) memcpy(d + 10 + k, data, bytes);
  tu_write_bytes(path, d, 10 + (size_t)k + bytes);
  free(d);
}

// --- readers ----------------------------------------------------------------

static void read_ok(const char *path, tr_tokens *t) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  int st = tr_tokens_read(ctx, path, t);
  if (st) print_error("%s\n", e.buf);
  assert_int_equal(st, BC_OK);
  bc_ctx_free(ctx);
}

static void read_fails(const char *path, const char *want) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  tr_tokens t;
  int st = tr_tokens_read(ctx, path, &t);
  if (st == BC_OK || !strstr(e.buf, want)) {
    print_error("rc %d, errors: %s (want '%s')\n", st, e.buf, want);
    fail();
  }
  assert_null(t.tok);
  bc_ctx_free(ctx);
}

static void test_readers(void **state) {
  (void)state;
  char dir[256], p[512];
  tu_mktmpdir(dir, sizeof dir, "train-rd");
  tr_tokens t;
  snprintf(p, sizeof p, "%s/a.bin", dir);
  write_bin(p, 100, 64);
  read_ok(p, &t);
  assert_int_equal(t.n, 100);
  assert_int_equal(t.tok[3], (3 * 7) % 64);
  assert_int_equal(t.off, 1024);
  tr_tokens_free(&t);
  int32_t i4[5] = {1, 2, 3, 70000, 0};
  snprintf(p, sizeof p, "%s/a.npy", dir);
  write_npy(p, "<i4", "(5,)", i4, sizeof i4);
  read_ok(p, &t);
  assert_int_equal(t.n, 5);
  assert_int_equal(t.tok[3], 70000);
  tr_tokens_free(&t);
  uint16_t u2[4] = {65535, 1, 2, 3};
  write_npy(p, "<u2", "(4,)", u2, sizeof u2);
  read_ok(p, &t);
  assert_int_equal(t.tok[0], 65535);
  assert_int_equal(t.size, 2);
  // ids >= V: the message names the index, byte offset and value.
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  assert_int_equal(tr_tokens_check(ctx, &t, 100, 1), BC_EINPUT);
  if (!strstr(e.buf, "token 0 (byte offset 128) is 65535, outside 0..99")) print_error("%s\n", e.buf);
  assert_non_null(strstr(e.buf, "token 0 (byte offset 128) is 65535, outside 0..99"));
  bc_ctx_free(ctx);
  ctx = tu_ctx(&e);
  t.tok[0] = 5;
  assert_int_equal(tr_tokens_check(ctx, &t, 100, 3), BC_EINPUT);  // 4 tokens < T + 2 = 5
  assert_non_null(strstr(e.buf, "too short for --seq 3"));
  bc_ctx_free(ctx);
  tr_tokens_free(&t);
  // Errors: empty, short .bin header, wrong version, truncated, bad dtype, rank 2, garbage.
  snprintf(p, sizeof p, "%s/e", dir);
  tu_write_bytes(p, "", 0);
  read_fails(p, "the token file is empty");
  int32_t h[4] = {20240520, 1, 10, 0};
  tu_write_bytes(p, h, sizeof h);
  read_fails(p, "needs its 1024-byte header");
  unsigned char big[1024 + 20] = {0};
  memcpy(big, h, 12);
  tu_write_bytes(p, big, 1024 + 19);
  read_fails(p, "the header says 10 tokens (1044 bytes), the file has 1043 bytes");
  h[1] = 2;
  memcpy(big, h, 12);
  tu_write_bytes(p, big, sizeof big);
  read_fails(p, "llm.c .bin version 2");
  float f[2] = {1, 2};
  write_npy(p, "<f4", "(2,)", f, sizeof f);
  read_fails(p, "int32 ('<i4') or uint16 ('<u2'), this one is '<f4'");
  write_npy(p, "<i4", "(1, 2)", i4, 8);
  read_fails(p, "1-D arrays; this .npy has rank 2");
  write_npy(p, "<i4", "(5,)", i4, 16);
  read_fails(p, "the header says 5 tokens (20 bytes), the file holds 16 data bytes");
  tu_write_bytes(p, "hello world", 11);
  read_fails(p, "not a token file");
  assert_int_equal(tu_rm_rf(dir), 0);
}

// --- windows ------------------------------------------------------------------

static void test_windows(void **state) {
  (void)state;
  // ((k*B + r) * T) mod (n - T - 1), exactly.
  int64_t n = 1000;
  long B = 4, T = 16;
  for (int64_t k = 0; k < 50; k++)
    for (long r = 0; r < B; r++)
      assert_int_equal(tr_window_seq(k, B, r, T, n), ((k * B + r) * T) % (n - T - 1));
  // No overflow far out: k*B*T past 2^64.
  int64_t k = (int64_t)1 << 60;
  assert_true(tr_window_seq(k, 64, 3, 1024, n) < n - 1024 - 1 || n < 1024);
  assert_int_equal(tr_window_seq(k, 1, 0, 1, 7), (int64_t)(((unsigned __int128)k) % 5));
  // Random: the same seed, the same starts; all in range; another seed differs.
  bcrt_rng a, b, c;
  bcrt_rng_seed(&a, 42), bcrt_rng_seed(&b, 42), bcrt_rng_seed(&c, 43);
  int same = 0;
  for (int i = 0; i < 200; i++) {
    int64_t x = tr_window_rand(&a, T, n), y = tr_window_rand(&b, T, n), z = tr_window_rand(&c, T, n);
    assert_int_equal(x, y);
    assert_true(x >= 0 && x < n - T - 1);
    same += x == z;
  }
  assert_true(same < 20);
  // tr_fill: inputs and targets shifted by one.
  int32_t tok[40];
  for (int i = 0; i < 40; i++) tok[i] = i;
  tr_tokens t = {.tok = tok, .n = 40};
  int64_t starts[2] = {3, 20};
  int32_t ids[8], tg[8];
  tr_fill(&t, starts, 2, 4, ids, tg);
  assert_int_equal(ids[0], 3), assert_int_equal(tg[0], 4), assert_int_equal(ids[7], 23),
      assert_int_equal(tg[7], 24);
}

// --- init schemes ----------------------------------------------------------------

#define INIT_G "model m\ndim B = 1\ndim T = 4\ndim D = 64\ndim V = 500\ndim F = 256\n" \
               "input ids : tokens[B, T]\n"                                           \
               "e = Embedding(ids, vocab=V, dim=D, params=emb)\n"                     \
               "for i in 0..2 as layers.{i} {\n"                                      \
               "  a = Attention(LayerNorm(e, params=ln1), heads=4, causal=true, params=attn)\n" \
               "  e = Add(e, a)\n"                                                    \
               "  f = FFN(LayerNorm(e, params=ln2), hidden=F, act=gelu, params=(fc1, fc2))\n" \
               "  e = Add(e, f)\n"                                                    \
               "}\n"                                                                  \
               "logits = Linear(e, out=V, params=head)\n"                             \
               "output logits\n"

static void stats(tu_model *m, const char *name, double *mean, double *sd, double *maxabs) {
  const float *x = tu_param(m, name);
  int64_t n = tu_param_numel(m, name);
  double s = 0, q = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) s += x[i], q += (double)x[i] * x[i], mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
  *mean = s / (double)n;
  *sd = sqrt(q / (double)n - *mean * *mean);
  *maxabs = mx;
}

static void expect_const(tu_model *m, const char *name, float v) {
  const float *x = tu_param(m, name);
  for (int64_t i = 0; i < tu_param_numel(m, name); i++)
    if (x[i] != v) {
      print_error("%s[%lld] = %g, want %g\n", name, (long long)i, (double)x[i], (double)v);
      fail();
    }
}

// sd within 10% of want (>= 16k samples: 10% is > 10 standard errors).
static void expect_sd(tu_model *m, const char *name, double want_sd, double bound) {
  double mean, sd, mx;
  stats(m, name, &mean, &sd, &mx);
  if (fabs(sd - want_sd) > 0.1 * want_sd || fabs(mean) > 0.1 * want_sd || (bound > 0 && mx > bound)) {
    print_error("%s: mean %g sd %g max %g; want sd %g, |x| <= %g\n", name, mean, sd, mx, want_sd, bound);
    fail();
  }
}

static void reinit(tu_model *m, cli_init scheme, uint64_t seed) {
  bcW_free(&m->w);
  assert_int_equal(tr_init_weights(m->ctx, m->g, scheme, seed, &m->w), BC_OK);
}

static void test_init_torch(void **state) {
  (void)state;
  tu_model *m = tu_model_new(INIT_G, NULL, 0, 1);
  reinit(m, CLI_INIT_TORCH, 7);
  double k64 = 1 / sqrt(64.0), k256 = 1 / sqrt(256.0);
  expect_sd(m, "emb.weight", 1.0, 0);                                  // nn.Embedding N(0, 1)
  expect_sd(m, "layers.0.fc1.weight", k64 / sqrt(3.0), k64);           // kaiming_uniform(a=sqrt(5))
  expect_sd(m, "layers.1.fc2.weight", k256 / sqrt(3.0), k256);
  double xav = sqrt(6.0 / (64 + 192));
  expect_sd(m, "layers.0.attn.in_proj_weight", xav / sqrt(3.0), xav);  // MHA xavier in_proj
  expect_sd(m, "layers.0.attn.out_proj.weight", k64 / sqrt(3.0), k64);
  expect_const(m, "layers.0.attn.in_proj_bias", 0);
  expect_const(m, "layers.0.attn.out_proj.bias", 0);
  expect_const(m, "layers.1.ln1.weight", 1);
  expect_const(m, "layers.1.ln1.bias", 0);
  double mean, sd, mx;
  stats(m, "layers.0.fc1.bias", &mean, &sd, &mx);  // U(+-1/sqrt(fan_in)), 256 samples
  assert_true(mx <= k64 && mx > 0.5 * k64);
  // Seeded: the same seed reproduces, another differs.
  float first = tu_param(m, "head.weight")[0];
  reinit(m, CLI_INIT_TORCH, 7);
  assert_true(first == tu_param(m, "head.weight")[0]);
  reinit(m, CLI_INIT_TORCH, 8);
  assert_true(first != tu_param(m, "head.weight")[0]);
  tu_model_free(m);
}

static void test_init_gpt2(void **state) {
  (void)state;
  tu_model *m = tu_model_new(INIT_G, NULL, 0, 1);
  reinit(m, CLI_INIT_GPT2, 3);
  expect_sd(m, "emb.weight", 0.02, 0);
  expect_sd(m, "layers.0.fc1.weight", 0.02, 0);
  expect_sd(m, "layers.0.attn.in_proj_weight", 0.02, 0);
  expect_sd(m, "layers.0.attn.out_proj.weight", 0.02 / 2.0, 0);  // R = 4 residual branches
  expect_sd(m, "layers.1.fc2.weight", 0.02 / 2.0, 0);
  expect_sd(m, "head.weight", 0.02, 0);
  expect_const(m, "layers.0.fc1.bias", 0);
  expect_const(m, "layers.1.fc2.bias", 0);
  expect_const(m, "head.bias", 0);
  expect_const(m, "layers.0.ln2.weight", 1);
  reinit(m, CLI_INIT_XAVIER, 3);  // xavier is bcW_init_random's
  bc_weights w;
  assert_int_equal(bcW_init_random(m->ctx, m->g, 3, &w), BC_OK);
  for (int p = 0; p < m->g->nparams; p++)
    assert_memory_equal(w.p[p], m->w.p[p], (size_t)bc_shape_numel(&m->g->params[p].shape) * 4);
  bcW_free(&w);
  tu_model_free(m);
}

// --- the command --------------------------------------------------------------------

typedef struct {
  char dir[256], data[512], val[512];
} fixture;

static void fixture_new(fixture *f, const char *name) {
  tu_mktmpdir(f->dir, sizeof f->dir, name);
  snprintf(f->data, sizeof f->data, "%s/train.bin", f->dir);
  snprintf(f->val, sizeof f->val, "%s/val.bin", f->dir);
  write_bin(f->data, 4000, 64);
  write_bin(f->val, 500, 64);
}

// The "loss" values of a --log file, in order; checks every line's keys.
static int read_log(const char *path, double *loss, int cap, int *nval) {
  size_t len;
  char *s = tu_slurp(path, &len);
  assert_non_null(s);
  int n = 0;
  *nval = 0;
  for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
    char key[5][16] = {"\"step\":", "\"loss\":", "\"lr\":", "\"grad_norm\":", "\"ms\":"};
    assert_true(line[0] == '{' && line[strlen(line) - 1] == '}');
    const char *at = line;
    for (int k = 0; k < 5; k++) {  // exactly these names, in this order
      const char *q = strstr(at, key[k]);
      if (!q) print_error("no %s in %s\n", key[k], line);
      assert_non_null(q);
      at = q;
    }
    *nval += strstr(line, "\"val_loss\":") != NULL;
    if (n < cap) loss[n] = strtod(strstr(line, "\"loss\":") + 7, NULL);
    n++;
  }
  free(s);
  return n;
}

static void test_lm_learns(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-lm");
  char log[600], svg[600];
  snprintf(log, sizeof log, "%s/log.jsonl", f.dir);
  snprintf(svg, sizeof svg, "%s/loss.svg", f.dir);
  TU_RUN(&R, "train", LM, "--data", f.data, "--val", f.val, "--steps", "40", "--batch", "4", "--seq",
      "16", "--lr", "3e-3", "--init", "gpt2", "--eval-every", "20", "--eval-batches", "2",
      "--log", log, "--svg", svg);
  tu_expect_run(&R, 0, "val loss", NULL);
  assert_non_null(strstr(R.out, "step 40/40"));
  assert_non_null(strstr(R.out, "tok/s"));
  assert_non_null(strstr(R.out, "ETA"));
  double loss[64];
  int nval;
  assert_int_equal(read_log(log, loss, 64, &nval), 40);
  assert_int_equal(nval, 2);  // steps 20 and 40
  // ln(64) = 4.16 at the start; the pattern is learnable.
  if (!(loss[0] > 3.5 && loss[39] < loss[0] - 1.0)) {
    print_error("loss %g -> %g\n", loss[0], loss[39]);
    fail();
  }
  size_t len;
  char *s = tu_slurp(svg, &len);
  assert_non_null(s);
  assert_true(!strncmp(s, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39));
  assert_non_null(strstr(s, "</svg>\n"));
  assert_int_equal(strstr(s, "</svg>\n") + 7 - s, (long)len);
  assert_non_null(strstr(s, "<polyline"));
  int lt = 0, gt = 0;
  for (size_t i = 0; i < len; i++) lt += s[i] == '<', gt += s[i] == '>';
  assert_int_equal(lt, gt);
  free(s);
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

static void test_resume_identity(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-resume");
  char full[600], half[600], res[600];
  snprintf(full, sizeof full, "%s/full.safetensors", f.dir);
  snprintf(half, sizeof half, "%s/half.safetensors", f.dir);
  snprintf(res, sizeof res, "%s/res.safetensors", f.dir);
  const char *orders[2] = {"random", "sequential"};
  for (int o = 0; o < 2; o++) {
#define TR_COMMON "train", LM, "--data", f.data, "--steps", "12", "--batch", "2", "--seq", "16",  \
                  "--lr", "2e-3", "--schedule", "cosine", "--warmup", "3", "--accum", "2",        \
                  "--init", "torch", "--data-order", orders[o]
    TU_RUN(&R, TR_COMMON, "--out", full);
    tu_expect_run(&R, 0, NULL, NULL);
    TU_RUN(&R, TR_COMMON, "--out", half, "--stop-after", "6");
    tu_expect_run(&R, 0, "stopped after step 6", NULL);
    TU_RUN(&R, TR_COMMON, "--resume", half, "--out", res);
    tu_expect_run(&R, 0, "resumed", NULL);
    assert_true(tu_same_file(full, res));  // bit for bit
    char fo[700], ro[700];
    snprintf(fo, sizeof fo, "%s/full.optim.safetensors", f.dir);
    snprintf(ro, sizeof ro, "%s/res.optim.safetensors", f.dir);
    assert_true(tu_same_file(fo, ro));
    size_t na;
    char *a = tu_slurp(fo, &na);
    assert_non_null(a);
    assert_non_null(strstr(a + 8, "\"exp_avg.transformer.wte.weight\""));  // after the length
    assert_non_null(strstr(a + 8, "\"exp_avg_sq.transformer.h.1.mlp.c_proj.weight\""));
    assert_non_null(strstr(a + 8, "\"blockc.step\":\"12\""));
    free(a);
  }
  // The trained weights load into generate.
  TU_RUN(&R, "generate", LM, "--weights", full, "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--ids");
  tu_expect_run(&R, 0, NULL, NULL);
  // A checkpoint of another graph (D=16) is refused, naming the mismatch.
  TU_RUN(&R, "train", "graphs/gpt2_lm.blk", "-D", "D=16", "-D", "H=2", "-D", "N=2", "-D", "V=64", "-D",
      "P=32", "-D", "T=32", "--data", f.data, "--steps", "12", "--batch", "2", "--seq", "16",
      "--resume", full);
  tu_expect_run(&R, 1, NULL, "shape");
  // A torn pair (weights of another step than the optimizer state).
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "12", "--batch", "2", "--seq", "16",
      "--optimizer", "sgd", "--resume", full);
  tu_expect_run(&R, 1, NULL, "the optimizer state is adamw's, this run's --optimizer is sgd");
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// Whether tensor `name` has the same bytes in two checkpoints.
static bool same_tensor(const char *a, const char *b, const char *name) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_st_file *fa, *fb;
  if (bcS_open(ctx, a, &fa) || bcS_open(ctx, b, &fb)) fail_msg("%s", e.buf);
  const bc_st_tensor *ta = bcS_find(fa, name), *tb = bcS_find(fb, name);
  if (!ta || !tb) fail_msg("no tensor '%s'", name);
  int64_t n = 1;
  for (int d = 0; d < ta->rank; d++) n *= ta->shape[d];
  float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
  assert_non_null(x), assert_non_null(y);
  if (bcS_read_f32(ctx, fa, ta, x) || bcS_read_f32(ctx, fb, tb, y)) fail_msg("%s", e.buf);
  bool same = tb->end - tb->begin == ta->end - ta->begin && !memcmp(x, y, (size_t)n * 4);
  free(x), free(y);
  bcS_close(fa), bcS_close(fb);
  bc_ctx_free(ctx);
  return same;
}

// The weight-decay rule.  AdamW's decay is decoupled and per parameter, so
// after one step a rule that differs on a tensor changes that tensor and
// nothing else: --no-decay exempts exactly the names it matches, --decay
// all adds the norm gains (biases start at 0, where decay does nothing).
static void test_decay_rule(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-decay");
  char base[600], nod[600], all[600];
  snprintf(base, sizeof base, "%s/base.safetensors", f.dir);
  snprintf(nod, sizeof nod, "%s/nod.safetensors", f.dir);
  snprintf(all, sizeof all, "%s/all.safetensors", f.dir);
#define DC "train", LM, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16", "--lr", \
           "1e-2", "--weight-decay", "0.5", "--init", "torch"
  TU_RUN(&R, DC, "--out", base);
  tu_expect_run(&R, 0, "weight decay 0.5 on the 10 parameters of rank >= 2 (matrices, tables); "
                "not on the 18 biases and norm gains", NULL);
  TU_RUN(&R, DC, "--no-decay", "*.wte.weight", "--no-decay", "transformer.h.1.*", "--out", nod);
  tu_expect_run(&R, 0, "weight decay 0.5 on 5 of the 28 parameters (--decay matrices, less the "
                "--no-decay names)", NULL);
  TU_RUN(&R, DC, "--decay", "all", "--out", all);
  tu_expect_run(&R, 0, "weight decay 0.5 on 28 of the 28 parameters (--decay all)", NULL);
  const char *ln = "transformer.ln_f.weight", *wte = "transformer.wte.weight",
             *h0 = "transformer.h.0.mlp.c_fc.weight", *h1 = "transformer.h.1.mlp.c_fc.weight";
  assert_false(same_tensor(base, nod, wte));
  assert_false(same_tensor(base, nod, h1));
  assert_true(same_tensor(base, nod, h0));
  assert_true(same_tensor(base, nod, ln));
  assert_false(same_tensor(base, all, ln));
  assert_true(same_tensor(base, all, wte));
  assert_true(same_tensor(base, all, h0));
  // a pattern that matches nothing (a typo would silently decay) and bad rules
  TU_RUN(&R, DC, "--no-decay", "*.wte.weigth");
  tu_expect_run(&R, 1, NULL, "--no-decay '*.wte.weigth' matches no parameter");
  TU_RUN(&R, DC, "--decay", "none");
  tu_expect_run(&R, 2, NULL, "--decay expects matrices or all, got 'none'");
  TU_RUN(&R, DC, "--no-decay", "");
  tu_expect_run(&R, 2, NULL, "--no-decay expects a name pattern");
#undef DC
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// The first element of tensor `name` of a safetensors file.
static float first_of(const char *path, const char *name) {
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_st_file *f;
  if (bcS_open(ctx, path, &f)) fail_msg("%s", e.buf);
  const bc_st_tensor *t = bcS_find(f, name);
  if (!t) fail_msg("no tensor '%s'", name);
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->shape[d];
  float *x = malloc((size_t)n * 4);
  assert_non_null(x);
  if (bcS_read_f32(ctx, f, t, x)) fail_msg("%s", e.buf);
  float v = x[0];
  free(x);
  bcS_close(f);
  bc_ctx_free(ctx);
  return v;
}

// Params train (issue 23): a ReZero LM whose resweight [1] starts at 0
// (init=zeros) and a LayerScale gamma [D] at const(0.5) on a silu branch;
// the loss falls, both move, and the rank-1 Params are not decayed.
#define REZERO_G "model rz\ndim B = 1\ndim T <= 32\ndim D = 32\ndim V = 64\n"              \
                 "input ids : tokens[B, T]\n"                                                \
                 "e = Embedding(ids, vocab=V, dim=D, params=wte)\n"                          \
                 "x = Positions(e, kind=learned, max=32, params=wpe)\n"                      \
                 "for i in 0..2 as layers.{i} {\n"                                           \
                 "  alpha = Param(shape=[1], params=resweight, init=zeros)\n"                \
                 "  x = Add(x, Mul(alpha, Attention(x, heads=2, causal=true, params=attn)))\n" \
                 "  x = Add(x, Mul(alpha, FFN(x, hidden=64, act=gelu, params=(fc, proj))))\n" \
                 "  g = Param(shape=[D], params=gamma, init=const(0.5))\n"                   \
                 "  x = Add(x, Mul(g, Act(Linear(x, out=D, params=lin), act=silu)))\n}\n"      \
                 "logits = Linear(x, out=V, bias=false, params=wte)\noutput logits\n"

static void test_params_train(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-param");
  char g[600], log[600], out[600];
  snprintf(g, sizeof g, "%s/rz.blk", f.dir);
  snprintf(log, sizeof log, "%s/log.jsonl", f.dir);
  snprintf(out, sizeof out, "%s/out.safetensors", f.dir);
  tu_write_bytes(g, REZERO_G, strlen(REZERO_G));
  TU_RUN(&R, "train", g, "--data", f.data, "--steps", "30", "--batch", "4", "--seq", "16", "--lr",
         "1e-2", "--log", log, "--out", out);
  tu_expect_run(&R, 0, "not on the", NULL);
  // 12 matrices and tables (wte, wpe, 5 per layer) decay; resweights, gammas, biases do not
  assert_non_null(strstr(R.out, "weight decay 0.01 on the 12 parameters of rank >= 2 (matrices, "
                                "tables); not on the 14 biases and norm gains"));
  double loss[64];
  int nval;
  assert_int_equal(read_log(log, loss, 64, &nval), 30);
  if (!(loss[29] < loss[0] - 1.0)) fail_msg("loss %g -> %g", loss[0], loss[29]);
  float a0 = first_of(out, "layers.0.resweight"), a1 = first_of(out, "layers.1.resweight");
  float g0 = first_of(out, "layers.1.gamma");
  print_message("resweight %g %g, gamma[0] %g\n", a0, a1, g0);
  assert_true(a0 != 0.0f && a1 != 0.0f && g0 != 0.5f);
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// Dropout in training: the masks of (--seed, micro-batch) are drawn (the
// loss differs from p = 0's) and a resumed run draws the same ones.
#define DROP_G "model dlm\ndim B = 1\ndim T <= 32\ndim D = 32\ndim V = 64\n"               \
               "input ids : tokens[B, T]\n"                                                   \
               "e = Embedding(ids, vocab=V, dim=D, params=wte)\n"                             \
               "x = Positions(e, kind=learned, max=32, params=wpe)\n"                         \
               "a = Attention(LayerNorm(x, params=ln_1), heads=2, causal=true, dropout=%s, "  \
               "params=attn)\nx = Add(x, a)\n"                                               \
               "f = FFN(LayerNorm(x, params=ln_2), hidden=64, act=gelu, dropout=%s, "         \
               "params=(fc, proj))\nx = Add(x, f)\n"                                         \
               "logits = Linear(LayerNorm(x, params=ln_f), out=V, bias=false, params=wte)\n"  \
               "output logits\n"

static void test_dropout_resume(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-drop");
  char g1[600], g0[600], full[600], half[600], res[600], text[2048];
  snprintf(g1, sizeof g1, "%s/d.blk", f.dir);
  snprintf(g0, sizeof g0, "%s/n.blk", f.dir);
  snprintf(text, sizeof text, DROP_G, "0.2", "0.2");
  tu_write_bytes(g1, text, strlen(text));
  snprintf(text, sizeof text, DROP_G, "0", "0");
  tu_write_bytes(g0, text, strlen(text));
  snprintf(full, sizeof full, "%s/full.safetensors", f.dir);
  snprintf(half, sizeof half, "%s/half.safetensors", f.dir);
  snprintf(res, sizeof res, "%s/res.safetensors", f.dir);
#define DR(g) "train", g, "--data", f.data, "--steps", "8", "--batch", "2", "--seq", "16", "--lr", "3e-3"
  TU_RUN(&R, DR(g0));
  tu_expect_run(&R, 0, NULL, NULL);
  char nodrop[256];
  snprintf(nodrop, sizeof nodrop, "%s", strstr(R.out, "final loss"));
  TU_RUN(&R, DR(g1), "--out", full);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_null(strstr(R.out, nodrop));  // p > 0 changed the trajectory
  TU_RUN(&R, DR(g1), "--out", half, "--stop-after", "3");
  tu_expect_run(&R, 0, NULL, NULL);
  TU_RUN(&R, DR(g1), "--resume", half, "--out", res);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_true(tu_same_file(full, res));
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

static void test_nonfinite_and_hostile(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-bad");
  char out[600], bad[600];
  snprintf(out, sizeof out, "%s/w.safetensors", f.dir);
  snprintf(bad, sizeof bad, "%s/bad.bin", f.dir);
  // --lr 1e30: step 1 moves every weight by ~1e30, step 2's loss is not finite.
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "10", "--batch", "2", "--seq", "16", "--lr",
      "1e30", "--clip", "0", "--out", out, "--save-every", "1");
  tu_expect_run(&R, 1, NULL, "error: step ");
  assert_true(strstr(R.err, "the loss is") || strstr(R.err, "not finite") ||
              strstr(R.err, "non-finite"));
  assert_non_null(strstr(R.err, "stopped") ? R.err : strstr(R.err, "not written"));
  size_t n;
  char *s = tu_slurp(out, &n);  // the last good checkpoint (step 1) is kept
  assert_non_null(s);
  assert_non_null(strstr(s + 8, "\"blockc.step\":\"1\""));
  free(s);
  // ids >= V: V=32 on data with ids up to 63.
  TU_RUN(&R, "train", "graphs/gpt2_lm.blk", "-D", "D=32", "-D", "H=2", "-D", "N=1", "-D", "V=32",
      "-D", "P=32", "-D", "T=32", "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16");
  tu_expect_run(&R, 1, NULL, "outside 0..31 (the graph's vocabulary)");
  assert_non_null(strstr(R.err, "byte offset"));
  // T past the bound.
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "64");
  tu_expect_run(&R, 1, NULL, "--seq 64 is larger than the bound of T (32)");
  // Empty, short and corrupt data.
  tu_write_bytes(bad, "", 0);
  TU_RUN(&R, "train", LM, "--data", bad, "--steps", "1", "--batch", "2", "--seq", "16");
  tu_expect_run(&R, 1, NULL, "the token file is empty");
  write_bin(bad, 10, 64);
  TU_RUN(&R, "train", LM, "--data", bad, "--steps", "1", "--batch", "2", "--seq", "16");
  tu_expect_run(&R, 1, NULL, "too short for --seq 16");
  tu_write_bytes(bad, "\x88\xd8\x34\x01garbage", 11);
  TU_RUN(&R, "train", LM, "--data", bad, "--steps", "1", "--batch", "2", "--seq", "16");
  tu_expect_run(&R, 1, NULL, "needs its 1024-byte header");
  // Usage: missing flags, bad values, interp.
  TU_RUN(&R, "train", LM, "--steps", "1", "--batch", "2", "--seq", "16");
  tu_expect_run(&R, 2, NULL, "train needs --data");
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16",
      "--schedule", "step");
  tu_expect_run(&R, 2, NULL, "--schedule expects constant, linear, cosine or inverse_sqrt, got 'step'");
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16",
      "--backend", "interp");
  tu_expect_run(&R, 2, NULL, "jit or aot");
  TU_RUN(&R, "train", "graphs/tiny.blk", "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "5");
  tu_expect_run(&R, 1, NULL, "float input");
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// --label-smoothing e: the added CrossEntropy is F.cross_entropy's
// (1 - e) NLL + e mean_v(-log p_v), so on the same weights and batch the
// step-1 loss is linear in e: L(0.1) = 0.9 L(0) + 0.1 L(1).  A graph with
// its own loss refuses the flag.
static double first_loss(fixture *f, const char *e) {
  char log[600];
  snprintf(log, sizeof log, "%s/ls.jsonl", f->dir);
  TU_RUN(&R, "train", LM, "--data", f->data, "--steps", "1", "--batch", "2", "--seq", "16",
      "--label-smoothing", e, "--log", log);
  tu_expect_run(&R, 0, "step 1/1", NULL);
  double loss[2];
  int nval;
  assert_int_equal(read_log(log, loss, 2, &nval), 1);
  return loss[0];
}

static void test_label_smoothing(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "train-smooth");
  double l0 = first_loss(&f, "0"), l1 = first_loss(&f, "1"), le = first_loss(&f, "0.1");
  double want = 0.9 * l0 + 0.1 * l1;
  // mean_v(-log p_v) >= log V (Jensen), whatever the weights
  if (!(fabs(le - want) <= 2e-6 * fabs(want)) || !(l1 >= log(64.0) - 1e-6) || l0 == l1) {
    print_error("L(0) %.9g L(1) %.9g L(0.1) %.9g, want %.9g\n", l0, l1, le, want);
    fail();
  }
  TU_RUN(&R, "train", LM, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16",
      "--label-smoothing", "1.5");
  tu_expect_run(&R, 2, NULL, "--label-smoothing expects a label smoothing in [0, 1], got '1.5'");
  char g[600];
  tu_write_graph(g, sizeof g,
                 "model own\ndim B = 2\ndim T = 16\ndim V = 64\ninput ids : tokens[B, T]\n"
                 "input targets : tokens[B, T]\n"
                 "e = Embedding(ids, vocab=V, dim=8, params=wte)\n"
                 "loss = CrossEntropy(Linear(e, out=V, params=head), targets)\noutput loss\n");
  TU_RUN(&R, "train", g, "--data", f.data, "--steps", "1", "--batch", "2", "--seq", "16",
      "--label-smoothing", "0.1");
  tu_expect_run(&R, 2, NULL, "has its own output `loss`");
  remove(g);
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_readers),        cmocka_unit_test(test_windows),
      cmocka_unit_test(test_init_torch),     cmocka_unit_test(test_init_gpt2),
      cmocka_unit_test(test_lm_learns),      cmocka_unit_test(test_resume_identity),
      cmocka_unit_test(test_decay_rule),     cmocka_unit_test(test_label_smoothing),
      cmocka_unit_test(test_params_train),
      cmocka_unit_test(test_dropout_resume), cmocka_unit_test(test_nonfinite_and_hostile),
  };
  const struct CMUnitTest lng[] = {0};
  return tu_run_tiered(__FILE__, quick, sizeof quick / sizeof quick[0], lng, 0);
}
