#!/usr/bin/python3
"""grad_check.py - blockc's reference backward (`blockc grad`) against PyTorch autograd.

For every wiring x activation x causal x shape it builds the PyTorch model of
tools/torch_export.py (same weights, same inputs), draws a seeded dy, and lets
torch.autograd compute the gradient of sum(y * dy) with respect to every
parameter and the input, in float64 (the model and input cast from the same
float32 values blockc reads).  Then it runs

    blockc grad GRAPH --backend B --weights W --input x.npy --dy dy.npy -o grads.safetensors --dx dx.npy

for each backend B (--backends, default interp,jit,aot) and compares tensor by
tensor.  interp is the reference backward (double); jit and aot run the
emitted float32 training step <model>_backward (compiler/emit_grad.c), the
same C source through tcc or the system C compiler.  Every case runs on
interp and jit; aot runs the --aot-acts cases (default relu: 56 builds, each
a C compiler run of a few seconds; the activation is one kernel argument,
identical on jit and aot), and the summary counts the others.  Wirings: the encoders (post_ln, pre_ln,
residual, deepnorm, peri_ln, pre_ln_nonorm; causal and not; odd dims, a
batch, a padded batch with a lengths input, a 12-layer stack) and the
encoder-decoders (decoder_post_ln, decoder_pre_ln, decoder_residual,
transformer: cross-attention with kv=, lengths and kv_lengths; odd dims and a
padded batch), each with relu, gelu and gelu_tanh: 168 cases.  In padded
batches dy is zero on padded output rows (PyTorch leaves them unspecified,
blockc writes zeros), so the loss only sees valid rows.

Pass criterion, per tensor (each parameter's gradient, and dx):

    max|g_blockc - g_torch64| <= tol * max|g_torch64|        (tol = 1e-6)

Why this tolerance: blockc's backward computes the same function as the
float64 PyTorch model in double (weights and input are the same float32
numbers), so the only differences are double rounding in a different order
(~1e-15 relative, amplified a little by conditioning) and blockc writing its
gradients as float32 (relative 6e-8 per element): the worst measured over
the 168 cases is 5.9e-8, exactly that rounding.  1e-6 is 17x that, while
a wrong term in a backward formula - a missing 1/sqrt(dh), a softmax
Jacobian without the row-dot term, the LayerNorm mean term, gelu' of the erf
form used for gelu_tanh (measured: 3e-3) - moves gradients by 1e-3 or more
relative to the tensor's largest element.  For context the table also prints PyTorch's
own float32 autograd error against float64 ("torch32"), which is 3e-7..1e-5:
the reference backward is 10-100x closer to the exact gradient than
float32 autograd, as an oracle should be.

For jit and aot the tolerance is 1e-4 (--tol-f32): the emitted backward is
float32 end to end, like PyTorch's own float32 autograd, whose error against
float64 is 3e-7..1e-5 on these cases (the "torch32" column); the emitted
backward measures the same order (worst ~1e-6: its rounding, not a formula
error).  1e-4 is 10x PyTorch's float32 worst, and still 10-100x below what
any wrong backward term gives (1e-3 or more, see above).

Run with Debian's python (torch 1.13, numpy):

    /usr/bin/python3 tools/grad_check.py --blockc build/blockc [--filter REGEX] [-v]
"""

import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_export as te  # noqa: E402  (exits with a message if torch is missing)
import conformance as cf  # noqa: E402

np = te.np
torch = te.torch

# name, B, T, D, H, F, N, padded   (odd dims, batch > 1, a deep stack)
SHAPES = [
    ("odd", 1, 7, 12, 3, 20, 2, False),
    ("batch", 3, 5, 8, 2, 14, 2, False),
    ("padded", 3, 6, 8, 2, 14, 2, True),   # lengths input: a padded batch
    ("deep", 1, 6, 16, 4, 32, 12, False),
]
# Encoder-decoder wirings (cross-attention kv=, lengths on both sides):
# name, B, T, S, D, H, F, N, padded
SEQ_SHAPES = [
    ("odd", 1, 7, 5, 12, 3, 20, 2, False),
    ("padded", 3, 5, 6, 8, 2, 14, 2, True),
]


def torch_grads(model, fwd, inputs, dy, dtype):
    """d sum(y * dy) / d (every parameter, every float input) with the model
    cast to dtype; fwd(model, tensors, dtype) runs it."""
    m = copy.deepcopy(model).to(dtype).eval()
    ts = {k: (torch.from_numpy(np.ascontiguousarray(v)).to(dtype).requires_grad_(True)
              if v.dtype == np.float32 else v) for k, v in inputs.items()}
    y = fwd(m, ts, dtype)
    loss = (y * torch.from_numpy(dy).to(dtype)).sum()
    loss.backward()
    g = {n: p.grad.detach().numpy().astype(np.float64) for n, p in m.named_parameters()}
    for k, v in ts.items():
        if isinstance(v, torch.Tensor) and v.requires_grad:
            g["d:" + k] = v.grad.detach().numpy().astype(np.float64)
    return g, float(loss)


def encoder_fwd(causal):
    def fwd(m, ts, dtype):
        x = ts["x"]
        mask = te.causal_mask(x.shape[1], dtype) if causal else None
        pad = te.padding_mask(ts.get("len"), x.shape[1])
        return m(x, mask=mask, src_key_padding_mask=pad)
    return fwd


def seq2seq_fwd(wiring):
    def fwd(m, ts, dtype):
        if te.seq2seq_kind(wiring) == "decoder":
            x, mem = ts["x"], ts["mem"]
            T, S = x.shape[1], mem.shape[1]
            return m(x, mem, tgt_mask=te.causal_mask(T, dtype),
                     tgt_key_padding_mask=te.padding_mask(ts.get("len"), T),
                     memory_key_padding_mask=te.padding_mask(ts.get("mem_len"), S))
        src, tgt = ts["src"], ts["tgt"]
        S, T = src.shape[1], tgt.shape[1]
        spad = te.padding_mask(ts.get("src_len"), S)
        return m(src, tgt, tgt_mask=te.causal_mask(T, dtype), src_key_padding_mask=spad,
                 tgt_key_padding_mask=te.padding_mask(ts.get("tgt_len"), T),
                 memory_key_padding_mask=spad)
    return fwd


def setup_case(c):
    """The model, its graph inputs {name: array} (float32, lengths int64),
    the forward closure and the name of the lengths input of y's rows."""
    torch.manual_seed(c["seed"])
    if c["kind"] == "enc":
        model = te.build_model(c["wiring"], c["D"], c["H"], c["F"], c["N"], c["act"])
        inputs = {"x": te.make_input(c["B"], c["T"], c["D"], c["seed"])}
        if c["padded"]:
            inputs["len"] = te.make_lengths(c["B"], c["T"], c["seed"], 0)
        fwd, out_len = encoder_fwd(c["causal"]), "len"
    else:
        model = te.build_seq2seq(c["wiring"], c["D"], c["H"], c["F"], c["N"], c["act"])
        inputs = te.make_seq2seq_inputs(c["wiring"], c["B"], c["T"], c["S"], c["D"], c["seed"],
                                        c["padded"])
        fwd = seq2seq_fwd(c["wiring"])
        out_len = te.SEQ2SEQ_OUT_LENGTHS[te.seq2seq_kind(c["wiring"])]
    model = te.init_params(model, c["seed"]).float().eval()
    return model, inputs, fwd, out_len


def run_case(blockc, graphs_dir, c, d, backends, tols):
    """One case: PyTorch's gradients once, then `blockc grad` per backend;
    returns one result dict per backend."""
    model, inputs, fwd, out_len = setup_case(c)
    rng = np.random.default_rng(c["seed"] + 12345)
    dy = rng.standard_normal((c["B"], c["T"], c["D"])).astype(np.float32)
    if out_len in inputs:  # padded output rows are unspecified in PyTorch: not in the loss
        for b, n in enumerate(inputs[out_len]):
            dy[b, int(n):] = 0
    os.makedirs(d, exist_ok=True)
    te.write_safetensors(os.path.join(d, "w.safetensors"), model.state_dict())
    np.save(os.path.join(d, "dy.npy"), dy)
    with open(os.path.join(graphs_dir, c["wiring"] + ".blk")) as f:
        cf.prepare_graph(f.read(), c, os.path.join(d, "g.blk"))
    g64, _ = torch_grads(model, fwd, inputs, dy, torch.float64)
    g32, _ = torch_grads(model, fwd, inputs, dy, torch.float32)
    for name, a in inputs.items():
        np.save(os.path.join(d, name + ".npy"), a)
    return [compare(blockc, c, d, inputs, g64, g32, b, tols[b]) for b in backends]


def compare(blockc, c, d, inputs, g64, g32, backend, tol):
    r = dict(case=c["name"], backend=backend, ok=False)
    out = os.path.join(d, "grads_%s.safetensors" % backend)
    cmd = [blockc, "grad", os.path.join(d, "g.blk"), "--backend", backend,
           "--weights", os.path.join(d, "w.safetensors"),
           "--dy", os.path.join(d, "dy.npy"), "-o", out]
    for name, a in inputs.items():
        cmd += ["--input", "%s=%s" % (name, os.path.join(d, name + ".npy"))]
        if a.dtype == np.float32:
            cmd += ["--dx", "%s=%s" % (name, os.path.join(d, "d_%s_%s.npy" % (name, backend)))]
    for k in ("B", "T", "S", "D", "H", "F", "N"):
        if k in c:
            cmd += ["-D", "%s=%d" % (k, c[k])]
    r["cmd"] = " ".join(cmd)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        r["why"] = "blockc exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip())
        return r
    got, _ = te.read_safetensors_independent(out)
    got = {k: v.astype(np.float64) for k, v in got.items()}
    for name, a in inputs.items():
        if a.dtype == np.float32:
            got["d:" + name] = np.load(os.path.join(d, "d_%s_%s.npy" % (name, backend))).astype(np.float64)
    if set(got) != set(g64):
        r["why"] = "tensor names differ: missing %s, extra %s" % (
            sorted(set(g64) - set(got)), sorted(set(got) - set(g64)))
        return r
    worst, worst32, wname = 0.0, 0.0, ""
    for name, ref in g64.items():
        if got[name].shape != ref.shape:
            r["why"] = "%s: shape %s, expected %s" % (name, got[name].shape, ref.shape)
            return r
        scale = float(np.max(np.abs(ref))) or 1.0
        e = float(np.max(np.abs(got[name] - ref))) / scale
        e32 = float(np.max(np.abs(g32[name] - ref))) / scale
        if not e <= worst:
            worst, wname = e, name
        worst32 = max(worst32, e32)
    r.update(err=worst, err32=worst32, worst=wname)
    r["ok"] = worst <= tol
    if not r["ok"]:
        r["why"] = "rel err %.2e > %.2e in %s" % (worst, tol, wname)
    return r


def build_cases(wirings, acts, filt, seed):
    cases = []

    def add(c):
        if not filt or re.search(filt, c["name"]):
            c["seed"] = seed + len(cases)
            cases.append(c)

    for w in wirings:
        for act in acts:
            if w in te.SEQ2SEQ:  # always causal (decoder self-attention)
                for sname, B, T, S, D, H, F, N, padded in SEQ_SHAPES:
                    add(dict(name="%s/%s/%s" % (w, act, sname), kind="dec", wiring=w, act=act,
                             causal=True, B=B, T=T, S=S, D=D, H=H, F=F, N=N, padded=padded))
                continue
            for causal in (False, True):
                for sname, B, T, D, H, F, N, padded in SHAPES:
                    add(dict(name="%s/%s/%s/%s" % (w, act, "causal" if causal else "full", sname),
                             kind="enc", wiring=w, act=act, causal=causal, B=B, T=T, D=D, H=H,
                             F=F, N=N, padded=padded))
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description="blockc grad vs PyTorch autograd (see the docstring).")
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("--tol", type=float, default=1e-6, help="interp (double) tolerance")
    ap.add_argument("--tol-f32", type=float, default=1e-4,
                    help="jit and aot (the emitted float32 backward) tolerance")
    ap.add_argument("--backends", default="interp,jit,aot")
    ap.add_argument("--aot-acts", default="relu",
                    help="activations whose cases also run on aot (each is a C compiler build)")
    ap.add_argument("--wirings", default=",".join(te.ALL_WIRINGS))
    ap.add_argument("--acts", default="relu,gelu,gelu_tanh")
    ap.add_argument("--filter")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    blockc = os.path.abspath(a.blockc)
    backends = [b for b in a.backends.split(",") if b]
    for b in backends:
        if b not in ("interp", "jit", "aot"):
            ap.error("unknown backend %r" % b)
    tols = {"interp": a.tol, "jit": a.tol_f32, "aot": a.tol_f32}
    aot_acts = set(x for x in a.aot_acts.split(",") if x)
    cases = build_cases([w for w in a.wirings.split(",") if w],
                        [x for x in a.acts.split(",") if x], a.filter, a.seed)
    if not cases:
        print("grad_check: no case matches", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="blockc_gradcheck.")
    os.environ.setdefault("BLOCKC_CACHE_DIR", os.path.join(tmp, "aot-cache"))
    t0 = time.time()
    fails = 0
    worst = {}
    counts = {b: [0, 0] for b in backends}  # passed, run
    not_aot = 0
    try:
        print("%-36s %-7s %10s %10s  %s" % ("case", "backend", "rel err", "torch32", "result"))
        for i, c in enumerate(cases):
            bs = [b for b in backends if b != "aot" or c["act"] in aot_acts]
            if bs != backends:
                not_aot += 1
            for r in run_case(blockc, a.graphs, c, os.path.join(tmp, "%03d" % i), bs, tols):
                b = r["backend"]
                counts[b][1] += 1
                if "err" in r:
                    print("%-36s %-7s %10.2e %10.2e  %s" % (r["case"], b, r["err"], r["err32"],
                                                          "PASS" if r["ok"] else "FAIL: " + r["why"]))
                    wv = worst.setdefault((c["wiring"], b), [0.0, ""])
                    if r["err"] > wv[0]:
                        wv[0], wv[1] = r["err"], "%s (%s)" % (r["case"], r["worst"])
                else:
                    print("%-36s %-7s %10s %10s  FAIL: %s" % (r["case"], b, "-", "-", r["why"]))
                if r["ok"]:
                    counts[b][0] += 1
                else:
                    fails += 1
                    if a.verbose:
                        print("    $ " + r["cmd"])
        print()
        for (w, b), (e, where) in sorted(worst.items()):
            print("%-16s %-7s worst rel err vs torch float64 autograd %.2e  %s" % (w, b, e, where))
        for b in backends:
            print("backend %-7s %d/%d cases pass (tol %g)" % (b, counts[b][0], counts[b][1], tols[b]))
        if not_aot:
            print("%d cases (activations outside --aot-acts %s) not run on aot: the same C "
                  "as jit's, with the activation a kernel argument" % (not_aot, a.aot_acts))
        print("%d cases in %.1fs: %s" % (len(cases), time.time() - t0,
                                        "all PASS" if not fails else "%d FAILED" % fails))
    finally:
        cf.keep_or_remove(tmp, a.keep or fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
