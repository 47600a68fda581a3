"""Time limits for tests that wait on processes, derived from what this machine takes now for that work.

A fixed number of seconds is too short on a busy machine and needlessly long on a quiet one. Each limit
here is the measured cost of the work a test waits for (starting a Python that imports torch, as the
command line, torchrun's agent and the forkserver of the ranks each do), times how often the test pays
it, plus the run's own timeouts, with headroom for a machine that gets busier while the test waits.
"""
from __future__ import annotations

import functools
import subprocess
import sys
import time

HEADROOM = 4  # a machine that was busy when measured may be busier while the test waits


@functools.cache
def torch_start_s() -> float:
    """Seconds to start a Python that imports torch, torch.distributed and torch._dynamo, measured once now."""
    begin = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch, torch.distributed, torch._dynamo"], check=True)
    return time.monotonic() - begin


def limit(starts: float, then_s: float = 0.0) -> float:
    """A limit for work that starts `starts` such Pythons one after the other, then runs for up to `then_s`."""
    return HEADROOM * starts * torch_start_s() + then_s
