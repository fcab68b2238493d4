#!/usr/bin/env python3
"""data_bench.py: decoded + augmented images per second per core of dptrain's loader (image folder
and tar shards) beside torchvision's DataLoader(ImageFolder, num_workers=W), the same transforms
on the same files, in one run, interleaved. A benchmark, not a test.

    /opt/dptrain-venv/bin/python tools/bench/data_bench.py [--build-dir build] [--images 512]
        [--workers 1,2] [--repeat 3] [--eval] [--keep DIR]

Data: --images JPEGs (quality 90) of ImageNet-like sizes (the shorter side 300 to 500 pixels,
aspect 4:3 to 3:4, a smooth pattern plus noise) in 8 class folders, and the same files in 4 tar
shards; all files are read once before timing (page cache). Transforms (ResNet recipe), output a
normalised float tensor (3, 224, 224) per image in batches of 64:
  train: RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize(ImageNet)
  eval (--eval): Resize(256) + CenterCrop(224) + ToTensor + Normalize
dptrain: tools data_bench (build dir), Loader with W threads, decode_scaled on (its default;
no image here is large enough for it to apply: it needs crops of >= 448 pixels per side).
torchvision: DataLoader(ImageFolder(root, transform), batch_size=64, shuffle=True, num_workers=W).
Each (reader, W) runs `--repeat` times, interleaved round-robin; the table shows the median
images/s, images/s per core (/ W: each reader keeps W cores busy decoding) and the ratio to
torchvision. The machine's load average before and after is printed (a shared machine makes
every number noisy).
"""
import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np
import torch
import torchvision.datasets as datasets
import torchvision.transforms as T
from PIL import Image


def make_data(root, n, rng):
    classes = [f"class{c}" for c in range(8)]
    files = []
    for i in range(n):
        c = classes[i % 8]
        short = int(rng.integers(300, 501))
        long = int(short * rng.uniform(1.0, 4 / 3))
        h, w = (short, long) if i % 2 else (long, short)
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([128 + 90 * np.sin(x / (9 + c_) + i) * np.cos(y / (13 + c_)) for c_ in range(3)], -1)
        a = np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)
        d = os.path.join(root, "folder", "train", c)
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"{i:05d}.jpg")
        Image.fromarray(a).save(p, quality=90)
        files.append((c, p))
    shards = 4
    order = sorted(files)
    per = -(-len(order) // shards)
    os.makedirs(os.path.join(root, "shards"))
    for s in range(shards):
        with tarfile.open(os.path.join(root, "shards", f"train-{s}.tar"), "w") as t:
            for c, p in order[s * per:(s + 1) * per]:
                key = f"{c}/{os.path.basename(p)[:-4]}"
                t.add(p, key + ".jpg")
                info = tarfile.TarInfo(key + ".cls")
                label = str(int(c[5:])).encode()
                info.size = len(label)
                t.addfile(info, io.BytesIO(label))
    return os.path.join(root, "folder"), os.path.join(root, "shards", "train-{0..3}.tar")


def warm(root):
    for dirpath, _, names in os.walk(root, followlinks=False):
        for n in names:
            with open(os.path.join(dirpath, n), "rb") as f:
                while f.read(1 << 20):
                    pass


def run_dptrain(build, kind, path, workers, eval_):
    # The evaluation split is not read: it is the training one again.
    cmd = [os.path.join(build, "data_bench"), "--dataset", kind, "--path", path, "--workers", str(workers),
           "--batch", "64", "--index-dir", os.path.join(os.path.dirname(os.path.dirname(path)), "index"),
           "--val-path", os.path.join(path, "train") if kind == "image_folder" else path]
    if eval_:
        cmd.append("--eval")
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr}")
    return json.loads(r.stdout)["images_per_s"]


def run_torchvision(folder, workers, eval_):
    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm]) if eval_ else \
        T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    ds = datasets.ImageFolder(os.path.join(folder, "train"), tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    t0 = time.perf_counter()
    n = 0
    for x, _ in dl:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--keep", help="make or reuse the data in this folder (default: a temporary one)")
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    torch.set_num_threads(1)
    root = a.keep or tempfile.mkdtemp(prefix="dp-data-bench-")
    try:
        if not os.path.exists(os.path.join(root, "folder")):
            os.makedirs(root, exist_ok=True)
            make_data(root, a.images, np.random.default_rng(0))
        folder, shards = os.path.join(root, "folder"), os.path.join(root, "shards", "train-{0..3}.tar")
        warm(root)
        load0 = os.getloadavg()
        workers = [int(w) for w in a.workers.split(",")]
        readers = {"dptrain image folder": lambda w: run_dptrain(build, "image_folder", folder, w, a.eval),
                   "dptrain tar shards": lambda w: run_dptrain(build, "tar_shards", shards, w, a.eval),
                   "torchvision DataLoader": lambda w: run_torchvision(folder, w, a.eval)}
        run_dptrain(build, "tar_shards", shards, 1, a.eval)  # builds the shard index outside the timing
        results = {(r, w): [] for r in readers for w in workers}
        for _ in range(a.repeat):
            for w in workers:
                for r, f in readers.items():
                    results[(r, w)].append(f(w))
        load1 = os.getloadavg()
        print(f"{a.images} JPEGs, shorter side 300-500 px; {'eval: Resize 256 + CenterCrop 224' if a.eval else 'train: RandomResizedCrop 224 + flip'}"
              f" + normalise; median of {a.repeat} interleaved runs; {os.cpu_count()} cores; load average "
              f"{load0[0]:.1f} before, {load1[0]:.1f} after")
        print("| reader | workers | images/s | images/s per core | vs torchvision |")
        print("|---|---|---|---|---|")
        for w in workers:
            tv = statistics.median(results[("torchvision DataLoader", w)])
            for r in readers:
                m = statistics.median(results[(r, w)])
                print(f"| {r} | {w} | {m:.1f} | {m / w:.1f} | {m / tv:.2f}x |")
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
