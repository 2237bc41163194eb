// testutil.h — shared helpers for the cmocka suites.
#ifndef TESTUTIL_H
#define TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "aot.h"
#include "bc.h"

// A context whose error messages are collected in a buffer instead of
// printed, so tests can assert on them.
typedef struct {
  char buf[65536];
  size_t len;
} tu_errors;

bc_ctx *tu_ctx(tu_errors *errs);
// A minimal valid graph prelude most graph-text cases build on (x : [1, 4, 8]).
#define TU_PRE "model m\ndim B = 1\ndim T = 4\ndim D = 8\ninput x : [B, T, D]\n"
// Parse a graph from a string (file name "t.blk"); NULL on error.
bc_graph *tu_parse(bc_ctx *ctx, const char *text);
// Assert that parsing fails with a message containing `want` at line:col.
void tu_expect_error(const char *text, int line, int col, const char *want);
// Fresh temp path under $TMPDIR (or /tmp) with the given suffix.
const char *tu_tmp_path(char *buf, size_t n, const char *suffix);
// A fresh private directory $TMPDIR/blockc-NAME-XXXXXX in buf (asserting mkdtemp).
char *tu_mktmpdir(char *buf, size_t n, const char *name);
// `rm -rf dir`: its exit status (0 on success; otherwise it also warns on stderr).
int tu_rm_rf(const char *dir);
// Whether path exists (access F_OK).
bool tu_exists(const char *path);
// Writes exactly these bytes to path (asserting success).
void tu_write_bytes(const char *path, const void *data, size_t n);
// Writes graph text to a fresh temp .blk path in buf; returns buf.
const char *tu_write_graph(char *buf, size_t n, const char *text);
// A 64-byte aligned block of at least bytes (rounded up to 64; asserting).
void *tu_ws_alloc(int64_t bytes);
// Writes a safetensors file holding one zero tensor `name` of shape sh and
// returns bcW_load's status for g (the weights freed when they load).
int tu_load_one_tensor(bc_ctx *ctx, bc_graph *g, const char *name, bc_shape sh);
// A safetensors file by hand: 8-byte little-endian header length, the JSON
// header as given (no padding), then dlen bytes of data.
void tu_write_safetensors_raw(const char *path, const char *json, const void *data, size_t dlen);
// Fails (printing want and what came) unless a reader of path returned
// want_rc with no result (out_null) and errs starts "<path>: error: " and
// contains want.
void tu_expect_read_error(const char *path, int rc, int want_rc, bool out_null, const char *errs,
                          const char *want);
// The blockc binary under test: $BLOCKC (set by `make test`) or build/blockc.
const char *tu_blockc(void);
// One run of the blockc under test, its exit status and output captured.
typedef struct tu_run_result {
  int status;  // exit code, or 128 + signal
  char out[1 << 16];
  char err[1 << 16];
} tu_run_result;
// Runs tu_blockc() with args (NULL-terminated, not counting argv[0]).
void tu_run(tu_run_result *r, const char *const *args);
#define TU_RUN(r, ...)                            \
  do {                                            \
    const char *tu_args_[] = {__VA_ARGS__, NULL}; \
    tu_run(r, tu_args_);                          \
  } while (0)
// Fails (printing both streams) unless the run exited with status and its
// stdout contains in_out and its stderr in_err (either NULL: anything).
void tu_expect_run(const tu_run_result *r, int status, const char *in_out, const char *in_err);
// Runs argv (no shell) with stdout and stderr captured into out and err
// (each NUL-terminated, truncated to its size; either may be NULL to
// discard). Returns the exit code, or 128 + the signal that killed it.
int tu_spawn(char *const *argv, char *out, size_t outn, char *err, size_t errn);
// A graph parsed from text (file name "t.blk", -D overrides) with seeded
// weights (bcW_init_random); its errors are collected in errs.  Asserts that
// parsing and initialisation succeed.
typedef struct tu_model {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  bc_weights w;
} tu_model;
tu_model *tu_model_new(const char *text, const bc_define *defs, int ndefs, uint64_t seed);
void tu_model_free(tu_model *m);
// The weights of parameter `name` (asserting it exists) and its size.
float *tu_param(tu_model *m, const char *name);
int64_t tu_param_numel(tu_model *m, const char *name);
void tu_set_param(tu_model *m, const char *name, const float *v);  // copies numel floats
// Deterministic floats in [-1, 1) (a 32-bit LCG; tests only).
void tu_fill(float *x, int64_t n, unsigned seed);
// Weights for gradient tests: bcW_init_random's arrays, refilled from seed
// with matrices N(0, 1/fan_in) and vectors 0.2 N(0, 1) (+1 for a norm's
// weight) so every bias and affine term gets a non-trivial gradient.
void tu_grad_weights(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w);
// path's bytes, NUL-terminated (malloc'ed), and their count in *len; NULL if it cannot be opened.
char *tu_slurp(const char *path, size_t *len);
// Whether two files have the same bytes (asserting both can be read).
bool tu_same_file(const char *a, const char *b);
// Whether the shell finds command cc (`command -v`).
bool tu_have(const char *cc);
// xorshift64*: deterministic data without libc rand's global state.
typedef struct {
  uint64_t s;
} tu_rng;
// The next float of r in [-1, 1).
float tu_rnd(tu_rng *r);
// A malloc'ed copy of n floats (asserting the allocation).
float *tu_dup(const float *x, size_t n);
// Max |y| over n floats.
double tu_max_abs(const float *y, size_t n);
// Fails (printing the first bad index and both values) unless |a-b| <= tol elementwise.
void tu_expect_close(const float *a, const float *b, int64_t n, double tol);
// Max |a-b| over n floats.
double tu_max_abs_diff(const float *a, const float *b, size_t n);
// The AOT pair of the graph file path (bcA_generate, parsing it): *g, *c,
// *h as the pair's; returns bcA_generate's status.
int tu_aot_pair(bc_ctx *ctx, const char *path, const bc_define *defs, int ndefs, bool backward,
                bc_graph **g, char **c, char **h);

// bcA_build of the pair into cache_dir (no other options), failing with
// errs on error: the module in *a; returns its forward function (NULL if none).
bc_aot_fn tu_aot_build(bc_ctx *ctx, const tu_errors *errs, const bc_graph *g, const char *c,
                       const char *h, const char *cache_dir, bc_aot **a);

// --- test tiers ---------------------------------------------------------------------------
// `make test` runs the quick tier; `make check` (BLOCKC_TEST_TIER=check) also
// the long cases: big sweeps, every shipped graph through three compilers.
// tu_run_tiers(quick, long) runs the suite's cmocka group: the quick cases
// always, the long ones only in the check tier; in the quick tier it prints
// "[  LONG    ] N test(s) in make check: name, ..." so a long case is never
// skipped silently (tests/run.sh counts them).  BLOCKC_TEST_FILTER=PATTERN
// runs only the cases matching it (cmocka's filter: `*` wildcards).
bool tu_check_tier(void);
int tu_run_tiered(const char *suite, const struct CMUnitTest *quick, size_t nquick,
                  const struct CMUnitTest *lng, size_t nlong);
#define tu_run_tiers(quick, lng) \
  tu_run_tiered(__FILE__, quick, sizeof(quick) / sizeof((quick)[0]), lng, \
                sizeof(lng) / sizeof((lng)[0]))
#endif
