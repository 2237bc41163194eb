// tokenize.c — `blockc tokenize` and `blockc detokenize`: text to token ids
// and back with the vendorable tokenizer (runtime/blockc_tok.h), from a
// Hugging Face tokenizer.json (--tokenizer) or GPT-2's vocab.json +
// merges.txt (--vocab, --merges), or the tokenizer a GGUF file carries
// (--tokenizer model.gguf: gguf_tok.c).
//
//   blockc tokenize --tokenizer tokenizer.json "Hello world"     -> 15496 995
//   blockc detokenize --tokenizer tokenizer.json 15496 995       -> Hello world
//
// Errors print "blockc: error: ..." and return BC_EINPUT (a bad tokenizer
// file, text file or id) or BC_EUSAGE (bad arguments).
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "blockc_tok.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

// The tokenizer of --tokenizer, or of --vocab + --merges.
static blockc_tokenizer *load_tokenizer(bc_ctx *ctx, const cli_opts *o) {
  char err[1024];
  if (!!o->tokenizer == !!o->vocab) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: %s: give --tokenizer FILE or --vocab FILE --merges FILE "
             "(one of them)", o->command);
    return NULL;
  }
  blockc_tokenizer *t = o->tokenizer ? cli_tokenizer_load(o->tokenizer, err, sizeof err)
                                     : blockc_tokenizer_load_bpe(o->vocab, o->merges, err, sizeof err);
  if (!t) bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  return t;
}

// The whole file f (bytes as they are).
static char *read_text(bc_ctx *ctx, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    bc_error(ctx, BC_EIO, "blockc: error: %s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap);
  for (size_t k; p && (k = fread(p + n, 1, cap - n, f)) > 0;) {
    n += k;
    if (n == cap) {
      char *q = cap < ((size_t)1 << 40) ? realloc(p, cap * 2) : NULL;
      if (!q) { free(p); p = NULL; break; }
      p = q;
      cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!p || bad) {
    free(p);
    bc_error(ctx, BC_EIO, "blockc: error: %s: %s", path, bad ? "read error" : "out of memory");
    return NULL;
  }
  *len = n;
  return p;
}

int cli_tokenize(bc_ctx *ctx, const cli_opts *o) {
  if (!!o->text_file == (o->nargs == 1) || o->nargs > 1)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: tokenize takes one TEXT argument or --file FILE "
                    "(got %d argument%s%s)", o->nargs, o->nargs == 1 ? "" : "s",
                    o->text_file ? " and --file" : "");
  blockc_tokenizer *t = load_tokenizer(ctx, o);
  if (!t) return o->tokenizer || o->vocab ? BC_EINPUT : BC_EUSAGE;
  size_t len = 0;
  char *owned = NULL;
  const char *text = o->nargs ? o->args[0] : NULL;
  if (o->text_file && !(text = owned = read_text(ctx, o->text_file, &len))) {
    blockc_tokenizer_free(t);
    return BC_EIO;
  }
  if (!o->text_file) len = strlen(text);
  int32_t *ids = NULL;
  size_t n = 0;
  char err[1024];
  int st = BC_OK;
  if (blockc_tokenizer_encode(t, text, len, o->add_special, &ids, &n, err, sizeof err))
    st = bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  for (size_t i = 0; !st && i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
  if (!st) putchar('\n');
  if (!st && fflush(stdout)) st = bc_error(ctx, BC_EIO, "blockc: error: cannot write to stdout");
  free(ids);
  free(owned);
  blockc_tokenizer_free(t);
  return st;
}

// The ids of the arguments ("1 2 3", "1,2,3" or one per argument).
static int parse_ids(bc_ctx *ctx, const cli_opts *o, int32_t **ids, size_t *n) {
  size_t cap = 16;
  *n = 0;
  *ids = malloc(cap * sizeof(int32_t));
  if (!*ids) return bc_error(ctx, BC_ENOMEM, "blockc: error: out of memory");
  for (int a = 0; a < o->nargs; a++) {
    const char *p = o->args[a];
    for (;;) {
      while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
      if (!*p) break;
      char *end;
      errno = 0;
      long v = strtol(p, &end, 10);
      if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !strchr(" ,\t\n", *end)))
        return bc_error(ctx, BC_EUSAGE, "blockc: error: detokenize: '%s' is not a list of token ids "
                        "(non-negative integers separated by spaces or commas)", o->args[a]);
      if (*n == cap) {
        int32_t *q = realloc(*ids, cap * 2 * sizeof(int32_t));
        if (!q) return bc_error(ctx, BC_ENOMEM, "blockc: error: out of memory");
        *ids = q;
        cap *= 2;
      }
      (*ids)[(*n)++] = (int32_t)v;
      p = end;
    }
  }
  return BC_OK;
}

int cli_detokenize(bc_ctx *ctx, const cli_opts *o) {
  int32_t *ids = NULL;
  size_t n = 0;
  int st = parse_ids(ctx, o, &ids, &n);
  if (st) {
    free(ids);
    return st;
  }
  blockc_tokenizer *t = load_tokenizer(ctx, o);
  if (!t) {
    free(ids);
    return o->tokenizer || o->vocab ? BC_EINPUT : BC_EUSAGE;
  }
  char *text = NULL, err[1024];
  size_t len = 0;
  if (blockc_tokenizer_decode(t, ids, n, 0, &text, &len, err, sizeof err))
    st = bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  if (!st && (fwrite(text, 1, len, stdout) != len || fflush(stdout)))
    st = bc_error(ctx, BC_EIO, "blockc: error: cannot write to stdout");
  free(text);
  free(ids);
  blockc_tokenizer_free(t);
  return st;
}
