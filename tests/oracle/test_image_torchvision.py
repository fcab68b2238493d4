#!/usr/bin/env python3
"""Oracle: dptrain's image decoding, transforms, folder listing and .npy reading against PIL,
torchvision and numpy, through tests/image_dump.

Images are made here with PIL (13, which bundles libjpeg-turbo) and numpy:
1. decoding: baseline 4:2:0, progressive, 4:4:4, 4:2:2, grayscale, CMYK and odd-sized JPEGs, and
   RGB, RGBA, L, LA, palette, 1-bit and 16-bit RGB PNGs decode to exactly PIL's
   Image.open(f).convert("RGB") (max difference 0); a 16-bit grayscale PNG decodes to the high
   byte of each sample (PIL clips it instead: a PIL quirk we do not copy).
2. reduced decoding: a JPEG decoded at 1/2, 1/4, 1/8 equals PIL's draft() at that scale
   exactly; a partial decode (random regions x scales x JPEG kinds) equals the full decode
   inside the region exactly.
3. transforms, on each image: Resize(R) + CenterCrop(S) equals torchvision's transforms on the
   PIL image exactly (several R, S), and the resized crop of random boxes equals
   torchvision.transforms.functional.resized_crop exactly (RandomResizedCrop given the same
   box). Tolerance 0: the resize is Pillow 13's bilinear antialias, pass order included (1 with
   an older Pillow, which always resizes horizontally first).
4. decode_scaled = true on a 1700x1200 photo-like JPEG: Resize 256 + CenterCrop 224 and large
   resized crops stay within mean |difference| 3 and max 40 of the full-decode result (measured
   about 1.4 and 11 on this noisy image: the documented deviation, as PIL's draft mode).
5. folder listing: classes and (file, label) order equal torchvision.datasets.ImageFolder's on a
   tree with nested folders, upper-case extensions, names with spaces and accents, a hidden
   class folder and non-image files.
6. .npy: arrays saved by numpy (uint8 (N, 3, 4, 5), float16, float32; int64, int16, uint8
   labels) read back as numpy has them (uint8 / 255, float16 widened).

Run by ctest as: python test_image_torchvision.py --build-dir <build>.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import PIL
import torchvision.datasets as datasets
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def photo(rng, h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([128 + 100 * np.sin(x / 17 + c) * np.cos(y / 23 - c) for c in range(3)], -1)
    return np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def write_png16(path, arr):
    h, w = arr.shape[:2]
    color = 2 if arr.ndim == 3 else 0
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xffffffff)

    ihdr = struct.pack(">IIBBBBB", w, h, 16, color, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_images(d, rng):
    a = photo(rng, 375, 500)
    Image.fromarray(a).save(f"{d}/base420.jpg", quality=90)
    Image.fromarray(a).save(f"{d}/progressive.jpg", quality=85, progressive=True)
    Image.fromarray(a).save(f"{d}/s444.jpg", quality=95, subsampling=0)
    Image.fromarray(a).save(f"{d}/s422.jpg", quality=95, subsampling=1)
    Image.fromarray(a[:, :, 0]).save(f"{d}/gray.jpg", quality=90)
    Image.fromarray(a).convert("CMYK").save(f"{d}/cmyk.jpg", quality=90)
    Image.fromarray(photo(rng, 333, 257)).save(f"{d}/odd.jpg", quality=90)
    Image.fromarray(photo(rng, 1200, 1700)).save(f"{d}/big.jpg", quality=90)
    Image.fromarray(a).save(f"{d}/rgb.png")
    Image.fromarray(np.dstack([a, a[:, :, :1]])).save(f"{d}/rgba.png")
    Image.fromarray(a[:, :, 0]).save(f"{d}/l.png")
    Image.fromarray(a).convert("LA").save(f"{d}/la.png")
    Image.fromarray(a).convert("P").save(f"{d}/palette.png")
    Image.fromarray(a[:, :, 0] > 128).save(f"{d}/one.png")
    a16 = (a.astype(np.uint16) * 257 + rng.integers(0, 256, a.shape)).astype(np.uint16)
    write_png16(f"{d}/rgb16.png", a16)
    write_png16(f"{d}/gray16.png", a16[:, :, 0])
    return a16


def dump(build, out_dir, jobs):
    r = subprocess.run([os.path.join(build, "tests", "image_dump"), out_dir], input=json.dumps(jobs),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"image_dump failed ({r.returncode}): {r.stderr}")
    return {j["out"]: json.loads(line) for j, line in zip(jobs, r.stdout.splitlines())}


def load(out_dir, key, info):
    return np.fromfile(os.path.join(out_dir, key + ".bin"), np.uint8).reshape(info["shape"])


def maxdiff(a, b):
    return int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max()) if a.size else 0


def decoding(build, d, out, a16):
    names = sorted(os.listdir(d))
    res = dump(build, out, [{"file": f"{d}/{n}", "op": "decode", "out": n} for n in names])
    worst = {}
    for n in names:
        ours = load(out, n, res[n])
        want = (a16[:, :, 0] >> 8).astype(np.uint8)[:, :, None].repeat(3, 2) if n == "gray16.png" else \
            np.asarray(Image.open(f"{d}/{n}").convert("RGB"))
        worst[n] = maxdiff(ours, want) if ours.shape == want.shape else 999
    check(all(v == 0 for v in worst.values()), f"decoding equals PIL's convert('RGB') exactly: {worst}")


def reduced(build, d, out, rng):
    jpegs = [n for n in sorted(os.listdir(d)) if n.endswith(".jpg")]
    jobs = []
    for n in jpegs:
        for denom in (1, 2, 4, 8):
            jobs.append({"file": f"{d}/{n}", "op": "region", "denom": denom, "region": [0, 0, 0, 0], "out": f"{n}-{denom}"})
            W, H = Image.open(f"{d}/{n}").size
            fw, fh = -(-W // denom), -(-H // denom)
            for i in range(4):
                x0 = int(rng.integers(0, fw)); x1 = int(rng.integers(x0 + 1, fw + 1))
                y0 = int(rng.integers(0, fh)); y1 = int(rng.integers(y0 + 1, fh + 1))
                jobs.append({"file": f"{d}/{n}", "op": "region", "denom": denom, "region": [x0, y0, x1, y1],
                             "out": f"{n}-{denom}-r{i}"})
    res = dump(build, out, jobs)
    draft_bad, region_bad, regions = [], 0, 0
    for n in jpegs:
        for denom in (1, 2, 4, 8):
            full = load(out, f"{n}-{denom}", res[f"{n}-{denom}"])
            im = Image.open(f"{d}/{n}")
            W, H = im.size
            if denom > 1:
                im.draft(im.mode, (W // denom, H // denom))
            pil = np.asarray(im.convert("RGB"))
            if pil.shape != full.shape or maxdiff(pil, full):
                draft_bad.append(f"{n}@1/{denom}")
            for i in range(4):
                j = next(x for x in jobs if x["out"] == f"{n}-{denom}-r{i}")
                info = res[j["out"]]
                part = load(out, j["out"], info)
                x0, y0, x1, y1 = j["region"]
                px, py = info["x0"], info["y0"]
                regions += 1
                inside = px <= x0 and py <= y0 and px + part.shape[1] >= x1 and py + part.shape[0] >= y1
                if not inside or maxdiff(part[y0 - py:y1 - py, x0 - px:x1 - px], full[y0:y1, x0:x1]):
                    region_bad += 1
    check(not draft_bad, f"reduced decoding equals PIL's draft() at 1/2, 1/4, 1/8 on {len(jpegs)} JPEGs "
                         f"(mismatches: {draft_bad})")
    check(region_bad == 0, f"partial decodes equal the full decode inside the region ({regions - region_bad}/{regions})")


def transforms(build, d, out, rng):
    names = [n for n in sorted(os.listdir(d)) if n not in ("gray16.png", "big.jpg")]
    jobs, refs = [], {}
    for n in names:
        im = Image.open(f"{d}/{n}").convert("RGB")
        W, H = im.size
        for rs, cs in [(256, 224), (40, 32), (min(W, H), 100), (500, 480)]:
            k = f"{n}-c{rs}-{cs}"
            refs[k] = np.asarray(T.Compose([T.Resize(rs), T.CenterCrop(cs)])(im)).transpose(2, 0, 1)
            jobs.append({"file": f"{d}/{n}", "op": "center", "resize": rs, "size": cs, "out": k})
        for i in range(8):
            h = int(rng.integers(1, H + 1)); w = int(rng.integers(1, W + 1))
            top = int(rng.integers(0, H - h + 1)); left = int(rng.integers(0, W - w + 1))
            size = int(rng.choice([224, 64, 17]))
            k = f"{n}-r{i}"
            refs[k] = np.asarray(F.resized_crop(im, top, left, h, w, [size, size])).transpose(2, 0, 1)
            jobs.append({"file": f"{d}/{n}", "op": "resized_crop", "box": [top, left, h, w], "size": size, "out": k})
    res = dump(build, out, jobs)
    # Pillow 12 and older always resize horizontally first (13 picks the order): up to 1 apart.
    tol = 0 if int(PIL.__version__.split(".")[0]) >= 13 else 1
    bad = [k for k in refs if "error" in res[k] or maxdiff(load(out, k, res[k]), refs[k]) > tol]
    centers = sum(1 for k in refs if "-c" in k)
    check(not bad, f"Resize + CenterCrop ({centers}) and resized_crop ({len(refs) - centers}) equal torchvision's "
                   f"within {tol} on Pillow {PIL.__version__} (differing: {bad[:5]})")


def scaled(build, d, out):
    jobs = []
    for sc in (False, True):
        jobs.append({"file": f"{d}/big.jpg", "op": "center", "resize": 256, "size": 224, "scaled": sc, "out": f"c{int(sc)}"})
        for i, box in enumerate([[0, 0, 1200, 1700], [100, 200, 900, 1000], [50, 700, 1000, 950]]):
            jobs.append({"file": f"{d}/big.jpg", "op": "resized_crop", "box": box, "size": 224, "scaled": sc,
                         "out": f"r{i}{int(sc)}"})
    res = dump(build, out, jobs)
    stats = []
    for k in ["c", "r0", "r1", "r2"]:
        a = load(out, k + "0", res[k + "0"]).astype(np.int64)
        b = load(out, k + "1", res[k + "1"]).astype(np.int64)
        stats.append((float(np.abs(a - b).mean()), int(np.abs(a - b).max())))
    check(all(m < 3 and x < 40 for m, x in stats),
          "decode_scaled stays close to the full decode (mean, max |difference| per transform): "
          + ", ".join(f"{m:.2f}/{x}" for m, x in stats))


def listing(build, root, out):
    tree = ["a b/1.JPG", "a b/nested/deeper/2.png", "a b/nested/0.jpeg", "a b/Z.png", "ä/x.png", "Ab/1.png",
            ".hidden/h.png", "ab/readme.txt", "ab/sub dir/q.jpg", "ab/sub/p.PNG"]
    img = Image.new("RGB", (4, 4))
    for rel in tree:
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if rel.endswith(".txt"):
            open(p, "w").write("-")
        else:
            img.save(p, "PNG")
    tv = datasets.ImageFolder(root)
    res = dump(build, out, [{"file": root, "op": "list_folder", "out": "list"}])["list"]
    check(res.get("classes") == tv.classes, f"folder classes equal ImageFolder's: {tv.classes}")
    ours = list(zip(res.get("files", []), res.get("labels", [])))
    check(ours == [(f, c) for f, c in tv.samples], f"folder samples and labels equal ImageFolder.samples ({len(tv.samples)})")


def npy(build, d, out, rng):
    cases = [("u8", rng.integers(0, 256, (6, 3, 4, 5)).astype(np.uint8), rng.integers(0, 7, 6).astype(np.int64)),
             ("f16", rng.normal(0, 3, (5, 7)).astype(np.float16), rng.integers(0, 3, 5).astype(np.int16)),
             ("f32", rng.normal(0, 3, (4, 2, 2)).astype(np.float32), rng.integers(0, 300, 4).astype(np.uint16))]
    jobs = []
    for name, x, y in cases:
        np.save(f"{d}/{name}_x.npy", x)
        np.save(f"{d}/{name}_y.npy", y)
        jobs.append({"file": f"{d}/{name}_x.npy", "labels": f"{d}/{name}_y.npy", "op": "npy", "out": name})
    res = dump(build, out, jobs)
    for name, x, y in cases:
        info = res[name]
        got = np.fromfile(os.path.join(out, name + ".bin"), np.float32).reshape((x.shape[0],) + tuple(info["shape"]))
        want = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
        check(np.array_equal(got, want) and info["labels"] == y.tolist() and info["num_classes"] == int(y.max()) + 1,
              f".npy {name} {x.shape} with {y.dtype} labels reads back as numpy has it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    build = os.path.abspath(ap.parse_args().build_dir)
    tmp = tempfile.mkdtemp(prefix="dp-image-oracle-")
    rng = np.random.default_rng(0)
    try:
        d, out = os.path.join(tmp, "img"), os.path.join(tmp, "out")
        os.makedirs(d)
        os.makedirs(out)
        a16 = make_images(d, rng)
        decoding(build, d, out, a16)
        reduced(build, d, out, rng)
        transforms(build, d, out, rng)
        scaled(build, d, out)
        listing(build, os.path.join(tmp, "tree"), out)
        os.makedirs(os.path.join(tmp, "npy"))
        npy(build, os.path.join(tmp, "npy"), out, rng)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_image_torchvision: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
