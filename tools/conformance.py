#!/usr/bin/python3
"""conformance.py - blockc vs PyTorch over a sweep of wirings, activations,
masks and shapes, for every backend.

    /usr/bin/python3 tools/conformance.py [--blockc build/blockc]
        [--backends interp,jit,aot] [--tol 1e-5] [--filter REGEX] [--jobs N]

(`make conformance` runs it with the defaults.)  For each case (wiring x
activation x causal x shape set, listed by --list) it uses
tools/torch_export.py - imported, so torch is loaded once for the whole sweep
- to write seeded weights, input, PyTorch's float32 output and the float64
output of the same model into a temporary directory; copies
graphs/<wiring>.blk there, switching `act=relu` -> `act=gelu` and
`causal=false` -> `causal=true` as the case needs; then runs, per backend,

    blockc run <copy>.blk --backend B --weights W --input X --output Y \\
        -D B=.. -D T=.. -D D=.. -D H=.. -D F=.. -D N=..

and compares Y with both references.  Without --backends, each of interp, jit
and aot is probed with one tiny run; a backend that `blockc run` rejects as
usage (exit status 2) is skipped with a printed note.  Backends named
explicitly with --backends must work.  Exit status: 0 all passed, 1 any
failure, 2 nothing could be run (usage, missing blockc or graphs).

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


def build_cases(wirings, acts, filt, seed):
    cases = []
    for wiring in wirings:
        for act in acts:
            for causal in (False, True):
                for sname, B, T, D, H, F, N in SHAPES:
                    name = "%s/%s/%s/%s" % (wiring, act, "causal" if causal else "full", sname)
                    if filt and not re.search(filt, name):
                        continue
                    cases.append(dict(name=name, wiring=wiring, act=act, causal=causal,
                                      B=B, T=T, D=D, H=H, F=F, N=N, seed=seed + len(cases)))
    return cases


# Family cases (tools/families.py vs graphs/<family>.blk):
# name, B, T, D, H, F, N, KV, lengths.  "odd": the odd dims (T=7,
# D=48, H=6 so dh=8, KV=2, odd F, N=2); "pad": B=2 right-padded via the
# graph's lengths input; "mqa" / "mha": KV=1 and KV=H; "default": the
# shipped graph's own dims (bert-base, gpt2 124M, the small LLaMA).
_D = fam.DEFAULT_DIMS
FAMILY_SHAPES = {
    "bert": [("odd", 1, 7, 48, 6, 101, 2, 6, None),
             ("pad", 2, 7, 48, 6, 101, 2, 6, [7, 3]),
             ("default",) + tuple(_D["bert"][k] for k in ("B", "T", "D", "H", "F", "N", "KV")) + (None,)],
    "gpt2": [("odd", 1, 7, 48, 6, 101, 2, 6, None),
             ("pad", 2, 7, 48, 6, 101, 2, 6, [7, 2]),
             ("default",) + tuple(_D["gpt2"][k] for k in ("B", "T", "D", "H", "F", "N", "KV")) + (None,)],
    "llama": [("odd", 1, 7, 48, 6, 131, 2, 2, None),
              ("mqa", 2, 7, 48, 6, 131, 2, 1, None),
              ("mha", 1, 7, 48, 6, 131, 2, 6, None),
              ("default",) + tuple(_D["llama"][k] for k in ("B", "T", "D", "H", "F", "N", "KV")) + (None,)],
}


def build_family_cases(families, filt, seed):
    cases = []
    for f in families:
        for sname, B, T, D, H, F, N, KV, lengths in FAMILY_SHAPES[f]:
            name = "%s/%s" % (f, sname)
            if filt and not re.search(filt, name):
                continue
            cases.append(dict(name=name, family=f, wiring=f, B=B, T=T, D=D, H=H, F=F, N=N, KV=KV,
                              lengths=lengths, seed=seed + 1000 + len(cases)))
    return cases


def dims_str(c):
    s = "B%(B)d T%(T)d D%(D)d H%(H)d F%(F)d N%(N)d" % c
    if c.get("family") == "llama":
        s += " KV%d" % c["KV"]
    if c.get("lengths"):
        s += " len" + ",".join(str(n) for n in c["lengths"])
    return s


LENGTHS_DECL = "input len : lengths[B]\n"
LENGTHS_USE = ", lengths=len)"


def prepare_family_graph(src_text, case, path):
    """Writes the family case's graph.  A padded case runs the shipped graph
    as it is.  An unpadded case runs it with its optional lengths input
    removed (checked text edit), so that a backend without lengths support
    still runs the family's ops."""
    text = src_text
    if LENGTHS_DECL in text and not case.get("lengths"):
        if text.count(LENGTHS_DECL) != 1 or text.count(LENGTHS_USE) != 1:
            raise RuntimeError("%s.blk: expected one `%s` and one `%s` to remove"
                               % (case["family"], LENGTHS_DECL.strip(), LENGTHS_USE))
        text = text.replace(LENGTHS_DECL, "").replace(LENGTHS_USE, ")")
    elif case.get("lengths") and LENGTHS_DECL not in text:
        raise RuntimeError("%s.blk has no `%s` for a padded case" % (case["family"], LENGTHS_DECL.strip()))
    with open(path, "w") as f:
        f.write(text)


def prepare_graph(src_text, case, path):
    """Writes the case's graph: act / causal switched by text substitution."""
    text = src_text
    for key, default, want in (("act", "relu", case["act"]),
                               ("causal", "false", "true" if case["causal"] else "false")):
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


def blockc_cmd(blockc, case, backend, d):
    cmd = [blockc, "run", os.path.join(d, case["wiring"] + ".blk"), "--backend", backend,
           "--weights", os.path.join(d, "weights.safetensors")]
    if case.get("family"):
        cmd += ["--input", "x=" + os.path.join(d, "input.npy")]
        if case.get("lengths"):
            cmd += ["--input", "len=" + os.path.join(d, "lengths.npy")]
    else:
        cmd += ["--input", os.path.join(d, "input.npy")]
    cmd += ["--output", os.path.join(d, "out_%s.npy" % backend)]
    keys = ("B", "T", "D", "H", "F", "N") + (("KV",) if case.get("family") == "llama" else ())
    for k in keys:
        cmd += ["-D", "%s=%d" % (k, case[k])]
    return cmd


def run_one(blockc, case, backend, d, tol, factor, interp_tol, timeout):
    """Runs blockc once and scores it. Returns a result dict."""
    r = dict(case=case["name"], dims=dims_str(case), backend=backend)
    out = os.path.join(d, "out_%s.npy" % backend)
    if os.path.exists(out):
        os.unlink(out)
    cmd = blockc_cmd(blockc, case, backend, d)
    r["cmd"] = " ".join(cmd)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        r.update(ok=False, why="timeout after %ds" % timeout, rc=None, secs=time.time() - t0)
        return r
    r["secs"] = time.time() - t0
    r["rc"] = p.returncode
    r["stderr"] = p.stderr.decode("utf-8", "replace").strip()
    if p.returncode != 0:
        r.update(ok=False, why="blockc exit %d: %s" % (p.returncode, first_line(r["stderr"])))
        return r
    try:
        y = np.load(out)
    except Exception as e:  # noqa: BLE001 - any unreadable output is a failure
        r.update(ok=False, why="cannot read output %s: %s" % (out, e))
        return r
    y32 = np.load(os.path.join(d, "expected.npy")).astype(np.float64)
    y64 = np.load(os.path.join(d, "expected64.npy"))
    if y.shape != y64.shape or y.dtype != np.float32:
        r.update(ok=False, why="output is %s %s, expected float32 %s" % (y.dtype, y.shape, y64.shape))
        return r
    y = y.astype(np.float64)
    if case.get("lengths"):   # padded rows are not the model's: compare valid rows only
        y, y32, y64 = (fam.valid_rows(a, case["lengths"]) for a in (y, y32, y64))
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
    r["ok"] = bool(np.all(np.isfinite(y))) and r["abs64"] <= bound   # NaN compares False
    if not r["ok"]:
        r["why"] = ("non-finite output" if not np.all(np.isfinite(y))
                    else "abs err %.2e > %.2e" % (r["abs64"], bound))
    return r


def first_line(s):
    s = s.strip().splitlines()
    return s[0] if s else "(no message)"


def main(argv=None):
    ap = argparse.ArgumentParser(description="blockc vs PyTorch conformance sweep (see the docstring).")
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"), help="directory of <wiring>.blk")
    ap.add_argument("--backends", help="comma list from %s (default: every one blockc accepts)"
                    % ",".join(ALL_BACKENDS))
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="pass if max|y - y_fp64| <= TOL * max(1, max|y_fp64|) (default 1e-5) ...")
    ap.add_argument("--torch-factor", dest="factor", type=float, default=4.0,
                    help="... or <= FACTOR * PyTorch float32's own max abs err vs fp64 (default 4; 0: off)")
    ap.add_argument("--interp-tol", type=float, default=1e-6,
                    help="the interp backend instead must reach max|y - y_fp64| <= INTERP_TOL * "
                         "max(1, max|y_fp64|) (default 1e-6; 0: use the general rule)")
    ap.add_argument("--wirings", default=",".join(te.WIRINGS))
    ap.add_argument("--acts", default="relu,gelu", help="comma list from %s" % ",".join(te.ACTS))
    ap.add_argument("--filter", help="only cases whose name (wiring/act/mask/shape or "
                    "family/shape) matches this regex")
    ap.add_argument("--families", default=",".join(fam.FAMILIES),
                    help="family cases to run (tools/families.py vs graphs/<family>.blk); "
                         "'' for none (default %(default)s)")
    ap.add_argument("--families-backends", default=",".join(ALL_BACKENDS),
                    help="backends every family case must pass on - no probing, a backend that "
                         "cannot run them FAILS (default %(default)s)")
    ap.add_argument("--families-pad-backends",
                    help="backends for the padded family cases (lengths input); default: "
                         "--families-backends")
    ap.add_argument("--family-graphs", help="directory of <family>.blk (default: --graphs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel blockc runs")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per blockc run")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the failing command lines")
    a = ap.parse_args(argv)

    wirings = [w for w in a.wirings.split(",") if w]
    families = [f for f in a.families.split(",") if f and f != "none"]
    for f in families:
        if f not in fam.FAMILIES:
            ap.error("unknown family %r (want some of %s)" % (f, ",".join(fam.FAMILIES)))
    fam_backends = [b for b in a.families_backends.split(",") if b]
    pad_backends = ([b for b in a.families_pad_backends.split(",") if b]
                    if a.families_pad_backends is not None else fam_backends)
    for b in fam_backends + pad_backends:
        if b not in ALL_BACKENDS:
            ap.error("unknown backend %r in --families-backends / --families-pad-backends" % b)
    acts = [x for x in a.acts.split(",") if x]
    for w in wirings:
        if w not in te.WIRINGS:
            ap.error("unknown wiring %r" % w)
    for x in acts:
        if x not in te.ACTS:
            ap.error("unknown act %r" % x)
    cases = build_cases(wirings, acts, a.filter, a.seed)
    fcases = build_family_cases(families, a.filter, a.seed)
    for c in fcases:
        c["backends"] = pad_backends if c["lengths"] else fam_backends
    if a.list:
        for c in cases:
            print("%-32s %s seed %d" % (c["name"], dims_str(c), c["seed"]))
        for c in fcases:
            print("%-32s %s seed %d on %s" % (c["name"], dims_str(c), c["seed"], ",".join(c["backends"])))
        return 0
    if not cases and not fcases:
        print("conformance: no case matches", file=sys.stderr)
        return 2
    blockc = os.path.abspath(a.blockc)
    if not os.access(blockc, os.X_OK):
        print("conformance: error: %s is not an executable (build it with `make`)" % blockc,
              file=sys.stderr)
        return 2
    graph_text = {}
    for w in wirings:
        p = os.path.join(a.graphs, w + ".blk")
        try:
            with open(p) as f:
                graph_text[w] = f.read()
        except OSError as e:
            print("conformance: error: %s: %s" % (p, e.strerror), file=sys.stderr)
            return 2
    for f in sorted({c["family"] for c in fcases}):
        p = os.path.join(a.family_graphs or a.graphs, f + ".blk")
        try:
            with open(p) as fh:
                graph_text[f] = fh.read()
        except OSError as e:
            print("conformance: error: %s: %s" % (p, e.strerror), file=sys.stderr)
            return 2

    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="blockc_conformance.")
    failures = 0
    try:
        # 1. Export every case (one torch process: this one).
        dirs = {}
        for i, c in enumerate(cases):
            d = os.path.join(tmp, "%03d_%s" % (i, c["name"].replace("/", "_")))
            te.export_case(d, c["wiring"], c["B"], c["T"], c["D"], c["H"], c["F"], c["N"],
                           c["act"], c["causal"], c["seed"])
            try:
                prepare_graph(graph_text[c["wiring"]], c, os.path.join(d, c["wiring"] + ".blk"))
            except RuntimeError as e:
                print("conformance: error: %s" % e, file=sys.stderr)
                return 2
            dirs[c["name"]] = d
        for i, c in enumerate(fcases):
            d = os.path.join(tmp, "f%02d_%s" % (i, c["name"].replace("/", "_")))
            fam.export_case(d, c["family"], c["B"], c["T"], c["D"], c["H"], c["F"], c["N"], c["KV"],
                            c["seed"], c["lengths"])
            try:
                prepare_family_graph(graph_text[c["family"]], c, os.path.join(d, c["family"] + ".blk"))
            except RuntimeError as e:
                print("conformance: error: %s" % e, file=sys.stderr)
                return 2
            dirs[c["name"]] = d
        t_export = time.time() - t_start
        print("exported %d cases in %.1fs (torch %s) into %s"
              % (len(cases) + len(fcases), t_export, te.torch.__version__, tmp))

        # 2. Backends: explicit list, or probe each with the first case.
        explicit = a.backends is not None
        wanted = [b for b in (a.backends.split(",") if explicit else ALL_BACKENDS) if b]
        backends = []
        probe = cases[0] if cases else None
        for b in (wanted if probe else []):
            r = run_one(blockc, probe, b, dirs[probe["name"]], a.tol, a.factor, a.interp_tol, a.timeout)
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
        if cases and not backends:
            print("conformance: error: no backend could be run", file=sys.stderr)
            return 2
        if cases:
            print("backends: %s; %d jobs" % (", ".join(backends), a.jobs))
        if fcases:
            print("family cases (%s): %s; padded ones: %s (required, not probed)"
                  % (",".join(families), ",".join(fam_backends) or "-", ",".join(pad_backends) or "-"))
        print("pass: max|y - y_fp64| <= max(%g * max(1, max|y_fp64|), %g * max|y_torch32 - y_fp64|)"
              % (a.tol, a.factor))
        if a.interp_tol > 0 and "interp" in backends + fam_backends + pad_backends:
            print("      interp (strict): max|y - y_fp64| <= %g * max(1, max|y_fp64|)" % a.interp_tol)

        # 3. Run everything.
        jobs = [(c, b) for c in cases for b in backends]
        # family cases, largest first so the default dims do not run last
        jobs = [(c, b) for c in sorted(fcases, key=lambda c: -c["D"] * c["N"] * c["T"])
                for b in c["backends"]] + jobs
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            futs = [ex.submit(run_one, blockc, c, b, dirs[c["name"]], a.tol, a.factor, a.interp_tol, a.timeout) for c, b in jobs]
            results = [f.result() for f in futs]

        # 4. Report.
        hdr = ("%-30s %-29s %-6s %7s | %9s %9s | %9s %9s | %9s %6s | %s"
               % ("case", "dims", "backend", "max|y|", "abs32", "rel32", "abs64", "rel64",
                  "torch64", "ratio", "result"))
        print()
        print("abs/rel32: vs PyTorch float32 output; abs/rel64: vs float64 (the pass criterion); "
              "rel = abs / max|y|;")
        print("torch64: PyTorch float32's own rel error vs float64; ratio = rel64 / torch64")
        print(hdr)
        print("-" * len(hdr))
        worst = {}
        fnames = {c["name"] for c in fcases}
        for r in results:
            if "abs64" in r:
                ratio = r["rel64"] / r["trel64"] if r["trel64"] > 0 else float("inf")
                print("%-30s %-29s %-6s %7.3g | %9.2e %9.2e | %9.2e %9.2e | %9.2e %6.3g | %s"
                      % (r["case"], r["dims"], r["backend"], r["maxy"], r["abs32"], r["rel32"],
                         r["abs64"], r["rel64"], r["trel64"], ratio,
                         "PASS" if r["ok"] else "FAIL: " + r["why"]))
                w = worst.setdefault(r["backend"], [0.0, ""])
                if not r["rel64"] <= w[0]:
                    w[0], w[1] = r["rel64"], r["case"]
            else:
                print("%-30s %-29s %-6s %7s | %s" % (r["case"], r["dims"], r["backend"], "-",
                                                     "FAIL: " + r["why"]))
            if not r["ok"]:
                failures += 1
                if a.verbose:
                    print("    $ " + r["cmd"])
                    for line in r.get("stderr", "").splitlines()[:20]:
                        print("    | " + line)
        print()
        for label, sel in (("", lambda r: r["case"] not in fnames), ("families ", lambda r: r["case"] in fnames)):
            for b in ALL_BACKENDS:
                rs = [r for r in results if r["backend"] == b and sel(r)]
                if not rs:
                    continue
                nok = sum(1 for r in rs if r["ok"])
                wr = max((r for r in rs if "rel64" in r), key=lambda r: r["rel64"], default=None)
                print("%s%-6s %3d/%d passed; worst rel err vs fp64 %s" % (
                    label, b, nok, len(rs),
                    "%.2e (%s)" % (wr["rel64"], wr["case"]) if wr else "- (no run produced output)"))
        tw = max((r["trel64"] for r in results if "trel64" in r), default=float("nan"))
        print("PyTorch float32's own worst rel err vs fp64: %.2e" % tw)
        print("%d runs (%d wiring cases x %d backends, %d family cases) in %.1fs: %s"
              % (len(results), len(cases), len(backends), len(fcases), time.time() - t_start,
                 "all PASS" if failures == 0 else "%d FAILED" % failures))
    finally:
        if a.keep or failures:
            print("files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
