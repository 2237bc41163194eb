// test_hostile.c — the hostile-input catalogue (tests/bad/, made by
// tools/make_bad_inputs.py; documented in docs/hostile-inputs.md).
//
// Every entry runs the real CLI ($BLOCKC, set by `make test`; default
// build/blockc) as a child process with stderr captured, and asserts:
//   - it exits normally (no signal: no crash, no sanitizer abort) with the
//     expected code (1 bad input, 2 bad usage, 0 for hostile-but-valid);
//   - stderr contains the expected message;
//   - --output, which always points into a fresh temp directory, was not
//     created on failure, and no temp file was left behind either.
// The catalogue is the single array `cases` below; `HOSTILE_TABLE=1
// build/tests/test_hostile` prints it as the Markdown table in
// docs/hostile-inputs.md, and a test checks the doc lists every file.
//
// A second group compiles and JIT-runs graphs whose names are C keywords,
// libc functions and the emitter's own parameter names: they must never
// clash with generated C.
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot.h"
#include "cli.h"
#include "blockc_rt.h"
#include "rt_ref.h"


// argv after "blockc"; "@OUT" is replaced by the output path, "@DIR" by the
// temp directory.  Most entries are `run GRAPH [--weights|--input FILE]`.
#define MAXARGS 16
typedef struct {
  const char *what;               // what the entry tries (the doc's second column)
  int code;                       // expected exit status
  const char *msg;                // expected stderr substring ("" for code 0)
  const char *argv[MAXARGS];
} hostile;

#define G(f) "run", "tests/bad/" f, "--output", "@OUT"
#define W(f) "run", "tests/bad/ln.blk", "--weights", "tests/bad/" f, "--output", "@OUT"
#define X(f) "run", "tests/bad/ln.blk", "--input", "tests/bad/" f, "--output", "@OUT"

static const hostile cases[] = {
    // --- graphs: C injection through names and comments -------------------
    {"`; system(...)` after a call", 1, "unexpected character ';'", {G("inject_semicolon.blk")}},
    {"a quoted string with an escaped quote as params", 1, "unexpected character '\"'", {G("inject_quote_param.blk")}},
    {"`*/` closing a C comment, then a declaration", 1, "unexpected character ';'", {G("inject_comment_close.blk")}},
    {"`#include`/`#define` lines (comments here) and `@pragma`", 1, "unexpected character '@'", {G("inject_preprocessor.blk")}},
    {"a model name that is a C function definition", 1, "unexpected character '\"'", {G("inject_model_name.blk")}},
    {"comments ending in backslash (a C `//` comment would continue)", 0, "", {G("comment_backslash.blk")}},
    {"UTF-8 in comments, with `*/`, `/*` and quotes (allowed)", 0, "", {G("comment_unicode.blk")}},
    {"invalid UTF-8 bytes inside a comment (allowed: comments are skipped)", 0, "", {G("comment_bad_utf8.blk")}},
    {"a non-ASCII identifier", 1, "unexpected byte 0xc3 (graph files are ASCII outside comments)", {G("ident_unicode.blk")}},
    {"a 65-character identifier", 1, "identifier is 65 characters long (limit 64)", {G("ident_too_long.blk")}},
    {"a 304-character parameter path", 1, "parameter path is longer than 256 characters", {G("param_too_long.blk")}},
    {"a NUL byte", 1, "file contains a NUL byte (not a text file)", {G("nul_byte.blk")}},
    {"an ANSI escape (control byte 0x1b)", 1, "unexpected control character 0x1b", {G("control_char.blk")}},
    {"an empty file", 1, "a graph file starts with 'model NAME', found end of file", {G("empty.blk")}},
    // --- graphs: dims and limits ---------------------------------------------
    {"dim 2^24 + 1", 1, "dim D is 16777217, over the limit of 16777216", {G("dim_huge.blk")}},
    {"dim 0", 1, "dim D must be positive, got 0", {G("dim_zero.blk")}},
    {"dim -4", 1, "dim D must be positive, got -4", {G("dim_negative.blk")}},
    {"INT64_MAX + 1", 1, "integer overflow: 9223372036854775807 + 1 does not fit in 64 bits", {G("dim_overflow.blk")}},
    {"a 20-digit literal", 1, "integer literal 99999999999999999999 does not fit in 64 bits", {G("dim_literal_overflow.blk")}},
    {"division by zero in a dim", 1, "division by zero", {G("dim_div_zero.blk")}},
    {"[2^24, 2^24, 2^24]: an element count overflowing int64 products", 1, "has more than 2147483648 elements", {G("elems_overflow.blk")}},
    {"200 nested calls", 1, "nested too deeply (limit 128)", {G("nest_calls.blk")}},
    {"1000 nested parentheses in a dim (stack depth)", 1, "nested too deeply (limit 128)", {G("nest_parens.blk")}},
    {"200 nested loops", 1, "nested too deeply (limit 128)", {G("nest_loops.blk")}},
    {"a 10^6-trip loop", 1, "loop runs 1000000 times, over the limit of 100000", {G("loop_million.blk")}},
    {"10^3 x 10^3 nested loops (10^6 nodes)", 1, "graph has more than 200000 nodes", {G("loop_nodes.blk")}},
    {"an empty loop range 5..0", 1, "loop range 5..0 is empty", {G("loop_negative.blk")}},
    {"a binding that is never read", 1, "'a' is assigned here but never used", {G("unused_binding.blk")}},
    {"a value defined from itself", 1, "is used in its own definition (a cycle)", {G("cycle.blk")}},
    {"D not divisible by heads", 1, "model width D=4 is not divisible by heads=3", {G("heads_indivisible.blk")}},
    {"a keyword as a value name", 1, "expected a value", {G("keyword_as_name.blk")}},
    {"two outputs, one bare --output", 2, "name one with --output NAME=FILE", {G("two_outputs.blk")}},
    {"eps=1e999", 1, "float literal 1e999 is out of range", {G("huge_float.blk")}},
    {"eps=-1", 1, "eps must be positive, got -1", {G("eps_negative.blk")}},
    {"eps=0/0 (NaN)", 1, "division by zero", {G("eps_nan.blk")}},
    {"alpha=10^400 (inf)", 1, "power is not a finite number", {G("alpha_inf.blk")}},
    {"CR-only line ends (old Mac files)", 0, "", {G("cr_only.blk")}},
    {"a UTF-8 byte order mark and CRLF line ends", 0, "", {G("bom.blk")}},
    {"terminal escapes (clear screen, BEL) in a comment on an error line", 1,
     "# \\x1b[2J\\x1b[H\\x07all good", {G("escape_in_comment.blk")}},
    {"1000 Linear layers 4096 wide (16.8e9 parameters)", 1,
     "the run needs 67125248000 bytes (62.5 GiB: 67125248000 bytes of parameters), over the limit of 17179869184 bytes",
     {G("params_huge.blk")}},
    {"the same with a memory limit of 16 bytes", 1, "over the limit of 16 bytes",
     {"run", "tests/bad/ln.blk", "--max-memory", "16", "--output", "@OUT"}},
    // --- safetensors weights for ln.blk ---------------------------------------
    {"a valid file (the reference for the others)", 0, "", {W("st_valid.safetensors")}},
    {"0 bytes", 1, "too short for a safetensors header", {W("st_empty.safetensors")}},
    {"3 bytes", 1, "too short for a safetensors header", {W("st_short.safetensors")}},
    {"64 bytes of garbage", 1, "is over the limit of", {W("st_garbage.safetensors")}},
    {"the valid file minus its last 5 bytes", 1, "run past the end of the data section", {W("st_truncated.safetensors")}},
    {"header length 4096 in a 15-byte file", 1, "runs past the end of the file", {W("st_header_past_end.safetensors")}},
    {"header length 2^63 + 5", 1, "header length 9223372036854775813 is over the limit", {W("st_header_huge.safetensors")}},
    {"truncated JSON", 1, "header is not valid JSON", {W("st_bad_json.safetensors")}},
    {"a JSON array as header", 1, "header is not a JSON object", {W("st_not_object.safetensors")}},
    {"two JSON values", 1, "header has data after the JSON value", {W("st_trailing.safetensors")}},
    {"invalid UTF-8 in the header", 1, "header is not valid UTF-8", {W("st_bad_utf8.safetensors")}},
    {"data_offsets past the end", 1, "data_offsets [16, 4096] run past the end of the data section", {W("st_offsets_past_end.safetensors")}},
    {"data_offsets [16, 0]", 1, "data_offsets [16, 0] end before they begin", {W("st_offsets_reversed.safetensors")}},
    {"overlapping tensors", 1, "overlap", {W("st_overlap.safetensors")}},
    {"12 bytes for a [4] F32 tensor", 1, "hold 12 bytes but shape [4] of F32 needs 16", {W("st_size_mismatch.safetensors")}},
    {"offsets near 2^64 (begin + size overflow)", 1, "\"data_offsets\" must be [begin, end]", {W("st_offsets_overflow.safetensors")}},
    {"shape [2^32, 2^32, 2^32]", 1, "has too many elements", {W("st_shape_overflow.safetensors")}},
    {"shape [-4]", 1, "shape[0] is not a non-negative integer", {W("st_shape_negative.safetensors")}},
    {"the same tensor name twice", 1, "appears more than once in the header", {W("st_duplicate.safetensors")}},
    {"F64 weights", 1, "has dtype F64, expected F32, F16 or BF16", {W("st_wrong_dtype.safetensors")}},
    {"I32 weights", 1, "has dtype I32, expected F32, F16 or BF16", {W("st_int_dtype.safetensors")}},
    {"an unknown dtype Q4", 1, "unknown dtype 'Q4'", {W("st_unknown_dtype.safetensors")}},
    {"shape [2, 2] for a [4] parameter", 1, "has shape [2, 2], expected [4]", {W("st_wrong_shape.safetensors")}},
    {"a missing tensor", 1, "missing tensor 'ln.bias' (expected shape [4])", {W("st_missing.safetensors")}},
    {"an extra tensor", 1, "unexpected tensor 'ln.extra'", {W("st_extra.safetensors")}},
    {"a NaN weight", 1, "has a non-finite value (nan) at index [1]", {W("st_nan.safetensors")}},
    {"__metadata__ with a non-string value", 1, "\"__metadata__\" entry 'k' is not a string", {W("st_metadata_bad.safetensors")}},
    {"4 unreferenced bytes between two tensors", 1, "bytes [16, 20) of the data section belong to no tensor", {W("st_gap.safetensors")}},
    {"1000 bytes after the last tensor", 1, "1000 bytes after the last tensor", {W("st_tail.safetensors")}},
    {"a tensor name with an escaped NUL ('ln.bias\\u0000evil')", 1, "escaped NUL (\\u0000)", {W("st_nul_name.safetensors")}},
    {"a tensor name with ESC sequences and a newline", 1, "unexpected tensor 'ln.\\x1b[2J\\x1b[Hall good\\x0a'", {W("st_escape_name.safetensors")}},
    {"shape [4.0] (a float where the format has integers)", 1, "tensor 'ln.weight': shape[0] is not a non-negative integer", {W("st_float_shape.safetensors")}},
    {"100 tensors the graph does not use", 1, "100 tensors in the file are not used by the graph (the first few are listed above); pass --allow-extra", {W("st_many_extra.safetensors")}},
    {"the same with --allow-extra", 0, "", {"run", "tests/bad/ln.blk", "--weights", "tests/bad/st_many_extra.safetensors", "--allow-extra", "--output", "@OUT"}},
    // --- .npy inputs for ln.blk ([1, 2, 4]) --------------------------------
    {"a valid input", 0, "", {X("npy_valid.npy")}},
    {"float64 ('<f8')", 1, "dtype '<f8' (float64) is not supported", {X("npy_f8.npy")}},
    {"big-endian float32 ('>f4')", 1, "dtype '>f4' (big-endian float32) is not supported", {X("npy_big_endian.npy")}},
    {"int32 ('<i4')", 1, "dtype '<i4' (int32) is not supported", {X("npy_i4.npy")}},
    {"descr '<f472949496' (item size overflowing int; found by fuzz_npy)", 1, "dtype '<f472949496' (unknown dtype) is not supported", {X("npy_descr_overflow.npy")}},
    {"shape [1, 2, 5] for a [1, 2, 4] input", 1, "input has shape [1, 2, 5] but tests/bad/ln.blk expects [1, 2, 4]", {X("npy_wrong_shape.npy")}},
    {"fortran_order True", 1, "fortran_order is True", {X("npy_fortran.npy")}},
    {"6 bytes of data missing", 1, "needs 32 bytes of data but the file has 26", {X("npy_truncated.npy")}},
    {"4 bytes of data too many", 1, "(4 extra bytes at the end)", {X("npy_extra_bytes.npy")}},
    {"\\x93NUMPZ magic", 1, "not a .npy file", {X("npy_bad_magic.npy")}},
    {"format version 9.0", 1, ".npy format version 9.0 is not supported", {X("npy_bad_version.npy")}},
    {"header length 65535 in an 18-byte file", 1, "truncated .npy header", {X("npy_header_past_end.npy")}},
    {"an unterminated shape tuple", 1, "expected ',' or ')' in the shape tuple", {X("npy_bad_header.npy")}},
    {"a structured dtype", 1, "structured dtype", {X("npy_structured.npy")}},
    {"a 0-d array", 1, "shape () is a scalar", {X("npy_scalar.npy")}},
    {"rank 5", 1, "rank 5 is over the limit of 4", {X("npy_rank5.npy")}},
    {"shape (2^32, 2^32)", 1, "is over the limit of 16777216", {X("npy_huge_shape.npy")}},
    {"NaN and inf in the input", 1, "input element 1 is not finite", {X("npy_nan.npy")}},
    {"a header claiming [4096, 4096] with no data (shape checked first)", 1, "input has shape [4096, 4096] but tests/bad/ln.blk expects [1, 2, 4]", {X("npy_shape_first.npy")}},
    // --- paths and usage ----------------------------------------------------------
    {"--output in a directory that does not exist", 1, "cannot write: No such file or directory",
     {"run", "tests/bad/ln.blk", "--output", "@DIR/no/such/dir/y.npy"}},
    {"--output naming an existing directory", 1, "cannot write", {"run", "tests/bad/ln.blk", "--output", "@DIR"}},
    {"a graph file that does not exist", 1, "cannot open: No such file or directory",
     {"run", "@DIR/missing.blk", "--output", "@OUT"}},
    {"a directory as the graph", 1, "not a regular file", {"run", "tests/bad", "--output", "@OUT"}},
    {"a 17 MiB graph (sparse file, made by the test)", 1, "over the limit of 16777216",
     {"run", "@DIR/huge.blk", "--output", "@OUT"}},
    {"a weights file that does not exist", 1, "cannot open", {W("no_such.safetensors")}},
    {"an unknown option", 2, "unknown option '--frobnicate'", {"run", "tests/bad/ln.blk", "--frobnicate", "--output", "@OUT"}},
    {"-D without '='", 2, "-D expects NAME=VALUE", {"run", "tests/bad/ln.blk", "-D", "D", "--output", "@OUT"}},
    {"-D with a C-injection name", 2, "not a valid dim name", {"run", "tests/bad/ln.blk", "-D", "D;system(0)=4", "--output", "@OUT"}},
    {"-D D=2^24+1", 1, "dims must be between 1 and 16777216", {"run", "tests/bad/ln.blk", "-D", "D=16777217", "--output", "@OUT"}},
    {"-D D=-1", 1, "dims must be between 1 and 16777216", {"run", "tests/bad/ln.blk", "-D", "D=-1", "--output", "@OUT"}},
    {"the same -D twice", 2, "-D D=8: this dim was already set with -D", {"run", "tests/bad/ln.blk", "-D", "D=4", "-D", "D=8", "--output", "@OUT"}},
    {"an unknown backend", 2, "unknown backend 'tcc; id'", {"run", "tests/bad/ln.blk", "--backend", "tcc; id", "--output", "@OUT"}},
    {"--threads 0", 2, "--threads expects 1..256, got '0'", {"run", "tests/bad/ln.blk", "--threads", "0", "--output", "@OUT"}},
    {"--threads 100000", 2, "--threads expects 1..256, got '100000'", {"run", "tests/bad/ln.blk", "--threads", "100000", "--output", "@OUT"}},
    {"--threads -1", 2, "--threads expects 1..256", {"bench", "tests/bad/ln.blk", "--threads", "-1"}},
    {"a --seed that is not a number", 2, "--seed expects a non-negative integer", {"run", "tests/bad/ln.blk", "--seed", "1e3", "--output", "@OUT"}},
    {"--output without a value", 2, "option '--output' needs a value", {"run", "tests/bad/ln.blk", "--output"}},
    // --- issue 9: several inputs, cross-attention, lengths, run-time dims -------
    {"causal cross-attention", 1, "causal=true with kv=: only self-attention is masked causally", {G("xattn_causal.blk")}},
    {"a memory of another width", 1, "kv=mem has shape [2, 5, 6]; with queries [2, 3, 4] it must be [B, S, D]", {G("xattn_shape.blk")}},
    {"kv_lengths on self-attention", 1, "kv_lengths= masks the memory of a cross-attention (kv=)", {G("kv_lengths_self.blk")}},
    {"a float value as lengths", 1, "lengths= takes a lengths input (input len : lengths[B]); 'mem' is a float value", {G("lengths_float.blk")}},
    {"lengths used as a value", 1, "'len' is a lengths input: it can only be passed as lengths= or kv_lengths=", {G("lengths_as_value.blk")}},
    {"a run-time dim in an expression", 1, "run-time dim 'T' has no value at compile time", {G("rt_dim_expr.blk")}},
    {"a run-time dim sizing a parameter", 1, "Linear: parameter 'l.weight' would be sized by run-time dim 'D'", {G("rt_dim_param.blk")}},
    {"a run-time dim declared in a loop", 1, "run-time dims (dim T <= ...) must be declared outside loops", {G("rt_dim_in_loop.blk")}},
    {"a length past the sequence", 1, "len[0] = 5 is outside 1..4 (the sequence length of 'x')",
     {"run", "tests/bad/lens.blk", "--input", "len=tests/bad/lengths_range.npy", "--output", "@OUT"}},
    {"a zero length", 1, "len[0] = 0: batch row 0 has no valid position",
     {"run", "tests/bad/lens.blk", "--input", "len=tests/bad/lengths_zero.npy", "--output", "@OUT"}},
    {"float32 lengths", 1, "is not supported for lengths; expected '<i4' or '<i8'",
     {"run", "tests/bad/lens.blk", "--input", "len=tests/bad/lengths_f4.npy", "--output", "@OUT"}},
    {"a sequence longer than its bound", 1, "expects [2, <=4, 4]",
     {"run", "tests/bad/lens.blk", "--input", "x=tests/bad/x_over_bound.npy", "--output", "@OUT"}},
    {"an input name the graph does not have", 2, "has no input 'q' (its inputs: x, len)",
     {"run", "tests/bad/lens.blk", "--input", "q=tests/bad/x_over_bound.npy", "--output", "@OUT"}},
    // --- issue 10: checkpoint families -------------------------------------------
    {"kv_heads not dividing heads", 1, "heads=6 is not divisible by kv_heads=4", {G("kv_heads_indivisible.blk")}},
    {"rotary positions on cross-attention", 1, "rope=true with kv=: rotary positions apply to self-attention only", {G("rope_cross.blk")}},
    {"a layout on a norm (no matrix)", 1, "unknown attribute 'layout' for LayerNorm", {G("layout_on_norm.blk")}},
    {"swiglu without a gate", 1, "act=swiglu is gated: FFN needs gate=G", {G("gated_no_gate.blk")}},
    {"bias=false with a bias in the checkpoint", 1, "unexpected tensor 'l.bias' [4]",
     {"run", "tests/bad/linear_nobias.blk", "--weights", "tests/bad/st_bias_present.safetensors", "--output", "@OUT"}},
    // --- issue 21: token ids ------------------------------------------------------
    {"a token id past the vocabulary (V = 50257)", 1, "input ids: row 0, position 5: token id 50300 is outside 0..50256",
     {"run", "tests/bad/tok.blk", "--input", "tests/bad/ids_range.npy", "--output", "@OUT"}},
    {"a negative token id (int64 file)", 1, "input ids: row 1, position 1: token id -1 is outside 0..50256",
     {"run", "tests/bad/tok.blk", "--input", "tests/bad/ids_negative.npy", "--output", "@OUT"}},
    {"a token id past int32 (int64 file)", 1, "element 1 is 1099511627776, outside the int32 range",
     {"run", "tests/bad/tok.blk", "--input", "tests/bad/ids_int64_huge.npy", "--output", "@OUT"}},
    {"float32 token ids", 1, "expected '<i4' or '<i8'",
     {"run", "tests/bad/tok.blk", "--input", "tests/bad/ids_f4.npy", "--output", "@OUT"}},
    {"token ids of rank 1", 1, "input has shape [3] but tests/bad/tok.blk (tokens input 'ids') expects [2, <=8]",
     {"run", "tests/bad/tok.blk", "--input", "tests/bad/ids_rank1.npy", "--output", "@OUT"}},
    {"a token id past the vocabulary, AOT backend", 1, "token id 50300 is outside 0..50256",
     {"run", "tests/bad/tok.blk", "--backend", "aot", "--input", "tests/bad/ids_range.npy", "--output", "@OUT"}},
    {"token ids fed to LayerNorm", 1, "'ids' is a tokens input (int32 ids): only Embedding reads token ids", {G("tokens_as_value.blk")}},
    {"a float value fed to Embedding", 1, "Embedding reads token ids: 'x' is a float value [1, 2, 4]", {G("embedding_float.blk")}},
    // --- issue 21: positions -----------------------------------------------------
    {"a position past a learned table (max=6, T=7)", 1,
     "position 6 is past the learned Positions table (max=6: parameter 'wpe.weight')",
     {"run", "tests/bad/positions_past_max.blk", "--length", "T=7", "--output", "@OUT"}},
    {"the same through the step entry", 1, "this call covers positions 0..7",
     {"run", "tests/bad/positions_past_max.blk", "--length", "T=8", "--stepwise", "--output", "@OUT"}},
    {"the same on the interpreter", 1, "position 6 is past the learned Positions table",
     {"run", "tests/bad/positions_past_max.blk", "--length", "T=7", "--backend", "interp", "--output", "@OUT"}},
    {"a fixed sequence longer than the table", 1,
     "x [1, 9, 4] has 9 positions on its sequence axis, but max=8", {G("positions_fixed_past_max.blk")}},
    {"an unknown Positions kind", 1, "unknown kind 'rotary' for Positions (expected learned or sinusoidal)",
     {G("positions_kind.blk")}},
    {"a table for the sinusoid", 1, "params= does not apply to kind=sinusoidal", {G("positions_sin_params.blk")}},
    // --- issue 21: blockc generate -------------------------------------------------------
    {"a prompt longer than the bound of T (65 ids, T <= 64)", 1, "the prompt has 65 tokens; examples/generate/tiny_lm.blk holds 64 positions (the bound of T; -D T=N raises it)",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--prompt-ids", "7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7", "--max-new-tokens", "3"}},
    {"a prompt id past the vocabulary (V = 264)", 1, "prompt token 1: id 264 is outside 0..263",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--prompt-ids", "1,264", "--max-new-tokens", "3"}},
    {"prompt ids that are not a list of ids", 2, "--prompt-ids 1;2: expects token ids separated by commas (1,2,3) or a .npy file",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--prompt-ids", "1;2", "--max-new-tokens", "3"}},
    {"float32 prompt ids (.npy)", 1, "expected '<i4' or '<i8'",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--prompt-ids", "tests/bad/ids_f4.npy", "--max-new-tokens", "3"}},
    {"prompt ids of two rows (.npy [2, 6])", 1, "--prompt-ids: shape [2, 6]; expects [n] or [1, n]",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--prompt-ids", "tests/bad/ids_range.npy", "--max-new-tokens", "3"}},
    {"a tokenizer file that is not JSON", 1, "tests/bad/npy_valid.npy",
     {"generate", "examples/generate/tiny_lm.blk", "--random-weights", "1", "--tokenizer", "tests/bad/npy_valid.npy", "--prompt", "hi", "--max-new-tokens", "3"}},
    {"generate on a graph with a float input", 1, "input 'x' is float; generation feeds token ids only",
     {"generate", "tests/bad/ln.blk", "--random-weights", "1", "--prompt-ids", "1", "--max-new-tokens", "3"}},
    // --- issue 22: dropout -------------------------------------------------------------------
    {"Dropout p=1 (p must be in [0, 1))", 1, "Dropout p=1 is outside [0, 1)", {G("dropout_p.blk")}},
    {"FFN dropout=-0.1", 1, "FFN dropout=-0.1 is outside [0, 1)", {G("dropout_ffn.blk")}},
    {"Attention dropout=1.5", 1, "Attention dropout=1.5 is outside [0, 1)", {G("dropout_attn.blk")}},
    {"a negative --dropout-seed", 2, "--dropout-seed expects a non-negative integer, got '-1'",
     {"grad", "tests/bad/ln.blk", "-o", "@DIR/g.safetensors", "--dropout-seed", "-1"}},
    // --- issue 22: losses -----------------------------------------------------------
    {"a CrossEntropy target past the vocabulary (V = 50257)", 1,
     "input targets: row 0, position 5: target 50300 is outside 0..50256 and is not ignore_index -100",
     {"run", "tests/bad/ce_targets.blk", "--input", "targets=tests/bad/ids_range.npy", "--output", "@OUT"}},
    {"a negative target that is not ignore_index, AOT backend", 1,
     "input targets: row 1, position 1: target -1 is outside 0..50256 and is not ignore_index -100",
     {"run", "tests/bad/ce_targets.blk", "--backend", "aot", "--input", "targets=tests/bad/ids_negative.npy", "--output", "@OUT"}},
    {"the same in the emitted backward (grad)", 1, "target 50300 is outside 0..50256",
     {"grad", "tests/bad/ce_targets.blk", "--input", "targets=tests/bad/ids_range.npy", "-o", "@DIR/g.safetensors"}},
    {"every target ignore_index (loss 0, zero gradients)", 0, "",
     {"run", "tests/bad/ce_targets.blk", "--input", "targets=tests/bad/targets_ignored.npy", "--output", "@OUT"}},
    {"float targets for CrossEntropy", 1, "CrossEntropy reads token ids: 't' is a float value [2, 3, 5]",
     {G("ce_float_targets.blk")}},
    {"a loss fed to another node", 1, "'loss' is a scalar (a loss): it can only be a graph output, not an input of Add",
     {G("ce_loss_as_value.blk")}},
    {"one tokens input as ids and targets", 1, "'ids' is already read as ids by Embedding",
     {G("ce_ids_as_targets.blk")}},
    {"label_smoothing outside [0, 1]", 1, "label_smoothing must be in [0, 1], got 2", {G("ce_smoothing.blk")}},
    // Issue 22: blockc train (examples/train/char_lm.blk: V = 256, T <= 128).
#define TR(f) "train", "examples/train/char_lm.blk", "--data", "tests/bad/" f, "--steps", "2", "--batch", "1", "--seq", "8"
    {"an empty token file", 1, "the token file is empty", {TR("train_empty.bin")}},
    {"a token file shorter than one window and a step", 1, "8 tokens is too short for --seq 8", {TR("train_short.bin")}},
    {"an llm.c .bin whose header count passes its end", 1, "the header says 1000 tokens (3024 bytes), the file has 1104 bytes: truncated or corrupt", {TR("train_truncated.bin")}},
    {"a graph file as the token file", 1, "not a token file: neither .npy", {TR("ln.blk")}},
    {"a token id past the vocabulary", 1, "token 60 (byte offset 1144) is 300, outside 0..255 (the graph's vocabulary)", {TR("train_ids_past_v.bin")}},
    {"--seq past the bound of T", 1, "--seq 200 is larger than the bound of T (128); -D T=200 raises it",
     {"train", "examples/train/char_lm.blk", "--data", "tests/bad/train_ok.bin", "--steps", "1", "--batch", "1", "--seq", "200"}},
    {"--resume with a checkpoint of another graph", 1, "missing tensor 'transformer.wte.weight' (expected shape [256, 128])",
     {TR("train_ok.bin"), "--resume", "tests/bad/st_bias_present.safetensors"}},
    {"a loss that goes NaN (--lr 1e30)", 1, "error: step 2: the loss is nan (lower --lr or check the data); stopped",
     {TR("train_ok.bin"), "--lr", "1e30", "--out", "@OUT"}},
#undef TR
    // Issue 22: sequence-to-sequence pair files (examples/train/s2s.blk: V = 32, S, T <= 64).
#define S2S(src, tgt) "train", "examples/train/s2s.blk", "--steps", "2", "--batch", "2", "--data", \
                      "src=tests/bad/" src, "--data", "tgt=tests/bad/" tgt
    {"pair files with different pair counts", 1, "s2s_tgt_3rows.npy: error: 3 pairs (rows), but tests/bad/s2s_src.npy (src) has 4: row i of every file is pair i",
     {S2S("s2s_src.npy", "s2s_tgt_3rows.npy")}},
    {"a 1-D token file for a sequence-to-sequence graph", 1, "s2s_1d.npy: error: a sequence-to-sequence graph reads one 2-D .npy [pairs, length] per token input (row i of every file is pair i); this one has rank 1",
     {S2S("s2s_1d.npy", "s2s_tgt.npy")}},
    {"--data NAME=FILE whose NAME is not a token input", 1, "s2s.blk: error: --data x=tests/bad/s2s_tgt.npy: 'x' is not a token input of the graph (its token inputs: src, tgt)",
     {S2S("s2s_src.npy", "s2s_tgt.npy"), "--data", "x=tests/bad/s2s_tgt.npy"}},
    {"no file for one token input", 1, "s2s.blk: error: no --data file for the token input 'tgt' (give --data tgt=FILE)",
     {"train", "examples/train/s2s.blk", "--steps", "2", "--batch", "2", "--data", "src=tests/bad/s2s_src.npy"}},
    {"a pair id past the vocabulary", 1, "s2s_src_past_v.npy: error: row 1, position 1 (byte offset 156): id 40 is outside 0..31 (the graph's vocabulary) and is not the pad id 0",
     {S2S("s2s_src_past_v.npy", "s2s_tgt.npy")}},
    {"a pair row longer than its dim's bound", 1, "s2s_src_long.npy: error: row 3 has 66 tokens, more than dim S allows (64)",
     {S2S("s2s_src_long.npy", "s2s_tgt.npy")}},
    {"an all-pad pair row", 1, "s2s_src_allpad.npy: error: row 2 is all padding (pad id 0): every pair needs at least one token in each file",
     {S2S("s2s_src_allpad.npy", "s2s_tgt.npy")}},
    {"a pair row with an id after its padding", 1, "s2s_src_gap.npy: error: row 1, position 3: id 9 after the row's first pad id 0 (position 2): rows are right-padded (--pad-id)",
     {S2S("s2s_src_gap.npy", "s2s_tgt.npy")}},
    {"a target row of one token (nothing to predict)", 1, "s2s_tgt_short.npy: error: row 3 has 1 token: the target input needs at least 2 (teacher forcing: inputs row[:-1], targets row[1:])",
     {S2S("s2s_src.npy", "s2s_tgt_short.npy")}},
    {"--seq for a sequence-to-sequence graph", 2, "--seq: a sequence-to-sequence graph takes its sequence lengths from the --data NAME=FILE rows",
     {S2S("s2s_src.npy", "s2s_tgt.npy"), "--seq", "8"}},
#undef S2S
    // Issue 22: init= overrides in the graph file (docs/language.md).
    {"an unknown init scheme", 1, "unknown init scheme 'kaiming'; init= takes zeros, ones, const(c), normal(std)", {G("init_unknown.blk")}},
    {"a negative standard deviation", 1, "normal: the standard deviation must be positive, got -0.02", {G("init_negative.blk")}},
    {"two arguments to uniform()", 1, "uniform(...) takes one argument (the bound a of U(-a, a)), found more", {G("init_arity.blk")}},
    {"a value (not a constant) as the std", 1, "'h' is a value, not a dim: only numbers, dims and loop variables", {G("init_value_arg.blk")}},
    {"init= on a node without parameters (Add)", 1, "Add has no parameters: init= sets the initial values", {G("init_no_params.blk")}},
    {"an unknown init selector (init.out of Attention)", 1, "unknown init selector 'out' for this Attention (did you mean 'o'?); it takes init, init.qkv", {G("init_selector.blk")}},
    {"xavier on a bias", 1, "xavier needs a matrix (it is sized by fan_in + fan_out): 'fc.bias' is [4]", {G("init_xavier_bias.blk")}},
    {"two inits of one shared parameter", 1, "parameter 'fc.weight' gets init=zeros here but init=normal(0.02) earlier", {G("init_tied_conflict.blk")}},
    {"C after an init scheme (`; system(...)`)", 1, "unexpected character ';'", {G("init_inject.blk")}},
    {"valid overrides (init=, init.o=, init.bias=, dims and loop variables in the arguments)", 0, "", {G("init_ok.blk")}},
    // Issue 23: the attention options and Softcap.
    {"an attention window past the dim limit", 1, "window is 99999999999, over the limit of 16777216", {G("attn_window_huge.blk")}},
    {"a denormal soft-cap (1e-45) on the scores and on a value", 0, "", {G("softcap_tiny.blk")}},
    {"C after qk_norm=rms (`; system(...)`)", 1, "unexpected character ';'", {G("qk_norm_inject.blk")}},
    // Issue 23: Param, Act, broadcasting.
    {"a Param over the element limit", 1, "parameter 'w' of shape [65536, 65536] has more than 2147483648 elements (the limit)", {G("param_huge.blk")}},
    {"C after an activation name (`; system(...)`)", 1, "unexpected character ';'", {G("act_inject.blk")}},
    {"a Param that does not broadcast to the stream", 1, "shape mismatch in Add: first input is [1, 2, 4] but second is [3] (one must be the other's shape, a suffix of it, or [1])", {G("param_bcast.blk")}},
    {"a name (nan) as const()'s value", 1, "undefined dim 'nan'", {G("param_const_nan.blk")}},
    // head_dim= (issue 23 follow-up).
    {"a head_dim whose query projection (heads * head_dim) is past the dim limit", 1, "head_dim=8192 with heads=4096 is too wide", {G("attn_head_dim_huge.blk")}},
    {"a head_dim other than D/heads with a packed params= projection", 1, "a packed projection (params=) needs head_dim = D/heads", {G("attn_head_dim_packed.blk")}},
    // GGUF files (issue 25): the runtime's reader and the loader's view.
#define GG(f) "run", "graphs/llama_lm.blk", "--weights", "tests/bad/" f, "--output", "@OUT"
    {"a GGUF file cut inside its metadata", 1, "gguf_truncated.gguf: error: a metadata key is 20 bytes long but only 8 bytes of the file are left", {GG("gguf_truncated.gguf")}},
    {"a GGUF tensor count of 2^40 in a 24-byte file", 1, "1099511627776 tensors cannot fit in a file of 24 bytes (limit 1048576)", {GG("gguf_count_huge.gguf")}},
    {"a GGUF metadata array of arrays", 1, "metadata 'a': an array of arrays (not supported)", {GG("gguf_nested_array.gguf")}},
    {"a GGUF tensor whose bytes run past the end of the file", 1, "tensor 'token_embd.weight': 32 bytes at offset 0 run past the end of the data section (28 bytes)", {GG("gguf_past_end.gguf")}},
    {"a GGUF tensor of an unknown ggml type", 1, "tensor 'token_embd.weight': unknown ggml type 17", {GG("gguf_unknown_type.gguf")}},
    {"a LLaMA GGUF with no head count: its attn_q rows cannot be un-permuted", 1, "cannot be un-permuted for rope: llama.attention.head_count is 0", {GG("gguf_no_heads.gguf")}},
    {"a GGUF tensor of a type blockc cannot convert (Q2_K)", 1, "has dtype Q2_K, expected F32, F16 or BF16 (or in GGUF Q8_0, Q4_0", {GG("gguf_q2k.gguf")}},
    // --- issue 25: weight types and writing GGUF -----------------------------------------
    {"an unknown weight type", 2, "--weight-dtype expects f32, bf16, f16, q8_0 or q4_0, got 'q5'",
     {"run", "tests/bad/ln.blk", "--weight-dtype", "q5", "--output", "@OUT"}},
    {"a weight type for the training step", 2, "emit --weight-dtype q8_0 is for inference: --backward and --train read f32 weights",
     {"emit", "tests/bad/ln.blk", "-o", "@DIR/pair", "--backward", "--weight-dtype", "q8_0"}},
    {"a weight type for gradients", 2, "--weight-dtype", {"grad", "tests/bad/ln.blk", "--weight-dtype", "q8_0", "-o", "@DIR/g.safetensors"}},
    {"GGUF for a graph whose parameters have no llama.cpp names", 1, "parameter 'ln.weight' has no GGUF tensor name in the llama family",
     {"weights", "tests/bad/ln.blk", "-o", "@DIR/w.gguf"}},
    {"Q4_0 rows that are not whole blocks of 32 (D = 48)", 1, "rows of 48 weights are not whole Q4_0 blocks of 32, which ggml needs",
     {"weights", "graphs/llama_lm.blk", "-D", "D=48", "-D", "F=96", "-D", "N=1", "-D", "V=40", "--weight-dtype", "q4_0", "-o", "@DIR/w.gguf"}},
    {"a graph without matrices at q8_0 (nothing to pack)", 0, "", {"run", "tests/bad/ln.blk", "--weight-dtype", "q8_0", "--output", "@OUT"}},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static char *subst(const char *a, const char *dir, const char *out) {
  char buf[4096];
  if (!strcmp(a, "@OUT")) snprintf(buf, sizeof buf, "%s", out);
  else if (!strncmp(a, "@DIR", 4)) snprintf(buf, sizeof buf, "%s%s", dir, a + 4);
  else snprintf(buf, sizeof buf, "%s", a);
  return strdup(buf);
}

typedef struct {
  int status;         // exit code, or 128 + signal (blockc itself exits 0..2)
  char err[16384];    // captured stderr (truncated)
} result;

// Runs blockc with args; stdout discarded, stderr captured.
static void run_blockc(const char *const *args, const char *dir, const char *out, result *r) {
  char *argv[MAXARGS + 2] = {0};
  argv[0] = strdup(tu_blockc());
  int n = 1;
  for (int i = 0; i < MAXARGS && args[i]; i++) argv[n++] = subst(args[i], dir, out);
  r->status = tu_spawn(argv, NULL, 0, r->err, sizeof r->err);
  for (int i = 0; i < n; i++) free(argv[i]);
}

// Number of entries in dir (excluding . and ..).
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void args_str(const hostile *h, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "blockc");
  for (int i = 0; i < MAXARGS && h->argv[i] && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, " %s", h->argv[i]);
}

static void test_catalogue(void **state) {
  (void)state;
  int failures = 0;
  for (int c = 0; c < NCASES; c++) {
    const hostile *h = &cases[c];
    char dir[256], out[300], huge[300];
    tu_tmp_path(dir, sizeof dir, ".d");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(out, sizeof out, "%s/y.npy", dir);
    // The 17 MiB graph: a sparse file (no disk space, no time).
    snprintf(huge, sizeof huge, "%s/huge.blk", dir);
    bool needs_huge = false;
    for (int i = 0; i < MAXARGS && h->argv[i]; i++) needs_huge |= !strcmp(h->argv[i], "@DIR/huge.blk");
    if (needs_huge) {
      int fd = open(huge, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      assert_true(fd >= 0);
      assert_int_equal(ftruncate(fd, (17 << 20)), 0);
      close(fd);
    }
    int before = count_entries(dir);
    result r;
    run_blockc(h->argv, dir, out, &r);
    char cmd[1024];
    args_str(h, cmd, sizeof cmd);
    const char *why = NULL;
    if (r.status >= 128) why = "killed by a signal (crash)";
    else if (r.status != h->code) why = "wrong exit status";
    else if (h->code && !strstr(r.err, h->msg)) why = "message not found";
    else if (strstr(r.err, "runtime error") || strstr(r.err, "Sanitizer")) why = "sanitizer report";
    else if (h->code && access(out, F_OK) == 0) why = "--output was created on failure";
    else if (!h->code && access(out, F_OK) != 0) why = "--output was not created on success";
    else if (count_entries(dir) != before + (h->code ? 0 : 1)) why = "a (temp) file was left behind";
    if (why) {
      print_error("FAIL %s\n  tries: %s\n  %s: status %d (128+ = signal), expected exit %d and '%s'\n  stderr: %s\n",
                  cmd, h->what, why, r.status, h->code, h->msg, r.err);
      failures++;
    }
    unlink(out);
    unlink(huge);
    rmdir(dir);
  }
  assert_int_equal(failures, 0);
}

// Every file in tests/bad/ is in the catalogue and in the doc, so nothing
// is added without being tested and described.
static void test_catalogue_complete(void **state) {
  (void)state;
  DIR *d = opendir("tests/bad");
  assert_non_null(d);
  char *doc = NULL;
  size_t doclen = 0;
  FILE *f = fopen("docs/hostile-inputs.md", "r");
  assert_non_null(f);
  assert_int_equal(getdelim(&doc, &doclen, '\0', f) > 0, 1);
  fclose(f);
  struct dirent *e;
  int missing = 0, seen = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !strcmp(e->d_name, "ln.blk")) continue;
    seen++;
    char want[300];
    snprintf(want, sizeof want, "tests/bad/%s", e->d_name);
    bool found = false;
    for (int c = 0; c < NCASES && !found; c++)
      for (int i = 0; i < MAXARGS && cases[c].argv[i]; i++) {
        const char *a = cases[c].argv[i], *eq = strchr(a, '=');  // --input NAME=FILE
        if (!strcmp(a, want) || (eq && !strcmp(eq + 1, want))) found = true;
      }
    if (!found) print_error("%s is not in the catalogue of test_hostile.c\n", want);
    if (!strstr(doc, e->d_name)) {
      print_error("%s is not in docs/hostile-inputs.md\n", e->d_name);
      found = false;
    }
    missing += !found;
  }
  closedir(d);
  free(doc);
  assert_true(seen > 70);
  assert_int_equal(missing, 0);
}

// ---------------------------------------------------------------------------
// Names that are C keywords, libc symbols or the emitter's own identifiers
// ---------------------------------------------------------------------------

// Model `main`, input `system`, values `workspace`, `__asm__`, `w`, `x`,
// `y`, `printf`, `float`, `ws`, `memcpy`, `pool`, dims `int`, `return`, `void`,
// loop variable `static`, parameter paths `int.return`, `w`, `x`, `y`,
// `workspace.__asm__`.  (Dims, loop variables and values share one
// namespace, so each name appears once among them.)
static const char *evil_graph =
    "model main\n"
    "dim int = 2\n"
    "dim return = 3\n"
    "dim void = 8\n"
    "dim double = 2\n"
    "input system : [int, return, void]\n"
    "w = system\n"
    "x = system\n"
    "for static in 0..2 as layers.{static}.int.return {\n"
    "  workspace = Attention(w, heads=double, causal=true, params=w)\n"
    "  x = Add(x, workspace)\n"
    "  w = LayerNorm(Add(w, workspace), params=x)\n"
    "  printf = FFN(w, hidden=2 * void + 1, act=gelu_tanh, params=(y, workspace.__asm__))\n"
    "  x = Add(x, printf)\n"
    "  w = LayerNorm(Add(w, printf), params=int)\n"
    "}\n"
    "__asm__ = LayerNorm(x, eps=1e-6, params=return)\n"
    "float = Add(w, __asm__, alpha=0.5)\n"
    "ws = LayerNorm(float, affine=false)\n"
    "memcpy = Add(ws, float, beta=-1)\n"
    "pool = Add(memcpy, system)\n"
    "y = Linear(pool, out=void, params=pool)\n"
    "output y\n";

static void test_c_names_do_not_clash(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_string(ctx, "evil.blk", evil_graph, NULL, 0);
  if (!g) fail_msg("parse: %s", errs.buf);
  bc_weights w = {0};
  assert_int_equal(bcW_init_random(ctx, g, 3, &w), BC_OK);
  int64_t nx = bc_shape_numel(&g->vals[g->input].shape);
  int64_t ny = bc_shape_numel(&g->vals[g->output].shape);
  float *x = malloc((size_t)nx * sizeof(float)), *ref = malloc((size_t)ny * sizeof(float));
  float *y = malloc((size_t)ny * sizeof(float));
  bc_rng r;
  bc_rng_seed(&r, 5);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)bc_rng_normal(&r);
  assert_int_equal(bcR_run(ctx, g, &w, x, ref), BC_OK);
  bc_jit *j = NULL;
  bc_forward_fn fn = NULL;
  bc_emit_opts eo = {0};
  int st = cli_compile_jit(ctx, g, &eo, &j, &fn);
  if (st) fail_msg("JIT compile of C-keyword names failed (%d): %s", st, errs.buf);
  void *ws = cli_workspace(ctx, g);
  assert_non_null(ws);
  for (int64_t i = 0; i < ny; i++) y[i] = NAN;
  assert_int_equal(fn((const float *const *)w.p, x, y, ws), 0);
  double ymax = 0;
  for (int64_t i = 0; i < ny; i++) ymax = fmax(ymax, fabs(ref[i]));
  double err = tu_max_abs_diff(y, ref, (size_t)ny);
  // Same tolerance argument as test_jit.c: float32 vs double accumulation
  // over K <= 17 terms per dot product, 2 layers.
  if (!(err <= 1e-5 * (1 + ymax) * 2)) fail_msg("max err %g", err);
  // The emitted C must also survive a model name that is a keyword-ish
  // symbol used twice (`main_forward` must not be emitted as `main`).
  free(ws);
  bcJ_free(j);
  bcW_free(&w);
  free(x);
  free(y);
  free(ref);
  bc_ctx_free(ctx);
}

// The same names through the CLI, with emit-c: the C text must compile
// (checked above) and must not contain the user's names as C identifiers
// at file scope (they could collide with libc or the runtime).
static void test_emitted_c_has_no_user_symbols(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_string(ctx, "evil.blk", evil_graph, NULL, 0);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  bc_emit_opts eo = {0};
  char *c = bcE_emit_c(ctx, g, &eo);
  assert_non_null(c);
  // A user name may appear in comments only: look for it followed by '('
  // or '=' outside comments, the way a definition or a call would.
  static const char *names[] = {"system", "printf", "memcpy", "__asm__", "workspace"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char pat1[64], pat2[64];
    snprintf(pat1, sizeof pat1, " %s(", names[k]);
    snprintf(pat2, sizeof pat2, " %s =", names[k]);
    // Strip comments first.
    char *s = strdup(c), *o = s;
    for (const char *p = c; *p;) {
      if (p[0] == '/' && p[1] == '/') { while (*p && *p != '\n') p++; continue; }
      if (p[0] == '/' && p[1] == '*') { const char *e = strstr(p + 2, "*/"); p = e ? e + 2 : p + strlen(p); continue; }
      *o++ = *p++;
    }
    *o = '\0';
    if (strstr(s, pat1) || strstr(s, pat2))
      fail_msg("emitted C uses the graph name '%s' as a C identifier", names[k]);
    free(s);
  }
  bc_ctx_free(ctx);
}

// Issue 12, item 10: huge finite inputs.  LayerNorm's variance no longer
// overflows (1e30 inputs: the compiled kernel agrees with the double
// reference), softmax subtracts the row max (1e30 scores: a one-hot row).
static void test_overflow_safe_kernels(void **state) {
  (void)state;
  float x[4] = {1e30f, -1e30f, 2e30f, 0}, y[4], r[4];
  bcrt_layernorm(1, 4, x, NULL, NULL, 1e-5f, y);
  memcpy(r, x, sizeof r);
  bcrt_ref_layernorm(1, 4, x, NULL, NULL, 1e-5f, r);
  for (int i = 0; i < 4; i++) {
    if (!isfinite(y[i]) || fabsf(y[i] - r[i]) > 1e-5f) fail_msg("layernorm[%d] = %g, ref %g", i, y[i], r[i]);
  }
  float s[4] = {1e30f, 0, -1e30f, 5};
  bcrt_softmax(1, 4, 4, 0, 0, s);
  assert_true(s[0] == 1.0f && s[1] == 0.0f && s[2] == 0.0f && s[3] == 0.0f);
  // Through the JIT, against the interpreter, on a graph's LayerNorm.
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_string(ctx, "big.blk", "model m\ndim D = 8\ninput x : [2, D]\n"
                                 "y = LayerNorm(x, params=ln)\noutput y\n", NULL, 0);
  assert_non_null(g);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 1, &w), BC_OK);
  float in[16], yi[16], yj[16];
  for (int i = 0; i < 16; i++) in[i] = (float)((i % 5) - 2) * 1e30f;
  assert_int_equal(bcR_run(ctx, g, &w, in, yi), BC_OK);
  bc_jit *j = NULL;
  bc_forward_fn fn = NULL;
  bc_emit_opts eo = {0};
  assert_int_equal(cli_compile_jit(ctx, g, &eo, &j, &fn), BC_OK);
  void *ws = cli_workspace(ctx, g);
  assert_int_equal(fn((const float *const *)w.p, in, yj, ws), 0);
  for (int i = 0; i < 16; i++)
    if (!isfinite(yj[i]) || fabsf(yj[i] - yi[i]) > 1e-5f) fail_msg("jit[%d] = %g, interp %g", i, yj[i], yi[i]);
  free(ws);
  bcJ_free(j);
  bcW_free(&w);
  bc_ctx_free(ctx);
}

// Issue 20, item 6: rows whose values are near FLT_MAX.  Centring on x[0]
// overflowed sum(x - k) (2048/2048 NaN on the JIT and AOT for +-1e36),
// below the round-2 rescaling.  Row 0: +-1e36; row 1: [3.4e38, 0, ...];
// row 2: [1e38, -1e38, ...]; row 3: +-FLT_MAX.
#define HUGE_D 512
static void huge_rows(float *x) {
  for (int j = 0; j < HUGE_D; j++) {
    float s = j % 2 ? -1.0f : 1.0f;
    x[j] = s * 1e36f;
    x[HUGE_D + j] = j ? 0.0f : 3.4e38f;
    x[2 * HUGE_D + j] = s * 1e38f;
    x[3 * HUGE_D + j] = s * FLT_MAX;
  }
}

// Each row of got against want: finite, within tol of the row's largest |want|
// (plus a floor for gradients that are subnormal by nature).
static void same_rows(const char *what, const float *got, const float *want, int n, double tol) {
  for (int i = 0; i < n; i++) {
    double m = 0;
    for (int j = 0; j < HUGE_D; j++) m = fmax(m, fabs(want[i * HUGE_D + j]));
    for (int j = 0; j < HUGE_D; j++) {
      float g = got[i * HUGE_D + j], w = want[i * HUGE_D + j];
      if (!isfinite(g) || !(fabs((double)g - w) <= tol * m + 1e-44))
        fail_msg("%s: row %d [%d] = %g, want %g", what, i, j, g, w);
    }
  }
}

// RMSNorm in double (no weight), the reference of the test.
static void ref_rms(int n, const float *x, float eps, float *y) {
  for (int i = 0; i < n; i++) {
    double ss = 0;
    for (int j = 0; j < HUGE_D; j++) ss += (double)x[i * HUGE_D + j] * x[i * HUGE_D + j];
    double r = 1.0 / sqrt(ss / HUGE_D + eps);
    for (int j = 0; j < HUGE_D; j++) y[i * HUGE_D + j] = (float)(x[i * HUGE_D + j] * r);
  }
}

static void test_huge_rows_kernels(void **state) {
  (void)state;
  enum { N = 4, ND = N * HUGE_D };
  static float x[ND], y[ND], r[ND], zero[ND], xd[ND], sum[ND], dy[ND], dx[ND], rdx[ND];
  static float dw[HUGE_D], rdw[HUGE_D], db[HUGE_D], rdb[HUGE_D];
  huge_rows(x);
  bcrt_ref_layernorm(N, HUGE_D, x, NULL, NULL, 1e-5f, r);
  bcrt_layernorm(N, HUGE_D, x, NULL, NULL, 1e-5f, y);
  same_rows("layernorm", y, r, N, 1e-5);
  bcrt_add_layernorm(N, HUGE_D, 1.0f, x, 1.0f, zero, NULL, NULL, 1e-5f, sum, y);
  same_rows("add_layernorm", y, r, N, 1e-5);
  bcrt_dual_add_layernorm(N, HUGE_D, 1.0f, zero, 1.0f, 0.0f, zero, 1.0f, x, NULL, NULL, 1e-5f,
                          xd, y);
  same_rows("dual_add_layernorm", y, r, N, 1e-5);
  ref_rms(N, x, 1e-6f, r);
  bcrt_rmsnorm(N, HUGE_D, x, NULL, 1e-6f, y);
  same_rows("rmsnorm", y, r, N, 1e-5);
  bcrt_add_rmsnorm(N, HUGE_D, 1.0f, x, 1.0f, zero, NULL, 1e-6f, NULL, y);
  same_rows("add_rmsnorm", y, r, N, 1e-5);
  bcrt_dual_add_rmsnorm(N, HUGE_D, 1.0f, zero, 1.0f, 0.0f, zero, 1.0f, x, NULL, 1e-6f, xd, y);
  same_rows("dual_add_rmsnorm", y, r, N, 1e-5);
  // The backward kernels against the double reference.
  tu_fill(dy, ND, 3);
  for (int rms = 0; rms <= 1; rms++) {
    memset(dx, 0, sizeof dx), memset(rdx, 0, sizeof rdx);
    memset(dw, 0, sizeof dw), memset(rdw, 0, sizeof rdw);
    memset(db, 0, sizeof db), memset(rdb, 0, sizeof rdb);
    bcrt_ref_norm_bwd(N, HUGE_D, rms, x, NULL, 1e-5f, dy, rdx, rdw, rms ? NULL : rdb);
    if (rms)
      bcrt_rmsnorm_bwd(N, HUGE_D, x, NULL, 1e-5f, dy, dx, dw);
    else
      bcrt_layernorm_bwd(N, HUGE_D, x, NULL, 1e-5f, dy, dx, dw, db);
    same_rows(rms ? "rmsnorm_bwd dx" : "layernorm_bwd dx", dx, rdx, N, 1e-4);
    same_rows(rms ? "rmsnorm_bwd dw" : "layernorm_bwd dw", dw, rdw, 1, 1e-4);
  }
}

// The same rows through a graph with every norm form (LayerNorm, RMSNorm,
// DualAddLayerNorm, AddLayerNorm, Add+RMSNorm) on the interpreter, the JIT
// and an AOT module: finite, and each compiled output within 1e-5 of the
// interpreter's (row-relative).
static const char huge_graph[] =
    "model bigrows\ndim D = 512\ninput x : [1, 4, D]\n"
    "u = LayerNorm(x, params=ln)\nv = RMSNorm(x, params=rms)\n"
    "xd = Add(u, x)\nxa = LayerNorm(Add(v, x), params=ln2)\n"
    "z = RMSNorm(Add(u, x), params=rms2)\nq = LayerNorm(Add(x, v), params=ln3)\n"
    "output u\noutput v\noutput xd\noutput xa\noutput z\noutput q\n";

static void test_huge_rows_backends(void **state) {
  (void)state;
  enum { N = 4, ND = N * HUGE_D, NOUT = 6 };
  char dir[256], path[300];
  tu_mktmpdir(dir, sizeof dir, "huge");
  snprintf(path, sizeof path, "%s/huge.blk", dir);
  tu_write_bytes(path, huge_graph, strlen(huge_graph));
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(ctx, path, NULL, 0, false, &g, &c, &h)) fail_msg("%s", errs.buf);
  bc_aot *a;
  tu_aot_build(ctx, &errs, g, c, h, dir, &a);
  bc_compiled jit;
  if (bcD_compile(ctx, g, NULL, &jit)) fail_msg("%s", errs.buf);
  bc_weights w;
  assert_int_equal(bcW_init_random(ctx, g, 5, &w), BC_OK);
  void *ws = cli_workspace(ctx, g);
  static float x[ND], yi[NOUT][ND], yj[NOUT][ND], ya[NOUT][ND];
  huge_rows(x);
  void *io_i[1 + NOUT] = {x}, *io_j[1 + NOUT] = {x}, *io_a[1 + NOUT] = {x};
  for (int k = 0; k < NOUT; k++) io_i[1 + k] = yi[k], io_j[1 + k] = yj[k], io_a[1 + k] = ya[k];
  if (bcR_run_io(ctx, g, &w, io_i, NULL)) fail_msg("%s", errs.buf);
  assert_int_equal(jit.run((const float *const *)w.p, io_j, NULL, ws), 0);
  assert_int_equal(bcA_run(a)((const void *)w.p, io_a, NULL, ws), 0);
  static const char *names[NOUT] = {"u", "v", "xd", "xa", "z", "q"};
  for (int k = 0; k < NOUT; k++) {
    char what[64];
    for (int i = 0; i < ND; i++)
      if (!isfinite(yi[k][i])) fail_msg("interp %s[%d] = %g", names[k], i, yi[k][i]);
    snprintf(what, sizeof what, "jit %s", names[k]);
    same_rows(what, yj[k], yi[k], N, 1e-5);
    snprintf(what, sizeof what, "aot %s", names[k]);
    same_rows(what, ya[k], yi[k], N, 1e-5);
  }
  free(ws);
  bcW_free(&w);
  bcD_free(&jit);
  bcA_free(a);
  bc_ctx_free(ctx);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// A bcrt_source over a FILE, as a vendoring user might write one.
static int read_at(void *h, unsigned long long off, void *buf, unsigned long n) {
  return fseek(h, (long)off, SEEK_SET) == 0 && fread(buf, 1, n, h) == n ? 0 : -1;
}

// Issue 12, item 13 / issue 13: one reader per format.  For every file of
// the catalogue, blockc's message is the runtime reader's (what vendored
// programs ship), with only "path: error: " in front: the compiler layer
// adds no rule of its own.  (.npy: the same with blockc's limits, which the
// compiler passes to the runtime.)
static bool same_verdict(const char *path, int bc, const char *bc_msg, int rt, const bcrt_error *e) {
  char want[2048];
  snprintf(want, sizeof want, "%s: error: %s", path, e->msg);
  char *nl = strchr(want, '\n');  // a .npy header quote: the second line of both
  if (nl) *nl = '\0';
  if ((bc == BC_OK) == (rt == BCRT_OK) && (rt == BCRT_OK || strstr(bc_msg, want) == bc_msg)) return true;
  print_error("%s: blockc %d '%s', runtime %d '%s'\n", path, bc, bc_msg, rt, e->msg);
  return false;
}

static void test_one_reader_per_format(void **state) {
  (void)state;
  DIR *d = opendir("tests/bad");
  assert_non_null(d);
  struct dirent *ent;
  int n = 0, bad = 0;
  while ((ent = readdir(d))) {
    size_t k = strlen(ent->d_name);
    bool st = k >= 12 && !strcmp(ent->d_name + k - 12, ".safetensors");
    bool npy = k >= 4 && !strcmp(ent->d_name + k - 4, ".npy");
    if (!st && !npy) continue;
    char path[300];
    snprintf(path, sizeof path, "tests/bad/%s", ent->d_name);
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bcrt_error e;
    int bc, rt;
    if (st) {
      bc_st_file *f = NULL;
      bcrt_st_file *rf = NULL;
      bc = bcS_open(ctx, path, &f);
      rt = bcrt_st_open(path, &rf, &e);
      bcS_close(f);
      bcrt_st_close(rf);
    } else {
      bc_shape s;
      float *x = NULL;
      void *y = NULL;
      bc = bcN_read(ctx, path, &s, &x);
      free(x);
      const bcrt_npy_limits lim = {BC_MAX_RANK, (long)BC_MAX_DIM, BC_MAX_ELEMS};
      bcrt_npy_info info;
      FILE *fp = fopen(path, "rb");
      assert_non_null(fp);
      assert_int_equal(fseek(fp, 0, SEEK_END), 0);
      bcrt_source src = {fp, (unsigned long long)ftell(fp), read_at};
      rt = bcrt_npy_open_source(&src, BCRT_NPY_F32, &lim, &info, &e);
      if (!rt) rt = bcrt_npy_read_source(&src, &info, &y, &e);
      bcrt_free(y);
      fclose(fp);
    }
    bad += !same_verdict(path, bc, errs.buf, rt, &e);
    n++;
    bc_ctx_free(ctx);
  }
  closedir(d);
  assert_true(n > 50);
  assert_int_equal(bad, 0);
}

// The runtime's .npy writer: a 254-byte file name works (its temp name is
// short and fresh, never "<path>.tmp"), and nothing is left behind.
static void test_runtime_npy_write_names(void **state) {
  (void)state;
  char dir[256], path[600], err[512];
  tu_tmp_path(dir, sizeof dir, ".d");
  assert_int_equal(mkdir(dir, 0700), 0);
  char name[255];
  memset(name, 'n', 250);
  memcpy(name + 250, ".npy", 5);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const float v[3] = {1, 2, 3};
  const long shp[1] = {3};
  assert_int_equal(bcrt_npy_write(path, v, shp, 1, err, sizeof err), BCRT_OK);
  float *got = NULL;
  long rs[BCRT_NPY_MAX_RANK];
  int rank;
  assert_int_equal(bcrt_npy_read(path, &got, rs, &rank, err, sizeof err), BCRT_OK);
  assert_int_equal(rank, 1);
  assert_memory_equal(got, v, sizeof v);
  bcrt_free(got);
  assert_int_equal(count_entries(dir), 1);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  if (getenv("HOSTILE_TABLE")) {
    printf("| # | command | what it tries | exit | expected message (substring) |\n");
    printf("|---|---|---|---|---|\n");
    for (int c = 0; c < NCASES; c++) {
      char cmd[1024];
      args_str(&cases[c], cmd, sizeof cmd);
      printf("| %d | `%s` | %s | %d | %s%s%s |\n", c + 1, cmd, cases[c].what, cases[c].code,
             cases[c].code ? "`" : "", cases[c].code ? cases[c].msg : "(runs; output written)",
             cases[c].code ? "`" : "");
    }
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_catalogue),
      cmocka_unit_test(test_catalogue_complete),
      cmocka_unit_test(test_c_names_do_not_clash),
      cmocka_unit_test(test_emitted_c_has_no_user_symbols),
      cmocka_unit_test(test_overflow_safe_kernels),
      cmocka_unit_test(test_huge_rows_kernels),
      cmocka_unit_test(test_huge_rows_backends),
      cmocka_unit_test(test_one_reader_per_format),
      cmocka_unit_test(test_runtime_npy_write_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
