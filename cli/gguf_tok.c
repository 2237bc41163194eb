// gguf_tok.c — the tokenizer a GGUF file carries (issue 25), for generate,
// tokenize and detokenize (cli.h: cli_gguf_tokenizer, cli_tokenizer_load).
// It needs only the runtime's GGUF reader (blockc_rt.h), the tokenizer
// (blockc_tok.h) and bcF_is_gguf, so tests/fuzz/fuzz_gguf.c links it alone.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "blockc_rt.h"
#include "blockc_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// llama.cpp keeps the model's tokenizer in the GGUF file's metadata
// (tokenizer.ggml.model, .pre, .tokens, .merges, .scores, .token_type, the
// bos / eos / unknown / padding ids, add_bos_token, add_eos_token,
// add_space_prefix).  Here the keys are read and checked for their types
// and counts (everything the reader hands out lies inside the file, so every
// allocation is bounded by its size); blockc_tokenizer_load_ggml builds the
// tokenizer from them.

typedef struct gg_strs {
  char **s;
  size_t n;
} gg_strs;

static int gg_take_str(void *ud, unsigned long long i, const char *s, unsigned long len) {
  gg_strs *a = ud;
  if (strlen(s) != len) return -2;  // a NUL inside
  if (!(a->s[i] = malloc(len + 1))) return -1;
  memcpy(a->s[i], s, len + 1);
  a->n = (size_t)i + 1;
  return 0;
}

static void gg_strs_free(gg_strs *a) {
  for (size_t i = 0; i < a->n; i++) free(a->s[i]);
  free(a->s);
  *a = (gg_strs){0};
}

// A value type for messages: "uint32", "string", "an array of float32", ...
static const char *gg_kind(const bcrt_gguf_kv *kv) {
  static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                      "bool", "string", "array", "uint64", "int64", "float64"};
  static const char *const arrays[] = {"an array of uint8", "an array of int8", "an array of uint16",
                                       "an array of int16", "an array of uint32", "an array of int32",
                                       "an array of float32", "an array of bool", "an array of strings",
                                       "an array", "an array of uint64", "an array of int64",
                                       "an array of float64"};
  int t = kv->type == BCRT_GGUF_ARRAY ? kv->elem_type : kv->type;
  if (t < 0 || t > 12) return "?";
  return kv->type == BCRT_GGUF_ARRAY ? arrays[t] : names[t];
}

// The string array key (need: n elements, 0 = any) into a; 1 when absent.
static int gg_strings(const bcrt_gguf_file *f, const char *path, const char *key, gg_strs *a, char *err,
                      size_t errn) {
  const bcrt_gguf_kv *kv = bcrt_gguf_get(f, key);
  if (!kv) return 1;
  if (kv->type != BCRT_GGUF_ARRAY || kv->elem_type != BCRT_GGUF_STRING) {
    snprintf(err, errn, "%s: %s: must be an array of strings, not %s", path, key, gg_kind(kv));
    return -1;
  }
  if (!(a->s = calloc(kv->count ? (size_t)kv->count : 1, sizeof *a->s))) {
    snprintf(err, errn, "%s: out of memory", path);
    return -1;
  }
  int rc = bcrt_gguf_array_strings(f, kv, gg_take_str, a);
  if (rc == -2) snprintf(err, errn, "%s: %s[%zu]: a NUL byte inside", path, key, a->n);
  else if (rc) snprintf(err, errn, "%s: %s: %s", path, key, rc == -1 ? "out of memory" : "cannot be read");
  return rc ? -1 : 0;
}

// The numeric array key of n elements into v (float or int32); 1 when absent.
static int gg_numbers(const bcrt_gguf_file *f, const char *path, const char *key, size_t n, float *fv,
                      int32_t *iv, char *err, size_t errn) {
  const bcrt_gguf_kv *kv = bcrt_gguf_get(f, key);
  if (!kv) return 1;
  int isint = kv->elem_type != BCRT_GGUF_FLOAT32 && kv->elem_type != BCRT_GGUF_FLOAT64;
  if (kv->type != BCRT_GGUF_ARRAY || kv->elem_type == BCRT_GGUF_STRING || kv->elem_type == BCRT_GGUF_BOOL ||
      (iv && !isint)) {
    snprintf(err, errn, "%s: %s: must be an array of %s, not %s", path, key, iv ? "integers" : "numbers",
             gg_kind(kv));
    return -1;
  }
  if (kv->count != n) {
    snprintf(err, errn, "%s: %s: %llu entries for %zu tokens", path, key, kv->count, n);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    double d = 0;
    if (bcrt_gguf_array_num(f, kv, i, &d)) {
      snprintf(err, errn, "%s: %s[%zu]: cannot be read", path, key, i);
      return -1;
    }
    if (fv) fv[i] = (float)d;
    else iv[i] = d < -1 || d > 1000 ? -1 : (int32_t)d;  // out of 1..6: refused by the loader
  }
  return 0;
}

// An optional integer id (-1 absent) or boolean (-1 absent) key.
static int gg_scalar(const bcrt_gguf_file *f, const char *path, const char *key, int boolean, int64_t *out,
                     char *err, size_t errn) {
  const bcrt_gguf_kv *kv = bcrt_gguf_get(f, key);
  *out = -1;
  if (!kv) return 0;
  if (boolean ? kv->type != BCRT_GGUF_BOOL : !kv->is_int || kv->type == BCRT_GGUF_BOOL) {
    snprintf(err, errn, "%s: %s: must be %s, not %s", path, key, boolean ? "a bool" : "an integer",
             gg_kind(kv));
    return -1;
  }
  if (!boolean && (kv->neg || kv->u > 16777215u)) {
    snprintf(err, errn, "%s: %s: %s%llu is not a token id", path, key, kv->neg ? "-" : "",
             kv->neg ? (unsigned long long)-kv->i : kv->u);
    return -1;
  }
  *out = (int64_t)kv->u;
  return 0;
}

blockc_tokenizer *cli_gguf_tokenizer(const char *path, char *err, size_t errn, char *desc, size_t descn,
                                     int *none) {
  bcrt_gguf_file *f = NULL;
  bcrt_error e = {0};
  err[0] = '\0';
  if (bcrt_gguf_open(path, &f, &e)) {
    snprintf(err, errn, "%s: %s", path, e.msg);
    return NULL;
  }
  blockc_tokenizer *t = NULL;
  blockc_tokenizer_ggml v = {0};
  gg_strs tokens = {0}, merges = {0};
  float *scores = NULL;
  int32_t *types = NULL;
  const bcrt_gguf_kv *model = bcrt_gguf_get(f, "tokenizer.ggml.model"), *pre = bcrt_gguf_get(f, "tokenizer.ggml.pre");
  int rc = 0;
  // "none": a file that says it has no vocabulary (llama.cpp's LLAMA_VOCAB_TYPE_NONE;
  // blockc writes it when given no tokenizer)
  bool nonevocab = model && model->type == BCRT_GGUF_STRING && model->str && !strcmp(model->str, "none");
  if (none) *none = !model || nonevocab;
  if (!model || nonevocab) {
    snprintf(err, errn, "%s: no tokenizer in the file (%s): pass --tokenizer FILE", path,
             model ? "tokenizer.ggml.model is \"none\"" : "no tokenizer.ggml.model");
    rc = -1;
  } else if (model->type != BCRT_GGUF_STRING || (pre && pre->type != BCRT_GGUF_STRING)) {
    snprintf(err, errn, "%s: tokenizer.ggml.%s: must be a string, not %s", path,
             model->type != BCRT_GGUF_STRING ? "model" : "pre", gg_kind(model->type != BCRT_GGUF_STRING ? model : pre));
    rc = -1;
  }
  if (!rc) {
    v.model = model->str, v.pre = pre ? pre->str : NULL;
    rc = gg_strings(f, path, "tokenizer.ggml.tokens", &tokens, err, errn);
    if (rc == 1) snprintf(err, errn, "%s: tokenizer.ggml.tokens: missing", path);
  }
  if (!rc) {
    v.tokens = (const char *const *)tokens.s, v.n_tokens = tokens.n;
    int m = gg_strings(f, path, "tokenizer.ggml.merges", &merges, err, errn);
    rc = m < 0 ? -1 : 0;
    if (!m) v.merges = (const char *const *)merges.s, v.n_merges = merges.n;
  }
  if (!rc) {
    scores = malloc((tokens.n ? tokens.n : 1) * sizeof *scores);
    types = malloc((tokens.n ? tokens.n : 1) * sizeof *types);
  }
  if (!rc && (!scores || !types)) {
    snprintf(err, errn, "%s: out of memory", path);
    rc = -1;
  }
  if (!rc) {
    int s = gg_numbers(f, path, "tokenizer.ggml.scores", tokens.n, scores, NULL, err, errn);
    int y = s < 0 ? 0 : gg_numbers(f, path, "tokenizer.ggml.token_type", tokens.n, NULL, types, err, errn);
    rc = s < 0 || y < 0 ? -1 : 0;
    v.scores = s ? NULL : scores, v.token_type = y ? NULL : types;
  }
  static const char *const ids[] = {"bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id",
                                    "add_bos_token", "add_eos_token", "add_space_prefix"};
  int64_t val[7];
  for (int k = 0; k < 7 && !rc; k++) {
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s", ids[k]);
    rc = gg_scalar(f, path, key, k >= 4, &val[k], err, errn);
  }
  if (!rc) {
    v.bos = val[0], v.eos = val[1], v.unk = val[2], v.pad = val[3];
    v.add_bos = (int)val[4], v.add_eos = (int)val[5], v.add_space_prefix = (int)val[6];
    t = blockc_tokenizer_load_ggml(&v, path, err, errn);
  }
  if (t && desc)
    snprintf(desc, descn, "%s %s, %zu tokens", v.model, strcmp(v.model, "llama") ? "BPE" : "SentencePiece",
             v.n_tokens);
  gg_strs_free(&tokens);
  gg_strs_free(&merges);
  free(scores);
  free(types);
  bcrt_gguf_close(f);
  return t;
}

blockc_tokenizer *cli_tokenizer_load(const char *path, char *err, size_t errn) {
  return bcF_is_gguf(path) ? cli_gguf_tokenizer(path, err, errn, NULL, 0, NULL) : blockc_tokenizer_load(path, err, errn);
}
