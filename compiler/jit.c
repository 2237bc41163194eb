// jit.c — compiles emitted C in memory with libtcc and looks up its entries.
//
// tcc is fast enough (about a millisecond for a 6-layer encoder) that the
// JIT is the default backend.  The generated code is self-contained: it
// declares its own prototypes, so tcc runs with -nostdinc -nostdlib and
// every external symbol the code may call is bound here by address.  Code
// that names anything else fails to link — the generated program cannot
// reach libc even if the emitter had a bug.
//
// Any tcc diagnostic is a blockc bug (the emitter promises warning-free
// C), reported as BC_EINTERNAL with the offending generated line.
#include "bc.h"

#include <libtcc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

struct bc_jit {
  TCCState *s;
};

// libtcc 0.9.27 keeps its compiler state in globals (tcc_state, the token
// tables, the preprocessor file stack), so two compilations — or a
// compilation and a tcc_delete, which tears those globals down — must never
// overlap.  This mutex is the one piece of static mutable state in blockc:
// the lock has to be shared by every bc_ctx in the process because the
// globals it protects are.
static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

// The symbols generated code may call, and nothing else: cblas_sgemm and
// the runtime's kernel lists (blockc_rt.h's BCRT_KERNELS).
typedef struct {
  const char *name;
  const void *addr;
} jit_sym;

#define JIT_SYM(ret, name, params) {#name, (const void *)name},
static const jit_sym jit_syms[] = {
    {"cblas_sgemm", (const void *)cblas_sgemm},
    BCRT_KERNELS(JIT_SYM)
};

const char *bcJ_symbol(int i) {
  return i >= 0 && i < (int)(sizeof jit_syms / sizeof jit_syms[0]) ? jit_syms[i].name : NULL;
}

// tcc reports through a callback; collect the messages for the report.
typedef struct {
  char msg[2048];
  size_t len;
} jit_diag;

static void on_tcc_error(void *opaque, const char *msg) {
  jit_diag *d = opaque;
  size_t n = strlen(msg);
  if (d->len + n + 2 >= sizeof d->msg) n = sizeof d->msg - d->len - 2;
  if (d->len + n + 2 > sizeof d->msg) return;
  memcpy(d->msg + d->len, msg, n);
  d->len += n;
  d->msg[d->len++] = '\n';
  d->msg[d->len] = '\0';
}

// Copies line `line` (1-based) of src into buf, for the error report.
static const char *source_line(const char *src, int line, char *buf, size_t n) {
  const char *p = src;
  for (int i = 1; i < line && p; i++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  if (!p || line < 1) return "";
  size_t len = strcspn(p, "\n");
  if (len >= n) len = n - 1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  return buf;
}

// tcc messages look like "<string>:42: error: ..."; find the 42.
static int message_line(const char *msg) {
  const char *p = strstr(msg, ">:");
  return p ? atoi(p + 2) : 0;
}

static int report(bc_ctx *ctx, const char *what, const jit_diag *d, const char *csrc) {
  char line[512];
  int ln = message_line(d->msg);
  return bc_error(ctx, BC_EINTERNAL,
                  "internal error: tcc %s failed (a blockc bug):\n%s%s%s%s", what,
                  d->len ? d->msg : "(no message)\n", ln ? "generated line: " : "",
                  ln ? source_line(csrc, ln, line, sizeof line) : "", ln ? "\n" : "");
}

// Everything between tcc_new and tcc_relocate; called with the lock held.
static int compile_locked(bc_ctx *ctx, TCCState *s, const char *csrc, jit_diag *diag) {
  tcc_set_error_func(s, diag, on_tcc_error);
  // -nostdinc/-nostdlib: no headers, no crt, no libc, no libtcc1.
  tcc_set_options(s, "-Werror -Wall -nostdinc -nostdlib");
  if (tcc_set_output_type(s, TCC_OUTPUT_MEMORY) < 0) return report(ctx, "setup", diag, csrc);
  if (tcc_compile_string(s, csrc) < 0) return report(ctx, "compile", diag, csrc);
  for (size_t i = 0; i < sizeof jit_syms / sizeof jit_syms[0]; i++)
    tcc_add_symbol(s, jit_syms[i].name, jit_syms[i].addr);
  if (tcc_relocate(s, TCC_RELOCATE_AUTO) < 0) return report(ctx, "link", diag, csrc);
  if (diag->len) return report(ctx, "compile", diag, csrc);  // any warning is a bug
  return BC_OK;
}

int bcJ_compile_module(bc_ctx *ctx, const char *csrc, bc_jit **out) {
  *out = NULL;
  bc_jit *j = calloc(1, sizeof *j);
  jit_diag *diag = calloc(1, sizeof *diag);
  if (!j || !diag) {
    free(j);
    free(diag);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  pthread_mutex_lock(&tcc_lock);
  int st = BC_ENOMEM;
  j->s = tcc_new();
  if (j->s) st = compile_locked(ctx, j->s, csrc, diag);
  else bc_error(ctx, BC_ENOMEM, "error: tcc_new failed");
  if (st != BC_OK && j->s) tcc_delete(j->s);
  pthread_mutex_unlock(&tcc_lock);
  free(diag);
  if (st != BC_OK) {
    free(j);
    return st;
  }
  *out = j;
  return BC_OK;
}

int bcJ_lookup(bc_ctx *ctx, bc_jit *j, const char *name, void (**fn)(void)) {
  *fn = NULL;
  pthread_mutex_lock(&tcc_lock);
  void *sym = tcc_get_symbol(j->s, name);
  pthread_mutex_unlock(&tcc_lock);
  if (!sym)
    return bc_error(ctx, BC_EINTERNAL, "internal error: generated code defines no '%s'", name);
  // ISO C has no object-to-function pointer conversion; POSIX dlsym-style
  // code relies on this memcpy being well defined for same-size pointers.
  memcpy(fn, &sym, sizeof *fn);
  return BC_OK;
}

int bcJ_compile(bc_ctx *ctx, const char *csrc, const char *fn_name, bc_jit **out,
                bc_forward_fn *fn) {
  *fn = NULL;
  int st = bcJ_compile_module(ctx, csrc, out);
  void (*f)(void) = NULL;
  if (!st) st = bcJ_lookup(ctx, *out, fn_name, &f);
  if (st) {
    bcJ_free(*out);
    *out = NULL;
    return st;
  }
  *fn = (bc_forward_fn)f;
  return BC_OK;
}

void bcJ_free(bc_jit *j) {
  if (!j) return;
  pthread_mutex_lock(&tcc_lock);  // tcc_delete touches tcc's globals too
  tcc_delete(j->s);
  pthread_mutex_unlock(&tcc_lock);
  free(j);
}
