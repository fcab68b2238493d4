#!/usr/bin/env python3
"""End to end: training on an image folder and on tar shards of the same images.

1. Builds an image folder with PIL (4 classes, 200 training and 48 validation images of 24 to 40
   pixels, JPEG and PNG; class c is a bright block in horizontal band c of 4 of a noisy image, which
   flips keep, so a small CNN learns it) and trains a small CNN on it with `dptrain --nproc 2` (2 ranks, RandomResizedCrop
   to 16 pixels, flips, 3 epochs): the final evaluation reaches top-1 >= 0.9 (a stated bound:
   chance is 0.25; observed about 1.0). classes.json and the checkpoint's "classes" list the
   folder names in torchvision's order; every train line of metrics.jsonl has data_wait_s and the
   data_stall share.
2. Writes the same images, in the same order (classes sorted, files sorted), into WebDataset tar
   shards (<class>/<stem>.jpg|png + .cls; 3 training shards, 1 validation shard, written with
   Python's tarfile, pax format) and trains the same config on them: final.safetensors is
   identical to the folder run's, byte for byte (tools/diffckpt exits 0), and the evaluation is
   the same.

Run by ctest as: python test_image_train.py --build-dir <build>.
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
from PIL import Image
from safetensors import safe_open

CLASSES = ["ant", "bee", "cat", "dog"]
CFG = """
[run]
seed = 3
tensorboard = false
[data]
image_size = 16
resize = 18
crop_scale = [0.6, 1.0]
mean = [0.5, 0.5, 0.5]
std = [0.25, 0.25, 0.25]
workers = 2
[train]
epochs = 3
batch_size = 16
lr = 0.01
log_every = 10
[[layer]]
type = "conv2d"
out_channels = 8
kernel = 3
padding = 1
[[layer]]
type = "relu"
[[layer]]
type = "maxpool2d"
kernel = 2
[[layer]]
type = "conv2d"
out_channels = 16
kernel = 3
padding = 1
[[layer]]
type = "relu"
[[layer]]
type = "maxpool2d"
kernel = 2
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
out_features = 4
"""


def make_folder(root, rng):
    """Returns {split: [(class, file name, bytes)]} in torchvision's order, and writes the folder."""
    out = {}
    for split, n in [("train", 50), ("val", 12)]:
        out[split] = []
        for c, name in enumerate(CLASSES):
            d = os.path.join(root, split, name)
            os.makedirs(d)
            for i in range(n):
                h, w = int(rng.integers(24, 41)), int(rng.integers(24, 41))
                a = rng.normal(90, 25, (h, w, 3))
                a[c * h // 4:(c + 1) * h // 4, w // 4:3 * w // 4] += 110  # band c of 4: flips keep it
                a = np.clip(a, 0, 255).astype(np.uint8)
                fmt, ext = ("PNG", "png") if i % 4 == 0 else ("JPEG", "jpg")
                buf = io.BytesIO()
                Image.fromarray(a).save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
                fname = f"{i:03d}.{ext}"
                with open(os.path.join(d, fname), "wb") as f:
                    f.write(buf.getvalue())
        # torchvision's order: classes sorted, files sorted within each class.
        for c, name in enumerate(CLASSES):
            for fname in sorted(os.listdir(os.path.join(root, split, name))):
                with open(os.path.join(root, split, name, fname), "rb") as f:
                    out[split].append((c, name, fname, f.read()))
    return out


def write_shards(samples, pattern_dir, prefix, shards):
    per = -(-len(samples) // shards)
    for s in range(shards):
        with tarfile.open(os.path.join(pattern_dir, f"{prefix}-{s:02d}.tar"), "w", format=tarfile.PAX_FORMAT) as t:
            for c, name, fname, data in samples[s * per:(s + 1) * per]:
                stem, ext = fname.split(".")
                for member, payload in [(f"{name}/{stem}.{ext}", data), (f"{name}/{stem}.cls", str(c).encode())]:
                    info = tarfile.TarInfo(member)
                    info.size = len(payload)
                    t.addfile(info, io.BytesIO(payload))


def train(build, cfg_path, run_dir, name, extra):
    cmd = [os.path.join(build, "dptrain"), "--nproc", "2", cfg_path, "--run-dir", run_dir, "--name", name] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    evals = [json.loads(l) for l in open(os.path.join(run_dir, name, "metrics.jsonl")) if '"eval"' in l]
    return evals[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    build = os.path.abspath(ap.parse_args().build_dir)
    tmp = tempfile.mkdtemp(prefix="dp-image-train-")
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        samples = make_folder(os.path.join(tmp, "folder"), np.random.default_rng(0))
        os.makedirs(os.path.join(tmp, "shards"))
        write_shards(samples["train"], os.path.join(tmp, "shards"), "train", 3)
        write_shards(samples["val"], os.path.join(tmp, "shards"), "val", 1)
        cfg = os.path.join(tmp, "m.cfg")
        with open(cfg, "w") as f:
            f.write(CFG)
        runs = os.path.join(tmp, "runs")
        e1 = train(build, cfg, runs, "folder", ["--set", "data.dataset=image_folder", "--set", f"data.path={tmp}/folder"])
        check(e1["top1"] >= 0.9, f"image folder, 2 ranks: final top-1 {e1['top1']:.4f} >= 0.9 ({e1['samples']} samples)")
        trains = [json.loads(l) for l in open(os.path.join(runs, "folder", "metrics.jsonl")) if '"train"' in l]
        check(trains and all(0 <= t["data_stall"] <= 1 and t["data_wait_s"] >= 0 for t in trains),
              f"metrics.jsonl reports the data stall: {[round(t['data_stall'], 3) for t in trains]}")
        with open(os.path.join(runs, "folder", "classes.json")) as f:
            check(json.load(f) == CLASSES, "classes.json lists the class folders in order")
        with safe_open(os.path.join(runs, "folder", "final.safetensors"), "np") as f:
            check(json.loads(f.metadata()["classes"]) == CLASSES, "final.safetensors metadata 'classes'")
        e2 = train(build, cfg, runs, "shards",
                   ["--set", "data.dataset=tar_shards", "--set", f"data.path={tmp}/shards/train-{{00..02}}.tar",
                    "--set", f"data.val_path={tmp}/shards/val-00.tar"])
        check(os.path.exists(os.path.join(runs, "shards", "tar-index")), "shard indices cached in <run>/tar-index")
        d = subprocess.run([os.path.join(build, "diffckpt"), os.path.join(runs, "folder", "final.safetensors"),
                            os.path.join(runs, "shards", "final.safetensors")], capture_output=True, text=True)
        check(d.returncode == 0, f"tar shards train the same weights as the folder (diffckpt exit {d.returncode}: "
                                 f"{d.stdout.strip().splitlines()[-1] if d.stdout.strip() else d.stderr.strip()})")
        check(e1["top1"] == e2["top1"] and e1["loss"] == e2["loss"],
              f"the same evaluation: top-1 {e1['top1']} / {e2['top1']}, loss {e1['loss']} / {e2['loss']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_image_train: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
