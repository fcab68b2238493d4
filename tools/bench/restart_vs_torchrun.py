#!/usr/bin/env python3
"""Restart overhead: dptrain --nproc 2 --max-restarts 1 beside torchrun --max-restarts 1 (issue 32).

The same job on both sides: the Fashion-MNIST CNN (conv3x3 1->32 BN ReLU pool, conv3x3 32->64 BN
ReLU pool, linear 3136->128 ReLU, linear 128->10; AdamW lr 0.002), 1024 training samples, batch 32
per rank, 2 ranks, 1 thread each, 28 steps, a checkpoint every 8 steps; rank 1 SIGKILLs itself after
step 20 in the first launch only, so the job resumes from step 16.

Measured per run from the launcher's output as it arrives (time.monotonic):
  death    the launcher's line that names the dead rank (dptrain: "rank 1 was killed"; torchrun's
           worker line printed right before os.kill, which comes first);
  resumed  rank 0's first step line after the restart (step 17, the first redone step).
Reported: the median over --runs of death -> resumed, and the steady step time before the death
(steps 12..19; the redone steps 17..20 cost 4 of them more). The machine may be shared: say so beside figures.

  restart_vs_torchrun.py --build build [--torch-python /opt/dptrain-venv/bin/python] [--runs 5]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import gzip, os, signal, sys, time
import numpy as np, torch, torch.nn as nn, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
ckdir, data = sys.argv[1], sys.argv[2]
with gzip.open(os.path.join(data, "train-images-idx3-ubyte.gz")) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16)[: 1024 * 784].reshape(1024, 1, 28, 28)
with gzip.open(os.path.join(data, "train-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)[:1024]
x = (torch.from_numpy(x.astype(np.float32) / 255) - 0.286) / 0.353
y = torch.from_numpy(y.astype(np.int64))
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
ddp = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=0.002, weight_decay=1e-4)
step = 0
ck = os.path.join(ckdir, "latest.pt")
if os.path.exists(ck):
    s = torch.load(ck)
    model.load_state_dict(s["model"]); opt.load_state_dict(s["opt"]); step = s["step"]
    print(f"rank {rank} resumed from step {step}", flush=True)
restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
bs = 32
while step < 28:
    i = (step * world + rank) * bs % 1024
    loss = nn.functional.cross_entropy(ddp(x[i:i + bs]), y[i:i + bs])
    opt.zero_grad(); loss.backward(); opt.step(); step += 1
    if rank == 0: print(f"step {step}/28 loss {loss.item():.4f}", flush=True)
    if step % 8 == 0:
        if rank == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ck + ".tmp")
            os.replace(ck + ".tmp", ck)
        dist.barrier()
    if step == 20 and rank == 1 and restarts == 0:
        print("rank 1 killing itself", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
dist.destroy_process_group()
'''


def timed_lines(cmd, env, death_pat, step_pat):
    """Runs cmd; returns (death -> first step 17 after death, steady step time, exit status)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    death = resumed = None
    steps = {}
    out = []
    for line in p.stdout:
        now = time.monotonic()
        out.append(line)
        m = re.search(step_pat, line)
        if death is None and re.search(death_pat, line):
            death = now
        elif m and death is None:
            steps[int(m.group(1))] = now
        elif m and death is not None and resumed is None and m.group(1) == "17":
            resumed = now
    p.wait()
    if death is None or resumed is None or 12 not in steps or 19 not in steps:
        errors = [l for l in out if "Error" in l or "error:" in l]
        print(f"{cmd[0]}: a run without a death or a resumed step 17 (exit {p.returncode}): "
              f"{errors[-1].strip() if errors else out[-1].strip()}", file=sys.stderr, flush=True)
        return None
    return resumed - death, (steps[19] - steps[12]) / 7, p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--torch-python", default="/opt/dptrain-venv/bin/python")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    tmp = tempfile.mkdtemp(prefix="restart_bench_")
    try:
        env = dict(os.environ, DPTRAIN_FAULT_KILL_AFTER_STEP="20", DPTRAIN_FAULT_KILL_RANK="1", OMP_NUM_THREADS="1")
        dp = [os.path.join(a.build, "dptrain"), "--nproc", "2", "--max-restarts", "1",
              os.path.join(src, "models", "fmnist_cnn.cfg"), "--run-dir", tmp, "--name", "c", "--set",
              "data.path=" + a.data, "data.train_limit=1024", "data.eval_limit=64", "train.steps=28",
              "train.batch_size=32", "train.warmup_steps=4", "train.log_every=1", "train.threads=1",
              "checkpoint.every_steps=8", "checkpoint.keep=0"]
        worker = os.path.join(tmp, "worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        tr = [a.torch_python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "--max-restarts", "1", worker, os.path.join(tmp, "t"), a.data]
        for name, cmd, death, step in [
                ("dptrain", dp, r"rank 1 was killed", r"\[rank 0\] \[.*info: epoch .* step (\d+)/28"),
                ("torchrun", tr, r"rank 1 killing itself", r"^step (\d+)/28")]:
            res = []
            for _ in range(a.runs):
                shutil.rmtree(os.path.join(tmp, "c"), ignore_errors=True)
                shutil.rmtree(os.path.join(tmp, "t"), ignore_errors=True)
                os.makedirs(os.path.join(tmp, "t"))
                r = timed_lines(cmd, env, death, step)
                if r is not None:
                    res.append(r)
            if not res:
                print(f"{name}: every run failed", flush=True)
                continue
            print(f"{name}: death -> first step after resume: median {statistics.median(r[0] for r in res):.2f} s "
                  f"(runs: {', '.join(f'{r[0]:.2f}' for r in res)}); steady step {statistics.median(r[1] for r in res) * 1e3:.1f} ms; "
                  f"exit {sorted(set(r[2] for r in res))}; {a.runs - len(res)} of {a.runs} runs failed", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
