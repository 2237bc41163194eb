#!/usr/bin/python3
"""torch_export.py - the PyTorch side of blockc's conformance tests.

Builds a Transformer encoder stack in PyTorch, fills it with seeded random
weights, runs it on a seeded random input and writes everything blockc needs
to reproduce the run, plus PyTorch's answer:

    DIR/weights.safetensors   every parameter, float32, named exactly like
                              the model's state_dict keys
    DIR/input.npy             float32 [B, T, D], seeded N(0, 1)
    DIR/expected.npy          PyTorch's output in float32 (as a user gets it)
    DIR/expected64.npy        the same model cast to float64 (stored as float64):
                              the "true" answer, used to tell blockc's rounding
                              error apart from PyTorch's own float32 error
    DIR/meta.json             the arguments, torch version, PyTorch's own
                              float32-vs-float64 error

Run it with Debian's python (it has torch 1.13 and numpy; no pip packages):

    /usr/bin/python3 tools/torch_export.py --wiring post_ln --B 1 --T 5 --D 8 \\
        --H 2 --F 16 --N 2 --act relu [--causal] [--padded] --seed 1 --out DIR
    /usr/bin/python3 tools/torch_export.py --wiring decoder_post_ln --B 3 --T 7 \\
        --S 5 --D 12 --H 3 --F 20 --N 2 [--padded] --seed 1 --out DIR

Encoder wirings (parameter names in brackets, i = layer index):

  post_ln   nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, F, dropout=0,
            activation=act, batch_first=True, norm_first=False), N), no final
            norm.  x = norm1(x + SA(x)); x = norm2(x + FFN(x))
            [layers.i.self_attn.in_proj_weight (3D,D), .in_proj_bias (3D),
             layers.i.self_attn.out_proj.weight (D,D), .bias, layers.i.linear1
             .weight (F,D) .bias, layers.i.linear2.weight (D,F) .bias,
             layers.i.norm1.weight/.bias, layers.i.norm2.weight/.bias]
  pre_ln    the same with norm_first=True and norm=nn.LayerNorm(D) [+ norm.*]
            x = x + SA(norm1(x)); x = x + FFN(norm2(x)); y = norm(x)
  pre_ln_nonorm  norm_first=True with TransformerEncoder's default norm=None
            (no final norm; post_ln's names)
  residual  ResiDual (Xie et al. 2023), plain PyTorch reusing the layer's
            submodules, final nn.LayerNorm(D, eps=1e-7) named `norm`:
            xa = xd = x; per sublayer f: u = f(xa); xd = xd + u;
            xa = LN_sub(xa + u); y = xa + norm(xd)
  deepnorm  DeepNet Post-LN, alpha = (2N)^(1/4): x = norm1(alpha*x + SA(x));
            x = norm2(alpha*x + FFN(x)); no final norm; post_ln's names.
            (Weights are random, not DeepNet's beta-scaled init: the forward
            pass is what is being tested.)
  peri_ln   x = x + post_attn_norm(SA(norm1(x)));
            x = x + post_ffn_norm(FFN(norm2(x))); y = norm(x)
            [+ layers.i.post_attn_norm.*, layers.i.post_ffn_norm.*, norm.*]

Encoder-decoder wirings (always with the causal tgt_mask on self-attention;
inputs x [B,T,D] and mem [B,S,D], or src [B,S,D] and tgt [B,T,D]):

  decoder_post_ln   nn.TransformerDecoder(nn.TransformerDecoderLayer(...,
            norm_first=False), N), no final norm.  [layers.i.self_attn.*,
            layers.i.multihead_attn.* (same shapes), linear1/linear2,
            norm1/norm2/norm3]  x = norm1(x + SA(x)); x = norm2(x + CA(x, mem));
            x = norm3(x + FFN(x))
  decoder_pre_ln    norm_first=True with norm=nn.LayerNorm(D) [+ norm.*]
  decoder_residual  the ResiDual decoder (ResiDualDecoder below, from the
            reference code): three sublayers (SA, CA, FFN) per layer on the
            dual stream, norm1/norm2/norm3 after each, final `norm` eps 1e-7
  transformer       nn.Transformer(D, H, N, N, F, dropout=0, batch_first=True):
            Post-LN encoder + encoder.norm, Post-LN decoder + decoder.norm
            [encoder.layers.i.*, encoder.norm.*, decoder.layers.i.*, decoder.norm.*]

Padded batches (--padded, or lengths=/padded= from Python): seeded valid
lengths per batch row (row 0 full, at least one row padded) are written as
int64 .npy (len.npy for encoders; len/mem_len or src_len/tgt_len for the
encoder-decoder wirings) and passed to PyTorch as src_key_padding_mask /
tgt_key_padding_mask / memory_key_padding_mask (True = padded).  Padded rows
of the float inputs hold random values too, so a mask leak shows.  Only the
rows t < length of the outputs are meaningful: PyTorch 1.13's encoder fast
path (eval, no grad) returns zeros there, blockc something else.

Activations: relu, gelu (exact erf form) and gelu_tanh.  torch 1.13's
nn.TransformerEncoderLayer has no string for the tanh approximation, so
gelu_tanh is passed as a callable (F.gelu(x, approximate='tanh')); that also
works for post_ln/pre_ln but turns off PyTorch's fused fast path there.

All models run in eval mode with dropout=0, batch_first=True, float32 and
torch.set_num_threads(1), under torch.no_grad() - i.e. the way a user runs
inference (post_ln/pre_ln take PyTorch's fused fast path when it applies,
padded batches as nested tensors).  The float64 reference is the same model
cast with .double().
--causal passes the explicit mask triu(full((T, T), -inf), diagonal=1)
(PyTorch 1.13 has no is_causal).  Every parameter of every layer is
re-initialized from the seed (TransformerEncoder deep-copies one layer, so
they would otherwise start identical): matrices N(0, 1/fan_in), linear and
attention biases 0.1*N(0,1), LayerNorm weight 1 + 0.1*N(0,1), bias 0.1*N(0,1).

Exporting your own trained model
--------------------------------
    /usr/bin/python3 tools/torch_export.py --from-state-dict model.pt \\
        --out weights.safetensors [--strip-prefix encoder.] [--norm-first true|false]

model.pt is what `torch.save(model.state_dict(), "model.pt")` wrote for an
nn.TransformerEncoder, nn.TransformerDecoder or nn.Transformer (a pickled
whole module also works, and records norm_first and the activation).  Every floating
tensor is written as F32 under its state_dict key; --strip-prefix removes a
leading prefix when the encoder sits inside a bigger model (e.g. the keys are
"encoder.layers.0...").  The dimensions it can read off the shapes (D, F, N)
are printed with a ready-to-edit blockc command line for each graph that
fits (suggest_graphs()); H (the head count) is not recorded in a state_dict,
so you must supply it.  norm_first is not recorded either, and it decides the
graph (an encoder without a final norm is post_ln.blk for norm_first=False
but pre_ln_nonorm.blk for norm_first=True - same keys): pass --norm-first,
or read both suggestions.  E.g. for an nn.TransformerDecoder:

    build/blockc run graphs/decoder_post_ln.blk -D B=2 -D D=512 -D H=8 \\
        -D F=2048 -D N=6 --weights weights.safetensors --input x=x.npy \\
        --input mem=mem.npy [--input len=len.npy --input mem_len=mem_len.npy] \\
        --output y=y.npy

(T and S come from the arrays' shapes, up to the graph's bound, 128; -D T=...
raises it.  The graphs use act=relu - change it to act=gelu if your layer was
built with activation="gelu".)

Self-check
----------
    /usr/bin/python3 tools/torch_export.py --self-check

verifies this tool without blockc: reads every written file back with an
independent safetensors/npy reader and checks the bytes, and compares every
wiring (all activations, causal or not, several shapes) against a direct
float64 numpy implementation of the formulas above (hand-written attention,
LayerNorm, FFN) - which in particular checks that nn.TransformerEncoder
(post_ln, pre_ln) is the formula the graphs implement.

The module is also imported by tools/conformance.py (export_case()), so a
whole sweep needs only one torch import.
"""

import argparse
import copy
import json
import math
import os
import struct
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - environment problem
    sys.stderr.write(
        "torch_export.py: error: cannot import torch or numpy with %s\n"
        "  use Debian's python: /usr/bin/python3 (packages python3-torch, "
        "python3-numpy; `make pydeps` installs them)\n" % sys.executable)
    raise SystemExit(2)

# PyTorch 1.13 warns once that nested tensors (its padded-encoder fast path)
# are a prototype; that is PyTorch's business, not a finding.
import warnings  # noqa: E402
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")

WIRINGS = ("post_ln", "pre_ln", "residual", "deepnorm", "peri_ln", "pre_ln_nonorm")
# Encoder-decoder wirings: two float inputs (and optional lengths inputs).
SEQ2SEQ = ("decoder_post_ln", "decoder_pre_ln", "decoder_residual", "transformer")
ALL_WIRINGS = WIRINGS + SEQ2SEQ
ACTS = ("relu", "gelu", "gelu_tanh")
RESIDUAL_FINAL_EPS = 1e-7
LN_EPS = 1e-5


# ---------------------------------------------------------------------------
# safetensors / npy writing
# ---------------------------------------------------------------------------
def write_safetensors(path, tensors, metadata=None):
    """Writes {name: array-like} as float32 safetensors (atomic replace).

    Layout: u64 little-endian header length N, N bytes of JSON header (padded
    with spaces to a multiple of 8), then the raw little-endian data of each
    tensor back to back in the order given.
    """
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().to(torch.float32).contiguous().numpy()
        a = np.array(t, dtype="<f4", order="C", copy=True)  # keeps 0-d as 0-d
        b = a.tobytes(order="C")
        header[name] = {"dtype": "F32", "shape": [int(s) for s in a.shape],
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def _save_npy(path, a):
    tmp = path + ".tmp%d.npy" % os.getpid()
    np.save(tmp, np.ascontiguousarray(a))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------
def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def _layer_activation(act):
    if act == "gelu_tanh":
        return gelu_tanh
    if act in ("relu", "gelu"):
        return act
    raise ValueError("unknown activation %r (want one of %s)" % (act, ", ".join(ACTS)))


def _ffn(layer, x):
    return layer.linear2(layer.activation(layer.linear1(x)))


def _sa(layer, x, mask, pad=None):
    return layer.self_attn(x, x, x, attn_mask=mask, key_padding_mask=pad, need_weights=False)[0]


class CustomStack(nn.Module):
    """ResiDual, DeepNorm and Peri-LN written with nn.TransformerEncoderLayer's
    own submodules, so the state_dict keys match nn.TransformerEncoder's."""

    def __init__(self, wiring, D, H, F_, N, act):
        super().__init__()
        if wiring not in ("residual", "deepnorm", "peri_ln"):
            raise ValueError("CustomStack: bad wiring %r" % wiring)
        self.wiring = wiring
        self.alpha = (2.0 * N) ** 0.25
        layers = []
        for _ in range(N):
            layer = nn.TransformerEncoderLayer(
                D, H, F_, dropout=0.0, activation=_layer_activation(act),
                batch_first=True, norm_first=False)
            if wiring == "peri_ln":
                # Registered after norm1/norm2: keys layers.i.post_attn_norm.*,
                # layers.i.post_ffn_norm.*
                layer.post_attn_norm = nn.LayerNorm(D)
                layer.post_ffn_norm = nn.LayerNorm(D)
            layers.append(layer)
        self.layers = nn.ModuleList(layers)
        if wiring == "residual":
            self.norm = nn.LayerNorm(D, eps=RESIDUAL_FINAL_EPS)
        elif wiring == "peri_ln":
            self.norm = nn.LayerNorm(D)
        else:
            self.norm = None

    def forward(self, x, mask=None, src_key_padding_mask=None):
        pad = src_key_padding_mask
        if self.wiring == "residual":
            xa = x
            xd = x
            for L in self.layers:
                u = _sa(L, xa, mask, pad)
                xd = xd + u
                xa = L.norm1(xa + u)
                u = _ffn(L, xa)
                xd = xd + u
                xa = L.norm2(xa + u)
            return xa + self.norm(xd)
        if self.wiring == "deepnorm":
            a = self.alpha
            for L in self.layers:
                x = L.norm1(a * x + _sa(L, x, mask, pad))
                x = L.norm2(a * x + _ffn(L, x))
            return x
        # peri_ln
        for L in self.layers:
            x = x + L.post_attn_norm(_sa(L, L.norm1(x), mask, pad))
            x = x + L.post_ffn_norm(_ffn(L, L.norm2(x)))
        return self.norm(x)


def build_model(wiring, D, H, F_, N, act):
    if D % H:
        raise ValueError("D=%d is not a multiple of H=%d" % (D, H))
    if wiring in ("post_ln", "pre_ln", "pre_ln_nonorm"):
        pre = wiring != "post_ln"
        layer = nn.TransformerEncoderLayer(
            D, H, F_, dropout=0.0, activation=_layer_activation(act),
            batch_first=True, norm_first=pre)
        return nn.TransformerEncoder(layer, N, norm=nn.LayerNorm(D) if wiring == "pre_ln" else None)
    if wiring in WIRINGS:
        return CustomStack(wiring, D, H, F_, N, act)
    raise ValueError("unknown wiring %r (want one of %s)" % (wiring, ", ".join(WIRINGS)))


def init_params(model, seed):
    """Re-initializes every parameter from `seed` (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        mods = dict(model.named_modules())
        for name, p in model.named_parameters():
            owner = mods[name.rsplit(".", 1)[0]] if "." in name else model
            n = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if isinstance(owner, nn.LayerNorm):
                v = 1.0 + 0.1 * n if name.endswith(".weight") else 0.1 * n
            elif p.dim() >= 2:
                v = n / math.sqrt(p.shape[1])
            else:
                v = 0.1 * n
            p.copy_(v.to(p.dtype))
    return model


def make_input(B, T, D, seed):
    g = torch.Generator().manual_seed(seed ^ 0x5EED5EED)
    return torch.randn((B, T, D), generator=g, dtype=torch.float32).numpy()


def causal_mask(T, dtype):
    return torch.triu(torch.full((T, T), float("-inf"), dtype=dtype), diagonal=1)


def padding_mask(lengths, T):
    """PyTorch's key_padding_mask for valid `lengths`: True = padded."""
    if lengths is None:
        return None
    return torch.arange(T)[None, :] >= torch.as_tensor(np.asarray(lengths, dtype=np.int64))[:, None]


def _unpad_output(y, T):
    """PyTorch 1.13's encoder fast path returns a nested tensor padded back
    with zeros to the LONGEST valid length, which can be shorter than T:
    restore the [B, T, D] shape (padded rows are never compared)."""
    if y.shape[1] < T:
        y = torch.cat([y, y.new_zeros((y.shape[0], T - y.shape[1], y.shape[2]))], dim=1)
    return y


def run_model(model, x, causal, lengths=None):
    """Runs model on numpy x in model's dtype; returns a numpy array.
    `lengths` (one valid length per batch row) becomes src_key_padding_mask;
    only the rows t < lengths[b] of the result are meaningful then."""
    dtype = next(model.parameters()).dtype
    xt = torch.from_numpy(np.ascontiguousarray(x)).to(dtype)
    mask = causal_mask(xt.shape[1], dtype) if causal else None
    with torch.no_grad():
        if lengths is None:
            y = model(xt, mask=mask)
        else:
            y = _unpad_output(model(xt, mask=mask, src_key_padding_mask=padding_mask(lengths, xt.shape[1])),
                              xt.shape[1])
    return y.numpy()


def make_lengths(B, T, seed, salt):
    """Seeded valid lengths for a padded batch of B rows over an axis of T:
    row 0 is full (T), the others uniform in 1..T, and when B > 1 and T > 1
    at least one row is padded (last row set to ceil(T/2) if none was)."""
    rng = np.random.default_rng([seed, salt])
    lens = rng.integers(1, T + 1, size=B).astype(np.int64)
    lens[0] = T
    if B > 1 and T > 1 and np.all(lens == T):
        lens[-1] = (T + 1) // 2
    return lens


def _finish_case(out, meta, model, y32, y64, inputs, dims_txt):
    """Writes the files every case has and meta.json; `inputs` is a list of
    (graph input name, file name, array) in the graph's input order."""
    scale, err = 0.0, 0.0
    valid = meta.get("out_lengths")
    if y64.size:
        m = np.ones(y64.shape[:2], dtype=bool)
        if valid:
            lens = dict((n, a) for n, _, a in inputs)[valid]
            m = np.arange(y64.shape[1])[None, :] < np.asarray(lens)[:, None]
        scale = float(np.max(np.abs(y64[m])))
        err = float(np.max(np.abs(y32.astype(np.float64)[m] - y64[m])))
    meta.update({"torch_version": torch.__version__, "max_abs_expected64": scale,
                 "torch_fp32_max_abs_err_vs_fp64": err,
                 "inputs": [[n, f] for n, f, _ in inputs]})
    write_safetensors(os.path.join(out, "weights.safetensors"), model.state_dict(),
                      {"format": "pt", "producer": "blockc tools/torch_export.py",
                       "wiring": meta["wiring"], "act": meta["act"],
                       "causal": str(bool(meta["causal"])).lower(), "dims": dims_txt,
                       "seed": meta["seed"]})
    for _, f, a in inputs:
        _save_npy(os.path.join(out, f), a)
    _save_npy(os.path.join(out, "expected.npy"), y32.astype(np.float32))
    _save_npy(os.path.join(out, "expected64.npy"), y64.astype(np.float64))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    return meta


def export_case(out, wiring, B, T, D, H, F, N, act, causal, seed, lengths=None):
    """Writes weights.safetensors, input.npy, expected.npy, expected64.npy
    and meta.json into directory `out`; returns the meta dict.  With
    `lengths` (int array [B]) the batch is padded: len.npy (int64) is written
    too, PyTorch gets src_key_padding_mask, and only rows t < lengths[b] of
    the expected outputs are meaningful (meta "out_lengths": "len")."""
    if wiring in SEQ2SEQ:
        raise ValueError("%s is an encoder-decoder wiring: use export_seq2seq_case" % wiring)
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)  # construction-time init is overwritten anyway
    model = init_params(build_model(wiring, D, H, F, N, act), seed).float().eval()
    x = make_input(B, T, D, seed)
    y32 = run_model(model, x, causal, lengths).astype(np.float32)
    model64 = copy.deepcopy(model).double().eval()
    y64 = run_model(model64, x.astype(np.float64), causal, lengths)
    meta = {"wiring": wiring, "B": B, "T": T, "D": D, "H": H, "F": F, "N": N,
            "act": act, "causal": bool(causal), "seed": seed, "out_lengths": None}
    if wiring == "deepnorm":
        meta["alpha"] = (2.0 * N) ** 0.25
    inputs = [("x", "input.npy", x.astype(np.float32))]
    if lengths is not None:
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.shape != (B,) or np.any(lengths < 1) or np.any(lengths > T):
            raise ValueError("lengths must be B=%d values in 1..T=%d, got %s" % (B, T, lengths))
        inputs.append(("len", "len.npy", lengths))
        meta["out_lengths"] = "len"
        meta["lengths"] = {"len": [int(v) for v in lengths]}
    return _finish_case(out, meta, model, y32, y64, inputs,
                        "B=%d T=%d D=%d H=%d F=%d N=%d" % (B, T, D, H, F, N))


# ---------------------------------------------------------------------------
# Encoder-decoder models
# ---------------------------------------------------------------------------
class ResiDualDecoder(nn.Module):
    """The ResiDual decoder (Xie et al. 2023; the reference code's
    ResiDualDecoderLayer and ResiDualDecoder), written with
    nn.TransformerDecoderLayer's submodules so the keys match
    nn.TransformerDecoder's, plus `norm` (eps 1e-7) for LN_final:

        xa = xd = x
        per layer, for f in (causal self_attn, multihead_attn over mem, FFN),
        with LN_f = norm1, norm2, norm3 respectively:
            u = f(xa);  xd = xd + u;  xa = LN_f(xa + u)
        y = xa + norm(xd)
    """

    def __init__(self, D, H, F_, N, act):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.TransformerDecoderLayer(D, H, F_, dropout=0.0, activation=_layer_activation(act),
                                       batch_first=True, norm_first=False) for _ in range(N)])
        self.norm = nn.LayerNorm(D, eps=RESIDUAL_FINAL_EPS)

    def forward(self, tgt, memory, tgt_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        xa = tgt
        xd = tgt
        for L in self.layers:
            u = L.self_attn(xa, xa, xa, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                            need_weights=False)[0]
            xd = xd + u
            xa = L.norm1(xa + u)
            u = L.multihead_attn(xa, memory, memory, key_padding_mask=memory_key_padding_mask,
                                 need_weights=False)[0]
            xd = xd + u
            xa = L.norm2(xa + u)
            u = _ffn(L, xa)
            xd = xd + u
            xa = L.norm3(xa + u)
        return xa + self.norm(xd)


def build_seq2seq(wiring, D, H, F_, N, act):
    if D % H:
        raise ValueError("D=%d is not a multiple of H=%d" % (D, H))
    actf = _layer_activation(act)
    if wiring in ("decoder_post_ln", "decoder_pre_ln"):
        pre = wiring == "decoder_pre_ln"
        layer = nn.TransformerDecoderLayer(D, H, F_, dropout=0.0, activation=actf,
                                           batch_first=True, norm_first=pre)
        return nn.TransformerDecoder(layer, N, norm=nn.LayerNorm(D) if pre else None)
    if wiring == "decoder_residual":
        return ResiDualDecoder(D, H, F_, N, act)
    if wiring == "transformer":
        return nn.Transformer(d_model=D, nhead=H, num_encoder_layers=N, num_decoder_layers=N,
                              dim_feedforward=F_, dropout=0.0, activation=actf, batch_first=True)
    raise ValueError("unknown encoder-decoder wiring %r (want one of %s)" % (wiring, ", ".join(SEQ2SEQ)))


# Graph inputs of each encoder-decoder wiring, in the graph's order:
# (name, kind, axis).  kind "f": float [B, axis, D]; "len": lengths[B] over axis.
SEQ2SEQ_INPUTS = {
    "decoder": [("x", "f", "T"), ("mem", "f", "S"), ("len", "len", "T"), ("mem_len", "len", "S")],
    "transformer": [("src", "f", "S"), ("tgt", "f", "T"), ("src_len", "len", "S"),
                    ("tgt_len", "len", "T")],
}
# The lengths input whose rows are the valid rows of the output y [B, T, D].
SEQ2SEQ_OUT_LENGTHS = {"decoder": "len", "transformer": "tgt_len"}


def seq2seq_kind(wiring):
    return "transformer" if wiring == "transformer" else "decoder"


def run_seq2seq(model, wiring, inp):
    """Runs an encoder-decoder model on the dict of numpy inputs `inp` (names
    as SEQ2SEQ_INPUTS; lengths inputs optional = full) in the model's dtype,
    with the causal tgt_mask and PyTorch's key padding masks (True = padded):
    tgt_key_padding_mask from the target lengths, memory_key_padding_mask
    (and, for nn.Transformer, src_key_padding_mask) from the source/memory
    lengths.  Returns y [B, T, D] as numpy (rows t >= target length are not
    meaningful)."""
    dtype = next(model.parameters()).dtype
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dtype)
    with torch.no_grad():
        if seq2seq_kind(wiring) == "decoder":
            x, mem = t(inp["x"]), t(inp["mem"])
            T, S = x.shape[1], mem.shape[1]
            y = model(x, mem, tgt_mask=causal_mask(T, dtype),
                      tgt_key_padding_mask=padding_mask(inp.get("len"), T),
                      memory_key_padding_mask=padding_mask(inp.get("mem_len"), S))
        else:
            src, tgt = t(inp["src"]), t(inp["tgt"])
            S, T = src.shape[1], tgt.shape[1]
            spad = padding_mask(inp.get("src_len"), S)
            y = model(src, tgt, tgt_mask=causal_mask(T, dtype), src_key_padding_mask=spad,
                      tgt_key_padding_mask=padding_mask(inp.get("tgt_len"), T),
                      memory_key_padding_mask=spad)
    return y.numpy()


def make_seq2seq_inputs(wiring, B, T, S, D, seed, padded):
    """Seeded inputs {name: array}: float inputs N(0, 1) float32 (padded rows
    hold random values too, so a leak through the masks shows), lengths int64
    from make_lengths when `padded` (else absent = full lengths)."""
    sizes = {"T": T, "S": S}
    inp = {}
    for k, (name, kind, axis) in enumerate(SEQ2SEQ_INPUTS[seq2seq_kind(wiring)]):
        if kind == "f":
            g = torch.Generator().manual_seed((seed ^ 0x5EED5EED) + 7919 * k)
            inp[name] = torch.randn((B, sizes[axis], D), generator=g, dtype=torch.float32).numpy()
        elif padded:
            inp[name] = make_lengths(B, sizes[axis], seed, k)
    return inp


def export_seq2seq_case(out, wiring, B, T, S, D, H, F, N, act, seed, padded=False, inputs=None):
    """The encoder-decoder counterpart of export_case: writes
    weights.safetensors, one NAME.npy per graph input (float32, lengths
    int64), expected.npy / expected64.npy (PyTorch float32 / float64, [B, T,
    D]) and meta.json ("inputs": [[name, file], ...] in graph order,
    "out_lengths": the lengths input naming the valid output rows, or None).
    `inputs` overrides the generated inputs (a dict as make_seq2seq_inputs)."""
    if wiring not in SEQ2SEQ:
        raise ValueError("%s is not an encoder-decoder wiring" % wiring)
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    model = init_params(build_seq2seq(wiring, D, H, F, N, act), seed).float().eval()
    inp = inputs if inputs is not None else make_seq2seq_inputs(wiring, B, T, S, D, seed, padded)
    y32 = run_seq2seq(model, wiring, inp).astype(np.float32)
    model64 = copy.deepcopy(model).double().eval()
    y64 = run_seq2seq(model64, wiring, {k: (v.astype(np.float64) if v.dtype == np.float32 else v)
                                        for k, v in inp.items()})
    kind = seq2seq_kind(wiring)
    olen = SEQ2SEQ_OUT_LENGTHS[kind]
    meta = {"wiring": wiring, "B": B, "T": T, "S": S, "D": D, "H": H, "F": F, "N": N,
            "act": act, "causal": True, "seed": seed,
            "out_lengths": olen if olen in inp else None,
            "lengths": {n: [int(v) for v in inp[n]] for n, k, _ in SEQ2SEQ_INPUTS[kind]
                        if k == "len" and n in inp}}
    files = [(n, n + ".npy", inp[n]) for n, _, _ in SEQ2SEQ_INPUTS[kind] if n in inp]
    return _finish_case(out, meta, model, y32, y64, files,
                        "B=%d T=%d S=%d D=%d H=%d F=%d N=%d" % (B, T, S, D, H, F, N))


# ---------------------------------------------------------------------------
# --from-state-dict
# ---------------------------------------------------------------------------
def module_facts(module):
    """(norm_first, activation) read off a pickled module's first encoder or
    decoder layer; None where unknown."""
    for m in module.modules():
        if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            act = getattr(m, "activation", None)
            if act is F.relu or getattr(m, "activation_relu_or_gelu", 0) == 1:
                name = "relu"
            elif act is F.gelu or getattr(m, "activation_relu_or_gelu", 0) == 2:
                name = "gelu"
            else:
                name = getattr(act, "__name__", None)
            return bool(m.norm_first), name
    return None, None


def suggest_graphs(keys, norm_first=None):
    """Which shipped graph runs a state_dict with these keys.  Returns
    (what, options): `what` names the PyTorch module the keys look like (or
    None), options is a list of (graph or None, norm_first or None, when)
    with graph None meaning "no shipped graph" (`when` says what to do).
    norm_first is not stored in a state_dict and two wirings differ only in
    it (post_ln and pre_ln_nonorm have identical keys), so without
    `norm_first` every candidate is returned; with it, only the matching
    ones."""
    keys = set(keys)
    starts = lambda p: any(k.startswith(p) for k in keys)
    has = lambda sub: any(sub in k for k in keys)
    if starts("encoder.layers.") and starts("decoder.layers."):
        what = "nn.Transformer"
        opts = [("transformer", False, "norm_first=False (the default)"),
                (None, True, "norm_first=True: no shipped graph - copy graphs/transformer.blk and "
                             "move each norm before its sublayer, as in decoder_pre_ln.blk")]
    elif starts("layers.") and has(".multihead_attn."):
        what = "nn.TransformerDecoder"
        if "norm.weight" in keys:
            opts = [("decoder_pre_ln", True, "norm_first=True with norm=nn.LayerNorm(D)"),
                    (None, False, "norm_first=False with a final norm: no shipped graph - copy "
                                  "graphs/decoder_post_ln.blk and end it with "
                                  "`y = LayerNorm(x, params=norm)`")]
        else:
            opts = [("decoder_post_ln", False, "norm_first=False (the default), no final norm"),
                    (None, True, "norm_first=True without a final norm: no shipped graph - copy "
                                 "graphs/decoder_pre_ln.blk and drop its final LayerNorm")]
    elif starts("layers.") and has(".self_attn."):
        what = "nn.TransformerEncoder"
        if has(".post_attn_norm."):
            opts = [("peri_ln", None, "Peri-LN (post_attn_norm / post_ffn_norm present)")]
        elif has(".norm3.") and has(".norm4."):
            opts = [("sandwich", True, "Sandwich-LN (norm3 / norm4 after the sublayers, a final norm)")]
        elif "norm.weight" in keys:
            opts = [("pre_ln", True, "norm_first=True with norm=nn.LayerNorm(D)"),
                    (None, False, "norm_first=False with a final norm: no shipped graph - copy "
                                  "graphs/post_ln.blk and end it with `y = LayerNorm(x, params=norm)`")]
        else:
            opts = [("post_ln", False, "norm_first=False (the default), no final norm"),
                    ("pre_ln_nonorm", True, "norm_first=True with TransformerEncoder's default "
                                            "norm=None")]
    else:
        return None, []
    if what != "nn.Transformer":
        opts = _keys_fit(keys, opts)
    if norm_first is not None:
        opts = [o for o in opts if o[1] is None or o[1] == norm_first]
    return what, opts


def _keys_fit(keys, opts):
    """The options whose graph reads exactly these keys: layer 0's names
    against EXPECTED_KEYS, and the top-level ones against FINAL_NORM.  A
    state_dict with names no shipped graph reads (Sandwich-LN's extra
    per-layer norms, say) would be refused by `blockc run` (unexpected
    tensors), so it gets "no shipped graph" with the names instead."""
    layer = {k[len("layers.0."):] for k in keys if k.startswith("layers.0.")}
    top = {k for k in keys if not k.startswith("layers.")}
    fit, why = [], set()
    for o in opts:
        graph = o[0]
        if graph is None:
            fit.append(o)
            continue
        want_top = {"norm.weight", "norm.bias"} if FINAL_NORM.get(graph) else set()
        extra = sorted(layer - set(EXPECTED_KEYS[graph])) + sorted(top - want_top)
        missing = sorted(set(EXPECTED_KEYS[graph]) - layer)
        if extra or missing:
            why.update(["layers.0." + k for k in extra if "." in k and k in layer] +
                       [k for k in extra if k in top] + ["no layers.0." + k for k in missing])
        else:
            fit.append(o)
    if not any(o[0] for o in fit) and why:
        names = sorted(why)
        fit = [(None, None, "no shipped graph reads these keys (%s%s): write a graph whose "
                "params= names match them (docs/language.md)"
                % (", ".join(names[:6]), ", ..." if len(names) > 6 else ""))]
    return fit


def _sandwich_keys():
    """A Sandwich-LN encoder's state_dict keys (self-check): pre-LN's, a
    final norm, and norm3/norm4 after the attention and the FFN."""
    keys = ["norm.weight", "norm.bias"]
    for i in range(2):
        keys += ["layers.%d.%s" % (i, k) for k in EXPECTED_KEYS["pre_ln"] +
                 ["norm3.weight", "norm3.bias", "norm4.weight", "norm4.bias"]]
    return keys


def _graph_command(graph, D, Fd, N, out):
    if graph in ("decoder_post_ln", "decoder_pre_ln", "decoder_residual"):
        ins = "--input x=x.npy --input mem=mem.npy [--input len=len.npy --input mem_len=mem_len.npy]"
    elif graph == "transformer":
        ins = "--input src=src.npy --input tgt=tgt.npy [--input src_len=src_len.npy --input tgt_len=tgt_len.npy]"
    else:
        ins = "--input x=x.npy [--input len=len.npy]"
    return ("build/blockc run graphs/%s.blk -D B=<batch> -D D=%d -D H=<nhead> -D F=%d -D N=%d \\\n"
            "          --weights %s %s --output y=y.npy" % (graph, D, Fd, N, out, ins))


def export_state_dict(pt_path, out, strip_prefix="", norm_first=None):
    try:
        obj = torch.load(pt_path, map_location="cpu", weights_only=True)
    except Exception:
        # A pickled whole module (torch.save(model)) needs full unpickling;
        # only do that for files you trust.
        obj = torch.load(pt_path, map_location="cpu")
    act = None
    if isinstance(obj, nn.Module):
        nf, act = module_facts(obj)
        if norm_first is not None and nf is not None and nf != norm_first:
            print("note: --norm-first %s ignored: the pickled module says norm_first=%s"
                  % (str(norm_first).lower(), nf))
        norm_first = nf if nf is not None else norm_first
        obj = obj.state_dict()
    if not isinstance(obj, dict):
        raise SystemExit("%s: error: expected a state_dict (a dict of tensors), got %s"
                         % (pt_path, type(obj).__name__))
    if os.path.isdir(out) or out.endswith(os.sep):
        os.makedirs(out, exist_ok=True)
        out = os.path.join(out, "weights.safetensors")
    tensors = {}
    skipped = []
    for k, v in obj.items():
        if not isinstance(v, torch.Tensor) or not torch.is_floating_point(v):
            skipped.append(k)
            continue
        if strip_prefix:
            if not k.startswith(strip_prefix):
                skipped.append(k)
                continue
            k = k[len(strip_prefix):]
        tensors[k] = v
    if not tensors:
        raise SystemExit("%s: error: no floating-point tensors%s"
                         % (pt_path, " under prefix %r" % strip_prefix if strip_prefix else ""))
    write_safetensors(out, tensors, {"format": "pt", "producer": "blockc tools/torch_export.py",
                                     "source": os.path.basename(pt_path)})
    print("wrote %s: %d tensors" % (out, len(tensors)))
    for k in skipped:
        print("  skipped %s (not a floating tensor%s)" % (k, " or outside the prefix" if strip_prefix else ""))
    # Dimensions that can be read off the shapes.
    what, opts = suggest_graphs(tensors, norm_first)
    pre = "encoder.layers." if what == "nn.Transformer" else "layers."
    layers = sorted({int(k[len(pre):].split(".")[0]) for k in tensors
                     if k.startswith(pre) and k[len(pre):].split(".")[0].isdigit()})
    w = tensors.get(pre + "0.self_attn.in_proj_weight")
    l1 = tensors.get(pre + "0.linear1.weight")
    if what is None or w is None or l1 is None or not layers:
        print("note: no layers.N.self_attn.in_proj_weight / linear1.weight keys found - "
              "is this an nn.TransformerEncoder, nn.TransformerDecoder or nn.Transformer "
              "state_dict? (see --strip-prefix)")
        return out
    D, Fd, N = int(w.shape[1]), int(l1.shape[0]), len(layers)
    print("looks like an %s state_dict; dims from the shapes: D=%d F=%d N=%d "
          "(H is not stored in a state_dict)" % (what, D, Fd, N))
    if norm_first is None and any(o[1] is not None for o in opts):
        print("norm_first is not stored in a state_dict: pick by how the model was built "
              "(or pass --norm-first true|false):")
    for graph, _, when in opts:
        print("  %s%s" % (when, ":" if graph else ""))
        if graph:
            print("      " + _graph_command(graph, D, Fd, N, out))
    print("(T and S are taken from the inputs' shapes, up to the graph's `dim T <= ...` bound; "
          "-D T=... raises it.)")
    if act and act != "relu":
        print("note: the module uses activation %r; the shipped graphs say act=relu - copy the "
              "graph and change it%s" % (act, " to act=gelu" if act == "gelu" else ""))
    return out


# ---------------------------------------------------------------------------
# Self-check: an independent reader and a direct numpy implementation
# ---------------------------------------------------------------------------
def read_safetensors_independent(path):
    """Minimal reader written from the format spec, not from the writer."""
    with open(path, "rb") as f:
        raw = f.read()
    assert len(raw) >= 8, "file shorter than the length prefix"
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, "header length %d not a multiple of 8" % n
    assert 8 + n <= len(raw), "header runs past the end"
    htext = raw[8:8 + n].decode("utf-8")
    assert htext == htext.rstrip(" ") + " " * (len(htext) - len(htext.rstrip(" "))), "bad padding"
    header = json.loads(htext)
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    out = {}
    spans = []
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}, info
        assert info["dtype"] == "F32", info
        b, e = info["data_offsets"]
        numel = 1
        for s in info["shape"]:
            numel *= s
        assert e - b == 4 * numel, (name, b, e, info["shape"])
        spans.append((b, e))
        a = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
        out[name] = a
    spans.sort()
    pos = 0
    for b, e in spans:
        assert b == pos, "gap or overlap at %d (expected %d)" % (b, pos)
        pos = e
    assert pos == len(data), "data section has %d trailing bytes" % (len(data) - pos)
    return out, meta


def _np_ln(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_act(h, act):
    if act == "relu":
        return np.maximum(h, 0.0)
    if act == "gelu":
        return 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
    if act == "gelu_tanh":
        return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
    raise ValueError(act)


def _np_mha(xq, xkv, p, name, H, causal, kv_len=None):
    """nn.MultiheadAttention `name` (in_proj rows [Wq; Wk; Wv]): queries
    from xq [B, T, D], keys/values from xkv [B, S, D]; keys j > i masked
    when causal, keys j >= kv_len[b] masked when kv_len is given."""
    B, T, D = xq.shape
    S = xkv.shape[1]
    dh = D // H
    W = p[name + ".in_proj_weight"]
    bias = p[name + ".in_proj_bias"]
    q = xq @ W[:D].T + bias[:D]
    k = xkv @ W[D:2 * D].T + bias[D:2 * D]
    v = xkv @ W[2 * D:].T + bias[2 * D:]
    o = np.zeros_like(q)
    for b in range(B):
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            s = q[b, :, sl] @ k[b, :, sl].T / math.sqrt(dh)
            if causal:
                for i in range(T):
                    s[i, i + 1:] = -np.inf
            if kv_len is not None:
                s[:, int(kv_len[b]):] = -np.inf
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o[b, :, sl] = s @ v[b, :, sl]
    return o @ p[name + ".out_proj.weight"].T + p[name + ".out_proj.bias"]


def _np_attn(x, p, pre, H, causal, kv_len=None):
    return _np_mha(x, x, p, pre + "self_attn", H, causal, kv_len)


def _np_ffn(x, p, pre, act):
    h = x @ p[pre + "linear1.weight"].T + p[pre + "linear1.bias"]
    return _np_act(h, act) @ p[pre + "linear2.weight"].T + p[pre + "linear2.bias"]


def reference_forward(p, wiring, x, H, N, act, causal, lengths=None):
    """Direct float64 numpy implementation of each wiring's formula (with
    `lengths`: keys j >= lengths[b] masked; padded rows are not meaningful)."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in p.items()}
    x = np.asarray(x, dtype=np.float64)

    def ln(name, z, eps=LN_EPS):
        return _np_ln(z, p[name + ".weight"], p[name + ".bias"], eps)

    sa = lambda z, pre: _np_attn(z, p, pre, H, causal, lengths)
    ff = lambda z, pre: _np_ffn(z, p, pre, act)
    if wiring == "residual":
        xa, xd = x, x
        for i in range(N):
            pre = "layers.%d." % i
            u = sa(xa, pre)
            xd = xd + u
            xa = ln(pre + "norm1", xa + u)
            u = ff(xa, pre)
            xd = xd + u
            xa = ln(pre + "norm2", xa + u)
        return xa + ln("norm", xd, RESIDUAL_FINAL_EPS)
    alpha = (2.0 * N) ** 0.25 if wiring == "deepnorm" else 1.0
    for i in range(N):
        pre = "layers.%d." % i
        if wiring in ("post_ln", "deepnorm"):
            x = ln(pre + "norm1", alpha * x + sa(x, pre))
            x = ln(pre + "norm2", alpha * x + ff(x, pre))
        elif wiring in ("pre_ln", "pre_ln_nonorm"):
            x = x + sa(ln(pre + "norm1", x), pre)
            x = x + ff(ln(pre + "norm2", x), pre)
        elif wiring == "peri_ln":
            x = x + ln(pre + "post_attn_norm", sa(ln(pre + "norm1", x), pre))
            x = x + ln(pre + "post_ffn_norm", ff(ln(pre + "norm2", x), pre))
        else:
            raise ValueError(wiring)
    if wiring in ("pre_ln", "peri_ln"):
        x = ln("norm", x)
    return x


def reference_seq2seq(p, wiring, inp, H, N, act):
    """Direct float64 numpy implementation of the encoder-decoder wirings
    (the equations atop graphs/decoder_*.blk and graphs/transformer.blk);
    `inp` as make_seq2seq_inputs.  Rows t >= the target length are not
    meaningful."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in p.items()}
    f64 = lambda a: np.asarray(a, dtype=np.float64)

    def ln(name, z, eps=LN_EPS):
        return _np_ln(z, p[name + ".weight"], p[name + ".bias"], eps)

    def dec_layer(x, mem, pre, wiring, tlen, slen, xd=None):
        sa = lambda z: _np_mha(z, z, p, pre + "self_attn", H, True, tlen)
        ca = lambda z: _np_mha(z, mem, p, pre + "multihead_attn", H, False, slen)
        ff = lambda z: _np_ffn(z, p, pre, act)
        if wiring == "decoder_pre_ln":
            x = x + sa(ln(pre + "norm1", x))
            x = x + ca(ln(pre + "norm2", x))
            return x + ff(ln(pre + "norm3", x)), None
        for f, nm in ((sa, "norm1"), (ca, "norm2"), (ff, "norm3")):
            u = f(x)
            if xd is not None:
                xd = xd + u
            x = ln(pre + nm, x + u)
        return x, xd

    if wiring == "transformer":
        m = f64(inp["src"])
        slen, tlen = inp.get("src_len"), inp.get("tgt_len")
        for i in range(N):
            pre = "encoder.layers.%d." % i
            m = ln(pre + "norm1", m + _np_mha(m, m, p, pre + "self_attn", H, False, slen))
            m = ln(pre + "norm2", m + _np_ffn(m, p, pre, act))
        m = ln("encoder.norm", m)
        x = f64(inp["tgt"])
        for i in range(N):
            x, _ = dec_layer(x, m, "decoder.layers.%d." % i, "decoder_post_ln", tlen, slen)
        return ln("decoder.norm", x)
    x, mem = f64(inp["x"]), f64(inp["mem"])
    tlen, slen = inp.get("len"), inp.get("mem_len")
    xd = x if wiring == "decoder_residual" else None
    for i in range(N):
        x, xd = dec_layer(x, mem, "layers.%d." % i, wiring, tlen, slen, xd)
    if wiring == "decoder_pre_ln":
        return ln("norm", x)
    if wiring == "decoder_residual":
        return x + ln("norm", xd, RESIDUAL_FINAL_EPS)
    return x


EXPECTED_KEYS = {
    "post_ln": ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"],
}
EXPECTED_KEYS["deepnorm"] = EXPECTED_KEYS["post_ln"]
EXPECTED_KEYS["pre_ln"] = EXPECTED_KEYS["post_ln"]
EXPECTED_KEYS["residual"] = EXPECTED_KEYS["post_ln"]
EXPECTED_KEYS["peri_ln"] = EXPECTED_KEYS["post_ln"] + [
    "post_attn_norm.weight", "post_attn_norm.bias", "post_ffn_norm.weight", "post_ffn_norm.bias"]
EXPECTED_KEYS["pre_ln_nonorm"] = EXPECTED_KEYS["post_ln"]
EXPECTED_KEYS["sandwich"] = EXPECTED_KEYS["post_ln"] + [
    "norm3.weight", "norm3.bias", "norm4.weight", "norm4.bias"]
# nn.TransformerDecoderLayer's state_dict order.
DECODER_KEYS = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "multihead_attn.in_proj_weight",
                "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
                "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
                "norm3.weight", "norm3.bias"]
for _w in ("decoder_post_ln", "decoder_pre_ln", "decoder_residual"):
    EXPECTED_KEYS[_w] = DECODER_KEYS
FINAL_NORM = {"post_ln": False, "pre_ln": True, "residual": True, "deepnorm": False, "peri_ln": True,
              "sandwich": True,
              "pre_ln_nonorm": False, "decoder_post_ln": False, "decoder_pre_ln": True,
              "decoder_residual": True}


def expected_names(wiring, N):
    """The state_dict keys, in order, that the wiring's graph reads."""
    if wiring == "transformer":
        return (["encoder.layers.%d.%s" % (i, k) for i in range(N) for k in EXPECTED_KEYS["post_ln"]]
                + ["encoder.norm.weight", "encoder.norm.bias"]
                + ["decoder.layers.%d.%s" % (i, k) for i in range(N) for k in DECODER_KEYS]
                + ["decoder.norm.weight", "decoder.norm.bias"])
    names = ["layers.%d.%s" % (i, k) for i in range(N) for k in EXPECTED_KEYS[wiring]]
    if FINAL_NORM[wiring]:
        names += ["norm.weight", "norm.bias"]
    return names


def self_check(verbose=True):
    """Returns the number of failed checks (0 = all good)."""
    fails = 0

    def check(ok, what):
        nonlocal fails
        if not ok:
            fails += 1
        if verbose or not ok:
            print("  %s  %s" % ("ok  " if ok else "FAIL", what))

    shapes = [dict(B=1, T=5, D=8, H=2, F=16, N=2), dict(B=2, T=7, D=12, H=3, F=20, N=2),
              dict(B=1, T=1, D=8, H=1, F=8, N=1)]
    tmp = tempfile.mkdtemp(prefix="torch_export_check.")
    print("self-check in %s" % tmp)

    # 1. safetensors writer vs an independent reader, with awkward shapes.
    path = os.path.join(tmp, "t.safetensors")
    rng = np.random.default_rng(7)
    ts = {"a": rng.standard_normal((3, 5)).astype(np.float32),       # 60 bytes: forces padding
          "b.c": rng.standard_normal((7,)).astype(np.float32),
          "scalar": np.array(3.5, dtype=np.float32),
          "empty": np.zeros((0, 4), dtype=np.float32),
          "big": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    write_safetensors(path, ts, {"k": 1})
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}"), "header length %d is 8-aligned, space-padded" % n)
    back, meta = read_safetensors_independent(path)
    check(list(back) == list(ts) and all(np.array_equal(back[k], ts[k]) and back[k].shape == ts[k].shape
                                         for k in ts), "safetensors round trip is bit-exact (5 tensors)")
    check(meta == {"k": "1"}, "metadata stored as strings")

    # 2. every wiring x act x causal against the direct numpy formulas.
    worst32 = 0.0
    worst64 = 0.0
    for wiring in WIRINGS:
        for act in ACTS:
            for causal in (False, True):
                for si, s in enumerate(shapes):
                    if si and act != "gelu":   # all shapes once per wiring/causal, gelu
                        continue
                    d = os.path.join(tmp, "%s_%s_%d_%d" % (wiring, act, causal, si))
                    seed = 11 + si
                    export_case(d, wiring, s["B"], s["T"], s["D"], s["H"], s["F"], s["N"], act, causal, seed)
                    w, _ = read_safetensors_independent(os.path.join(d, "weights.safetensors"))
                    x = np.load(os.path.join(d, "input.npy"))
                    y32 = np.load(os.path.join(d, "expected.npy"))
                    y64 = np.load(os.path.join(d, "expected64.npy"))
                    meta = json.load(open(os.path.join(d, "meta.json")))
                    tag = "%-8s %-9s causal=%d %s" % (wiring, act, causal,
                                                      "B%(B)d T%(T)d D%(D)d H%(H)d F%(F)d N%(N)d" % s)
                    names_ok = list(w) == expected_names(wiring, s["N"])
                    if not names_ok:
                        print("    names: %s\n    want:  %s" % (list(w), expected_names(wiring, s["N"])))
                    shapes_ok = (x.dtype == np.float32 and x.shape == (s["B"], s["T"], s["D"])
                                 and y32.dtype == np.float32 and y32.shape == x.shape
                                 and y64.dtype == np.float64 and y64.shape == x.shape)
                    # Layers really differ (re-initialization happened).
                    distinct = s["N"] < 2 or not np.array_equal(
                        w["layers.0.linear1.weight"], w["layers.1.linear1.weight"])
                    ln_rand = not np.all(w["layers.0.norm1.weight"] == 1.0)
                    ref = reference_forward(w, wiring, x, s["H"], s["N"], act, causal)
                    scale = max(1.0, float(np.max(np.abs(ref))))
                    e64 = float(np.max(np.abs(ref - y64))) / scale
                    e32 = float(np.max(np.abs(ref - y32))) / scale
                    worst32 = max(worst32, e32)
                    worst64 = max(worst64, e64)
                    ok = (names_ok and shapes_ok and distinct and ln_rand and e64 < 1e-12
                          and e32 < 2e-6 and meta["wiring"] == wiring and np.all(np.isfinite(y32)))
                    check(ok, "%s  fp64 %.1e  fp32 %.1e" % (tag, e64, e32))
    print("  worst relative error vs the numpy formulas: fp64 model %.1e, fp32 model %.1e"
          % (worst64, worst32))

    # 2b. Padded encoder batches: valid rows against the numpy formulas with
    #     masked keys, and against PyTorch run on each sequence alone.
    ps = dict(B=3, T=7, D=12, H=3, F=20, N=2)
    for wiring in WIRINGS:
        for causal in (False, True):
            d = os.path.join(tmp, "pad_%s_%d" % (wiring, causal))
            lens = make_lengths(ps["B"], ps["T"], 21, 0)
            meta = export_case(d, wiring, ps["B"], ps["T"], ps["D"], ps["H"], ps["F"], ps["N"], "gelu",
                               causal, 21, lengths=lens)
            w, _ = read_safetensors_independent(os.path.join(d, "weights.safetensors"))
            x = np.load(os.path.join(d, "input.npy"))
            ln_ = np.load(os.path.join(d, "len.npy"))
            y32 = np.load(os.path.join(d, "expected.npy"))
            y64 = np.load(os.path.join(d, "expected64.npy"))
            ref = reference_forward(w, wiring, x, ps["H"], ps["N"], "gelu", causal, ln_)
            model = init_params(build_model(wiring, ps["D"], ps["H"], ps["F"], ps["N"], "gelu"), 21).eval()
            e64 = e32 = esingle = 0.0
            for b in range(ps["B"]):
                L = int(ln_[b])
                sc = max(1.0, float(np.max(np.abs(ref[b, :L]))))
                e64 = max(e64, float(np.max(np.abs(ref[b, :L] - y64[b, :L]))) / sc)
                e32 = max(e32, float(np.max(np.abs(ref[b, :L] - y32[b, :L]))) / sc)
                one = run_model(model, x[b:b + 1, :L], causal)
                esingle = max(esingle, float(np.max(np.abs(one[0] - y32[b, :L]))) / sc)
            ok = (ln_.dtype == np.int64 and list(ln_) == meta["lengths"]["len"] and ln_[0] == ps["T"]
                  and np.any(ln_ < ps["T"]) and meta["inputs"] == [["x", "input.npy"], ["len", "len.npy"]]
                  and meta["out_lengths"] == "len" and e64 < 1e-12 and e32 < 2e-6 and esingle < 2e-6)
            check(ok, "%-14s padded lengths %s causal=%d: fp64 %.1e fp32 %.1e, single-seq %.1e"
                  % (wiring, list(ln_), causal, e64, e32, esingle))

    # 2c. Encoder-decoder wirings: names, files, valid rows against the numpy
    #     formulas, padded batch == each sequence alone (PyTorch), memory
    #     padding really masks (changing padded memory rows changes nothing).
    s2 = [dict(B=1, T=5, S=4, D=8, H=2, F=16, N=2), dict(B=3, T=7, S=5, D=12, H=3, F=20, N=2)]
    for wiring in SEQ2SEQ:
        kind = seq2seq_kind(wiring)
        for act in ACTS:
            for si, s in enumerate(s2):
                for padded in ((False, True) if s["B"] > 1 else (False,)):
                    if act != "gelu" and (si == 0 or padded):
                        continue
                    d = os.path.join(tmp, "s2s_%s_%s_%d_%d" % (wiring, act, si, padded))
                    seed = 31 + si
                    meta = export_seq2seq_case(d, wiring, s["B"], s["T"], s["S"], s["D"], s["H"], s["F"],
                                               s["N"], act, seed, padded)
                    w, _ = read_safetensors_independent(os.path.join(d, "weights.safetensors"))
                    inp = {n: np.load(os.path.join(d, f)) for n, f in meta["inputs"]}
                    y32 = np.load(os.path.join(d, "expected.npy"))
                    y64 = np.load(os.path.join(d, "expected64.npy"))
                    names_ok = list(w) == expected_names(wiring, s["N"])
                    if not names_ok:
                        print("    names: %s\n    want:  %s" % (list(w), expected_names(wiring, s["N"])))
                    want_in = [n for n, k, _ in SEQ2SEQ_INPUTS[kind] if k == "f" or padded]
                    sizes = {"T": s["T"], "S": s["S"]}
                    files_ok = [n for n, _ in meta["inputs"]] == want_in and all(
                        (inp[n].dtype == np.float32 and inp[n].shape == (s["B"], sizes[ax], s["D"]))
                        if k == "f" else (inp[n].dtype == np.int64 and inp[n].shape == (s["B"],)
                                          and np.all(inp[n] >= 1) and np.all(inp[n] <= sizes[ax]))
                        for n, k, ax in SEQ2SEQ_INPUTS[kind] if n in inp)
                    shapes_ok = (y32.dtype == np.float32 and y64.dtype == np.float64
                                 and y32.shape == y64.shape == (s["B"], s["T"], s["D"]))
                    ref = reference_seq2seq(w, wiring, inp, s["H"], s["N"], act)
                    olen = inp.get(SEQ2SEQ_OUT_LENGTHS[kind], np.full(s["B"], s["T"]))
                    model = init_params(build_seq2seq(wiring, s["D"], s["H"], s["F"], s["N"], act),
                                        seed).eval()
                    e64 = e32 = esingle = 0.0
                    for b in range(s["B"]):
                        L = int(olen[b])
                        sc = max(1.0, float(np.max(np.abs(ref[b, :L]))))
                        e64 = max(e64, float(np.max(np.abs(ref[b, :L] - y64[b, :L]))) / sc)
                        e32 = max(e32, float(np.max(np.abs(ref[b, :L] - y32[b, :L]))) / sc)
                        if padded:
                            one = {}
                            for n, k, ax in SEQ2SEQ_INPUTS[kind]:
                                if k == "f":
                                    lname = [m for m, kk, a2 in SEQ2SEQ_INPUTS[kind]
                                             if kk == "len" and a2 == ax][0]
                                    one[n] = inp[n][b:b + 1, :int(inp[lname][b])]
                            y1 = run_seq2seq(model, wiring, one)
                            esingle = max(esingle, float(np.max(np.abs(y1[0] - y32[b, :L]))) / sc)
                    masks_ok = True
                    if padded:  # garbage in every padded row of every float input: no effect
                        inp2 = dict(inp)
                        for n, k, ax in SEQ2SEQ_INPUTS[kind]:
                            if k == "f":
                                lname = [m for m, kk, a2 in SEQ2SEQ_INPUTS[kind] if kk == "len" and a2 == ax][0]
                                z = inp[n].copy()
                                for b in range(s["B"]):
                                    z[b, int(inp[lname][b]):] += 3.0 + np.arange(s["D"], dtype=np.float32)
                                inp2[n] = z
                        y2 = run_seq2seq(model, wiring, inp2)
                        for b in range(s["B"]):
                            L = int(olen[b])
                            masks_ok &= bool(np.allclose(y2[b, :L], y32[b, :L], rtol=0, atol=1e-5))
                        masks_ok &= bool(np.any(inp[SEQ2SEQ_OUT_LENGTHS[kind]] < s["T"]))
                    ok = (names_ok and files_ok and shapes_ok and masks_ok and e64 < 1e-12
                          and e32 < 2e-6 and esingle < 2e-6 and np.all(np.isfinite(y32)))
                    check(ok, "%-16s %-9s B%d T%d S%d D%d H%d %s: fp64 %.1e fp32 %.1e%s"
                          % (wiring, act, s["B"], s["T"], s["S"], s["D"], s["H"],
                             "padded %s" % meta["lengths"] if padded else "full", e64, e32,
                             ", single-seq %.1e" % esingle if padded else ""))
    # The decoders are causal: perturbing the last target position changes
    # only that position.
    for wiring in SEQ2SEQ:
        model = init_params(build_seq2seq(wiring, 8, 2, 16, 2, "gelu"), 4).eval()
        inp = make_seq2seq_inputs(wiring, 1, 6, 4, 8, 4, False)
        tname = "tgt" if wiring == "transformer" else "x"
        inp2 = dict(inp)
        inp2[tname] = inp[tname].copy()
        inp2[tname][:, -1] += np.linspace(-1.0, 1.0, 8, dtype=np.float32)
        y, y2 = run_seq2seq(model, wiring, inp), run_seq2seq(model, wiring, inp2)
        check(np.array_equal(y[:, :-1], y2[:, :-1]) and not np.allclose(y[:, -1], y2[:, -1]),
              "%-16s causal: no dependence on later target positions" % wiring)

    # 2d. The graph hint: one right graph per module kind and norm_first.
    hint_cases = [
        (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1), False, ["post_ln"]),
        (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True), 1),
         True, ["pre_ln_nonorm"]),
        (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True), 1,
                               norm=nn.LayerNorm(8)), True, ["pre_ln"]),
        (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1,
                               norm=nn.LayerNorm(8)), False, [None]),
        (nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True), 1), False,
         ["decoder_post_ln"]),
        (nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, norm_first=True), 1,
                               norm=nn.LayerNorm(8)), True, ["decoder_pre_ln"]),
        (nn.Transformer(8, 2, 1, 1, 16, batch_first=True), False, ["transformer"]),
        # Sandwich-LN: pre-LN plus norm3/norm4 after the sublayers: graphs/sandwich.blk.
        (_sandwich_keys(), True, ["sandwich"]),
    ]
    for mod, nf, want in hint_cases:
        keys = list(mod) if isinstance(mod, list) else list(mod.state_dict())
        what, opts = suggest_graphs(keys, nf)
        _, unknown = suggest_graphs(keys, None)
        got = [g for g, _, _ in opts]
        facts = nf if isinstance(mod, list) else module_facts(mod)[0]
        check(got == want and set(want) <= {g for g, _, _ in unknown} and facts == nf,
              "hint for %s norm_first=%s: %s (unknown norm_first: %s)"
              % (what, nf, got, [g for g, _, _ in unknown]))

    # 3. Causality: with the mask, output position t must not depend on inputs
    #    after t (checked by perturbing the last position), and the mask matters.
    for wiring in WIRINGS:
        m = init_params(build_model(wiring, 8, 2, 16, 2, "gelu"), 4).eval()
        x = make_input(1, 6, 8, 4)
        x2 = x.copy()
        x2[:, -1] += np.linspace(-1.0, 1.0, 8, dtype=np.float32)  # not a constant: LN removes those
        yc, yc2, yn = run_model(m, x, True), run_model(m, x2, True), run_model(m, x, False)
        check(np.array_equal(yc[:, :-1], yc2[:, :-1]) and not np.allclose(yc[:, -1], yc2[:, -1])
              and not np.allclose(yc[:, :-1], yn[:, :-1]),
              "%-8s causal: no dependence on later positions; mask changes the output" % wiring)

    # 4. Determinism: same seed -> identical files.
    dA, dB = os.path.join(tmp, "detA"), os.path.join(tmp, "detB")
    for dd in (dA, dB):
        export_case(dd, "residual", 1, 5, 8, 2, 16, 2, "gelu", True, 3)
    same = all(open(os.path.join(dA, f), "rb").read() == open(os.path.join(dB, f), "rb").read()
               for f in ("weights.safetensors", "input.npy", "expected.npy", "expected64.npy"))
    check(same, "same seed gives byte-identical files")

    # 5. --from-state-dict on a torch.save'd nn.TransformerEncoder state_dict.
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = init_params(nn.TransformerEncoder(layer, 3), 5).eval()
    pt = os.path.join(tmp, "model.pt")
    torch.save({"encoder." + k: v for k, v in enc.state_dict().items()}, pt)
    st = os.path.join(tmp, "fromsd.safetensors")
    export_state_dict(pt, st, strip_prefix="encoder.")
    w, _ = read_safetensors_independent(st)
    sd = enc.state_dict()
    check(list(w) == list(sd) and all(np.array_equal(w[k], sd[k].numpy()) for k in sd),
          "--from-state-dict round trip (prefix stripped, keys and bits equal)")
    x = make_input(2, 6, 8, 9)
    ref = reference_forward(w, "post_ln", x, 2, 3, "relu", False)
    got = run_model(enc, x, False)
    check(np.max(np.abs(ref - got)) < 1e-5, "exported user model == numpy post_ln formula (%.1e)"
          % np.max(np.abs(ref - got)))

    return self_check_result(fails, tmp)


def self_check_result(fails, tmp):
    """Print a self-check's verdict; its files are removed when all passed."""
    if fails == 0:
        import shutil
        shutil.rmtree(tmp)
        print("self-check: all passed")
    else:
        print("self-check: %d FAILED (files kept in %s)" % (fails, tmp))
    return fails


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Export a PyTorch Transformer stack (weights, input, expected output) "
                    "for blockc conformance tests, or convert a state_dict to safetensors.",
        epilog="See the module docstring (or docs/conformance.md) for details.")
    ap.add_argument("--wiring", choices=ALL_WIRINGS)
    for d in ("B", "T", "S", "D", "H", "F", "N"):
        ap.add_argument("--" + d, type=int)
    ap.add_argument("--padded", action="store_true",
                    help="a padded batch: seeded lengths inputs and PyTorch key padding masks")
    ap.add_argument("--act", choices=ACTS, default="relu")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="output directory (or .safetensors file with --from-state-dict)")
    ap.add_argument("--from-state-dict", metavar="MODEL_PT",
                    help="convert a torch.save'd state_dict to OUT (a .safetensors path or a directory)")
    ap.add_argument("--strip-prefix", default="", help="with --from-state-dict: drop this key prefix")
    ap.add_argument("--norm-first", choices=("true", "false"),
                    help="with --from-state-dict: how the layers were built (a state_dict does not "
                         "record it; a pickled module does), to suggest the one right graph")
    ap.add_argument("--self-check", action="store_true", help="verify this tool and exit")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    if not a.out:
        ap.error("--out is required")
    if a.from_state_dict:
        nf = None if a.norm_first is None else a.norm_first == "true"
        export_state_dict(a.from_state_dict, a.out, a.strip_prefix, nf)
        return 0
    missing = [n for n in ("wiring", "B", "T", "D", "H", "F", "N") if getattr(a, n) is None]
    if missing:
        ap.error("missing --" + ", --".join(missing))
    bad = [n for n in ("B", "T", "D", "H", "F", "N") if getattr(a, n) < 1]
    if bad:
        ap.error("dimensions must be >= 1: " + ", ".join(bad))
    if a.D % a.H:
        ap.error("--D %d is not a multiple of --H %d" % (a.D, a.H))
    if a.wiring in SEQ2SEQ:
        if a.S is None or a.S < 1:
            ap.error("--S (memory / source length, >= 1) is required for %s" % a.wiring)
        if a.causal:
            ap.error("--causal: the encoder-decoder wirings are always causal")
        meta = export_seq2seq_case(a.out, a.wiring, a.B, a.T, a.S, a.D, a.H, a.F, a.N, a.act, a.seed,
                                   a.padded)
    else:
        lens = make_lengths(a.B, a.T, a.seed, 0) if a.padded else None
        meta = export_case(a.out, a.wiring, a.B, a.T, a.D, a.H, a.F, a.N, a.act, a.causal, a.seed,
                           lengths=lens)
    print("wrote %s: %s%s (max|y| %.3g, PyTorch fp32 vs fp64 max abs err %.2e)"
          % (a.out, " ".join("%s=%s" % (k, meta[k]) for k in ("wiring", "B", "T", "S", "D", "H", "F", "N",
                                                                "act", "causal", "seed") if k in meta),
             " lengths %s" % meta["lengths"] if meta.get("lengths") else "",
             meta["max_abs_expected64"], meta["torch_fp32_max_abs_err_vs_fp64"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
