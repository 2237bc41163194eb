// testutil.c — shared helpers for the cmocka suites (see testutil.h).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "aot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void collect(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  size_t n = strlen(msg);
  if (e->len + n >= sizeof e->buf) n = sizeof e->buf - e->len - 1;
  memcpy(e->buf + e->len, msg, n);
  e->len += n;
  e->buf[e->len] = '\0';
}

bc_ctx *tu_ctx(tu_errors *errs) {
  bc_ctx *ctx = bc_ctx_new();
  assert_non_null(ctx);
  errs->len = 0;
  errs->buf[0] = '\0';
  bc_set_error_fn(ctx, errs, collect);
  return ctx;
}

bc_graph *tu_parse(bc_ctx *ctx, const char *text) {
  return bcP_parse_string(ctx, "t.blk", text, NULL, 0);
}

void tu_expect_error(const char *text, int line, int col, const char *want) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, text);
  if (g || !strstr(errs.buf, want)) {
    print_error("expected error containing '%s'\ngot: %s\n", want, g ? "(parsed OK)" : errs.buf);
    bc_ctx_free(ctx);
    fail();
  }
  char loc[64];
  snprintf(loc, sizeof loc, "t.blk:%d:%d: error: ", line, col);
  if (strncmp(errs.buf, loc, strlen(loc)) != 0) {
    print_error("expected location %s\ngot: %s\n", loc, errs.buf);
    bc_ctx_free(ctx);
    fail();
  }
  bc_ctx_free(ctx);
}

const char *tu_tmp_path(char *buf, size_t n, const char *suffix) {
  static int counter;
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/blockc-test-%ld-%d%s", dir ? dir : "/tmp", (long)getpid(), counter++, suffix);
  return buf;
}

double tu_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > m || d != d) m = d;
  }
  return m;
}

char *tu_mktmpdir(char *buf, size_t n, const char *name) {
  const char *t = getenv("TMPDIR");
  snprintf(buf, n, "%s/blockc-%s-XXXXXX", t && *t ? t : "/tmp", name);
  assert_non_null(mkdtemp(buf));
  return buf;
}

int tu_rm_rf(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
  return rc;
}

bool tu_exists(const char *path) { return access(path, F_OK) == 0; }

char *tu_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return b;
}

bool tu_have(const char *cc) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", cc);
  return system(cmd) == 0;
}

double tu_max_abs(const float *y, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)y[i]));
  return m;
}

void tu_expect_close(const float *a, const float *b, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)a[i] - (double)b[i]) <= tol)) {
      print_error("element %lld: %.9g vs %.9g (tol %g)\n", (long long)i, a[i], b[i], tol);
      fail();
    }
}

void tu_write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

const char *tu_write_graph(char *buf, size_t n, const char *text) {
  tu_tmp_path(buf, n, ".blk");
  tu_write_bytes(buf, text, strlen(text));
  return buf;
}

void *tu_ws_alloc(int64_t bytes) {
  void *ws = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  assert_non_null(ws);
  return ws;
}

int tu_load_one_tensor(bc_ctx *ctx, bc_graph *g, const char *name, bc_shape sh) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  int64_t n = bc_shape_numel(&sh);
  float *data = calloc((size_t)n, sizeof *data);
  assert_non_null(data);
  const char *names[1] = {name};
  const float *d[1] = {data};
  assert_int_equal(bcS_write(ctx, path, 1, names, &sh, d), BC_OK);
  free(data);
  bc_weights w;
  int rc = bcW_load(ctx, g, path, &w);
  if (rc == BC_OK) bcW_free(&w);
  remove(path);
  return rc;
}

void tu_write_safetensors_raw(const char *path, const char *json, const void *data, size_t dlen) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  uint64_t n = strlen(json);
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
  assert_int_equal(fwrite(len8, 1, 8, f), 8);
  assert_int_equal(fwrite(json, 1, n, f), n);
  if (dlen) assert_int_equal(fwrite(data, 1, dlen, f), dlen);
  assert_int_equal(fclose(f), 0);
}

void tu_expect_read_error(const char *path, int rc, int want_rc, bool out_null, const char *errs,
                          const char *want) {
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s: error: ", path);
  if (rc != want_rc || !out_null || strncmp(errs, prefix, strlen(prefix)) != 0 || !strstr(errs, want)) {
    print_error("want rc %d and '%s'\ngot rc %d: %s\n", want_rc, want, rc, errs);
    fail();
  }
}

const char *tu_blockc(void) {
  const char *b = getenv("BLOCKC");
  return b && *b ? b : "build/blockc";
}

// Reads what a child wrote to path into buf (if any), then removes path.
static void take_output(const char *path, char *buf, size_t n) {
  FILE *f = buf ? fopen(path, "rb") : NULL;
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  if (buf) buf[k] = '\0';
  if (f) fclose(f);
  unlink(path);
}

int tu_spawn(char *const *argv, char *out, size_t outn, char *err, size_t errn) {
  char outp[256], errp[256];
  tu_tmp_path(outp, sizeof outp, ".out");
  tu_tmp_path(errp, sizeof errp, ".err");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail_msg("cannot spawn %s: %s (set BLOCKC)", argv[0], strerror(rc));
  int st;
  while (waitpid(pid, &st, 0) < 0) assert_int_equal(errno, EINTR);
  take_output(outp, out, outn);
  take_output(errp, err, errn);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

tu_model *tu_model_new(const char *text, const bc_define *defs, int ndefs, uint64_t seed) {
  tu_model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  m->ctx = tu_ctx(&m->errs);
  m->g = bcP_parse_string(m->ctx, "t.blk", text, defs, ndefs);
  if (!m->g) print_error("%s\n", m->errs.buf);
  assert_non_null(m->g);
  assert_int_equal(bcW_init_random(m->ctx, m->g, seed, &m->w), BC_OK);
  return m;
}

void tu_model_free(tu_model *m) {
  bcW_free(&m->w);
  bc_ctx_free(m->ctx);
  free(m);
}

float *tu_param(tu_model *m, const char *name) {
  int p = bcI_find_param(m->g, name);
  if (p < 0) print_error("no parameter '%s'\n", name);
  assert_true(p >= 0);
  return m->w.p[p];
}

int64_t tu_param_numel(tu_model *m, const char *name) {
  int p = bcI_find_param(m->g, name);
  assert_true(p >= 0);
  return bc_shape_numel(&m->g->params[p].shape);
}

void tu_set_param(tu_model *m, const char *name, const float *v) {
  memcpy(tu_param(m, name), v, (size_t)tu_param_numel(m, name) * sizeof(float));
}

void tu_fill(float *x, int64_t n, unsigned seed) {
  uint32_t s = seed * 2654435761u + 7;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0);
  }
}

void tu_grad_weights(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w) {
  bc_rng r;
  bc_rng_seed(&r, seed);
  assert_int_equal(bcW_init_random(ctx, g, seed, w), BC_OK);
  for (int p = 0; p < g->nparams; p++) {
    const bc_param *pr = &g->params[p];
    bool norm_w = pr->shape.rank == 1 && strstr(pr->name, "norm") && strstr(pr->name, "weight");
    for (int64_t k = 0, n = bc_shape_numel(&pr->shape); k < n; k++) {
      double z = bc_rng_normal(&r);
      w->p[p][k] = (float)(pr->shape.rank == 2 ? z / sqrt((double)pr->shape.d[1])
                                               : 0.2 * z + (norm_w ? 1.0 : 0.0));
    }
  }
}

float tu_rnd(tu_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return (float)((double)((r->s * 2685821657736338717ull) >> 40) / 16777216.0) * 2.0f - 1.0f;
}

float *tu_dup(const float *x, size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  if (n) memcpy(p, x, n * sizeof *p);
  return p;
}

int tu_aot_pair(bc_ctx *ctx, const char *path, const bc_define *defs, int ndefs, bool backward,
                bc_graph **g, char **c, char **h) {
  bc_aot_pair p;
  bc_aot_gen in = {.path = path, .defs = defs, .ndefs = ndefs, .backward = backward};
  int st = bcA_generate(ctx, &in, &p);
  if (!st) *g = p.g, *c = p.c_src, *h = p.h_src;
  return st;
}

bc_aot_fn tu_aot_build(bc_ctx *ctx, const tu_errors *errs, const bc_graph *g, const char *c,
                       const char *h, const char *cache_dir, bc_aot **a) {
  bc_aot_opts ao = {.cache_dir = cache_dir};
  bc_aot_fn fn = NULL;
  bool hit;
  const char *so;
  if (bcA_build(ctx, g, c, h, &ao, a, &fn, &hit, &so)) fail_msg("%s", errs->buf);
  return fn;
}

// --- test tiers ---------------------------------------------------------------------------

bool tu_check_tier(void) {
  const char *t = getenv("BLOCKC_TEST_TIER");
  return t && strcmp(t, "check") == 0;
}

int tu_run_tiered(const char *suite, const struct CMUnitTest *quick, size_t nquick,
                  const struct CMUnitTest *lng, size_t nlong) {
  bool all = tu_check_tier();
  size_t n = nquick + (all ? nlong : 0);
  struct CMUnitTest *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) {
    fprintf(stderr, "%s: out of memory\n", suite);
    return 1;
  }
  memcpy(t, quick, nquick * sizeof *t);
  if (all) memcpy(t + nquick, lng, nlong * sizeof *t);
  if (!all && nlong) {
    printf("[  LONG    ] %zu test(s) in make check:", nlong);
    for (size_t i = 0; i < nlong; i++) printf("%s %s", i ? "," : "", lng[i].name);
    printf("\n");
    fflush(stdout);
  }
  const char *f = getenv("BLOCKC_TEST_FILTER");
  if (f && *f) cmocka_set_test_filter(f);
  int rc = _cmocka_run_group_tests(suite, t, n, NULL, NULL);
  free(t);
  return rc;
}

void tu_run(tu_run_result *r, const char *const *args) {
  const char *argv[128];
  int n = 0;
  argv[n++] = tu_blockc();
  for (int i = 0; args[i]; i++) {
    assert_true(n < 127);
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  r->status = tu_spawn((char *const *)argv, r->out, sizeof r->out, r->err, sizeof r->err);
}

void tu_expect_run(const tu_run_result *r, int status, const char *in_out, const char *in_err) {
  if (r->status != status || (in_out && !strstr(r->out, in_out)) ||
      (in_err && !strstr(r->err, in_err))) {
    print_error("status %d (want %d)\nstdout: %s\nstderr: %s\n", r->status, status, r->out,
                r->err);
    fail();
  }
}

bool tu_same_file(const char *a, const char *b) {
  size_t na, nb;
  char *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
  assert_non_null(x), assert_non_null(y);
  bool same = na == nb && !memcmp(x, y, na);
  free(x), free(y);
  return same;
}
