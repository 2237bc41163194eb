#!/usr/bin/python3
"""bench_train.py - `make bench-train`: training speed side by side in one
run (not a test; nothing asserts a time).  The model is a GPT-2-style LM
(graphs/gpt2_lm.blk at D=512 N=6 H=8 F=4D V=8192 P=1024, B=4 T=128); every
trainer reads the same llm.c token file (build/bench-train/data.bin, made by
tools/llmc_files.py) in llm.c's sequential windows and runs AdamW.  For one
and for two threads, in this order:

  blockc    `blockc train` when the CLI has it (ms/step from its --log),
            else build/bench_train (tools/bench_train.c: the emitted
            <model>_backward + CrossEntropy over V + clipping + AdamW)
  pytorch   tools/bench_train_torch.py (Debian's python3-torch, 1.13)
  llm.c     llm.c's train_gpt2 step (CPU, OpenMP): tools/llmc_driver.c
            compiled at bench time against a snapshot of karpathy/llm.c
            found at --llmc-src (default: $LLMC_SRC, else build/llmc/src;
            never in this repository), with llm.c's own flags, into
            build/llmc; it reads tools/llmc_files.py's random GPT-2
            checkpoint and the shared token file and prints train_gpt2's
            "step N: train loss L (took X ms)" lines (median after
            --warmup).  Without a snapshot the row says so and how to get
            one (docs/training.md).

and the floor: the step's GEMM FLOPs (6 x tokens x matmul parameters, plus
attention's 12 B T^2 D per layer) over the best GEMM rate measured on the
model's shapes now, cblas_sgemm's or the step's own (bcrt_sgemm_pick;
build/bench_train --peak, which also prints the core's FMA peak and the
runtime's bcrt_sgemm alone on each shape: cblas / bcrt / step columns).  Each row: median
ms/step, tokens/s, peak RSS (MiB, getrusage high-water mark of the
process), ms over the floor; ratios are blockc's tokens/s over the others'.
Then `blockc bench --train` on the same graph: the emitted backward next to
its own GEMM floor (backward_ratio).

Usage: bench_train.py [--blockc build/blockc] [--steps 6] [--rounds 3] [--llmc-steps 4]
                      [--llmc-src DIR] [--threads 1,2] [--json]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CFG = dict(D=512, N=6, H=8, V=8192, B=4, T=128, P=1024)
PY = "/usr/bin/python3"


def dflags(cfg):
    out = []
    for k in ("D", "N", "H", "V", "B", "T", "P"):
        if k in cfg:
            out += ["-D", "%s=%d" % (k, cfg[k])]
    return out


def step_flops(c):
    """GEMM FLOPs of one training step (forward 2, backward 4 per MAC)."""
    D, N, V, B, T = c["D"], c["N"], c["V"], c["B"], c["T"]
    tokens = B * T
    mm = N * 12 * D * D + V * D          # qkv 3D^2, proj D^2, fc 4D^2, fc-proj 4D^2; head V D
    att = N * 12 * B * T * T * D         # q k^T and p v: 4 B T^2 D forward, 8 backward
    return 6.0 * tokens * mm + att


def run_json(cmd, env=None, what=""):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=ROOT)
    if r.returncode != 0:
        sys.stderr.write("bench_train: %s failed (%d): %s\n%s" % (what, r.returncode, " ".join(cmd),
                                                                 r.stderr[-2000:]))
        return None
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write("bench_train: %s printed no result\n" % what)
    return None


def median_run(runs):
    """The run with the median ms/step (None when any failed)."""
    if not runs or any(r is None for r in runs):
        return None
    r = sorted(runs, key=lambda x: x["ms"])[len(runs) // 2]
    r["rounds_ms"] = [round(x["ms"], 1) for x in runs]
    return r


def prepare(out, cfg):
    os.makedirs(out, exist_ok=True)
    data, model = os.path.join(out, "data.bin"), os.path.join(out, "gpt2_llmc.bin")
    tool = os.path.join(HERE, "llmc_files.py")
    if not os.path.exists(data):
        subprocess.run([PY, tool, "--data", data, "--tokens", str(1 << 16), "--vocab",
                        str(cfg["V"])], check=True)
    if not os.path.exists(model):
        subprocess.run([PY, tool, "--model", model, "--vocab", str(cfg["V"]), "--maxT",
                        str(cfg["P"]), "--layers", str(cfg["N"]), "--heads", str(cfg["H"]),
                        "--channels", str(cfg["D"])], check=True)
    return data, model


LLMC_FLAGS = ["-Ofast", "-Wno-unused-result", "-march=native", "-fopenmp", "-DOMP", "-DTESTING"]


def build_llmc(build, src):
    """(driver path, None) or (None, why not): tools/llmc_driver.c built
    against the llm.c snapshot at src with llm.c's flags, in build/llmc."""
    if not os.path.isfile(os.path.join(src, "train_gpt2.c")):
        return None, ("no llm.c snapshot at %s (train_gpt2.c missing): extract one there or pass "
                      "LLMC_SRC=DIR (docs/training.md, 'llm.c')" % src)
    out = os.path.join(build, "llmc")
    os.makedirs(out, exist_ok=True)
    exe = os.path.abspath(os.path.join(out, "llmc_driver"))
    drv = os.path.join(HERE, "llmc_driver.c")
    deps = [drv, os.path.join(src, "train_gpt2.c")]
    if os.path.exists(exe) and all(os.path.getmtime(exe) >= os.path.getmtime(d) for d in deps):
        return exe, None
    cc = os.environ.get("CC", "cc")
    cmd = [cc] + LLMC_FLAGS + ["-I", src, drv, "-lm", "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        return None, "building llm.c failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:])
    return exe, None


def llmc_row(exe, ckpt, data, cfg, threads, steps, warm):
    """llm.c's step: the median of its "took X ms" lines after warm."""
    cmd = ["/usr/bin/time", "-f", "%M", exe, os.path.abspath(ckpt), os.path.abspath(data),
           str(cfg["B"]), str(cfg["T"]), str(steps + warm)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.path.dirname(exe))
    if r.returncode != 0:
        sys.stderr.write("bench_train: llm.c failed (%d): %s\n%s" % (r.returncode, " ".join(cmd),
                                                                     r.stderr[-2000:]))
        return None
    ms = [float(m.group(1)) for m in re.finditer(r"took ([0-9.]+) ms", r.stdout)][warm:]
    if not ms:
        sys.stderr.write("bench_train: llm.c printed no step times\n")
        return None
    ms.sort()
    med = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
    tok = cfg["B"] * cfg["T"]
    return {"what": "llm.c", "via": "tools/llmc_driver.c + train_gpt2.c", "threads": threads,
            "ms": med, "steps_ms": [round(x, 1) for x in ms], "tokens_per_s": tok / med * 1e3,
            "peak_rss_mb": int(r.stderr.strip().splitlines()[-1]) / 1024.0}


def have_train_cli(blockc):
    r = subprocess.run([blockc, "train", "--help"], capture_output=True, text=True)
    return r.returncode == 0 and "--data" in (r.stdout + r.stderr)


def blockc_train_row(blockc, data, cfg, threads, steps, warm, out):
    """`blockc train`: ms per step from its --log (one JSON object per step)."""
    log = os.path.join(out, "train_t%d.jsonl" % threads)
    dims = {k: v for k, v in cfg.items() if k not in ("B", "T")}  # --batch, --seq set them
    cmd = ["/usr/bin/time", "-f", "%M", blockc, "train", "graphs/gpt2_lm.blk"] + dflags(dims) + [
        "--data", data, "--steps", str(steps + warm), "--batch", str(cfg["B"]), "--seq",
        str(cfg["T"]), "--data-order", "sequential", "--threads", str(threads), "--log", log,
        "--init", "gpt2"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.stderr.write("bench_train: blockc train failed: %s\n" % r.stderr[-2000:])
        return None
    ms = sorted(json.loads(l)["ms"] for l in open(log).read().splitlines()[warm:] if l.strip())
    med = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
    rss_kb = int(r.stderr.strip().splitlines()[-1])
    tok = cfg["B"] * cfg["T"]
    return {"what": "blockc", "via": "blockc train", "threads": threads, "ms": med,
            "tokens_per_s": tok / med * 1e3, "peak_rss_mb": rss_kb / 1024.0}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blockc", default="build/blockc")
    p.add_argument("--build", default="build")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--llmc-steps", type=int, default=4)
    p.add_argument("--llmc-src", default=os.environ.get("LLMC_SRC"),
                   help="an llm.c snapshot (default $LLMC_SRC, else BUILD/llmc/src)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--harness", action="store_true", help="time build/bench_train even when "
                   "`blockc train` exists")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    cfg = dict(CFG)
    out = os.path.join(a.build, "bench-train")
    data, ckpt = prepare(out, cfg)
    llmc, llmc_why = build_llmc(a.build, os.path.abspath(a.llmc_src or os.path.join(a.build, "llmc",
                                                                                  "src")))
    harness = os.path.join(a.build, "bench_train")
    use_cli = not a.harness and have_train_cli(a.blockc)
    flops = step_flops(cfg)
    tok = cfg["B"] * cfg["T"]
    rows = []
    print("bench-train: gpt2_lm D=%(D)d N=%(N)d H=%(H)d V=%(V)d P=%(P)d B=%(B)d T=%(T)d" % cfg
          + ", %.2f GFLOP per step (GEMMs), blockc via %s" %
          (flops / 1e9, "`blockc train`" if use_cli else "build/bench_train (emitted backward)"))
    for th in [int(t) for t in a.threads.split(",")]:
        peak = run_json([harness, "--peak", "--threads", str(th)], what="sgemm peak")
        floor_ms = flops / (peak["gflops"] * 1e9) * 1e3 if peak else None
        env = {"OMP_NUM_THREADS": str(th), "OPENBLAS_NUM_THREADS": str(th)}
        # blockc and PyTorch alternate, --rounds times: on a shared machine both
        # then see the same disturbances; each reports the median of its rounds.
        bs, ts = [], []
        for _ in range(a.rounds):
            if use_cli:
                bs.append(blockc_train_row(a.blockc, data, cfg, th, a.steps, a.warmup, out))
            else:
                bs.append(run_json([harness, "graphs/gpt2_lm.blk", data] + dflags(cfg) + [
                    "--threads", str(th), "--steps", str(a.steps), "--warmup", str(a.warmup)],
                    env, "blockc"))
            ts.append(run_json([PY, os.path.join(HERE, "bench_train_torch.py"), data, "--threads",
                                str(th), "--steps", str(a.steps), "--warmup", str(a.warmup)]
                               + dflags(cfg), env, "pytorch"))
        b, t = median_run(bs), median_run(ts)
        l = llmc_row(llmc, ckpt, data, cfg, th, a.llmc_steps, 1) if llmc else None
        row = {"threads": th, "sgemm_gflops": peak and peak["gflops"], "floor_ms": floor_ms,
               "blockc": b, "pytorch": t, "llmc": l}
        rows.append(row)
        print("\nthreads %d: sgemm peak %.1f GFLOP/s (cblas_sgemm %.1f) -> GEMM floor %.1f ms/step "
              "(%.0f tokens/s)" % (th, peak["gflops"] if peak else 0,
                                   peak.get("cblas_gflops", 0) if peak else 0, floor_ms or 0,
                                   tok / floor_ms * 1e3 if floor_ms else 0))
        if peak:
            print("  FMA peak %.1f GFLOP/s; GEMM GFLOP/s on the model's shapes (M x N x K, op):"
                  % peak.get("fma_peak_gflops", 0))
            print("    %-22s %8s %8s %8s" % ("", "cblas", "bcrt_mt", "step"))
            for sh in peak["shapes"]:
                print("    %-22s %8.1f %8.1f %8.1f" % (
                    "%dx%dx%d %s%s" % (sh["m"], sh["n"], sh["k"], "T" if sh["ta"] else "N",
                                       "T" if sh["tb"] else "N"),
                    sh["gflops"], sh.get("own_gflops", 0), sh["step_gflops"]))
        print("  %-8s %10s %10s %10s %10s" % ("", "ms/step", "tokens/s", "peak MiB", "x floor"))
        for name, r in (("blockc", b), ("pytorch", t), ("llm.c", l)):
            if r:
                print("  %-8s %10.1f %10.1f %10.1f %10.2f  %s" % (
                    name, r["ms"], r["tokens_per_s"], r["peak_rss_mb"],
                    r["ms"] / floor_ms if floor_ms else 0,
                    "rounds " + " ".join("%.0f" % x for x in r["rounds_ms"]) if "rounds_ms" in r
                    else "steps " + " ".join("%.0f" % x for x in r.get("steps_ms", []))))
            elif name == "llm.c" and not llmc:
                print("  llm.c    NOT RUN: %s" % llmc_why)
            else:
                print("  %-8s failed" % name)
        if b and t:
            print("  blockc / pytorch: %.2fx tokens/s, %.2fx peak memory" % (
                b["tokens_per_s"] / t["tokens_per_s"], b["peak_rss_mb"] / t["peak_rss_mb"]))
        if b and l:
            print("  blockc / llm.c:   %.2fx tokens/s, %.2fx peak memory" % (
                b["tokens_per_s"] / l["tokens_per_s"], b["peak_rss_mb"] / l["peak_rss_mb"]))
        bb = run_json([a.blockc, "bench", "graphs/gpt2_lm.blk"] + dflags(cfg) + [
            "--threads", str(th), "--iters", "5", "--json", "--train"], env, "blockc bench --train")
        if bb and bb.get("backward_ms") is not None:
            row["backward"] = {k: bb[k] for k in ("train_step_ms", "step_forward_ms", "backward_ms",
                                                  "backward_gemm_ms", "backward_ratio")}
            print("  backward %.1f ms vs its GEMMs alone %.1f ms: %.3fx (blockc bench --train)" % (
                bb["backward_ms"], bb["backward_gemm_ms"], bb["backward_ratio"]))
        sys.stdout.flush()
    if a.json:
        print(json.dumps({"config": cfg, "step_gflop": flops / 1e9, "rows": rows}))


if __name__ == "__main__":
    main()
