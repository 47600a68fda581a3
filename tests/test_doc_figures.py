"""Every measured figure in README.md and docs/ is one a bench script wrote into bench/out/, as bench/write_docs.py
writes it; none is typed by hand outside its block."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import bench_suite  # noqa: E402
import write_docs  # noqa: E402

# Where the measured figures are; the other docs hold settings and facts about models (sizes of shards, rows).
MEASURED = [ROOT / "README.md", ROOT / "docs" / "speed.md", ROOT / "docs" / "reliability.md",
             ROOT / "docs" / "hosting.md"]
# A number with a unit of time, memory or ratio, as a measurement would be written.
FIGURE = re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?(?:s|ms|µs|us|MB|MiB|GB|GiB|KiB|×|x)(?![\w-])(?!\s?\d)")
# Settings and limits, not measurements: the host tiers a page must fit, the upload limit, torchrun's rendezvous
# bound and default, a collective's timeout, a sampling interval. (A size such as 1024 × 768 is no ratio.)
SETTINGS = {"690 MB", "1,500 MB", "64 MB", "60 s", "900 s", "30 s", "50 ms"}


def blocks() -> list[tuple[Path, re.Match]]:
    return [(path, match) for path in write_docs.DOCS for match in write_docs.blocks(path.read_text())]


def test_the_docs_hold_blocks_of_figures():
    cited = {(m["file"], m["part"]) for _, m in blocks()}
    assert ("bench_page.json", "tutorial") in cited and ("bench_engines.json", "against_bare") in cited
    assert ("bench_suite.json", "fresh_clone") in cited


@pytest.mark.parametrize("path, file, part", [(p.relative_to(ROOT), m["file"], m["part"]) for p, m in blocks()])
def test_each_block_is_its_json_as_written(path, file, part):
    match = next(m for p, m in blocks() if p.relative_to(ROOT) == path and (m["file"], m["part"]) == (file, part))
    assert match["body"] == write_docs.render(file, part), (
        f"{path}'s block of {file} {part} is not what bench/write_docs.py writes from it: run it")


@pytest.mark.parametrize("file", sorted({m["file"] for _, m in blocks()}))
def test_each_cited_json_says_how_and_when_it_was_measured(file):
    data = json.loads((ROOT / "bench" / "out" / file).read_text())
    for part, entry in data.items():
        run = entry["run"]
        assert run["command"].startswith(".venv/bin/python bench/"), (file, part)
        assert len(run["load_start"]) == len(run["load_end"]) == 3 and run["cores"] >= 1, (file, part)


def outside_blocks(text: str) -> str:
    return write_docs.BLOCK.sub("", text)


def stray_figures(text: str) -> list[str]:
    lines = []
    for line in outside_blocks(text).splitlines():
        if line.startswith(("    ", "```", "$", ".venv/")):
            continue  # commands and code
        found = [f for f in FIGURE.findall(re.sub(r"`[^`]*`", "", line)) if f not in SETTINGS]
        if found:
            lines.append(f"{', '.join(found)} in: {line.strip()[:100]}")
    return lines


@pytest.mark.parametrize("path", [p.relative_to(ROOT) for p in MEASURED])
def test_no_measured_figure_outside_a_block(path):
    assert stray_figures((ROOT / path).read_text()) == [], f"{path}: figures typed by hand, outside a block"


def test_the_checks_find_a_stale_or_stray_figure():
    """The tests above can fail: a figure typed into prose is found, and a block edited by hand differs."""
    assert stray_figures("The page drew in 2.5 s, 3.1× the baseline.\n") == [
        "2.5 s, 3.1× in: The page drew in 2.5 s, 3.1× the baseline."]
    assert stray_figures("A host of 690 MB; `0.5 s` in code is not prose; at 1024 × 768.\n") == []
    assert stray_figures("<!-- figures: bench_page.json tutorial -->\nit took 9 s\n<!-- /figures -->\n") == []
    for _, match in blocks():  # one figure changed by hand in each block: each is told apart from its JSON
        edited = re.sub(r"\d", lambda digit: str((int(digit[0]) + 1) % 10), match["body"], count=1)
        assert edited != match["body"] and edited != write_docs.render(match["file"], match["part"])


def test_the_suite_bench_reads_pytests_summary():
    assert bench_suite.counts("==== 1690 passed, 29 skipped in 410.59s (0:06:50) ====") == {
        "passed": 1690, "failed": 0, "skipped": 29, "errors": 0, "xfailed": 0, "xpassed": 0}
    assert bench_suite.counts("x\n= 2 failed, 1688 passed, 29 skipped, 1 xfailed in 401.00s =")["failed"] == 2
    assert bench_suite.counts("....\n1690 passed, 29 skipped in 410.59s (0:06:50)\n")["passed"] == 1690  # -q
    with pytest.raises(ValueError):
        bench_suite.counts("no summary here")


def test_the_suite_bench_reads_pytests_slowest_tests():
    report = ("===== slowest 3 durations =====\n"
              "62.59s call     tests/browser/test_browser_layout.py::test_every_tab[?engine=ddp&gpus=4&train=true]\n"
              "19.63s setup    tests/test_torchrun.py::test_both_nodes_exit_0_and_rank_0_alone_prints_the_log\n"
              "0.01s teardown tests/test_cli.py::test_help\n"
              "===== 2159 passed in 500.00s =====\n")
    assert bench_suite.slowest(report) == [
        {"test": "tests/browser/test_browser_layout.py::test_every_tab[?engine=ddp&gpus=4&train=true]", "when": "call",
         "seconds": 62.59},
        {"test": "tests/test_torchrun.py::test_both_nodes_exit_0_and_rank_0_alone_prints_the_log", "when": "setup",
         "seconds": 19.63},
        {"test": "tests/test_cli.py::test_help", "when": "teardown", "seconds": 0.01}]
    assert bench_suite.slowest("1 passed in 1.00s\n") == []
    files = bench_suite.by_file(bench_suite.slowest(report + "3.00s setup    tests/test_cli.py::test_help\n"))
    assert [(f["file"], f["tests"], f["seconds"]) for f in files] == [
        ("tests/browser/test_browser_layout.py", 1, 62.6), ("tests/test_torchrun.py", 1, 19.6), ("tests/test_cli.py", 1, 3.0)]
