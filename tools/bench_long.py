#!/usr/bin/env python3
"""bench_long.py — long sequences (issue 26): blockc's forward of post_ln
(D=512 H=8 F=2048 N=6, B=1) against PyTorch 1.13's nn.TransformerEncoder of
the same shape (Post-LN, relu; the model tools/torch_export.py checks blockc
against), at T = 512 .. 4096 (and blockc alone beyond), on 1 and 2 threads,
side by side in one run.

Each measurement is a fresh process, so its peak RSS (ru_maxrss from wait4)
is that run's alone: blockc `run` (random weights and input, the tiled
attention, one forward timed) and a PyTorch child (torch.no_grad, the
forward timed after one warm-up).  Also printed: each one's RSS before the
forward (the weights and the library), so the memory the forward itself
takes can be compared too.  Medians of --reps processes.

    /usr/bin/python3 tools/bench_long.py [--blockc build/blockc] [--threads 1,2]
        [--T 512,1024,2048,4096] [--blockc-only-T 8192,16384] [--reps 3]

Needs Debian's python3-torch (make pydeps).  A benchmark, never a test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

TORCH_CHILD = r'''
import resource, sys, time, torch
T, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="relu",
                                         batch_first=True, norm_first=False)
model = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
x = torch.randn(1, T, 512)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.no_grad():
    model(x)                      # warm-up (allocator, OpenBLAS buffers)
    t0 = time.perf_counter()
    model(x)
    ms = (time.perf_counter() - t0) * 1e3
print("RESULT", ms, before)
'''


def measured(argv, env=None):
    """(stdout, peak RSS KiB) of one child, through /usr/bin/time."""
    full = ["/usr/bin/time", "-f", "MAXRSS %M"] + argv
    p = subprocess.run(full, capture_output=True, env=env, text=True)
    if p.returncode != 0:
        sys.exit("bench_long: %s failed:\n%s" % (" ".join(argv), p.stderr))
    m = re.search(r"MAXRSS (\d+)", p.stderr)
    return p.stdout, int(m.group(1)) if m else -1


def blockc_run(blockc, T, threads):
    # blockc run prints "backend jit  load .. ms  compile .. ms  forward X ms"
    out, rss = measured([blockc, "run", "graphs/post_ln.blk", "-D", "D=512", "-D", "H=8",
                         "-D", "F=2048", "-D", "N=6", "-D", "T=%d" % T, "--threads", str(threads)])
    m = re.search(r"forward ([0-9.]+) ms", out)
    if not m:
        sys.exit("bench_long: no forward time in:\n" + out)
    return float(m.group(1)), rss


def torch_run(T, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out, rss = measured(["/usr/bin/python3", "-c", TORCH_CHILD, str(T), str(threads)], env)
    m = re.search(r"RESULT ([0-9.]+) (\d+)", out)
    return float(m.group(1)), rss, int(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default="build/blockc")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--T", default="512,1024,2048,4096")
    ap.add_argument("--blockc-only-T", default="8192,16384")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for th in [int(t) for t in a.threads.split(",") if t]:
        for T in [int(t) for t in a.T.split(",") if t]:
            b = [blockc_run(a.blockc, T, th) for _ in range(a.reps)]
            p = [torch_run(T, th) for _ in range(a.reps)]
            rows.append({"threads": th, "T": T,
                         "blockc_ms": statistics.median(x[0] for x in b),
                         "blockc_rss_mib": statistics.median(x[1] for x in b) / 1024,
                         "torch_ms": statistics.median(x[0] for x in p),
                         "torch_rss_mib": statistics.median(x[1] for x in p) / 1024,
                         "torch_rss_before_mib": statistics.median(x[2] for x in p) / 1024})
        for T in [int(t) for t in a.blockc_only_T.split(",") if t]:
            b = [blockc_run(a.blockc, T, th) for _ in range(max(1, a.reps // 2))]
            rows.append({"threads": th, "T": T, "blockc_ms": statistics.median(x[0] for x in b),
                         "blockc_rss_mib": statistics.median(x[1] for x in b) / 1024})
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return
    print("%7s %6s %11s %10s %11s %10s %9s %8s %12s" % (
        "threads", "T", "blockc ms", "ms/token", "PyTorch ms", "speedup", "blockc MiB",
        "PT MiB", "blockc/PT mem"))
    for r in rows:
        if "torch_ms" in r:
            print("%7d %6d %11.1f %10.4f %11.1f %9.2fx %10.0f %8.0f %11.2fx" % (
                r["threads"], r["T"], r["blockc_ms"], r["blockc_ms"] / r["T"], r["torch_ms"],
                r["torch_ms"] / r["blockc_ms"], r["blockc_rss_mib"], r["torch_rss_mib"],
                r["blockc_rss_mib"] / r["torch_rss_mib"]))
        else:
            print("%7d %6d %11.1f %10.4f %11s %10s %10.0f" % (
                r["threads"], r["T"], r["blockc_ms"], r["blockc_ms"] / r["T"], "-", "-",
                r["blockc_rss_mib"]))


if __name__ == "__main__":
    main()
