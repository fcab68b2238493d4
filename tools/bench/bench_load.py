"""The machine's load beside an interleaved bench (tools/bench/*_vs_*.py): busy loops that load it on
purpose, the 1-minute load average sampled while the bench runs, and the torchrun command prefix the
PyTorch sides start their ranks with.
"""
import os
import statistics
import subprocess
import sys
import threading


class LoadSampler:
    """Samples the 1-minute load average every `every` seconds while the bench runs."""

    def __init__(self, every=15.0):
        self.samples, self.stop = [os.getloadavg()[0]], threading.Event()
        self.thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self.thread.start()

    def _run(self, every):
        while not self.stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def finish(self):
        """Stops sampling; returns the samples (the first taken at the start)."""
        self.stop.set()
        self.thread.join()
        return self.samples

    def summary(self, digits=1):
        """'median M [min-max] over N samples', each load with `digits` decimals."""
        s = self.finish()
        return f"median {statistics.median(s):.{digits}f} [{min(s):.{digits}f}-{max(s):.{digits}f}] over {len(s)} samples"


def start_load(n):
    """n CPU-bound busy loops (processes) beside the bench; stop them with stop_load."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_load(procs):
    for q in procs:
        q.kill()
        q.wait()


def torchrun(python, nproc):
    """The command prefix that starts `nproc` ranks of a script on this host (torch.distributed.run)."""
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
