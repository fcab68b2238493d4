#!/usr/bin/env python3
"""Oracle: data.dataset = "tokens" against llm.c's shard format (numpy) and torch's DistributedSampler.

1. Shards written as llm.c's dev/data/data_common.py write_datafile writes them (a header of 256
   int32: magic 20240520, version 1, token count; then the tokens as uint16), of several lengths,
   named by a brace pattern and a glob. For block sizes T in {1, 7, 64} and world sizes {1, 2, 3}:
   tokens_dump's window count equals sum((n - 1) // T) over the shards; every rank's batches hold
   exactly the windows DistributedSampler(range(windows), world, rank, shuffle=True, seed) picks
   after set_epoch(epoch), in its order, each window being tokens [k T, k T + T + 1) of its shard
   in file order (windows never cross shards): x its first T tokens, y its last T.
2. `dptrain make-shards`: the shards of a file of random bytes equal, byte for byte, what
   write_datafile writes for the same split (the last val_fraction of the bytes evaluate, each
   byte a token, at most --shard-tokens per shard).

Run by ctest as: python test_tokens_numpy.py --build-dir <build>. Exits non-zero on any mismatch.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.utils.data import DistributedSampler


def write_datafile(filename, toks):
    """llm.c's dev/data/data_common.py write_datafile for GPT-2's uint16 tokens."""
    assert len(toks) < 2**31
    header = np.zeros(256, dtype=np.int32)
    header[0] = 20240520
    header[1] = 1
    header[2] = len(toks)
    toks_np = np.array(toks, dtype=np.uint16)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())


def read_datafile(filename):
    """llm.c's reader: checks the header, returns the tokens."""
    header = np.fromfile(filename, dtype=np.int32, count=256)
    assert header[0] == 20240520 and header[1] == 1, f"{filename}: bad header {header[:3]}"
    toks = np.fromfile(filename, dtype=np.uint16, offset=256 * 4)
    assert len(toks) == header[2], f"{filename}: {len(toks)} tokens, header says {header[2]}"
    return toks


failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL", what)


def check_windows(tool, tmp):
    rng = np.random.default_rng(20240520)
    lengths = [1000, 129, 65, 3001]  # the 65-token shard has one window of T = 64
    shards = []
    for i, n in enumerate(lengths):
        toks = rng.integers(0, 50257, size=n)
        write_datafile(os.path.join(tmp, f"shard_{i:06d}.bin"), toks)
        shards.append(np.array(toks, dtype=np.int64))
    for pattern in [os.path.join(tmp, "shard_{000000..000003}.bin"), os.path.join(tmp, "shard_*.bin")]:
        for T in [1, 7, 64]:
            windows = [s[k * T:k * T + T + 1] for s in shards for k in range((len(s) - 1) // T)]
            for world in [1, 2, 3]:
                seed, epoch, batch = 17, 2, 5
                r = subprocess.run([tool, "windows", pattern, str(T), "50257", str(world), str(seed), str(epoch),
                                    str(batch)], capture_output=True, text=True)
                if r.returncode != 0:
                    check(False, f"tokens_dump windows failed: {r.stderr.strip()}")
                    continue
                out = json.loads(r.stdout)
                what = f"{os.path.basename(pattern)} T={T} world={world}"
                check(out["windows"] == len(windows), f"{what}: {out['windows']} windows, numpy {len(windows)}")
                for rank in range(world):
                    sampler = DistributedSampler(range(len(windows)), num_replicas=world, rank=rank, shuffle=True,
                                                 seed=seed)
                    sampler.set_epoch(epoch)
                    want = list(iter(sampler))
                    got = [i for b in out["ranks"][rank] for i in b["indices"]]
                    check(got == want, f"{what} rank {rank}: indices differ from DistributedSampler's")
                    xs = [row for b in out["ranks"][rank] for row in b["x"]]
                    ys = [row for b in out["ranks"][rank] for row in b["y"]]
                    ok = len(xs) == len(want) and all(
                        list(windows[i][:T]) == x and list(windows[i][1:]) == y for i, x, y in zip(want, xs, ys))
                    check(ok, f"{what} rank {rank}: window tokens differ from numpy's")
    print(f"windows: {len(lengths)} shards, T in (1, 7, 64), worlds 1-3, brace and glob patterns")


def check_make_shards(dptrain, tmp):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, size=5003, dtype=np.uint8).tobytes()
    src = os.path.join(tmp, "input.bin")
    with open(src, "wb") as f:
        f.write(data)
    out = os.path.join(tmp, "ours")
    r = subprocess.run([dptrain, "make-shards", src, "--out", out, "--val-fraction", "0.25", "--shard-tokens", "1000"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"dptrain make-shards failed: {r.stderr.strip()}")
    n_val = int(len(data) * 0.25 + 0.5)
    splits = {"train": data[:len(data) - n_val], "val": data[len(data) - n_val:]}
    ref = os.path.join(tmp, "ref")
    os.makedirs(ref)
    for split, b in splits.items():
        for k in range(0, len(b), 1000):
            write_datafile(os.path.join(ref, f"{split}_{k // 1000:06d}.bin"), list(b[k:k + 1000]))
    ours = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "*.bin")))
    want = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ref, "*.bin")))
    check(ours == want, f"make-shards files {ours}, expected {want}")
    for name in want:
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(ref, name), "rb") as b:
            check(a.read() == b.read(), f"make-shards {name} differs from write_datafile's bytes")
    back = b"".join(bytes(read_datafile(os.path.join(out, n)).astype(np.uint8)) for n in want if n.startswith("train"))
    check(back == splits["train"], "make-shards: the training shards read back are not the file's first bytes")
    print(f"make-shards: {len(want)} shards equal write_datafile's byte for byte")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, "tests", "tokens_dump")
    dptrain = os.path.join(args.build_dir, "dptrain")
    with tempfile.TemporaryDirectory() as tmp:
        check_windows(tool, tmp)
        check_make_shards(dptrain, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all token-shard checks passed")


if __name__ == "__main__":
    main()
