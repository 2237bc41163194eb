#!/usr/bin/python3
"""grad_check.py - blockc's reference backward (`blockc grad`) against PyTorch autograd.

For every wiring x activation x causal x shape it builds the PyTorch model of
tools/torch_export.py (same weights, same input), draws a seeded dy, and lets
torch.autograd compute the gradient of sum(y * dy) with respect to every
parameter and the input, in float64 (the model and input cast from the same
float32 values blockc reads).  Then it runs

    blockc grad GRAPH --weights W --input x.npy --dy dy.npy -o grads.safetensors --dx dx.npy

and compares tensor by tensor.

Pass criterion, per tensor (each parameter's gradient, and dx):

    max|g_blockc - g_torch64| <= tol * max|g_torch64|        (tol = 1e-6)

Why this tolerance: blockc's backward computes the same function as the
float64 PyTorch model in double (weights and input are the same float32
numbers), so the only differences are double rounding in a different order
(~1e-15 relative, amplified a little by conditioning) and blockc writing its
gradients as float32 (relative 6e-8 per element): the worst measured over
the 90 cases is 5.9e-8, exactly that rounding.  1e-6 is 17x that, while a wrong term in a
backward formula - a missing 1/sqrt(dh), a softmax Jacobian without the
row-dot term, the LayerNorm mean term, gelu' of the tanh form for the erf
form (differs by up to ~1e-3) - moves gradients by 1e-3 or more relative to
the tensor's largest element.  For context the table also prints PyTorch's
own float32 autograd error against float64 ("torch32"), which is 3e-7..1e-5:
the reference backward is 10-100x closer to the exact gradient than
float32 autograd, as an oracle should be.

Run with Debian's python (torch 1.13, numpy):

    /usr/bin/python3 tools/grad_check.py --blockc build/blockc [--filter REGEX] [-v]
"""

import argparse
import copy
import os
import re
import shutil
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

# name, B, T, D, H, F, N   (odd dims, batch > 1, a deep stack)
SHAPES = [
    ("odd", 1, 7, 12, 3, 20, 2),
    ("batch", 3, 5, 8, 2, 14, 2),
    ("deep", 1, 6, 16, 4, 32, 12),
]


def torch_grads(model, x, dy, causal, dtype):
    """d sum(y * dy) / d (every parameter, x) with the model cast to dtype."""
    m = copy.deepcopy(model).to(dtype).eval()
    xt = torch.from_numpy(np.ascontiguousarray(x)).to(dtype).requires_grad_(True)
    mask = te.causal_mask(x.shape[1], dtype) if causal else None
    y = m(xt, mask=mask)
    loss = (y * torch.from_numpy(dy).to(dtype)).sum()
    loss.backward()
    g = {n: p.grad.detach().numpy().astype(np.float64) for n, p in m.named_parameters()}
    g["__dx__"] = xt.grad.detach().numpy().astype(np.float64)
    return g, float(loss)


def run_case(blockc, graphs_dir, c, d, tol):
    r = dict(case=c["name"], ok=False)
    torch.manual_seed(c["seed"])
    model = te.init_params(te.build_model(c["wiring"], c["D"], c["H"], c["F"], c["N"], c["act"]),
                           c["seed"]).float().eval()
    x = te.make_input(c["B"], c["T"], c["D"], c["seed"])
    rng = np.random.default_rng(c["seed"] + 12345)
    dy = rng.standard_normal((c["B"], c["T"], c["D"])).astype(np.float32)
    os.makedirs(d, exist_ok=True)
    te.write_safetensors(os.path.join(d, "w.safetensors"), model.state_dict())
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "dy.npy"), dy)
    with open(os.path.join(graphs_dir, c["wiring"] + ".blk")) as f:
        cf.prepare_graph(f.read(), c, os.path.join(d, "g.blk"))
    g64, loss64 = torch_grads(model, x, dy, c["causal"], torch.float64)
    g32, _ = torch_grads(model, x, dy, c["causal"], torch.float32)
    cmd = [blockc, "grad", os.path.join(d, "g.blk"), "--weights", os.path.join(d, "w.safetensors"),
           "--input", os.path.join(d, "x.npy"), "--dy", os.path.join(d, "dy.npy"),
           "-o", os.path.join(d, "grads.safetensors"), "--dx", os.path.join(d, "dx.npy")]
    for k in ("B", "T", "D", "H", "F", "N"):
        cmd += ["-D", "%s=%d" % (k, c[k])]
    r["cmd"] = " ".join(cmd)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        r["why"] = "blockc exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip())
        return r
    got, _ = te.read_safetensors_independent(os.path.join(d, "grads.safetensors"))
    got = {k: v.astype(np.float64) for k, v in got.items()}
    got["__dx__"] = np.load(os.path.join(d, "dx.npy")).astype(np.float64)
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
    r.update(err=worst, err32=worst32, worst=wname, loss=loss64)
    r["ok"] = worst <= tol
    if not r["ok"]:
        r["why"] = "rel err %.2e > %.2e in %s" % (worst, tol, wname)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description="blockc grad vs PyTorch autograd (see the docstring).")
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--wirings", default=",".join(te.WIRINGS))
    ap.add_argument("--acts", default="relu,gelu,gelu_tanh")
    ap.add_argument("--filter")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    blockc = os.path.abspath(a.blockc)
    cases = []
    for w in a.wirings.split(","):
        for act in a.acts.split(","):
            for causal in (False, True):
                for sname, B, T, D, H, F, N in SHAPES:
                    name = "%s/%s/%s/%s" % (w, act, "causal" if causal else "full", sname)
                    if a.filter and not re.search(a.filter, name):
                        continue
                    cases.append(dict(name=name, wiring=w, act=act, causal=causal, B=B, T=T, D=D,
                                      H=H, F=F, N=N, seed=a.seed + len(cases)))
    if not cases:
        print("grad_check: no case matches", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="blockc_gradcheck.")
    t0 = time.time()
    fails = 0
    worst = {}
    try:
        print("%-34s %10s %10s  %s" % ("case", "rel err", "torch32", "result"))
        for i, c in enumerate(cases):
            r = run_case(blockc, a.graphs, c, os.path.join(tmp, "%03d" % i), a.tol)
            if "err" in r:
                print("%-34s %10.2e %10.2e  %s" % (r["case"], r["err"], r["err32"],
                                                 "PASS" if r["ok"] else "FAIL: " + r["why"]))
                wv = worst.setdefault(c["wiring"], [0.0, ""])
                if r["err"] > wv[0]:
                    wv[0], wv[1] = r["err"], "%s (%s)" % (r["case"], r["worst"])
            else:
                print("%-34s %10s %10s  FAIL: %s" % (r["case"], "-", "-", r["why"]))
            if not r["ok"]:
                fails += 1
                if a.verbose:
                    print("    $ " + r["cmd"])
        print()
        for w, (e, where) in worst.items():
            print("%-9s worst rel err vs torch float64 autograd %.2e  %s" % (w, e, where))
        print("%d cases in %.1fs (tol %g): %s" % (len(cases), time.time() - t0, a.tol,
                                                  "all PASS" if not fails else "%d FAILED" % fails))
    finally:
        if a.keep or fails:
            print("files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
