// ctx.c — the compile context: an arena allocator, the error sink, and file
// helpers.
//
// Everything the compiler allocates while turning a graph into code lives in
// the context's arena and is released by bc_ctx_free, so error paths never
// leak and no module keeps global state.  Errors are formatted the way
// chibicc prints them — location, message, the source line and a caret —
// and handed to a user callback (stderr by default).
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700
#include "bc.h"
#include "blockc_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct bc_arena_block {
  bc_arena_block *next;
  max_align_t data[];
};

static void default_sink(void *opaque, const char *msg) {
  (void)opaque;
  fputs(msg, stderr);
}

bc_ctx *bc_ctx_new(void) {
  bc_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->on_error = default_sink;
  return ctx;
}

void bc_ctx_free(bc_ctx *ctx) {
  if (!ctx) return;
  bc_arena_block *b = ctx->arena;
  while (b) {
    bc_arena_block *next = b->next;
    free(b);
    b = next;
  }
  free(ctx->last_error);
  free(ctx);
}

void bc_set_error_fn(bc_ctx *ctx, void *opaque, bc_error_fn fn) {
  ctx->on_error = fn ? fn : default_sink;
  ctx->error_opaque = opaque;
}

// One malloc per allocation, chained: simple, and ASan/valgrind see every
// object's real bounds.
void *bc_alloc(bc_ctx *ctx, size_t n) {
  if (n > SIZE_MAX - sizeof(bc_arena_block)) return NULL;
  bc_arena_block *b = calloc(1, sizeof(bc_arena_block) + n);
  if (!b) return NULL;
  b->next = ctx->arena;
  ctx->arena = b;
  return b->data;
}

char *bc_strndup(bc_ctx *ctx, const char *s, size_t n) {
  char *p = bc_alloc(ctx, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

char *bc_strdup(bc_ctx *ctx, const char *s) { return bc_strndup(ctx, s, strlen(s)); }

static char *vfmt_malloc(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *p = malloc((size_t)n + 1);
  if (p) vsnprintf(p, (size_t)n + 1, fmt, ap);
  return p;
}

char *bc_fmt(bc_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *m = vfmt_malloc(fmt, ap);
  va_end(ap);
  if (!m) return NULL;
  char *p = bc_strdup(ctx, m);
  free(m);
  return p;
}

// A growable string used to assemble a message before it is emitted whole.
typedef struct { char *p; size_t len, cap; } strbuf;

static void sb_putn(strbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

// Appends s[0, n) with every byte a terminal could act on escaped: C0
// controls (except tab), DEL, bytes that are not part of valid UTF-8 and the
// C1 controls U+0080..U+009F become \xNN, so a graph line, a tensor name or
// a .npy descr cannot clear the screen or forge a line of output.  Valid
// printable UTF-8 (a name in another script) is kept as is.
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (len < 2 || len > n || c < 0xC2 || c > 0xF4) return 0;
  for (size_t k = 1; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (len == 2 && c == 0xC2 && s[1] < 0xA0) return 0;  // C1 control
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

// Width on screen of one escaped byte sequence starting at s (for carets):
// the bytes consumed in *used.
static size_t escaped_width(const unsigned char *s, size_t n, size_t *used) {
  if (s[0] == '\t' || (s[0] >= 0x20 && s[0] < 0x7f)) return *used = 1, 1;
  size_t u = s[0] >= 0x80 ? utf8_len(s, n) : 0;
  if (u) return *used = u, 1;
  return *used = 1, 4;
}

static void sb_put_escaped(strbuf *b, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t used;
    if (escaped_width(p + i, n - i, &used) == 4) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\x%02x", p[i]);
      sb_putn(b, esc, 4);
    } else {
      sb_putn(b, s + i, used);
    }
    i += used;
  }
}

// vsnprintf, except that what %s and %c insert is escaped (sb_put_escaped):
// the format's own text (newlines between lines of a message) is trusted,
// the strings it quotes (file contents, names, paths) are not.  Each
// conversion is formatted on its own with the matching va_arg type.
typedef enum { A_INT, A_LONG, A_LLONG, A_SIZE, A_DOUBLE, A_LDOUBLE, A_PTR, A_STR, A_CHAR } arg_kind;

static arg_kind spec_kind(const char *len, char conv) {
  if (conv == 's') return A_STR;
  if (conv == 'c') return A_CHAR;
  if (conv == 'p') return A_PTR;
  if (strchr("fFeEgGaA", conv)) return len[0] == 'L' ? A_LDOUBLE : A_DOUBLE;
  if (len[0] == 'l' && len[1] == 'l') return A_LLONG;
  if (len[0] == 'l' || len[0] == 'j' || len[0] == 't') return A_LONG;
  if (len[0] == 'z') return A_SIZE;
  return A_INT;
}

static void sb_vprintf(strbuf *b, const char *fmt, va_list ap_in) {
  va_list ap;
  va_copy(ap, ap_in);
  for (const char *p = fmt; *p;) {
    const char *pct = strchr(p, '%');
    if (!pct) {
      sb_putn(b, p, strlen(p));
      break;
    }
    sb_putn(b, p, (size_t)(pct - p));
    if (pct[1] == '%') {
      sb_putn(b, "%", 1);
      p = pct + 2;
      continue;
    }
    // %[flags][width][.prec][length]conv, with * for width or precision.
    const char *q = pct + 1;
    int star[2], nstar = 0;
    while (*q && strchr("-+ #0", *q)) q++;
    if (*q == '*') star[nstar++] = va_arg(ap, int), q++;
    while (*q >= '0' && *q <= '9') q++;
    if (*q == '.') {
      q++;
      if (*q == '*') star[nstar++] = va_arg(ap, int), q++;
      while (*q >= '0' && *q <= '9') q++;
    }
    const char *len = q;
    while (*q && strchr("hlLzjt", *q)) q++;
    char conv = *q;
    if (!conv) break;
    char spec[32], lenbuf[4] = {0};
    size_t sl = (size_t)(q - pct + 1);
    if (sl >= sizeof spec || (size_t)(q - len) >= sizeof lenbuf) break;  // not a format we write
    memcpy(spec, pct, sl);
    spec[sl] = '\0';
    memcpy(lenbuf, len, (size_t)(q - len));
    char *out = NULL;
    int n = -1;
    char small[128];
#define FMT1(T)                                                                        \
  do {                                                                                 \
    T v_ = va_arg(ap, T);                                                              \
    n = nstar == 2   ? snprintf(NULL, 0, spec, star[0], star[1], v_)                   \
        : nstar == 1 ? snprintf(NULL, 0, spec, star[0], v_)                            \
                     : snprintf(NULL, 0, spec, v_);                                    \
    out = n >= 0 && (size_t)n < sizeof small ? small : malloc(n >= 0 ? (size_t)n + 1 : 1); \
    if (out && n >= 0) {                                                               \
      if (nstar == 2) snprintf(out, (size_t)n + 1, spec, star[0], star[1], v_);        \
      else if (nstar == 1) snprintf(out, (size_t)n + 1, spec, star[0], v_);            \
      else snprintf(out, (size_t)n + 1, spec, v_);                                     \
    }                                                                                  \
  } while (0)
    arg_kind k = spec_kind(lenbuf, conv);
    switch (k) {
    case A_INT: case A_CHAR: FMT1(int); break;
    case A_LONG: FMT1(long); break;
    case A_LLONG: FMT1(long long); break;
    case A_SIZE: FMT1(size_t); break;
    case A_DOUBLE: FMT1(double); break;
    case A_LDOUBLE: FMT1(long double); break;
    case A_PTR: FMT1(void *); break;
    case A_STR: {
      const char *s = va_arg(ap, const char *);
      if (!s) s = "(null)";
      n = nstar == 2   ? snprintf(NULL, 0, spec, star[0], star[1], s)
          : nstar == 1 ? snprintf(NULL, 0, spec, star[0], s)
                       : snprintf(NULL, 0, spec, s);
      out = n >= 0 && (size_t)n < sizeof small ? small : malloc(n >= 0 ? (size_t)n + 1 : 1);
      if (out && n >= 0) {
        if (nstar == 2) snprintf(out, (size_t)n + 1, spec, star[0], star[1], s);
        else if (nstar == 1) snprintf(out, (size_t)n + 1, spec, star[0], s);
        else snprintf(out, (size_t)n + 1, spec, s);
      }
      break;
    }
    }
#undef FMT1
    if (out && n >= 0) {
      if (k == A_STR || k == A_CHAR) sb_put_escaped(b, out, (size_t)n);
      else sb_putn(b, out, (size_t)n);
    }
    if (out != small) free(out);
    p = q + 1;
  }
  va_end(ap);
}

static void sb_printf(strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(b, fmt, ap);
  va_end(ap);
}

static void emit(bc_ctx *ctx, strbuf *b) {
  if (!b->p) return;
  free(ctx->last_error);
  ctx->last_error = b->p;
  ctx->on_error(ctx->error_opaque, b->p);
}

// Prints the line `loc` points at (escaped as messages are), then spaces
// and carets under the token.  Tabs in the prefix are copied and escaped
// bytes padded to their printed width so the caret lines up in a terminal.
// A line ends at LF, CR (a lone CR is a line break too, see lex.c) or NUL.
static void put_source_line(strbuf *b, bc_loc loc) {
  const char *text = loc.src->text;
  const char *p = text;
  if (loc.src->len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) p += 3;  // skipped by the lexer too
  for (int l = 1; l < loc.line && *p; p++)
    if (*p == '\n' || (*p == '\r' && p[1] != '\n')) l++;
  const char *end = p;
  while (*end && *end != '\n' && *end != '\r') end++;
  sb_putn(b, "  ", 2);
  sb_put_escaped(b, p, (size_t)(end - p));
  sb_putn(b, "\n  ", 3);
  const unsigned char *u = (const unsigned char *)p;
  for (size_t i = 0; (int)i + 1 < loc.col && p + i < end;) {
    size_t used, w = escaped_width(u + i, (size_t)(end - p) - i, &used);
    if (u[i] == '\t') sb_putn(b, "\t", 1);
    else
      for (size_t k = 0; k < w; k++) sb_putn(b, " ", 1);
    i += used;
  }
  int n = loc.len > 0 ? loc.len : 1;
  for (int i = 0; i < n; i++) sb_putn(b, "^", 1);
  sb_putn(b, "\n", 1);
}

static void vreport(bc_ctx *ctx, bc_loc loc, const char *kind, const char *fmt, va_list ap) {
  strbuf b = {0};
  if (loc.src)
    sb_printf(&b, "%s:%d:%d: %s: ", loc.src->path, loc.line, loc.col, kind);
  else
    sb_printf(&b, "%s: ", kind);
  sb_vprintf(&b, fmt, ap);
  sb_putn(&b, "\n", 1);
  if (loc.src && loc.line > 0) put_source_line(&b, loc);
  emit(ctx, &b);
}

int bc_error_at(bc_ctx *ctx, bc_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(ctx, loc, "error", fmt, ap);
  va_end(ap);
  ctx->nerrors++;
  return BC_EINPUT;
}

void bc_note_at(bc_ctx *ctx, bc_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(ctx, loc, "note", fmt, ap);
  va_end(ap);
}

// The message, then `text` (NULL: none) line by line, indented and escaped.
static int verror_text(bc_ctx *ctx, bc_status st, const char *text, const char *fmt,
                       va_list ap) {
  strbuf b = {0};
  sb_vprintf(&b, fmt, ap);
  sb_putn(&b, "\n", 1);
  for (const char *p = text; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    sb_putn(&b, "  ", 2);
    sb_put_escaped(&b, p, n);
    sb_putn(&b, "\n", 1);
    p += n + (e ? 1 : 0);
  }
  emit(ctx, &b);
  ctx->nerrors++;
  return st;
}

int bc_error(bc_ctx *ctx, bc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = verror_text(ctx, st, NULL, fmt, ap);
  va_end(ap);
  return r;
}

int bc_error_with_text(bc_ctx *ctx, bc_status st, const char *text, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = verror_text(ctx, st, text, fmt, ap);
  va_end(ap);
  return r;
}

FILE *bc_open_regular(bc_ctx *ctx, const char *path, uint64_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    bc_error(ctx, BC_EIO, "%s: error: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    bc_error(ctx, BC_EIO, "%s: error: not a regular file", path);
    return NULL;
  }
  *size = (uint64_t)st.st_size;
  return f;
}

// Reads a whole regular file of at most `max` bytes, NUL-terminated, into
// the arena or (for big files) a malloc'ed buffer.
static int read_whole(bc_ctx *ctx, const char *path, uint64_t max, bool in_arena, char **data,
                      size_t *len) {
  *data = NULL;
  *len = 0;
  uint64_t size;
  FILE *f = bc_open_regular(ctx, path, &size);
  if (!f) return BC_EIO;
  if (size > max || size > SIZE_MAX - 1) {
    fclose(f);
    return bc_error(ctx, BC_EINPUT, "%s: error: file is %llu bytes, over the limit of %llu",
                    path, (unsigned long long)size, (unsigned long long)max);
  }
  size_t n = (size_t)size;
  char *buf = in_arena ? bc_alloc(ctx, n + 1) : malloc(n + 1);
  if (!buf) {
    fclose(f);
    return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory reading %zu bytes", path, n);
  }
  size_t got = n ? fread(buf, 1, n, f) : 0;
  int err = ferror(f);
  fclose(f);
  if (got != n || err) {
    if (!in_arena) free(buf);
    return bc_error(ctx, BC_EIO, "%s: error: read failed", path);
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return BC_OK;
}

int bc_read_file(bc_ctx *ctx, const char *path, size_t max, char **data, size_t *len) {
  return read_whole(ctx, path, max, true, data, len);
}

int bc_read_file_malloc(bc_ctx *ctx, const char *path, uint64_t max, unsigned char **data,
                        size_t *len) {
  return read_whole(ctx, path, max, false, (char **)data, len);
}

// Waits for pid, killing its process group once timeout_s (> 0) seconds
// have passed.  Polls every 10 ms: a compile takes seconds, and sleeping
// keeps this free of signal handlers (no global state).
static int wait_child(pid_t pid, int timeout_s) {
  struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int status;
  bool killed = false;
  for (;;) {
    pid_t r = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (r == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (!killed && now.tv_sec - t0.tv_sec >= timeout_s) {
        kill(-pid, SIGKILL);  // the compiler and everything it started
        kill(pid, SIGKILL);
        killed = true;
      }
      nanosleep(&nap, NULL);
    }
  }
  if (killed) return BC_SPAWN_TIMEOUT;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int bc_spawn_fd(char *const *argv, int log_fd, int timeout_s, int *err) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  *err = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (*err) return -1;
  return wait_child(pid, timeout_s);
}

int bc_spawn_wait(char *const *argv, const char *log, int *err) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int rc = bc_spawn_fd(argv, fd, 0, err);
  close(fd);
  return rc;
}

uint64_t bc_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

// --- writing files -----------------------------------------------------------
//
// An output file is one of: a path to create or replace (temp + rename), a
// file with several hard links (rewritten in place), or a device/FIFO
// (written directly).  Symbolic links are resolved first so the link
// survives and its target gets the new contents.
typedef struct {
  const char *path;   // as given (messages)
  char *target;       // where the data goes (the link's target, malloc'ed)
  char *tmp;          // temp file in target's directory; NULL when written in place
  int fd;
} wfile;

// A short random temp name next to target: ".blockc-<16 hex>" fits any
// directory whatever the length of target's own name (NAME_MAX), and O_EXCL
// with a fresh name per try means a stale temp never blocks a run.
static int open_temp(wfile *w, mode_t mode) {
  const char *slash = strrchr(w->target, '/');
  size_t dlen = slash ? (size_t)(slash - w->target) + 1 : 0;
  w->tmp = malloc(dlen + 32);
  if (!w->tmp) return ENOMEM;
  uint64_t seed = bc_fnv1a(BC_FNV_OFFSET, w->target, strlen(w->target));
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  seed ^= (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() << 32;
  for (int tries = 0; tries < 100; tries++) {
    seed = bc_fnv1a(seed, &tries, sizeof tries);
    memcpy(w->tmp, w->target, dlen);
    snprintf(w->tmp + dlen, 32, ".blockc-%016llx", (unsigned long long)seed);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (w->fd >= 0) return 0;
    if (errno != EEXIST) break;
  }
  int e = errno;
  free(w->tmp);
  w->tmp = NULL;
  return e;
}

static void wfile_abort(wfile *w) {
  if (w->fd >= 0) close(w->fd);
  if (w->tmp) unlink(w->tmp);
  free(w->tmp);
  free(w->target);
  w->tmp = w->target = NULL;
  w->fd = -1;
}

static int wfile_fail(bc_ctx *ctx, wfile *w, const char *what, int e) {
  int rc = bc_error(ctx, BC_EIO, "%s: error: %s: %s", w->path, what, strerror(e));
  wfile_abort(w);
  return rc;
}

// Decides how path is written and opens the descriptor.
static int wfile_open(bc_ctx *ctx, const char *path, wfile *w) {
  *w = (wfile){.path = path, .fd = -1};
  struct stat st;
  bool exists = lstat(path, &st) == 0;
  if (exists && S_ISLNK(st.st_mode)) {
    if (stat(path, &st) != 0)
      return bc_error(ctx, BC_EIO, "%s: error: cannot write: a symbolic link whose target "
                      "does not exist (%s)", path, strerror(errno));
    w->target = realpath(path, NULL);
  } else {
    w->target = malloc(strlen(path) + 1);
    if (w->target) memcpy(w->target, path, strlen(path) + 1);
  }
  if (!w->target) return wfile_fail(ctx, w, "cannot write", errno ? errno : ENOMEM);
  if (exists && S_ISDIR(st.st_mode))
    return wfile_fail(ctx, w, "cannot write", EISDIR);
  if (exists && !S_ISREG(st.st_mode)) {
    // Device, FIFO, socket: never replaced.  O_NONBLOCK so a FIFO without a
    // reader fails (ENXIO) instead of hanging; then back to blocking writes.
    w->fd = open(w->target, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (w->fd < 0) return wfile_fail(ctx, w, "cannot write", errno);
    int fl = fcntl(w->fd, F_GETFL);
    if (fl >= 0) fcntl(w->fd, F_SETFL, fl & ~O_NONBLOCK);
    return BC_OK;
  }
  if (exists && st.st_nlink > 1) {
    w->fd = open(w->target, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    return w->fd < 0 ? wfile_fail(ctx, w, "cannot write", errno) : BC_OK;
  }
  int e = open_temp(w, exists ? (st.st_mode & 07777) : 0666);
  if (e) return wfile_fail(ctx, w, "cannot write", e);
  if (exists) {
    // Keep the old file's permissions (the umask applied to open's mode)
    // and, where allowed (as root), its owner.
    if (fchmod(w->fd, st.st_mode & 07777) != 0) return wfile_fail(ctx, w, "cannot write", errno);
    if (fchown(w->fd, st.st_uid, st.st_gid) != 0) { /* not the owner: keep ours */ }
  }
  return BC_OK;
}

static int wfile_write(bc_ctx *ctx, wfile *w, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(w->fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return wfile_fail(ctx, w, "write failed", n < 0 ? errno : ENOSPC);
    p += n;
    len -= (size_t)n;
  }
  return BC_OK;
}

// fsync and close; the temp file (if any) stays, to be renamed.
static int wfile_finish(bc_ctx *ctx, wfile *w) {
  if (fsync(w->fd) != 0 && errno != EINVAL && errno != EROFS)
    return wfile_fail(ctx, w, "fsync failed", errno);
  int rc = close(w->fd);
  w->fd = -1;
  return rc != 0 ? wfile_fail(ctx, w, "write failed", errno) : BC_OK;
}

static int wfile_commit(bc_ctx *ctx, wfile *w) {
  if (w->tmp && rename(w->tmp, w->target) != 0) return wfile_fail(ctx, w, "cannot write", errno);
  free(w->tmp);
  free(w->target);
  w->tmp = w->target = NULL;
  return BC_OK;
}

int bc_write_file_atomic(bc_ctx *ctx, const char *path, int nparts,
                         const void *const *parts, const size_t *lens) {
  wfile w;
  int rc = wfile_open(ctx, path, &w);
  for (int i = 0; rc == BC_OK && i < nparts; i++) rc = wfile_write(ctx, &w, parts[i], lens[i]);
  if (rc == BC_OK) rc = wfile_finish(ctx, &w);
  if (rc == BC_OK) rc = wfile_commit(ctx, &w);
  return rc;
}

int bc_write_files_atomic(bc_ctx *ctx, int n, const char *const *paths,
                          const char *const *texts) {
  wfile *w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
  if (!w) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int rc = BC_OK, opened = 0;
  for (int i = 0; rc == BC_OK && i < n; i++) {
    rc = wfile_open(ctx, paths[i], &w[i]);
    if (rc == BC_OK) opened = i + 1;
    if (rc == BC_OK) rc = wfile_write(ctx, &w[i], texts[i], strlen(texts[i]));
    if (rc == BC_OK) rc = wfile_finish(ctx, &w[i]);
  }
  // A failed wfile_* already cleaned itself up; abort the others.
  for (int i = 0; rc == BC_OK && i < n; i++) rc = wfile_commit(ctx, &w[i]);
  if (rc != BC_OK)
    for (int i = 0; i < opened; i++) wfile_abort(&w[i]);
  free(w);
  return rc;
}

// --- shapes ---------------------------------------------------------------

int64_t bc_shape_numel(const bc_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

bool bc_shape_eq(const bc_shape *a, const bc_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i] || a->sym[i] != b->sym[i]) return false;
  return true;
}

bool bc_shape_broadcasts(const bc_shape *a, const bc_shape *full) {
  if (a->rank == 1 && a->d[0] == 1 && !a->sym[0]) return true;
  if (a->rank < 1 || a->rank > full->rank) return false;
  for (int i = 1; i <= a->rank; i++)
    if (a->d[a->rank - i] != full->d[full->rank - i] ||
        a->sym[a->rank - i] != full->sym[full->rank - i])
      return false;
  return true;
}

bool bc_shape_fixed(const bc_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (s->sym[i]) return false;
  return true;
}

const char *bc_shape_str(const bc_shape *s, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < s->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s%lld", i ? ", " : "", s->sym[i] ? "<=" : "",
                          (long long)s->d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

void bc_sb_vadd(bc_sbuf *b, const char *fmt, va_list ap) {
  if (b->oom) return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) { b->oom = true; return; }
  if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
  size_t ncap = b->cap ? b->cap : 1 << 16;
  while (ncap <= b->len + (size_t)n) ncap *= 2;
  char *np = realloc(b->p, ncap);
  if (!np) { b->oom = true; return; }
  b->p = np;
  b->cap = ncap;
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  b->len += (size_t)n;
}

void bc_sb_add(bc_sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bc_sb_vadd(b, fmt, ap);
  va_end(ap);
}

// A runtime reader's error as blockc's message: "path: error: <reason>",
// one line per line of the reason (a .npy header quote is a second line).
int bcS_rt_error(bc_ctx *ctx, const char *path, const bcrt_error *e) {
  bc_status st = e->status == BCRT_EIO ? BC_EIO : e->status == BCRT_ENOMEM ? BC_ENOMEM
               : e->status == BCRT_EINVAL ? BC_EINTERNAL : BC_EINPUT;
  const char *nl = strchr(e->msg, '\n');
  if (!nl) return bc_error(ctx, st, "%s: error: %s", path, e->msg);
  return bc_error(ctx, st, "%s: error: %.*s\n%s", path, (int)(nl - e->msg), e->msg, nl + 1);
}
