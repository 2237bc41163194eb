// ctx.c — the compile context: an arena allocator, the error sink, and file
// helpers.
//
// Everything the compiler allocates while turning a graph into code lives in
// the context's arena and is released by bc_ctx_free, so error paths never
// leak and no module keeps global state.  Errors are formatted the way
// chibicc prints them — location, message, the source line and a caret —
// and handed to a user callback (stderr by default).
#define _POSIX_C_SOURCE 200809L
#include "bc.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static void sb_vprintf(strbuf *b, const char *fmt, va_list ap) {
  char *m = vfmt_malloc(fmt, ap);
  if (m) sb_putn(b, m, strlen(m));
  free(m);
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

// Prints the line `loc` points at, then spaces and carets under the token.
// Tabs in the prefix are copied so the caret lines up in a terminal.
static void put_source_line(strbuf *b, bc_loc loc) {
  const char *text = loc.src->text;
  const char *p = text;
  for (int l = 1; l < loc.line && *p; p++)
    if (*p == '\n') l++;
  const char *end = p;
  while (*end && *end != '\n') end++;
  sb_putn(b, "  ", 2);
  sb_putn(b, p, (size_t)(end - p));
  sb_putn(b, "\n  ", 3);
  for (int i = 1; i < loc.col && p + i - 1 < end; i++)
    sb_putn(b, p[i - 1] == '\t' ? "\t" : " ", 1);
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

int bc_error(bc_ctx *ctx, bc_status st, const char *fmt, ...) {
  strbuf b = {0};
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&b, fmt, ap);
  va_end(ap);
  sb_putn(&b, "\n", 1);
  emit(ctx, &b);
  ctx->nerrors++;
  return st;
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

int bc_spawn_wait(char *const *argv, const char *log, int *err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  *err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (*err) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

uint64_t bc_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

int bc_write_file_atomic(bc_ctx *ctx, const char *path, int nparts,
                         const void *const *parts, const size_t *lens) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0644);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return bc_error(ctx, BC_EIO, "%s: error: cannot write: %s", path, strerror(e));
  }
  for (int i = 0; i < nparts; i++) {
    const char *p = parts[i];
    size_t left = lens[i];
    while (left > 0) {
      ssize_t w = write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int e = w < 0 ? errno : ENOSPC;
        close(fd);
        unlink(tmp);
        free(tmp);
        return bc_error(ctx, BC_EIO, "%s: error: write failed: %s", path, strerror(e));
      }
      p += w;
      left -= (size_t)w;
    }
  }
  if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    int e = errno;
    close(fd);
    unlink(tmp);
    free(tmp);
    return bc_error(ctx, BC_EIO, "%s: error: fsync failed: %s", path, strerror(e));
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    free(tmp);
    return bc_error(ctx, BC_EIO, "%s: error: cannot write: %s", path, strerror(e));
  }
  free(tmp);
  return BC_OK;
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
