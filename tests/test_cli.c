// test_cli.c — the blockc command line: exit codes, messages, output files.
//
// Runs the real binary (path in $BLOCKC, set by `make test`) with stdout and
// stderr captured, and checks the contract users script against: 0 on
// success, 1 for bad input, 2 for bad usage, a message that says what is
// wrong, and no output file unless the run succeeded.
#define _GNU_SOURCE
#include "testutil.h"
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>


static tu_run_result R;

static void test_help_and_version(void **state) {
  (void)state;
  TU_RUN(&R, "--version");
  tu_expect_run(&R, 0, "blockc 0.", NULL);
  TU_RUN(&R, "--help");
  tu_expect_run(&R, 0, "usage: blockc COMMAND", NULL);
  TU_RUN(&R, "help", "run");
  tu_expect_run(&R, 0, "--backend", NULL);
  TU_RUN(&R, "run", "--help");
  tu_expect_run(&R, 0, "usage: blockc run", NULL);
  TU_RUN(&R, "help", "nosuch");
  tu_expect_run(&R, 2, NULL, "no help for unknown command 'nosuch'");
}

// Driven by options.c's table: `blockc help CMD` lists every option CMD
// accepts, and an option CMD does not list is a usage error naming it (never
// silently ignored), e.g. run --svg, run --dy/--json/--profile, check --after,
// check/emit --weights.
static void test_help_lists_every_option(void **state) {
  (void)state;
  int nc;
  const cli_command *cmds = cli_commands(&nc);
  const cli_option *opts = cli_options();
  for (int c = 0; c < nc; c++) {
    TU_RUN(&R, "help", cmds[c].name);
    tu_expect_run(&R, 0, "usage: blockc ", NULL);
    for (int id = 0; id < CLI_OPT_COUNT; id++) {
      char want[64];
      snprintf(want, sizeof want, "  %s%s", opts[id].alias ? opts[id].alias : opts[id].flag,
               opts[id].alias ? ", " : (opts[id].arg ? " " : ""));
      bool listed = strstr(R.out, want) != NULL;
      if (listed != cli_accepts(&cmds[c], (cli_opt_id)id)) {
        print_error("help %s: %s is %slisted but %saccepted\n%s", cmds[c].name, opts[id].flag,
                    listed ? "" : "not ", cli_accepts(&cmds[c], (cli_opt_id)id) ? "" : "not ", R.out);
        fail();
      }
    }
  }
  for (int c = 0; c < nc; c++)
    for (int id = 0; id < CLI_OPT_COUNT; id++) {
      if (cli_accepts(&cmds[c], (cli_opt_id)id)) continue;
      const char *a[] = {cmds[c].name, "graphs/tiny.blk", opts[id].flag, "1", NULL};
      tu_run(&R, a);
      char want[128];
      snprintf(want, sizeof want, "%s is not an option of 'blockc %s'", opts[id].flag, cmds[c].name);
      tu_expect_run(&R, 2, NULL, want);
    }
  TU_RUN(&R, "run", "graphs/tiny.blk", "--svg", "x.svg");
  tu_expect_run(&R, 2, NULL, "--svg is not an option of 'blockc run'");
  TU_RUN(&R, "check", "graphs/tiny.blk", "--weights", "/nonexistent.safetensors");
  tu_expect_run(&R, 2, NULL, "--weights is not an option of 'blockc check'");
  TU_RUN(&R, "run", "graphs/tiny.blk", "--weights-prefix", "model.");
  tu_expect_run(&R, 2, NULL, "--weights-prefix needs --weights");
  TU_RUN(&R, "run", "graphs/tiny.blk", "--seed", "1", "--seed", "2");
  tu_expect_run(&R, 2, NULL, "--seed given twice");
}

static void test_usage_errors_exit_2(void **state) {
  (void)state;
  const char *rt = NULL;
  (void)rt;
  tu_run_result *r = &R;
  {
    const char *a[] = {NULL};
    tu_run(r, a);
    tu_expect_run(r, 2, NULL, "usage:");
  }
  TU_RUN(r, "frobnicate");
  tu_expect_run(r, 2, NULL, "unknown command 'frobnicate'");
  TU_RUN(r, "check");
  tu_expect_run(r, 2, NULL, "check: missing GRAPH");
  TU_RUN(r, "check", "graphs/tiny.blk", "--bogus");
  tu_expect_run(r, 2, NULL, "unknown option '--bogus'");
  TU_RUN(r, "run", "graphs/tiny.blk", "--backend", "gpu");
  tu_expect_run(r, 2, NULL, "unknown backend 'gpu'");
  TU_RUN(r, "run", "graphs/tiny.blk", "--seed");
  tu_expect_run(r, 2, NULL, "option '--seed' needs a value");
  TU_RUN(r, "run", "graphs/tiny.blk", "--seed", "-4");
  tu_expect_run(r, 2, NULL, "--seed expects a non-negative integer");
  TU_RUN(r, "check", "graphs/tiny.blk", "-D", "D");
  tu_expect_run(r, 2, NULL, "-D expects NAME=VALUE");
  TU_RUN(r, "check", "graphs/tiny.blk", "-D", "D=abc");
  tu_expect_run(r, 2, NULL, "the value must be an integer");
  TU_RUN(r, "check", "graphs/tiny.blk", "graphs/post_ln.blk");
  tu_expect_run(r, 2, NULL, "unexpected argument");
  TU_RUN(r, "dump", "graphs/tiny.blk", "--after", "nosuch");
  tu_expect_run(r, 2, NULL, "unknown pass 'nosuch'");
}

static void test_check_and_dump(void **state) {
  (void)state;
  TU_RUN(&R, "check", "graphs/residual.blk");
  tu_expect_run(&R, 0, "model residual, dims B=1 T=128 D=512 H=8 F=2048 N=6, 50 nodes", NULL);
  TU_RUN(&R, "check", "graphs/residual.blk", "-D", "N=2", "-DD=64");
  tu_expect_run(&R, 0, "D=64 H=8 F=256 N=2, 18 nodes", NULL);
  TU_RUN(&R, "dump", "graphs/tiny.blk");
  tu_expect_run(&R, 0, "n0: %1 a [2, 5, 8] = Attention(%0) heads=2 causal=true", NULL);
  TU_RUN(&R, "dump", "--passes");
  tu_expect_run(&R, 0, "fuse-add-ln", NULL);
  TU_RUN(&R, "dump", "graphs/tiny.blk", "--after", "fuse-add-ln");
  tu_expect_run(&R, 0, "AddLayerNorm", NULL);
  TU_RUN(&R, "dump", "graphs/tiny.blk", "--after", "plan");
  tu_expect_run(&R, 0, "arena ", NULL);
}

static void test_bad_input_exit_1(void **state) {
  (void)state;
  TU_RUN(&R, "check", "no/such/file.blk");
  tu_expect_run(&R, 1, NULL, "no/such/file.blk: error: cannot open");
  TU_RUN(&R, "check", "graphs/residual.blk", "-D", "D=510");
  tu_expect_run(&R, 1, NULL, "graphs/residual.blk:29:30: error: model width D=510 is not divisible by heads=8");
  TU_RUN(&R, "check", "graphs/residual.blk", "-D", "Q=1");
  tu_expect_run(&R, 1, NULL, "has no dim 'Q'");
  TU_RUN(&R, "run", "graphs/tiny.blk", "--weights", "no/such.safetensors");
  tu_expect_run(&R, 1, NULL, "no/such.safetensors: error: cannot open");
  TU_RUN(&R, "run", "graphs/tiny.blk", "--input", "no/such.npy");
  tu_expect_run(&R, 1, NULL, "no/such.npy");
}

// A run writes --output atomically; a failed run leaves nothing behind.
static void test_run_output_roundtrip(void **state) {
  (void)state;
  char y1[256], y2[256], x[256];
  tu_tmp_path(y1, sizeof y1, ".npy");
  tu_tmp_path(y2, sizeof y2, ".npy");
  tu_tmp_path(x, sizeof x, ".npy");
  TU_RUN(&R, "run", "graphs/tiny.blk", "--backend", "interp", "--seed", "3", "--output", y1);
  tu_expect_run(&R, 0, "output [2, 5, 8]", NULL);
  TU_RUN(&R, "run", "graphs/tiny.blk", "--seed", "3", "--output", y2);
  tu_expect_run(&R, 0, "backend jit", NULL);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape s1, s2;
  float *a = NULL, *b = NULL;
  assert_int_equal(bcN_read(ctx, y1, &s1, &a), BC_OK);
  assert_int_equal(bcN_read(ctx, y2, &s2, &b), BC_OK);
  assert_true(bc_shape_eq(&s1, &s2));
  // JIT vs interpreter on the same seeded weights and input.
  assert_true(tu_max_abs_diff(a, b, (size_t)bc_shape_numel(&s1)) < 1e-5);
  // Feeding the output back as input (same shape) works and is deterministic.
  TU_RUN(&R, "run", "graphs/tiny.blk", "--input", y1, "--output", x);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_true(tu_exists(x));
  free(a);
  free(b);
  bc_ctx_free(ctx);
  // Wrong input shape: exit 1, and the output file is not created.
  char z[256];
  tu_tmp_path(z, sizeof z, ".npy");
  TU_RUN(&R, "run", "graphs/tiny.blk", "-D", "T=6", "--input", y1, "--output", z);
  tu_expect_run(&R, 1, NULL, "input has shape [2, 5, 8] but graphs/tiny.blk expects [2, 6, 8]");
  assert_false(tu_exists(z));
  // Output into a missing directory: exit 1 and nothing created.
  TU_RUN(&R, "run", "graphs/tiny.blk", "--output", "/nonexistent-dir/y.npy");
  tu_expect_run(&R, 1, NULL, "/nonexistent-dir/y.npy: error: cannot write");
  unlink(y1);
  unlink(y2);
  unlink(x);
}

// Linear changes the last dim; interpreter and JIT agree on a case small
// enough to check by hand: x = [1, 2], W = seeded, so compare the backends.
static void test_linear_runs_on_every_backend(void **state) {
  (void)state;
  char g[256], y1[256], y2[256];
  tu_tmp_path(g, sizeof g, ".blk");
  tu_tmp_path(y1, sizeof y1, ".npy");
  tu_tmp_path(y2, sizeof y2, ".npy");
  FILE *f = fopen(g, "w");
  fputs("model lin\ndim D = 6\ninput x : [2, 3, D]\n"
        "y = Linear(LayerNorm(x, params=n), out=5, params=head)\noutput y\n", f);
  fclose(f);
  TU_RUN(&R, "run", g, "--backend", "interp", "--output", y1);
  tu_expect_run(&R, 0, "output [2, 3, 5]", NULL);
  TU_RUN(&R, "run", g, "--output", y2);
  tu_expect_run(&R, 0, "output [2, 3, 5]", NULL);
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_shape s1, s2;
  float *a = NULL, *b = NULL;
  assert_int_equal(bcN_read(ctx, y1, &s1, &a), BC_OK);
  assert_int_equal(bcN_read(ctx, y2, &s2, &b), BC_OK);
  assert_true(tu_max_abs_diff(a, b, 30) < 1e-5);
  free(a);
  free(b);
  bc_ctx_free(ctx);
  unlink(g);
  unlink(y1);
  unlink(y2);
}

static void test_emit_c(void **state) {
  (void)state;
  TU_RUN(&R, "emit-c", "graphs/tiny.blk");
  tu_expect_run(&R, 0, "tiny_forward", NULL);
  assert_non_null(strstr(R.out, "cblas_sgemm"));
}

// Entries in dir other than . and .. (to see that no temp file is left).
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

static off_t file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

// --output on things that are not a plain new file (issue 12, item 1).
// Device nodes are made with mknod in a temp dir (root only; the real
// /dev/null is never touched).
// Runs blockc with args under RLIMIT_FSIZE = limit bytes; stderr through a
// pipe (not subject to the limit).  Returns the exit code, or 128 + signal.
static int run_fsize_limited(const char *const *args, rlim_t limit, char *err, size_t n) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {limit, limit};
    int null = open("/dev/null", O_WRONLY);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0 || null < 0) _exit(99);
    dup2(null, 1), dup2(p[1], 2), close(p[0]);
    const char *argv[32];
    int k = 0;
    argv[k++] = tu_blockc();
    for (int i = 0; args[i] && k < 31; i++) argv[k++] = args[i];
    argv[k] = NULL;
    execv(argv[0], (char *const *)argv);
    _exit(98);
  }
  close(p[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < n && (r = read(p[0], err + got, n - 1 - got)) > 0) got += (size_t)r;
  err[got] = '\0';
  close(p[0]);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// No ".blockc-<hex>" temp file is left in dir.
static void expect_no_temps(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, ".blockc-", 8)) {
      print_error("temp file left behind: %s/%s\n", dir, e->d_name);
      fail();
    }
  closedir(d);
}

// Issue 20, item 5: past `ulimit -f` every writing command fails with the
// reason and exit 1 (SIGXFSZ killed it with 153 before), temps removed.
static void test_file_size_limit(void **state) {
  (void)state;
  char dir[256], y[300], w[300], g[300], err[4096];
  tu_mktmpdir(dir, sizeof dir, "fsize");
  snprintf(y, sizeof y, "%s/y.npy", dir);
  snprintf(w, sizeof w, "%s/w.safetensors", dir);
  snprintf(g, sizeof g, "%s/g.safetensors", dir);
  const char *cmds[][8] = {
      {"run", "graphs/tiny.blk", "--output", y, NULL},
      {"weights", "graphs/tiny.blk", "-o", w, NULL},
      {"grad", "graphs/tiny.blk", "-o", g, NULL},
      {"emit", "graphs/tiny.blk", "-o", dir, NULL},
  };
  for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
    int st = run_fsize_limited(cmds[k], 200, err, sizeof err);
    if (st != 1 || !strstr(err, "File too large")) {
      print_error("%s: status %d (want 1)\nstderr: %s\n", cmds[k][0], st, err);
      fail();
    }
    expect_no_temps(dir);
  }
  assert_false(tu_exists(y) || tu_exists(w) || tu_exists(g));
  char *rm[] = {"/bin/rm", "-rf", dir, NULL};
  assert_int_equal(tu_spawn(rm, NULL, 0, NULL, 0), 0);
}

// Issue 20, item 4: every command counts what it allocates (parameters,
// workspace, packed copy, KV cache, backward workspace, gradients, the
// reference tape) against --max-memory before allocating it.  At 300 KiB
// this GPT-2 runs (283520 bytes: no [T, T] scores since issue 26), but its step-wise run (KV cache), grad (backward
// workspace), grad --backend interp and analyze (the tape) and bench
// --decode do not; weights counts its parameters.
static void test_memory_limits(void **state) {
  (void)state;
  char out[300];
  tu_tmp_path(out, sizeof out, ".safetensors");
#define GPT "graphs/gpt2.blk", "-D", "D=16", "-D", "H=2", "-D", "F=32", "-D", "N=1", "-D", "T=256"
  TU_RUN(&R, "run", GPT, "--max-memory", "300K");
  tu_expect_run(&R, 0, NULL, NULL);
  TU_RUN(&R, "run", GPT, "--stepwise", "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "run --stepwise needs 316352 bytes");
  tu_expect_run(&R, 1, NULL, "32832 bytes of KV cache), over the limit of 307200 bytes");
  TU_RUN(&R, "run", GPT, "--stepwise", "--backend", "aot", "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "bytes of KV cache), over the limit");
  TU_RUN(&R, "bench", GPT, "--decode", "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "bench --decode needs");
  TU_RUN(&R, "grad", GPT, "-o", out, "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "bytes of backward workspace, 9024 bytes of parameter gradients)");
  TU_RUN(&R, "grad", GPT, "-o", out, "--backend", "aot", "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "bytes of backward workspace");
  TU_RUN(&R, "grad", GPT, "-o", out, "--backend", "interp", "--max-memory", "300K");
  tu_expect_run(&R, 1, NULL, "grad --backend interp needs");
  tu_expect_run(&R, 1, NULL, "of the reference backward's tape (double)");
  assert_false(tu_exists(out));
  TU_RUN(&R, "analyze", "graphs/pre_ln.blk", "-D", "D=16", "-D", "H=2", "-D", "F=32", "-D", "N=2",
      "-D", "T=64", "--max-memory", "100K");
  tu_expect_run(&R, 1, NULL, "analyze needs");
  TU_RUN(&R, "weights", GPT, "-o", out, "--max-memory", "8K");
  tu_expect_run(&R, 1, NULL, "weights needs 9024 bytes");
  assert_false(tu_exists(out));
  TU_RUN(&R, "weights", "tests/bad/params_huge.blk", "-o", out);
  tu_expect_run(&R, 1, NULL, "over the limit of 17179869184 bytes");
  assert_false(tu_exists(out));
#undef GPT
}

// JSON strings (bench/analyze --json: file and model names) are UTF-8:
// "é" stays "é" (it was "\u00c3\u00a9", i.e. "Ã©"); controls are \u
// escapes; bytes that are not UTF-8 (a lone continuation, an overlong form,
// a surrogate, a truncated sequence) become U+FFFD.
static void test_json_utf8(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  cli_json_str("d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80 \"q\" \\ \t\x7f "
               "\x80 \xc0\xaf \xed\xa0\x80 \xe2\x82", f);
  fclose(f);
  assert_string_equal(buf, "\"d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80 \\\"q\\\" \\\\ "
                      "\\u0009\\u007f \\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd "
                      "\\ufffd\\ufffd\"");
  free(buf);
}

// Issue 20, item 11: messages that said the wrong thing.
static void test_step_messages(void **state) {
  (void)state;
#define GPT "graphs/gpt2.blk", "-D", "D=16", "-D", "H=2", "-D", "F=32", "-D", "N=1"
  TU_RUN(&R, "run", GPT, "-D", "T=20", "--stepwise", "--chunk", "128");
  tu_expect_run(&R, 0, "stepwise (chunk 20, --chunk 128 is past the sequence)", NULL);
  TU_RUN(&R, "run", GPT, "-D", "T=20", "--stepwise", "--chunk", "3");
  tu_expect_run(&R, 0, "stepwise (chunk 3)", NULL);
  TU_RUN(&R, "bench", GPT, "-D", "T=1", "--decode");
  tu_expect_run(&R, 2, NULL, "bench --decode: graphs/gpt2.blk runs up to T = 1; decoding needs 2 positions");
#undef GPT
}

// Issue 20, item 12: analyze --input reports the input it read and the
// run-time length it ran at (it said "inputs ~ N(0, 1) seeded" and T=128).
static void test_analyze_input(void **state) {
  (void)state;
  char x[256];
  tu_tmp_path(x, sizeof x, ".npy");
#define PRE "graphs/pre_ln.blk", "-D", "D=16", "-D", "H=2", "-D", "F=32", "-D", "N=2"
  TU_RUN(&R, "run", PRE, "--length", "T=37", "--output", x);
  tu_expect_run(&R, 0, "output [1, 37, 16]", NULL);
  TU_RUN(&R, "analyze", PRE, "--input", x);
  tu_expect_run(&R, 0, "model pre_ln, B=1 T=37 (<= 128) D=16", NULL);
  tu_expect_run(&R, 0, "; inputs from --input ", NULL);
  // Issue 23: each input's file (or seed) and shape, and each run-time
  // dim's value and what set it, in the text and in --json.
  char want[1200];
  snprintf(want, sizeof want, "input x [1, 37, 16]: %s\n", x);
  tu_expect_run(&R, 0, want, NULL);
  tu_expect_run(&R, 0, "input len [1]: not given: full lengths\n", NULL);
  snprintf(want, sizeof want, "run-time dim T = 37 (bound 128): from the shape of input x (%s)\n", x);
  tu_expect_run(&R, 0, want, NULL);
  assert_null(strstr(R.out, "padded batch"));
  TU_RUN(&R, "analyze", PRE, "--input", x, "--json");
  snprintf(want, sizeof want, "{\"name\": \"x\", \"kind\": \"float\", \"file\": \"%s\", \"source\": "
           "\"%s\", \"shape\": \"[1, 37, 16]\"}", x, x);
  tu_expect_run(&R, 0, want, NULL);
  tu_expect_run(&R, 0, "\"runtime_dims\": [{\"name\": \"T\", \"value\": 37, \"bound\": 128, "
                "\"from\": \"the shape of input x", NULL);
  // Seeded: the bound, or --length; the seed named.
  TU_RUN(&R, "analyze", PRE, "--seed", "4", "--length", "T=9");
  tu_expect_run(&R, 0, "input x [1, 9, 16]: seeded N(0, 1) from --seed 4\n", NULL);
  tu_expect_run(&R, 0, "run-time dim T = 9 (bound 128): from --length T=9\n", NULL);
  TU_RUN(&R, "analyze", PRE);
  tu_expect_run(&R, 0, "run-time dim T = 128 (bound 128): from the bound (no --input or --length sets it)\n", NULL);
  // A padded batch: the lengths are named and the padded rows left out.
  char x3[256], len[256];
  tu_tmp_path(x3, sizeof x3, ".npy");
  tu_tmp_path(len, sizeof len, ".npy");
  TU_RUN(&R, "run", PRE, "-D", "B=2", "--length", "T=5", "--output", x3);
  tu_expect_run(&R, 0, "output [2, 5, 16]", NULL);
  FILE *f = fopen(len, "wb");
  assert_non_null(f);
  static const char hdr[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  fwrite(hdr, 1, sizeof hdr - 1, f);
  for (size_t k = sizeof hdr - 1; k < 128; k++) fputc(k == 127 ? '\n' : ' ', f);  // header: 128 bytes
  int32_t lv[2] = {5, 3};
  fwrite(lv, sizeof lv[0], 2, f);
  fclose(f);
  char xa[300], la[300];
  snprintf(xa, sizeof xa, "x=%s", x3);
  snprintf(la, sizeof la, "len=%s", len);
  TU_RUN(&R, "analyze", PRE, "-D", "B=2", "--input", xa, "--input", la);
  snprintf(want, sizeof want, "input len [2]: %s (5 3)\n", len);
  tu_expect_run(&R, 0, want, NULL);
  tu_expect_run(&R, 0, "padded batch: rms and cos_prev over the valid rows; dy = 0 on padded rows\n", NULL);
  TU_RUN(&R, "help", "analyze");
  tu_expect_run(&R, 0, "--input [NAME=]FILE", NULL);
  tu_expect_run(&R, 0, "--admin-omega", NULL);
#undef PRE
  unlink(x);
  unlink(x3);
  unlink(len);
}

static void test_output_targets(void **state) {
  (void)state;
  char dir[256], p[600], q[600];
  tu_tmp_path(dir, sizeof dir, ".d");
  assert_int_equal(mkdir(dir, 0700), 0);
  const char *ln = "tests/bad/ln.blk";
  // A character device like /dev/null: written, never replaced.
  snprintf(p, sizeof p, "%s/null", dir);
  bool root = mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0;
  if (root) {
    TU_RUN(&R, "run", ln, "--output", p);
    tu_expect_run(&R, 0, NULL, NULL);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    // Like /dev/full: the write fails with ENOSPC, exit 1, node intact.
    snprintf(q, sizeof q, "%s/full", dir);
    assert_int_equal(mknod(q, S_IFCHR | 0666, makedev(1, 7)), 0);
    TU_RUN(&R, "run", ln, "--output", q);
    tu_expect_run(&R, 1, NULL, "No space left on device");
    assert_int_equal(lstat(q, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    unlink(p);
    unlink(q);
  } else {
    print_message("mknod not permitted: device cases need root (%s)\n", strerror(errno));
  }
  // A symlink: kept, and its target gets the output.
  char target[600];
  snprintf(target, sizeof target, "%s/target.npy", dir);
  snprintf(p, sizeof p, "%s/link.npy", dir);
  tu_write_bytes(target, "old", 3);
  assert_int_equal(symlink("target.npy", p), 0);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 0, NULL, NULL);
  struct stat st;
  assert_int_equal(lstat(p, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(file_size(target), 128 + 32);
  // A dangling symlink is refused.
  unlink(target);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 1, NULL, "a symbolic link whose target does not exist");
  unlink(p);
  // An existing 0600 file keeps its mode.
  snprintf(p, sizeof p, "%s/private.npy", dir);
  tu_write_bytes(p, "old", 3);
  assert_int_equal(chmod(p, 0600), 0);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_size, 160);
  // A hard link stays a link: both names see the new contents.
  snprintf(q, sizeof q, "%s/hard.npy", dir);
  assert_int_equal(link(p, q), 0);
  TU_RUN(&R, "run", ln, "--seed", "5", "--output", q);
  tu_expect_run(&R, 0, NULL, NULL);
  struct stat a, b;
  assert_int_equal(stat(p, &a), 0);
  assert_int_equal(stat(q, &b), 0);
  assert_int_equal(a.st_ino, b.st_ino);
  assert_int_equal(a.st_nlink, 2);
  unlink(q);
  unlink(p);
  // A stale temp file of the old naming scheme (and of ours) does not block.
  snprintf(p, sizeof p, "%s/y.npy", dir);
  snprintf(q, sizeof q, "%s/y.npy.tmp.1", dir);
  tu_write_bytes(q, "", 0);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 0, NULL, NULL);
  unlink(q);
  unlink(p);
  // A FIFO with a reader: written directly (the reader gets the .npy).
  snprintf(p, sizeof p, "%s/fifo", dir);
  assert_int_equal(mkfifo(p, 0600), 0);
  int rfd = open(p, O_RDONLY | O_NONBLOCK);
  assert_true(rfd >= 0);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 0, NULL, NULL);
  char buf[512];
  assert_int_equal(read(rfd, buf, sizeof buf), 160);
  assert_int_equal(memcmp(buf, "\x93NUMPY", 6), 0);
  close(rfd);
  // Without a reader: an error, not a hang.
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 1, NULL, "cannot write");
  unlink(p);
  // A 254-byte name (NAME_MAX is 255): the temp name must not overflow it.
  char name[255];
  memset(name, 'n', 250);
  memcpy(name + 250, ".npy", 5);
  snprintf(p, sizeof p, "%s/%s", dir, name);
  TU_RUN(&R, "run", ln, "--output", p);
  tu_expect_run(&R, 0, NULL, NULL);
  assert_int_equal(file_size(p), 160);
  unlink(p);
  assert_int_equal(entries(dir), 0);  // no temp file left anywhere
  rmdir(dir);
}

// Graph files with CR-only or CRLF line ends, or a UTF-8 BOM, parse; error
// messages escape control bytes they quote (issue 12, items 11 and 12).
static void test_line_ends_bom_and_escapes(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".blk");
  const char *cr = "model m\rdim D = 4\rinput x : [1, D]\r# a comment\ry = LayerNorm(x, affine=false)\routput y\r";
  tu_write_bytes(path, cr, strlen(cr));
  TU_RUN(&R, "check", path);
  tu_expect_run(&R, 0, "model m, dims D=4, 1 nodes", NULL);
  const char *bom = "\xef\xbb\xbfmodel m\r\ndim D = 4\r\ninput x : [1, D]\r\ny = LayerNorm(x, affine=false)\r\noutput y\r\n";
  tu_write_bytes(path, bom, strlen(bom));
  TU_RUN(&R, "check", path);
  tu_expect_run(&R, 0, "model m, dims D=4", NULL);
  // An error on line 3 of a CR-only file is reported on line 3.
  const char *bad = "model m\rdim D = 4\rinput x : [1, Q]\r";
  tu_write_bytes(path, bad, strlen(bad));
  TU_RUN(&R, "check", path);
  tu_expect_run(&R, 1, NULL, ":3:");
  // A comment holding a terminal escape on the line of an error: the
  // source line is echoed with the ESC and BEL escaped.
  const char *esc = "model m\ndim D = 4\ninput x : [1, Q]  # \x1b[2J\x07 all good\n";
  tu_write_bytes(path, esc, strlen(esc));
  TU_RUN(&R, "check", path);
  tu_expect_run(&R, 1, NULL, "# \\x1b[2J\\x07 all good");
  assert_null(strchr(R.err, '\x1b'));
  assert_null(strchr(R.err, '\x07'));
  unlink(path);
  // A tensor name with a newline and an escape (JSON-escaped in the header).
  char st[256];
  tu_tmp_path(st, sizeof st, ".safetensors");
  unsigned char data[4] = {0};
  tu_write_safetensors_raw(st, "{\"evil\\n\\u001b[2Jok\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4);
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st);
  tu_expect_run(&R, 1, NULL, "unexpected tensor 'evil\\x0a\\x1b[2Jok'");
  assert_null(strchr(R.err, '\x1b'));
  unlink(st);
  // Usage errors quote the command line escaped too.
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--frob\x1b[2J");
  tu_expect_run(&R, 2, NULL, "unknown option '--frob\\x1b[2J'");
  assert_null(strchr(R.err, '\x1b'));
}

// Flags from issue 10/12: --allow-extra, --weights-prefix, --max-memory,
// a repeated -D, --cc with a backend that does not use it.
static void test_checkpoint_flags(void **state) {
  (void)state;
  char st[256];
  tu_tmp_path(st, sizeof st, ".safetensors");
  float w[9] = {1, 1, 1, 1, 0, 0, 0, 0, 5};
  tu_write_safetensors_raw(st, "{\"model.ln.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                           "\"model.ln.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]},"
                           "\"lm_head\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[32,36]}}", w, 36);
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st);
  tu_expect_run(&R, 1, NULL, "try --weights-prefix");
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st, "--weights-prefix", "model.");
  tu_expect_run(&R, 1, NULL, "1 tensor in the file is not used by the graph; pass --allow-extra to ignore them");
  // Which names a prefix made blockc look for (issue 20, item 11).
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st, "--weights-prefix", "lm.");
  tu_expect_run(&R, 1, NULL, "missing tensor 'ln.weight' (expected shape [4]; tried 'lm.ln.weight' (--weights-prefix lm.))");
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st, "--weights-prefix", "ln.");
  tu_expect_run(&R, 1, NULL, "tried 'ln.ln.weight' and 'weight' (--weights-prefix ln.)");
  tu_expect_run(&R, 1, NULL, "5 problems with the weights");  // 2 missing + 3 unexpected (item 12)
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--weights", st, "--weights-prefix", "model.", "--allow-extra");
  tu_expect_run(&R, 0, "output [1, 2, 4]", "ignored 1 tensor the graph does not use (--allow-extra)");
  unlink(st);
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--max-memory", "16");
  tu_expect_run(&R, 1, NULL, "the run needs 32 bytes");
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--max-memory", "1M");
  tu_expect_run(&R, 0, NULL, NULL);
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--max-memory", "lots");
  tu_expect_run(&R, 2, NULL, "--max-memory expects a byte count");
  TU_RUN(&R, "run", "tests/bad/ln.blk", "-D", "D=4", "-DD=8");
  tu_expect_run(&R, 2, NULL, "-D D=8: this dim was already set with -D");
  TU_RUN(&R, "run", "tests/bad/ln.blk", "--cc", "gcc");
  tu_expect_run(&R, 0, NULL, "warning: --cc is ignored");
}

// --verbose: why layers are not in the layer loop, as notes on stderr
// (emit-c, emit, and emit --backward for the training step's loop).
static void test_verbose_layer_notes(void **state) {
  (void)state;
  TU_RUN(&R, "emit-c", "graphs/pre_ln.blk", "--verbose");
  tu_expect_run(&R, 0, "static void pre_ln_layer(",
         "graphs/pre_ln.blk: note: layer layers.0 (n0..n3) is not in the layer loop: its node n0 "
         "is LayerNorm where a trip has AddLayerNorm");
  TU_RUN(&R, "emit-c", "graphs/transformer.blk", "--verbose");
  tu_expect_run(&R, 0, NULL, "note: layers decoder.layers.0..5 (n25..n60) are not in the layer loop: one "
                      "layer loop per model");
  TU_RUN(&R, "emit-c", "graphs/post_ln.blk", "--verbose");
  tu_expect_run(&R, 0, NULL, "graphs/post_ln.blk: note: every layer is in the layer loop\n");
  TU_RUN(&R, "emit-c", "graphs/post_ln.blk");
  tu_expect_run(&R, 0, NULL, NULL);
  assert_null(strstr(R.err, "note:"));
  char dir[256];
  tu_tmp_path(dir, sizeof dir, "-verbose");
  assert_int_equal(mkdir(dir, 0700), 0);
  TU_RUN(&R, "emit", "graphs/decoder_pre_ln.blk", "-o", dir, "--backward", "--verbose");
  tu_expect_run(&R, 0, NULL, "note: layer layers.0 (n0..n5) is not in the layer loop");
  assert_null(strstr(R.err, "in the backward"));  // the training step loops too
  assert_int_equal(tu_rm_rf(dir), 0);
  TU_RUN(&R, "run", "graphs/post_ln.blk", "--verbose");
  tu_expect_run(&R, 2, NULL, "--verbose is not an option of 'blockc run'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help_and_version),
      cmocka_unit_test(test_help_lists_every_option),
      cmocka_unit_test(test_verbose_layer_notes),
      cmocka_unit_test(test_usage_errors_exit_2),
      cmocka_unit_test(test_check_and_dump),
      cmocka_unit_test(test_bad_input_exit_1),
      cmocka_unit_test(test_run_output_roundtrip),
      cmocka_unit_test(test_emit_c),
      cmocka_unit_test(test_linear_runs_on_every_backend),
      cmocka_unit_test(test_output_targets),
      cmocka_unit_test(test_file_size_limit),
      cmocka_unit_test(test_memory_limits),
      cmocka_unit_test(test_json_utf8),
      cmocka_unit_test(test_step_messages),
      cmocka_unit_test(test_analyze_input),
      cmocka_unit_test(test_line_ends_bom_and_escapes),
      cmocka_unit_test(test_checkpoint_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
