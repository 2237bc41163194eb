// aot.c — ahead-of-time output and the `--backend aot` path.
//
// `blockc emit` writes the vendorable pair DIR/<model>.c + DIR/<model>.h
// (the emitter's AOT mode plus its contract header).  `blockc run --backend
// aot` builds that same pair, with runtime/blockc_rt.c, into a shared object
// using the system C compiler, caches it under a key that covers everything
// that goes into the build, and dlopens it.  So the AOT backend runs exactly
// the code a user would vendor.
//
// The compiler is started with bc_spawn_wait (posix_spawnp), never through
// a shell: every argument is a separate argv entry, and the only graph-derived text in them
// is the model name, which the emitter has checked is a C identifier.
#define _POSIX_C_SOURCE 200809L
#include "aot.h"
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#ifndef BC_RUNTIME_DIR
#define BC_RUNTIME_DIR "runtime"   // the Makefile passes the absolute path
#endif

static int cmp_define(const void *a, const void *b) {
  const bc_define *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->value > y->value) - (x->value < y->value);
}

// The provenance hash: FNV-1a 64 over the graph file's bytes, then for each
// -D override in name order a NUL byte and "NAME=VALUE".  Raw bytes rather
// than the IR dump, so the hash identifies the source a reader can find
// (git hash-object-like), and the dims in the header say what it meant.
static int graph_hash(bc_ctx *ctx, const char *path, const bc_define *defs, int ndefs,
                      uint64_t *h) {
  char *text;
  size_t len;
  int st = bc_read_file(ctx, path, BC_MAX_SOURCE, &text, &len);
  if (st) return st;
  *h = bc_fnv1a(BC_FNV_OFFSET, text, len);
  bc_define *d = bc_alloc(ctx, (size_t)(ndefs ? ndefs : 1) * sizeof *d);
  if (!d) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (ndefs) memcpy(d, defs, (size_t)ndefs * sizeof *d);
  qsort(d, (size_t)ndefs, sizeof *d, cmp_define);
  for (int i = 0; i < ndefs; i++) {
    char kv[128];
    int n = snprintf(kv + 1, sizeof kv - 1, "%s=%lld", d[i].name, (long long)d[i].value);
    kv[0] = '\0';
    *h = bc_fnv1a(*h, kv, (size_t)n + 1);
  }
  return BC_OK;
}

// Passes, plan and both files for an already parsed graph.
static int generate(bc_ctx *ctx, bc_graph *g, const char *path, const bc_define *defs,
                    int ndefs, char **c_src, char **h_src) {
  uint64_t h;
  int st = graph_hash(ctx, path, defs, ndefs, &h);
  if (!st && !g->planned) st = bcO_run_until(g, NULL);
  if (st) return st;
  // Upper-cased, the model name prefixes the header's macros; BCRT_* and
  // bcrt_* belong to the runtime header it includes.
  if (!strncmp(g->model, "bcrt", 4) || !strncmp(g->model, "BCRT", 4))
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: model name '%s' starts with 'bcrt', the runtime's prefix; "
                    "rename the model", path, g->model);
  char dims[1024] = "";
  for (int i = 0, n = 0; i < g->ndims && n < (int)sizeof dims; i++)
    n += snprintf(dims + n, sizeof dims - (size_t)n, " %s=%lld", g->dims[i].name,
                  (long long)g->dims[i].value);
  const char *prov = bc_fmt(ctx,
                            "Provenance: blockc %s; graph %s; fnv1a64 %016llx (FNV-1a 64 of the "
                            "graph file's bytes, then NUL + NAME=VALUE per -D override in name "
                            "order); dims%s",
                            BC_VERSION, path, (unsigned long long)h, dims);
  bc_emit_opts eo = {.aot = true};
  *c_src = prov ? bcE_emit_c(ctx, g, &eo) : NULL;
  *h_src = *c_src ? bcE_emit_h(ctx, g, prov) : NULL;
  return *c_src && *h_src ? BC_OK : BC_EINTERNAL;
}

int bcA_generate(bc_ctx *ctx, const char *path, const bc_define *defs, int ndefs,
                 bc_graph **gout, char **c_src, char **h_src) {
  bc_graph *g = bcP_parse_file(ctx, path, defs, ndefs);
  if (!g) return BC_EINPUT;
  int st = generate(ctx, g, path, defs, ndefs, c_src, h_src);
  if (!st) *gout = g;
  return st;
}

static int write_text(bc_ctx *ctx, const char *path, const char *text) {
  const void *parts[1] = {text};
  size_t lens[1] = {strlen(text)};
  return bc_write_file_atomic(ctx, path, 1, parts, lens);
}

int bcA_write_pair(bc_ctx *ctx, const char *dir, const char *model, const char *c_src,
                   const char *h_src) {
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: output directory does not exist (%s); create it first",
                    dir, strerror(errno));
  if (!S_ISDIR(sb.st_mode))
    return bc_error(ctx, BC_EINPUT, "%s: error: not a directory", dir);
  const char *hp = bc_fmt(ctx, "%s/%s.h", dir, model), *cp = bc_fmt(ctx, "%s/%s.c", dir, model);
  if (!hp || !cp) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int st = write_text(ctx, hp, h_src);
  if (st) return st;
  st = write_text(ctx, cp, c_src);
  if (st) unlink(hp);  // a header without its .c is worse than nothing
  return st;
}

int cli_emit(bc_ctx *ctx, const cli_opts *o) {
  if (!o->output)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: emit needs -o DIR (the directory for "
                    "<model>.c and <model>.h)");
  bc_graph *g;
  char *c, *h;
  int st = bcA_generate(ctx, o->graph, o->defs, o->ndefs, &g, &c, &h);
  if (!st) st = bcA_write_pair(ctx, o->output, g->model, c, h);
  if (!st) printf("wrote %s/%s.c and %s/%s.h\n", o->output, g->model, o->output, g->model);
  return st;
}

// --- the cc backend ------------------------------------------------------------

struct bc_aot {
  void *dl;
  bc_aot_run_fn run;   // <model>_run_abi
};

static bool file_ok(const char *dir, const char *name) {
  char p[PATH_MAX];
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return false;
  return access(p, R_OK) == 0;
}

static bool runtime_in(const char *dir) {
  return dir && *dir && file_ok(dir, "blockc_rt.c") && file_ok(dir, "blockc_rt.h");
}

// Where runtime/blockc_rt.{c,h} are: $BLOCKC_RUNTIME_DIR, else next to the
// binary (<exe dir>/../runtime: build/blockc in a checkout), else the path
// the Makefile compiled in.
static const char *find_runtime(bc_ctx *ctx, const bc_aot_opts *o) {
  if (o && o->runtime_dir) return runtime_in(o->runtime_dir) ? o->runtime_dir : NULL;
  const char *env = getenv("BLOCKC_RUNTIME_DIR");
  if (env && *env) return runtime_in(env) ? env : NULL;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      const char *d = bc_fmt(ctx, "%s/../runtime", exe);
      if (runtime_in(d)) return d;
    }
  }
  return runtime_in(BC_RUNTIME_DIR) ? BC_RUNTIME_DIR : NULL;
}

static int mkdir_p(bc_ctx *ctx, const char *path) {
  char *p = bc_strdup(ctx, path);
  if (!p) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s) continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
      return bc_error(ctx, BC_EIO, "%s: error: cannot create the AOT cache directory: %s", p,
                      strerror(errno));
    if (!c) break;
    *s = c;
  }
  return BC_OK;
}

static const char *cache_root(bc_ctx *ctx, const bc_aot_opts *o) {
  if (o && o->cache_dir) return o->cache_dir;
  const char *e = getenv("BLOCKC_CACHE_DIR");
  if (e && *e) return e;
  if ((e = getenv("XDG_CACHE_HOME")) && *e == '/') return bc_fmt(ctx, "%s/blockc", e);
  if ((e = getenv("HOME")) && *e) return bc_fmt(ctx, "%s/.cache/blockc", e);
  return NULL;
}

// Splits flags on blanks into argv entries (no quoting: it is not a shell).
static int split_flags(bc_ctx *ctx, const char *flags, char **argv, int max) {
  int n = 0;
  char *s = bc_strdup(ctx, flags);
  for (char *tok = s ? strtok(s, " \t\n") : NULL; tok; tok = strtok(NULL, " \t\n")) {
    if (n == max) return -1;
    argv[n++] = tok;
  }
  return n;
}

static uint64_t hash_file(bc_ctx *ctx, uint64_t h, const char *path) {
  char *text;
  size_t len;
  if (bc_read_file(ctx, path, 64 << 20, &text, &len)) return h;
  return bc_fnv1a(h, text, len);
}

static void quiet_sink(void *opaque, const char *msg) {
  (void)opaque;
  (void)msg;
}

// The module's entries: <model>_run_abi always, <model>_forward when the
// graph is simple (*fn stays NULL otherwise).
static int load_module(bc_ctx *ctx, const char *so, const bc_graph *g, bc_aot **out,
                       bc_aot_fn *fn) {
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return bc_error(ctx, BC_EINPUT, "%s: error: cannot load the AOT module: %s", so, dlerror());
  void *run = dlsym(dl, bc_fmt(ctx, "%s_run_abi", g->model));
  void *fwd = bcE_is_simple(g) ? dlsym(dl, bc_fmt(ctx, "%s_forward", g->model)) : NULL;
  if (!run || (bcE_is_simple(g) && !fwd)) {
    dlclose(dl);
    return bc_error(ctx, BC_EINTERNAL, "%s: internal error: no %s_run_abi or %s_forward in the module",
                    so, g->model, g->model);
  }
  bc_aot *a = calloc(1, sizeof *a);
  if (!a) {
    dlclose(dl);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  a->dl = dl;
  memcpy(&a->run, &run, sizeof a->run);  // POSIX: object and function pointers convert
  if (fwd) memcpy(fn, &fwd, sizeof *fn);
  *out = a;
  return BC_OK;
}

bc_aot_run_fn bcA_run(const bc_aot *a) { return a ? a->run : NULL; }

int bcA_build(bc_ctx *ctx, const bc_graph *g, const char *c_src, const char *h_src,
              const bc_aot_opts *o, bc_aot **out, bc_aot_fn *fn, bool *cache_hit,
              const char **so_path) {
  *out = NULL;
  *fn = NULL;
  *cache_hit = false;
  const char *cc = o && o->cc ? o->cc : "cc";
  const char *cflags = o && o->cflags ? o->cflags : getenv("BLOCKC_CFLAGS");
  if (!cflags || !*cflags) cflags = "-O3 -march=native";
  const char *rt = find_runtime(ctx, o);
  if (!rt)
    return bc_error(ctx, BC_EINPUT, "error: cannot find runtime/blockc_rt.c and blockc_rt.h for "
                    "the AOT backend; set BLOCKC_RUNTIME_DIR to the directory holding them");
  const char *root = cache_root(ctx, o);
  if (!root)
    return bc_error(ctx, BC_EINPUT, "error: no AOT cache directory: set BLOCKC_CACHE_DIR (or HOME)");
  // The key covers every input of the build: both sources, the runtime,
  // the compiler and its flags, and blockc's version.
  uint64_t h = bc_fnv1a(BC_FNV_OFFSET, BC_VERSION, sizeof BC_VERSION);
  h = bc_fnv1a(h, c_src, strlen(c_src) + 1);
  h = bc_fnv1a(h, h_src, strlen(h_src) + 1);
  h = bc_fnv1a(h, cc, strlen(cc) + 1);
  h = bc_fnv1a(h, cflags, strlen(cflags) + 1);
  h = hash_file(ctx, h, bc_fmt(ctx, "%s/blockc_rt.c", rt));
  h = hash_file(ctx, h, bc_fmt(ctx, "%s/blockc_rt.h", rt));
  const char *dir = bc_fmt(ctx, "%s/%s-%016llx", root, g->model, (unsigned long long)h);
  const char *so = bc_fmt(ctx, "%s/%s.so", dir, g->model);
  if (!dir || !so) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *so_path = so;
  if (access(so, R_OK) == 0) {
    *cache_hit = true;
    return load_module(ctx, so, g, out, fn);
  }
  int st = mkdir_p(ctx, dir);
  if (!st) st = bcA_write_pair(ctx, dir, g->model, c_src, h_src);
  if (st) return st;
  // Build into a per-process name and rename: concurrent builds of the same
  // key each produce a complete module, and the last rename wins.
  const char *tmp = bc_fmt(ctx, "%s/%s.so.%ld.tmp", dir, g->model, (long)getpid());
  const char *log = bc_fmt(ctx, "%s/build.%ld.log", dir, (long)getpid());
  const char *csrc = bc_fmt(ctx, "%s/%s.c", dir, g->model);
  const char *rtsrc = bc_fmt(ctx, "%s/blockc_rt.c", rt);
  if (!tmp || !log || !csrc || !rtsrc) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  char *argv[96];
  int n = 0;
  argv[n++] = (char *)cc;
  int nf = split_flags(ctx, cflags, argv + n, 64);
  if (nf < 0) return bc_error(ctx, BC_EUSAGE, "blockc: error: too many words in BLOCKC_CFLAGS (limit 64)");
  n += nf;
  // -Bsymbolic: the module's calls to its own kernels (and to its own
  // cblas_sgemm under -DBLOCKC_NO_BLAS) bind inside it, not to the copies
  // already loaded in this process.
  const char *fixed[] = {"-std=c99", "-shared", "-fPIC", "-Wl,-Bsymbolic", "-I", rt, "-I", dir};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[n++] = (char *)fixed[i];
  argv[n++] = (char *)csrc;
  argv[n++] = (char *)rtsrc;
  argv[n++] = "-o";
  argv[n++] = (char *)tmp;
  if (!strstr(cflags, "-DBLOCKC_NO_BLAS")) argv[n++] = "-lopenblas";
  argv[n++] = "-lm";
  argv[n] = NULL;
  int err = 0, rc = bc_spawn_wait(argv, log, &err);
  if (rc != 0) {
    char *text = NULL;
    size_t len = 0;
    bc_ctx *quiet = bc_ctx_new();  // the log may be missing; that is not the error
    if (quiet) {
      bc_set_error_fn(quiet, NULL, quiet_sink);
      if (bc_read_file(quiet, log, 1 << 20, &text, &len) == BC_OK && len > 3000) text[3000] = '\0';
    }
    if (rc < 0)
      st = bc_error(ctx, BC_EINPUT, "error: cannot run the C compiler '%s': %s (choose one with --cc)",
                    cc, strerror(err));
    else
      st = bc_error(ctx, BC_EINPUT, "error: the C compiler '%s' failed (status %d) building the "
                    "AOT module in %s:\n%s", cc, rc, dir, text ? text : "(no output)");
    bc_ctx_free(quiet);
    unlink(tmp);
    unlink(log);
    return st;
  }
  unlink(log);
  if (rename(tmp, so) != 0) {
    st = bc_error(ctx, BC_EIO, "%s: error: cannot rename the built module: %s", so, strerror(errno));
    unlink(tmp);
    return st;
  }
  return load_module(ctx, so, g, out, fn);
}

void bcA_free(bc_aot *a) {
  if (!a) return;
  dlclose(a->dl);
  free(a);
}

// `blockc run --backend aot`: the graph (parsed by cli_run) through the
// same emission as `blockc emit`, built or found in the cache, then run
// through the module's <model>_run_abi (io and rt as for bc_run_fn).
int cli_run_aot_io(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                   void *const *io, const long *rt, double *compile_ms, double *forward_ms) {
  double t0 = cli_now_ms();
  char *c, *h;
  int st = generate(ctx, g, o->graph, o->defs, o->ndefs, &c, &h);
  bc_aot *a = NULL;
  bc_aot_fn fn = NULL;
  bool hit = false;
  const char *so = NULL;
  bc_aot_opts ao = {.cc = o->cc};
  if (!st) st = bcA_build(ctx, g, c, h, &ao, &a, &fn, &hit, &so);
  *compile_ms = cli_now_ms() - t0;
  void *ws = NULL;
  if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
  if (!st) {
    printf("aot module %s (%s)\n", so, hit ? "cache hit" : "built");
    cli_set_threads(o->threads);
    double t1 = cli_now_ms();
    int rc = a->run((const void *)w->p, io, rt, ws);
    *forward_ms = cli_now_ms() - t1;
    if (rc) st = bc_error(ctx, BC_EINTERNAL, "internal error: AOT run returned status %d", rc);
  }
  free(ws);
  bcA_free(a);
  return st;
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// `blockc bench`'s AOT column: the module's run, median of iters runs
// after two warm-ups (as the JIT's).  Failures (no C compiler) are reported
// and leave *forward_ms negative; bench carries on with the JIT numbers.
int cli_bench_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                  void *const *io, const long *rt, void *ws, double *build_ms,
                  double *forward_ms) {
  *forward_ms = *build_ms = -1;
  double t0 = cli_now_ms();
  char *c, *h;
  bc_aot *a = NULL;
  bc_aot_fn fn = NULL;
  bool hit;
  const char *so;
  bc_aot_opts ao = {.cc = o->cc};
  int st = generate(ctx, g, o->graph, o->defs, o->ndefs, &c, &h);
  if (!st) st = bcA_build(ctx, g, c, h, &ao, &a, &fn, &hit, &so);
  if (st) return st;
  *build_ms = hit ? 0 : cli_now_ms() - t0;
  double *t = malloc((size_t)o->iters * sizeof *t);
  if (!t) {
    bcA_free(a);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  const void *wp = (const void *)w->p;
  for (int i = 0; i < 2; i++) a->run(wp, io, rt, ws);
  for (int i = 0; i < o->iters; i++) {
    double t1 = cli_now_ms();
    a->run(wp, io, rt, ws);
    t[i] = cli_now_ms() - t1;
  }
  qsort(t, (size_t)o->iters, sizeof *t, cmp_ms);
  int n = o->iters;
  *forward_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  free(t);
  bcA_free(a);
  return BC_OK;
}
