/* blockc_tok.h — blockc's tokenizer: text <-> token ids, vendorable.
 *
 * One C11 file pair (blockc_tok.h + blockc_tok.c) that sits beside the
 * runtime (blockc_rt.c does not need it: a model without text needs none of
 * it).  It reads Hugging Face tokenizer.json files (byte-level BPE as GPT-2,
 * Llama 3 and Qwen ship it; SentencePiece-style BPE with byte fallback as
 * Llama 2, TinyLlama and Mistral ship it; added and special tokens) and
 * GPT-2's vocab.json + merges.txt, and encodes and decodes exactly as the
 * Hugging Face `tokenizers` library does (docs/tokenizer.md lists what is
 * supported; anything else is refused by name).  It needs PCRE2 (libpcre2-8:
 * the files' pre-tokenizer regexes run as written) and utf8proc (NFC/NFKC):
 *
 *   cc app.c model.c blockc_rt.c blockc_tok.c -lpcre2-8 -lutf8proc -lm
 *
 * Every function is thread-safe on a shared tokenizer (encode and decode do
 * not modify it); a stream belongs to one thread.  Text in is bytes: bytes
 * that are not UTF-8 are read as U+FFFD, one per maximal invalid subpart
 * (what Node's Buffer#toString, TextDecoder and Rust's from_utf8_lossy do),
 * before anything else happens. */
#ifndef BLOCKC_TOK_H
#define BLOCKC_TOK_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct blockc_tokenizer blockc_tokenizer;

/* tokenizer.json (Hugging Face); NULL + message in err on failure */
blockc_tokenizer *blockc_tokenizer_load(const char *path, char *err, size_t errn);
/* The same from a buffer (name is used in messages). */
blockc_tokenizer *blockc_tokenizer_load_mem(const char *json, size_t len, const char *name,
                                            char *err, size_t errn);
/* GPT-2 style vocab.json + merges.txt (byte-level BPE, GPT-2's regex; a
 * vocabulary entry <|endoftext|> becomes a special added token, as in the
 * hub's gpt2 tokenizer.json) */
blockc_tokenizer *blockc_tokenizer_load_bpe(const char *vocab_json, const char *merges_txt,
                                            char *err, size_t errn);
/* A llama.cpp vocabulary: the tokenizer.ggml.* metadata of a GGUF file (the
 * caller reads the file; blockc_tok needs nothing of the runtime).  Each
 * field is the key of that name; -1 (ids, flags) or NULL (arrays, pre): the
 * key is absent.  model "gpt2": byte-level BPE from tokens (id = index) and
 * merges ("a b"), pre-tokenized as pre says ("gpt-2": GPT-2's regex;
 * "llama-bpe", "llama3", "llama-v3": Llama 3's); model "llama": SentencePiece BPE with byte fallback from
 * tokens and scores (merges derived from the scores as Hugging Face's
 * converter derives them).  token_type 2 (unknown) and 3 (control) become
 * special added tokens, 4 (user-defined) plain ones; without token_type the
 * bos / eos / unknown / padding ids are the special ones.  The tokenizer is
 * the tokenizer.json Hugging Face's converters write for such a model, and
 * its bos / eos ids are these. */
typedef struct blockc_tokenizer_ggml {
  const char *model;           /* "gpt2" or "llama" */
  const char *pre;             /* tokenizer.ggml.pre */
  const char *const *tokens;   /* n_tokens NUL-terminated UTF-8 strings */
  size_t n_tokens;
  const char *const *merges;   /* n_merges (gpt2) */
  size_t n_merges;
  const float *scores;         /* n_tokens (llama) */
  const int32_t *token_type;   /* n_tokens, llama.cpp's types 1..6 */
  int64_t bos, eos, unk, pad;  /* bos_token_id, eos_token_id, unknown_token_id, padding_token_id */
  int add_bos, add_eos;        /* add_bos_token, add_eos_token (-1: llama.cpp's default: BOS for
                                  "llama" and Llama 3's pre, nothing else) */
  int add_space_prefix;        /* tokenizer.ggml.add_space_prefix (llama; -1: true) */
} blockc_tokenizer_ggml;
blockc_tokenizer *blockc_tokenizer_load_ggml(const blockc_tokenizer_ggml *v, const char *name,
                                             char *err, size_t errn);
/* The way back: t as llama.cpp's vocabulary, the values a GGUF file's
 * tokenizer.ggml.* keys hold (`blockc weights --tokenizer FILE -o W.gguf`),
 * such that blockc_tokenizer_load_ggml(v) encodes and decodes exactly as t.
 * Byte-level BPE becomes model "gpt2" (pre "gpt-2" for GPT-2's ByteLevel
 * regex, "llama-bpe" for Llama 3's Split), merges in rank order; BPE with
 * byte_fallback becomes "llama" (SentencePiece) with scores = minus the
 * rank of each token's first merge (0: none), which order the merges derived
 * from them as t orders its own; token types CONTROL 3 (special added),
 * UNKNOWN 2 (the unk token, when special), USER_DEFINED 4 (other added),
 * BYTE 6 (<0xNN>, llama), NORMAL 1; bos / eos / unk ids (-1 when t has
 * none; pad is always -1), add_bos / add_eos from t's post-processor,
 * add_space_prefix (llama) from its Prepend normalizer.  The result is
 * loaded back and compared with t; a tokenizer it does not reproduce (another
 * normalizer, pre-tokenizer or decoder, a WordPiece prefix, added-token
 * flags, a merge order the scores cannot express, an id without a token) is
 * refused with what differs.  0, or -1 with err set (name in messages).
 * tokens point into t (valid while t is); the arrays are malloc'd: free
 * them with blockc_tokenizer_ggml_free. */
int blockc_tokenizer_to_ggml(const blockc_tokenizer *t, const char *name, blockc_tokenizer_ggml *v,
                             char *err, size_t errn);
void blockc_tokenizer_ggml_free(blockc_tokenizer_ggml *v);
void blockc_tokenizer_free(blockc_tokenizer *t);
/* 0 on success; *ids malloc'd (caller frees), *n ids */
int blockc_tokenizer_encode(const blockc_tokenizer *t, const char *text, size_t len, int add_special,
                            int32_t **ids, size_t *n, char *err, size_t errn);
/* 0 on success; *text malloc'd, NUL-terminated, *len bytes.  An id outside
 * the vocabulary is an error (the Hugging Face library drops it silently). */
int blockc_tokenizer_decode(const blockc_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                            char **text, size_t *len, char *err, size_t errn);
size_t blockc_tokenizer_vocab_size(const blockc_tokenizer *t);
int32_t blockc_tokenizer_token_to_id(const blockc_tokenizer *t, const char *token); /* -1: none */
const char *blockc_tokenizer_id_to_token(const blockc_tokenizer *t, int32_t id);    /* NULL: none */
int32_t blockc_tokenizer_eos_id(const blockc_tokenizer *t);  /* -1 when unknown */
int32_t blockc_tokenizer_bos_id(const blockc_tokenizer *t);  /* -1 when unknown */
/* 1 when id is a special added token, 0 when not (or not an id). */
int blockc_tokenizer_is_special(const blockc_tokenizer *t, int32_t id);

/* Streaming decode for generation: push ids one at a time, get the bytes that are now final
 * (incomplete UTF-8 held back; decoder rules such as the Metaspace first-space applied as the
 * whole sequence would).  *out points into the stream's buffer, valid until the next call. */
typedef struct blockc_tokenizer_stream blockc_tokenizer_stream;
blockc_tokenizer_stream *blockc_tokenizer_stream_new(const blockc_tokenizer *t, int skip_special);
int blockc_tokenizer_stream_push(blockc_tokenizer_stream *s, int32_t id, const char **out, size_t *len);
int blockc_tokenizer_stream_finish(blockc_tokenizer_stream *s, const char **out, size_t *len);
void blockc_tokenizer_stream_free(blockc_tokenizer_stream *s);
/* Feeds ids (a prompt) whose text is not wanted: what is pushed next comes
 * out as it would after them (Metaspace and Strip see the prompt's tokens
 * first, so a generated "\u2581world" keeps its space).  0, or -1. */
int blockc_tokenizer_stream_prime(blockc_tokenizer_stream *s, const int32_t *ids, size_t n);
/* The message of the last failed push/finish (a bad id, out of memory). */
const char *blockc_tokenizer_stream_error(const blockc_tokenizer_stream *s);

#ifdef __cplusplus
}
#endif
#endif
