#!/usr/bin/env python3
"""The ring backend's collectives (tools/collbench) against torch.distributed's gloo, on this machine.

    tools/bench/collbench_vs_gloo.py [--build build] [--nproc 2] [--rounds 3] [--min-bytes 4]
        [--max-bytes 64M] [--factor 4] [--iters 20] [--warmup 5]
        [--ops allreduce,reduce_scatter,allgather,reduce_scatter_blocks,allgather_blocks]
        [--torch-python /opt/dptrain-venv/bin/python]

Rounds, each in this order (interleaved, so a change in the machine's load hits every side):
collbench over shared memory (the default between ranks of one host), collbench over TCP loopback
only (DPTRAIN_RING_SHM_BYTES=0), then torch gloo (torchrun, tools/bench/gloo_collbench.py: the same
sizes, f32 sum, the same warm-up, barrier and timed loop, time = mean per run, max over ranks;
gloo always runs over TCP loopback). Every process has OMP_NUM_THREADS=1. What is compared:

  allreduce              collbench allreduce            vs dist.all_reduce
  reduce_scatter         collbench reduce_scatter       vs dist.reduce_scatter_tensor (one flat tensor)
  allgather              collbench allgather            vs dist.all_gather_into_tensor (one flat tensor)
  reduce_scatter_blocks  ZeRO's in-place gradient reduce-scatter (Communicator::reduce_scatter_blocks_async)
                         vs dist.reduce_scatter_tensor
  allgather_blocks       ZeRO's in-place parameter all-gather (allgather_blocks_async) vs dist.all_gather_into_tensor

Sizes as in nccl-tests and collbench: the all-reduce buffer, the reduce-scatter's input and the
all-gather's output (totals over ranks; the blocks pair's whole in-place buffer), so a row's bytes
are the same on both sides. Output: a markdown table per op on stdout, a row per size: the median
time (us) over the rounds of ring shm, ring tcp and gloo, and the speedups gloo / ring (the two
times of the same round; median [min-max] over rounds), with the 1-minute load average sampled
every 15 s during the bench; progress on stderr. Exit 1 when a run failed or reported an error.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from bench_load import LoadSampler, torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GLOO_OP = {"allreduce": "allreduce", "reduce_scatter": "reduce_scatter", "allgather": "allgather",
           "reduce_scatter_blocks": "reduce_scatter", "allgather_blocks": "allgather"}
TORCH_CALL = {"allreduce": "all_reduce", "reduce_scatter": "reduce_scatter_tensor",
              "allgather": "all_gather_into_tensor"}


def parse_bytes(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().rstrip("Bb").rstrip("i")
    return int(s[:-1]) * mul[s[-1].upper()] if s and s[-1].upper() in mul else int(s)


def collbench(args, op, tcp, log):
    """{size: time_us} from one collbench run of `op` (rank 0's rows), or None."""
    cmd = [os.path.join(args.build, "collbench"), "--nproc", str(args.nproc), "--op", op, "--dtype", "f32",
           "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes), "--factor", str(args.factor),
           "--iters", str(args.iters), "--warmup", str(args.warmup)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    if tcp:
        env["DPTRAIN_RING_SHM_BYTES"] = "0"
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "a") as f:
        f.write(" ".join(cmd) + (" (tcp)\n" if tcp else "\n") + p.stdout)
    if p.returncode != 0 or "# collbench: OK" not in p.stdout:
        return None
    rows = {}
    for line in p.stdout.splitlines():
        if not line.startswith("[rank 0] "):
            continue
        w = line[len("[rank 0] "):].split()
        if len(w) == 8 and not w[0].startswith("#"):
            rows[int(float(w[0]))] = float(w[4])
    return rows


def gloo(args, ops, log):
    """{op: {size: time_us}} from one torchrun of gloo_collbench.py, or None."""
    cmd = torchrun(args.torch_python, args.nproc) + [
        os.path.join(HERE, "gloo_collbench.py"), "--ops", ",".join(ops), "--min-bytes", str(args.min_bytes),
        "--max-bytes", str(args.max_bytes), "--factor", str(args.factor), "--iters", str(args.iters),
        "--warmup", str(args.warmup)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "a") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout)
    if p.returncode != 0 or "GLOO ok" not in p.stdout:
        return None
    out = {}
    for line in p.stdout.splitlines():
        w = line.split()
        if len(w) == 6 and w[0] == "ROW":
            out.setdefault(w[1], {})[int(w[2])] = float(w[4])
    return out


def torch_version(py):
    try:
        return subprocess.run([py, "-c", "import torch; print(torch.__version__)"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ops", default="allreduce,reduce_scatter,allgather,reduce_scatter_blocks,allgather_blocks")
    p.add_argument("--min-bytes", default="4")
    p.add_argument("--max-bytes", default="64M")
    p.add_argument("--factor", type=float, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--torch-python", default=os.environ.get("DPTRAIN_VENV", "/opt/dptrain-venv") + "/bin/python")
    p.add_argument("--log", default=None, help="append every run's output here (default: a temporary file)")
    args = p.parse_args()
    args.min_bytes, args.max_bytes = parse_bytes(args.min_bytes), parse_bytes(args.max_bytes)
    ops = [o for o in args.ops.split(",") if o]
    if any(o not in GLOO_OP for o in ops) or args.rounds < 1:
        p.error(f"--ops from {','.join(GLOO_OP)}; --rounds >= 1")
    gloo_ops = sorted({GLOO_OP[o] for o in ops}, key=list(TORCH_CALL).index)
    log = args.log or tempfile.mkstemp(prefix="collbench-vs-gloo-", suffix=".log")[1]
    sampler = LoadSampler()
    # t[side][op][size] = [time_us per round]; side: shm, tcp, gloo (gloo keyed by its own op)
    t = {"shm": {o: {} for o in ops}, "tcp": {o: {} for o in ops}, "gloo": {o: {} for o in gloo_ops}}
    ratios = {s: {o: {} for o in ops} for s in ("shm", "tcp")}
    failed = False
    for rnd in range(args.rounds):
        got = {"shm": {}, "tcp": {}}
        for side in ("shm", "tcp"):
            for o in ops:
                print(f"collbench_vs_gloo: round {rnd + 1}/{args.rounds}: ring {side} {o}", file=sys.stderr, flush=True)
                rows = collbench(args, o, side == "tcp", log)
                if rows is None:
                    print(f"collbench_vs_gloo: collbench {o} ({side}) failed; see {log}", file=sys.stderr)
                    failed = True
                    rows = {}
                got[side][o] = rows
                for size, us in rows.items():
                    t[side][o].setdefault(size, []).append(us)
        print(f"collbench_vs_gloo: round {rnd + 1}/{args.rounds}: gloo {','.join(gloo_ops)}", file=sys.stderr,
              flush=True)
        g = gloo(args, gloo_ops, log)
        if g is None:
            print(f"collbench_vs_gloo: gloo failed; see {log}", file=sys.stderr)
            failed = True
            g = {}
        for go, rows in g.items():
            for size, us in rows.items():
                t["gloo"][go].setdefault(size, []).append(us)
        for side in ("shm", "tcp"):
            for o in ops:
                for size, us in got[side][o].items():
                    gu = g.get(GLOO_OP[o], {}).get(size)
                    if gu and us > 0:
                        ratios[side][o].setdefault(size, []).append(gu / us)
    med = lambda xs: statistics.median(xs) if xs else None
    us = lambda v: f"{v:,.1f}" if v is not None else "-"
    rr = lambda xs: f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]" if xs else "-"
    host = os.uname().nodename
    print(f"\nhost {host}, {os.cpu_count()} cores; {args.nproc} ranks, f32 sum, {args.warmup} warmup + {args.iters} "
          f"timed runs per size, {args.rounds} interleaved rounds (ring shm, ring tcp, gloo); torch "
          f"{torch_version(args.torch_python)}; 1-minute load average during the bench: {sampler.summary(digits=2)}")
    for o in ops:
        go = GLOO_OP[o]
        print(f"\n### {o}: ring vs gloo `dist.{TORCH_CALL[go]}`\n")
        print("| size (B) | ring shm us | ring tcp us | gloo us | speedup shm (gloo/ring) | speedup tcp (gloo/ring) |")
        print("|---:|---:|---:|---:|---|---|")
        for size in sorted(set(t["shm"][o]) | set(t["tcp"][o]) | set(t["gloo"][go])):
            print(f"| {size:,} | {us(med(t['shm'][o].get(size, [])))} | {us(med(t['tcp'][o].get(size, [])))} | "
                  f"{us(med(t['gloo'][go].get(size, [])))} | {rr(ratios['shm'][o].get(size, []))} | "
                  f"{rr(ratios['tcp'][o].get(size, []))} |")
    print(f"\nlog: {log}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
