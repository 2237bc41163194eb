// fuzz_memfile.h — shared by the file-format fuzz targets.
//
// The fuzzer's bytes are read three ways: straight from memory through a
// bcrt_source (the runtime's reader as a vendored program ships it, with
// no system call per read), and through an anonymous in-memory file
// (memfd_create) opened as /proc/self/fd/N, so the path functions
// (blockc's layer, the vendored loaders) run exactly as the CLI and a
// vendored program use them, without touching the disk.  A context whose
// error sink insists on a non-empty message is returned ready to use.
// Round trips (writer -> reader) go to files in a private directory on
// /dev/shm (tmpfs: no disk, fsync is free), removed as they are read back.
#ifndef FUZZ_MEMFILE_H
#define FUZZ_MEMFILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bc.h"
#include "blockc_rt.h"

typedef struct {
  int fd;
  char path[64];
} fuzz_memfile;

static void fuzz_quiet(void *opaque, const char *msg) {
  (void)opaque;
  if (!msg || !msg[0]) abort();  // every error must say something
}

// Puts data into the memfile (created on first use) and returns a fresh
// context, or NULL if none could be made.
static bc_ctx *fuzz_memfile_fill(fuzz_memfile *m, const char *name, const uint8_t *data,
                                 size_t size) {
  if (m->fd <= 0) {
    m->fd = memfd_create(name, 0);
    if (m->fd < 0) abort();
    snprintf(m->path, sizeof m->path, "/proc/self/fd/%d", m->fd);
  }
  if (ftruncate(m->fd, 0) != 0) abort();
  if (size && pwrite(m->fd, data, size, 0) != (ssize_t)size) abort();
  bc_ctx *ctx = bc_ctx_new();
  if (ctx) bc_set_error_fn(ctx, NULL, fuzz_quiet);
  return ctx;
}

// The fuzzer's bytes as a runtime source (reads never leave [0, size):
// the reader checks offsets against src.size before calling read).
static int fuzz_mem_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  memcpy(buf, (const uint8_t *)h + off, n);
  return 0;
}

static bcrt_source fuzz_mem_source(const uint8_t *data, size_t size) {
  return (bcrt_source){.handle = (void *)data, .size = size, .read = fuzz_mem_read};
}

// A failed read must say why, by a known rule, with nothing returned.
static void fuzz_check_error(int st, const bcrt_error *e) {
  if (st == BCRT_OK || e->status != st || e->code <= BCRT_ERR_NONE || e->code > BCRT_ERR_RANGE ||
      !e->msg[0])
    abort();
}

// blockc's message for a runtime error: exactly "path: error: " and the
// runtime's first line (blockc's layer adds no rule and no wording).
static void fuzz_check_layer(const char *path, const char *bc_msg, const bcrt_error *e) {
  char want[2048];
  snprintf(want, sizeof want, "%s: error: %s", path, e->msg);
  char *nl = strchr(want, '\n');
  if (nl) *nl = '\0';
  if (strncmp(bc_msg, want, strlen(want)) != 0) {
    fprintf(stderr, "blockc says '%s', the runtime '%s'\n", bc_msg, e->msg);
    abort();
  }
}

// The error sink that keeps the first message (for fuzz_check_layer).
typedef struct {
  char first[2048];
} fuzz_errors;

static void fuzz_keep(void *opaque, const char *msg) {
  fuzz_errors *f = opaque;
  if (!msg || !msg[0]) abort();
  if (!f->first[0]) snprintf(f->first, sizeof f->first, "%s", msg);
}

// A path in a fresh private directory for one round trip; fuzz_tmp_done
// removes the file (if written) and the directory (libFuzzer may end the
// process without running atexit handlers, so nothing is left for them).
static char fuzz_dir[64], fuzz_path[128];

static inline const char *fuzz_tmp_path(const char *name) {
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s", access("/dev/shm", W_OK) == 0 ? "/dev/shm/blockc-fuzz-XXXXXX"
                                                                           : "/tmp/blockc-fuzz-XXXXXX");
  if (!mkdtemp(fuzz_dir)) abort();
  snprintf(fuzz_path, sizeof fuzz_path, "%s/%s", fuzz_dir, name);
  return fuzz_path;
}

static inline void fuzz_tmp_done(void) {
  unlink(fuzz_path);
  if (rmdir(fuzz_dir) != 0) abort();  // a writer left a temp file behind
}
#endif
