#!/usr/bin/env python3
"""collbench's method on torch.distributed's gloo backend (CPU tensors): run under torchrun.

    torchrun --standalone --nproc_per_node 2 tools/bench/gloo_collbench.py \\
        --ops allreduce,reduce_scatter,allgather --min-bytes 4 --max-bytes 67108864 --factor 4

The twin of tools/collbench.cpp for tools/bench/collbench_vs_gloo.py, measured the same way: f32,
sum; the same sizes (bytes as in nccl-tests: allreduce the buffer; reduce_scatter the scattered
input and allgather the gathered output, both total over ranks; rows whose per-rank element count
is 0 or repeats are left out); per size one checked run on v(r, i) = (3r + i) mod 5 - 2 (the exact
result is known), WARMUP untimed runs, a barrier, ITERS timed runs each waited for (the calls are
synchronous), time = mean per run on each rank, the max over ranks (an all_reduce max). allreduce
times its runs on a zeroed buffer, as collbench does. The torch calls:

  allreduce       dist.all_reduce(t)                                  (in place)
  reduce_scatter  dist.reduce_scatter_tensor(out, inp)                (inp: n x count/n, out: count/n)
  allgather       dist.all_gather_into_tensor(out, inp)               (inp: count/n, out: n x count/n)

Prints one line per row on rank 0: "ROW op size_bytes count time_us max_err", and "GLOO ok" at the end
(exit 1 when an error is not 0).
"""
import argparse
import time

import torch
import torch.distributed as dist


def pattern(r, n):
    return ((3 * r + torch.arange(n, dtype=torch.int64)) % 5 - 2).to(torch.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", default="allreduce,reduce_scatter,allgather")
    p.add_argument("--min-bytes", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--factor", type=float, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    esize = 4
    worst_all = 0.0
    # Connections are made lazily: a few untimed small collectives first.
    w = torch.zeros(1)
    for _ in range(20):
        dist.all_reduce(w)
    for op in [o for o in a.ops.split(",") if o]:
        if op not in ("allreduce", "reduce_scatter", "allgather"):
            raise SystemExit(f"gloo_collbench: unknown op {op}")
        last = -1
        b = float(a.min_bytes)
        while b <= a.max_bytes * (1 + 1e-9):
            size = int(b)
            b = max(b * a.factor, b + 1)
            per_rank = size // esize // n if op != "allreduce" else size // esize
            if per_rank == 0 or per_rank == last:
                continue
            last = per_rank
            count = per_rank * n if op != "allreduce" else per_rank
            if op == "allreduce":
                t = pattern(me, count)
                run = lambda: dist.all_reduce(t)
                run()
                exact = sum(pattern(r, count) for r in range(n))
                err = (t - exact).abs().max().item()
            elif op == "reduce_scatter":
                inp, out = pattern(me, count), torch.zeros(per_rank)
                run = lambda: dist.reduce_scatter_tensor(out, inp)
                run()
                exact = sum(pattern(r, count) for r in range(n))[me * per_rank:(me + 1) * per_rank]
                err = (out - exact).abs().max().item()
            else:
                inp = pattern(me, per_rank * n)[me * per_rank:(me + 1) * per_rank].clone()
                out = torch.zeros(count)
                run = lambda: dist.all_gather_into_tensor(out, inp)
                run()
                exact = torch.cat([pattern(r, count)[r * per_rank:(r + 1) * per_rank] for r in range(n)])
                err = (out - exact).abs().max().item()
            e = torch.tensor([err], dtype=torch.float64)
            dist.all_reduce(e, op=dist.ReduceOp.MAX)
            worst_all = max(worst_all, e.item())
            if op == "allreduce":
                t.zero_()
            for _ in range(a.warmup):
                run()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                run()
            mine = (time.perf_counter() - t0) / max(1, a.iters)
            tt = torch.tensor([mine], dtype=torch.float64)
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)
            if me == 0:
                print(f"ROW {op} {count * esize} {count} {tt.item() * 1e6:.2f} {e.item():.3g}", flush=True)
    dist.barrier()
    if me == 0:
        print("GLOO ok" if worst_all == 0 else f"GLOO FAILED: max error {worst_all}", flush=True)
    dist.destroy_process_group()
    return 0 if worst_all == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
