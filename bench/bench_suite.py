"""The test suite's time on a fresh clone, as CI runs it: clone, install, then the README's test command.

    .venv/bin/python bench/bench_suite.py                     # a clone of this repository's HEAD, in .../dpviz
    .venv/bin/python bench/bench_suite.py --folder-name repo  # the clone in a folder of another name
    .venv/bin/python bench/bench_suite.py --busy 2            # with two busy loops beside it, as on a shared machine

The clone goes into a temporary folder under a folder named `dpviz` (the name a user gives it, which the tests
must not mind), gets a virtual environment of its own from the README's install command, and runs the README's
test command; the figures are the install's and the tests' wall seconds and pytest's counts. Takes minutes.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results.py beside this script
from results import save  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt"
TESTS = ".venv/bin/pip install -q -r requirements-dev.txt && .venv/bin/python -m pytest"  # the README's, word for word
SUMMARY = re.compile(r"^=* ?(?P<body>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s")  # with or without -q's rule


def counts(output: str) -> dict[str, int]:
    """pytest's last summary line, e.g. '1690 passed, 29 skipped in 410.59s (0:06:50)', as counts by outcome."""
    lines = [line for line in output.splitlines() if SUMMARY.search(line)]
    if not lines:
        raise ValueError("pytest printed no summary line")
    body = SUMMARY.search(lines[-1])["body"]
    found = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", body)}
    return {key: found.get(key, 0) for key in ("passed", "failed", "skipped", "errors", "xfailed", "xpassed")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder-name", default="dpviz")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy loops to run beside the tests, one process each (a shared CI machine)")
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / args.folder_name
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        began = time.monotonic()
        subprocess.run(INSTALL, shell=True, cwd=clone, check=True)
        installed = time.monotonic()
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            result = subprocess.run(TESTS, shell=True, cwd=clone, capture_output=True, text=True)
        finally:
            for loop in busy:
                loop.kill()
                loop.wait()
        ended = time.monotonic()
        addopts = re.search(r"^addopts\s*=(.*)$", (clone / "pytest.ini").read_text(), re.M)
        workers = re.search(r"(?:-n|--numprocesses)[ =](\d+)", addopts.group(1) if addopts else "")
    print(result.stdout[-3000:])
    found = counts(result.stdout)
    figures = {"folder": args.folder_name, "busy_loops": args.busy, "install_s": installed - began, "seconds": ended - installed,
               "exit": result.returncode, "workers": int(workers.group(1)) if workers else 1, **found}
    print(f"install {figures['install_s']:.0f} s, tests {figures['seconds']:.0f} s: {found}")
    save("bench_suite", "busy_clone" if args.busy else "fresh_clone", figures, load_start)


if __name__ == "__main__":
    main()
