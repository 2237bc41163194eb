// aot_cache.h — the AOT cache's files: unique temp names, publication that
// survives a crash, verification before use, and the builders' lock
// (aot_cache.c; used by aot.c only).
#ifndef BC_AOT_CACHE_H
#define BC_AOT_CACHE_H
#include "bc.h"

// Takes an exclusive flock on dir/.lock, waiting for another builder of
// the same directory (any process, any PID namespace, any host whose
// filesystem supports flock).  *fd is closed by bcA_unlock.
int bcA_lock(bc_ctx *ctx, const char *dir, int *fd);
void bcA_unlock(int fd);

// Under the lock: removes every temp file a dead builder left in dir (each
// dot file but .lock; no live builder owns one while the lock is held).
void bcA_clean_temps(bc_ctx *ctx, const char *dir);

// A new empty private file dir/.NAME.XXXXXX (mkstemp); *tmp is ctx memory.
int bcA_temp(bc_ctx *ctx, const char *dir, const char *name, const char **tmp);

// Makes tmp the cached file path: fsync tmp, rename it to path, write the
// sidecar path.sum (size and FNV-1a 64 of the bytes) the same way, fsync
// the directory.  On failure tmp is removed and path is left unverified.
int bcA_publish(bc_ctx *ctx, const char *tmp, const char *path);

// Whether the file open as fd (named path) is what bcA_publish wrote:
// path.sum exists, is private, and matches fd's size and bytes.
bool bcA_verified(bc_ctx *ctx, const char *path, int fd);
#endif
