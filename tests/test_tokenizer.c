// test_tokenizer.c — runtime/blockc_tok.c on the hand-written fixtures of
// tests/data/tok/: merge order, unknown tokens, subword affixes, byte fallback, added and
// special tokens, Metaspace's prepend schemes, Split's behaviors, ByteLevel
// with NFKC, streaming decode of characters split across tokens, empty and
// very long inputs, invalid UTF-8, every malformed-file message and the
// unsupported features named, and the two CLI commands.  The expected ids
// and texts are the Hugging Face `tokenizers` library's answers on the same
// files (tools/tok_fixture_ref.mjs prints them).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "blockc_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define D "tests/data/tok/"

static blockc_tokenizer *load(const char *file) {
  char err[1024] = "";
  blockc_tokenizer *t = blockc_tokenizer_load(file, err, sizeof err);
  if (!t) fail_msg("%s: %s", file, err);
  return t;
}

// The fixture with the first occurrence of `from` replaced by `to` (variants).
static blockc_tokenizer *load_edit(const char *file, const char *from, const char *to, char *err, size_t errn) {
  size_t n;
  char *s = tu_slurp(file, &n);
  assert_non_null(s);
  char *at = strstr(s, from);
  assert_non_null(at);
  size_t fl = strlen(from), tl = strlen(to);
  char *e = malloc(n - fl + tl + 1);
  memcpy(e, s, (size_t)(at - s));
  memcpy(e + (at - s), to, tl);
  memcpy(e + (at - s) + tl, at + fl, n - (size_t)(at - s) - fl + 1);
  blockc_tokenizer *t = blockc_tokenizer_load_mem(e, strlen(e), "t.json", err, errn);
  free(e);
  free(s);
  return t;
}

// encode(text) == want (n ids; want_n < 0 ends at -1 in want).
static void expect_ids_sp(const blockc_tokenizer *t, const char *text, size_t len, int add_special,
                          const int32_t *want, size_t nw) {
  int32_t *ids = NULL;
  size_t n = 99;
  char err[512] = "";
  if (blockc_tokenizer_encode(t, text, len, add_special, &ids, &n, err, sizeof err)) fail_msg("encode: %s", err);
  assert_non_null(ids);
  int same = n == nw && !memcmp(ids, want, n * sizeof(int32_t));
  if (!same) {
    fprintf(stderr, "encode(\"%s\"): got", text);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, ", want");
    for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
    fputc('\n', stderr);
  }
  free(ids);
  assert_true(same);
}
#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define EXPECT(t, text, ...) expect_ids_sp(t, text, strlen(text), 0, IDS(__VA_ARGS__))
#define EXPECT_SP(t, text, ...) expect_ids_sp(t, text, strlen(text), 1, IDS(__VA_ARGS__))

static void expect_decode(const blockc_tokenizer *t, const int32_t *ids, size_t n, int skip, const char *want) {
  char *text = NULL, err[512] = "";
  size_t len = 0;
  if (blockc_tokenizer_decode(t, ids, n, skip, &text, &len, err, sizeof err)) fail_msg("decode: %s", err);
  assert_int_equal(len, strlen(want));
  assert_string_equal(text, want);
  free(text);
}
#define DECODE(t, skip, want, ...) expect_decode(t, IDS(__VA_ARGS__), skip, want)

static void test_merges_order(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "merges.json");
  EXPECT(t, "abc", 5);      // "b c" (rank 0) first, then "a bc"
  EXPECT(t, "ab", 3);
  EXPECT(t, "bca", 4, 0);
  EXPECT(t, "a b  c", 0, 1, 2);  // Split " " Removed
  DECODE(t, 0, "a b c", 0, 1, 2); // no decoder: joined with spaces
  assert_int_equal(blockc_tokenizer_vocab_size(t), 9);
  assert_int_equal(blockc_tokenizer_token_to_id(t, "abc"), 5);
  assert_int_equal(blockc_tokenizer_token_to_id(t, "[X]"), 8);
  assert_int_equal(blockc_tokenizer_token_to_id(t, "zz"), -1);
  assert_string_equal(blockc_tokenizer_id_to_token(t, 4), "bc");
  assert_null(blockc_tokenizer_id_to_token(t, 9));
  assert_null(blockc_tokenizer_id_to_token(t, -1));
  blockc_tokenizer_free(t);
}

static void test_unknown_tokens(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "merges.json");
  EXPECT(t, "abd", 3, 6);
  EXPECT(t, "xax", 7, 0, 7);     // one <unk> per run (fuse_unk)
  EXPECT(t, "xyzzy", 7);
  DECODE(t, 0, "<unk> a <unk>", 7, 0, 7);
  DECODE(t, 1, "a", 7, 0, 7);    // <unk> is special: skipped
  blockc_tokenizer_free(t);
  char err[512];
  t = load_edit(D "merges.json", "\"fuse_unk\": true", "\"fuse_unk\": false", err, sizeof err);
  assert_non_null(t);
  EXPECT(t, "xyz", 7, 7, 7);
  blockc_tokenizer_free(t);
}

// continuing_subword_prefix "##" and end_of_word_suffix "</w>" (a merge
// drops the prefix of its right side).
static void test_affixes(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "affixes.json");
  EXPECT(t, "a", 4);
  EXPECT(t, "ab", 8);
  EXPECT(t, "abc", 11);
  EXPECT(t, "abb", 7, 5);
  EXPECT(t, "ba", 9, 0);
  EXPECT(t, "a b  abc", 4, 10, 11);
  EXPECT(t, "axb", 1, 0, 5);
  blockc_tokenizer_free(t);
}

static void test_byte_fallback(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "sp.json");
  EXPECT(t, "hi", 7);
  EXPECT(t, "hi \xc3\xa9", 7, 3, 8, 9);       // é as <0xC3> <0xA9>
  EXPECT(t, "hi!", 7, 13);
  EXPECT(t, " hi", 3, 7);
  EXPECT(t, "\xe6\x97\xa5", 3, 10, 11, 12);   // 日
  EXPECT(t, "x", 3, 0);                       // no byte token for 'x': <unk>
  DECODE(t, 0, "hi \xc3\xa9", 7, 3, 8, 9);
  DECODE(t, 0, "\xe6\x97\xa5", 3, 10, 11, 12);
  DECODE(t, 0, "\xef\xbf\xbd\xef\xbf\xbd", 10, 11);  // an incomplete character: one U+FFFD per byte
  DECODE(t, 0, "<unk>", 3, 0);
  blockc_tokenizer_free(t);
}

static void test_added_and_special(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "sp.json");
  EXPECT(t, "<s>hi", 1, 7);                // split out first; the rest is normalized on its own
  EXPECT(t, "h</s>i", 6, 2, 3, 5);
  EXPECT_SP(t, "hi", 1, 7);                // the template's <s>
  EXPECT_SP(t, "<s>hi", 1, 1, 7);
  DECODE(t, 0, "<s> hi", 1, 7);
  DECODE(t, 1, "hi", 1, 1, 7);
  DECODE(t, 1, "h i", 1, 6, 2, 3, 5);
  assert_int_equal(blockc_tokenizer_bos_id(t), 1);
  assert_int_equal(blockc_tokenizer_eos_id(t), 2);
  assert_true(blockc_tokenizer_is_special(t, 1));
  assert_false(blockc_tokenizer_is_special(t, 7));
  blockc_tokenizer_free(t);
  t = load(D "merges.json");               // a non-special added token
  EXPECT(t, "[X]abc[X]", 8, 5, 8);
  DECODE(t, 1, "[X] abc [X]", 8, 5, 8);
  assert_int_equal(blockc_tokenizer_bos_id(t), -1);
  blockc_tokenizer_free(t);
}

static void test_metaspace_schemes(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "metaspace.json");   // prepend_scheme first, split
  EXPECT(t, "a b", 4, 5);
  EXPECT(t, " a", 4);
  EXPECT(t, "<s>a b", 0, 2, 5);   // not at offset 0: no prefix
  EXPECT(t, "ab  b", 4, 3, 1, 5);
  EXPECT(t, "<s>", 0);
  EXPECT(t, " <s>a", 1, 0, 2);
  EXPECT(t, "a<s>", 4, 0);
  DECODE(t, 0, "a b", 4, 5);      // the first token's replacement is dropped
  DECODE(t, 0, "<s>a b", 0, 2, 5);
  DECODE(t, 0, "ab  b", 4, 3, 1, 5);
  blockc_tokenizer_free(t);
  char err[512];
  t = load_edit(D "metaspace.json", "\"prepend_scheme\": \"first\", \"split\": true}",
                "\"prepend_scheme\": \"always\", \"split\": true}", err, sizeof err);
  assert_non_null(t);
  EXPECT(t, "a b", 4, 5);
  EXPECT(t, "<s>a b", 0, 4, 5);   // always: after the special token too
  blockc_tokenizer_free(t);
  t = load_edit(D "metaspace.json", "\"prepend_scheme\": \"first\", \"split\": true}",
                "\"prepend_scheme\": \"never\", \"split\": false}", err, sizeof err);
  assert_non_null(t);
  EXPECT(t, "a b", 2, 5);
  blockc_tokenizer_free(t);
}

static void test_split_behaviors(void **state) {
  (void)state;
  static const struct { const char *beh; int32_t one[3]; size_t n1; int32_t two[4]; size_t n2; } c[] = {
      {"\"Isolated\", \"invert\": false", {0, 2, 1}, 3, {0, 2, 2, 1}, 4},
      {"\"Removed\", \"invert\": false", {0, 1}, 2, {0, 1}, 2},
      {"\"MergedWithPrevious\", \"invert\": false", {3, 1}, 2, {3, 2, 1}, 3},
      {"\"MergedWithNext\", \"invert\": false", {0, 4}, 2, {0, 2, 4}, 3},
      {"\"Contiguous\", \"invert\": false", {0, 2, 1}, 3, {0, 5, 1}, 3},
      {"\"Removed\", \"invert\": true", {2}, 1, {2, 2}, 2},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char err[512], to[128];
    snprintf(to, sizeof to, "\"behavior\": %s", c[i].beh);
    blockc_tokenizer *t = load_edit(D "split.json", "\"behavior\": \"Isolated\", \"invert\": false", to, err, sizeof err);
    assert_non_null(t);
    expect_ids_sp(t, "a-b", 3, 0, c[i].one, c[i].n1);
    expect_ids_sp(t, "a--b", 4, 0, c[i].two, c[i].n2);
    blockc_tokenizer_free(t);
  }
}

static void test_bytelevel_nfkc(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "bytelevel.json");
  EXPECT(t, "fi fi", 2, 3, 2);      // "f i" outranks "\u0120 f": " fi" is \u0120 + fi
  EXPECT(t, " fi", 3, 2);
  EXPECT(t, "\xef\xac\x81", 2);     // U+FB01 (ligature fi) -> NFKC "fi"
  EXPECT(t, "\xc3\xa9", 7);
  EXPECT(t, "fi<|endoftext|>fi", 2, 9, 2);
  DECODE(t, 0, "fi fi", 2, 3, 2);
  DECODE(t, 1, "fifi", 2, 9, 2);
  DECODE(t, 0, "\xef\xbf\xbd", 5);  // half of é: U+FFFD
  assert_int_equal(blockc_tokenizer_eos_id(t), 9);
  blockc_tokenizer_free(t);
  char err[512];   // ignore_merges (Llama 3): a word that is a token is taken whole
  t = load_edit(D "bytelevel.json", "\"ignore_merges\": false", "\"ignore_merges\": true", err, sizeof err);
  assert_non_null(t);
  EXPECT(t, "fi fi", 2, 4);
  EXPECT(t, " f", 8);
  blockc_tokenizer_free(t);
}

// Bytes that are not UTF-8 read as U+FFFD (one per maximal subpart), as
// Node's TextDecoder gives them to `tokenizers`.
static void test_invalid_utf8(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "sp.json");
  static const struct { const char *bad, *same; } c[] = {
      {"\xff", "\xef\xbf\xbd"},
      {"\xc3", "\xef\xbf\xbd"},
      {"\xe6\x97", "\xef\xbf\xbd"},                       // a truncated character: one U+FFFD
      {"\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},           // overlong: two
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // a surrogate: three
      {"hi\x80hi", "hi\xef\xbf\xbdhi"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int32_t *a, *b;
    size_t na, nb;
    char err[256];
    assert_int_equal(blockc_tokenizer_encode(t, c[i].bad, strlen(c[i].bad), 0, &a, &na, err, sizeof err), 0);
    assert_int_equal(blockc_tokenizer_encode(t, c[i].same, strlen(c[i].same), 0, &b, &nb, err, sizeof err), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof(int32_t));
    free(a);
    free(b);
  }
  blockc_tokenizer_free(t);
}

static void test_empty(void **state) {
  (void)state;
  const char *files[] = {D "merges.json", D "sp.json", D "metaspace.json", D "split.json", D "bytelevel.json"};
  for (size_t i = 0; i < 5; i++) {
    blockc_tokenizer *t = load(files[i]);
    int32_t *ids = NULL;
    size_t n = 7;
    char err[256];
    assert_int_equal(blockc_tokenizer_encode(t, "", 0, 0, &ids, &n, err, sizeof err), 0);
    assert_non_null(ids);
    assert_int_equal(n, 0);
    free(ids);
    assert_int_equal(blockc_tokenizer_encode(t, NULL, 0, 0, &ids, &n, err, sizeof err), 0);
    free(ids);
    char *text;
    size_t len = 5;
    assert_int_equal(blockc_tokenizer_decode(t, NULL, 0, 0, &text, &len, err, sizeof err), 0);
    assert_string_equal(text, "");
    assert_int_equal(len, 0);
    free(text);
    blockc_tokenizer_free(t);
  }
  blockc_tokenizer *t = load(D "sp.json");
  EXPECT_SP(t, "", 1);   // the template around an empty sequence
  blockc_tokenizer_free(t);
}

// A 100k-character word: the heap of merges is O(n log n), so this is
// quick; the answer is checked, not the time.
static void test_long_word(void **state) {
  (void)state;
  enum { K = 33334 };
  char *s = malloc(3 * K + 1);
  for (int i = 0; i < K; i++) memcpy(s + 3 * i, "abc", 3);
  s[3 * K] = '\0';
  blockc_tokenizer *t = load(D "merges.json");
  int32_t *ids;
  size_t n;
  char err[256];
  assert_int_equal(blockc_tokenizer_encode(t, s, 3 * K, 0, &ids, &n, err, sizeof err), 0);
  assert_int_equal(n, K);
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], 5);
  free(ids);
  blockc_tokenizer_free(t);
  t = load(D "sp.json");  // one word of 100k "hi" pairs through Prepend and byte fallback
  for (int i = 0; i < 3 * K; i++) s[i] = i % 2 ? 'i' : 'h';
  assert_int_equal(blockc_tokenizer_encode(t, s, 3 * K, 0, &ids, &n, err, sizeof err), 0);
  assert_int_equal(n, 3 * K - 1);   // \u2581hi, then h and i (no merge "h i")
  assert_int_equal(ids[0], 7);
  assert_int_equal(ids[1], 4);
  assert_int_equal(ids[2], 5);
  free(ids);
  blockc_tokenizer_free(t);
  free(s);
}

// Pushes ids one at a time; each push's output is checked.
static void test_stream(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "sp.json");
  blockc_tokenizer_stream *s = blockc_tokenizer_stream_new(t, 0);
  const char *o;
  size_t n;
  static const struct { int32_t id; const char *out; } steps[] = {
      {7, "hi"}, {3, " "}, {10, ""}, {11, ""}, {12, "\xe6\x97\xa5"}, {6, " h"}, {8, ""}, {9, "\xc3\xa9"}};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    assert_int_equal(blockc_tokenizer_stream_push(s, steps[i].id, &o, &n), 0);
    assert_int_equal(n, strlen(steps[i].out));
    assert_memory_equal(o, steps[i].out, n);
  }
  assert_int_equal(blockc_tokenizer_stream_finish(s, &o, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 10, &o, &n), 0);   // held back ...
  assert_int_equal(n, 0);
  assert_int_equal(blockc_tokenizer_stream_finish(s, &o, &n), 0);     // ... until the end
  assert_string_equal(o, "\xef\xbf\xbd");
  assert_int_equal(blockc_tokenizer_stream_prime(s, IDS(7, 3, 10)), 0);   // a prompt ending in a byte token
  assert_int_equal(blockc_tokenizer_stream_push(s, 11, &o, &n), 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 12, &o, &n), 0);       // the prompt's character: not returned
  assert_int_equal(blockc_tokenizer_stream_push(s, 6, &o, &n), 0);
  assert_string_equal(o, " h");
  assert_int_equal(blockc_tokenizer_stream_finish(s, &o, &n), 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 99, &o, &n), -1);
  assert_non_null(strstr(blockc_tokenizer_stream_error(s), "token id 99 is not in the vocabulary"));
  blockc_tokenizer_stream_free(s);
  blockc_tokenizer_free(t);
  t = load(D "bytelevel.json");   // window mode (ByteLevel) after a prompt
  s = blockc_tokenizer_stream_new(t, 0);
  assert_int_equal(blockc_tokenizer_stream_prime(s, IDS(2, 3)), 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 2, &o, &n), 0);
  assert_string_equal(o, "fi");
  assert_int_equal(blockc_tokenizer_stream_push(s, 4, &o, &n), 0);
  assert_string_equal(o, " fi");
  blockc_tokenizer_stream_free(s);
  blockc_tokenizer_free(t);
  t = load(D "metaspace.json");   // the first token's space dropped, as decoding the whole would
  s = blockc_tokenizer_stream_new(t, 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 4, &o, &n), 0);
  assert_string_equal(o, "a");
  assert_int_equal(blockc_tokenizer_stream_push(s, 5, &o, &n), 0);
  assert_string_equal(o, " b");
  assert_int_equal(blockc_tokenizer_stream_push(s, 4, &o, &n), 0);
  assert_string_equal(o, " a");
  blockc_tokenizer_stream_free(s);
  s = blockc_tokenizer_stream_new(t, 0);   // after a prompt: the space stays
  assert_int_equal(blockc_tokenizer_stream_prime(s, IDS(4, 5)), 0);
  assert_int_equal(blockc_tokenizer_stream_push(s, 4, &o, &n), 0);
  assert_string_equal(o, " a");
  assert_int_equal(blockc_tokenizer_stream_prime(s, IDS(77)), -1);
  assert_non_null(strstr(blockc_tokenizer_stream_error(s), "token id 77 (prompt position 0)"));
  blockc_tokenizer_stream_free(s);
  blockc_tokenizer_free(t);
}

// Strip counts characters at both ends; the stream (whole-sequence mode for
// position-dependent decoders) holds a trailing space that Strip's stop cuts
// and gives it once more text follows.
static void test_strip_stream(void **state) {
  (void)state;
  char err[512];
  blockc_tokenizer *t = load_edit(D "sp.json", "\"start\": 1, \"stop\": 0", "\"start\": 1, \"stop\": 1", err, sizeof err);
  if (!t) fail_msg("%s", err);
  DECODE(t, 0, " hi", 3, 7, 3);           // "  hi " less one space at each end
  DECODE(t, 0, "\xc3\xa9", 8, 9, 3);      // multi-byte text: the stop cut still applies
  blockc_tokenizer_stream *s = blockc_tokenizer_stream_new(t, 0);
  const char *o;
  size_t n;
  static const struct { int32_t id; const char *out; } steps[] = {{3, ""}, {7, " hi"}, {3, ""}, {6, "  h"}, {3, ""}};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    assert_int_equal(blockc_tokenizer_stream_push(s, steps[i].id, &o, &n), 0);
    assert_int_equal(n, strlen(steps[i].out));
    assert_memory_equal(o, steps[i].out, n);
  }
  assert_int_equal(blockc_tokenizer_stream_finish(s, &o, &n), 0);
  assert_int_equal(n, 0);                  // " hi  h" is the whole decode
  blockc_tokenizer_stream_free(s);
  DECODE(t, 0, " hi  h", 3, 7, 3, 6, 3);
  blockc_tokenizer_free(t);
}

static void test_decode_errors(void **state) {
  (void)state;
  blockc_tokenizer *t = load(D "merges.json");
  char *text, err[256];
  size_t len;
  int32_t bad[] = {0, 9}, neg[] = {-3};
  assert_int_equal(blockc_tokenizer_decode(t, bad, 2, 0, &text, &len, err, sizeof err), -1);
  assert_null(text);
  assert_non_null(strstr(err, "token id 9 (position 1) is not in the vocabulary (0..8)"));
  assert_int_equal(blockc_tokenizer_decode(t, neg, 1, 0, &text, &len, err, sizeof err), -1);
  assert_non_null(strstr(err, "token id -3 (position 0)"));
  blockc_tokenizer_free(t);
}

#define MODEL(vocab, merges) \
  "{\"model\": {\"type\": \"BPE\", \"vocab\": " vocab ", \"merges\": " merges "}"
#define OK_MODEL MODEL("{\"a\": 0, \"b\": 1, \"ab\": 2}", "[\"a b\"]")

static void expect_load_error(const char *json, const char *want) {
  char err[1024] = "";
  blockc_tokenizer *t = blockc_tokenizer_load_mem(json, strlen(json), "t.json", err, sizeof err);
  if (t || !strstr(err, want))
    fail_msg("%s\n  loaded: %d, message: %s\n  wanted: %s", json, t != NULL, err, want);
  assert_true(!strncmp(err, "t.json:", 7));
}

static void test_malformed(void **state) {
  (void)state;
  static const struct { const char *json, *want; } c[] = {
      {"{", "t.json:1:2: invalid JSON: expected a string key"},
      {"{\"model\": [1, 2}", "t.json:1:16: invalid JSON: expected ',' or ']'"},
      {"", "t.json:1:1: invalid JSON: unexpected end of file"},
      {OK_MODEL "} x", "invalid JSON: trailing characters after the top-level value"},
      {"{\"a\": \"\\q\"}", "unknown escape in a string"},
      {"{\"a\": \"\\ud800\"}", "lone high surrogate in \\u escape"},
      {"{\"a\": \"\\udc00\"}", "lone low surrogate"},
      {"{\"a\": \"\xff\"}", "string is not valid UTF-8"},
      {"{\"a\": \"x\ny\"}", "t.json:1:9: invalid JSON: control character in a string"},
      {"{\"a\": 01}", "expected ',' or '}'"},
      {"{\"a\": -}", "unexpected character"},
      {"[1, 2]", "t.json: (top level): must be an object, not an array"},
      {"{}", "t.json: model: must be an object, not missing"},
      {MODEL("{\"a\": \"x\"}", "[]") "}", "model.vocab: the id of token \"a\" must be an integer, not a string"},
      {MODEL("{\"a\": 1.5}", "[]") "}", "must be an integer in 0..16777215, not 1.5"},
      {MODEL("{\"a\": -1}", "[]") "}", "must be an integer in 0..16777215, not -1"},
      {MODEL("{\"a\": 99999999}", "[]") "}", "must be an integer in 0..16777215, not 1e+08"},
      {MODEL("{\"a\": 1.2e62}", "[]") "}", "must be an integer in 0..16777215, not 1.2e+62"},  // fuzz: no UB cast
      {MODEL("{\"a\": 9000000}", "[]") "}", "id 9000000 is far beyond the number of tokens"},
      {MODEL("{\"a\": 0, \"b\": 0}", "[]") "}", "model.vocab: tokens \"a\" and \"b\" have the same id 0"},
      {MODEL("{\"a\": 0, \"a\": 1}", "[]") "}", "model.vocab: token \"a\" appears twice"},
      {MODEL("{\"a\": 0, \"b\": 1}", "[\"a z\"]") "}",
       "model.merges[0]: merge \"a z\" names token \"z\", which is not in the vocabulary"},
      {MODEL("{\"a\": 0, \"b\": 1}", "[\"a b\"]") "}",
       "model.merges[0]: the merge of \"a\" and \"b\" makes \"ab\", which is not in the vocabulary"},
      {MODEL("{\"a\": 0, \"b\": 1, \"ab\": 2}", "[\"a b\", [\"a\", \"b\"]]") "}", "model.merges[1]: merges mix"},
      {MODEL("{\"a\": 0}", "[\"ab\"]") "}", "model.merges[0]: a merge string must be two tokens"},
      {MODEL("{\"a\": 0}", "[3]") "}", "model.merges[0]: a merge must be a string \"a b\" or a pair"},
      {MODEL("{\"a\": 0}", "{}") "}", "model.merges: must be an array, not an object"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": {}}}", "model.type: unsupported model type \"Unigram\" (blockc reads BPE)"},
      {"{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}, \"merges\": []}}", "model.dropout: BPE dropout"},
      {"{\"model\": {\"type\": \"BPE\", \"foo\": 1, \"vocab\": {}, \"merges\": []}}", "model: unsupported field \"foo\""},
      {OK_MODEL ", \"bogus\": 1}", "(top level): unsupported field \"bogus\""},
      {OK_MODEL ", \"truncation\": {\"max_length\": 5}}", "truncation: truncation is not supported"},
      {OK_MODEL ", \"padding\": {}}", "padding: padding is not supported"},
      {OK_MODEL ", \"normalizer\": {\"type\": \"Lowercase\"}}",
       "normalizer: unsupported normalizer type \"Lowercase\" (blockc reads NFC, NFKC, NFD, NFKD, Prepend, Replace, Sequence)"},
      {OK_MODEL ", \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"StripAccents\"}]}}",
       "normalizer.normalizers[1]: unsupported normalizer type \"StripAccents\""},
      {OK_MODEL ", \"normalizer\": {\"type\": \"NFC\", \"x\": 1}}", "normalizer: unsupported field \"x\""},
      {OK_MODEL ", \"normalizer\": 3}", "normalizer: normalizer must be an object or null, not a number"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\"}, {\"type\": \"Whitespace\"}]}}",
       "pre_tokenizer.pretokenizers[1]: unsupported pre_tokenizer type \"Whitespace\" (blockc reads ByteLevel, Split, Metaspace, Digits, Sequence)"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a(b\"}, \"behavior\": \"Isolated\"}}",
       "pre_tokenizer.pattern: invalid regex at offset 3: missing closing parenthesis"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Glob\": \"a\"}, \"behavior\": \"Isolated\"}}",
       "pre_tokenizer.pattern: must be {\"String\": ...} or {\"Regex\": ...}"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \"a\"}, \"behavior\": \"Sideways\"}}",
       "pre_tokenizer: \"behavior\" must be Removed, Isolated"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"}}",
       "pre_tokenizer: \"replacement\" must be a string of one character"},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"sometimes\"}}",
       "\"prepend_scheme\" must be \"always\", \"first\" or \"never\""},
      {OK_MODEL ", \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": 1}}",
       "pre_tokenizer: \"add_prefix_space\" must be true or false, not a number"},
      {OK_MODEL ", \"pre_tokenizer\": {\"kind\": \"ByteLevel\"}}", "pre_tokenizer: pre_tokenizer without a \"type\" string"},
      {OK_MODEL ", \"decoder\": {\"type\": \"WordPiece\"}}", "decoder: unsupported decoder type \"WordPiece\""},
      {OK_MODEL ", \"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": -1, \"stop\": 0}}",
       "decoder.start: start must be an integer in 0..999999999, not -1"},
      {OK_MODEL ", \"post_processor\": {\"type\": \"BertLike\"}}", "post_processor: unsupported post_processor type \"BertLike\""},
      {OK_MODEL ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {}}}",
       "post_processor.single[0]: special token \"<s>\" is not in special_tokens"},
      {OK_MODEL ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [7], \"tokens\": [\"<s>\"]}}}}",
       "post_processor.single[0]: id 7 is not a token of the vocabulary"},
      {OK_MODEL ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"B\", \"type_id\": 0}}], \"special_tokens\": {}}}",
       "post_processor.single[0]: the single template can only hold sequence A"},
      {OK_MODEL ", \"added_tokens\": [3]}", "added_tokens[0]: must be an object, not a number"},
      {OK_MODEL ", \"added_tokens\": [{\"id\": 5, \"content\": \"\"}]}", "added_tokens[0]: \"content\" must not be empty"},
      {OK_MODEL ", \"added_tokens\": [{\"id\": 5, \"content\": \"x\", \"special\": \"yes\"}]}",
       "added_tokens[0]: \"special\" must be true or false, not a string"},
      {OK_MODEL ", \"added_tokens\": [{\"id\": 5, \"content\": \"x\"}, {\"id\": 5, \"content\": \"y\"}]}",
       "added_tokens[1]: added tokens \"x\" and \"y\" have the same id 5"},
      {OK_MODEL ", \"added_tokens\": [{\"content\": \"x\"}]}", "added_tokens[0]: \"id\" must be an integer, not missing"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) expect_load_error(c[i].json, c[i].want);
  // Nesting past 128 levels.
  char deep[600];
  memset(deep, '[', 300);
  deep[300] = '\0';
  expect_load_error(deep, "invalid JSON: nested deeper than 128 levels");
  char err[512], dir[256], big[300];
  tu_mktmpdir(dir, sizeof dir, "tokbig");   // a sparse file past the 1 GiB bound: refused before reading
  snprintf(big, sizeof big, "%s/big.json", dir);
  FILE *f = fopen(big, "wb");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), (off_t)(1u << 30) + 1), 0);
  fclose(f);
  assert_null(blockc_tokenizer_load(big, err, sizeof err));
  assert_non_null(strstr(err, "big.json: larger than 1 GiB: not a tokenizer file"));
  assert_null(blockc_tokenizer_load(dir, err, sizeof err));
  assert_non_null(strstr(err, "is a directory"));
  assert_int_equal(tu_rm_rf(dir), 0);
  assert_null(blockc_tokenizer_load("tests/data/tok/missing.json", err, sizeof err));
  assert_non_null(strstr(err, "tests/data/tok/missing.json: cannot open: No such file"));
}

// GPT-2's two files: a merge line of three tokens, a vocab.json that is not
// an object, and a working pair.
static void test_load_bpe(void **state) {
  (void)state;
  char dir[256], v[300], m[300], err[512];
  tu_mktmpdir(dir, sizeof dir, "tok");
  snprintf(v, sizeof v, "%s/vocab.json", dir);
  snprintf(m, sizeof m, "%s/merges.txt", dir);
  const char *vocab = "{\"h\": 0, \"i\": 1, \"hi\": 2, \"\\u0120\": 3, \"\\u0120hi\": 4, \"\\u0120h\": 5, \"<|endoftext|>\": 6}";
  tu_write_bytes(v, vocab, strlen(vocab));
  const char *merges = "#version: 0.2\n\xc4\xa0 h\n\xc4\xa0h i\nh i\n";
  tu_write_bytes(m, merges, strlen(merges));
  blockc_tokenizer *t = blockc_tokenizer_load_bpe(v, m, err, sizeof err);
  if (!t) fail_msg("%s", err);
  EXPECT(t, "hi hi", 2, 4);
  EXPECT(t, "hi<|endoftext|>", 2, 6);
  DECODE(t, 0, "hi hi<|endoftext|>", 2, 4, 6);
  DECODE(t, 1, "hi hi", 2, 4, 6);
  assert_int_equal(blockc_tokenizer_eos_id(t), 6);
  blockc_tokenizer_free(t);
  tu_write_bytes(m, "#version: 0.2\nh i\nh i x\n", 24);
  assert_null(blockc_tokenizer_load_bpe(v, m, err, sizeof err));
  assert_non_null(strstr(err, "merges.txt:3: a merge line must be two tokens separated by one space"));
  tu_write_bytes(m, "h q\n", 4);
  assert_null(blockc_tokenizer_load_bpe(v, m, err, sizeof err));
  assert_non_null(strstr(err, "merges.txt: line 1: merge \"h q\" names token \"q\""));
  tu_write_bytes(v, "[]", 2);
  assert_null(blockc_tokenizer_load_bpe(v, m, err, sizeof err));
  assert_non_null(strstr(err, "vocab.json: (top level): must be an object token -> id, not an array"));
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_cli(void **state) {
  (void)state;
  char out[4096], err[4096];
  char *tok[] = {(char *)tu_blockc(), "tokenize", "--tokenizer", D "sp.json", "hi \xc3\xa9", "--add-special", NULL};
  assert_int_equal(tu_spawn(tok, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, "1 7 3 8 9\n");
  char *det[] = {(char *)tu_blockc(), "detokenize", "--tokenizer", D "sp.json", "7", "3,8", "9", NULL};
  assert_int_equal(tu_spawn(det, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, "hi \xc3\xa9");
  char *dash[] = {(char *)tu_blockc(), "tokenize", "--tokenizer", D "merges.json", "--", "-abc", NULL};
  assert_int_equal(tu_spawn(dash, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, "7 5\n");
  char *badid[] = {(char *)tu_blockc(), "detokenize", "--tokenizer", D "sp.json", "7", "99", NULL};
  assert_int_equal(tu_spawn(badid, out, sizeof out, err, sizeof err), 1);
  assert_non_null(strstr(err, "blockc: error: token id 99 (position 1) is not in the vocabulary (0..13)"));
  char *notid[] = {(char *)tu_blockc(), "detokenize", "--tokenizer", D "sp.json", "7x", NULL};
  assert_int_equal(tu_spawn(notid, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "blockc: error: detokenize: '7x' is not a list of token ids"));
  char *none[] = {(char *)tu_blockc(), "tokenize", "hi", NULL};
  assert_int_equal(tu_spawn(none, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "give --tokenizer FILE or --vocab FILE --merges FILE"));
  char *two[] = {(char *)tu_blockc(), "tokenize", "--tokenizer", D "sp.json", "a", "b", NULL};
  assert_int_equal(tu_spawn(two, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "tokenize takes one TEXT argument or --file FILE"));
  char *vonly[] = {(char *)tu_blockc(), "tokenize", "--vocab", "v.json", "hi", NULL};
  assert_int_equal(tu_spawn(vonly, out, sizeof out, err, sizeof err), 2);
  assert_non_null(strstr(err, "--vocab needs --merges"));
  char *bad[] = {(char *)tu_blockc(), "tokenize", "--tokenizer", D "missing.json", "hi", NULL};
  assert_int_equal(tu_spawn(bad, out, sizeof out, err, sizeof err), 1);
  assert_non_null(strstr(err, "blockc: error: tests/data/tok/missing.json: cannot open"));
  char *file[] = {(char *)tu_blockc(), "tokenize", "--tokenizer", D "merges.json", "--file", D "merges.json", NULL};
  assert_int_equal(tu_spawn(file, out, sizeof out, err, sizeof err), 0);  // any bytes: <unk>s and letters
  assert_non_null(strchr(out, '\n'));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merges_order),   cmocka_unit_test(test_unknown_tokens),
      cmocka_unit_test(test_affixes),
      cmocka_unit_test(test_byte_fallback),  cmocka_unit_test(test_added_and_special),
      cmocka_unit_test(test_metaspace_schemes), cmocka_unit_test(test_split_behaviors),
      cmocka_unit_test(test_bytelevel_nfkc), cmocka_unit_test(test_invalid_utf8),
      cmocka_unit_test(test_empty),          cmocka_unit_test(test_long_word),
      cmocka_unit_test(test_stream),         cmocka_unit_test(test_strip_stream),
      cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_malformed),      cmocka_unit_test(test_load_bpe),
      cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
