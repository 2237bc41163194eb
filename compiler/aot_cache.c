// aot_cache.c — the AOT cache's files, safe against crashes and against
// builders that share the cache.
//
// A cached file (a model's <model>.so, the runtime object blockc_rt.o) is
// published in steps: the compiler writes it under a unique temp name
// (mkstemp: builders in other PID namespaces or on other hosts never pick
// the same name, as `<pid>.tmp` names did); it is fsynced and renamed into
// place; then a sidecar <file>.sum records its size and FNV-1a 64 hash,
// written and renamed the same way; then the directory is fsynced.  A
// reader trusts the file only when the sidecar matches its bytes, so a
// module cut short by a power failure or a full disk, or changed by hand,
// is rebuilt instead of faulting inside dlopen (SIGBUS).  Renaming never
// changes a file another process has mapped: it keeps the old inode.
//
// Builders of one cache directory hold an flock on its .lock file, so two
// never compile the same module at once; under the lock every other dot
// file in the directory belongs to a builder that died, and is removed.
#define _DEFAULT_SOURCE
#include "aot_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUM_MAGIC "blockc-cache-sum v1"

int bcA_lock(bc_ctx *ctx, const char *dir, int *fd) {
  const char *p = bc_fmt(ctx, "%s/.lock", dir);
  if (!p) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (*fd < 0)
    return bc_error(ctx, BC_EIO, "%s: error: cannot open the AOT cache lock: %s", p,
                    strerror(errno));
  int rc;
  while ((rc = flock(*fd, LOCK_EX)) != 0 && errno == EINTR) {}
  if (rc != 0) {
    int e = errno;
    close(*fd);
    return bc_error(ctx, BC_EIO, "%s: error: cannot lock the AOT cache: %s", p, strerror(e));
  }
  return BC_OK;
}

void bcA_unlock(int fd) {
  if (fd >= 0) close(fd);  // releases the flock
}

void bcA_clean_temps(bc_ctx *ctx, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    const char *n = e->d_name;
    if (n[0] != '.' || !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, ".lock")) continue;
    const char *p = bc_fmt(ctx, "%s/%s", dir, n);
    if (p) unlink(p);
  }
  closedir(d);
}

int bcA_temp(bc_ctx *ctx, const char *dir, const char *name, const char **tmp) {
  char *t = bc_fmt(ctx, "%s/.%s.XXXXXX", dir, name);
  if (!t) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int fd = mkstemp(t);
  if (fd < 0)
    return bc_error(ctx, BC_EIO, "%s: error: cannot create a temp file in the AOT cache: %s", dir,
                    strerror(errno));
  close(fd);
  *tmp = t;
  return BC_OK;
}

// Size and FNV-1a 64 of the bytes of fd, read from offset 0.
static int hash_fd(int fd, long long *size, uint64_t *h) {
  char buf[1 << 16];
  *h = BC_FNV_OFFSET;
  *size = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, (off_t)*size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return 0;
    *h = bc_fnv1a(*h, buf, (size_t)n);
    *size += n;
  }
}

static int fsync_dir(const char *path) {
  char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
  if (!dir) return -1;
  if (slash) *slash = '\0';
  int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

// Writes path.sum for size and h through a synced temp file.
static int write_sum(bc_ctx *ctx, const char *path, long long size, uint64_t h) {
  char *dir = bc_strdup(ctx, path), *slash = dir ? strrchr(dir, '/') : NULL;
  const char *tmp = NULL;
  if (!slash) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *slash = '\0';
  int st = bcA_temp(ctx, dir, "sum", &tmp);
  if (st) return st;
  char text[128];
  int n = snprintf(text, sizeof text, SUM_MAGIC " size %lld fnv1a64 %016llx\n", size,
                   (unsigned long long)h);
  int fd = open(tmp, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  bool ok = fd >= 0 && write(fd, text, (size_t)n) == n && fsync(fd) == 0;
  if (fd >= 0) ok = close(fd) == 0 && ok;
  const char *sum = bc_fmt(ctx, "%s.sum", path);
  if (ok && sum && rename(tmp, sum) == 0) return BC_OK;
  int e = errno;
  unlink(tmp);
  return bc_error(ctx, BC_EIO, "%s.sum: error: cannot write the AOT cache checksum: %s", path,
                  strerror(e));
}

int bcA_publish(bc_ctx *ctx, const char *tmp, const char *path) {
  int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  long long size = 0;
  uint64_t h = 0;
  bool ok = fd >= 0 && fsync(fd) == 0 && hash_fd(fd, &size, &h) == 0;
  int e = errno;
  if (fd >= 0) close(fd);
  if (!ok || rename(tmp, path) != 0) {
    if (ok) e = errno;
    unlink(tmp);
    return bc_error(ctx, BC_EIO, "%s: error: cannot put the built file in the AOT cache: %s",
                    path, strerror(e));
  }
  int st = write_sum(ctx, path, size, h);
  if (!st && fsync_dir(path) != 0)
    st = bc_error(ctx, BC_EIO, "%s: error: cannot sync the AOT cache directory: %s", path,
                  strerror(errno));
  return st;
}

bool bcA_verified(bc_ctx *ctx, const char *path, int fd) {
  const char *sum = bc_fmt(ctx, "%s.sum", path);
  int sfd = sum ? open(sum, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (sfd < 0) return false;
  struct stat st;
  char text[128];
  ssize_t n = fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                      !(st.st_mode & 022)
                  ? read(sfd, text, sizeof text - 1)
                  : -1;
  close(sfd);
  if (n <= 0) return false;
  text[n] = '\0';
  long long want_size, size;
  unsigned long long want_h;
  uint64_t h;
  if (sscanf(text, SUM_MAGIC " size %lld fnv1a64 %16llx", &want_size, &want_h) != 2) return false;
  if (fstat(fd, &st) != 0 || (long long)st.st_size != want_size) return false;
  return hash_fd(fd, &size, &h) == 0 && size == want_size && h == (uint64_t)want_h;
}
