#!/usr/bin/python3
"""llamacpp_gguf.py - a blockc llama_lm safetensors file as a GGUF file that
llama.cpp's `main` and `llama-bench` load (tools/llamacpp_bench.sh, issue 25's
speed comparison).

    PYTHONPATH=<llama.cpp>/gguf-py python3 tools/llamacpp_gguf.py \
        w.safetensors TYPE out.gguf [-D D=512 ...]

TYPE is f32, f16, q8_0 or q4_0.  The tensors are written as
tools/gguf_check.py writes them (llama.cpp's names, attn_q / attn_k rows
permuted for its rope, ggml's reference quantizers): the matrices of the
layers and the head (output.weight) in TYPE, the norms and the token table
(an untied embedding: a lookup reads one row a token) in F32, the tensors
blockc packs and the ones it keeps float.

llama.cpp's loader also wants a tokenizer, so a dummy SentencePiece vocab
of V tokens is added: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>,
then filler pieces that no text matches.  Any text then tokenizes to one
byte token a byte (byte fallback), so a prompt of n ASCII characters is n
tokens after <s>.  The weights are random, so the generated text is noise:
only the speed is measured.
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_check import gguf_name, load_safetensors, permute, q4_0, q8_0  # noqa: E402

QTYPES = {"q8_0": (q8_0, gguf.GGMLQuantizationType.Q8_0), "q4_0": (q4_0, gguf.GGMLQuantizationType.Q4_0)}


def add_vocab(w, V):
    toks, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]  # UNKNOWN, CONTROL
    for b in range(256):
        toks.append("<0x%02X>" % b)
        scores.append(0.0)
        types.append(6)  # BYTE
    i = 0
    while len(toks) < V:
        toks.append("[filler%d]" % i)
        scores.append(-1000.0 - i)
        types.append(1)  # NORMAL
        i += 1
    w.add_tokenizer_model("llama")
    w.add_token_list(toks[:V])
    w.add_token_scores(scores[:V])
    w.add_token_types(types[:V])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("safetensors")
    ap.add_argument("type", choices=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("out")
    ap.add_argument("-D", action="append", default=[], help="dims (H=, KV=, context T=) the file cannot tell")
    a = ap.parse_args()
    dims = {"H": 8, "KV": 2, "T": 1024}
    for d in a.D:
        k, v = d.split("=")
        dims[k] = int(v)
    hf = load_safetensors(a.safetensors)
    V, D = hf["model.embed_tokens.weight"].shape
    N = 1 + max(int(k.split(".")[2]) for k in hf if k.startswith("model.layers."))
    F = hf["model.layers.0.mlp.gate_proj.weight"].shape[0]

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("blockc llama_lm")
    w.add_context_length(dims["T"])
    w.add_embedding_length(D)
    w.add_block_count(N)
    w.add_feed_forward_length(F)
    w.add_head_count(dims["H"])
    w.add_head_count_kv(dims["KV"])
    w.add_rope_dimension_count(D // dims["H"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type({"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}[a.type])  # llama_ftype
    add_vocab(w, V)
    for name in sorted(hf):
        x = np.ascontiguousarray(hf[name], dtype=np.float32)
        gn = gguf_name("llama", name)
        if gn.endswith("attn_q.weight"):
            x = permute(x, dims["H"])
        elif gn.endswith("attn_k.weight"):
            x = permute(x, dims["KV"])
        if x.ndim == 2 and gn != "token_embd.weight" and a.type != "f32":
            if a.type == "f16":
                w.add_tensor(gn, x.astype(np.float16))
            else:
                fn, t = QTYPES[a.type]
                raw, _ = fn(x)
                w.add_tensor(gn, raw, raw_shape=list(x.shape), raw_dtype=t)
        else:
            w.add_tensor(gn, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("%s: %s D=%d H=%d KV=%d F=%d N=%d V=%d, %d bytes" % (a.out, a.type, D, dims["H"], dims["KV"], F, N, V,
                                                            os.path.getsize(a.out)))


if __name__ == "__main__":
    main()
