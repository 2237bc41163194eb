// test_experiment.c — the seeds' experiment's machinery cannot rot
// (issue 24, docs/experiments.md): experiments/residual/experiment.py drives
// `blockc train`, `run` and `grad` over the four wirings' graphs, so a change
// to any of them that breaks the sweep fails here.
//
// Quick tier: one wiring of each task at the miniature size (tiny dims, 12
// steps): the script's own --check (every run logged every step, finite
// validation losses, per-layer gradient norms at every kept step for every
// layer, an exact-match rate, the plots), the table's rows, and that the
// data are generated the same way twice; a rerun reuses finished runs.  Long tier (`make check`): the whole
// miniature sweep, every wiring × task × schedule.  Bad arguments fail with
// a message.
#define _GNU_SOURCE
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *python(void) {
  return tu_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// Runs the script with args into out (a directory), its output in log;
// returns the exit status.
static int run_script(const char *out, const char *args, char *log, size_t nlog) {
  snprintf(log, nlog, "%s.log", out);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s experiments/residual/experiment.py --blockc %s --out %s %s > %s 2>&1",
           python(), tu_blockc(), out, args, log);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *slurp_or_fail(const char *path) {
  size_t len;
  char *s = tu_slurp(path, &len);
  if (!s) {
    print_error("cannot read %s\n", path);
    fail();
  }
  return s;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

// The table s with the wall-time cell of the row that starts with `row`
// cut (in place): a retrained run's wall time is its own, and rounds to
// another whole second often enough to make a comparison of it flaky.
static void cut_wall(char *s, const char *row) {
  char *r = strstr(s, row), *end = r ? strchr(r, '\n') : NULL;
  if (!end) return;
  char *bar = end - 1;                             // the row's closing '|'
  while (bar > r && *(bar - 1) != '|') bar--;      // just after the one before it
  memmove(bar, end, strlen(end) + 1);
}

static void expect_ok(const char *dir, const char *args, int runs) {
  char log[700];
  int st = run_script(dir, args, log, sizeof log);
  char *out = slurp_or_fail(log);
  if (st != 0 || !strstr(out, "every metric present")) {
    print_error("experiment.py %s: exit %d\n%s\n", args, st, out);
    fail();
  }
  char want[64];
  snprintf(want, sizeof want, "check: %d runs,", runs);
  assert_non_null(strstr(out, want));
  free(out);
}

static void test_one_wiring(void **state) {
  (void)state;
  char dir[512], a[600], b[600], p[700], q[700];
  tu_mktmpdir(dir, sizeof dir, "exp");
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(b, sizeof b, "%s/b", dir);
  expect_ok(a, "--size mini --only residual --jobs 2 --check", 4);
  char path[700];
  snprintf(path, sizeof path, "%s/table.md", a);
  char *tab = slurp_or_fail(path);
  // one row per task x schedule, in the table's order
  assert_int_equal(count(tab, "| residual |"), 4);
  assert_non_null(strstr(tab, "| s2s | 2 | warmup | residual | 0/1 |"));
  assert_non_null(strstr(tab, "| lm | 2 | none | residual | 0/1 |"));
  free(tab);
  snprintf(path, sizeof path, "%s/results.json", a);
  char *res = slurp_or_fail(path);
  assert_int_equal(count(res, "\"exact_match\": null"), 2);  // the two lm runs
  assert_int_equal(count(res, "\"diverged_at\": null"), 4);
  assert_non_null(strstr(res, "--label-smoothing 0.1"));
  free(res);
  // a rerun into the same directory reuses the finished runs (a stopped sweep
  // resumes) and prints the same table; a run whose summary is damaged, or
  // --fresh, trains again
  snprintf(path, sizeof path, "%s/table.md", a);
  char *tab1 = slurp_or_fail(path);
  snprintf(p, sizeof p, "%s/runs/lm_residual_N2_none_s1/summary.json", a);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("{\"key\": 1", f);  // cut short
  fclose(f);
  char log[700];
  assert_int_equal(run_script(a, "--size mini --only residual --jobs 2 --check", log, sizeof log), 0);
  char *out = slurp_or_fail(log);
  assert_non_null(strstr(out, "3 finished runs reused"));
  assert_int_equal(count(out, "(reused)"), 3);
  free(out);
  char *tab2 = slurp_or_fail(path);
  // wall times included: the reused runs keep theirs (the retrained one's is new)
  cut_wall(tab1, "| lm | 2 | none | residual |");
  cut_wall(tab2, "| lm | 2 | none | residual |");
  assert_string_equal(tab1, tab2);
  free(tab2);
  assert_int_equal(run_script(a, "--size mini --only residual --tasks lm --jobs 2 --check --fresh", log,
                              sizeof log), 0);
  out = slurp_or_fail(log);
  assert_null(strstr(out, "reused"));
  free(out);
  free(tab1);
  // the same data from the same seed
  expect_ok(b, "--size mini --only post_ln --tasks s2s --jobs 1 --check", 2);
  const char *files[] = {"s2s_train_src.npy", "s2s_train_tgt.npy", "s2s_valid_src.npy",
                         "s2s_valid_tgt.npy"};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", a, files[i]);
    snprintf(q, sizeof q, "%s/%s", b, files[i]);
    assert_true(tu_same_file(p, q));
  }
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_bad_arguments(void **state) {
  (void)state;
  char dir[512], out[600], log[700];
  tu_mktmpdir(dir, sizeof dir, "exp-bad");
  snprintf(out, sizeof out, "%s/o", dir);
  assert_int_not_equal(run_script(out, "--size mini --only sandwich", log, sizeof log), 0);
  char *s = slurp_or_fail(log);
  assert_non_null(strstr(s, "unknown wiring 'sandwich'"));
  free(s);
  assert_int_not_equal(run_script(out, "--size mini --tasks mt", log, sizeof log), 0);
  s = slurp_or_fail(log);
  assert_non_null(strstr(s, "unknown task 'mt'"));
  free(s);
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_mini_sweep(void **state) {
  (void)state;
  char dir[512], path[700];
  tu_mktmpdir(dir, sizeof dir, "exp-sweep");
  expect_ok(dir, "--size mini --jobs 2 --check", 16);
  snprintf(path, sizeof path, "%s/table.md", dir);
  char *tab = slurp_or_fail(path);
  assert_int_equal(count(tab, "\n| s2s |") + count(tab, "\n| lm |"), 16);
  free(tab);
  snprintf(path, sizeof path, "%s/grads.svg", dir);
  char *svg = slurp_or_fail(path);
  assert_int_equal(count(svg, "|grad| per layer"), 8);  // 2 tasks x 4 wirings
  free(svg);
  assert_int_equal(tu_rm_rf(dir), 0);
}

int main(void) {
  const struct CMUnitTest quick[] = {
      cmocka_unit_test(test_one_wiring),
      cmocka_unit_test(test_bad_arguments),
  };
  const struct CMUnitTest lng[] = {
      cmocka_unit_test(test_mini_sweep),
  };
  return tu_run_tiers(quick, lng);
}
