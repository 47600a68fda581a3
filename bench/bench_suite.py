"""The test suite's time on a fresh clone, as CI runs it: clone, install, then the README's test command.

    .venv/bin/python bench/bench_suite.py                     # a clone of this repository's HEAD, in .../dpviz
    .venv/bin/python bench/bench_suite.py --folder-name repo  # the clone in a folder of another name
    .venv/bin/python bench/bench_suite.py --busy 2            # with two busy loops beside it, as on a shared machine
    .venv/bin/python bench/bench_suite.py --venv .venv        # the clone run by an environment already installed

The clone goes into a temporary folder under a folder named `dpviz` (the name a user gives it, which the tests
must not mind), gets a virtual environment of its own from the README's install command, and runs the README's
test command; the figures are the install's and the tests' wall seconds, pytest's counts and the slowest tests
(`--slowest`, pytest's own `--durations`, which only reports). `--venv` skips the install: the clone's `.venv` is
that environment, its checkout put first on PYTHONPATH (an editable install elsewhere would import that one),
and only the test command's pytest runs (its pip install would point the shared environment at the clone).
Takes minutes.
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
PYTEST = ".venv/bin/python -m pytest"
TESTS = f".venv/bin/pip install -q -r requirements-dev.txt && {PYTEST}"  # the README's, word for word
SUMMARY = re.compile(r"^=* ?(?P<body>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s")  # with or without -q's rule
# A line of pytest's --durations report: "12.34s call     tests/test_x.py::test_y[param]"
DURATION = re.compile(r"^(?P<seconds>\d+\.\d+)s (?P<when>setup|call|teardown)\s+(?P<test>\S.*)$")


def counts(output: str) -> dict[str, int]:
    """pytest's last summary line, e.g. '1690 passed, 29 skipped in 410.59s (0:06:50)', as counts by outcome."""
    lines = [line for line in output.splitlines() if SUMMARY.search(line)]
    if not lines:
        raise ValueError("pytest printed no summary line")
    body = SUMMARY.search(lines[-1])["body"]
    found = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", body)}
    return {key: found.get(key, 0) for key in ("passed", "failed", "skipped", "errors", "xfailed", "xpassed")}


def slowest(output: str) -> list[dict[str, object]]:
    """pytest's --durations report, slowest first: each test's phase (a fixture's work is its setup) and seconds."""
    return [{"test": m["test"].strip(), "when": m["when"], "seconds": float(m["seconds"])}
            for m in map(DURATION.match, output.splitlines()) if m]


def by_file(durations: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each test file's seconds (its tests' setups, calls and teardowns) and tests, the longest first."""
    files: dict[str, dict[str, object]] = {}
    for d in durations:
        name = str(d["test"]).split("::", 1)[0]
        entry = files.setdefault(name, {"file": name, "seconds": 0.0, "tests": set()})
        entry["seconds"] += d["seconds"]
        entry["tests"].add(d["test"])
    return sorted(({**f, "seconds": round(f["seconds"], 1), "tests": len(f["tests"])} for f in files.values()),
                  key=lambda f: -f["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder-name", default="dpviz")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy loops to run beside the tests, one process each (a shared CI machine)")
    parser.add_argument("--venv", type=Path, help="an installed environment to run the tests with, instead of installing one")
    parser.add_argument("--slowest", type=int, default=15, help="how many of the slowest tests to keep (0: none)")
    parser.add_argument("--files", type=int, default=20, help="how many of the files that take longest to keep")
    args = parser.parse_args()
    load_start = os.getloadavg()
    durations = " --durations=0 --durations-min=0"  # every test's time: the slowest, and each file's sum
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / args.folder_name
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = dict(os.environ)
        began = time.monotonic()
        if args.venv:
            (clone / ".venv").symlink_to(args.venv.resolve(), target_is_directory=True)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(clone), env.get("PYTHONPATH")]))
            command = PYTEST + durations
        else:
            subprocess.run(INSTALL, shell=True, cwd=clone, check=True)
            command = TESTS + durations
        installed = time.monotonic()
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            result = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True, text=True)
        finally:
            for loop in busy:
                loop.kill()
                loop.wait()
        ended = time.monotonic()
        addopts = re.search(r"^addopts\s*=(.*)$", (clone / "pytest.ini").read_text(), re.M)
        workers = re.search(r"(?:-n|--numprocesses)[ =](\d+)", addopts.group(1) if addopts else "")
    every = slowest(result.stdout)
    print("\n".join(line for line in result.stdout.splitlines() if not DURATION.match(line))[-3000:])
    found = counts(result.stdout)
    figures = {"folder": args.folder_name, "busy_loops": args.busy,
               "install_s": None if args.venv else installed - began, "seconds": ended - installed,
               "exit": result.returncode, "workers": int(workers.group(1)) if workers else 1, **found,
               "slowest": every[:args.slowest], "files": by_file(every)[:args.files]}
    install = "an environment already installed" if args.venv else f"install {figures['install_s']:.0f} s"
    print(f"{install}, tests {figures['seconds']:.0f} s: {found}; load average {os.getloadavg()[0]:.2f} "
          f"(at the start {load_start[0]:.2f})")
    for test in figures["slowest"]:
        print(f"{test['seconds']:8.2f} s  {test['when']:<8} {test['test']}")
    print("the files that take longest, every test's setup, call and teardown summed (on all workers):")
    for file in figures["files"]:
        print(f"{file['seconds']:8.1f} s  {file['tests']:>5} tests  {file['file']}")
    save("bench_suite", "busy_clone" if args.busy else "fresh_clone", figures, load_start)


if __name__ == "__main__":
    main()
