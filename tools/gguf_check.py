#!/usr/bin/python3
"""gguf_check.py - GGUF files written by llama.cpp's own `gguf` Python package
load into blockc as the same model as the same weights in safetensors
(issue 25; `make gguf-check`, which puts a llama.cpp snapshot's gguf-py on
PYTHONPATH).

A random LLaMA-style model (D=64 H=4 KV=2 F=128 N=2 V=96, Hugging Face
names and layout) and a GPT-2-style one (D=64 H=4 N=2 V=96 P=32, HF's
Conv1D (in, out) matrices) are written
  - as safetensors, HF's way;
  - as GGUF through gguf.GGUFWriter, the way llama.cpp's converters write
    them: llama.cpp's tensor names and metadata keys, LLaMA's attn_q/attn_k
    rows permuted for llama.cpp's rope (convert.py's permute), GPT-2's
    matrices transposed to (out, in); the matrices as F32, F16, Q8_0 or
    Q4_0 (the quantized bytes from numpy here, with ggml's reference
    rounding; blockc's decoding of them is checked against ggml's own code
    by tools/gguf_ggml_check.c).
For each type the safetensors file holds the floats the GGUF holds (the
quantized matrices dequantized here), and `blockc run` must give
bit-identical logits from both files on the same token ids, with no -D for
the GGUF run (the dims come from its metadata).

Then the other way: files written by `blockc weights GRAPH -o x.gguf`
(seeded, at --weight-dtype f32 and q8_0) are read by gguf-py's GGUFReader:
llama.cpp's tensor names, ne order and types (Q8_0 for the matrices blockc
packs, a tied GPT-2 head's token_embd included; F32 for the rest), the
metadata values, and the tensors (dequantized here, the permutation and
transposition undone) equal, bit for bit, the floats `blockc weights ...
-o x.safetensors` writes at the same type.

Last, the tokenizer a GGUF file carries: a SentencePiece and a byte-level
BPE vocabulary written with GGUFWriter's tokenizer calls (add_token_list,
add_token_scores, add_token_merges, ...), read by `blockc tokenize
--tokenizer x.gguf` into the ids they stand for.

Prints one line per case; exit status 1 on any difference.
"""
import argparse
import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def save_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        hdr[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def q8_0(x):
    """ggml's quantize_row_q8_0_reference: bytes, and the floats they hold."""
    b = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(b).max(axis=1) / np.float32(127)
    inv = np.where(d == 0, np.float32(0), np.float32(1) / np.where(d == 0, 1, d)).astype(np.float32)
    q = np.round(b * inv[:, None]).astype(np.int8)
    dh = d.astype(np.float16)
    raw = np.zeros(len(b), dtype=[("d", "<f2"), ("qs", "i1", (32,))])
    raw["d"], raw["qs"] = dh, q
    return raw.view(np.uint8), (dh.astype(np.float32)[:, None] * q.astype(np.float32)).reshape(x.shape)


def q4_0(x):
    """ggml's quantize_row_q4_0_reference."""
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(axis=1)
    mx = b[np.arange(len(b)), idx]
    d = (mx / np.float32(-8)).astype(np.float32)
    inv = np.where(d == 0, np.float32(0), np.float32(1) / np.where(d == 0, 1, d)).astype(np.float32)
    q = np.minimum(15, (b * inv[:, None] + np.float32(8.5)).astype(np.int32)).astype(np.uint8)
    dh = d.astype(np.float16)
    raw = np.zeros(len(b), dtype=[("d", "<f2"), ("qs", "u1", (16,))])
    raw["d"], raw["qs"] = dh, q[:, :16] | (q[:, 16:] << 4)
    vals = dh.astype(np.float32)[:, None] * (q.astype(np.float32) - 8)
    return raw.view(np.uint8), vals.reshape(x.shape)


def permute(w, heads):
    """convert.py's permute: file row h*dh + 2i + j holds HF row h*dh + j*dh/2 + i."""
    rows = w.shape[0]
    dh = rows // heads
    out = np.empty_like(w)
    for h in range(heads):
        for i in range(dh // 2):
            for j in range(2):
                out[h * dh + 2 * i + j] = w[h * dh + j * (dh // 2) + i]
    return out


def llama_model(rng, D=64, H=4, KV=2, F=128, N=2, V=96):
    hd = D // H
    t = {"model.embed_tokens.weight": rng.standard_normal((V, D)) * 0.5,
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(D), "lm_head.weight": rng.standard_normal((V, D)) * 0.2}
    for i in range(N):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        for n, shp in (("self_attn.q_proj", (H * hd, D)), ("self_attn.k_proj", (KV * hd, D)),
                       ("self_attn.v_proj", (KV * hd, D)), ("self_attn.o_proj", (D, H * hd)),
                       ("mlp.gate_proj", (F, D)), ("mlp.up_proj", (F, D)), ("mlp.down_proj", (D, F))):
            t[p + n + ".weight"] = rng.standard_normal(shp) / np.sqrt(shp[1])
    return {k: v.astype(np.float32) for k, v in t.items()}, dict(D=D, H=H, KV=KV, F=F, N=N, V=V)


LLAMA_NAMES = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
               "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
               "self_attn.o_proj.weight": "attn_output.weight",
               "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
               "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gpt2_model(rng, D=64, H=4, N=2, V=96, P=32):
    F = 4 * D
    t = {"transformer.wte.weight": rng.standard_normal((V, D)) * 0.5,
         "transformer.wpe.weight": rng.standard_normal((P, D)) * 0.1,
         "transformer.ln_f.weight": 1 + 0.1 * rng.standard_normal(D), "transformer.ln_f.bias": 0.1 * rng.standard_normal(D)}
    for i in range(N):
        p = "transformer.h.%d." % i
        for n in ("ln_1", "ln_2"):
            t[p + n + ".weight"] = 1 + 0.1 * rng.standard_normal(D)
            t[p + n + ".bias"] = 0.1 * rng.standard_normal(D)
        for n, (a, b) in (("attn.c_attn", (D, 3 * D)), ("attn.c_proj", (D, D)), ("mlp.c_fc", (D, F)),
                          ("mlp.c_proj", (F, D))):
            t[p + n + ".weight"] = rng.standard_normal((a, b)) / np.sqrt(a)  # Conv1D: (in, out)
            t[p + n + ".bias"] = 0.1 * rng.standard_normal(b)
    return {k: v.astype(np.float32) for k, v in t.items()}, dict(D=D, H=H, N=N, V=V, P=P)


GPT2_NAMES = {"ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias", "attn.c_attn.weight": "attn_qkv.weight",
              "attn.c_attn.bias": "attn_qkv.bias", "attn.c_proj.weight": "attn_output.weight",
              "attn.c_proj.bias": "attn_output.bias", "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
              "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias", "mlp.c_proj.weight": "ffn_down.weight",
              "mlp.c_proj.bias": "ffn_down.bias"}


def gguf_name(family, hf):
    top = {"llama": {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                     "lm_head.weight": "output.weight"},
           "gpt2": {"transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
                    "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"}}[family]
    if hf in top:
        return top[hf]
    parts = hf.split(".")
    k = 2 if family == "llama" else 2
    layer, rest = parts[k], ".".join(parts[k + 1:])
    return "blk.%s.%s" % (layer, (LLAMA_NAMES if family == "llama" else GPT2_NAMES)[rest])


def write_gguf(path, family, hf, dims, qtype):
    """hf: the HF tensors; returns the HF tensors as the file holds them."""
    w = gguf.GGUFWriter(path, family)
    w.add_context_length(dims.get("P", 64))
    w.add_embedding_length(dims["D"])
    w.add_block_count(dims["N"])
    w.add_head_count(dims["H"])
    if family == "llama":
        w.add_feed_forward_length(dims["F"])
        w.add_head_count_kv(dims["KV"])
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_freq_base(10000.0)
    else:
        w.add_feed_forward_length(4 * dims["D"])
        w.add_layer_norm_eps(1e-5)
    held = {}
    for name in sorted(hf):
        x = hf[name]
        gn = gguf_name(family, name)
        transposed = family == "gpt2" and x.ndim == 2 and name.endswith(
            ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        y = x.T.copy() if transposed else x
        if gn.endswith("attn_q.weight"):
            y = permute(y, dims["H"])
        elif gn.endswith("attn_k.weight"):
            y = permute(y, dims["KV"])
        if y.ndim == 2 and qtype != "f32" and not gn.startswith("position_embd"):
            if qtype == "f16":
                w.add_tensor(gn, y.astype(np.float16))
                vals = y.astype(np.float16).astype(np.float32)
            else:
                raw, vals = (q8_0 if qtype == "q8_0" else q4_0)(y)
                t = gguf.GGMLQuantizationType.Q8_0 if qtype == "q8_0" else gguf.GGMLQuantizationType.Q4_0
                w.add_tensor(gn, raw, raw_shape=list(y.shape), raw_dtype=t)
        else:
            w.add_tensor(gn, y.astype(np.float32))
            vals = y.astype(np.float32)
        if gn.endswith("attn_q.weight") or gn.endswith("attn_k.weight"):  # back to HF's rows
            heads = dims["H"] if gn.endswith("attn_q.weight") else dims["KV"]
            rows, dh = vals.shape[0], vals.shape[0] // heads
            back = np.empty_like(vals)
            for h in range(heads):
                for i in range(dh // 2):
                    for j in range(2):
                        back[h * dh + j * (dh // 2) + i] = vals[h * dh + 2 * i + j]
            vals = back
        held[name] = vals.T.copy() if transposed else vals
    if family == "gpt2":  # llama.cpp's GPT-2 converter saves the tied head as output.weight
        x = hf["transformer.wte.weight"]
        if qtype in ("q8_0", "q4_0"):
            raw, _ = (q8_0 if qtype == "q8_0" else q4_0)(x)
            w.add_tensor("output.weight", raw, raw_shape=list(x.shape),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0 if qtype == "q8_0" else gguf.GGMLQuantizationType.Q4_0)
        else:
            w.add_tensor("output.weight", x.astype(np.float16) if qtype == "f16" else x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return held


def run(blockc, graph, weights, out, dims=None, T=7):
    cmd = [blockc, "run", graph, "--weights", weights, "--length", "T=%d" % T, "--seed", "3", "-o", "logits=" + out]
    for k, v in sorted((dims or {}).items()):
        cmd += ["-D", "%s=%d" % (k, v)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(" ".join(cmd) + "\n" + r.stderr)
    return np.load(out), r.stderr


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype="<f4").reshape(v["shape"])
            for k, v in hdr.items() if k != "__metadata__"}


def field_value(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0]


def dequant(t):
    """The reader's tensor as float32 in file order (numpy shape = reversed ne)."""
    shape = [int(x) for x in reversed(list(t.shape))]
    if t.tensor_type == gguf.GGMLQuantizationType.F32:
        return np.array(t.data, dtype=np.float32).reshape(shape)
    assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0, t.tensor_type
    raw = np.frombuffer(np.array(t.data, dtype=np.uint8).tobytes(), dtype=[("d", "<f2"), ("qs", "i1", (32,))])
    return (raw["d"].astype(np.float32)[:, None] * raw["qs"].astype(np.float32)).reshape(shape)


def unpermute(w, heads):
    """The reader's undoing of permute."""
    dh = w.shape[0] // heads
    out = np.empty_like(w)
    for h in range(heads):
        for i in range(dh // 2):
            for j in range(2):
                out[h * dh + j * (dh // 2) + i] = w[h * dh + 2 * i + j]
    return out


def check_written(blockc, d):
    """`blockc weights -o x.gguf` read by gguf-py: returns the number of failures."""
    bad = 0
    cases = (("llama", "graphs/llama_lm.blk", dict(D=64, H=4, KV=2, F=128, N=2, V=96), 1e-6),
             ("gpt2", "graphs/gpt2_lm.blk", dict(D=64, H=4, N=2, V=96, P=32, F=256), 1e-5))
    for family, graph, dims, eps in cases:
        for wt in ("f32", "q8_0"):
            gp, sp = os.path.join(d, "w.gguf"), os.path.join(d, "w.safetensors")
            for out in (gp, sp):
                cmd = [blockc, "weights", graph, "--seed", "5", "--weight-dtype", wt, "-o", out]
                for k, v in sorted(dims.items()):
                    cmd += ["-D", "%s=%d" % (k, v)]
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
                if r.returncode:
                    raise RuntimeError(" ".join(cmd) + "\n" + r.stderr)
            hf = load_safetensors(sp)
            rd = gguf.GGUFReader(gp)
            problems = []
            want_meta = {"general.architecture": family, "general.name": family + "_lm",
                         family + ".embedding_length": dims["D"], family + ".block_count": dims["N"],
                         family + ".attention.head_count": dims["H"], family + ".feed_forward_length": dims["F"],
                         family + ".context_length": dims.get("P", 1024), family + ".vocab_size": dims["V"],
                         "general.file_type": 7 if wt == "q8_0" else 0}
            if family == "llama":
                want_meta.update({"llama.attention.head_count_kv": dims["KV"], "llama.rope.freq_base": 10000.0,
                                  "llama.attention.layer_norm_rms_epsilon": np.float32(eps)})
            else:
                want_meta["gpt2.attention.layer_norm_epsilon"] = np.float32(eps)
            for k, v in want_meta.items():
                got = field_value(rd, k)
                if got != v:
                    problems.append("%s = %r (want %r)" % (k, got, v))
            tensors = {t.name: t for t in rd.tensors}
            want_names = {gguf_name(family, n) for n in hf}
            if set(tensors) != want_names:
                problems.append("names %s" % sorted(set(tensors) ^ want_names))
            for name, x in sorted(hf.items()):
                t = tensors.get(gguf_name(family, name))
                if t is None:
                    continue
                transposed = family == "gpt2" and x.ndim == 2 and name.endswith(
                    ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
                # blockc packs every Linear / Attention / FFN matrix, and GPT-2's tied head (wte)
                packed = wt == "q8_0" and x.ndim == 2 and not name.endswith(
                    ("wpe.weight", "embed_tokens.weight"))
                want_type = gguf.GGMLQuantizationType.Q8_0 if packed else gguf.GGMLQuantizationType.F32
                file_shape = x.T.shape if transposed else x.shape
                if t.tensor_type != want_type:
                    problems.append("%s is %s (want %s)" % (t.name, t.tensor_type.name, want_type.name))
                    continue
                if [int(v) for v in t.shape] != list(reversed(file_shape)):
                    problems.append("%s: ne %s (want %s)" % (t.name, list(t.shape), list(reversed(file_shape))))
                    continue
                y = dequant(t)
                if t.name.endswith("attn_q.weight"):
                    y = unpermute(y, dims["H"])
                elif t.name.endswith("attn_k.weight"):
                    y = unpermute(y, dims["KV"])
                if transposed:
                    y = y.T
                if not np.array_equal(y.view(np.uint32), np.ascontiguousarray(x).view(np.uint32)):
                    problems.append("%s: values differ (max |diff| %.3g)" % (t.name, float(np.abs(y - x).max())))
            nq = sum(t.tensor_type == gguf.GGMLQuantizationType.Q8_0 for t in rd.tensors)
            print("  %-5s %-4s blockc weights -o x.gguf, read by GGUFReader: %d tensors (%d Q8_0), %d metadata "
                  "values: %s" % (family, wt, len(rd.tensors), nq, len(want_meta),
                                  "names, types, shapes, metadata and values as expected (= x.safetensors bit for bit)"
                                  if not problems else "WRONG: " + "; ".join(problems[:6])))
            bad += bool(problems)
    return bad


def bytes_to_unicode():
    """GPT-2's byte -> character map (its encoder.py)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def check_tokenizer(blockc, d):
    """The tokenizer.ggml.* keys as gguf.GGUFWriter writes them (llama.cpp's
    converters' calls): `blockc tokenize --tokenizer x.gguf` reads them."""
    bad = 0
    b2u = bytes_to_unicode()
    sp = "\u2581"
    cases = []
    # SentencePiece ("llama"): scores order the merges ll, ▁h, ▁he, llo, ▁hello
    spm = ["<unk>", "<s>", "</s>", sp, "h", "e", "l", "o", "ll", sp + "h", sp + "he", "llo", sp + "hello", "<0xC3>", "<0xA9>"]
    scores = [0.0] * 8 + [-1.0, -2.0, -3.0, -4.0, -5.0, 0.0, 0.0]
    types = [2, 3, 3] + [1] * 10 + [6, 6]
    def spm_keys(w):
        w.add_tokenizer_model("llama")
        w.add_token_list(spm)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(True)
    cases.append(("llama", spm_keys, "hello h\u00e9llo", "1 12 9 13 14 11"))
    # byte-level BPE ("gpt2", pre gpt-2): 256 byte tokens, then Ġt, he, Ġthe, <|endoftext|>
    bl = [b2u[b] for b in range(256)] + [b2u[32] + "t", "he", b2u[32] + "the", "<|endoftext|>"]
    def gpt2_keys(w):
        w.add_tokenizer_model("gpt2")
        w.add_string("tokenizer.ggml.pre", "gpt-2")
        w.add_token_list(bl)
        w.add_token_merges([b2u[32] + " t", "h e", b2u[32] + "t he"])
        w.add_token_types([1] * 259 + [3])
        w.add_bos_token_id(259)
        w.add_eos_token_id(259)
    cases.append(("gpt2", gpt2_keys, "the the<|endoftext|> 12", "116 257 258 259 32 49 50"))
    for name, keys, text, want in cases:
        path = os.path.join(d, "tok.gguf")
        with contextlib.redirect_stdout(io.StringIO()):
            w = gguf.GGUFWriter(path, name)
            keys(w)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
        p = subprocess.run([blockc, "tokenize", "--tokenizer", path, "--add-special", text], capture_output=True, text=True)
        got = p.stdout.strip()
        ok = p.returncode == 0 and got == want
        print("  tokenizer %-5s (gguf.GGUFWriter): %r -> %s %s" % (name, text, got or p.stderr.strip(), "ok" if ok else "WANT " + want))
        bad += not ok
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    a = ap.parse_args()
    blockc = os.path.abspath(a.blockc)
    bad = 0
    print("gguf_check: llama.cpp's gguf package %s (%s)" % (getattr(gguf, "__version__", "?"), os.path.dirname(gguf.__file__)))
    with tempfile.TemporaryDirectory() as d:
        for family, graph, make in (("llama", "graphs/llama_lm.blk", llama_model), ("gpt2", "graphs/gpt2_lm.blk", gpt2_model)):
            hf, dims = make(np.random.default_rng(7))
            for qtype in ("f32", "f16", "q8_0", "q4_0"):
                gp, sp = os.path.join(d, "m.gguf"), os.path.join(d, "m.safetensors")
                with contextlib.redirect_stdout(io.StringIO()):  # its "for Little Endian only" line
                    held = write_gguf(gp, family, hf, dims, qtype)
                if family == "gpt2":
                    held.pop("lm_head.weight", None)
                save_safetensors(sp, held)
                ya, err = run(blockc, graph, gp, os.path.join(d, "a.npy"))
                yb, _ = run(blockc, graph, sp, os.path.join(d, "b.npy"), dims)
                same = ya.shape == yb.shape and np.array_equal(ya, yb)
                dref = np.abs(np.array(held[[k for k in held if "embed" in k or "wte" in k][0]]) -
                              hf[[k for k in hf if "embed" in k or "wte" in k][0]]).max()
                print("  %-5s %-4s logits %s: GGUF = safetensors %s (max |diff| %.3g; embedding max |q - f32| %.3g)%s" % (
                    family, qtype, "x".join(map(str, ya.shape)), "bit for bit" if same else "DIFFER",
                    float(np.abs(ya - yb).max()) if ya.shape == yb.shape else float("nan"), dref,
                    "" if "dims from the file" in err else "  [no dims note!]"))
                bad += not same or "dims from the file" not in err
                if qtype == "f32":
                    ref = ya
                else:  # the type's error against the f32 weights' logits (random weights: a rough guide)
                    la, lr = ya.reshape(-1, ya.shape[-1]).astype(np.float64), ref.reshape(-1, ref.shape[-1]).astype(np.float64)
                    pa = np.exp(la - la.max(1, keepdims=True)); pa /= pa.sum(1, keepdims=True)
                    pr = np.exp(lr - lr.max(1, keepdims=True)); pr /= pr.sum(1, keepdims=True)
                    kl = float((pr * (np.log(pr) - np.log(pa))).sum(1).mean())
                    print("        vs f32: max |logit diff| / max |logit| %.3g, top-1 agreement %.0f%%, mean KL(f32 || %s) %.3g" % (
                        float(np.abs(la - lr).max() / np.abs(lr).max()), 100 * float((la.argmax(1) == lr.argmax(1)).mean()), qtype, kl))
        bad += check_written(blockc, d)
        bad += check_tokenizer(blockc, d)
    print("gguf_check: %s" % ("FAILED" if bad else "every case bit-identical"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
