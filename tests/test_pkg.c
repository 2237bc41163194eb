// test_pkg.c — `blockc weights` and `blockc dot`, the files blockc writes
// for the world outside it.
//
// weights: the file loads back (bcW_load) to exactly bcW_init_random's
// arrays for that seed, and `run --weights FILE` prints what `run --seed S`
// prints.  dot: the text is read back by a small parser of the DOT subset
// blockc writes (statements, quoted strings, nested subgraphs) and checked
// for structure: every node once, edges between declared nodes, one
// cluster per layer holding that layer's nodes.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "cli.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// --- weights ---------------------------------------------------------------

static cli_opts opts_for(const char *graph, const char *out, uint64_t seed) {
  cli_opts o = {.graph = graph, .threads = 1, .iters = 1, .seed = seed};
  if (out) {
    o.output = out;
    o.outputs[0] = (cli_file){NULL, out, "-o", out};
    o.noutputs = 1;
  }
  return o;
}

static void test_weights_round_trip(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  cli_opts o = opts_for("graphs/tiny.blk", path, 7);
  fflush(stdout);
  int saved = dup(1);  // the command's "wrote ..." line is not test output
  assert_true(saved >= 0 && freopen("/dev/null", "w", stdout));
  int st = cli_cmd_weights(ctx, &o);
  fflush(stdout);
  assert_int_equal(dup2(saved, 1), 1);
  close(saved);
  assert_int_equal(st, BC_OK);
  bc_graph *g = bcP_parse_file(ctx, "graphs/tiny.blk", NULL, 0);
  assert_non_null(g);
  bc_weights loaded = {0}, seeded = {0}, other = {0};
  assert_int_equal(bcW_load(ctx, g, path, &loaded), BC_OK);
  assert_int_equal(bcW_init_random(ctx, g, 7, &seeded), BC_OK);
  assert_int_equal(bcW_init_random(ctx, g, 8, &other), BC_OK);
  assert_int_equal(loaded.n, g->nparams);
  bool differs_from_other = false;
  for (int i = 0; i < g->nparams; i++) {
    size_t n = (size_t)bc_shape_numel(&g->params[i].shape);
    assert_memory_equal(loaded.p[i], seeded.p[i], n * sizeof(float));
    differs_from_other |= memcmp(loaded.p[i], other.p[i], n * sizeof(float)) != 0;
  }
  assert_true(differs_from_other);  // the seed reaches the file
  bcW_free(&loaded);
  bcW_free(&seeded);
  bcW_free(&other);
  unlink(path);
  bc_ctx_free(ctx);
}

// Runs the blockc binary; returns its exit status, stdout in out.
static int blockc(char *out, size_t n, char *err, size_t en, const char *const *args) {
  const char *argv[32];
  int k = 0;
  argv[k++] = tu_blockc();
  for (int i = 0; args[i]; i++) argv[k++] = args[i];
  argv[k] = NULL;
  return tu_spawn((char *const *)argv, out, n, err, en);
}

// The first line of the run's stdout: the output statistics.
static void first_line(char *s) {
  char *nl = strchr(s, '\n');
  if (nl) *nl = '\0';
}

static void test_weights_cli_matches_run(void **state) {
  (void)state;
  char path[256], a[8192], b[8192], err[8192];
  tu_tmp_path(path, sizeof path, ".safetensors");
  const char *w[] = {"weights", "graphs/tiny.blk", "-o", path, "--seed", "5", NULL};
  assert_int_equal(blockc(a, sizeof a, err, sizeof err, w), 0);
  assert_non_null(strstr(a, "tensors"));
  const char *r1[] = {"run", "graphs/tiny.blk", "--backend", "interp", "--weights", path, "--seed", "5", NULL};
  const char *r2[] = {"run", "graphs/tiny.blk", "--backend", "interp", "--seed", "5", NULL};
  const char *r3[] = {"run", "graphs/tiny.blk", "--backend", "interp", "--seed", "6", NULL};
  assert_int_equal(blockc(a, sizeof a, err, sizeof err, r1), 0);
  assert_int_equal(blockc(b, sizeof b, err, sizeof err, r2), 0);
  first_line(a);
  first_line(b);
  assert_non_null(strstr(a, "output [2, 5, 8]"));
  assert_string_equal(a, b);
  assert_int_equal(blockc(b, sizeof b, err, sizeof err, r3), 0);
  first_line(b);
  assert_string_not_equal(a, b);
  unlink(path);
}

static void test_weights_usage(void **state) {
  (void)state;
  char out[4096], err[4096];
  const char *noout[] = {"weights", "graphs/tiny.blk", NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, noout), 2);
  assert_non_null(strstr(err, "weights needs -o FILE"));
  const char *nodir[] = {"weights", "graphs/tiny.blk", "-o", "/nonexistent-dir/w.safetensors", NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, nodir), 1);
  const char *badgraph[] = {"weights", "tests/bad/cycle.blk", "-o", "/tmp/never.safetensors", NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, badgraph), 1);
  struct stat sb;
  assert_int_not_equal(stat("/tmp/never.safetensors", &sb), 0);
}

// --- the vendored example, copied out of the repository --------------------

// Runs a shell command line (fixed text and temp paths only); output in out.
static int sh(char *out, size_t n, const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  assert_true(len > 0 && (size_t)len < sizeof cmd);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  return tu_spawn(argv, out, n, NULL, 0);
}

// examples/vendor's CMakeLists.txt and main.c in a folder of their own with
// `blockc emit`'s tiny.{c,h}; the runtime from the checkout through the
// BLOCKC_RUNTIME_DIR cache variable; weights from `blockc weights`.  The
// program's y equals `blockc run --weights` on the same x.
static void test_vendor_copied_out(void **state) {
  (void)state;
  static char out[1 << 16];
  char dir[256], cwd[512];
  tu_tmp_path(dir, sizeof dir, ".vendor");
  assert_non_null(getcwd(cwd, sizeof cwd));
  const char *b = tu_blockc();
  if (sh(out, sizeof out,
         "mkdir -p %s/src && cp examples/vendor/CMakeLists.txt examples/vendor/main.c %s/src/ && "
         "%s emit graphs/tiny.blk -o %s/src && %s weights graphs/tiny.blk -o %s/w.safetensors --seed 4 && "
         "%s run graphs/tiny.blk --seed 4 --output %s/x.npy && "
         "%s run graphs/tiny.blk --weights %s/w.safetensors --input %s/x.npy --output %s/y_ref.npy",
         dir, dir, b, dir, b, dir, b, dir, b, dir, dir, dir))
    fail_msg("preparing the folder failed:\n%s", out);
  if (sh(out, sizeof out,
         "cd %s && cmake -S src -B build -DBLOCKC_MODEL=tiny -DBLOCKC_RUNTIME_DIR=%s/runtime && "
         "cmake --build build && ./build/tiny w.safetensors x.npy y.npy && "
         "grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' build/CMakeCache.txt && "
         "grep -q -- '-std=c99' build/CMakeFiles/tiny.dir/flags.make && echo default-build-ok",
         dir, cwd))
    fail_msg("the copied-out CMake build failed:\n%s", out);
  assert_non_null(strstr(out, "default-build-ok"));  // Release and -std=c99 by default
  // A project of one's own links the model through the library target
  // blockc::tiny (issue 20, item 12: the example built only an executable).
  if (sh(out, sizeof out,
         "mkdir -p %s/app && cd %s/app && "
         "printf '%%s\\n' 'cmake_minimum_required(VERSION 3.13)' 'project(app C)' "
         "'set(BLOCKC_MODEL tiny CACHE STRING \"\")' 'set(BLOCKC_EXAMPLE OFF CACHE BOOL \"\")' "
         "'add_subdirectory(../src blockc)' 'add_executable(app app.c)' "
         "'target_link_libraries(app PRIVATE blockc::tiny)' > CMakeLists.txt && "
         "printf '%%s\\n' '#include \"tiny.h\"' "
         "'int main(void) { int (*f)(const tiny_weights *, const tiny_io *, void *) = tiny_run;' "
         "'  return f && TINY_D == 8 ? 0 : 1; }' > app.c && "
         "cmake -S . -B build -DBLOCKC_RUNTIME_DIR=%s/runtime && cmake --build build && "
         "./build/app && test ! -e build/blockc/tiny && test -f build/blockc/libblockc_tiny.a && "
         "echo library-target-ok", dir, dir, cwd))
    fail_msg("a project linking blockc::tiny failed:\n%s", out);
  assert_non_null(strstr(out, "library-target-ok"));
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  char p[400];
  bc_shape ys, rs;
  float *y, *ref;
  snprintf(p, sizeof p, "%s/y.npy", dir);
  assert_int_equal(bcN_read(ctx, p, &ys, &y), BC_OK);
  snprintf(p, sizeof p, "%s/y_ref.npy", dir);
  assert_int_equal(bcN_read(ctx, p, &rs, &ref), BC_OK);
  assert_true(bc_shape_eq(&ys, &rs));
  size_t n = (size_t)bc_shape_numel(&ys);
  double ymax = 0;
  for (size_t i = 0; i < n; i++) ymax = fmax(ymax, fabs(ref[i]));
  double err = tu_max_abs_diff(y, ref, n);
  if (!(err <= 1e-5 * (1 + ymax))) fail_msg("max |y - blockc run| = %g", err);
  free(y);
  free(ref);
  bc_ctx_free(ctx);
  sh(NULL, 0, "rm -rf %s", dir);
}

// --- dot -------------------------------------------------------------------

#define MAXN 512
typedef struct dot_graph {
  char kind[16], name[64];
  int nnodes;
  char node[MAXN][32];
  int cluster_of[MAXN];   // -1 top level
  int nclusters;
  char cluster_label[64][64];
  int nedges;
  char edge_from[2 * MAXN][32], edge_to[2 * MAXN][32];
} dot_graph;

// The next token of the DOT subset: an ID, a quoted string (unquoted into
// tok), or punctuation ({ } [ ] ; , = and ->).  0 at the end.
static int next_tok(const char **p, char *tok, size_t n) {
  const char *s = *p;
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return 0;
  size_t k = 0;
  if (*s == '"') {
    for (s++; *s && *s != '"'; s++) {
      if (*s == '\\' && s[1]) s++;
      if (k + 1 < n) tok[k++] = *s;
    }
    assert_int_equal(*s, '"');  // unterminated string
    s++;
  } else if (s[0] == '-' && s[1] == '>') {
    tok[k++] = '-', tok[k++] = '>';
    s += 2;
  } else if (strchr("{}[];,=", *s)) {
    tok[k++] = *s++;
  } else {
    while (*s && (isalnum((unsigned char)*s) || *s == '_' || *s == '.'))
      if (k + 1 < n) tok[k++] = *s++;
      else s++;
    assert_true(k > 0);  // a byte outside the subset
  }
  tok[k] = '\0';
  *p = s;
  return 1;
}

// dst = src, which must fit.
static void cp(char *dst, size_t n, const char *src) {
  size_t len = strlen(src);
  assert_true(len < n);
  memcpy(dst, src, len + 1);
}

static int find_node(const dot_graph *d, const char *id) {
  for (int i = 0; i < d->nnodes; i++)
    if (!strcmp(d->node[i], id)) return i;
  return -1;
}

// Skips an attribute list "[ ... ]"; in a cluster, `label = "x"` statements
// set the cluster's label.
static void skip_attrs(const char **p) {
  char t[4096];
  while (next_tok(p, t, sizeof t) && strcmp(t, "]")) {
  }
}

static void parse_dot(const char *text, dot_graph *d) {
  memset(d, 0, sizeof *d);
  const char *p = text;
  char t[4096], id[64];
  assert_true(next_tok(&p, d->kind, sizeof d->kind));
  assert_true(next_tok(&p, d->name, sizeof d->name));
  assert_true(next_tok(&p, t, sizeof t));
  assert_string_equal(t, "{");
  int stack[8], depth = 0;
  stack[0] = -1;
  while (next_tok(&p, t, sizeof t)) {
    if (!strcmp(t, "}")) {
      if (depth == 0) break;
      depth--;
      continue;
    }
    if (!strcmp(t, ";")) continue;
    if (!strcmp(t, "subgraph")) {
      assert_true(next_tok(&p, id, sizeof id));
      assert_int_equal(strncmp(id, "cluster", 7), 0);
      assert_true(next_tok(&p, t, sizeof t));
      assert_string_equal(t, "{");
      assert_true(depth < 7 && d->nclusters < 64);
      stack[++depth] = d->nclusters++;
      continue;
    }
    if (!strcmp(t, "graph") || !strcmp(t, "node") || !strcmp(t, "edge")) {
      assert_true(next_tok(&p, t, sizeof t));
      assert_string_equal(t, "[");
      skip_attrs(&p);
      continue;
    }
    // ID = value | ID [attrs] | ID -> ID [attrs]
    cp(id, sizeof id, t);
    const char *save = p;
    assert_true(next_tok(&p, t, sizeof t));
    if (!strcmp(t, "=")) {
      assert_true(next_tok(&p, t, sizeof t));
      if (!strcmp(id, "label") && depth > 0)
        cp(d->cluster_label[stack[depth]], sizeof d->cluster_label[0], t);
    } else if (!strcmp(t, "->")) {
      char to[64];
      assert_true(next_tok(&p, to, sizeof to));
      assert_true(d->nedges < 2 * MAXN);
      cp(d->edge_from[d->nedges], sizeof d->edge_from[0], id);
      cp(d->edge_to[d->nedges++], sizeof d->edge_to[0], to);
      save = p;
      if (next_tok(&p, t, sizeof t) && !strcmp(t, "[")) skip_attrs(&p);
      else p = save;
    } else {
      assert_int_equal(find_node(d, id), -1);  // each node declared once
      assert_true(d->nnodes < MAXN);
      cp(d->node[d->nnodes], sizeof d->node[0], id);
      d->cluster_of[d->nnodes++] = stack[depth];
      if (!strcmp(t, "[")) skip_attrs(&p);
      else p = save;
    }
  }
  assert_int_equal(depth, 0);
  while (next_tok(&p, t, sizeof t)) fail_msg("text after the graph: %s", t);
}

static char *dot_text(bc_ctx *ctx, const char *graph, const bc_define *defs, int ndefs,
                      const char *after) {
  bc_graph *g = bcP_parse_file(ctx, graph, defs, ndefs);
  assert_non_null(g);
  if (after) assert_int_equal(bcO_run_until(g, after), BC_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(cli_write_dot(ctx, g, after ? after : "as parsed", f), BC_OK);
  fclose(f);
  return text;
}

static int nodes_in(const dot_graph *d, int cluster) {
  int n = 0;
  for (int i = 0; i < d->nnodes; i++) n += d->cluster_of[i] == cluster && d->node[i][0] == 'n';
  return n;
}

static void check_edges_declared(const dot_graph *d) {
  for (int i = 0; i < d->nedges; i++) {
    assert_int_not_equal(find_node(d, d->edge_from[i]), -1);
    assert_int_not_equal(find_node(d, d->edge_to[i]), -1);
  }
}

// Pre-LN with 3 layers: 6 nodes per layer cluster, the final norm outside.
static void test_dot_pre_ln_clusters(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  bc_define defs[] = {{"N", 3}, {"D", 16}, {"T", 4}, {"H", 2}};
  char *text = dot_text(ctx, "graphs/pre_ln.blk", defs, 4, NULL);
  dot_graph *d = malloc(sizeof *d);
  assert_non_null(d);
  parse_dot(text, d);
  assert_string_equal(d->kind, "digraph");
  assert_string_equal(d->name, "pre_ln");
  assert_int_equal(d->nnodes, 3 * 6 + 1 + 3);  // nodes + inputs x, len + output
  assert_int_equal(d->nclusters, 3);
  for (int k = 0; k < 3; k++) {
    char want[32];
    snprintf(want, sizeof want, "layers.%d", k);
    assert_string_equal(d->cluster_label[k], want);
    assert_int_equal(nodes_in(d, k), 6);
  }
  assert_int_equal(nodes_in(d, -1), 1);
  // Each layer: x->LN, LN->Attn, x->Add, Attn->Add, Add->LN, LN->FFN,
  // Add->Add, FFN->Add (8), len->Attn (1); the final norm (1) and the output (1).
  assert_int_equal(d->nedges, 3 * 9 + 2);
  check_edges_declared(d);
  free(d);
  free(text);
  bc_ctx_free(ctx);
}

// ResiDual after the passes: fused nodes carry their parts; the final Add
// and LayerNorm (parameter `norm`, no layer index) stay at the top level.
static void test_dot_residual_after_passes(void **state) {
  (void)state;
  tu_errors e;
  bc_ctx *ctx = tu_ctx(&e);
  char *text = dot_text(ctx, "graphs/tiny.blk", NULL, 0, "inplace");
  dot_graph *d = malloc(sizeof *d);
  assert_non_null(d);
  parse_dot(text, d);
  assert_int_equal(d->nclusters, 2);
  assert_int_equal(nodes_in(d, 0), 4);  // Attention, DualAddLN, FFN, DualAddLN
  assert_int_equal(nodes_in(d, 1), 4);
  assert_int_equal(nodes_in(d, -1), 2);
  assert_non_null(strstr(text, "DualAddLayerNorm"));
  assert_non_null(strstr(text, "fused: Add@18:10 + Add@19:20 + LayerNorm@19:10"));
  assert_null(strstr(text, "graphs/tiny.blk:"));  // locations shortened
  check_edges_declared(d);
  free(d);
  free(text);
  bc_ctx_free(ctx);
}

static void test_dot_cli(void **state) {
  (void)state;
  static char out[1 << 16], err[4096], file[1 << 16];
  char path[256];
  tu_tmp_path(path, sizeof path, ".dot");
  const char *to_stdout[] = {"dot", "graphs/tiny.blk", "--after", "fuse-add-ln", NULL};
  const char *to_file[] = {"dot", "graphs/tiny.blk", "--after", "fuse-add-ln", "-o", path, NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, to_stdout), 0);
  assert_int_equal(blockc(file, sizeof file, err, sizeof err, to_file), 0);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(file, 1, sizeof file - 1, f);
  file[n] = '\0';
  fclose(f);
  unlink(path);
  assert_string_equal(out, file);
  dot_graph *d = malloc(sizeof *d);
  assert_non_null(d);
  parse_dot(out, d);
  assert_int_equal(d->nclusters, 2);
  free(d);
  const char *badpass[] = {"dot", "graphs/tiny.blk", "--after", "nope", NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, badpass), 2);
  assert_non_null(strstr(err, "unknown pass 'nope'"));
  const char *badgraph[] = {"dot", "tests/bad/cycle.blk", NULL};
  assert_int_equal(blockc(out, sizeof out, err, sizeof err, badgraph), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_weights_round_trip),
      cmocka_unit_test(test_weights_cli_matches_run),
      cmocka_unit_test(test_weights_usage),
      cmocka_unit_test(test_dot_pre_ln_clusters),
      cmocka_unit_test(test_dot_residual_after_passes),
      cmocka_unit_test(test_dot_cli),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_vendor_copied_out),  // a CMake Release build of the runtime
  };
  return tu_run_tiers(tests, long_tests);
}
