// aot.c — ahead-of-time output and the `--backend aot` path.
//
// bcA_write_pair writes the vendorable pair DIR/<model>.c + DIR/<model>.h
// (the emitter's AOT mode plus its contract header) for `blockc emit`;
// bcA_build (`--backend aot`) builds that same pair, with
// runtime/blockc_rt.c, into a shared object using the system C compiler,
// caches it under a key that covers everything that goes into the build,
// and dlopens it.  The runtime is compiled once per compiler, flags and
// runtime source into ROOT/blockc_rt-<key>/blockc_rt.o and each module is
// linked against that object.  Every cached file is published and checked
// as aot_cache.c describes (unique temps, fsync, a checksum sidecar, a
// lock per directory).  So the AOT backend runs exactly the code a user would
// vendor.  This file is library code; the commands that use it are in
// cli/aot_cmds.c.
//
// The compiler is started with bc_spawn_wait (posix_spawnp), never through
// a shell: every argument is a separate argv entry, and the only graph-derived text in them
// is the model name, which the emitter has checked is a C identifier.
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700
#include "aot.h"
#include "aot_cache.h"

#include <ctype.h>
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

// A graph with dropout: the entry with the generator's state.
static const char *h_backward_ex(bc_ctx *ctx, const bc_graph *g) {
  const char *s = bc_fmt(ctx,
                "/* With dropout's generator (runtime/src/rng.c): training != 0 drops with the\n"
                " * masks of (seed, step); %s_backward is the call with training = 0. */\n"
                "int %s_backward_ex(const float *const *w, void *const *io, const long *rt,\n"
                "    const float *const *dy, float *const *dw, float *const *dx, int training,\n"
                "    unsigned long long seed, unsigned long long step, void *workspace);\n",
                g->model, g->model);
  return s ? s : "";
}

// The header's part of the training step: its workspace and prototype,
// before the closing `extern "C"` block.
static char *h_backward(bc_ctx *ctx, const bc_graph *g, char *h, int64_t ws_bytes) {
  char *up = bc_strdup(ctx, g->model), *tail = h ? strstr(h, "\n#ifdef __cplusplus\n}") : NULL;
  if (!up || !tail) return NULL;
  for (char *p = up; *p; p++) *p = (char)toupper((unsigned char)*p);
  *tail = '\0';
  return bc_fmt(ctx,
                "%s\n/* The training step (blockc emit --backward): runs the forward (io's outputs\n"
                " * receive y) keeping activations, then the backward of\n"
                " * loss = sum over outputs k of sum(y_k * dy[k]).  w: the weights struct cast\n"
                " * to (const float *const *), or any array of %s_NPARAMS pointers; io, rt as\n"
                " * %s_run_abi; dy one array per output (NULL: not in the loss); dw one float\n"
                " * array per parameter, the weights' layout, overwritten with d loss / d param;\n"
                " * dx NULL or one array per input (NULL entries, lengths skipped) receiving\n"
                " * d loss / d input.  workspace: %s_BACKWARD_WORKSPACE_BYTES, aligned to 64.\n"
                " * Returns %s_OK or the _run_abi errors. */\n"
                "#define %s_BACKWARD_WORKSPACE_BYTES %lldL\n"
                "int %s_backward(const float *const *w, void *const *io, const long *rt,\n"
                "    const float *const *dy, float *const *dw, float *const *dx, void *workspace);\n"
                "%s"
                "/* The body of both: training, seed, step as %s_backward_ex's (ignored\n"
                " * without dropout), and the products and attention split over pool (NULL:\n"
                " * the calling thread alone; the same bits for every pool, OpenBLAS at one\n"
                " * thread). */\n"
                "int %s_backward_pool(const float *const *w, void *const *io, const long *rt,\n"
                "    const float *const *dy, float *const *dw, float *const *dx, int training,\n"
                "    unsigned long long seed, unsigned long long step, void *workspace,\n"
                "    bcrt_pool *pool);\n"
                "\n#ifdef __cplusplus\n}%s",
                h, up, g->model, up, up, up, (long long)ws_bytes, g->model,
                bcI_has_dropout(g) ? h_backward_ex(ctx, g) : "", g->model, g->model,
                tail + strlen("\n#ifdef __cplusplus\n}"));
}

// The header's part of the whole training step (emit_train.c), likewise.
static char *h_train(bc_ctx *ctx, const bc_graph *g, char *h, const bc_train_layout *l) {
  char *up = bc_strdup(ctx, g->model), *tail = h ? strstr(h, "\n#ifdef __cplusplus\n}") : NULL;
  if (!up || !tail) return NULL;
  for (char *p = up; *p; p++) *p = (char)toupper((unsigned char)*p);
  *tail = '\0';
  const char *decl = bcU_emit_h(ctx, g, l, up);
  return decl ? bc_fmt(ctx, "%s%s\n#ifdef __cplusplus\n}%s", h, decl,
                       tail + strlen("\n#ifdef __cplusplus\n}"))
              : NULL;
}

// Emits the pair for g (parsed from path with defs), planning it first.
static int generate_graph(bc_ctx *ctx, bc_graph *g, const bc_aot_gen *in, bc_aot_pair *out) {
  uint64_t h;
  int st = graph_hash(ctx, in->path, in->defs, in->ndefs, &h);
  if (!st && !g->planned) st = bcO_run_until(g, NULL);
  if (st) return st;
  // Upper-cased, the model name prefixes the header's macros; BCRT_* and
  // bcrt_* belong to the runtime header it includes.
  if (!strncmp(g->model, "bcrt", 4) || !strncmp(g->model, "BCRT", 4))
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: model name '%s' starts with 'bcrt', the runtime's prefix; "
                    "rename the model", in->path, g->model);
  char dims[1024] = "";
  for (int i = 0, n = 0; i < g->ndims && n < (int)sizeof dims; i++)
    n += snprintf(dims + n, sizeof dims - (size_t)n, " %s=%lld", g->dims[i].name,
                  (long long)g->dims[i].value);
  const char *prov = bc_fmt(ctx,
                            "Provenance: blockc %s; graph %s; fnv1a64 %016llx (FNV-1a 64 of the "
                            "graph file's bytes, then NUL + NAME=VALUE per -D override in name "
                            "order); dims%s",
                            BC_VERSION, in->path, (unsigned long long)h, dims);
  bc_emit_opts eo = {.aot = true, .backward = in->backward || in->train, .train = in->train};
  bc_compiled cc = {0};
  if (!prov) return BC_ENOMEM;
  if ((st = bcD_compile(ctx, g, &eo, &cc))) return st;  // emits only (AOT)
  char *hs = bcE_emit_h(ctx, g, prov);
  if (hs && eo.backward) hs = h_backward(ctx, g, hs, cc.bwd_ws_bytes);
  if (hs && in->train) hs = h_train(ctx, g, hs, &cc.tl);
  if (!cc.csrc || !hs) return BC_EINTERNAL;
  *out = (bc_aot_pair){.g = g, .c_src = cc.csrc, .h_src = hs, .bwd_ws = cc.bwd_ws_bytes};
  return BC_OK;
}

int bcA_generate(bc_ctx *ctx, const bc_aot_gen *in, bc_aot_pair *out) {
  bc_graph *g = in->graph ? in->graph : bcP_parse_file(ctx, in->path, in->defs, in->ndefs);
  if (g && !in->graph) g->weight_type = in->weight_type;
  return g ? generate_graph(ctx, g, in, out) : BC_EINPUT;
}

// mkdir -p with `mode` for the directories it creates.
static int mkdir_p(bc_ctx *ctx, const char *path, mode_t mode, const char *what) {
  char *p = bc_strdup(ctx, path);
  if (!p) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s) continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, mode) != 0 && errno != EEXIST)
      return bc_error(ctx, BC_EIO, "%s: error: cannot create %s: %s", p, what, strerror(errno));
    if (!c) break;
    *s = c;
  }
  return BC_OK;
}

int bcA_write_pair(bc_ctx *ctx, const char *dir, const char *model, const char *c_src,
                   const char *h_src) {
  return bcA_write_files(ctx, dir, model, c_src, h_src, NULL);
}

int bcA_write_files(bc_ctx *ctx, const char *dir, const char *model, const char *c_src,
                    const char *h_src, const char *w_src) {
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    int st = mkdir_p(ctx, dir, 0777, "the output directory");
    if (st) return st;
    if (stat(dir, &sb) != 0)
      return bc_error(ctx, BC_EIO, "%s: error: cannot create the output directory: %s", dir,
                      strerror(errno));
  }
  if (!S_ISDIR(sb.st_mode))
    return bc_error(ctx, BC_EINPUT, "%s: error: not a directory", dir);
  const char *hp = bc_fmt(ctx, "%s/%s.h", dir, model), *cp = bc_fmt(ctx, "%s/%s.c", dir, model);
  const char *wp = bc_fmt(ctx, "%s/%s_weights.c", dir, model);
  if (!hp || !cp || !wp) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  // Every temp file is written and synced before any is renamed: a full
  // disk leaves the old files (or nothing), never a mixed set.
  const char *paths[3] = {hp, cp, wp}, *texts[3] = {h_src, c_src, w_src};
  return bc_write_files_atomic(ctx, w_src ? 3 : 2, paths, texts);
}

// --- the cc backend ------------------------------------------------------------

struct bc_aot {
  void *dl;
  bc_aot_run_fn run;   // <model>_run_abi
  bc_aot_step_fn step; // <model>_step_abi (steppable graphs), else NULL
  bc_aot_step_rows_fn step_rows; // <model>_step_rows_abi likewise
  bc_aot_run_pool_fn run_pool;   // <model>_run_pool
  bc_aot_step_pool_fn step_pool; // <model>_step_pool (with step)
  bc_aot_step_rows_fn step_last; // <model>_step_last_abi (bcY_step_tail >= 0), else NULL
  bc_aot_step_rows_pool_fn step_last_pool; // <model>_step_last_pool likewise
  bc_backward_fn backward; // <model>_backward (pairs emitted with it), else NULL
  bc_backward_ex_fn backward_ex; // <model>_backward_ex (those, with dropout), else NULL
  bc_train_fn train;       // <model>_train_step (pairs emitted with it), else NULL
  bc_train_init_fn train_init;
  bc_backward_pool_fn backward_pool; // <model>_backward_pool (with backward)
  bc_train_pool_fn train_pool;       // <model>_train_step_pool (with train)
  void (*pack)(const void *w, float *packed);  // <model>_pack
  const float **args;  // bcA_args: the weights struct, packed copy last
  float *packed;
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
// binary (<exe dir>/../runtime: build/blockc in a checkout;
// <exe dir>/../share/blockc/runtime: an installed tree, wherever it was
// moved), else the path the Makefile compiled in.
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
      d = bc_fmt(ctx, "%s/../share/blockc/runtime", exe);
      if (runtime_in(d)) return d;
    }
  }
  return runtime_in(BC_RUNTIME_DIR) ? BC_RUNTIME_DIR : NULL;
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

// --- cache trust ------------------------------------------------------------------
//
// The cache holds code that is dlopened, so nothing in it is trusted unless
// this user wrote it: the directories and the module must be owned by the
// effective user and not writable by group or others, and links are never
// followed (a planted symlink to another user's .so is refused).

static int check_private(bc_ctx *ctx, const char *path, const struct stat *st, const char *what) {
  if (st->st_uid != geteuid())
    return bc_error(ctx, BC_EINPUT, "%s: error: the AOT cache %s is owned by uid %ld, not by this "
                    "user (%ld); refusing to load code from it (set BLOCKC_CACHE_DIR to a private "
                    "directory)", path, what, (long)st->st_uid, (long)geteuid());
  if (st->st_mode & 022)
    return bc_error(ctx, BC_EINPUT, "%s: error: the AOT cache %s is writable by other users "
                    "(mode %04o); refusing to load code from it (chmod go-w, or set "
                    "BLOCKC_CACHE_DIR to a private directory)", path, what,
                    (unsigned)(st->st_mode & 07777));
  return BC_OK;
}

static int check_dir(bc_ctx *ctx, const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return bc_error(ctx, BC_EIO, "%s: error: cannot use the AOT cache directory: %s", path,
                    strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return bc_error(ctx, BC_EINPUT, "%s: error: the AOT cache directory is not a directory (a "
                    "symbolic link?); refusing to use it", path);
  return check_private(ctx, path, &st, "directory");
}

// --- the cache key ---------------------------------------------------------------

// The compiler's identity: its resolved path (PATH searched as posix_spawnp
// does) and its `--version` output, so upgrading gcc or pointing `cc` at
// clang changes the key.
static uint64_t hash_compiler(bc_ctx *ctx, uint64_t h, const char *cc, const char *tmpdir) {
  char *resolved = NULL;
  if (strchr(cc, '/')) {
    resolved = realpath(cc, NULL);
  } else {
    const char *path = getenv("PATH");
    char *dirs = bc_strdup(ctx, path && *path ? path : "/usr/bin:/bin");
    for (char *d = dirs ? strtok(dirs, ":") : NULL; d && !resolved; d = strtok(NULL, ":")) {
      const char *cand = bc_fmt(ctx, "%s/%s", d, cc);
      if (cand && access(cand, X_OK) == 0) resolved = realpath(cand, NULL);
    }
  }
  h = bc_fnv1a(h, resolved ? resolved : cc, strlen(resolved ? resolved : cc) + 1);
  free(resolved);
  char tpl[PATH_MAX];
  snprintf(tpl, sizeof tpl, "%s/.version-XXXXXX", tmpdir);
  int fd = mkstemp(tpl);
  if (fd < 0) return h;
  unlink(tpl);
  char *argv[] = {(char *)cc, "--version", NULL};
  int err;
  if (bc_spawn_fd(argv, fd, 30, &err) == 0 && lseek(fd, 0, SEEK_SET) == 0) {
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) h = bc_fnv1a(h, buf, (size_t)n);
  }
  close(fd);
  return h;
}

// The CPU -march=native compiles for: vendor, model name and feature flags
// of the first processor in /proc/cpuinfo (not its clock, which moves).
static uint64_t hash_cpu(uint64_t h) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return h;
  char line[8192];
  while (fgets(line, sizeof line, f) && line[0] != '\n')
    if (!strncmp(line, "vendor_id", 9) || !strncmp(line, "model name", 10) ||
        !strncmp(line, "flags", 5) || !strncmp(line, "Features", 8) || !strncmp(line, "CPU part", 8))
      h = bc_fnv1a(h, line, strlen(line));
  fclose(f);
  return h;
}

// --- loading -------------------------------------------------------------------------

// Opens so without following links, checks it is a private regular file,
// dlopens it and checks that the file loaded is the file checked.
// *corrupt is set when the file is ours but unusable (it does not match
// its checksum sidecar: empty, truncated, changed; or it lacks an entry):
// the caller rebuilds it.
// The module's entries: <model>_run_abi always, <model>_forward when the
// graph is simple (*fn stays NULL otherwise).
static int load_module(bc_ctx *ctx, const char *so, const bc_graph *g, bc_aot **out,
                       bc_aot_fn *fn, bool *corrupt) {
  *corrupt = false;
  int fd = open(so, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: cannot open the AOT module: %s", so, strerror(errno));
  struct stat st;
  int rc = fstat(fd, &st) != 0 ? bc_error(ctx, BC_EIO, "%s: error: cannot stat: %s", so, strerror(errno))
         : !S_ISREG(st.st_mode) ? bc_error(ctx, BC_EINPUT, "%s: error: the AOT module is not a regular file; refusing to load it", so)
                                : check_private(ctx, so, &st, "module");
  if (rc) {
    close(fd);
    return rc;
  }
  // Only the bytes bcA_publish checksummed: a truncated module would fault
  // inside dlopen (SIGBUS) instead of failing.
  if (!bcA_verified(ctx, so, fd)) {
    close(fd);
    *corrupt = true;
    return BC_EINPUT;
  }
  // dlopen by path (glibc identifies loaded objects by name, so a
  // /proc/self/fd/N name could alias an earlier module), then make sure the
  // path still names the file that was checked.  The directory is private
  // (check_dir), so only this user could swap it in between anyway.
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  struct stat now;
  if (dl && (lstat(so, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)) {
    dlclose(dl);
    close(fd);
    return bc_error(ctx, BC_EINPUT, "%s: error: the AOT module changed while it was loaded; "
                    "refusing it", so);
  }
  close(fd);
  void *run = dl ? dlsym(dl, bc_fmt(ctx, "%s_run_abi", g->model)) : NULL;
  void *fwd = dl && bcE_is_simple(g) ? dlsym(dl, bc_fmt(ctx, "%s_forward", g->model)) : NULL;
  bool steppable = bcY_cache_bytes(g) > 0;
  void *step = dl && steppable ? dlsym(dl, bc_fmt(ctx, "%s_step_abi", g->model)) : NULL;
  void *step_rows = dl && steppable ? dlsym(dl, bc_fmt(ctx, "%s_step_rows_abi", g->model)) : NULL;
  void *run_pool = dl ? dlsym(dl, bc_fmt(ctx, "%s_run_pool", g->model)) : NULL;
  void *step_pool = dl && steppable ? dlsym(dl, bc_fmt(ctx, "%s_step_pool", g->model)) : NULL;
  bool last = steppable && bcY_step_tail(g) >= 0;
  void *step_last = dl && last ? dlsym(dl, bc_fmt(ctx, "%s_step_last_abi", g->model)) : NULL;
  void *step_last_pool = dl && last ? dlsym(dl, bc_fmt(ctx, "%s_step_last_pool", g->model)) : NULL;
  void *bwd = dl ? dlsym(dl, bc_fmt(ctx, "%s_backward", g->model)) : NULL;
  void *bwd_ex = dl && bcI_has_dropout(g) ? dlsym(dl, bc_fmt(ctx, "%s_backward_ex", g->model)) : NULL;
  void *pack = dl ? dlsym(dl, bc_fmt(ctx, "%s_pack", g->model)) : NULL;
  void *trn = dl ? dlsym(dl, bc_fmt(ctx, "%s_train_step", g->model)) : NULL;
  void *trn_init = dl ? dlsym(dl, bc_fmt(ctx, "%s_train_init", g->model)) : NULL;
  void *bwd_pool = bwd ? dlsym(dl, bc_fmt(ctx, "%s_backward_pool", g->model)) : NULL;
  void *trn_pool = trn ? dlsym(dl, bc_fmt(ctx, "%s_train_step_pool", g->model)) : NULL;
  if (!run || !run_pool || !pack || (bcE_is_simple(g) && !fwd) ||
      (steppable && (!step || !step_pool || !step_rows)) ||
      (last && (!step_last || !step_last_pool))) {
    if (dl) dlclose(dl);
    *corrupt = true;
    return BC_EINPUT;  // reported by the caller if the rebuild fails too
  }
  bc_aot *a = calloc(1, sizeof *a);
  if (!a) {
    dlclose(dl);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  a->dl = dl;
  memcpy(&a->run, &run, sizeof a->run);  // POSIX: object and function pointers convert
  if (step) memcpy(&a->step, &step, sizeof a->step);
  if (step_rows) memcpy(&a->step_rows, &step_rows, sizeof a->step_rows);
  memcpy(&a->run_pool, &run_pool, sizeof a->run_pool);
  if (step_pool) memcpy(&a->step_pool, &step_pool, sizeof a->step_pool);
  if (step_last) memcpy(&a->step_last, &step_last, sizeof a->step_last);
  if (step_last_pool) memcpy(&a->step_last_pool, &step_last_pool, sizeof a->step_last_pool);
  if (bwd) memcpy(&a->backward, &bwd, sizeof a->backward);
  if (bwd_ex) memcpy(&a->backward_ex, &bwd_ex, sizeof a->backward_ex);
  if (bwd_pool) memcpy(&a->backward_pool, &bwd_pool, sizeof a->backward_pool);
  if (trn_pool) memcpy(&a->train_pool, &trn_pool, sizeof a->train_pool);
  if (trn && trn_init) {
    memcpy(&a->train, &trn, sizeof a->train);
    memcpy(&a->train_init, &trn_init, sizeof a->train_init);
  }
  memcpy(&a->pack, &pack, sizeof a->pack);
  if (fwd) memcpy(fn, &fwd, sizeof *fn);
  *out = a;
  return BC_OK;
}

bc_aot_run_fn bcA_run(const bc_aot *a) { return a ? a->run : NULL; }
bc_aot_step_fn bcA_step(const bc_aot *a) { return a ? a->step : NULL; }
bc_aot_step_rows_fn bcA_step_rows(const bc_aot *a) { return a ? a->step_rows : NULL; }
bc_aot_step_rows_fn bcA_step_last(const bc_aot *a) { return a ? a->step_last : NULL; }
bc_aot_step_rows_pool_fn bcA_step_last_pool(const bc_aot *a) {
  return a ? a->step_last_pool : NULL;
}
bc_aot_run_pool_fn bcA_run_pool(const bc_aot *a) { return a ? a->run_pool : NULL; }
bc_aot_step_pool_fn bcA_step_pool(const bc_aot *a) { return a ? a->step_pool : NULL; }
bc_backward_fn bcA_backward(const bc_aot *a) { return a ? a->backward : NULL; }
bc_backward_ex_fn bcA_backward_ex(const bc_aot *a) { return a ? a->backward_ex : NULL; }
bc_train_fn bcA_train(const bc_aot *a) { return a ? a->train : NULL; }
bc_train_init_fn bcA_train_init(const bc_aot *a) { return a ? a->train_init : NULL; }
bc_backward_pool_fn bcA_backward_pool(const bc_aot *a) { return a ? a->backward_pool : NULL; }
bc_train_pool_fn bcA_train_pool(const bc_aot *a) { return a ? a->train_pool : NULL; }

const void *bcA_args(bc_ctx *ctx, bc_aot *a, const bc_graph *g, const bc_weights *w) {
  int64_t nf = bcY_packed_floats(g);
  free(a->args);
  free(a->packed);
  a->packed = NULL;
  a->args = malloc(((size_t)w->n + 1) * sizeof *a->args);
  if (nf > 0 && a->args) a->packed = aligned_alloc(64, ((size_t)nf * sizeof(float) + 63) / 64 * 64);
  if (!a->args || nf < 0 || (nf > 0 && !a->packed)) {
    bc_error(ctx, BC_ENOMEM, "error: out of memory for the packed weights");
    return NULL;
  }
  for (int i = 0; i < w->n; i++) a->args[i] = w->p[i];
  a->args[w->n] = a->packed;
  if (a->packed) a->pack((const void *)a->args, a->packed);
  return (const void *)a->args;
}

// --- building --------------------------------------------------------------------

#define AOT_TIMEOUT_S 600              // default compile timeout ($BLOCKC_AOT_TIMEOUT)
#define AOT_MAX_SOURCE (8u << 20)      // generated C above this is refused

static int aot_timeout(const bc_aot_opts *o) {
  if (o && o->timeout_s > 0) return o->timeout_s;
  const char *e = getenv("BLOCKC_AOT_TIMEOUT");
  long v = e && *e ? strtol(e, NULL, 10) : 0;
  return v > 0 && v < 1000000 ? (int)v : AOT_TIMEOUT_S;
}

// Reads back up to 3000 bytes of the (unlinked) build log.
static char *read_log(bc_ctx *ctx, int fd) {
  char *text = bc_alloc(ctx, 3001);
  if (!text || lseek(fd, 0, SEEK_SET) != 0) return NULL;
  ssize_t n = read(fd, text, 3000);
  text[n > 0 ? n : 0] = '\0';
  return n > 0 ? text : NULL;
}

// Runs the compiler into tmp; its output goes to an unlinked temp file, so
// no log is ever left in the cache, even if blockc is killed.
static int run_compiler(bc_ctx *ctx, char **argv, const char *cc, const char *dir,
                        int timeout_s) {
  char tpl[PATH_MAX];
  snprintf(tpl, sizeof tpl, "%s/.build-XXXXXX", dir);
  int fd = mkstemp(tpl);
  if (fd < 0)
    return bc_error(ctx, BC_EIO, "%s: error: cannot create the build log: %s", dir, strerror(errno));
  unlink(tpl);
  int err = 0, rc = bc_spawn_fd(argv, fd, timeout_s, &err);
  int st = BC_OK;
  if (rc == BC_SPAWN_TIMEOUT)
    st = bc_error(ctx, BC_EINPUT, "error: the C compiler '%s' did not finish within %d s building "
                  "the AOT module (killed); raise the limit with BLOCKC_AOT_TIMEOUT=SECONDS or use "
                  "--backend jit", cc, timeout_s);
  else if (rc < 0)
    st = bc_error(ctx, BC_EINPUT, "error: cannot run the C compiler '%s': %s (choose one with --cc)",
                  cc, strerror(err));
  else if (rc != 0) {
    char *text = read_log(ctx, fd);
    st = bc_error_with_text(ctx, BC_EINPUT, text ? text : "(no output)",
                            "error: the C compiler '%s' failed (status %d) building the AOT module "
                            "in %s:", cc, rc, dir);
  }
  close(fd);
  return st;
}

// What every build shares: the compiler, its flags, the runtime, the
// cache, the time limit, and the key of all of them.
typedef struct {
  const char *cc, *cflags, *rt, *root;
  int timeout_s;
  uint64_t key;
} aot_env;

// The key of everything but the model: blockc's version, the compiler
// (resolved path and --version), its flags, the CPU and both runtime
// files.  It names the runtime object and is folded into every module's.
static uint64_t base_key(bc_ctx *ctx, const aot_env *e) {
  uint64_t h = bc_fnv1a(BC_FNV_OFFSET, BC_VERSION, sizeof BC_VERSION);
  h = hash_compiler(ctx, h, e->cc, e->root);
  h = bc_fnv1a(h, e->cflags, strlen(e->cflags) + 1);
  h = hash_cpu(h);
  h = hash_file(ctx, h, bc_fmt(ctx, "%s/blockc_rt.c", e->rt));
  return hash_file(ctx, h, bc_fmt(ctx, "%s/blockc_rt.h", e->rt));
}

// The start of every compiler command line (no shell: each word its own
// argv entry): the compiler, the flags, C99 position-independent code, and
// -I of the runtime directory (blockc_rt.{c,h} only).  The cache directory
// is never on the include path: the generated .c finds its <model>.h
// beside itself, so no file there can stand in for <stdint.h>.  (Not
// -iquote for the runtime: tcc, a valid --cc, lacks it.)  Returns the
// count, or -1 (reported).
static int base_argv(bc_ctx *ctx, char **argv, const aot_env *e) {
  int n = 0;
  argv[n++] = (char *)e->cc;
  int nf = split_flags(ctx, e->cflags, argv + n, 64);
  if (nf < 0) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: too many words in BLOCKC_CFLAGS (limit 64)");
    return -1;
  }
  n += nf;
  const char *fixed[] = {"-std=c99", "-fPIC", "-I", e->rt};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[n++] = (char *)fixed[i];
  return n;
}

// Whether path is a private regular file that bcA_publish wrote.
static bool cached_ok(bc_ctx *ctx, const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            !(st.st_mode & 022) && bcA_verified(ctx, path, fd);
  close(fd);
  return ok;
}

// mkdir dir (private) if missing, and check it is ours.
static int private_dir(bc_ctx *ctx, const char *dir) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return bc_error(ctx, BC_EIO, "%s: error: cannot create the AOT cache directory: %s", dir,
                    strerror(errno));
  return check_dir(ctx, dir);
}

// Compiles argv (whose last two entries are "-o", then a slot for the
// output) into a temp file of dir and publishes it as path.
static int compile_into(bc_ctx *ctx, const aot_env *e, char **argv, int n, const char *dir,
                        const char *name, const char *path) {
  const char *tmp;
  int st = bcA_temp(ctx, dir, name, &tmp);
  if (st) return st;
  argv[n - 1] = (char *)tmp;
  argv[n] = NULL;
  st = run_compiler(ctx, argv, e->cc, dir, e->timeout_s);
  if (!st) return bcA_publish(ctx, tmp, path);  // removes tmp on failure
  unlink(tmp);
  return st;
}

// The runtime compiled once per base key, ROOT/blockc_rt-<key>/blockc_rt.o,
// reused by every module built with the same compiler, flags and runtime
// (by any process); built under the directory's lock when missing or when
// it does not match its checksum.
static int runtime_object(bc_ctx *ctx, const aot_env *e, const char **obj) {
  const char *dir = bc_fmt(ctx, "%s/blockc_rt-%016llx", e->root, (unsigned long long)e->key);
  const char *o = dir ? bc_fmt(ctx, "%s/blockc_rt.o", dir) : NULL, *src;
  if (!o || !(src = bc_fmt(ctx, "%s/blockc_rt.c", e->rt)))
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *obj = o;
  int st = private_dir(ctx, dir), lk;
  if (st || cached_ok(ctx, o)) return st;
  if ((st = bcA_lock(ctx, dir, &lk))) return st;
  if (!cached_ok(ctx, o)) {
    bcA_clean_temps(ctx, dir);
    char *argv[96];
    int n = base_argv(ctx, argv, e);
    if (n < 0) st = BC_EUSAGE;
    if (!st) {
      argv[n++] = "-c";
      argv[n++] = (char *)src;
      argv[n++] = "-o";
      n++;  // the temp file
      st = compile_into(ctx, e, argv, n, dir, "blockc_rt.o", o);
    }
  }
  bcA_unlock(lk);
  return st;
}

// Under dir's lock: writes the pair into dir and links it with the
// runtime object into dir/<model>.so.  -Bsymbolic: the module's calls to
// its own kernels (and to its own cblas_sgemm under -DBLOCKC_NO_BLAS) bind
// inside it, not to the copies already loaded in this process.
static int build_module(bc_ctx *ctx, const bc_graph *g, const char *c_src, const char *h_src,
                        const aot_env *e, const char *dir, const char *so) {
  const char *obj = NULL, *csrc = bc_fmt(ctx, "%s/%s.c", dir, g->model);
  const char *name = bc_fmt(ctx, "%s.so", g->model);
  if (!csrc || !name) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  bcA_clean_temps(ctx, dir);
  int st = runtime_object(ctx, e, &obj);
  if (!st) st = bcA_write_pair(ctx, dir, g->model, c_src, h_src);
  char *argv[96];
  int n = st ? 0 : base_argv(ctx, argv, e);
  if (st || n < 0) return st ? st : BC_EUSAGE;
  const char *tail[] = {"-shared", "-Wl,-Bsymbolic", csrc, obj};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) argv[n++] = (char *)tail[i];
  if (!strstr(e->cflags, "-DBLOCKC_NO_BLAS")) argv[n++] = "-lopenblas";
  argv[n++] = "-lm";
  argv[n++] = "-o";
  n++;  // the temp file
  return compile_into(ctx, e, argv, n, dir, name, so);
}

// The compiler, flags, runtime and cache of a build, or a reported error.
static int aot_setup(bc_ctx *ctx, const bc_aot_opts *o, aot_env *e) {
  e->cc = o && o->cc ? o->cc : "cc";
  e->cflags = o && o->cflags ? o->cflags : getenv("BLOCKC_CFLAGS");
  if (!e->cflags || !*e->cflags) e->cflags = "-O3 -march=native";
  e->timeout_s = aot_timeout(o);
  if (!(e->rt = find_runtime(ctx, o)))
    return bc_error(ctx, BC_EINPUT, "error: cannot find runtime/blockc_rt.c and blockc_rt.h for "
                    "the AOT backend; set BLOCKC_RUNTIME_DIR to the directory holding them");
  if (!(e->root = cache_root(ctx, o)))
    return bc_error(ctx, BC_EINPUT, "error: no AOT cache directory: set BLOCKC_CACHE_DIR (or HOME)");
  int st = mkdir_p(ctx, e->root, 0700, "the AOT cache directory");
  if (!st) st = check_dir(ctx, e->root);
  if (!st) e->key = base_key(ctx, e);
  return st;
}

// Loads so if it is there and verified: BC_OK, or *corrupt (rebuild), or
// a refusal (reported).  *corrupt is also set when so is missing.
static int try_load(bc_ctx *ctx, const char *so, const bc_graph *g, bc_aot **out, bc_aot_fn *fn,
                    bool *corrupt) {
  struct stat sb;
  *corrupt = true;
  return lstat(so, &sb) == 0 ? load_module(ctx, so, g, out, fn, corrupt) : BC_EINPUT;
}

int bcA_build(bc_ctx *ctx, const bc_graph *g, const char *c_src, const char *h_src,
              const bc_aot_opts *o, bc_aot **out, bc_aot_fn *fn, bool *cache_hit,
              const char **so_path) {
  *out = NULL;
  *fn = NULL;
  *cache_hit = false;
  size_t csize = strlen(c_src);
  size_t max_src = o && o->max_source ? o->max_source : AOT_MAX_SOURCE;
  if (csize > max_src)
    return bc_error(ctx, BC_EINPUT, "%s: error: the generated C is %zu bytes (%d nodes), over the "
                    "AOT limit of %zu bytes (a C compiler would take minutes); use --backend jit, "
                    "or fewer layers", g->path ? g->path : g->model, csize, g->nnodes, max_src);
  aot_env e = {0};
  int st = aot_setup(ctx, o, &e);
  if (st) return st;
  uint64_t h = bc_fnv1a(e.key, c_src, csize + 1);
  h = bc_fnv1a(h, h_src, strlen(h_src) + 1);
  const char *dir = bc_fmt(ctx, "%s/%s-%016llx", e.root, g->model, (unsigned long long)h);
  const char *so = dir ? bc_fmt(ctx, "%s/%s.so", dir, g->model) : NULL;
  if (!so) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *so_path = so;
  if ((st = private_dir(ctx, dir))) return st;
  bool corrupt;
  // Missing, empty, truncated or changed (a killed build, a power cut, a
  // full disk): rebuilt under the lock, unless a builder that held it first
  // has made it by then.
  if (!(st = try_load(ctx, so, g, out, fn, &corrupt)) || !corrupt) return *cache_hit = !st, st;
  int lk;
  if ((st = bcA_lock(ctx, dir, &lk))) return st;
  if ((st = try_load(ctx, so, g, out, fn, &corrupt)) && corrupt) {
    st = build_module(ctx, g, c_src, h_src, &e, dir, so);
    if (!st && (st = load_module(ctx, so, g, out, fn, &corrupt)) && corrupt) {
      const char *why = dlerror();
      st = bc_error(ctx, BC_EINTERNAL, "%s: internal error: the freshly built module does not "
                    "load or has no %s_run_abi: %s", so, g->model, why ? why : "");
    }
  } else {
    *cache_hit = !st;
  }
  bcA_unlock(lk);
  return st;
}

void bcA_free(bc_aot *a) {
  if (!a) return;
  free(a->args);
  free(a->packed);
  dlclose(a->dl);
  free(a);
}
