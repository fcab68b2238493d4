#!/usr/bin/env python3
"""Oracle: dptrain's TensorBoard event files against TensorBoard's own Python reader.

1. tb_dump --write DIR writes a series of scalars with dp::metrics::TbWriter. TensorBoard's
   EventAccumulator (tensorboard.backend.event_processing.event_accumulator) loads DIR and must
   list exactly the same tags, and for every tag the same steps, float32 values and wall times.
2. Every record of that file is re-framed in Python: the length and data CRCs equal TensorBoard's
   masked_crc32c, and each record parses as tensorboard.compat.proto.event_pb2.Event (the first
   with file_version "brain.Event:2").
3. The other direction: a file written by TensorBoard's own EventFileWriter is read by
   tb_dump --read (dp::metrics::read_event_file, every CRC checked): same steps, tags, values.

Run by ctest as: python test_tb_events_py.py --build-dir <build>. Exits non-zero on any mismatch.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def run(tool, *args):
    r = subprocess.run([tool, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def f32(x):
    return float(np.float32(x))


def check_accumulator(tool, tmp, errors):
    d = os.path.join(tmp, "ours")
    wrote = run(tool, "--write", d)
    acc = event_accumulator.EventAccumulator(d, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    expected = {}
    for ev in wrote["events"]:
        for tag, value in ev["scalars"]:
            expected.setdefault(tag, []).append((ev["step"], f32(value), ev["wall_time"]))
    got_tags = sorted(acc.Tags()["scalars"])
    if got_tags != sorted(expected):
        errors.append(f"tags: TensorBoard sees {got_tags}, we wrote {sorted(expected)}")
    n = 0
    for tag, want in expected.items():
        got = [(s.step, f32(s.value), s.wall_time) for s in acc.Scalars(tag)] if tag in got_tags else []
        if got != want:
            errors.append(f"{tag}: TensorBoard reads {got[:3]}... ({len(got)}), we wrote {want[:3]}... ({len(want)})")
        n += len(want)
    return wrote["path"], n


def check_framing(path, errors):
    data = open(path, "rb").read()
    pos, events = 0, []
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        (len_crc,) = struct.unpack_from("<I", data, pos + 8)
        body = data[pos + 12: pos + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, pos + 12 + length)
        if len_crc != masked_crc32c(data[pos: pos + 8]):
            errors.append(f"record {len(events)}: length CRC {len_crc:#x} != {masked_crc32c(data[pos:pos + 8]):#x}")
        if body_crc != masked_crc32c(body):
            errors.append(f"record {len(events)}: data CRC {body_crc:#x} != {masked_crc32c(body):#x}")
        ev = event_pb2.Event()
        ev.ParseFromString(body)
        events.append(ev)
        pos += 12 + length + 4
    if not events or events[0].file_version != "brain.Event:2":
        errors.append(f"first event is not file_version brain.Event:2: {events[:1]}")
    return len(events)


def check_reverse(tool, tmp, errors):
    d = os.path.join(tmp, "theirs")
    w = EventFileWriter(d)
    want = []
    for i in range(12):
        step = 3 * i + 2
        values = [("loss", 1.0 / (i + 1)), ("acc", 0.1 * i)]
        summ = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
        w.add_event(event_pb2.Event(wall_time=1000.0 + i, step=step, summary=summ))
        want.append((step, 1000.0 + i, [(t, f32(v)) for t, v in values]))
    w.close()
    files = [f for f in os.listdir(d) if "tfevents" in f]
    got = run(tool, "--read", os.path.join(d, files[0]))["events"]
    if got[0]["file_version"] != "brain.Event:2":
        errors.append(f"TensorBoard's file_version read as {got[0]['file_version']!r}")
    got = [(e["step"], e["wall_time"], [(t, f32(v)) for t, v in e["scalars"]]) for e in got[1:]]
    if got != want:
        errors.append(f"reading TensorBoard's file: got {got[:2]}..., want {want[:2]}...")
    return len(want)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, "tests", "tb_dump")
    if not os.access(tool, os.X_OK):
        print(f"FAIL: {tool} not found; build the tb_dump target first", file=sys.stderr)
        return 1
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        path, scalars = check_accumulator(tool, tmp, errors)
        records = check_framing(path, errors)
        reverse = check_reverse(tool, tmp, errors)
    for e in errors:
        print("MISMATCH", e)
    print(f"tb oracle: EventAccumulator read {scalars} scalars in {records} records as written; "
          f"tb_dump read {reverse} events written by TensorBoard; {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
