#!/usr/bin/env python3
"""Oracle: dp::data's distributed sampler against torch.utils.data.DistributedSampler.

Over dataset sizes {1, 7, 10, 64, 101} x world sizes {1, 2, 3, 4, 8} x every rank x drop_last
{False, True}:
1. shuffle off: sampler_dump's indices equal DistributedSampler(shuffle=False)'s exactly.
2. shuffle on: torch's permutation for (seed, epoch) (torch.randperm with a generator seeded
   seed + epoch, as DistributedSampler does) fed to sampler_indices_from_permutation equals
   DistributedSampler(shuffle=True, seed=seed) after set_epoch(epoch), for a few (seed, epoch).
3. our own shuffle (a different RNG by design) is a permutation of [0, n), and rank r's indices
   sit at exactly the positions of that order that torch's unshuffled sampler gives rank r.
4. data.permutation = "torch": sampler_dump --torch equals DistributedSampler(shuffle=True,
   seed=seed) after set_epoch(epoch) by itself (torch's own permutation, no feeding), also for
   a 60000-sample data set (Fashion-MNIST's size).

Run by ctest as: python test_sampler_torch.py --build-dir <build>. Exits non-zero on any mismatch
and prints a summary line.
"""
import argparse
import json
import os
import subprocess
import sys

import torch
from torch.utils.data import DistributedSampler

SIZES = [1, 7, 10, 64, 101]
WORLDS = [1, 2, 3, 4, 8]
SEED_EPOCHS = [(0, 0), (42, 3), (7, 11)]


def dump(tool, world, drop_last, n=None, perm=None, shuffle=False, seed=0, epoch=0, rank=None, torch_order=False):
    args = [tool, "--world", str(world)]
    if rank is not None:
        args += ["--rank", str(rank)]
    if n is not None:
        args += ["--n", str(n)]
    if drop_last:
        args.append("--drop-last")
    if perm is not None:
        args.append("--perm-stdin")
    if shuffle:
        args += ["--shuffle", "--seed", str(seed), "--epoch", str(epoch)]
    if torch_order:
        args.append("--torch")
    r = subprocess.run(args, input=json.dumps(perm) if perm is not None else "", capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def torch_ranks(n, world, drop_last, shuffle, seed=0, epoch=0):
    out = []
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                               drop_last=drop_last)
        s.set_epoch(epoch)
        out.append(list(iter(s)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, "tests", "sampler_dump")
    if not os.access(tool, os.X_OK):
        print(f"FAIL: {tool} not found; build the sampler_dump target first", file=sys.stderr)
        return 1

    cases = 0
    mismatches = []

    def compare(what, ours, theirs):
        nonlocal cases
        cases += 1
        if ours != theirs:
            mismatches.append(f"{what}: dptrain {ours} vs torch {theirs}")

    for n in SIZES:
        for world in WORLDS:
            for drop_last in (False, True):
                tag = f"n={n} world={world} drop_last={drop_last}"
                want = torch_ranks(n, world, drop_last, shuffle=False)
                got = dump(tool, world, drop_last, n=n)
                for rank in range(world):
                    compare(f"{tag} rank={rank} shuffle=off", got[rank], want[rank])
                # One rank at a time gives the same as all at once.
                compare(f"{tag} --rank {world - 1}", dump(tool, world, drop_last, n=n, rank=world - 1),
                        want[world - 1])

                for seed, epoch in SEED_EPOCHS:
                    g = torch.Generator()
                    g.manual_seed(seed + epoch)
                    perm = torch.randperm(n, generator=g).tolist()
                    want = torch_ranks(n, world, drop_last, shuffle=True, seed=seed, epoch=epoch)
                    got = dump(tool, world, drop_last, perm=perm)
                    for rank in range(world):
                        compare(f"{tag} rank={rank} seed={seed} epoch={epoch} torch permutation", got[rank],
                                want[rank])

                    # data.permutation = "torch": torch's own order, drawn by dptrain.
                    got = dump(tool, world, drop_last, n=n, shuffle=True, seed=seed, epoch=epoch, torch_order=True)
                    for rank in range(world):
                        compare(f"{tag} rank={rank} seed={seed} epoch={epoch} --torch", got[rank], want[rank])

                    # Our own permutation: a permutation of [0, n), and rank r's indices sit at
                    # exactly the positions of that order that torch's unshuffled sampler gives
                    # rank r (the same striding, padding and truncation).
                    order = dump(tool, 1, False, n=n, shuffle=True, seed=seed, epoch=epoch)[0]
                    compare(f"{tag} seed={seed} epoch={epoch} own shuffle is a permutation", sorted(order),
                            list(range(n)))
                    where = {v: i for i, v in enumerate(order)}
                    ours = dump(tool, world, drop_last, n=n, shuffle=True, seed=seed, epoch=epoch)
                    identity = torch_ranks(n, world, drop_last, shuffle=False)
                    for rank in range(world):
                        compare(f"{tag} rank={rank} seed={seed} epoch={epoch} own shuffle positions",
                                [where[v] for v in ours[rank]], identity[rank])

    # Fashion-MNIST's size, two ranks, the seeds a run would use.
    for seed, epoch in [(0, 0), (0, 1), (1234, 5)]:
        want = torch_ranks(60000, 2, False, shuffle=True, seed=seed, epoch=epoch)
        got = dump(tool, 2, False, n=60000, shuffle=True, seed=seed, epoch=epoch, torch_order=True)
        for rank in range(2):
            compare(f"n=60000 world=2 rank={rank} seed={seed} epoch={epoch} --torch", got[rank], want[rank])

    for m in mismatches[:20]:
        print("MISMATCH", m)
    print(f"sampler oracle: {cases} comparisons over sizes {SIZES} x worlds {WORLDS}, "
          f"{len(mismatches)} mismatches (torch {torch.__version__})")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
