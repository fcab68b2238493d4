#!/usr/bin/env python3
"""CPU training throughput: dptrain against PyTorch (eager and torch.compile), side by side.

    tools/bench/cpu_vs_torch.py [--build build] [--pairs 3] [--rows cnn1,cnn2,ddp,r18,r50]
                                [--load N] [--torch-python /opt/dptrain-venv/bin/python]

Rows (same architecture, batch, optimizer and thread count on both sides; f32; NCHW in torch):
  cnn1  the Fashion-MNIST CNN (models/fmnist_cnn.cfg's preset), batch 128, AdamW, 1 thread
  cnn2  the same, 2 threads
  ddp   the same, 2 processes x 1 thread: `dptrain --nproc 2` against torchrun + DDP (gloo)
  r18   CIFAR ResNet-18 (the cifar_resnet18 preset), batch 32, SGD (momentum, Nesterov), 1 thread
  r50   ResNet-50, batch 16, 3x224x224 synthetic, SGD, 2 threads
  gpt   gpt_tiny (models/gpt_tiny.cfg: 4 layers, 128 dims, context 128, AdamW, clipping), batch 32,
        2 processes x 1 thread (DDP, gloo), synthetic tokens; not in the default --rows
dptrain trains on Fashion-MNIST from /usr/share/datasets/fashion-mnist for the CNN rows (its
loader included) and on data.dataset = "synthetic" for the ResNets; PyTorch trains on in-memory
random batches (tools/bench/torch_train_bench.py), so its side has no input pipeline at all.

Each pair runs dptrain, torch eager and torch.compile one after another (interleaved, so a
change in the machine's load hits both sides); a row's ratio is dptrain's images/s over torch's
in the same pair; the table gives the median ratio and [min-max] over the pairs, the median
images/s, and peak RSS (the process's, or the largest rank's). --load N runs N CPU-bound
processes (busy loops) beside the whole bench, to measure the machine loaded; they are stopped
at the end. Throughput: dptrain's median samples_per_s over its train windows after the first
(metrics.jsonl), torch's median window (torch_train_bench.py), both after warm-up steps.
Output: the table on stdout (markdown) with the 1-minute load average sampled every 15 s during
the bench, RESULT lines and progress on stderr. Exit 0; 1 when a
run failed (its cell shows "error").
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_load import LoadSampler, start_load, stop_load, torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

ROWS = {
    # name: (label, torch model, batch, threads, procs, dptrain cfg overrides, dptrain steps, log_every)
    "cnn1": ("Fashion-MNIST CNN, 1 thread", "fmnist_cnn", 128, 1, 1, [], 160, 20),
    "cnn2": ("Fashion-MNIST CNN, 2 threads", "fmnist_cnn", 128, 2, 1, [], 160, 20),
    "ddp": ("Fashion-MNIST CNN, 2 processes x 1 thread (DDP, gloo)", "fmnist_cnn", 128, 1, 2, [], 160, 20),
    "r18": ("CIFAR ResNet-18, batch 32, 1 thread", "cifar_resnet18", 32, 1, 1,
            ["data.dataset=synthetic", "data.synthetic_shape=[3,32,32]", "data.synthetic_train=100000",
             "data.mean=[0.0,0.0,0.0]", "data.std=[1.0,1.0,1.0]"], 36, 6),
    "r50": ("ResNet-50, batch 16, 224x224 synthetic, 2 threads", "resnet50", 16, 2, 1,
            ["data.dataset=synthetic", "data.synthetic_shape=[3,224,224]", "data.synthetic_train=100000",
             "data.synthetic_classes=1000", "data.mean=[0.0,0.0,0.0]", "data.std=[1.0,1.0,1.0]"], 18, 3),
    "gpt": ("gpt_tiny, batch 32, 2 processes x 1 thread (DDP, gloo)", "gpt_tiny", 32, 1, 2,
            ["data.dataset=synthetic", "data.synthetic_train=8192", "data.synthetic_eval=64"], 40, 8),
}
CFG = {"fmnist_cnn": "models/fmnist_cnn.cfg", "cifar_resnet18": "models/cifar_resnet18.cfg",
       "resnet50": "models/resnet50.cfg", "gpt_tiny": "models/gpt_tiny.cfg"}


def run(cmd, env, log):
    """Runs cmd; returns (rc, peak RSS in bytes of the largest process it waited for, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest so far, so it only shows a new maximum; the runs'
    # own reports below are preferred where they exist.
    return p.returncode, max(after, before) * 1024 if after > before else None, p.stdout


def rss_of(cmd_prefix):
    """GNU time's maximum resident set (KiB) wrapper, so each run reports its own peak."""
    t = shutil.which("time") or "/usr/bin/time"
    return [t, "-f", "RSS_KB %M"] + cmd_prefix if os.path.exists(t) else cmd_prefix


def peak_from(log):
    try:
        vals = [int(l.split()[1]) for l in open(log) if l.startswith("RSS_KB ")]
        return max(vals) * 1024 if vals else None
    except OSError:
        return None


def dptrain_run(args, row, work, extra_sets=()):
    """dptrain's samples/s on ROWS[row] (extra_sets: more --set KEY=VALUE, e.g. train.zero=1)."""
    label, model, batch, threads, procs, sets, steps, every = ROWS[row]
    run_dir = os.path.join(work, "runs")
    cmd = [os.path.join(args.build, "dptrain")]
    if procs > 1:
        cmd += ["--nproc", str(procs)]
    cmd += [os.path.join(REPO, CFG[model]), "--run-dir", run_dir, "--name", f"{row}", "--set", f"train.batch_size={batch}",
            "--set", f"train.steps={steps}", "--set", f"train.log_every={every}", "--set", "checkpoint.final=false",
            "--set", "checkpoint.resume=false", "--set", "data.eval_limit=256", "--set", "train.warmup_steps=0", "--set", "run.tensorboard=false",
            "--set", f"train.cpu_backend={args.cpu_backend}"]
    if model == "cifar_resnet18":
        cmd += ["--set", "data.crop_padding=0", "--set", "data.hflip=false"]
    for s in list(sets) + list(extra_sets):
        cmd += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    shutil.rmtree(os.path.join(run_dir, row), ignore_errors=True)
    log = os.path.join(work, f"{row}.dptrain.log")
    rc, _, _ = run(rss_of(cmd), env, log)
    peak = peak_from(log)
    ips = []
    try:
        for line in open(os.path.join(run_dir, row, "metrics.jsonl")):
            d = json.loads(line)
            if d.get("split") == "train" and d.get("samples_per_s") is not None:
                ips.append(float(d["samples_per_s"]))
    except OSError:
        pass
    if rc != 0 or len(ips) < 2:
        return None, peak, f"rc={rc}, log {log}"
    # samples_per_s is already the job's (rank 0 counts every rank's batch: launch/telemetry/telemetry.cpp).
    return statistics.median(ips[1:]), peak, ""


def torch_run(args, row, mode, work, extra=()):
    """PyTorch's samples/s on ROWS[row] (extra: more torch_train_bench.py options, e.g. --zero)."""
    label, model, batch, threads, procs, sets, steps, every = ROWS[row]
    bench = [os.path.join(HERE, "torch_train_bench.py"), "--model", model, "--batch", str(batch), "--dtype", "fp32",
             "--device", "cpu", "--modes", mode, "--warmup", "3" if model != "fmnist_cnn" else "10", "--windows", "4",
             "--steps", str(max(2, (steps - every) // 4 if model == "fmnist_cnn" else every))] + list(extra)
    if procs > 1:
        cmd = torchrun(args.torch_python, procs) + bench
    else:
        cmd = [args.torch_python] + bench
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    log = os.path.join(work, f"{row}.torch-{mode}.log")
    rc, _, out = run(rss_of(cmd), env, log)
    peak = peak_from(log)
    for line in out.splitlines():
        if line.startswith("RESULT ") and "status=ok" in line:
            d = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
            return float(d["img_s"]), peak, ""
    return None, peak, f"rc={rc}, log {log}"


def median_present(xs):
    """The median of the values that are there (not None, not 0), or None."""
    return statistics.median([x for x in xs if x]) if any(xs) else None


def mib(b):
    return f"{b / 2**20:.0f}" if b else "-"


def fmt_ratio(rs):
    rs = [r for r in rs if r is not None]
    if not rs:
        return "error"
    return f"{statistics.median(rs):.2f} [{min(rs):.2f}-{max(rs):.2f}]"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--rows", default="cnn1,cnn2,ddp,r18,r50")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--load", type=int, default=0, help="CPU-bound busy loops to run beside the bench")
    p.add_argument("--cpu-backend", default="onednn", help="dptrain's train.cpu_backend")
    p.add_argument("--torch-python", default=os.environ.get("DPTRAIN_VENV", "/opt/dptrain-venv") + "/bin/python")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (logs, run directories)")
    args = p.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    modes = [m for m in args.modes.split(",") if m]
    if any(r not in ROWS for r in rows) or any(m not in ("eager", "compile") for m in modes) or args.pairs < 1:
        p.error(f"--rows from {','.join(ROWS)}, --modes from eager,compile, --pairs >= 1")
    work = tempfile.mkdtemp(prefix="dptrain-cpubench-")
    sampler = LoadSampler()
    load = start_load(args.load)
    results = {r: {"dp": [], "dp_rss": [], **{m: [] for m in modes}, **{m + "_rss": [] for m in modes},
                   **{m + "_ratio": [] for m in modes}} for r in rows}
    failed = False
    try:
        for pair in range(args.pairs):
            for r in rows:
                dp, dp_rss, why = dptrain_run(args, r, work)
                print(f"RESULT pair={pair} row={r} side=dptrain img_s={dp} rss={dp_rss} {why}", file=sys.stderr, flush=True)
                results[r]["dp"].append(dp)
                results[r]["dp_rss"].append(dp_rss)
                failed |= dp is None
                for m in modes:
                    t, t_rss, why = torch_run(args, r, m, work)
                    print(f"RESULT pair={pair} row={r} side=torch-{m} img_s={t} rss={t_rss} {why}", file=sys.stderr,
                          flush=True)
                    results[r][m].append(t)
                    results[r][m + "_rss"].append(t_rss)
                    results[r][m + "_ratio"].append(dp / t if dp and t else None)
                    failed |= t is None
    finally:
        stop_load(load)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    med = median_present
    num = lambda v: f"{v:.1f}" if v else "error"
    cols = " | ".join(f"torch {m} img/s | ratio vs {m} [min-max]" for m in modes)
    print(f"\nload beside the bench: {args.load} busy loop(s); 1-minute load average during the bench: "
          f"{sampler.summary()}; {args.pairs} pair(s); dptrain train.cpu_backend = {args.cpu_backend}\n")
    print(f"| workload | dptrain img/s | {cols} | peak RSS MiB dptrain / " + " / ".join(modes) + " |")
    print("|---|---|" + "---|---|" * len(modes) + "---|")
    for r in rows:
        res = results[r]
        cells = " | ".join(f"{num(med(res[m]))} | {fmt_ratio(res[m + '_ratio'])}" for m in modes)
        rss = " / ".join([mib(med(res["dp_rss"]))] + [mib(med(res[m + "_rss"])) for m in modes])
        print(f"| {ROWS[r][0]} | {num(med(res['dp']))} | {cells} | {rss} |")
    if args.keep:
        print(f"\nlogs and runs kept in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
