// train_pairs.c — sequence-to-sequence data for `blockc train` (train.h):
// which token input is the decoder's, which lengths input masks which
// token input, the 2-D pair files and the micro-batches cut from them.
//
// The pairing (docs/training.md, "Sequence-to-sequence graphs"): one 2-D
// .npy [pairs, L] per token input (`--data NAME=FILE`), row i of every file
// is pair i, right-padded with --pad-id (default 0); a row's length is the
// count of ids before its first pad.  The target input — the token input
// whose [B, T] are the first two axes of `logits` — is fed row[:-1] and
// the `targets` input row[1:] (teacher forcing), with -100 (ignore_index)
// past the row's end, so the loss is torch's cross_entropy mean over the
// real target positions.  Every other token input is fed its row.  A
// lengths input is fed the lengths of the token input whose stream it
// masks (length - 1 for the target).  A batch row at or past a row's
// length holds id 0 (masked by the lengths).  Run-time sequence dims are
// set to the file's width (minus one for the target; at most the bound),
// a fixed dim feeds its own value.
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <stdlib.h>
#include <string.h>

#define TR_IGNORE (-100)  // bcX_with_lm_loss's CrossEntropy ignore_index

void tr_pairs_free(tr_pairs *p) {
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < 2; k++) tr_tokens_free(&p->s[i].f[k]), free(p->s[i].len[k]);
  memset(p, 0, sizeof *p);
}

// The sequence axis of a float value: [B, T, D] -> 1, [T, D] -> 0.
static int seq_axis(const bc_shape *s) { return s->rank == 3 ? 1 : 0; }

static bool same_axis(const bc_shape *a, int ia, const bc_shape *b, int ib) {
  return a->d[ia] == b->d[ib] && a->sym[ia] == b->sym[ib];
}

static bool is_token_ids(const bc_graph *g, int v) {
  return bcI_is_tokens(g, v) && strcmp(g->vals[v].name, "targets");
}

int tr_pairs_target(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_shape *ref,
                    const char *what, const char **name) {
  int found = -1, n = 0;
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    const bc_shape *s = &g->vals[v].shape;
    if (!is_token_ids(g, v) || ref->rank < 2 || s->rank != 2 || !same_axis(s, 0, ref, 0) ||
        !same_axis(s, 1, ref, 1))
      continue;
    n++;
    if (found < 0 || !strcmp(g->vals[v].name, "tgt")) found = i;
  }
  if (n == 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: no token input has the [B, T] of %s "
                    "(the decoder's input, trained by teacher forcing)", path, what);
  if (n > 1 && strcmp(g->vals[g->inputs[found]].name, "tgt"))
    return bc_error(ctx, BC_EINPUT, "%s: error: %d token inputs have the [B, T] of %s: "
                    "name the decoder's input `tgt` or give the inputs distinct sequence dims", path,
                    n, what);
  *name = g->vals[g->inputs[found]].name;
  return BC_OK;
}

// mask[v]: the token inputs (bit i: p->s[i]) value v is computed from.
static uint32_t *ancestry(bc_ctx *ctx, const bc_graph *g, const tr_pairs *p) {
  uint32_t *m = calloc((size_t)g->nvals + 1, sizeof *m);
  if (!m) return bc_error(ctx, BC_ENOMEM, "error: out of memory"), NULL;
  for (int i = 0; i < p->n; i++) m[g->inputs[p->s[i].input]] |= 1u << i;
  for (int k = 0; k < g->nnodes; k++) {
    const bc_node *n = &g->nodes[k];
    uint32_t a = 0;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] >= 0) a |= m[n->in[j]];
    for (int j = 0; j < n->nout; j++)
      if (n->out[j] >= 0) m[n->out[j]] |= a;
  }
  return m;
}

// The token inputs lengths input L can mask: for every Attention reading
// it, those the masked stream (x for lengths=, kv for kv_lengths=) is
// computed from whose sequence axis is the stream's.
static uint32_t owners(const bc_graph *g, const tr_pairs *p, const uint32_t *m, int L) {
  uint32_t c = ~0u;
  for (int k = 0; k < g->nnodes; k++) {
    const bc_node *n = &g->nodes[k];
    if (n->op != BC_OP_ATTENTION) continue;
    for (int slot = 2; slot <= 3 && slot < n->nin; slot++) {
      if (n->in[slot] != L || n->in[slot - 2] < 0) continue;
      int sv = n->in[slot - 2];
      const bc_shape *ss = &g->vals[sv].shape;
      uint32_t here = 0;
      for (int i = 0; i < p->n; i++)
        if ((m[sv] >> i & 1) &&
            same_axis(&g->vals[g->inputs[p->s[i].input]].shape, 1, ss, seq_axis(ss)))
          here |= 1u << i;
      c &= here;
    }
  }
  return c == ~0u ? 0 : c;
}

static int add_seq(bc_ctx *ctx, const char *path, const bc_graph *g, int i, const char *target,
                   tr_pairs *p) {
  int v = g->inputs[i];
  if (p->n == TR_MAX_SEQ)
    return bc_error(ctx, BC_EINPUT, "%s: error: more than %d token inputs", path, TR_MAX_SEQ);
  tr_seq *s = &p->s[p->n++];
  const bc_shape *sh = &g->vals[v].shape;
  s->name = g->vals[v].name, s->input = i, s->len_input = -1;
  s->target = !strcmp(s->name, target);
  s->dim = sh->sym[1] > 0 ? sh->sym[1] - 1 : -1;
  s->rt = s->dim >= 0 ? g->dims[s->dim].rt : -1;
  s->bound = (long)sh->d[1];
  return BC_OK;
}

int tr_pairs_plan(bc_ctx *ctx, const char *path, const bc_graph *g, const char *target,
                  tr_pairs *p) {
  memset(p, 0, sizeof *p);
  p->targets_input = -1;
  int st = BC_OK;
  for (int i = 0; !st && i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (bcI_is_tokens(g, v) && !strcmp(g->vals[v].name, "targets")) p->targets_input = i;
    else if (bcI_is_tokens(g, v)) st = add_seq(ctx, path, g, i, target, p);
  }
  if (st) return st;
  if (p->targets_input < 0)
    return bc_error(ctx, BC_EINTERNAL, "internal error: the trained graph has no `targets`");
  uint32_t *m = ancestry(ctx, g, p);
  if (!m) return BC_ENOMEM;
  for (int i = 0; !st && i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (!bcI_is_lengths(g, v)) continue;
    uint32_t c = owners(g, p, m, v);
    int owner = -1, n = 0;
    for (int k = 0; k < p->n; k++)
      if (c >> k & 1) owner = k, n++;
    if (n != 1)
      st = bc_error(ctx, BC_EINPUT, "%s: error: cannot tell which token input the lengths input "
                    "'%s' masks: %s (train feeds it the row lengths of the one token input that "
                    "every stream it masks is computed from, along that input's sequence dim)",
                    path, g->vals[v].name,
                    n ? "several token inputs with that sequence dim reach the streams it masks"
                      : "the streams it masks come from different token inputs, or none with "
                        "their sequence dim");
    else if (p->s[owner].len_input >= 0)
      st = bc_error(ctx, BC_EINPUT, "%s: error: the lengths inputs '%s' and '%s' both mask the "
                    "token input '%s': train feeds one lengths input per token input", path,
                    g->vals[g->inputs[p->s[owner].len_input]].name, g->vals[v].name,
                    p->s[owner].name);
    else
      p->s[owner].len_input = i;
  }
  free(m);
  return st;
}

int tr_pairs_rows(bc_ctx *ctx, const tr_tokens *f, int32_t pad, int64_t V, bool target, long width,
                  const char *dim, int32_t *len) {
  for (int64_t r = 0; r < f->rows; r++) {
    const int32_t *row = f->tok + r * f->cols;
    int64_t L = 0;
    while (L < f->cols && row[L] != pad) L++;
    for (int64_t j = 0; j < f->cols; j++) {
      int64_t at = f->off + (r * f->cols + j) * f->size;
      if (j < L && (row[j] < 0 || row[j] >= V))
        return bc_error(ctx, BC_EINPUT, "%s: error: row %lld, position %lld (byte offset %lld): "
                        "id %ld is outside 0..%lld (the graph's vocabulary) and is not the pad id "
                        "%ld", f->path, (long long)r, (long long)j, (long long)at, (long)row[j],
                        (long long)V - 1, (long)pad);
      if (j > L && row[j] != pad)
        return bc_error(ctx, BC_EINPUT, "%s: error: row %lld, position %lld: id %ld after the "
                        "row's first pad id %ld (position %lld): rows are right-padded (--pad-id)",
                        f->path, (long long)r, (long long)j, (long)row[j], (long)pad, (long long)L);
    }
    if (L == 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: row %lld is all padding (pad id %ld): every pair "
                      "needs at least one token in each file", f->path, (long long)r, (long)pad);
    if (target && L < 2)
      return bc_error(ctx, BC_EINPUT, "%s: error: row %lld has 1 token: the target input needs at "
                      "least 2 (teacher forcing: inputs row[:-1], targets row[1:])", f->path,
                      (long long)r);
    if (L - target > width)
      return bc_error(ctx, BC_EINPUT, "%s: error: row %lld has %lld tokens%s, more than dim %s "
                      "allows (%ld)", f->path, (long long)r, (long long)L,
                      target ? bc_fmt(ctx, " (%lld inputs)", (long long)L - 1) : "", dim, width);
    len[r] = (int32_t)L;
  }
  return BC_OK;
}

static const char *names(bc_ctx *ctx, const tr_pairs *p) {
  const char *s = "";
  for (int i = 0; i < p->n; i++) s = bc_fmt(ctx, "%s%s%s", s, i ? ", " : "", p->s[i].name);
  return s;
}

// The file of each token input from files (NAME=FILE each), into *pick.
static int match_files(bc_ctx *ctx, const char *path, const tr_pairs *p, const cli_file *files,
                       int nfiles, const char *flag, const cli_file **pick) {
  for (int j = 0; j < nfiles; j++) {
    int i = 0;
    while (i < p->n && (!files[j].name || strcmp(files[j].name, p->s[i].name))) i++;
    if (!files[j].name)
      return bc_error(ctx, BC_EINPUT, "%s: error: %s %s: a sequence-to-sequence graph takes %s "
                      "NAME=FILE, one per token input (%s)", path, flag, files[j].arg, flag,
                      names(ctx, p));
    if (i == p->n)
      return bc_error(ctx, BC_EINPUT, "%s: error: %s %s: '%s' is not a token input of the graph "
                      "(its token inputs: %s)", path, flag, files[j].arg, files[j].name,
                      names(ctx, p));
    pick[i] = &files[j];
  }
  for (int i = 0; i < p->n; i++)
    if (!pick[i])
      return bc_error(ctx, BC_EINPUT, "%s: error: no %s file for the token input '%s' (give %s "
                      "%s=FILE)", path, flag, p->s[i].name, flag, p->s[i].name);
  return BC_OK;
}

// The width fed for each token input of set k; inputs sharing a run-time dim
// take the widest.
static void widths(tr_pairs *p, int k) {
  for (int i = 0; i < p->n; i++) {
    tr_seq *s = &p->s[i];
    long w = s->rt < 0 ? s->bound : (long)(s->f[k].cols - s->target);
    s->width[k] = w > s->bound ? s->bound : w < 1 ? 1 : w;
  }
  for (int i = 0; i < p->n; i++)
    for (int j = 0; j < p->n; j++)
      if (p->s[i].rt >= 0 && p->s[i].rt == p->s[j].rt && p->s[j].width[k] > p->s[i].width[k])
        p->s[i].width[k] = p->s[j].width[k];
}

int tr_pairs_load(bc_ctx *ctx, const char *path, const bc_graph *g, tr_pairs *p, int k,
                  const cli_file *files, int nfiles, const char *flag) {
  const cli_file *pick[TR_MAX_SEQ] = {0};
  int st = match_files(ctx, path, p, files, nfiles, flag, pick);
  for (int i = 0; !st && i < p->n; i++) {
    st = tr_pairs_read(ctx, pick[i]->path, &p->s[i].f[k]);
    if (!st && i && p->s[i].f[k].rows != p->s[0].f[k].rows)
      st = bc_error(ctx, BC_EINPUT, "%s: error: %lld pairs (rows), but %s (%s) has %lld: row i of "
                    "every file is pair i", pick[i]->path, (long long)p->s[i].f[k].rows,
                    pick[0]->path, p->s[0].name, (long long)p->s[0].f[k].rows);
  }
  if (st) return st;
  widths(p, k);
  p->rows[k] = p->s[0].f[k].rows;
  for (int i = 0; !st && i < p->n; i++) {
    tr_seq *s = &p->s[i];
    if (!(s->len[k] = malloc((size_t)p->rows[k] * sizeof *s->len[k])))
      return bc_error(ctx, BC_ENOMEM, "error: out of memory");
    const char *dim = s->dim >= 0 ? g->dims[s->dim].name : bc_fmt(ctx, "%ld", s->bound);
    st = tr_pairs_rows(ctx, &s->f[k], p->pad, bcI_tokens_vocab(g, g->inputs[s->input]), s->target,
                       s->width[k], dim ? dim : "?", s->len[k]);
  }
  return st;
}

int64_t tr_pair_seq(int64_t k, long B, long r, int64_t P) {
  __extension__ typedef unsigned __int128 u128;
  return (int64_t)(((u128)(uint64_t)k * (uint64_t)B + (uint64_t)r) % (uint64_t)P);
}

int64_t tr_pair_rand(bcrt_rng *rng, int64_t P) {
  return (int64_t)(bcrt_rng_next(rng) % (uint64_t)P);
}

void tr_pairs_fill(const tr_pairs *p, int k, const int64_t *pairs, long B, void *const *io,
                   long *rt) {
  for (int i = 0; i < p->n; i++) {
    const tr_seq *s = &p->s[i];
    long W = s->width[k];
    int32_t *ids = io[s->input], *tg = s->target ? io[p->targets_input] : NULL;
    int32_t *lens = s->len_input >= 0 ? io[s->len_input] : NULL;
    for (long r = 0; r < B; r++) {
      const int32_t *row = s->f[k].tok + pairs[r] * s->f[k].cols;
      long L = (long)s->len[k][pairs[r]] - s->target;
      for (long j = 0; j < W; j++) {
        ids[r * W + j] = j < L ? row[j] : 0;
        if (tg) tg[r * W + j] = j < L ? row[j + 1] : TR_IGNORE;
      }
      if (lens) lens[r] = (int32_t)L;
    }
    if (s->rt >= 0) rt[s->rt] = W;
  }
}
