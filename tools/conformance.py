#!/usr/bin/python3
"""conformance.py - blockc vs PyTorch over a sweep of wirings, activations,
masks and shapes, for every backend.

    /usr/bin/python3 tools/conformance.py [--blockc build/blockc]
        [--backends interp,jit,aot] [--tol 1e-5] [--filter REGEX] [--jobs N]

(`make conformance` runs it with --backends interp,jit,aot.)  For each case
(listed by --list) it uses tools/torch_export.py - imported, so torch is
loaded once for the whole sweep - to write seeded weights, inputs, PyTorch's
float32 output and the float64 output of the same model into a temporary
directory under build/; copies graphs/<wiring>.blk there, switching
`act=relu` -> `act=gelu` and (encoders) `causal=false` -> `causal=true` as
the case needs; then runs, per backend,

    blockc run <copy>.blk --backend B --weights W --input X --output Y \\
        -D B=.. -D T=.. -D D=.. -D H=.. -D F=.. -D N=..

(the original encoder cases), or with every input named and the run-time
dims' bounds (the issue-9 cases):

    blockc run <copy>.blk --backend B --weights W --input x=X --input mem=M \\
        [--input len=L --input mem_len=ML] --output y=Y -D T=<bound> -D S=<bound> ...

and compares Y with both references - on the valid rows only for a padded
batch, whose rows are then also run alone, unpadded (B=1, inputs cut to the
row's lengths), and must match the batch's rows (--single-tol).

The cases: the 5 original encoder wirings x relu/gelu x causal or not x 7
shape sets (140); pre_ln_nonorm on 3 shape sets (12); every encoder wiring
padded, B=3, T below its bound (12); decoder_post_ln, decoder_pre_ln,
decoder_residual and transformer (nn.Transformer) on 5 shape sets, S != T,
odd dims, one of them padded (28).  Without --backends, each of interp, jit
and aot is probed with one original case; a backend that `blockc run`
rejects as usage (exit status 2) is skipped with a printed note.  Backends
named explicitly with --backends must work, and so must every case on them:
--new-backends LIST restricts the issue-9 cases to LIST (printed as NOT
COVERED elsewhere).  Exit status: 0 all passed, 1 any failure, 2 nothing
could be run (usage, missing blockc or graphs).

Tolerance
---------
A case passes when

    max|y - y64| <= max(tol * max(1, max|y64|),  factor * max|y32 - y64|)

with tol = 1e-5 (--tol) and factor = 4 (--torch-factor).  y64 is the float64
evaluation of the same PyTorch model on the same (float32-representable)
weights and input - the exact answer up to ~1e-15; y32 is PyTorch's float32
output.  Comparing with float64 rather than with y32 keeps PyTorch's own
rounding out of blockc's error budget; both errors are printed ("vs fp32",
"vs fp64"), with PyTorch's own error and the ratio blockc/PyTorch, which
should be of order 1.

Why these numbers:
  * float32 unit roundoff is u = 2^-24 = 6e-8.  Each output element passes
    through O(N) dot products of length K = D or F; rounding errors behave
    like a random walk, ~sqrt(K)*u relative per product (the worst case K*u
    is not reached in practice), so the expected error is ~ c*N*sqrt(K)*u.
    LayerNorm re-normalizes (Post-LN, DeepNorm, ResiDual's xa), which keeps
    errors from compounding multiplicatively; softmax is Lipschitz in its
    logits, which are O(1) with these weights.
  * Measured with torch_export.py (PyTorch 1.13 CPU, float32 vs float64,
    relative to max|y|): D=512 F=2048 H=8 T=64 N=24 gives 0.7e-6 to 1.9e-6
    for all five wirings; D=64 N=2 gives 2-3e-7; D=8..16, N=24 over 40
    seeds per wiring gives a median of 3-5e-7.  So 1e-5 leaves >= 5x headroom
    over PyTorch's own float32 error at the largest sizes blockc targets
    (D=512, N=24), while a real wiring bug - a wrong residual weight, a
    missing or extra norm, a mask leak, gelu tanh-vs-erf (up to 4e-4),
    swapped Q/K/V rows, a wrong head split - moves the output by 1e-3 to 1.
  * The factor term covers badly conditioned cases: LayerNorm over a small
    D of a row whose variance is tiny amplifies rounding (Peri-LN's
    post-sublayer norms, deep stacks at D=8 reach 5.7e-6 for PyTorch itself
    on rare seeds).  There, an implementation within 4x of PyTorch's own
    float32 error is as conformant as float32 allows.
  * Scaling by max(1, max|y|): errors are relative to magnitude (the Pre-LN
    residual stream and ResiDual's xd grow with depth); the floor of 1 keeps
    tiny outputs from demanding impossible relative accuracy.
  What the general rule cannot see: effects below ~1e-5.  E.g. ResiDual's
  final LayerNorm with eps 1e-5 instead of 1e-7 moves the output by
  ~eps/(2 var) - measured: only 2 of 28 ResiDual cases exceed the general
  rule.  So the interp backend (the oracle; double accumulation) gets a
  strict rule of its own, with no factor term:

    interp:  max|y - y64| <= interp_tol * max(1, max|y64|),  interp_tol = 1e-6

  Its measured worst over the sweep is 3.2e-7 (errors of storing
  intermediates in float32, comparable to PyTorch's own), and with the eps
  bug planted 22 of 28 ResiDual cases fail it.  --interp-tol 0 falls back to
  the general rule (e.g. for much larger custom sizes).

  The issue-9 cases use the same rules on their valid rows (measured PyTorch
  float32 error for the decoders and nn.Transformer at D=512, N=6..12:
  6.3e-7 to 1.07e-6 relative).  Rows run alone must match the padded batch
  within single_tol = 1e-6 * max(1, max|y|): the same arithmetic, only the
  matrix products' row counts differ; a mask or offset bug moves a row by
  1e-2 or more (measured: the rows are bit-identical on every backend).
"""

import argparse
import concurrent.futures
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
try:
    import numpy as np  # noqa: E402
except ImportError:
    sys.stderr.write("conformance.py: error: cannot import numpy with %s\n"
                     "  use Debian's python: /usr/bin/python3 (`make pydeps`)\n" % sys.executable)
    raise SystemExit(2)
import torch_export as te  # noqa: E402  (exits with a message if torch is missing)
import families as fam  # noqa: E402  (BERT / GPT-2 / LLaMA references, tools/families.py)

ALL_BACKENDS = ("interp", "jit", "aot")
# The encoder wirings of the original sweep (every act x mask x shape set).
LEGACY_WIRINGS = ("post_ln", "pre_ln", "residual", "deepnorm", "peri_ln")

# name, B, T, D, H, F, N
SHAPES = [
    ("base", 1, 5, 8, 2, 16, 2),
    ("odd", 1, 7, 12, 3, 20, 2),     # odd D, H, T, F; head dim 4
    ("batch", 3, 6, 8, 2, 16, 2),    # B > 1
    ("h1", 2, 5, 8, 1, 12, 1),       # one head, one layer
    ("t1", 2, 1, 8, 4, 16, 3),       # a single position (causal = non-causal)
    ("deep", 1, 6, 16, 4, 32, 24),   # deep stack at small width
    ("wide", 1, 16, 64, 4, 128, 2),
]
# pre_ln_nonorm (same layers as pre_ln, no final norm): a subset of SHAPES.
NONORM_SHAPES = ("odd", "batch", "deep")

# Padded encoder batches (issue 9): B=3 with seeded lengths (row 0 full, at
# least one row padded), run-time T below its bound: name, B, T, D, H, F, N, T bound.
PAD_SHAPE = ("pad", 3, 7, 12, 3, 20, 2, 9)

# Encoder-decoder shape sets: name, B, T, S, D, H, F, N, padded, (T bound, S bound).
# Bounds > T, S exercise run-time dims below their bound.
S2S_SHAPES = [
    ("odd", 1, 7, 5, 12, 3, 20, 2, False, (7, 5)),     # odd dims, S != T
    ("batch", 3, 6, 9, 8, 2, 16, 2, False, (6, 9)),    # B > 1, S > T
    ("t1", 2, 1, 4, 8, 4, 16, 3, False, (1, 4)),       # a single target token
    ("deep", 1, 6, 5, 16, 4, 32, 8, False, (8, 8)),    # deeper stack, T, S below bound
    ("pad", 3, 7, 5, 12, 3, 20, 2, True, (9, 6)),      # padded B=3, lengths inputs
]
# Which acts each encoder-decoder shape set runs with (runtime budget).
S2S_ACTS = {"odd": ("relu", "gelu"), "batch": ("relu",), "t1": ("gelu",), "deep": ("relu",),
            "pad": ("relu", "gelu")}


def build_cases(wirings, acts, filt, seed):
    """The sweep: LEGACY_WIRINGS x acts x causal x SHAPES (the original 140),
    pre_ln_nonorm on NONORM_SHAPES, every encoder wiring padded (causal or
    not), and the encoder-decoder wirings on S2S_SHAPES."""
    cases = []

    def add(c):
        if filt and not re.search(filt, c["name"]):
            return
        c["seed"] = seed + len(cases)
        cases.append(c)

    for wiring in [w for w in wirings if w in te.WIRINGS]:
        shapes = SHAPES if wiring in LEGACY_WIRINGS else [s for s in SHAPES if s[0] in NONORM_SHAPES]
        for act in acts:
            for causal in (False, True):
                for sname, B, T, D, H, F, N in shapes:
                    add(dict(name="%s/%s/%s/%s" % (wiring, act, "causal" if causal else "full", sname),
                             kind="enc", wiring=wiring, act=act, causal=causal, padded=False,
                             B=B, T=T, D=D, H=H, F=F, N=N, bounds={"T": T}))
    for wiring in [w for w in wirings if w in te.WIRINGS]:
        sname, B, T, D, H, F, N, tb = PAD_SHAPE
        act = "gelu" if "gelu" in acts else acts[0]
        for causal in (False, True):
            add(dict(name="%s/%s/%s/%s" % (wiring, act, "causal" if causal else "full", sname),
                     kind="enc", wiring=wiring, act=act, causal=causal, padded=True,
                     B=B, T=T, D=D, H=H, F=F, N=N, bounds={"T": tb}))
    for wiring in [w for w in wirings if w in te.SEQ2SEQ]:
        for sname, B, T, S, D, H, F, N, padded, (tb, sb) in S2S_SHAPES:
            for act in S2S_ACTS[sname]:
                if act not in acts:
                    continue
                add(dict(name="%s/%s/causal/%s" % (wiring, act, sname), kind="s2s", wiring=wiring,
                         act=act, causal=True, padded=padded, B=B, T=T, S=S, D=D, H=H, F=F, N=N,
                         bounds={"T": tb, "S": sb}))
    return cases


# Family cases (tools/families.py vs graphs/<family>.blk, their own names):
# name, B, T, D, H, F, N, KV, padded, T bound.  "odd": the odd dims
# (T=7, D=48, H=6 so dh=8, KV=2, odd F, N=2) with T below its bound; "pad":
# B=3 right-padded through the graph's `len` input (+ each row run alone);
# "mqa" / "mha": KV=1 and KV=H; "ckpt": the weights as a whole model's
# checkpoint (family prefix, embeddings, head), read with --weights-prefix
# and --allow-extra; "default": the shipped graph's own dims
# (bert-base, gpt2 124M, the small LLaMA).
def _default(f):
    d = fam.DEFAULT_DIMS[f]
    return ("default",) + tuple(d[k] for k in ("B", "T", "D", "H", "F", "N", "KV")) + (False, d["T"])


FAMILY_SHAPES = {
    "bert": [("odd", 1, 7, 48, 6, 101, 2, 6, False, 9), ("pad", 3, 7, 48, 6, 101, 2, 6, True, 9),
             ("ckpt", 1, 5, 32, 4, 40, 2, 4, False, 5), _default("bert")],
    "gpt2": [("odd", 1, 7, 48, 6, 101, 2, 6, False, 9), ("pad", 3, 7, 48, 6, 101, 2, 6, True, 9),
             ("ckpt", 1, 5, 32, 4, 40, 2, 4, False, 5), _default("gpt2")],
    "llama": [("odd", 1, 7, 48, 6, 131, 2, 2, False, 9), ("pad", 3, 7, 48, 6, 131, 2, 2, True, 9),
              ("ckpt", 1, 5, 32, 4, 40, 2, 2, False, 5),
              ("mqa", 2, 7, 48, 6, 131, 2, 1, False, 7), ("mha", 1, 7, 48, 6, 131, 2, 6, False, 7),
              _default("llama")],
}


def build_family_cases(families, filt, seed, start):
    cases = []
    for f in families:
        for sname, B, T, D, H, F, N, KV, padded, tb in FAMILY_SHAPES[f]:
            name = "%s/%s" % (f, sname)
            if filt and not re.search(filt, name):
                continue
            cases.append(dict(name=name, kind="fam", wiring=f, family=f, act=None, causal=f != "bert",
                              padded=padded, B=B, T=T, D=D, H=H, F=F, N=N, KV=KV, bounds={"T": tb},
                              ckpt=sname == "ckpt",
                              seed=seed + start + len(cases)))
    return cases


def dims_str(c):
    s = "B%(B)d T%(T)d" % c
    if "S" in c:
        s += " S%(S)d" % c
    s += " D%(D)d H%(H)d F%(F)d N%(N)d" % c
    if c.get("family") == "llama":
        s += " KV%(KV)d" % c
    if any(c["bounds"][k] != c[k] for k in c["bounds"]):
        s += " (<=%s)" % ",".join("%s%d" % (k, v) for k, v in sorted(c["bounds"].items()))
    return s


def export(c, d):
    """Writes the case's PyTorch files into d (torch_export) and returns its meta."""
    if c["kind"] == "fam":
        lens = te.make_lengths(c["B"], c["T"], c["seed"], 0) if c["padded"] else None
        return fam.export_case(d, c["family"], c["B"], c["T"], c["D"], c["H"], c["F"], c["N"], c["KV"],
                               c["seed"], lens, full=c["ckpt"])
    if c["kind"] == "s2s":
        return te.export_seq2seq_case(d, c["wiring"], c["B"], c["T"], c["S"], c["D"], c["H"], c["F"],
                                      c["N"], c["act"], c["seed"], c["padded"])
    lens = te.make_lengths(c["B"], c["T"], c["seed"], 0) if c["padded"] else None
    return te.export_case(d, c["wiring"], c["B"], c["T"], c["D"], c["H"], c["F"], c["N"], c["act"],
                          c["causal"], c["seed"], lengths=lens)


def prepare_graph(src_text, case, path):
    """Writes the case's graph: act (and, for encoders, causal) switched by
    text substitution.  Decoders are always causal; transformer.blk's
    encoder must stay non-causal, so only act= is switched there."""
    text = src_text
    if case["kind"] == "fam":   # the shipped family graph as it is
        subs = []
    else:
        subs = [("act", "relu", case["act"])]
    if case["kind"] == "enc":
        subs.append(("causal", "false", "true" if case["causal"] else "false"))
    for key, default, want in subs:
        pat = "%s=%s" % (key, default)
        n = text.count(pat)
        if n == 0:
            raise RuntimeError("graph for %s has no `%s` to substitute" % (case["wiring"], pat))
        if want != default:
            text = text.replace(pat, "%s=%s" % (key, want))
            if text.count(pat) != 0 or text.count("%s=%s" % (key, want)) < n:
                raise RuntimeError("substituting `%s` in %s failed" % (pat, case["wiring"]))
    with open(path, "w") as f:
        f.write(text)


def int32_lengths(meta, d):
    """Rewrites a case's lengths files (int64 from torch_export) as int32."""
    for name in meta.get("lengths", {}):
        f = os.path.join(d, dict(meta["inputs"])[name])
        a = np.load(f)
        np.save(f, a.astype(np.int32))
        meta.setdefault("int32", []).append(name)


def write_singles(case, meta, d):
    """For a padded case: row b of every float input cut to its valid length,
    saved as single{b}_{name}.npy; returns [[(name, file), ...] per row]."""
    lens = meta["lengths"]
    if case["kind"] == "s2s":
        spec = te.SEQ2SEQ_INPUTS[te.seq2seq_kind(case["wiring"])]
        of_axis = {ax: n for n, k, ax in spec if k == "len"}
        floats = [(n, of_axis[ax]) for n, k, ax in spec if k == "f"]
    else:
        floats = [("x", "len")]
    files = dict(meta["inputs"])
    rows = []
    for b in range(case["B"]):
        ins = []
        for name, lname in floats:
            a = np.load(os.path.join(d, files[name]))
            f = "single%d_%s.npy" % (b, name)
            np.save(os.path.join(d, f), np.ascontiguousarray(a[b:b + 1, :lens[lname][b]]))
            ins.append((name, f))
        rows.append(ins)
    return rows


def blockc_cmd(blockc, case, backend, d, out, inputs=None, B=None):
    """The `blockc run` command line.  The original cases use the one-input
    forms (`--input X.npy --output Y.npy`); the issue-9 cases name every input
    (`--input NAME=FILE`, lengths included) and, for the encoder-decoder
    graphs, the output (`--output y=FILE`).  -D T (and S) set the run-time
    dims' bounds; their values come from the arrays' shapes."""
    cmd = [blockc, "run", os.path.join(d, case["wiring"] + ".blk"), "--backend", backend,
           "--weights", os.path.join(d, "weights.safetensors")]
    if case.get("ckpt"):   # a whole model's checkpoint: strip the prefix, skip the rest
        cmd += ["--weights-prefix", case["meta"]["weights_prefix"], "--allow-extra"]
    named = case["kind"] == "s2s" or case["padded"]
    if inputs is None:
        inputs = case["meta"]["inputs"]
    if named:
        for name, f in inputs:
            cmd += ["--input", "%s=%s" % (name, os.path.join(d, f))]
    else:
        cmd += ["--input", os.path.join(d, inputs[0][1])]
    cmd += ["--output", ("y=" if case["kind"] == "s2s" else "") + out]
    dims = {"B": case["B"] if B is None else B, "D": case["D"], "H": case["H"], "F": case["F"],
            "N": case["N"]}
    dims.update(case["bounds"])
    if case.get("family") == "llama":
        dims["KV"] = case["KV"]
    for k in ("B", "T", "S", "D", "H", "F", "N", "KV"):
        if k in dims:
            cmd += ["-D", "%s=%d" % (k, dims[k])]
    return cmd


def _spawn(cmd, timeout):
    """Runs cmd; returns (returncode or None on timeout, stderr text)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout after %ds" % timeout
    return p.returncode, p.stderr.decode("utf-8", "replace").strip()


def _read_output(path, shape):
    """Loads a blockc output; returns (array float64, None) or (None, why)."""
    try:
        y = np.load(path)
    except Exception as e:  # noqa: BLE001 - any unreadable output is a failure
        return None, "cannot read output %s: %s" % (path, e)
    if y.shape != tuple(shape) or y.dtype != np.float32:
        return None, "output %s is %s %s, expected float32 %s" % (path, y.dtype, y.shape, tuple(shape))
    return y.astype(np.float64), None


def valid_rows(case, shape):
    """Boolean [B, T] mask of the output rows that are compared."""
    m = np.ones(shape[:2], dtype=bool)
    olen = case["meta"].get("out_lengths")
    if olen:
        m = np.arange(shape[1])[None, :] < np.asarray(case["meta"]["lengths"][olen])[:, None]
    return m


def run_one(blockc, case, backend, d, tol, factor, interp_tol, timeout, single_tol=0.0):
    """Runs blockc once (plus, for a padded case, once per row on the
    unpadded sequence) and scores it. Returns a result dict."""
    r = dict(case=case["name"], dims=dims_str(case), backend=backend)
    out = os.path.join(d, "out_%s.npy" % backend)
    if os.path.exists(out):
        os.unlink(out)
    cmd = blockc_cmd(blockc, case, backend, d, out)
    r["cmd"] = " ".join(cmd)
    t0 = time.time()
    rc, err = _spawn(cmd, timeout)
    r["secs"] = time.time() - t0
    r["rc"], r["stderr"] = rc, err
    if rc is None:
        r.update(ok=False, why=err)
        return r
    if rc != 0:
        r.update(ok=False, why="blockc exit %d: %s" % (rc, first_line(err)))
        return r
    y32 = np.load(os.path.join(d, "expected.npy")).astype(np.float64)
    y64 = np.load(os.path.join(d, "expected64.npy"))
    y, why = _read_output(out, y64.shape)
    if y is None:
        r.update(ok=False, why=why)
        return r
    finite = bool(np.all(np.isfinite(y)))   # padded rows included
    m = valid_rows(case, y64.shape)
    y, y32, y64 = y[m], y32[m], y64[m]
    scale = float(np.max(np.abs(y64)))
    r["maxy"] = scale
    r["abs32"] = float(np.max(np.abs(y - y32)))
    r["abs64"] = float(np.max(np.abs(y - y64)))
    r["torch64"] = float(np.max(np.abs(y32 - y64)))
    denom = scale if scale > 0 else 1.0
    r["rel32"], r["rel64"], r["trel64"] = r["abs32"] / denom, r["abs64"] / denom, r["torch64"] / denom
    if backend == "interp" and interp_tol > 0:
        bound = interp_tol * max(1.0, scale)     # the oracle: strict, no factor term
    else:
        bound = max(tol * max(1.0, scale), factor * r["torch64"])
    r["bound"] = bound
    r["ok"] = finite and r["abs64"] <= bound   # NaN compares False
    if not r["ok"]:
        r["why"] = ("non-finite output" if not finite
                    else "abs err %.2e > %.2e" % (r["abs64"], bound))
        return r
    if case.get("singles"):
        return run_singles(blockc, case, backend, d, r, timeout, single_tol)
    return r


def run_singles(blockc, case, backend, d, r, timeout, single_tol):
    """Each row of a padded batch run alone, unpadded (B=1, run-time dims =
    that row's lengths, no lengths inputs): its output must equal the batch
    output's valid rows within single_tol * max(1, max|y|)."""
    yb = np.load(os.path.join(d, "out_%s.npy" % backend)).astype(np.float64)
    lens = case["meta"]["lengths"][case["meta"]["out_lengths"]]
    worst = 0.0
    scale = max(1.0, r["maxy"])
    for b, ins in enumerate(case["singles"]):
        out = os.path.join(d, "single%d_%s.npy" % (b, backend))
        cmd = blockc_cmd(blockc, case, backend, d, out, inputs=ins, B=1)
        rc, err = _spawn(cmd, timeout)
        if rc != 0:
            r.update(ok=False, why="single row %d: %s" % (
                b, err if rc is None else "blockc exit %d: %s" % (rc, first_line(err))),
                cmd=" ".join(cmd), stderr=err)
            return r
        y1, why = _read_output(out, (1, lens[b], case["D"]))
        if y1 is None:
            r.update(ok=False, why="single row %d: %s" % (b, why))
            return r
        worst = max(worst, float(np.max(np.abs(y1[0] - yb[b, :lens[b]]))))
    r["single"] = worst / scale
    if not worst <= single_tol * scale:
        r.update(ok=False, why="padded row != unpadded run: %.2e > %.2e" % (worst, single_tol * scale))
    return r


def first_line(s):
    s = s.strip().splitlines()
    return s[0] if s else "(no message)"


def is_new(case):
    """True for the issue-9 cases (encoder-decoder, padded, pre_ln_nonorm)."""
    return case["kind"] == "s2s" or (case["kind"] == "enc" and (
        case["padded"] or case["wiring"] not in LEGACY_WIRINGS))


def group_of(case):
    return "fam" if case["kind"] == "fam" else "new" if is_new(case) else "old"


def main(argv=None):
    ap = argparse.ArgumentParser(description="blockc vs PyTorch conformance sweep (see the docstring).")
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"), help="directory of <wiring>.blk")
    ap.add_argument("--backends", help="comma list from %s (default: every one blockc accepts)"
                    % ",".join(ALL_BACKENDS))
    ap.add_argument("--new-backends",
                    help="run the issue-9 cases (encoder-decoder, padded, pre_ln_nonorm) only on "
                         "these backends (default: all the sweep runs); the others are reported "
                         "as NOT COVERED")
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="pass if max|y - y_fp64| <= TOL * max(1, max|y_fp64|) (default 1e-5) ...")
    ap.add_argument("--torch-factor", dest="factor", type=float, default=4.0,
                    help="... or <= FACTOR * PyTorch float32's own max abs err vs fp64 (default 4; 0: off)")
    ap.add_argument("--interp-tol", type=float, default=1e-6,
                    help="the interp backend instead must reach max|y - y_fp64| <= INTERP_TOL * "
                         "max(1, max|y_fp64|) (default 1e-6; 0: use the general rule)")
    ap.add_argument("--single-tol", type=float, default=1e-6,
                    help="a padded batch's valid rows must equal the rows run alone within "
                         "SINGLE_TOL * max(1, max|y|) (default 1e-6)")
    ap.add_argument("--wirings", default=",".join(te.ALL_WIRINGS))
    ap.add_argument("--acts", default="relu,gelu", help="comma list from %s" % ",".join(te.ACTS))
    ap.add_argument("--filter", help="only cases whose name (wiring/act/mask/shape or "
                    "family/shape) matches this regex")
    ap.add_argument("--families", default=",".join(fam.FAMILIES),
                    help="model-family cases to run (tools/families.py vs graphs/<family>.blk); "
                         "'' for none (default %(default)s)")
    ap.add_argument("--families-backends",
                    help="backends every family case must pass on - not probed: a backend that "
                         "cannot run them FAILS (default: --backends, else interp,jit,aot)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel blockc runs")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per blockc run")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build"),
                    help="where the temp directory goes (default: the build directory, not "
                         "a shared /tmp where other runs' cleanups could remove it)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the failing command lines")
    a = ap.parse_args(argv)

    wirings = [w for w in a.wirings.split(",") if w]
    acts = [x for x in a.acts.split(",") if x]
    for w in wirings:
        if w not in te.ALL_WIRINGS:
            ap.error("unknown wiring %r (want some of %s)" % (w, ",".join(te.ALL_WIRINGS)))
    for x in acts:
        if x not in te.ACTS:
            ap.error("unknown act %r" % x)
    if not acts:
        ap.error("--acts is empty")
    new_backends = None
    if a.new_backends is not None:
        new_backends = [b for b in a.new_backends.split(",") if b]
        for b in new_backends:
            if b not in ALL_BACKENDS:
                ap.error("unknown backend %r in --new-backends" % b)
    families = [f for f in a.families.split(",") if f and f != "none"]
    for f in families:
        if f not in fam.FAMILIES:
            ap.error("unknown family %r (want some of %s)" % (f, ",".join(fam.FAMILIES)))
    fb = a.families_backends if a.families_backends is not None else (a.backends or ",".join(ALL_BACKENDS))
    fam_backends = [b for b in fb.split(",") if b]
    for b in fam_backends:
        if b not in ALL_BACKENDS:
            ap.error("unknown backend %r in --families-backends" % b)
    cases = build_cases(wirings, acts, a.filter, a.seed)
    cases += build_family_cases(families, a.filter, a.seed, 1000)   # seeds independent of the sweep
    if a.list:
        for c in cases:
            print("%-34s %-30s seed %d%s%s" % (c["name"], dims_str(c), c["seed"],
                                               "  + each row alone" if c["padded"] else "",
                                               "  on " + ",".join(fam_backends) if c["kind"] == "fam" else ""))
        print("%d cases" % len(cases))
        return 0
    if not cases:
        print("conformance: no case matches", file=sys.stderr)
        return 2
    blockc = os.path.abspath(a.blockc)
    if not os.access(blockc, os.X_OK):
        print("conformance: error: %s is not an executable (build it with `make`)" % blockc,
              file=sys.stderr)
        return 2
    graph_text = {}
    for w in sorted({c["wiring"] for c in cases}):
        p = os.path.join(a.graphs, w + ".blk")
        try:
            with open(p) as f:
                graph_text[w] = f.read()
        except OSError as e:
            print("conformance: error: %s: %s" % (p, e.strerror), file=sys.stderr)
            return 2

    t_start = time.time()
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="blockc_conformance.", dir=a.workdir)
    failures = 0
    try:
        # 1. Export every case (one torch process: this one).
        dirs = {}
        for i, c in enumerate(cases):
            d = os.path.join(tmp, "%03d_%s" % (i, c["name"].replace("/", "_")))
            c["meta"] = export(c, d)
            if c["padded"] and c["act"] == "relu":
                int32_lengths(c["meta"], d)   # the CLI takes int32 and int64 lengths
            if c["padded"]:
                c["singles"] = write_singles(c, c["meta"], d)
            try:
                prepare_graph(graph_text[c["wiring"]], c, os.path.join(d, c["wiring"] + ".blk"))
            except RuntimeError as e:
                print("conformance: error: %s" % e, file=sys.stderr)
                return 2
            dirs[c["name"]] = d
        t_export = time.time() - t_start
        print("exported %d cases in %.1fs (torch %s) into %s"
              % (len(cases), t_export, te.torch.__version__, tmp))

        # 2. Backends: explicit list, or probe each with the first case.
        explicit = a.backends is not None
        wanted = [b for b in (a.backends.split(",") if explicit else ALL_BACKENDS) if b]
        backends = []
        # Probe with an original case when there is one: whether the build
        # has the backend at all.  Issue-9 cases a backend cannot run yet
        # then FAIL (unless gated with --new-backends); they never skip it.
        wcases = [c for c in cases if c["kind"] != "fam"]
        probe = next((c for c in wcases if not is_new(c)), wcases[0] if wcases else None)
        for b in (wanted if probe else []):
            r = run_one(blockc, probe, b, dirs[probe["name"]], a.tol, a.factor, a.interp_tol, a.timeout,
                        a.single_tol)
            if r.get("rc") == 2:  # BC_EUSAGE: the CLI does not know this backend
                msg = "note: backend %r not accepted by `blockc run` (exit 2: %s)" % (
                    b, first_line(r.get("stderr", "")))
                if explicit:
                    print(msg + " - it was requested with --backends: FAIL")
                    failures += 1
                else:
                    print(msg + " - skipped")
                continue
            backends.append(b)
        if wcases and not backends:
            print("conformance: error: no backend could be run", file=sys.stderr)
            return 2
        if wcases:
            print("backends: %s; %d jobs" % (", ".join(backends), a.jobs))
        fcases = [c for c in cases if c["kind"] == "fam"]
        if fcases:
            print("family cases (%s): %s (required, not probed)"
                  % (",".join(sorted({c["family"] for c in fcases})), ",".join(fam_backends) or "-"))
        uncovered = [b for b in backends if new_backends is not None and b not in new_backends]
        if uncovered and any(is_new(c) for c in cases):
            print("NOTE: --new-backends %s: the %d issue-9 cases are NOT run on %s"
                  % (",".join(new_backends), sum(1 for c in cases if is_new(c)), ",".join(uncovered)))
        print("pass: max|y - y_fp64| <= max(%g * max(1, max|y_fp64|), %g * max|y_torch32 - y_fp64|)"
              % (a.tol, a.factor))
        if a.interp_tol > 0 and "interp" in backends + fam_backends:
            print("      interp (strict): max|y - y_fp64| <= %g * max(1, max|y_fp64|)" % a.interp_tol)
        print("      padded cases: valid rows only; each row run alone must match within %g * max(1, max|y|)"
              % a.single_tol)

        # 3. Run everything.
        jobs = [(c, b) for c in wcases for b in backends if not (is_new(c) and b in uncovered)]
        # family cases first, largest first, so the default dims do not run last
        jobs = [(c, b) for c in sorted(fcases, key=lambda c: -c["D"] * c["N"] * c["T"])
                for b in fam_backends] + jobs
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            futs = [ex.submit(run_one, blockc, c, b, dirs[c["name"]], a.tol, a.factor, a.interp_tol,
                              a.timeout, a.single_tol) for c, b in jobs]
            results = [f.result() for f in futs]

        # 4. Report.
        hdr = ("%-34s %-30s %-6s %7s | %9s %9s | %9s %9s | %9s %6s | %8s | %s"
               % ("case", "dims", "backend", "max|y|", "abs32", "rel32", "abs64", "rel64",
                  "torch64", "ratio", "single", "result"))
        print()
        print("abs/rel32: vs PyTorch float32 output; abs/rel64: vs float64 (the pass criterion); "
              "rel = abs / max|y|;")
        print("torch64: PyTorch float32's own rel error vs float64; ratio = rel64 / torch64; "
              "single: padded rows vs each row run alone (rel)")
        print(hdr)
        print("-" * len(hdr))
        worst = {}
        worst_single = {}
        for r in results:
            if "abs64" in r:
                ratio = r["rel64"] / r["trel64"] if r["trel64"] > 0 else float("inf")
                print("%-34s %-30s %-6s %7.3g | %9.2e %9.2e | %9.2e %9.2e | %9.2e %6.3g | %8s | %s"
                      % (r["case"], r["dims"], r["backend"], r["maxy"], r["abs32"], r["rel32"],
                         r["abs64"], r["rel64"], r["trel64"], ratio,
                         "%.1e" % r["single"] if "single" in r else "-",
                         "PASS" if r["ok"] else "FAIL: " + r["why"]))
                group = group_of(next(c for c in cases if c["name"] == r["case"]))
                for key in ((r["backend"], "all"), (r["backend"], group)):
                    w = worst.setdefault(key, [-1.0, ""])
                    if not r["rel64"] <= w[0]:
                        w[0], w[1] = r["rel64"], r["case"]
                if "single" in r:
                    w = worst_single.setdefault(r["backend"], [-1.0, ""])
                    if not r["single"] <= w[0]:
                        w[0], w[1] = r["single"], r["case"]
            else:
                print("%-34s %-30s %-6s %7s | %s" % (r["case"], r["dims"], r["backend"], "-",
                                                     "FAIL: " + r["why"]))
            if not r["ok"]:
                failures += 1
                if a.verbose:
                    print("    $ " + r["cmd"])
                    for line in r.get("stderr", "").splitlines()[:20]:
                        print("    | " + line)
        print()
        by_case = {c["name"]: c for c in cases}
        for b in [x for x in ALL_BACKENDS if x in backends or (fcases and x in fam_backends)]:
            rs = [r for r in results if r["backend"] == b]
            nok = sum(1 for r in rs if r["ok"])
            wv = worst.get((b, "all"), [float("nan"), "-"])
            print("%-6s %3d/%d passed; worst rel err vs fp64 %.2e (%s)" % (b, nok, len(rs), wv[0], wv[1]))
            for group, label in (("old", "original encoder cases"), ("new", "issue-9 cases"),
                                 ("fam", "BERT/GPT-2/LLaMA cases")):
                g = [r for r in rs if group_of(by_case[r["case"]]) == group]
                if g:
                    wv = worst.get((b, group), [float("nan"), "-"])
                    print("         %-22s %3d/%d passed; worst %.2e (%s)"
                          % (label, sum(1 for r in g if r["ok"]), len(g), wv[0], wv[1]))
            if b in worst_single:
                print("         padded rows vs rows run alone: worst %.2e (%s)" % tuple(worst_single[b]))
            if b in uncovered:
                print("         issue-9 cases NOT COVERED on %s (--new-backends)" % b)
        tw = max((r["trel64"] for r in results if "trel64" in r), default=float("nan"))
        print("PyTorch float32's own worst rel err vs fp64: %.2e" % tw)
        print("%d cases, %d runs in %.1fs: %s"
              % (len(cases), len(results), time.time() - t_start,
                 "all PASS" if failures == 0 else "%d FAILED" % failures))
    finally:
        keep_or_remove(tmp, a.keep or failures)
    return 1 if failures else 0


def keep_or_remove(tmp, keep):
    """A run's scratch folder: kept (and said) when asked or when a case failed."""
    if keep:
        print("files kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
