"""A smoke test of dpviz installed from its wheel, as a user's project has it: run with the Python of an environment
that installed the wheel, from a folder of the user's own (nothing of the checkout on sys.path or PYTHONPATH).

    python -m venv /tmp/env && /tmp/env/bin/pip install dist/dpviz-*.whl torch==2.13.0
    cd "$(mktemp -d)" && /tmp/env/bin/python /path/to/checkout/tests/installed_smoke.py

.ci/run does this after the suite. Each check prints one line; the first that fails ends the script with status 1.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import torch

HERE = Path.cwd()
BIN = Path(sys.executable).parent
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
LIMIT_S = 600  # one command: a run of processes on a busy CI machine starts several Pythons that import torch

OWN = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 5), nn.Linear(5, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))

def build():
    return Net()

def batch():
    return torch.randn(12, 6)
"""


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok' if ok else 'FAILED'}: {what}" + (f"\n{detail[-3000:]}" if not ok and detail else ""), flush=True)
    if not ok:
        sys.exit(1)


def command(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dpviz"), *arguments], cwd=HERE, env=ENV, capture_output=True, text=True,
                          timeout=LIMIT_S)


def main() -> None:
    import dpviz
    from importlib.metadata import version

    where = Path(dpviz.__file__).resolve()
    check(f"dpviz {dpviz.__version__} imported from the environment ({where.parent})",
          Path(sys.prefix).resolve() in where.parents and version("dpviz") == dpviz.__version__)

    shown = command("--version")
    check("dpviz --version", shown.returncode == 0 and shown.stdout.strip() == f"dpviz {dpviz.__version__}", shown.stderr)

    log = command("--gpus", "3")
    check("dpviz --gpus 3: the tutorial's log, split as torch.chunk splits",
          log.returncode == 0 and f"In Model: input size torch.Size([{len(torch.arange(30).chunk(3)[0])}, 5])" in log.stdout,
          log.stdout + log.stderr)

    planned = command("plan", "--model", "transformer", "--size", "7b", "--gpus", "8", "--optimizer", "adam", "--json",
                    "plan.json")
    found = json.loads((HERE / "plan.json").read_text()) if planned.returncode == 0 else {}
    check("dpviz plan at 7B on 8 devices", planned.returncode == 0 and found.get("gpus") == 8, planned.stderr)

    (HERE / "own.py").write_text(OWN)
    ranks = command("--engine", "ddp", "--gpus", "2", "--train", "--model", "own.py:build", "--example", "own.py:batch",
                  "--trace", "run.json")
    from dpviz.trace import json_io

    trace = json_io.loads((HERE / "run.json").read_text()) if ranks.returncode == 0 else None
    check("dpviz --engine ddp on a model file in the user's folder",
          trace is not None and trace.engine == "ddp" and trace.facts["model"]["class"] == "Net", ranks.stderr)

    script = HERE / "mine.py"
    script.write_text(textwrap.dedent("""
        import dpviz
        trace = dpviz.record(dpviz.RunConfig(gpus=4, batch_size=10, data_size=10))
        print([s.rows for s in trace.replicas(0)], sorted(dpviz.plan("mlp", gpus=2)["engines"]))
    """))
    library = subprocess.run([sys.executable, str(script)], cwd=HERE, env=ENV, capture_output=True, text=True,
                             timeout=LIMIT_S)
    chunks = [len(c) for c in torch.arange(10).chunk(4)]
    check("import dpviz; dpviz.record and dpviz.plan from a script of the user's",
          library.returncode == 0 and library.stdout.startswith(str(chunks)), library.stderr)

    from dpviz.page import run_costs

    check("the page's data files are installed", run_costs.TABLE.is_file() and bool(run_costs._table()))
    page_answers()


def page_answers() -> None:
    """`dpviz page` serves from the installed package: its health check answers, then it stops on SIGTERM."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([str(BIN / "dpviz"), "page", "--server.headless", "true", "--server.port", str(port),
                               "--server.address", "127.0.0.1"], cwd=HERE, env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    answered = False
    deadline = time.monotonic() + LIMIT_S
    try:
        while not answered and server.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    answered = response.status == 200
            except OSError:
                time.sleep(0.2)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
    check("dpviz page serves the installed page", answered, output)


if __name__ == "__main__":
    main()
