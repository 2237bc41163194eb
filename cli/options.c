// options.c — the one table of blockc's commands and options.
//
// Every option is one row of `options` (its flag, an alias, the value it
// takes, what it does, and an option it needs), every command one row of
// `commands` (its function, usage line, description and the set of options
// it accepts).  The parser looks every argument up in these tables: a flag
// that is in neither is unknown, a flag the command does not list is a usage
// error naming the flag and the command (so no command silently ignores an
// option), and the value is checked once here.  `help` and `help CMD` print
// from the same rows, so every option a command accepts is in its help
// (test_cli checks it through cli_commands / cli_options).
//
// NAME=FILE (--input, --output, --dy, --dx): the text before the first '='
// is a NAME when it is an identifier; a file whose name has an '=' in it is
// given with a path that does not start with one (./x=y.npy).  The -o of
// emit, weights, dot and grad names one file (or directory) and is never
// NAME=FILE, so `-o x=w.st` writes x=w.st.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define O(id) ((cli_optset)1 << (id))

static const cli_option options[CLI_OPT_COUNT] = {
    [CLI_OPT_DEFINE] = {"-D", NULL, "NAME=VALUE", "override a dim of the graph (repeatable; -DNAME=VALUE too)", 0},
    [CLI_OPT_BACKEND] = {"--backend", NULL, "B", "jit (default), interp (the double reference) or aot (cc -O3)", 0},
    [CLI_OPT_WEIGHTS] = {"--weights", NULL, "FILE", "safetensors or GGUF weights (default: seeded random init)", 0},
    [CLI_OPT_ALLOW_EXTRA] = {"--allow-extra", NULL, NULL, "ignore tensors in --weights that the graph does not use", CLI_OPT_WEIGHTS},
    [CLI_OPT_WEIGHTS_PREFIX] = {"--weights-prefix", NULL, "P", "read parameter NAME from tensor P+NAME (or NAME minus P)", CLI_OPT_WEIGHTS},
    [CLI_OPT_MAX_MEMORY] = {"--max-memory", NULL, "N", "limit on the bytes the command allocates: parameters, workspace, packed copy, KV cache, backward buffers (default 16G; K/M/G/T suffixes)", 0},
    [CLI_OPT_INPUT] = {"--input", NULL, "[NAME=]FILE", ".npy input (float32; lengths and token ids: int32/int64), repeatable; NAME= picks the graph input (default: seeded N(0, 1), full lengths, token ids uniform in 0..V-1); run-time dims come from the arrays' shapes", 0},
    [CLI_OPT_OUTPUT] = {"--output", "-o", "[NAME=]FILE", "write an output as .npy (atomically), repeatable; emit, weights, dot, grad: -o FILE (or DIR), never NAME=", 0},
    [CLI_OPT_LENGTH] = {"--length", NULL, "NAME=VALUE", "a run-time dim's value (1..its bound) when no input array fixes it", 0},
    [CLI_OPT_SEED] = {"--seed", NULL, "S", "seed for random weights and inputs (default 0)", 0},
    [CLI_OPT_THREADS] = {"--threads", NULL, "N", "threads of the matrix products (default 1)", 0},
    [CLI_OPT_ITERS] = {"--iters", NULL, "K", "runs to take the median of (default 20)", 0},
    [CLI_OPT_CC] = {"--cc", NULL, "CC", "the C compiler of the AOT build (default cc)", 0},
    [CLI_OPT_DY] = {"--dy", NULL, "[NAME=]FILE", "dy of an output (default seeded N(0, 1)), repeatable", 0},
    [CLI_OPT_DX] = {"--dx", NULL, "[NAME=]FILE", "write the gradient w.r.t. a float input, repeatable", 0},
    [CLI_OPT_SVG] = {"--svg", NULL, "FILE", "an SVG plot (analyze: every GRAPH given; train: train and val loss)", 0},
    [CLI_OPT_JSON] = {"--json", NULL, NULL, "print JSON", 0},
    [CLI_OPT_PROFILE] = {"--profile", NULL, NULL, "time per node", 0},
    [CLI_OPT_TRAIN] = {"--train", NULL, NULL, "bench: also time the training step (backward) next to its GEMM floor; emit: add the whole training step <model>_train_step (forward, loss, backward, clipping, AdamW/SGD update)", 0},
    [CLI_OPT_DECODE] = {"--decode", NULL, NULL, "prefill time and ms per generated token (KV cache)", 0},
    [CLI_OPT_CONTEXT] = {"--context", NULL, "C", "the prompt length of --decode (default: half the bound)", CLI_OPT_DECODE},
    [CLI_OPT_STEPWISE] = {"--stepwise", NULL, NULL, "feed the inputs through the step entry (KV cache)", 0},
    [CLI_OPT_CHUNK] = {"--chunk", NULL, "K", "positions per step call of --stepwise (default 1)", CLI_OPT_STEPWISE},
    [CLI_OPT_BACKWARD] = {"--backward", NULL, NULL, "add the training step <model>_backward to the pair", 0},
    [CLI_OPT_AFTER] = {"--after", NULL, "PASS", "run the pipeline up to and including PASS first", 0},
    [CLI_OPT_PASSES] = {"--passes", NULL, NULL, "list the passes", 0},
    [CLI_OPT_VERBOSE] = {"--verbose", NULL, NULL, "notes on stderr saying why layers are not in the layer loop", 0},
    [CLI_OPT_TOKENIZER] = {"--tokenizer", NULL, "FILE", "a Hugging Face tokenizer.json, or a GGUF file's tokenizer (docs/tokenizer.md)", 0},
    [CLI_OPT_VOCAB] = {"--vocab", NULL, "FILE", "GPT-2's vocab.json (with --merges), instead of --tokenizer", CLI_OPT_MERGES},
    [CLI_OPT_MERGES] = {"--merges", NULL, "FILE", "GPT-2's merges.txt (with --vocab)", CLI_OPT_VOCAB},
    [CLI_OPT_FILE] = {"--file", NULL, "FILE", "read the text from FILE (bytes as they are) instead of the argument", 0},
    [CLI_OPT_ADD_SPECIAL] = {"--add-special", NULL, NULL, "add the special tokens of the tokenizer's post-processor (Llama's BOS)", 0},
    [CLI_OPT_PROMPT] = {"--prompt", NULL, "TEXT", "the prompt as text (needs --tokenizer, or --weights W.gguf with a tokenizer)", 0},
    [CLI_OPT_PROMPT_IDS] = {"--prompt-ids", NULL, "IDS", "the prompt as token ids: 1,2,3 or an int32/int64 .npy file", 0},
    [CLI_OPT_MAX_NEW_TOKENS] = {"--max-new-tokens", NULL, "N", "tokens to generate at most", 0},
    [CLI_OPT_TEMPERATURE] = {"--temperature", NULL, "T", "divide the logits by T before sampling (default 0: greedy argmax)", 0},
    [CLI_OPT_TOP_K] = {"--top-k", NULL, "K", "sample among the K most likely tokens (default 0: off)", 0},
    [CLI_OPT_TOP_P] = {"--top-p", NULL, "P", "then among the most likely whose probability reaches P (nucleus; default 1: off)", 0},
    [CLI_OPT_STOP] = {"--stop", NULL, "ID", "stop after generating this token id (repeatable)", 0},
    [CLI_OPT_IDS] = {"--ids", NULL, NULL, "print the generated token ids, not text", 0},
    [CLI_OPT_WEIGHTS_C] = {"--weights-c", NULL, NULL, "emit: also write DIR/<model>_weights.c, the weights (--weights, or --seed's) as const C arrays", 0},
    [CLI_OPT_MAIN] = {"--main", NULL, "generate", "emit: also write DIR/generate.c, the text generator of examples/generate/ for this model", 0},
    [CLI_OPT_RANDOM_WEIGHTS] = {"--random-weights", NULL, "SEED", "seeded random weights instead of --weights (offline demos; `blockc weights` writes them)", 0},
    [CLI_OPT_DATA] = {"--data", NULL, "[NAME=]FILE", "train: the training tokens (.npy int32/uint16 1-D, or llm.c .bin)", 0},
    [CLI_OPT_VAL] = {"--val", NULL, "[NAME=]FILE", "train: validation tokens (same formats) for the eval loss", 0},
    [CLI_OPT_STEPS] = {"--steps", NULL, "N", "train: optimizer steps", 0},
    [CLI_OPT_BATCH] = {"--batch", NULL, "B", "train: rows per micro-batch; bench --decode: rows decoded together, each at its own position (both set the graph's batch dim)", 0},
    [CLI_OPT_SEQ] = {"--seq", NULL, "T", "train: tokens per row (1..the bound of the graph's T)", 0},
    [CLI_OPT_LR] = {"--lr", NULL, "LR", "train: peak learning rate (default 3e-4)", 0},
    [CLI_OPT_SCHEDULE] = {"--schedule", NULL, "S", "train: constant (default), linear, cosine or inverse_sqrt", 0},
    [CLI_OPT_WARMUP] = {"--warmup", NULL, "W", "train: linear warm-up steps (default 0)", 0},
    [CLI_OPT_MIN_LR] = {"--min-lr", NULL, "L", "train: the learning rate linear and cosine decay to (default 0)", 0},
    [CLI_OPT_OPTIMIZER] = {"--optimizer", NULL, "O", "train: adamw (default) or sgd (momentum --beta1 when given, else 0)", 0},
    [CLI_OPT_BETA1] = {"--beta1", NULL, "B1", "train: AdamW beta1 (default 0.9); SGD's momentum", 0},
    [CLI_OPT_BETA2] = {"--beta2", NULL, "B2", "train: AdamW beta2 (default 0.999)", 0},
    [CLI_OPT_EPS] = {"--eps", NULL, "E", "train: AdamW epsilon (default 1e-8)", 0},
    [CLI_OPT_WEIGHT_DECAY] = {"--weight-decay", NULL, "WD", "train: decoupled weight decay of rank >= 2 parameters (default 0.01)", 0},
    [CLI_OPT_CLIP] = {"--clip", NULL, "C", "train: clip the global gradient norm to C (default 1.0; 0: off)", 0},
    [CLI_OPT_ACCUM] = {"--accum", NULL, "K", "train: micro-batches per step, gradients averaged (default 1)", 0},
    [CLI_OPT_INIT] = {"--init", NULL, "SCHEME", "train: xavier (default), torch or gpt2 initial weights (seeded; docs/training.md)", 0},
    [CLI_OPT_DATA_ORDER] = {"--data-order", NULL, "ORDER", "train: random (default, seeded windows) or sequential (llm.c's DataLoader)", 0},
    [CLI_OPT_EVAL_EVERY] = {"--eval-every", NULL, "K", "train: eval loss on --val every K steps (default 0: at the end only)", CLI_OPT_VAL},
    [CLI_OPT_EVAL_BATCHES] = {"--eval-batches", NULL, "M", "train: batches of --val per eval (default 8)", CLI_OPT_VAL},
    [CLI_OPT_OUT] = {"--out", NULL, "W.safetensors", "train: the trained weights (+ W.optim.safetensors, the optimizer state)", 0},
    [CLI_OPT_SAVE_EVERY] = {"--save-every", NULL, "K", "train: rewrite --out every K steps (default 0: at the end)", CLI_OPT_OUT},
    [CLI_OPT_RESUME] = {"--resume", NULL, "CKPT", "train: continue from --out's checkpoint CKPT (bit for bit)", 0},
    [CLI_OPT_LOG] = {"--log", NULL, "FILE", "train: one JSON object per step (step, loss, lr, grad_norm, ms, val_loss)", 0},
    [CLI_OPT_STOP_AFTER] = {"--stop-after", NULL, "S", "train: end the run after step S, as an interruption would", 0},
    [CLI_OPT_DROPOUT_SEED] = {"--dropout-seed", NULL, "S", "grad: dropout active, as in a training step, with masks from seed S (default 0 with --step)", 0},
    [CLI_OPT_STEP] = {"--step", NULL, "K", "grad: dropout active, as in training step K (default 0 with --dropout-seed)", 0},
    [CLI_OPT_PAD_ID] = {"--pad-id", NULL, "P", "train: the pad id of 2-D sequence-to-sequence files (default 0)", 0},
    [CLI_OPT_LABEL_SMOOTHING] = {"--label-smoothing", NULL, "E", "train: label smoothing in [0, 1] of the CrossEntropy train adds (default 0; F.cross_entropy's)", 0},
    [CLI_OPT_DECAY] = {"--decay", NULL, "RULE", "train: which parameters weight decay applies to: matrices (default: rank >= 2) or all (llm.c's rule)", 0},
    [CLI_OPT_ADMIN_OMEGA] = {"--admin-omega", NULL, NULL, "analyze: set every Admin omega (Add(Mul(x, omega), f), omega a Param) from one profiling pass, omega_i = sqrt(Var[x_0] + sum_{j<i} Var[f_j]) (Liu et al. 2020), and write every parameter, omegas replaced, to -o W.safetensors", CLI_OPT_OUTPUT},
    [CLI_OPT_WEIGHT_DTYPE] = {"--weight-dtype", NULL, "T", "the matrices of Linear / Attention / FFN (an LM head too) as f32 (default), bf16, f16, q8_0 or q4_0 (llama.cpp's blocks of 32 with a scale; their products quantize the activations to 8 bits, as llama.cpp's): every matrix product reads them so (docs/weight-types.md)", 0},
    [CLI_OPT_NO_DECAY] = {"--no-decay", NULL, "GLOB", "train: no weight decay on the parameters whose name matches GLOB (fnmatch; repeatable), e.g. '*.wte.weight'", 0},
};

// Options every command that loads weights and binds arrays takes.
#define WEIGHTS_OPTS (O(CLI_OPT_WEIGHTS) | O(CLI_OPT_ALLOW_EXTRA) | O(CLI_OPT_WEIGHTS_PREFIX) | \
                      O(CLI_OPT_MAX_MEMORY) | O(CLI_OPT_SEED))
#define RUN_OPTS (O(CLI_OPT_DEFINE) | WEIGHTS_OPTS | O(CLI_OPT_INPUT) | O(CLI_OPT_LENGTH) | \
                  O(CLI_OPT_THREADS))
#define TOK_OPTS (O(CLI_OPT_TOKENIZER) | O(CLI_OPT_VOCAB) | O(CLI_OPT_MERGES))

static const cli_command commands[] = {
    {"check", cli_check, "GRAPH [-D NAME=VALUE]...",
     "validate the graph; print model, dims, nodes, parameters",
     "Parses, unrolls and shape-checks GRAPH and prints one line: model, dims,\n"
     "node count and parameter count. Errors print file:line:col and exit 1.\n",
     O(CLI_OPT_DEFINE), false, false},
    {"dump", cli_dump, "GRAPH [-D NAME=VALUE]... [--after PASS]\n       blockc dump --passes",
     "print the IR (--after PASS: after that pass; --passes: list them)",
     "Prints the IR: one line per node with its output values, shapes, inputs,\n"
     "attributes, parameters and the graph line it came from. --after runs the\n"
     "pipeline up to and including PASS first.\n",
     O(CLI_OPT_DEFINE) | O(CLI_OPT_AFTER) | O(CLI_OPT_PASSES), false, false},
    {"run", cli_run,
     "GRAPH [--backend jit|interp|aot] [--weights W.safetensors]\n"
     "                  [--input [NAME=]X.npy]... [--output [NAME=]Y.npy]... [--seed S]\n"
     "                  [--length NAME=VALUE]... [--threads N] [-D NAME=VALUE]...\n"
     "                  [--stepwise [--chunk K]] [--cc CC]",
     "run the graph and print the output's shape and statistics",
     "Runs GRAPH and prints each output's shape, statistics and timing. Without\n"
     "--weights, parameters are initialised from --seed (xavier-uniform matrices,\n"
     "zero biases, LayerNorm weight 1). Each graph input comes from --input NAME=FILE\n"
     "(a bare FILE when the graph has one float input): float32 arrays, or int32/int64\n"
     "valid lengths for `lengths` inputs and token ids (each 0..V-1) for `tokens`\n"
     "inputs. Inputs not given are N(0, 1); lengths not given are full; token ids not\n"
     "given are seeded uniform in 0..V-1. Run-time dims (dim T <= 2048) take their values from the input\n"
     "arrays' shapes (or --length T=VALUE when no input array fixes them), so one\n"
     "compiled model serves every length up to the bound.\n"
     "--output NAME=FILE writes that output (a bare FILE when there is one output).\n"
     "--backend aot builds the `blockc emit` pair with runtime/blockc_rt.c using\n"
     "--cc CC (default cc) and $BLOCKC_CFLAGS (default -O3 -march=native) into a\n"
     "shared object cached in $BLOCKC_CACHE_DIR, $XDG_CACHE_HOME/blockc or\n"
     "~/.cache/blockc; the runtime is found via $BLOCKC_RUNTIME_DIR, <exe>/../runtime,\n"
     "<exe>/../share/blockc/runtime (installed) or the build-time path.\n"
     "--stepwise feeds the inputs through the step entry (token-by-token decoding\n"
     "with a KV cache) --chunk K positions at a time (default 1) and prints and\n"
     "writes the concatenated outputs: the full forward's, within float summation\n"
     "order (~1e-5 relative).  Graphs whose self-attentions are all causal over a\n"
     "run-time dim only; lengths inputs must be left out.\n",
     RUN_OPTS | O(CLI_OPT_BACKEND) | O(CLI_OPT_OUTPUT) | O(CLI_OPT_STEPWISE) | O(CLI_OPT_CHUNK) |
         O(CLI_OPT_WEIGHT_DTYPE) |
         O(CLI_OPT_CC), false, false},
    {"emit-c", cli_emit_c, "GRAPH [-D NAME=VALUE]... [--verbose]", "print the C that the JIT compiles",
     "Prints the dimension-specialised C that the JIT compiles.\n"
     "--verbose notes on stderr why layers are not in the layer loop (also\n"
     "comments atop the entry).\n", O(CLI_OPT_DEFINE) | O(CLI_OPT_VERBOSE) | O(CLI_OPT_WEIGHT_DTYPE), false, false},
    {"emit", cli_emit, "GRAPH -o DIR [-D NAME=VALUE]... [--backward] [--train] [--verbose] [--main generate]\n"
     "                   [--weights-c [--weights W | --seed S]]",
     "write DIR/<model>.c and DIR/<model>.h for vendoring (AOT)",
     "Writes DIR/<model>.c and DIR/<model>.h (atomically; DIR is created when it\n"
     "does not exist) for vendoring with runtime/blockc_rt.{c,h}. See\n"
     "examples/vendor/README.md. --backward adds the training step\n"
     "<model>_backward (declared in the header with\n"
     "<MODEL>_BACKWARD_WORKSPACE_BYTES).\n"
     "--train adds the whole training step <model>_train_step (and the backward):\n"
     "forward, loss, backward, gradient accumulation, clipping and the AdamW / SGD\n"
     "update, with <MODEL>_TRAIN_STATE_BYTES and <MODEL>_TRAIN_WORKSPACE_BYTES\n"
     "(docs/training.md): a device fine-tunes with the pair and the runtime alone.\n"
     "--verbose notes on stderr why layers are not in the layer loop.\n"
     "--main generate also writes DIR/generate.c, examples/generate/generate.c\n"
     "set to this model (token ids in, logits out): a text generator to build with\n"
     "runtime/blockc_rt.{c,h} and blockc_tok.{c,h} (examples/generate/README.md).\n"
     "--weights-c also writes DIR/<model>_weights.c: the weights (from --weights,\n"
     "or the seeded init of --seed) as const float arrays and <model>_embedded,\n"
     "the weights struct pointing at them, for firmware with no file system:\n"
     "<model>_run(&<model>_embedded.w, &io, ws) (examples/vendor/README.md).\n",
     O(CLI_OPT_DEFINE) | O(CLI_OPT_OUTPUT) | O(CLI_OPT_BACKWARD) | O(CLI_OPT_TRAIN) | O(CLI_OPT_VERBOSE) | O(CLI_OPT_MAIN) |
     O(CLI_OPT_WEIGHTS_C) | O(CLI_OPT_WEIGHTS) | O(CLI_OPT_ALLOW_EXTRA) | O(CLI_OPT_WEIGHTS_PREFIX) | O(CLI_OPT_SEED) |
     O(CLI_OPT_MAX_MEMORY) | O(CLI_OPT_WEIGHT_DTYPE), true, false},
    {"bench", cli_bench,
     "GRAPH [-D NAME=VALUE]... [--length NAME=VALUE]... [--threads N]\n"
     "                    [--iters K] [--json] [--profile] [--train]\n"
     "                    [--decode [--context C] [--batch B]]",
     "time parse/passes/emit, tcc compile, forward vs GEMM-only",
     "Prints parse+passes+emit time, tcc compile time, gcc -O2 compile time of the\n"
     "same C, forward median, GEMM-only median and their ratio.  A run-time dim\n"
     "(dim T <= N) runs at its bound unless --length T=VALUE picks 1..N (-D T=N\n"
     "sets the bound itself); inputs are seeded-random, lengths full.\n"
     "--train also times the training step (the emitted backward) next to its own\n"
     "GEMM floor (JSON keys backward_ms, backward_gemm_ms).\n"
     "--decode times generation through the step entry instead: the prefill of a\n"
     "C-position prompt, then the median ms per single-position step at pos = C,\n"
     "C+1, ... (reusing the KV cache; --iters steps), next to the time of one plain\n"
     "read of every weight (the memory-bandwidth floor) and the ratio; alternating\n"
     "with the prefill, the same prompt through the last-position entry\n"
     "(<model>_step_last: the final norm and LM head for position C-1 only; the\n"
     "`prefill1` line).  JSON keys: prefill_ms (every position's outputs),\n"
     "prefill_last_ms (null when the graph has no such entry), decode_ms_per_token,\n"
     "context, read_floor_ms, decode_over_floor.\n"
     "--batch B decodes B rows together through the per-row step entry (it sets the\n"
     "graph's batch dim): row b at its own position (C, C-1, C-2, C-3, C, ... for\n"
     "b = 0, 1, 2, ...), one call per step; decode_ms_per_token is then the ms per\n"
     "step of B tokens and tokens_per_s = B / that (JSON keys batch, tokens_per_s).\n"
     "The floor counts what a step reads: every matrix (an LM head included) whole,\n"
     "as stored (--weight-dtype: the packed copy's bytes), and of a table only\n"
     "Embedding or learned Positions read, the rows a step gathers (gathered_bytes).\n"
     "With --weight-dtype the forward's GEMM-only floor is the f32 build's.\n",
     RUN_OPTS | O(CLI_OPT_ITERS) | O(CLI_OPT_JSON) | O(CLI_OPT_PROFILE) | O(CLI_OPT_TRAIN) |
         O(CLI_OPT_WEIGHT_DTYPE) |
         O(CLI_OPT_DECODE) | O(CLI_OPT_CONTEXT) | O(CLI_OPT_BATCH) | O(CLI_OPT_CC), false, false},
    {"generate", cli_generate,
     "GRAPH (--weights W | --random-weights SEED) [--tokenizer tokenizer.json]\n"
     "                       (--prompt TEXT | --prompt-ids 1,2,3 | --prompt-ids FILE.npy)\n"
     "                       --max-new-tokens N [--temperature T] [--top-k K] [--top-p P]\n"
     "                       [--seed S] [--stop ID]... [--ids] [--json] [--backend jit|interp|aot]",
     "generate token ids (and text) from a prompt, KV cache",
     "Runs a graph with a token-ids input (`input ids : tokens[1, T]`) and a\n"
     "logits [1, T, V] output: the prompt goes through the step entry in one call\n"
     "(through <model>_step_last, the LM head for its last position only, when the\n"
     "graph has that entry), then each picked token is fed back one position at a time with the KV\n"
     "cache, until --max-new-tokens tokens, a --stop id (the tokenizer's EOS too,\n"
     "with --tokenizer) or the bound of T (said on stderr; -D T=N raises it).\n"
     "A GGUF --weights file's own tokenizer (tokenizer.ggml.*) is used when no\n"
     "--tokenizer is given (a note on stderr says so).\n"
     "Tokens are picked by the runtime's bcrt_sample: --temperature 0 (default)\n"
     "is greedy argmax (lowest id on ties); otherwise logits / T, then --top-k,\n"
     "then --top-p, one draw from xoshiro256** seeded with --seed (blockc_rt.h\n"
     "documents it exactly), the same on every backend.  stdout gets the\n"
     "generated text as it comes (--ids, or no --tokenizer: the ids, space-\n"
     "separated; a stop id is printed as an id but not as text); stderr the\n"
     "timings (prompt tokens and ms, generated tokens and ms per token).  --json\n"
     "prints one object at the end instead (README.md, \"Generate text\").\n"
     "--backend interp has no KV cache: it recomputes the prefix for every token\n"
     "(double precision; the same greedy ids unless two logits tie within float\n"
     "rounding).  --weights-prefix and --allow-extra load a Hugging Face file.\n",
     O(CLI_OPT_DEFINE) | WEIGHTS_OPTS | O(CLI_OPT_THREADS) | O(CLI_OPT_BACKEND) | O(CLI_OPT_CC) |
         O(CLI_OPT_WEIGHT_DTYPE) |
         O(CLI_OPT_JSON) | O(CLI_OPT_TOKENIZER) | O(CLI_OPT_PROMPT) | O(CLI_OPT_PROMPT_IDS) |
         O(CLI_OPT_MAX_NEW_TOKENS) | O(CLI_OPT_TEMPERATURE) | O(CLI_OPT_TOP_K) | O(CLI_OPT_TOP_P) |
         O(CLI_OPT_STOP) | O(CLI_OPT_IDS) | O(CLI_OPT_RANDOM_WEIGHTS),
     false, false},
    {"weights", cli_cmd_weights,
     "GRAPH -o W.safetensors|W.gguf [--weights IN] [--seed S] [--weight-dtype T]\n"
     "                      [--tokenizer FILE | --vocab V --merges M] [-D NAME=VALUE]...",
     "write the weights (seeded, or --weights') as safetensors or GGUF",
     "Writes the parameters `blockc run GRAPH --seed S` initialises (xavier-uniform\n"
     "matrices, zero biases, LayerNorm weight 1), or those of --weights IN (a\n"
     "safetensors or GGUF checkpoint: converting it), named like a PyTorch\n"
     "state_dict.  --weight-dtype bf16|f16|q8_0|q4_0 rounds the matrices through that\n"
     "type first.  W.safetensors: float32 (the rounded values: `run --weights W`\n"
     "computes the T model; f16: the matrices as F16).  W.gguf: GGUF v3 for llama.cpp, for graphs whose\n"
     "parameters all have LLaMA or GPT-2 Hugging Face names (graphs/llama_lm.blk,\n"
     "graphs/gpt2_lm.blk): llama.cpp's tensor names and layouts, the matrices as\n"
     "F32, BF16, F16, Q8_0 or Q4_0 blocks, norms and biases F32, and the dims, norm eps\n"
     "and rope theta as metadata, so `run --weights W.gguf` needs no -D (see\n"
     "docs/checkpoints.md).  --tokenizer FILE (a tokenizer.json, or a GGUF file's\n"
     "tokenizer) or --vocab + --merges puts the tokenizer in W.gguf as llama.cpp's\n"
     "tokenizer.ggml.* metadata, which `generate --weights W.gguf --prompt` reads\n"
     "back to the same ids: GPT-2 and Llama 3 byte-level BPE as model gpt2,\n"
     "SentencePiece BPE (byte fallback) as llama; a tokenizer that would read back\n"
     "differently, or whose vocabulary is not the embedding's rows, is refused.\n"
     "Without them a GGUF IN's tokenizer.* entries are copied (docs/tokenizer.md).\n"
     "Either file is replaced atomically.\n",
     O(CLI_OPT_DEFINE) | O(CLI_OPT_OUTPUT) | O(CLI_OPT_SEED) | O(CLI_OPT_MAX_MEMORY) |
         O(CLI_OPT_WEIGHTS) | O(CLI_OPT_ALLOW_EXTRA) | O(CLI_OPT_WEIGHTS_PREFIX) |
         O(CLI_OPT_WEIGHT_DTYPE) | TOK_OPTS,
     true, false},
    {"dot", cli_cmd_dot, "GRAPH [--after PASS] [-o FILE] [-D NAME=VALUE]...",
     "Graphviz DOT of the graph (--after PASS; -o FILE)",
     "Writes the graph in Graphviz's DOT language (to stdout, or FILE atomically):\n"
     "a box per node with op, attributes, output shapes and fused parts, an ellipse\n"
     "per input and output. Layer loops become clusters, named by the parameter\n"
     "prefix up to the first numeric component (layers.3); nodes without\n"
     "parameters join the cluster of the input computed last. Render it with\n"
     "  blockc dot graphs/residual.blk --after inplace | dot -Tsvg -o residual.svg\n",
     O(CLI_OPT_DEFINE) | O(CLI_OPT_AFTER) | O(CLI_OPT_OUTPUT), true, false},
    {"grad", cli_grad,
     "GRAPH -o GRADS.safetensors [--weights W] [--input [NAME=]X.npy]...\n"
     "                   [--dy [NAME=]DY.npy]... [--dx [NAME=]DX.npy]... [--seed S] [-D N=V]...\n"
     "                   [--backend jit|interp|aot] [--dropout-seed S] [--step K]",
     "gradients of sum(y * dy) (emitted backward or reference)",
     "Computes the gradient of sum(y * dy) and writes every parameter's gradient\n"
     "under the parameter's own name. --dx writes the gradient w.r.t. a float input.\n"
     "Without --dy, dy is seeded N(0, 1) from --seed.  Backends: jit (default) and\n"
     "aot run the emitted training step <model>_backward (float32); interp the\n"
     "reference backward (double).  A node the emitted backward could not take\n"
     "would be an error with --backend jit|aot, and a note and interp without\n"
     "--backend; every op of the language is covered.  Dropout is off (inference\n"
     "behaviour) unless --dropout-seed or --step is given: then every backend drops\n"
     "with the same masks, those of training step K under seed S (<model>_backward_ex).\n",
     RUN_OPTS | O(CLI_OPT_BACKEND) | O(CLI_OPT_OUTPUT) | O(CLI_OPT_DY) | O(CLI_OPT_DX) |
         O(CLI_OPT_CC) | O(CLI_OPT_DROPOUT_SEED) | O(CLI_OPT_STEP), true, false},
    {"analyze", cli_analyze,
     "GRAPH [GRAPH...] [-D N=48]... [--seed S] [--weights W]\n"
     "                      [--input [NAME=]X.npy]... [--length T=K] [--json] [--svg FILE]\n"
     "       blockc analyze GRAPH --admin-omega -o W.safetensors [same options]",
     "per layer: gradient norm, stream RMS, cosine to the previous",
     "Per layer of the outermost `layers.{i}` stack: the norm of the gradient of\n"
     "sum(y * dy) (dy seeded N(0, 1)) w.r.t. the layer's parameters, the RMS of the\n"
     "main stream after the layer, and the mean token-wise cosine between it and the\n"
     "previous layer's.  Inputs: --input [NAME=]X.npy as for run (a float input, a\n"
     "lengths input `len`, token ids), each one not given seeded N(0, 1) from --seed\n"
     "(lengths: full).  The arrays' shapes fix the run-time dims (T = the second\n"
     "axis of x), else --length T=K, else the bound; the report names every input's\n"
     "file (or seed) and shape and each run-time dim's value and what set it.  With\n"
     "one lengths input, padded rows are left out of rms and cos_prev and get dy = 0.\n"
     "--json prints one object per graph (an array for several); --svg FILE plots\n"
     "every graph given.  --admin-omega -o W.safetensors (one GRAPH): Admin's\n"
     "profiled init, omega_i = sqrt(Var[x_0] + sum_{j<i} Var[f_j]) over the input\n"
     "batch for every Add(Mul(x, omega), f), written with every other parameter as\n"
     "analyze used it, for `--weights W.safetensors`.  See docs/analysis.md.\n",
     RUN_OPTS | O(CLI_OPT_JSON) | O(CLI_OPT_SVG) | O(CLI_OPT_OUTPUT) | O(CLI_OPT_ADMIN_OMEGA), true, false},
    {"tokenize", cli_tokenize,
     "--tokenizer tokenizer.json (TEXT | --file FILE) [--add-special]\n"
     "       blockc tokenize --vocab vocab.json --merges merges.txt (TEXT | --file FILE)",
     "print the token ids of a text",
     "Encodes TEXT (or the bytes of FILE) with the tokenizer and prints the ids\n"
     "separated by spaces, then a newline.  No special tokens are added unless\n"
     "--add-special (the post-processor's, e.g. Llama's BOS).  Bytes that are not\n"
     "UTF-8 read as U+FFFD.  Give `--` before a TEXT that starts with '-'.\n"
     "--tokenizer M.gguf: the tokenizer a GGUF file carries (tokenizer.ggml.*).\n"
     "Formats and what is refused: docs/tokenizer.md.\n",
     TOK_OPTS | O(CLI_OPT_FILE) | O(CLI_OPT_ADD_SPECIAL), false, true},
    {"detokenize", cli_detokenize,
     "--tokenizer tokenizer.json IDS...\n"
     "       blockc detokenize --vocab vocab.json --merges merges.txt IDS...",
     "print the text of token ids",
     "Decodes the token ids (separated by spaces or commas, in one argument or\n"
     "many) and prints the text as bytes, without a newline added.  An id outside\n"
     "the vocabulary is an error.\n",
     TOK_OPTS, false, true},
    {"train", cli_train,
     "GRAPH --data TRAIN [--val VAL] --steps N --batch B --seq T\n"
     "      [--lr 3e-4] [--schedule constant|linear|cosine|inverse_sqrt] [--warmup W] [--min-lr L]\n"
     "      [--optimizer adamw|sgd] [--beta1 0.9] [--beta2 0.999] [--eps 1e-8] [--weight-decay 0.01]\n"
     "      [--decay matrices|all] [--no-decay GLOB]...\n"
     "      [--clip 1.0] [--accum K] [--init xavier|torch|gpt2] [--weights INIT.safetensors] [--seed S]\n"
     "      [--data-order random|sequential] [--eval-every K] [--eval-batches M]\n"
     "      [--out W.safetensors] [--save-every K] [--stop-after S] [--resume CKPT]\n"
     "      [--log train.jsonl] [--svg loss.svg] [--backend jit|aot] [--threads N]\n"
     "   or GRAPH --data NAME=FILE ... [--val NAME=FILE ...] [--pad-id 0] --steps N --batch B ...",
     "train the graph on a token file (AdamW/SGD, schedules, checkpoints)",
     "Trains GRAPH's parameters on next-token prediction: a graph with a tokens\n"
     "input `ids` and an output `logits` [B, T, V] gets the loss\n"
     "CrossEntropy(logits, targets) with targets the ids shifted by one.  Each\n"
     "step takes --accum micro-batches of B rows of T+1 tokens from --data\n"
     "(inputs tok[s:s+T], targets tok[s+1:s+T+1]; --data-order sequential:\n"
     "s = ((k*B + r)*T) mod (n - T - 1) for row r of micro-batch k, llm.c's\n"
     "DataLoader; random: s = bcrt_rng_next() mod (n - T - 1), one draw per\n"
     "row from xoshiro256** seeded from --seed), then clips the gradient's\n"
     "global norm and updates (torch.optim.AdamW / SGD).  One progress line per\n"
     "step (every steps/100 on runs past 100 steps); --log writes one JSON\n"
     "object per step.  The step is the emitted <model>_train_step; dropout is\n"
     "active, micro-batch j (0-based, among all drawn) with the masks of (--seed, j).\n"
     "--out writes W.safetensors (the parameters, PyTorch names) and beside it\n"
     "W.optim.safetensors (exp_avg.*, exp_avg_sq.* or momentum_buffer.*, and in its\n"
     "__metadata__ the step, data position and generator state); --resume W\n"
     "continues from them bit for bit.  A non-finite loss or gradient stops the\n"
     "run (exit 1) naming the step; the last checkpoint written is kept.\n"
     "A graph with several token inputs (sequence-to-sequence) takes one 2-D\n"
     ".npy [pairs, L] per token input (--data NAME=FILE; row i of each is pair i,\n"
     "right-padded with --pad-id): the decoder's input gets row[:-1], the\n"
     "targets row[1:], the lengths inputs the rows' lengths.\n"
     "docs/training.md documents every rule.\n",
     O(CLI_OPT_DEFINE) | O(CLI_OPT_WEIGHTS) | O(CLI_OPT_ALLOW_EXTRA) | O(CLI_OPT_WEIGHTS_PREFIX) |
         O(CLI_OPT_MAX_MEMORY) | O(CLI_OPT_SEED) | O(CLI_OPT_THREADS) | O(CLI_OPT_BACKEND) |
         O(CLI_OPT_CC) | O(CLI_OPT_SVG) | O(CLI_OPT_DATA) | O(CLI_OPT_VAL) | O(CLI_OPT_STEPS) |
         O(CLI_OPT_BATCH) | O(CLI_OPT_SEQ) | O(CLI_OPT_LR) | O(CLI_OPT_SCHEDULE) |
         O(CLI_OPT_WARMUP) | O(CLI_OPT_MIN_LR) | O(CLI_OPT_OPTIMIZER) | O(CLI_OPT_BETA1) |
         O(CLI_OPT_BETA2) | O(CLI_OPT_EPS) | O(CLI_OPT_WEIGHT_DECAY) | O(CLI_OPT_CLIP) |
         O(CLI_OPT_ACCUM) | O(CLI_OPT_INIT) | O(CLI_OPT_DATA_ORDER) | O(CLI_OPT_EVAL_EVERY) |
         O(CLI_OPT_EVAL_BATCHES) | O(CLI_OPT_OUT) | O(CLI_OPT_SAVE_EVERY) | O(CLI_OPT_RESUME) |
         O(CLI_OPT_LOG) | O(CLI_OPT_STOP_AFTER) | O(CLI_OPT_PAD_ID) | O(CLI_OPT_LABEL_SMOOTHING) | O(CLI_OPT_DECAY) |
         O(CLI_OPT_NO_DECAY),
     false, false},
};

#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

const cli_option *cli_options(void) { return options; }

const cli_command *cli_commands(int *n) {
  *n = NCOMMANDS;
  return commands;
}

const cli_command *cli_command_find(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, name)) return &commands[i];
  return NULL;
}

bool cli_accepts(const cli_command *c, cli_opt_id id) { return (c->opts >> id) & 1; }

// "  --flag ARG" padded to a column, then the help text wrapped under it.
static void print_option(FILE *out, const cli_option *op) {
  char head[64];
  snprintf(head, sizeof head, "  %s%s%s%s%s", op->alias ? op->alias : "", op->alias ? ", " : "",
           op->flag, op->arg ? " " : "", op->arg ? op->arg : "");
  fprintf(out, "%-30s", head);
  if (strlen(head) >= 30) fprintf(out, "\n%30s", "");
  int col = 30;
  for (const char *p = op->help; *p;) {
    size_t w = strcspn(p, " ");
    if (col > 30 && col + 1 + (int)w > 79) {
      fprintf(out, "\n%30s", "");
      col = 30;
    } else if (col > 30) {
      fputc(' ', out);
      col++;
    }
    fprintf(out, "%.*s", (int)w, p);
    col += (int)w;
    p += w;
    while (*p == ' ') p++;
  }
  fputc('\n', out);
}

void cli_print_usage(FILE *out) {
  fputs("usage: blockc COMMAND GRAPH [options]\n\ncommands:\n", out);
  for (int i = 0; i < NCOMMANDS; i++) {
    char head[32];
    snprintf(head, sizeof head, "  %s%s", commands[i].name, commands[i].no_graph ? "" : " GRAPH");
    fprintf(out, "%-18s%s\n", head, commands[i].summary);
  }
  fputs("  help [COMMAND]    show help (`blockc help run`: run's options)\n\noptions:\n", out);
  for (int id = 0; id < CLI_OPT_COUNT; id++) print_option(out, &options[id]);
  fputs("  --help, --version\n", out);
}

void cli_print_help(FILE *out, const cli_command *c) {
  fprintf(out, "usage: blockc %s %s\n%s\noptions:\n", c->name, c->usage, c->text);
  for (int id = 0; id < CLI_OPT_COUNT; id++)
    if (cli_accepts(c, (cli_opt_id)id)) print_option(out, &options[id]);
}

// Printed through bc_error like every blockc message, so what the argument
// quotes (an option, a file name) is escaped.
__attribute__((format(printf, 1, 0)))
int cli_usage_error(const char *fmt, const char *arg) {
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 2;
  char *full = bc_fmt(ctx, "blockc: error: %s\nTry 'blockc --help'.", fmt);
  if (full) bc_error(ctx, BC_EUSAGE, full, arg);
  bc_ctx_free(ctx);
  return 2;
}

// A message already formatted (it may quote several arguments).
static int usage_msg(const char *msg) { return cli_usage_error("%s", msg); }

// Parses a decimal integer that must fit in [lo, hi].
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// NAME=VALUE into defs (-D, or --length); flag names the option in messages.
static int parse_define_into(bc_define *defs, int *ndefs, const char *flag, const char *arg) {
  char msg[512];
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg)
    return snprintf(msg, sizeof msg, "%s expects NAME=VALUE, got '%s'", flag, arg), usage_msg(msg);
  size_t n = (size_t)(eq - arg);
  for (size_t i = 0; i < n; i++) {
    char c = arg[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i && c >= '0' && c <= '9');
    if (!ok || n > BC_MAX_IDENT)
      return snprintf(msg, sizeof msg, "%s %s: not a valid dim name", flag, arg), usage_msg(msg);
  }
  long long v;
  if (!parse_int(eq + 1, LLONG_MIN, LLONG_MAX, &v))
    return snprintf(msg, sizeof msg, "%s %s: the value must be an integer", flag, arg), usage_msg(msg);
  if (*ndefs == CLI_MAX_DEFS)
    return snprintf(msg, sizeof msg, "too many %s options (limit 64)", flag), usage_msg(msg);
  for (int i = 0; i < *ndefs; i++)
    if (strlen(defs[i].name) == n && !strncmp(defs[i].name, arg, n))
      return snprintf(msg, sizeof msg, "%s %s: this dim was already set with %s (give each dim once)",
                      flag, arg, flag), usage_msg(msg);
  char *name = malloc(n + 1);
  if (!name) return usage_msg("out of memory");
  memcpy(name, arg, n);
  name[n] = '\0';
  defs[(*ndefs)++] = (bc_define){name, v};
  return 0;
}

// A byte count with an optional K, M, G or T suffix (powers of 1024).
static bool parse_bytes(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 1) return false;
  int shift = 0;
  if (*end) {
    const char *u = strchr("KMGT", *end);
    if (!u || end[1]) return false;
    shift = 10 * (int)(u - "KMGT" + 1);
  }
  if (v > (INT64_MAX >> shift)) return false;
  *out = (int64_t)v << shift;
  return true;
}

// [NAME=]FILE (NAME an identifier; `plain`: always a FILE) into f.  The
// first bare one is also kept in *bare (emit's -o DIR, grad's -o).  A name
// (or no name) given twice is a usage error quoting both flags.
static int add_file(cli_file *f, int *n, const char **bare, const char *flag, const char *v,
                    bool plain) {
  char msg[1024];
  if (*n == CLI_MAX_FILES) return cli_usage_error("too many %s options (limit 64)", flag);
  const char *eq = plain ? NULL : strchr(v, '=');
  size_t len = eq ? (size_t)(eq - v) : 0;
  bool named = eq && len > 0 && len <= BC_MAX_IDENT && (isalpha((unsigned char)v[0]) || v[0] == '_');
  for (size_t k = 0; named && k < len; k++)
    named = isalnum((unsigned char)v[k]) || v[k] == '_';
  if (named && !eq[1]) return cli_usage_error("NAME=FILE: the file name is missing in '%s'", v);
  char *name = named ? strndup(v, len) : NULL;
  if (named && !name) return usage_msg("out of memory");
  for (int k = 0; k < *n; k++)
    if ((!name && !f[k].name) || (name && f[k].name && !strcmp(name, f[k].name))) {
      free(name);
      if (named)
        snprintf(msg, sizeof msg, "%s %s and %s %s: %s given twice for the same name", f[k].flag,
                 f[k].arg, flag, v, flag);
      else
        snprintf(msg, sizeof msg, "%s %s and %s %s: %s given twice without a name (one is "
                 "written, the other never)", f[k].flag, f[k].arg, flag, v, flag);
      return usage_msg(msg);
    }
  f[(*n)++] = (cli_file){name, named ? eq + 1 : v, flag, v};
  if (!named && !*bare) *bare = v;
  return 0;
}

// The row of argument a (an option's flag or alias), or -1.
static int find_option(const char *a) {
  for (int id = 0; id < CLI_OPT_COUNT; id++)
    if (!strcmp(a, options[id].flag) || (options[id].alias && !strcmp(a, options[id].alias)))
      return id;
  return -1;
}

static int parse_number(const char *flag, const char *v, long long lo, long long hi,
                        const char *what, long long *out) {
  if (parse_int(v, lo, hi, out)) return 0;
  char msg[512];
  snprintf(msg, sizeof msg, "%s expects %s, got '%s'", flag, what, v);
  return usage_msg(msg);
}

// A finite real in [lo, hi] (open at lo when open_lo).
static int parse_real(const char *flag, const char *v, double lo, double hi, bool open_lo,
                      const char *what, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (!errno && end != v && !*end && d >= lo && d <= hi && (!open_lo || d > lo)) {
    *out = d;
    return 0;
  }
  char msg[512];
  snprintf(msg, sizeof msg, "%s expects %s, got '%s'", flag, what, v);
  return usage_msg(msg);
}

// A single-valued option given a second time.
static int once(const cli_opts *o, cli_opt_id id, const char *flag) {
  if (!o->given[id]) return 0;
  return cli_usage_error("%s given twice (give it once)", flag);
}

// v's index among the NULL-terminated names, or a usage error listing them.
static int pick_name(const char *flag, const char *v, const char *const *names, int *out) {
  for (int k = 0; names[k]; k++)
    if (!strcmp(v, names[k])) return *out = k, 0;
  char msg[512];
  size_t n = (size_t)snprintf(msg, sizeof msg, "%s expects ", flag);
  for (int k = 0; names[k] && n < sizeof msg; k++)
    n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", k ? (names[k + 1] ? ", " : " or ") : "",
                          names[k]);
  if (n < sizeof msg) snprintf(msg + n, sizeof msg - n, ", got '%s'", v);
  return usage_msg(msg);
}

static const char *const sched_names[] = {"constant", "linear", "cosine", "inverse_sqrt", NULL};
static const char *const optim_names[] = {"adamw", "sgd", NULL};
static const char *const init_names[] = {"xavier", "torch", "gpt2", NULL};
static const char *const order_names[] = {"random", "sequential", NULL};
static const char *const decay_names[] = {"matrices", "all", NULL};

// A count option of train into *dst.
static int train_count(const char *flag, const char *v, long long lo, long long hi, long *dst) {
  long long t;
  char what[64];
  snprintf(what, sizeof what, "an integer in %lld..%lld", lo, hi);
  int st = parse_number(flag, v, lo, hi, what, &t);
  if (!st) *dst = (long)t;
  return st;
}

// The options only `blockc train` takes (the defaults are set in cli_parse_args).
static int set_train_option(cli_train_opts *t, cli_opt_id id, const char *flag, const char *v) {
  int k = 0, st;
  switch (id) {
  case CLI_OPT_DATA: return add_file(t->data, &t->ndata, &t->data_bare, flag, v, false);
  case CLI_OPT_VAL:
    if ((st = add_file(t->vals, &t->nval, &t->val_bare, flag, v, false))) return st;
    t->val = t->vals[0].path;
    return 0;
  case CLI_OPT_PAD_ID: {
    long long p;
    if ((st = parse_number(flag, v, INT32_MIN, INT32_MAX, "an int32 id", &p))) return st;
    t->pad_id = p;
    return 0;
  }
  case CLI_OPT_LABEL_SMOOTHING:
    return parse_real(flag, v, 0, 1, false, "a label smoothing in [0, 1]", &t->label_smoothing);
  case CLI_OPT_OUT: t->out = v; return 0;
  case CLI_OPT_RESUME: t->resume = v; return 0;
  case CLI_OPT_LOG: t->log = v; return 0;
  case CLI_OPT_STEPS: return train_count(flag, v, 1, 1000000000, &t->steps);
  case CLI_OPT_BATCH: return train_count(flag, v, 1, BC_MAX_DIM, &t->batch);
  case CLI_OPT_SEQ: return train_count(flag, v, 1, BC_MAX_DIM, &t->seq);
  case CLI_OPT_WARMUP: return train_count(flag, v, 0, 1000000000, &t->warmup);
  case CLI_OPT_ACCUM: return train_count(flag, v, 1, 1000000, &t->accum);
  case CLI_OPT_EVAL_EVERY: return train_count(flag, v, 0, 1000000000, &t->eval_every);
  case CLI_OPT_EVAL_BATCHES: return train_count(flag, v, 1, 1000000, &t->eval_batches);
  case CLI_OPT_SAVE_EVERY: return train_count(flag, v, 0, 1000000000, &t->save_every);
  case CLI_OPT_STOP_AFTER: return train_count(flag, v, 1, 1000000000, &t->stop_after);
  case CLI_OPT_LR: return parse_real(flag, v, 0, 1e30, true, "a learning rate > 0", &t->lr);
  case CLI_OPT_MIN_LR: return parse_real(flag, v, 0, 1e30, false, "a learning rate >= 0", &t->min_lr);
  case CLI_OPT_BETA1: return parse_real(flag, v, 0, 0.999999, false, "a number in [0, 1)", &t->beta1);
  case CLI_OPT_BETA2: return parse_real(flag, v, 0, 0.999999, false, "a number in [0, 1)", &t->beta2);
  case CLI_OPT_EPS: return parse_real(flag, v, 0, 1, true, "a number in (0, 1]", &t->eps);
  case CLI_OPT_WEIGHT_DECAY: return parse_real(flag, v, 0, 1e6, false, "a number >= 0", &t->weight_decay);
  case CLI_OPT_CLIP: return parse_real(flag, v, 0, 1e30, false, "a norm >= 0 (0: off)", &t->clip);
  case CLI_OPT_SCHEDULE:
    if (!(st = pick_name(flag, v, sched_names, &k))) t->schedule = (cli_sched)k;
    return st;
  case CLI_OPT_OPTIMIZER:
    if (!(st = pick_name(flag, v, optim_names, &k))) t->optimizer = (cli_optim)k;
    return st;
  case CLI_OPT_INIT:
    if (!(st = pick_name(flag, v, init_names, &k))) t->init = (cli_init)k;
    return st;
  case CLI_OPT_DECAY:
    if (!(st = pick_name(flag, v, decay_names, &k))) t->decay = (cli_decay)k;
    return st;
  case CLI_OPT_NO_DECAY:
    if (!*v) return usage_msg("--no-decay expects a name pattern, got ''");
    if (t->nno_decay == CLI_MAX_NO_DECAY)
      return cli_usage_error("too many %s options (limit 32)", flag);
    t->no_decay[t->nno_decay++] = v;
    return 0;
  case CLI_OPT_DATA_ORDER:
    if (!(st = pick_name(flag, v, order_names, &k))) t->order = (cli_order)k;
    return st;
  default: break;
  }
  return usage_msg("internal error: a train option without a handler");
}

// Stores the value v of option id (flag as typed).
static int set_option(cli_opts *o, const cli_command *c, cli_opt_id id, const char *flag,
                      const char *v) {
  long long t;
  int st = 0;
  switch (id) {
  case CLI_OPT_DEFINE: return parse_define_into(o->defs, &o->ndefs, "-D", v);
  case CLI_OPT_LENGTH: return parse_define_into(o->lens, &o->nlens, "--length", v);
  case CLI_OPT_BACKEND:
    if (!cli_backend_parse(v, &o->backend))
      return cli_usage_error("unknown backend '%s' (expected jit, interp or aot)", v);
    o->backend_set = true;
    return 0;
  case CLI_OPT_WEIGHTS: o->weights = v; return 0;
  case CLI_OPT_WEIGHT_DTYPE:
    if ((o->weight_type = bc_weight_type_parse(v)) < 0)
      return cli_usage_error("--weight-dtype expects f32, bf16, f16, q8_0 or q4_0, got '%s'", v);
    return 0;
  case CLI_OPT_WEIGHTS_PREFIX: o->weights_prefix = v; return 0;
  case CLI_OPT_ALLOW_EXTRA: o->allow_extra = true; return 0;
  case CLI_OPT_MAX_MEMORY:
    if (!parse_bytes(v, &o->max_memory))
      return cli_usage_error("--max-memory expects a byte count such as 64G, got '%s'", v);
    return 0;
  case CLI_OPT_INPUT: return add_file(o->inputs, &o->ninputs, &o->input, flag, v, false);
  case CLI_OPT_OUTPUT: return add_file(o->outputs, &o->noutputs, &o->output, flag, v, c->plain_output);
  case CLI_OPT_DY: return add_file(o->dys, &o->ndys, &o->dy, flag, v, false);
  case CLI_OPT_DX: return add_file(o->dxs, &o->ndxs, &o->dx, flag, v, false);
  case CLI_OPT_SEED:
    if ((st = parse_number(flag, v, 0, LLONG_MAX, "a non-negative integer", &t))) return st;
    o->seed = (uint64_t)t;
    return 0;
  case CLI_OPT_THREADS:
    if ((st = parse_number(flag, v, 1, 256, "1..256", &t))) return st;
    o->threads = (int)t;
    return 0;
  case CLI_OPT_ITERS:
    if ((st = parse_number(flag, v, 1, 1000000, "1..1000000", &t))) return st;
    o->iters = (int)t;
    return 0;
  case CLI_OPT_CHUNK:
  case CLI_OPT_CONTEXT:
    if ((st = parse_number(flag, v, 1, BC_MAX_DIM, "a positive integer", &t))) return st;
    *(id == CLI_OPT_CHUNK ? &o->chunk : &o->context) = (long)t;
    return 0;
  case CLI_OPT_CC: o->cc = v; return 0;
  case CLI_OPT_SVG: o->svg = v; return 0;
  case CLI_OPT_AFTER: o->after = v; return 0;
  case CLI_OPT_JSON: o->json = true; return 0;
  case CLI_OPT_ADMIN_OMEGA: o->admin_omega = true; return 0;
  case CLI_OPT_PROFILE: o->profile = true; return 0;
  case CLI_OPT_TRAIN: o->train = true; return 0;
  case CLI_OPT_DECODE: o->decode = true; return 0;
  case CLI_OPT_STEPWISE: o->stepwise = true; return 0;
  case CLI_OPT_BACKWARD: o->backward = true; return 0;
  case CLI_OPT_WEIGHTS_C: o->weights_c = true; return 0;
  case CLI_OPT_PASSES: o->list_passes = true; return 0;
  case CLI_OPT_VERBOSE: o->verbose = true; return 0;
  case CLI_OPT_TOKENIZER: o->tokenizer = v; return 0;
  case CLI_OPT_VOCAB: o->vocab = v; return 0;
  case CLI_OPT_MERGES: o->merges = v; return 0;
  case CLI_OPT_FILE: o->text_file = v; return 0;
  case CLI_OPT_ADD_SPECIAL: o->add_special = true; return 0;
  case CLI_OPT_PROMPT: o->prompt = v; return 0;
  case CLI_OPT_PROMPT_IDS: o->prompt_ids = v; return 0;
  case CLI_OPT_MAX_NEW_TOKENS:
    if ((st = parse_number(flag, v, 0, BC_MAX_DIM, "a token count >= 0", &t))) return st;
    o->max_new_tokens = (long)t;
    return 0;
  case CLI_OPT_TOP_K:
    if ((st = parse_number(flag, v, 0, INT32_MAX, "a non-negative integer (0: off)", &t))) return st;
    o->top_k = (int)t;
    return 0;
  case CLI_OPT_STOP:
    if (o->nstop == CLI_MAX_FILES) return usage_msg("too many --stop options (limit 64)");
    if ((st = parse_number(flag, v, 0, INT32_MAX, "a token id", &t))) return st;
    o->stop[o->nstop++] = (int32_t)t;
    return 0;
  case CLI_OPT_TEMPERATURE:
    return parse_real(flag, v, 0, 1e30, false, "a number >= 0 (0: greedy)", &o->temperature);
  case CLI_OPT_TOP_P:
    return parse_real(flag, v, 0, 1, true, "a number in (0, 1] (1: off)", &o->top_p);
  case CLI_OPT_IDS: o->ids = true; return 0;
  case CLI_OPT_MAIN:
    if (strcmp(v, "generate")) return cli_usage_error("--main expects 'generate' (the one program it writes), got '%s'", v);
    o->main_prog = v;
    return 0;
  case CLI_OPT_RANDOM_WEIGHTS:
    if ((st = parse_number(flag, v, 0, LLONG_MAX, "a non-negative integer", &t))) return st;
    o->random_weights = (uint64_t)t;
    return 0;
  case CLI_OPT_DATA: case CLI_OPT_VAL: case CLI_OPT_STEPS: case CLI_OPT_BATCH: case CLI_OPT_SEQ:
  case CLI_OPT_LR: case CLI_OPT_SCHEDULE: case CLI_OPT_WARMUP: case CLI_OPT_MIN_LR:
  case CLI_OPT_OPTIMIZER: case CLI_OPT_BETA1: case CLI_OPT_BETA2: case CLI_OPT_EPS:
  case CLI_OPT_WEIGHT_DECAY: case CLI_OPT_CLIP: case CLI_OPT_ACCUM: case CLI_OPT_INIT:
  case CLI_OPT_DATA_ORDER: case CLI_OPT_EVAL_EVERY: case CLI_OPT_EVAL_BATCHES: case CLI_OPT_OUT:
  case CLI_OPT_SAVE_EVERY: case CLI_OPT_RESUME: case CLI_OPT_LOG: case CLI_OPT_STOP_AFTER:
  case CLI_OPT_PAD_ID: case CLI_OPT_LABEL_SMOOTHING: case CLI_OPT_DECAY: case CLI_OPT_NO_DECAY:
    return set_train_option(&o->tr, id, flag, v);
  case CLI_OPT_DROPOUT_SEED:
    if ((st = parse_number(flag, v, 0, LLONG_MAX, "a non-negative integer", &t))) return st;
    o->drop_seed = (uint64_t)t;
    return 0;
  case CLI_OPT_STEP:
    if ((st = parse_number(flag, v, 0, LLONG_MAX, "a non-negative integer", &t))) return st;
    o->drop_step = (uint64_t)t;
    return 0;
  case CLI_OPT_COUNT: break;
  }
  return usage_msg("internal error: an option without a handler");
}

static bool repeatable(cli_opt_id id) {
  return id == CLI_OPT_DEFINE || id == CLI_OPT_LENGTH || id == CLI_OPT_INPUT ||
         id == CLI_OPT_OUTPUT || id == CLI_OPT_DY || id == CLI_OPT_DX || id == CLI_OPT_STOP ||
         id == CLI_OPT_DATA || id == CLI_OPT_VAL || id == CLI_OPT_NO_DECAY;
}

// One argument (and its value) at argv[*i].
static int parse_one(int argc, char **argv, int *i, const cli_command *c, cli_opts *o) {
  const char *a = argv[*i];
  if (!strncmp(a, "-D", 2) && a[2]) {
    o->given[CLI_OPT_DEFINE] = true;
    return set_option(o, c, CLI_OPT_DEFINE, "-D", a + 2);
  }
  int id = find_option(a);
  if (id < 0) return cli_usage_error("unknown option '%s'", a);
  if (!cli_accepts(c, (cli_opt_id)id)) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s is not an option of 'blockc %s' (it would be ignored; "
             "`blockc help %s` lists its options)", a, c->name, c->name);
    return usage_msg(msg);
  }
  if (!repeatable((cli_opt_id)id) && once(o, (cli_opt_id)id, a)) return 2;
  o->given[id] = true;
  const char *v = NULL;
  if (options[id].arg) {
    if (*i + 1 >= argc) return cli_usage_error("option '%s' needs a value", a);
    v = argv[++*i];
  }
  return set_option(o, c, (cli_opt_id)id, a, v);
}

// Options that only mean something next to another one, and the step
// entry's backend.
static int check_needs(const cli_command *c, const cli_opts *o) {
  char msg[256];
  for (int id = 0; id < CLI_OPT_COUNT; id++) {
    cli_opt_id need = options[id].needs;
    if (o->given[id] && need && !o->given[need]) {
      snprintf(msg, sizeof msg, "%s needs %s (without it, %s would be ignored)", options[id].flag,
               options[need].flag, options[id].flag);
      return usage_msg(msg);
    }
  }
  if (o->stepwise && o->backend == CLI_BACKEND_INTERP)
    return usage_msg("--stepwise with --backend interp: not allowed here (jit or aot)");
  // --cc only reaches the AOT build (run and grad --backend aot, bench's AOT column).
  if (o->cc && strcmp(c->name, "bench") && o->backend != CLI_BACKEND_AOT)
    fprintf(stderr, "blockc: warning: --cc is ignored: only run and grad --backend aot and bench "
            "compile with a C compiler\n");
  return 0;
}

int cli_parse_args(int argc, char **argv, const cli_command *c, cli_opts *o) {
  *o = (cli_opts){.command = c->name, .threads = 1, .iters = 20,
                  .tr = {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                         .weight_decay = 0.01, .clip = 1.0, .accum = 1, .eval_batches = 8}};
  bool many = !strcmp(c->name, "analyze");
  if (c->no_graph && !(o->args = malloc((size_t)argc * sizeof(char *))))
    return usage_msg("out of memory");
  bool dashdash = false;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (c->no_graph && (dashdash || a[0] != '-' || !a[1])) {
      o->args[o->nargs++] = a;
    } else if (c->no_graph && !strcmp(a, "--")) {
      dashdash = true;
    } else if (a[0] == '-' && a[1]) {
      if (parse_one(argc, argv, &i, c, o)) return 2;
    } else if (!o->graph || (many && o->ngraphs < CLI_MAX_FILES)) {
      if (!o->graph) o->graph = a;
      o->graphs[o->ngraphs++] = a;
    } else {
      return cli_usage_error("unexpected argument '%s' (one graph file per command)", a);
    }
  }
  if (!o->graph && !o->list_passes && !c->no_graph) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s: missing GRAPH argument", c->name);
    return usage_msg(msg);
  }
  return check_needs(c, o);
}

void cli_free_opts(cli_opts *o) {
  for (int i = 0; i < o->ndefs; i++) free((char *)o->defs[i].name);
  for (int i = 0; i < o->nlens; i++) free((char *)o->lens[i].name);
  for (int i = 0; i < o->ninputs; i++) free((char *)o->inputs[i].name);
  for (int i = 0; i < o->noutputs; i++) free((char *)o->outputs[i].name);
  for (int i = 0; i < o->ndys; i++) free((char *)o->dys[i].name);
  for (int i = 0; i < o->ndxs; i++) free((char *)o->dxs[i].name);
  for (int i = 0; i < o->tr.ndata; i++) free((char *)o->tr.data[i].name);
  for (int i = 0; i < o->tr.nval; i++) free((char *)o->tr.vals[i].name);
  free(o->args);
  memset(o, 0, sizeof *o);
}
