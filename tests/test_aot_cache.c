// test_aot_cache.c — the AOT cache and build as an attacker sees them
// (issue 12, items 2, 6 and 8): a cache directory or module that another
// user could have written is refused, planted symlinks are not followed,
// empty modules are rebuilt, the key changes with the compiler's identity,
// a hanging compiler is killed, a failing one leaves no log, oversized C
// is refused, and `emit` never leaves half a pair on a full disk; and
// (issue 20, items 2 and 9) a truncated or changed module is rebuilt, not
// loaded, and builders racing with the same pid all succeed.
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aot.h"

// Files in dir whose name starts with '.' (but the builders' .lock) or
// ends in ".tmp" or ".log": build leftovers.
static int leftovers(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".lock"))
      continue;
    size_t k = strlen(e->d_name);
    if (e->d_name[0] == '.' || (k > 4 && (!strcmp(e->d_name + k - 4, ".tmp") ||
                                          !strcmp(e->d_name + k - 4, ".log")))) {
      print_message("leftover: %s/%s\n", dir, e->d_name);
      n++;
    }
  }
  closedir(d);
  return n;
}

typedef struct {
  tu_errors errs;
  bc_ctx *ctx;
  bc_graph *g;
  char *c, *h;
} gen;

static void generate(gen *G) {
  G->ctx = tu_ctx(&G->errs);
  assert_int_equal(tu_aot_pair(G->ctx, "graphs/tiny.blk", NULL, 0, false, &G->g, &G->c, &G->h), BC_OK);
}

// A fresh temp directory dir, the cache path dir/cache (not made yet) and
// tiny's pair in G; returns the options building it there with cc -O1.
static bc_aot_opts start(gen *G, char *dir, size_t dn, char *cache, size_t cn) {
  tu_mktmpdir(dir, dn, "cache");
  snprintf(cache, cn, "%s/cache", dir);
  generate(G);
  return (bc_aot_opts){.cache_dir = cache, .cflags = "-O1"};
}

static int build(gen *G, const bc_aot_opts *o, bool *hit, const char **so) {
  bc_aot *a = NULL;
  bc_aot_fn fn;
  G->errs.len = 0;
  G->errs.buf[0] = '\0';
  int st = bcA_build(G->ctx, G->g, G->c, G->h, o, &a, &fn, hit, so);
  bcA_free(a);
  return st;
}

static void expect_err(gen *G, const char *want) {
  if (!strstr(G->errs.buf, want)) fail_msg("want '%s' in: %s", want, G->errs.buf);
}

static void write_script(const char *path, const char *body) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
}

// The cache and every module in it must be this user's and private.
static void test_cache_trust(void **state) {
  (void)state;
  char dir[256], cache[300];
  gen G;
  bc_aot_opts o = start(&G, dir, sizeof dir, cache, sizeof cache);
  bool hit;
  const char *so;
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_false(hit);
  char so_copy[600];
  snprintf(so_copy, sizeof so_copy, "%s/copy.so", dir);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", so, so_copy);
  assert_int_equal(system(cmd), 0);
  // A world-writable cache directory: refused.
  assert_int_equal(chmod(cache, 0777), 0);
  assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
  expect_err(&G, "is writable by other users (mode 0777); refusing to load code from it");
  assert_int_equal(chmod(cache, 0700), 0);
  // A group-writable module: refused.
  assert_int_equal(chmod(so, 0664), 0);
  assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
  expect_err(&G, "the AOT cache module is writable by other users (mode 0664)");
  assert_int_equal(chmod(so, 0755), 0);
  // A module owned by someone else (as root, chown works): refused.
  if (geteuid() == 0) {
    assert_int_equal(chown(so, 65534, 65534), 0);
    assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
    expect_err(&G, "is owned by uid 65534, not by this user (0)");
    assert_int_equal(chown(so, 0, 0), 0);
  }
  // A symlink planted under the expected name: not followed.
  assert_int_equal(unlink(so), 0);
  assert_int_equal(symlink(so_copy, so), 0);
  assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
  expect_err(&G, "cannot open the AOT module: Too many levels of symbolic links");
  // A zero-byte module (a killed build, a full disk): rebuilt, not an error.
  assert_int_equal(unlink(so), 0);
  tu_write_bytes(so, "", 0);
  assert_int_equal(chmod(so, 0755), 0);
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_false(hit);
  struct stat st;
  assert_int_equal(stat(so, &st), 0);
  assert_true(st.st_size > 1000);
  // Temp files left by builds that were killed (any pid: PID namespaces
  // make a pid meaningless) are removed by the next build, which holds the
  // directory's lock, so no other builder owns them.
  char kdir[600], dead[700], other[700];
  snprintf(kdir, sizeof kdir, "%.*s", (int)(strrchr(so, '/') - so), so);
  snprintf(dead, sizeof dead, "%s/.tiny.so.%d.tmp", kdir, 4194303);
  snprintf(other, sizeof other, "%s/.tiny.so.Ab12Cd", kdir);
  tu_write_bytes(dead, "x", 1);
  tu_write_bytes(other, "x", 1);
  assert_int_equal(unlink(so), 0);
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_int_equal(access(dead, F_OK), -1);
  assert_int_equal(access(other, F_OK), -1);
  // And garbage bytes: rebuilt too.
  tu_write_bytes(so, "\x7f" "ELF garbage", 12);
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_false(hit);
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_true(hit);
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

// The key covers the compiler's resolved path (a wrapper script is another
// compiler) and the flags; the same inputs give the same key.
static void test_key_covers_compiler(void **state) {
  (void)state;
  char dir[256], cache[300], wrap[300];
  tu_mktmpdir(dir, sizeof dir, "cache");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(wrap, sizeof wrap, "%s/mycc", dir);
  write_script(wrap, "exec cc \"$@\"");
  gen G;
  generate(&G);
  bool hit;
  const char *so1, *so2, *so3;
  bc_aot_opts o = {.cache_dir = cache, .cflags = "-O1"};
  assert_int_equal(build(&G, &o, &hit, &so1), BC_OK);
  o.cc = wrap;
  assert_int_equal(build(&G, &o, &hit, &so2), BC_OK);
  assert_false(hit);
  assert_string_not_equal(so1, so2);
  o.cflags = "-O0";
  assert_int_equal(build(&G, &o, &hit, &so3), BC_OK);
  assert_false(hit);
  assert_string_not_equal(so2, so3);
  o.cc = NULL, o.cflags = "-O1";
  assert_int_equal(build(&G, &o, &hit, &so3), BC_OK);
  assert_true(hit);
  assert_string_equal(so1, so3);
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

// A compiler that hangs is killed after the timeout; one that fails has its
// output (escaped) in the message; neither leaves a log or temp file.
static void test_build_timeout_and_failure(void **state) {
  (void)state;
  char dir[256], cache[300], slow[300], bad[300];
  tu_mktmpdir(dir, sizeof dir, "cache");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(slow, sizeof slow, "%s/slowcc", dir);
  snprintf(bad, sizeof bad, "%s/badcc", dir);
  write_script(slow, "case \"$1\" in --version) echo slow 1.0;; *) sleep 30;; esac");
  write_script(bad, "case \"$1\" in --version) echo bad 1.0;; *) printf 'boom\\033[2J\\n' >&2; exit 3;; esac");
  gen G;
  generate(&G);
  bool hit;
  const char *so;
  bc_aot_opts o = {.cache_dir = cache, .cc = slow, .timeout_s = 1};
  if (build(&G, &o, &hit, &so) != BC_EINPUT) fail_msg("%s", G.errs.buf);
  expect_err(&G, "did not finish within 1 s building the AOT module (killed); raise the limit with BLOCKC_AOT_TIMEOUT");
  char kdir[600];
  snprintf(kdir, sizeof kdir, "%.*s", (int)(strrchr(so, '/') - so), so);
  assert_int_equal(leftovers(kdir), 0);
  o.cc = bad;
  assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
  expect_err(&G, "failed (status 3) building the AOT module");
  expect_err(&G, "boom\\x1b[2J");
  assert_null(strchr(G.errs.buf, '\x1b'));
  snprintf(kdir, sizeof kdir, "%.*s", (int)(strrchr(so, '/') - so), so);
  assert_int_equal(leftovers(kdir), 0);
  // Generated C over the size limit: refused before any compiler runs.
  o = (bc_aot_opts){.cache_dir = cache, .max_source = 1000};
  assert_int_equal(build(&G, &o, &hit, &so), BC_EINPUT);
  expect_err(&G, "nodes), over the AOT limit of 1000 bytes");
  expect_err(&G, "use --backend jit");
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

// emit on a full disk (simulated with RLIMIT_FSIZE in a child process: the
// header fits, the .c does not) leaves the old pair untouched and no temp
// file; emit creates a missing DIR.
static void test_emit_pair_all_or_nothing(void **state) {
  (void)state;
  char dir[256];
  tu_mktmpdir(dir, sizeof dir, "cache");
  // pre_ln's pair: its .c is well past its header (tiny's is not since the
  // header records the weight type), which the size limit below needs.
  gen G;
  G.ctx = tu_ctx(&G.errs);
  assert_int_equal(tu_aot_pair(G.ctx, "graphs/pre_ln.blk", NULL, 0, false, &G.g, &G.c, &G.h), BC_OK);
  char hp[400], cp[400];
  snprintf(hp, sizeof hp, "%s/tiny.h", dir);
  snprintf(cp, sizeof cp, "%s/tiny.c", dir);
  tu_write_bytes(hp, "OLD H", 5);
  tu_write_bytes(cp, "OLD C", 5);
  size_t hl = strlen(G.h), cl = strlen(G.c);
  assert_true(cl > hl + 100);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {(rlim_t)hl + 50, (rlim_t)hl + 50};
    setrlimit(RLIMIT_FSIZE, &rl);
    bc_ctx *c = bc_ctx_new();
    int rc = bcA_write_pair(c, dir, "tiny", G.c, G.h);
    _exit(rc == BC_EIO ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);  // the write failed with BC_EIO
  char buf[16] = {0};
  FILE *f = fopen(hp, "r");
  assert_non_null(f);
  assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 5);
  fclose(f);
  assert_string_equal(buf, "OLD H");
  f = fopen(cp, "r");
  assert_non_null(f);
  assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 5);
  fclose(f);
  assert_int_equal(leftovers(dir), 0);
  // Without the limit: both replaced; into a directory that did not exist.
  char sub[300];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  assert_int_equal(bcA_write_pair(G.ctx, sub, "tiny", G.c, G.h), BC_OK);
  snprintf(hp, sizeof hp, "%s/tiny.h", sub);
  struct stat st;
  assert_int_equal(stat(hp, &st), 0);
  assert_int_equal((size_t)st.st_size, hl);
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

// Runs build() in a child process (a fault inside dlopen kills the child,
// not the suite) and returns its wait status; the child exits 0 when the
// build succeeded and was not a cache hit (the module was rebuilt).
static int build_in_child(gen *G, const bc_aot_opts *o) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGBUS, SIG_DFL);  // cmocka's handlers would run the rest of the suite here
    signal(SIGSEGV, SIG_DFL);
    bool hit = true;
    const char *so;
    _exit(build(G, o, &hit, &so) == BC_OK && !hit ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

// Issue 20 item 2: a cached module cut short (a power cut before the data
// reached the disk, a full disk) or with changed bytes is rebuilt, never
// loaded: dlopen of a module truncated to 1000 .. size-1 bytes used to
// fault (SIGBUS, exit 135) on every later run.
static void test_truncated_module_rebuilt(void **state) {
  (void)state;
  char dir[256], cache[300];
  gen G;
  bc_aot_opts o = start(&G, dir, sizeof dir, cache, sizeof cache);
  bool hit;
  const char *so;
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  size_t full;
  char *orig;
  {
    FILE *f = fopen(so, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    full = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    orig = malloc(full);
    assert_non_null(orig);
    assert_int_equal(fread(orig, 1, full, f), full);
    fclose(f);
  }
  assert_true(full > 20000);
  size_t cuts[] = {0, 64, 1000, 4096, full / 4, full / 2, full - 4096, full - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0] + 2; i++) {
    bool cut = i < sizeof cuts / sizeof cuts[0];
    char *bytes = malloc(full);
    assert_non_null(bytes);
    memcpy(bytes, orig, full);
    // Past the cuts: the same size with bytes changed in the middle (the
    // code) or in the ELF header.
    if (!cut) bytes[i == sizeof cuts / sizeof cuts[0] ? full / 2 : 20] ^= 0x5a;
    unlink(so);
    tu_write_bytes(so, bytes, cut ? cuts[i] : full);
    assert_int_equal(chmod(so, 0755), 0);
    free(bytes);
    int status = build_in_child(&G, &o);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("module %s to %zu of %zu bytes: the next build %s %d, want a rebuild",
               cut ? "truncated" : "corrupted", cut ? cuts[i] : full, full,
               WIFSIGNALED(status) ? "died of signal" : "exited", WIFSIGNALED(status)
                                                              ? WTERMSIG(status)
                                                              : WEXITSTATUS(status));
    struct stat st;
    assert_int_equal(stat(so, &st), 0);
    assert_int_equal((size_t)st.st_size, full);
  }
  // And the rebuilt module is a cache hit for the next run.
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_true(hit);
  free(orig);
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

// One builder as its own PID namespace's pid 1 when the kernel lets us
// (root, or user namespaces), so two of them have the same pid as builders
// in two containers do; else a plain child.  Waits for the go byte on
// `go`, builds, exits 0 on success.
static pid_t racer(gen *G, const bc_aot_opts *o, int go) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid) return pid;
  signal(SIGBUS, SIG_DFL);
  signal(SIGSEGV, SIG_DFL);
  bool ns = unshare(CLONE_NEWPID) == 0;
  if (!ns) fprintf(stderr, "note: no PID namespace (unshare: %s); the racers' pids differ\n",
                   strerror(errno));
  pid_t inner = ns ? fork() : 0;
  if (inner > 0) {
    int status;
    _exit(waitpid(inner, &status, 0) == inner && WIFEXITED(status) ? WEXITSTATUS(status) : 2);
  }
  if (inner < 0) _exit(3);
  char b;
  if (read(go, &b, 1) != 1) _exit(4);
  bool hit;
  const char *so;
  int st = build(G, o, &hit, &so);
  if (st) fprintf(stderr, "racer (pid %d): %s\n", (int)getpid(), G->errs.buf);
  _exit(st == BC_OK ? 0 : 1);
}

// Issue 20 item 9: builders of the same model at the same moment, with
// the same pid (two containers sharing a cache), all succeed and leave one
// valid module: temp names are unique (mkstemp) and builders take turns on
// the directory's lock; the runtime object is built once.
static void test_concurrent_builds(void **state) {
  (void)state;
  char dir[256], cache[300];
  gen G;
  bc_aot_opts o = start(&G, dir, sizeof dir, cache, sizeof cache);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t p[3];
  for (int i = 0; i < 3; i++) p[i] = racer(&G, &o, fds[0]);
  assert_int_equal(write(fds[1], "ggg", 3), 3);
  close(fds[0]);
  close(fds[1]);
  for (int i = 0; i < 3; i++) {
    int status;
    assert_int_equal(waitpid(p[i], &status, 0), p[i]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("racer %d: status %#x (see its message above)", i, status);
  }
  bool hit;
  const char *so;
  assert_int_equal(build(&G, &o, &hit, &so), BC_OK);
  assert_true(hit);  // the module the racers left verifies and loads
  char kdir[600];
  snprintf(kdir, sizeof kdir, "%.*s", (int)(strrchr(so, '/') - so), so);
  assert_int_equal(leftovers(kdir), 0);
  bc_ctx_free(G.ctx);
  tu_rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_trust),
      cmocka_unit_test(test_key_covers_compiler),
      cmocka_unit_test(test_build_timeout_and_failure),
      cmocka_unit_test(test_emit_pair_all_or_nothing),
      cmocka_unit_test(test_truncated_module_rebuilt),
      cmocka_unit_test(test_concurrent_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
