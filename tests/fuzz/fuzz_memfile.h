// fuzz_memfile.h — shared by the file-format fuzz targets.
//
// The fuzzer's bytes go into an anonymous in-memory file (memfd_create)
// opened through /proc/self/fd/N, so the readers are exercised exactly as
// the CLI uses them (by path) without touching the disk. A context whose
// error sink insists on a non-empty message is returned ready to use.
#ifndef FUZZ_MEMFILE_H
#define FUZZ_MEMFILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bc.h"

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
#endif
