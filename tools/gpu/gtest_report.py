#!/usr/bin/env python3
"""gtest_report.py: what the test binaries of tools/gpu/run_all.sh's gtest step did, for the summary.

    gtest_report.py --dir DIR [--gpu-host] [--brief] NAME[:RC] ...

For each test binary NAME (with its exit status RC, default 0) reads DIR/NAME.json (what
`--gtest_output=json:DIR/NAME.json` wrote: every test that ran and its result) and DIR/NAME.log
(its console output). GoogleTest 1.12's JSON (the build's) names a skipped test but not why, so
the reason comes from the log (the lines after "file:line: Skipped"). A binary that wrote no JSON
(it crashed, hung or was killed; RC 124/137 is the time box) is counted from its log, and the
test that was running when it stopped is named.

Prints a table (binary, passed, failed, skipped, status), then every failed test with the first
lines of its failure and every skipped test with its reason. With --gpu-host (nvidia-smi showed a
GPU), a test skipped because it saw no GPU is marked as a bug: on a GPU host that means the test
looked in the wrong place or the device was not visible to it. --brief prints one line instead
(the step's note). Skips for needing more GPUs than the host has are listed, not marked.

Standard library only. Exit status 0 when every binary exited 0, no test failed and (with
--gpu-host) no test skipped for lack of a GPU; 1 otherwise; 2 on a usage error.
"""
import argparse
import json
import os
import re
import sys

# A skip reason that means "this process sees no GPU" (not "needs two GPUs"): the messages of the
# project's GPU-test skips ("no GPU", "no CUDA device", "needs a GPU", "without a GPU").
NO_GPU = re.compile(r"\bno (cuda )?(gpu|device)s?\b|\bwithout an? (gpu|cuda device)\b|\bneeds an? (gpu|cuda device)\b"
                    r"|cuda_device_count\(\) == 0", re.I)
TIMEOUT_RCS = (124, 137)
END = re.compile(r"^\[ +(OK|SKIPPED|FAILED) *\] (\S+?)(, where .*)? \(\d+ ms\)$")
RUN = re.compile(r"^\[ RUN {6}\] (\S+)$")
PART = re.compile(r"^(\S+:\d+): (Skipped|Failure)$")
MSG_CHARS = 200


def shorten(lines):
    text = " / ".join(s.strip() for s in lines if s.strip())
    return text if len(text) <= MSG_CHARS else text[:MSG_CHARS - 3] + "..."


def failure_text(lines):
    """'file:line' then the message's lines -> the first two lines of the message (file:line)."""
    if not lines:
        return ""
    return f"{shorten(lines[1:3])} ({lines[0]})"


def from_log(path):
    """{test: {"result": OK|SKIPPED|FAILED, "msg": str}}, the test left running (or None), readable."""
    tests, running, part, lines = {}, None, None, []
    try:
        with open(path, errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return {}, None, False

    def close():
        if running and part:
            tests.setdefault(running, {}).setdefault(part, lines[:])

    for line in text:
        m = RUN.match(line)
        if m:
            running, part, lines = m.group(1), None, []
            continue
        m = END.match(line)
        if m and m.group(2) == running:
            close()
            t = tests.setdefault(running, {})
            t["result"] = m.group(1)
            running, part, lines = None, None, []
            continue
        m = PART.match(line)
        if m and running:
            close()
            part, lines = m.group(2), [m.group(1)]
            continue
        if part:
            lines.append(line)
    close()
    out = {}
    for name, t in tests.items():
        if "result" not in t:
            continue
        msg = ""
        if t["result"] == "SKIPPED" and "Skipped" in t:
            msg = shorten(t["Skipped"][1:])
        elif t["result"] == "FAILED" and "Failure" in t:
            msg = failure_text(t["Failure"])
        out[name] = {"result": t["result"], "msg": msg}
    return out, running, True


def from_json(path):
    """{test: {"result": OK|SKIPPED|FAILED, "msg": str}} in run order, or None when unreadable."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    out = {}
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            if t.get("status") == "NOTRUN":
                continue
            name = f"{suite.get('name')}.{t.get('name')}"
            fails = t.get("failures") or []
            if fails:
                lines = str(fails[0].get("failure", "")).splitlines()
                out[name] = {"result": "FAILED", "msg": failure_text(lines)}
            elif t.get("result") == "SKIPPED":
                out[name] = {"result": "SKIPPED", "msg": ""}  # the reason is in the log only
            else:
                out[name] = {"result": "OK", "msg": ""}
    return out


def binary(directory, spec):
    name, _, rc = spec.partition(":")
    rc = int(rc) if rc else 0
    logged, running, have_log = from_log(os.path.join(directory, name + ".log"))
    tests = from_json(os.path.join(directory, name + ".json"))
    source = "json"
    if tests is None:
        tests, source = logged, "log"
    else:
        for t, r in tests.items():  # reasons the JSON lacks, from the log
            if not r["msg"] and t in logged:
                r["msg"] = logged[t]["msg"]
    counts = {k: sum(1 for r in tests.values() if r["result"] == k) for k in ("OK", "FAILED", "SKIPPED")}
    if rc in TIMEOUT_RCS:
        status = "TIMEOUT" + (f" in {running}" if running else "")
    elif source == "log" and not have_log:
        status = f"exit {rc}; no JSON and no log"
    elif source == "log":
        status = f"exit {rc}; no JSON report" + (f": stopped in {running}" if running else "")
    elif rc != 0:
        status = f"exit {rc}"
    else:
        status = "ok"
    return {"name": name, "rc": rc, "tests": tests, "counts": counts, "status": status}


def render(bins, gpu_host):
    head = ["binary", "passed", "failed", "skipped", "status"]
    rows = [[b["name"], str(b["counts"]["OK"]), str(b["counts"]["FAILED"]), str(b["counts"]["SKIPPED"]), b["status"]]
            for b in bins]
    w = [max(len(r[i]) for r in [head] + rows) for i in range(4)]
    out = []
    for r in [head] + rows:
        out.append("  ".join([r[0].ljust(w[0])] + [r[i].rjust(w[i]) for i in (1, 2, 3)] + [r[4]]))
    failed = [(b["name"], t, r) for b in bins for t, r in b["tests"].items() if r["result"] == "FAILED"]
    skipped = [(b["name"], t, r) for b in bins for t, r in b["tests"].items() if r["result"] == "SKIPPED"]
    if failed:
        out.append(f"failed ({len(failed)}):")
        out += [f"  {n} {t}: {r['msg'] or '(no message in the log)'}" for n, t, r in failed]
    if skipped:
        out.append(f"skipped ({len(skipped)}):")
        for n, t, r in skipped:
            bug = "  <- BUG: skipped for lack of a GPU on a GPU host" if gpu_host and NO_GPU.search(r["msg"]) else ""
            out.append(f"  {n} {t}: {r['msg'] or '(no reason in the log)'}{bug}")
    return "\n".join(out)


def brief(bins, gpu_host):
    parts = []
    for b in bins:
        c = b["counts"]
        s = f"{b['name']} {c['OK']} passed"
        if c["FAILED"]:
            s += f", {c['FAILED']} FAILED"
        if c["SKIPPED"]:
            s += f", {c['SKIPPED']} skipped"
        if b["status"] != "ok":
            s += f" ({b['status']})"
        parts.append(s)
    bugs = no_gpu_skips(bins) if gpu_host else 0
    if bugs:
        parts.append(f"BUG: {bugs} skipped for lack of a GPU on this GPU host")
    return "; ".join(parts)


def no_gpu_skips(bins):
    return sum(1 for b in bins for r in b["tests"].values() if r["result"] == "SKIPPED" and NO_GPU.search(r["msg"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="the folder of NAME.json and NAME.log")
    p.add_argument("--gpu-host", action="store_true", help="a skip for lack of a GPU is a bug")
    p.add_argument("--brief", action="store_true", help="one line instead of the table")
    p.add_argument("binaries", nargs="+", metavar="NAME[:RC]")
    args = p.parse_args()
    for spec in args.binaries:
        if not re.match(r"^[\w.+-]+(:\d+)?$", spec):
            p.error(f"'{spec}' is not NAME or NAME:RC")
    bins = [binary(args.dir, spec) for spec in args.binaries]
    print(brief(bins, args.gpu_host) if args.brief else render(bins, args.gpu_host))
    bad = any(b["status"] != "ok" or b["counts"]["FAILED"] for b in bins)
    return 1 if bad or (args.gpu_host and no_gpu_skips(bins)) else 0


if __name__ == "__main__":
    sys.exit(main())
