#!/usr/bin/env python3
"""Oracle: a checkpoint written by dptrain, read by Python's `safetensors` library.

1. dptrain trains a small CNN (BN, dropout, SGD with momentum) on synthetic data for 7 steps
   with checkpoint.every_steps = 3 and checkpoint.keep = 2.
2. Python opens the newest checkpoint with safetensors (numpy and torch) and checks: the
   folder (kept files, `latest`, no temporaries), the metadata (format, version, step,
   position in the epoch, optimizer, the resolved config as TOML), one CRC-32C per tensor that
   equals a CRC-32C computed here in pure Python, the table `ckptinfo` prints (dtype, shape,
   CRC of every tensor), the weights equal to final.safetensors, and optimizer state for every
   parameter with its shape.
3. diffckpt: identical files exit 0, different checkpoints exit 1; a byte flipped by Python
   makes ckptinfo name the tensor and exit 1.

Run by ctest as: python test_checkpoint_py.py --build-dir <build>. Exits non-zero on failure.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

import numpy as np
from safetensors import safe_open
from safetensors.torch import load_file as torch_load_file

failures = []


def check(cond, what):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


# CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
_TABLE = []
for _b in range(256):
    _c = _b
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for byte in data:
        c = (c >> 8) ^ _TABLE[(c ^ byte) & 0xFF]
    return c ^ 0xFFFFFFFF


CFG = """
[run]
name = "ck"
seed = 3
[data]
dataset = "synthetic"
synthetic_shape = [1, 8, 8]
synthetic_train = 200
synthetic_eval = 40
synthetic_classes = 4
mean = [0.5]
std = [0.25]
[model]
preset = "cnn"
num_classes = 4
dropout = 0.25
[train]
steps = 7
batch_size = 16
optimizer = "sgd"
lr = 0.05
momentum = 0.9
threads = 1
"""

ST_DTYPE = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float64): "F64",
            np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8", np.dtype(np.float16): "F16"}


def read_all(path):
    with safe_open(path, framework="np") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    exe = {t: os.path.join(args.build_dir, t) for t in ("dptrain", "ckptinfo", "diffckpt")}
    for name, path in exe.items():
        if not os.access(path, os.X_OK):
            print(f"{path} not built: run `ninja -C {args.build_dir} {name}`")
            return 1

    with tempfile.TemporaryDirectory(prefix="dp_ckpt_oracle_") as tmp:
        cfg = os.path.join(tmp, "ck.cfg")
        with open(cfg, "w") as f:
            f.write(CFG)
        p = run([exe["dptrain"], cfg, "--run-dir", tmp, "--log-level", "warn", "--set", "checkpoint.every_steps=3",
                 "checkpoint.keep=2"])
        check(p.returncode == 0, f"dptrain trains 7 steps (exit {p.returncode}) {p.stderr.strip()[-300:]}")
        if p.returncode != 0:
            return 1
        ckdir = os.path.join(tmp, "ck", "checkpoints")

        print("checkpoint folder")
        check(sorted(os.listdir(ckdir)) == ["latest", "step-00000006.safetensors", "step-00000007.safetensors"],
              f"keeps the newest 2 of steps 3, 6, 7 and `latest`: {sorted(os.listdir(ckdir))}")
        with open(os.path.join(ckdir, "latest")) as f:
            check(f.read() == "step-00000007.safetensors\n", "`latest` names step 7")
        path = os.path.join(ckdir, "step-00000007.safetensors")

        print("metadata")
        meta, tensors = read_all(path)
        check(meta["format"] == "dptrain-checkpoint" and meta["format_version"] == "1", "format and version")
        check(meta["step"] == "7" and meta["optimizer"] == "sgd" and meta["optimizer_steps"] == "7",
              "step 7, sgd with 7 steps")
        # 200 samples, batch 16: step 7 is in epoch 0 with 7 * 16 = 112 samples consumed.
        check(meta["epoch"] == "0" and meta["epoch_samples"] == "112", "position: epoch 0, 112 samples")
        check(meta["world_size"] == "1" and meta["seed"] == "3" and meta["batch_size"] == "16", "world, seed, batch")
        check(json.loads(meta["sampler"]) == {"dataset_size": 200, "shuffle": True, "drop_last": False},
              "sampler state")
        conf = tomllib.loads(meta["config"])
        check(conf["train"]["steps"] == 7 and conf["checkpoint"]["every_steps"] == 3 and
              conf["model"]["preset"] == "cnn", "the resolved config is TOML with the run's values")

        print("CRC-32C per tensor, recomputed in Python")
        check(crc32c(b"123456789") == 0xE3069283 and crc32c(bytes(32)) == 0x8A9136AA, "Python crc32c: RFC 3720")
        crcs = json.loads(meta["crc32c"])
        check(set(crcs) == set(tensors), f"one CRC for each of the {len(tensors)} tensors")
        mine = {k: f"{crc32c(np.ascontiguousarray(v).tobytes()):08x}" for k, v in tensors.items()}
        bad = [k for k in tensors if crcs.get(k) != mine[k]]
        check(not bad, f"stored CRCs equal Python's {bad[:3]}")

        print("ckptinfo's table equals what Python reads")
        p = run([exe["ckptinfo"], path])
        check(p.returncode == 0, f"ckptinfo exits 0 ({p.returncode})")
        rows = {}
        in_table = False
        for line in p.stdout.splitlines():
            if line.startswith("  name "):
                in_table = True
                continue
            if in_table and line.startswith("  "):
                parts = line.split()
                # name dtype shape... crc check: the shape may hold spaces ("[32, 1, 3, 3]").
                rows[parts[0]] = (parts[1], " ".join(parts[2:-2]), parts[-2], parts[-1])
            elif in_table:
                in_table = False
        check(set(rows) == set(tensors), f"ckptinfo lists every tensor ({len(rows)})")
        mismatched = []
        for k, v in tensors.items():
            want = (ST_DTYPE[v.dtype], "[" + ", ".join(str(d) for d in v.shape) + "]", mine[k], "ok")
            if rows.get(k) != want:
                mismatched.append((k, rows.get(k), want))
        check(not mismatched, f"name, dtype, shape and CRC of every row {mismatched[:2]}")

        print("weights, buffers and optimizer state")
        final_meta, final = read_all(os.path.join(tmp, "ck", "final.safetensors"))
        check(final_meta["step"] == "7", "final.safetensors is at step 7")
        check(all(k in tensors and tensors[k].dtype == v.dtype and np.array_equal(tensors[k], v)
                  for k, v in final.items()) and len(final) > 10,
              f"the checkpoint's {len(final)} weights and buffers equal final.safetensors bit for bit")
        check(tensors["bn1.num_batches_tracked"].dtype == np.int64 and int(tensors["bn1.num_batches_tracked"]) == 7,
              "bn1.num_batches_tracked = 7 (i64)")
        params = [k for k in final if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
        optim = {k for k in tensors if k.startswith("optim.")}
        check(optim == {f"optim.{k}.momentum_buffer" for k in params},
              f"optim.<param>.momentum_buffer for each of the {len(params)} parameters, nothing else")
        check(all(tensors[f"optim.{k}.momentum_buffer"].shape == final[k].shape for k in params),
              "each optimizer slot has its parameter's shape")
        check(all(np.any(tensors[k] != 0) for k in optim), "the momentum buffers are not all zero")
        pt = torch_load_file(path)
        check(set(pt) == set(tensors) and all(np.array_equal(pt[k].numpy(), tensors[k]) for k in tensors),
              "safetensors.torch reads the same tensors")

        print("diffckpt and a corrupted copy")
        prev = os.path.join(ckdir, "step-00000006.safetensors")
        p = run([exe["diffckpt"], path, path])
        check(p.returncode == 0 and p.stdout.splitlines()[-1] == f"identical: {len(tensors)} tensors",
              "a checkpoint against itself: identical, exit 0")
        p = run([exe["diffckpt"], prev, path])
        check(p.returncode == 1 and "differ: fc1.weight F32[128, 256]: " in p.stdout,
              "step 6 against step 7: fc1.weight differs, exit 1")
        bad_copy = os.path.join(tmp, "bad.safetensors")
        shutil.copy(path, bad_copy)
        with open(bad_copy, "r+b") as f:
            header_len = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(header_len))
            at = 8 + header_len + header["conv2.weight"]["data_offsets"][0] + 5
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0x40]))
        p = run([exe["ckptinfo"], bad_copy])
        bad_rows = [l for l in p.stdout.splitlines() if "BAD (stored" in l]
        check(p.returncode == 1 and len(bad_rows) == 1 and bad_rows[0].split()[0] == "conv2.weight",
              "ckptinfo names the corrupted tensor and exits 1")
        _, corrupted = read_all(bad_copy)
        check(f"{crc32c(corrupted['conv2.weight'].tobytes()):08x}" != crcs["conv2.weight"],
              "Python's CRC sees the corruption too")

    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checkpoint checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
