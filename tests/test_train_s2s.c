// test_train_s2s.c — `blockc train` on sequence-to-sequence graphs
// (cli/train_pairs.c, docs/training.md "Sequence-to-sequence graphs"): the
// plan a graph gives (the target input, which lengths input masks which
// token input), the batches cut from 2-D pair files (ids, targets and
// lengths exactly as documented, in both orders), and through the real
// binary examples/train/s2s.blk learning to reverse a sequence, --pad-id,
// and the resume identity.
#define _GNU_SOURCE
#include "testutil.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S2S "examples/train/s2s.blk"


static tu_run_result R;

// A 2-D int32 .npy [rows, cols] of data (C order).
static void write_pairs(const char *path, int rows, int cols, const int32_t *data) {
  char hdr[128];
  int k = snprintf(hdr, sizeof hdr, "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }",
                   rows, cols);
  while ((10 + k + 1) % 64) hdr[k++] = ' ';
  hdr[k++] = '\n';
  size_t bytes = (size_t)rows * (size_t)cols * 4;
  unsigned char *d = malloc(10 + (size_t)k + bytes);
  assert_non_null(d);
  memcpy(d, "\x93NUMPY\x01\x00", 8);
  d[8] = (unsigned char)(k & 255), d[9] = (unsigned char)(k >> 8);
  memcpy(d + 10, hdr, (size_t)k);
  memcpy(d + 10 + k, data, bytes);
  tu_write_bytes(path, d, 10 + (size_t)k + bytes);
  free(d);
}

// The parsed s2s example at B, with its loss, and its plan.
static bc_graph *plan_example(bc_ctx *ctx, long B, tr_pairs *p) {
  bc_define d = {"B", B};
  bc_graph *g = bcP_parse_file(ctx, S2S, &d, 1);
  assert_non_null(g);
  const char *tgt = NULL;
  assert_int_equal(tr_pairs_target(ctx, S2S, g, &g->vals[g->outputs[0]].shape, "`logits`", &tgt),
                   BC_OK);
  assert_string_equal(tgt, "tgt");
  bc_graph *lg = bcX_with_lm_loss(ctx, g, "logits", tgt, false);
  assert_non_null(lg);
  assert_int_equal(tr_pairs_plan(ctx, S2S, lg, tgt, p), BC_OK);
  return lg;
}

static int input_index(const bc_graph *g, const char *name) {
  for (int i = 0; i < g->ninputs; i++)
    if (!strcmp(g->vals[g->inputs[i]].name, name)) return i;
  return -1;
}

// Which lengths input masks which token input, and the target.
static void test_plan(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  tr_pairs p;
  bc_graph *g = plan_example(ctx, 2, &p);
  assert_int_equal(p.n, 2);
  assert_string_equal(p.s[0].name, "src");
  assert_string_equal(p.s[1].name, "tgt");
  assert_false(p.s[0].target);
  assert_true(p.s[1].target);
  assert_int_equal(p.s[0].len_input, input_index(g, "src_len"));
  assert_int_equal(p.s[1].len_input, input_index(g, "tgt_len"));
  assert_int_equal(p.targets_input, input_index(g, "targets"));
  assert_int_equal(p.s[0].bound, 64);
  assert_true(p.s[0].rt >= 0 && p.s[1].rt >= 0 && p.s[0].rt != p.s[1].rt);
  tr_pairs_free(&p);
  // One lengths input masking the streams of two token inputs: refused.
  const char *bad = "model m\ndim B = 2\ndim S <= 8\ndim T <= 8\ndim D = 8\ndim V = 16\n"
                    "input src : tokens[B, S]\ninput tgt : tokens[B, T]\ninput len : lengths[B]\n"
                    "m = Embedding(src, vocab=V, dim=D, params=e)\n"
                    "m = Attention(m, heads=2, lengths=len, params=a)\n"
                    "x = Embedding(tgt, vocab=V, dim=D, params=e)\n"
                    "x = Attention(x, heads=2, causal=true, lengths=len, params=b)\n"
                    "x = Attention(x, kv=m, heads=2, params=c)\n"
                    "logits = Linear(x, out=V, params=h)\noutput logits\n";
  bc_graph *b = tu_parse(ctx, bad);
  assert_non_null(b);
  const char *tgt = NULL;
  assert_int_equal(tr_pairs_target(ctx, "t.blk", b, &b->vals[b->outputs[0]].shape, "`logits`", &tgt),
                   BC_OK);
  bc_graph *lb = bcX_with_lm_loss(ctx, b, "logits", tgt, false);
  assert_non_null(lb);
  errs.len = 0, errs.buf[0] = '\0';
  assert_int_equal(tr_pairs_plan(ctx, "t.blk", lb, tgt, &p), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "cannot tell which token input the lengths input 'len' masks"));
  tr_pairs_free(&p);
  bc_ctx_free(ctx);
}

// Three pairs, B = 2: the batches are exactly the documented pairing.
static void test_batches(void **state) {
  (void)state;
  char dir[256], sp[512], tp[512];
  tu_mktmpdir(dir, sizeof dir, "s2s-batches");
  snprintf(sp, sizeof sp, "%s/src.npy", dir);
  snprintf(tp, sizeof tp, "%s/tgt.npy", dir);
  const int32_t src[3 * 4] = {5, 6, 7, 0,  //
                              8, 0, 0, 0,  //
                              9, 10, 11, 12};
  const int32_t tgt[3 * 5] = {1, 7, 6, 5, 2,  //
                              1, 8, 2, 0, 0,  //
                              1, 3, 0, 0, 0};
  write_pairs(sp, 3, 4, src);
  write_pairs(tp, 3, 5, tgt);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  tr_pairs p;
  bc_graph *g = plan_example(ctx, 2, &p);
  cli_file files[2] = {{"tgt", tp, "--data", tp}, {"src", sp, "--data", sp}};
  p.pad = 0;
  if (tr_pairs_load(ctx, S2S, g, &p, 0, files, 2, "--data")) print_error("%s\n", errs.buf), fail();
  assert_int_equal(p.rows[0], 3);
  assert_int_equal(p.s[0].width[0], 4);  // src: the file's width
  assert_int_equal(p.s[1].width[0], 4);  // tgt: the file's width - 1
  const int32_t want_len_src[3] = {3, 1, 4}, want_len_tgt[3] = {5, 3, 2};
  assert_memory_equal(p.s[0].len[0], want_len_src, sizeof want_len_src);
  assert_memory_equal(p.s[1].len[0], want_len_tgt, sizeof want_len_tgt);
  int32_t ids_s[8], ids_t[8], targets[8], len_s[2], len_t[2];
  void *io[16] = {0};
  io[p.s[0].input] = ids_s, io[p.s[1].input] = ids_t, io[p.targets_input] = targets;
  io[p.s[0].len_input] = len_s, io[p.s[1].len_input] = len_t;
  long rt[4] = {0};
  // Sequential: micro-batch 1 of B = 2 holds pairs 2 and 0 ((1*2 + r) mod 3).
  int64_t pairs[2];
  for (long r = 0; r < 2; r++) pairs[r] = tr_pair_seq(1, 2, r, 3);
  assert_int_equal(pairs[0], 2);
  assert_int_equal(pairs[1], 0);
  tr_pairs_fill(&p, 0, pairs, 2, io, rt);
  const int32_t want_s[8] = {9, 10, 11, 12, 5, 6, 7, 0};
  const int32_t want_t[8] = {1, 0, 0, 0, 1, 7, 6, 5};          // row[:-1], id 0 past the end
  const int32_t want_y[8] = {3, -100, -100, -100, 7, 6, 5, 2};  // row[1:], -100 past the end
  assert_memory_equal(ids_s, want_s, sizeof want_s);
  assert_memory_equal(ids_t, want_t, sizeof want_t);
  assert_memory_equal(targets, want_y, sizeof want_y);
  assert_int_equal(len_s[0], 4), assert_int_equal(len_s[1], 3);
  assert_int_equal(len_t[0], 1), assert_int_equal(len_t[1], 4);
  assert_int_equal(rt[p.s[0].rt], 4);
  assert_int_equal(rt[p.s[1].rt], 4);
  // Random: one draw per row, bcrt_rng_next() mod P.
  bcrt_rng a, b;
  bcrt_rng_seed(&a, 7), bcrt_rng_seed(&b, 7);
  for (int i = 0; i < 20; i++) assert_int_equal(tr_pair_rand(&a, 3), (int64_t)(bcrt_rng_next(&b) % 3));
  // Pair 1 of a second file set with another pad id: the same rows.
  int32_t src2[3 * 4], tgt2[3 * 5];
  for (int i = 0; i < 12; i++) src2[i] = src[i] ? src[i] : -1;
  for (int i = 0; i < 15; i++) tgt2[i] = tgt[i] ? tgt[i] : -1;
  write_pairs(sp, 3, 4, src2);
  write_pairs(tp, 3, 5, tgt2);
  p.pad = -1;
  assert_int_equal(tr_pairs_load(ctx, S2S, g, &p, 1, files, 2, "--val"), BC_OK);
  tr_pairs_fill(&p, 1, pairs, 2, io, rt);
  assert_memory_equal(ids_s, want_s, sizeof want_s);
  assert_memory_equal(ids_t, want_t, sizeof want_t);
  assert_memory_equal(targets, want_y, sizeof want_y);
  tr_pairs_free(&p);
  bc_ctx_free(ctx);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// The reverse task: src = s EOS, tgt = BOS reversed(s) EOS, ids 3..31,
// BOS 1, EOS 2, pad 0; lengths 3..10 (a fixed LCG).
static void write_reverse(const char *dir, const char *name, int n, unsigned seed, int32_t pad) {
  int32_t *s = malloc((size_t)n * 12 * sizeof *s), *t = malloc((size_t)n * 13 * sizeof *t);
  assert_true(s && t);
  unsigned x = seed;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    int L = 3 + (int)(x >> 16) % 8;
    int32_t *sr = s + i * 12, *tr = t + i * 13;
    for (int j = 0; j < 12; j++) sr[j] = pad;
    for (int j = 0; j < 13; j++) tr[j] = pad;
    for (int j = 0; j < L; j++) {
      x = x * 1103515245u + 12345u;
      sr[j] = 3 + (int32_t)((x >> 16) % 29);
    }
    sr[L] = 2, tr[0] = 1, tr[L + 1] = 2;
    for (int j = 0; j < L; j++) tr[1 + j] = sr[L - 1 - j];
  }
  char p[600];
  snprintf(p, sizeof p, "%s/%s_src.npy", dir, name);
  write_pairs(p, n, 12, s);
  snprintf(p, sizeof p, "%s/%s_tgt.npy", dir, name);
  write_pairs(p, n, 13, t);
  free(s), free(t);
}

// The "loss" values of a --log file, in order.
static int read_losses(const char *path, double *loss, int cap) {
  size_t len;
  char *s = tu_slurp(path, &len);
  assert_non_null(s);
  int n = 0;
  for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
    const char *q = strstr(line, "\"loss\":");
    assert_non_null(q);
    if (n < cap) loss[n] = strtod(q + 7, NULL);
    n++;
  }
  free(s);
  return n;
}

typedef struct {
  char dir[256], src[512], tgt[512], vsrc[512], vtgt[512];
} fixture;

static void fixture_new(fixture *f, const char *name, int32_t pad) {
  tu_mktmpdir(f->dir, sizeof f->dir, name);
  write_reverse(f->dir, "train", 2000, 1, pad);
  write_reverse(f->dir, "val", 64, 2, pad);
  snprintf(f->src, sizeof f->src, "src=%s/train_src.npy", f->dir);
  snprintf(f->tgt, sizeof f->tgt, "tgt=%s/train_tgt.npy", f->dir);
  snprintf(f->vsrc, sizeof f->vsrc, "src=%s/val_src.npy", f->dir);
  snprintf(f->vtgt, sizeof f->vtgt, "tgt=%s/val_tgt.npy", f->dir);
}

// examples/train/s2s.blk learns to reverse: the loss falls from ln(32).
static void test_learns(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "s2s-learns", 0);
  char log[600];
  snprintf(log, sizeof log, "%s/log.jsonl", f.dir);
  TU_RUN(&R, "train", S2S, "--data", f.src, "--data", f.tgt, "--val", f.vsrc, "--val", f.vtgt,
      "--steps", "300", "--batch", "16", "--lr", "1e-3", "--warmup", "30", "--eval-every", "150",
      "--eval-batches", "4", "--log", log);
  tu_expect_run(&R, 0, "2000 train pairs, 64 val pairs", NULL);
  assert_non_null(strstr(R.out, "val loss"));
  double loss[300];
  assert_int_equal(read_losses(log, loss, 300), 300);
  double end = 0;
  for (int i = 290; i < 300; i++) end += loss[i] / 10;
  print_message("loss %.4f at step 1 -> %.4f (mean of steps 291-300)\n", loss[0], end);
  if (!(loss[0] > 3.0 && end < 1.0)) {
    print_error("loss %g -> %g (mean of the last 10)\n", loss[0], end);
    fail();
  }
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// --pad-id -1 on files padded with -1 gives the same run as pad 0 on zeros.
static void test_pad_id(void **state) {
  (void)state;
  fixture a, b;
  fixture_new(&a, "s2s-pad0", 0);
  fixture_new(&b, "s2s-padm1", -1);
  char la[600], lb[600];
  snprintf(la, sizeof la, "%s/log.jsonl", a.dir);
  snprintf(lb, sizeof lb, "%s/log.jsonl", b.dir);
  TU_RUN(&R, "train", S2S, "--data", a.src, "--data", a.tgt, "--steps", "3", "--batch", "4", "--log", la);
  tu_expect_run(&R, 0, NULL, NULL);
  TU_RUN(&R, "train", S2S, "--data", b.src, "--data", b.tgt, "--steps", "3", "--batch", "4", "--log", lb,
      "--pad-id", "-1");
  tu_expect_run(&R, 0, NULL, NULL);
  double x[3], y[3];
  assert_int_equal(read_losses(la, x, 3), 3);
  assert_int_equal(read_losses(lb, y, 3), 3);
  for (int i = 0; i < 3; i++) assert_true(x[i] == y[i]);
  // Without --pad-id the -1 pads are ids outside the vocabulary.
  TU_RUN(&R, "train", S2S, "--data", b.src, "--data", b.tgt, "--steps", "3", "--batch", "4");
  tu_expect_run(&R, 1, NULL, "id -1 is outside 0..31 (the graph's vocabulary) and is not the pad id 0");
  assert_int_equal(tu_rm_rf(a.dir), 0);
  assert_int_equal(tu_rm_rf(b.dir), 0);
}

// examples/train/s2s.blk with its own loss (`input targets`, `loss =
// CrossEntropy(logits, targets)`, the loss train would add) trains on the
// same pair files and logs the same losses as the graph without one; a
// `loss` without `targets` is refused.
static void test_own_loss(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "s2s-own-loss", 0);
  size_t len;
  char *src = tu_slurp(S2S, &len);
  assert_non_null(src);
  char *out = strstr(src, "output logits");
  assert_non_null(out);
  *out = 0;
  char graph[600], graph2[600], la[600], lb[600];
  snprintf(graph, sizeof graph, "%s/own.blk", f.dir);
  snprintf(graph2, sizeof graph2, "%s/bad.blk", f.dir);
  snprintf(la, sizeof la, "%s/a.jsonl", f.dir);
  snprintf(lb, sizeof lb, "%s/b.jsonl", f.dir);
  static const char own_tail[] = "input targets : tokens[B, T]\n"
                                 "loss = CrossEntropy(logits, targets)\noutput loss\n",
                    bad_tail[] = "output logits\nloss = MSE(y, y)\noutput loss\n";
  size_t head = strlen(src);
  char *text = malloc(head + sizeof own_tail);
  assert_non_null(text);
  memcpy(text, src, head);
  memcpy(text + head, own_tail, sizeof own_tail);
  tu_write_bytes(graph, text, strlen(text));
  memcpy(text + head, bad_tail, sizeof bad_tail);
  tu_write_bytes(graph2, text, strlen(text));
  free(text), free(src);
  TU_RUN(&R, "train", S2S, "--data", f.src, "--data", f.tgt, "--steps", "4", "--batch", "4",
      "--log", la);
  tu_expect_run(&R, 0, NULL, NULL);
  TU_RUN(&R, "train", graph, "--data", f.src, "--data", f.tgt, "--steps", "4", "--batch", "4",
      "--log", lb);
  tu_expect_run(&R, 0, "2000 train pairs", NULL);
  double x[4], y[4];
  assert_int_equal(read_losses(la, x, 4), 4);
  assert_int_equal(read_losses(lb, y, 4), 4);
  for (int i = 0; i < 4; i++) {
    print_message("step %d: loss %.9g (train's) %.9g (the graph's)\n", i + 1, x[i], y[i]);
    assert_true(fabs(x[i] - y[i]) <= 1e-6 * fabs(x[i]));
  }
  assert_true(y[3] < y[0]);  // it trains
  TU_RUN(&R, "train", graph2, "--data", f.src, "--data", f.tgt, "--steps", "1", "--batch", "4");
  tu_expect_run(&R, 1, NULL, "the output `loss` must be a scalar loss of a tokens input `targets`");
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

// Stopped after 4 steps and resumed = 8 steps in one run, bit for bit.
static void test_resume(void **state) {
  (void)state;
  fixture f;
  fixture_new(&f, "s2s-resume", 0);
  char full[600], half[600], res[600];
  snprintf(full, sizeof full, "%s/full.safetensors", f.dir);
  snprintf(half, sizeof half, "%s/half.safetensors", f.dir);
  snprintf(res, sizeof res, "%s/res.safetensors", f.dir);
  const char *orders[2] = {"random", "sequential"};
  for (int o = 0; o < 2; o++) {
#define S2S_COMMON "train", S2S, "--data", f.src, "--data", f.tgt, "--steps", "8", "--batch", "3", \
                   "--accum", "2", "--lr", "1e-3", "--data-order", orders[o]
    TU_RUN(&R, S2S_COMMON, "--out", full);
    tu_expect_run(&R, 0, NULL, NULL);
    TU_RUN(&R, S2S_COMMON, "--out", half, "--stop-after", "4");
    tu_expect_run(&R, 0, "stopped after step 4", NULL);
    TU_RUN(&R, S2S_COMMON, "--resume", half, "--out", res);
    tu_expect_run(&R, 0, "resumed", NULL);
#undef S2S_COMMON
    assert_true(tu_same_file(full, res));
  }
  assert_int_equal(tu_rm_rf(f.dir), 0);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_plan),   cmocka_unit_test(test_batches), cmocka_unit_test(test_learns),
      cmocka_unit_test(test_pad_id), cmocka_unit_test(test_resume), cmocka_unit_test(test_own_loss),
  };
  const struct CMUnitTest lng[] = {0};
  return tu_run_tiered(__FILE__, quick, sizeof quick / sizeof quick[0], lng, 0);
}
