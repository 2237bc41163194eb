// train_data.c — the token files `blockc train` reads and the windows it
// cuts from them (train.h).
//
// Two formats, told apart by their first bytes:
//   .npy  "\x93NUMPY", version 1.0-3.0, a 1-D array of '<i4' (int32) or
//         '<u2' (uint16), C order, exactly shape[0] elements after the header;
//   .bin  llm.c's token shards (llmc/dataloader.h): 256 little-endian int32
//         (header[0] = 20240520, header[1] = 1, header[2] = the token count),
//         then that many little-endian uint16 tokens; the file size must be
//         1024 + 2 * count exactly (as llm.c checks).
// The whole file is read into int32.  Windows: a batch row starting at s
// takes inputs tok[s .. s+T) and targets tok[s+1 .. s+T]; sequential
// starts are ((k*B + r) * T) mod (n - T - 1), random ones one
// bcrt_rng_next() mod (n - T - 1) per row (docs/training.md).
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define TR_MAX_FILE (1ULL << 40)

void tr_tokens_free(tr_tokens *t) {
  free(t->tok);
  memset(t, 0, sizeof *t);
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Converts cnt little-endian tokens of `size` bytes (uint16, or int32) at p.
static int convert(bc_ctx *ctx, tr_tokens *t, const unsigned char *p, int64_t cnt, int size) {
  t->tok = malloc((size_t)(cnt ? cnt : 1) * sizeof *t->tok);
  if (!t->tok) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory for %lld tokens", t->path,
                               (long long)cnt);
  for (int64_t i = 0; i < cnt; i++)
    t->tok[i] = size == 2 ? (int32_t)(p[2 * i] | p[2 * i + 1] << 8) : (int32_t)le32(p + 4 * i);
  t->n = cnt;
  t->size = size;
  return BC_OK;
}

static int read_bin(bc_ctx *ctx, tr_tokens *t, const unsigned char *d, size_t len) {
  if (len < 1024)
    return bc_error(ctx, BC_EINPUT, "%s: error: an llm.c .bin file needs its 1024-byte header, the "
                    "file has %zu bytes", t->path, len);
  int32_t version = (int32_t)le32(d + 4), count = (int32_t)le32(d + 8);
  if (version != 1)
    return bc_error(ctx, BC_EINPUT, "%s: error: llm.c .bin version %d (header int 1); only version "
                    "1 (uint16 tokens) is read", t->path, (int)version);
  if (count < 0 || (uint64_t)len != 1024 + 2 * (uint64_t)(uint32_t)count)
    return bc_error(ctx, BC_EINPUT, "%s: error: the header says %d tokens (%llu bytes), the file "
                    "has %zu bytes: truncated or corrupt", t->path, (int)count,
                    1024 + 2 * (unsigned long long)(uint32_t)count, len);
  t->off = 1024;
  return convert(ctx, t, d + 1024, count, 2);
}

// The quoted value after 'key': in the header dict h (NUL-terminated), into v.
static bool dict_str(const char *h, const char *key, char *v, size_t n) {
  const char *p = strstr(h, key);
  if (!p) return false;
  p += strlen(key);
  while (*p == ' ' || *p == ':') p++;
  char q = *p;
  if (q != '\'' && q != '"') return false;
  const char *e = strchr(p + 1, q);
  if (!e || (size_t)(e - p - 1) >= n) return false;
  memcpy(v, p + 1, (size_t)(e - p - 1));
  v[e - p - 1] = '\0';
  return true;
}

// 'shape': (N,) or (N, M) -> d[0..rank) and true when rank == want;
// *rank: the entries of the tuple (-1: none).
static bool dict_shape(const char *h, int want, int64_t *d, int *rank) {
  const char *p = strstr(h, "'shape'");
  *rank = -1;
  if (!p || !(p = strchr(p, '('))) return false;
  const char *e = strchr(p, ')');
  if (!e) return false;
  *rank = 0;
  for (const char *c = p + 1; c < e;) {
    while (c < e && (*c == ' ' || *c == ',')) c++;
    if (c == e) break;
    (*rank)++;
    while (c < e && *c != ',') c++;
  }
  if (*rank != want) return false;
  const char *c = p + 1;
  for (int k = 0; k < want; k++) {
    char *end;
    while (c < e && (*c == ' ' || *c == ',')) c++;
    long long v = strtoll(c, &end, 10);
    while (end < e && *end == ' ') end++;
    if (end == c || v < 0 || (*end != ',' && *end != ')')) return false;
    d[k] = v;
    c = end;
  }
  return true;
}

// want: the rank the caller reads (1: a flat token file; 2: [pairs, L]).
static int read_npy(bc_ctx *ctx, tr_tokens *t, const unsigned char *d, size_t len, int want) {
  if (len < 10 || d[6] < 1 || d[6] > 3)
    return bc_error(ctx, BC_EINPUT, "%s: error: a .npy file of an unknown version or too short",
                    t->path);
  size_t hl = d[6] == 1 ? (size_t)(d[8] | d[9] << 8) : (len >= 12 ? le32(d + 8) : (size_t)-1);
  size_t start = d[6] == 1 ? 10 : 12;
  if (hl > len - start || hl > (1u << 20))
    return bc_error(ctx, BC_EINPUT, "%s: error: the .npy header is longer than the file", t->path);
  char *h = bc_strndup(ctx, (const char *)d + start, hl);
  if (!h) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", t->path);
  char descr[32];
  if (!dict_str(h, "'descr'", descr, sizeof descr))
    return bc_error(ctx, BC_EINPUT, "%s: error: the .npy header has no 'descr'", t->path);
  int size = !strcmp(descr, "<i4") ? 4 : !strcmp(descr, "<u2") ? 2 : 0;
  if (!size)
    return bc_error(ctx, BC_EINPUT, "%s: error: token .npy arrays are int32 ('<i4') or uint16 "
                    "('<u2'), this one is '%s'", t->path, descr);
  const char *f = strstr(h, "'fortran_order'");
  if (f && strstr(f, "True") && (!strstr(f, "False") || strstr(f, "True") < strstr(f, "False")))
    return bc_error(ctx, BC_EINPUT, "%s: error: Fortran-order .npy arrays are not read", t->path);
  int64_t sh[2] = {0, 1};
  int rank;
  if (!dict_shape(h, want, sh, &rank) && want == 1)
    return bc_error(ctx, BC_EINPUT, "%s: error: token files are 1-D arrays; this .npy has %s",
                    t->path, rank < 0 ? "no readable 'shape'" : bc_fmt(ctx, "rank %d", rank));
  if (rank != want || (want == 2 && (sh[0] < 1 || sh[1] < 1)))
    return bc_error(ctx, BC_EINPUT, "%s: error: a sequence-to-sequence graph reads one 2-D .npy "
                    "[pairs, length] per token input (row i of every file is pair i); this one has "
                    "%s", t->path, rank < 0 ? "no readable 'shape'" : rank == 1 ? "rank 1 (a flat "
                    "token file is for one-input graphs)" : rank == 2 ? "an empty axis" :
                    bc_fmt(ctx, "rank %d", rank));
  if ((uint64_t)sh[0] > (uint64_t)1 << 40 || (uint64_t)sh[1] > (uint64_t)1 << 40)
    return bc_error(ctx, BC_EINPUT, "%s: error: the .npy shape is too large", t->path);
  int64_t n = sh[0] * sh[1];
  t->rows = want == 2 ? sh[0] : 1, t->cols = want == 2 ? sh[1] : n;
  size_t data = start + hl;
  if ((uint64_t)(len - data) != (uint64_t)n * (uint64_t)size)
    return bc_error(ctx, BC_EINPUT, "%s: error: the header says %lld tokens (%llu bytes), the file "
                    "holds %zu data bytes: truncated or corrupt", t->path, (long long)n,
                    (unsigned long long)n * (unsigned long long)size, len - data);
  t->off = (int64_t)data;
  return convert(ctx, t, d + data, n, size);
}

static int read_tokens(bc_ctx *ctx, const char *path, tr_tokens *t, int want) {
  memset(t, 0, sizeof *t);
  t->path = path;
  unsigned char *d = NULL;
  size_t len = 0;
  int st = bc_read_file_malloc(ctx, path, TR_MAX_FILE, &d, &len);
  if (st) return st;
  if (len == 0)
    st = bc_error(ctx, BC_EINPUT, "%s: error: the token file is empty", path);
  else if (len >= 6 && !memcmp(d, "\x93NUMPY", 6))
    st = read_npy(ctx, t, d, len, want);
  else if (want == 2)
    st = bc_error(ctx, BC_EINPUT, "%s: error: a sequence-to-sequence graph reads one 2-D .npy "
                  "[pairs, length] per token input; this is not a .npy file (no \\x93NUMPY)", path);
  else if (len >= 4 && le32(d) == 20240520u)
    st = read_bin(ctx, t, d, len);
  else
    st = bc_error(ctx, BC_EINPUT, "%s: error: not a token file: neither .npy (\\x93NUMPY) nor "
                  "llm.c .bin (magic 20240520)", path);
  free(d);
  if (st) tr_tokens_free(t);
  t->path = path;
  return st;
}

int tr_tokens_read(bc_ctx *ctx, const char *path, tr_tokens *t) {
  return read_tokens(ctx, path, t, 1);
}

int tr_pairs_read(bc_ctx *ctx, const char *path, tr_tokens *t) {
  return read_tokens(ctx, path, t, 2);
}

int tr_tokens_check(bc_ctx *ctx, const tr_tokens *t, int64_t V, long T) {
  for (int64_t i = 0; i < t->n; i++)
    if (t->tok[i] < 0 || t->tok[i] >= V)
      return bc_error(ctx, BC_EINPUT, "%s: error: token %lld (byte offset %lld) is %ld, outside "
                      "0..%lld (the graph's vocabulary)", t->path, (long long)i,
                      (long long)(t->off + i * t->size), (long)t->tok[i], (long long)V - 1);
  if (t->n < (int64_t)T + 2)
    return bc_error(ctx, BC_EINPUT, "%s: error: %lld tokens is too short for --seq %ld (a window "
                    "takes T + 1 tokens and the file needs at least T + 2)", t->path,
                    (long long)t->n, T);
  return BC_OK;
}

int64_t tr_window_seq(int64_t k, long B, long r, long T, int64_t n) {
  __extension__ typedef unsigned __int128 u128;  // k*B*T may pass 2^64 on long runs
  u128 v = ((u128)(uint64_t)k * (uint64_t)B + (uint64_t)r) * (uint64_t)T;
  return (int64_t)(v % (uint64_t)(n - T - 1));
}

int64_t tr_window_rand(bcrt_rng *rng, long T, int64_t n) {
  return (int64_t)(bcrt_rng_next(rng) % (uint64_t)(n - T - 1));
}

void tr_fill(const tr_tokens *t, const int64_t *starts, long B, long T, int32_t *ids,
             int32_t *targets) {
  for (long r = 0; r < B; r++) {
    const int32_t *s = t->tok + starts[r];
    memcpy(ids + r * T, s, (size_t)T * sizeof *ids);
    if (targets) memcpy(targets + r * T, s + 1, (size_t)T * sizeof *targets);
  }
}
