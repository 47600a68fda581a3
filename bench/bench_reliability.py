"""How the page and the CLI hold up against bad input, closed tabs and many visitors at once.

    .venv/bin/python bench/bench_reliability.py                  # all four parts
    .venv/bin/python bench/bench_reliability.py --quick          # smaller samples, one closed tab, 6 sessions
    .venv/bin/python bench/bench_reliability.py --only links cli
    .venv/bin/python bench/bench_reliability.py --only sessions --sessions 10

Parts (b)-(d) of bench_hosted.py's setup are reused: its Server (a fresh `streamlit run app.py` on a free
loopback port), its RSS sampler of the server's process tree, its links (query) and draw_everything. Parts
(c) and (d) need Playwright for Python and Chromium (DPVIZ_CHROMIUM overrides /usr/bin/chromium).

(a) links: a generated matrix of bad links (every setting in url_state.PARAMS with empty, out-of-range,
    non-numeric, float, huge, negative, unicode, control-character and markdown values, a 100,000-character
    value, repeated parameters, unknown names, unknown presets, presets with bad overrides, and settings that
    break a joint limit). Each goes through url_state.from_query, which must not raise, must return a valid
    RunConfig, and must give one line per warning, ending in a full stop; a link meant to be bad must warn.
    A sample of them then opens the real page through Streamlit's AppTest: no exception element, and every
    warning from_query gives is shown.
(b) cli: a generated matrix of bad command lines (every option with bad values in both `--opt value` and
    `--opt=value` form, missing values, unknown and abbreviated options, bad --trace / --chrome-trace paths,
    bad presets, --inputs hidden without a GRU, joint limits). Each runs dpviz.cli.main in-process (SystemExit
    caught, stdout and stderr captured); a sample also runs as `python -m dpviz ...`. Each must exit 2 with
    exactly one line on stderr, no traceback and nothing on stdout. A command line that turns out valid
    here (it runs the tutorial) is counted apart.
(c) closed-tab: a fresh server, a link whose run is long (10,000 batches on 16 devices); once the progress
    bar moves, the page and its browser context are closed. The server's CPU time (utime + stime from
    /proc/<pid>/stat, summed over its process tree) and RSS are sampled every 0.5 s: printed are the seconds
    until the server is idle (under 5% of one core over a 2 s window), and RSS idle before (after one tutorial
    page, so torch and dpviz are loaded), at the peak, once idle, and 130 s after closing (Streamlit keeps a
    closed page's session 2 minutes for a reconnect), and after one more tutorial page then (expired sessions
    are dropped when the session store is next used). Then again for a page closed while the figures of a
    finished big run are being built.
(d) sessions: one fresh server and N pages at once (default 20, opened 0.2 s apart), each in its own browser
    context (its own Streamlit session) with its own link: 1 to 16 devices with other batch sizes, data
    sizes, models and training, and every preset. Each page must end idle with no exception and show its
    own run (the "Number of GPUs" slider, the devices banner, the settings in its URL, the preset's box),
    then draw every tab. Printed: pages that showed their own run, seconds until all were idle, and the
    server's RSS idle, at the peak, with every page open, 10 s and 130 s after they closed, and after one
    more tutorial page then.

The servers run without Streamlit's file watcher (STREAMLIT_SERVER_FILE_WATCHER_TYPE=none unless set), so
files written elsewhere while the bench runs cost them no CPU.

Results also go to bench/out/bench_reliability.json. Timings depend on what else the machine runs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_hosted import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, EXCEPTION, IDLE, SVG, RssSampler, Server, _tree, draw_everything, query, shown_config,
    tree_rss,
)
from dpviz.config import LIMITS, RunConfig  # noqa: E402
from dpviz.presets import PRESETS  # noqa: E402
from dpviz.page.link import PARAMS, from_query, to_query  # noqa: E402

OUT = ROOT / "bench" / "out"
# Files written while the bench runs (tests, editors) must not keep the servers' file watchers busy: the
# CPU a closed tab leaves behind is measured. The servers inherit this; set it to "auto" to watch as usual.
os.environ.setdefault("STREAMLIT_SERVER_FILE_WATCHER_TYPE", "none")
VIEWPORT = {"width": 1400, "height": 900}
PROGRESS = "[data-testid=stProgress]"
INFO = "[data-testid=stAlertContentInfo]"
ERROR = "[data-testid=stAlertContentError]"
LONG = 100_000  # characters of the longest value tried
IDLE_SHARE = 0.05  # of one core: below this over IDLE_WINDOW seconds, the server is idle
IDLE_WINDOW = 2.0
RECONNECT_WINDOW = 130  # seconds: Streamlit keeps a closed page's session 2 minutes for a reconnect
EVERY = 0.5  # seconds between CPU / RSS samples
LONG_MESSAGE = 300  # characters: a CLI message longer than this is reported (the link warnings name values cut to 80)


def shorten(value, limit: int = 120) -> str:
    """repr(value), cut in the middle: inputs in the report stay one readable line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-(limit // 2):]} ({len(text):,} chars)"


# ---------------------------------------------------------------------------------------------- (a) links

COMMON = [  # (what, value) tried for every setting
    ("empty", ""), ("non-numeric", "many"), ("float", "2.5"), ("exponent", "1e3"), ("huge", str(10**30)),
    ("negative", "-5"), ("unicode", "ünïcødé ✓"), ("emoji", "🚀"), ("right-to-left override", "\u202e61"),
    ("newline", "3\n4"), ("line separator", "3\u20284"), ("escape sequence", "\x1b[31m3"), ("NUL", "\x00"),
    ("lone surrogate", "\udcff"), ("markdown link", "[x](https://example.com)"),
    ("markdown image", "![x](http://h/x.png)"), ("html", "<script>alert(1)</script>"),
    ("code fence", "```\nx\n```"), ("100,000 characters", "x" * LONG),
]
INT_ONLY = [("5,000 digits", "9" * 5000), ("100,000 digits", "9" * LONG)]
BOOL_ONLY = [("not a truth value", "maybe"), ("two", "2"), ("minus one", "-1"), ("typo", "truee")]
CHOICE_ONLY = [("unknown choice", "tpu"), ("near miss", "linearr"), ("number", "3")]


def link_matrix() -> list[dict]:
    """Bad links: {what, params, bad} where `bad` says the link must give at least one warning."""
    cases: list[dict] = []
    # A valid value of every setting, the engines' own too (a DataParallel link leaves those out of to_query).
    valid = {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in RunConfig().to_dict().items()}
    add = lambda what, params, bad=True: cases.append({"what": what, "params": params, "bad": bad})
    for name in PARAMS:
        values = list(COMMON)
        if name in LIMITS:
            low, high = LIMITS[name]
            values += [("below the minimum", str(low - 1)), ("above the maximum", str(high + 1))] + INT_ONLY
        elif name in ("shuffle", "train"):
            values += BOOL_ONLY
        else:
            values += CHOICE_ONLY
        for what, value in values:
            add(f"{name}: {what}", {name: value})
        add(f"{name}: repeated, last bad", {name: [valid[name], "many"]})
        add(f"{name}: repeated, all bad", {name: ["many", "", "[x](https://example.com)"]})
        add(f"{name}: repeated, last valid (the last wins)", {name: ["many", valid[name]]}, bad=False)
    for what, name in [("near miss", "gpu"), ("capitals", "GPUS"), ("dash", "batch-size"), ("empty", ""),
                       ("tracking", "utm_source"), ("trailing space", "gpus "), ("unicode", "gpüs"),
                       ("newline", "gp\nus"), ("markdown link", "[x](https://example.com)"),
                       ("markdown image", "![x](http://h/x.png)"), ("100,000 characters", "q" * LONG),
                       ("escape sequence", "\x1b[2J"), ("lone surrogate", "\udcff")]:
        add(f"unknown parameter: {what}", {name: "8"})
    add("unknown parameters: 50 of them", {f"p{i}": str(i) for i in range(50)})
    for what, value in [("unknown", "no-such"), ("empty", ""), ("underscore", "idle_gpus"), ("unicode", "ïdle-gpus"),
                        ("markdown link", "[x](https://example.com)"), ("markdown image", "![x](http://h/x.png)"),
                        ("newline", "idle-gpus\nx"), ("100,000 characters", "p" * LONG),
                        ("repeated, last unknown", ["idle-gpus", "nope"])]:
        add(f"unknown preset: {what}", {"preset": value})
    for name in PRESETS:
        add(f"preset {name} with gpus=0", {"preset": name, "gpus": "0"})
        add(f"preset {name} with batch_size=x", {"preset": name, "batch_size": "x"})
        add(f"preset {name} with model=transformer", {"preset": name, "model": "transformer"})
        add(f"preset {name} with data_size=1000000 batch_size=1", {"preset": name, "data_size": "1000000", "batch_size": "1"})
        if PRESETS[name].config.model not in ("gru", "gru_dim1"):
            add(f"preset {name} with inputs=hidden", {"preset": name, "inputs": "hidden"})
        else:
            add(f"preset {name} with model=linear", {"preset": name, "model": "linear"})
    joint = [
        ("data_size x input_size over the limit", {"data_size": "1000000", "input_size": "17"}),
        ("the widest input on a million rows", {"data_size": "1000000", "input_size": "1024"}),
        ("cnn images over the limit", {"model": "cnn", "input_size": "1024", "data_size": "17"}),
        ("gru sequences over the limit", {"model": "gru", "input_size": "1024", "data_size": "2731"}),
        ("too many batches", {"data_size": "1000000", "batch_size": "1"}),
        ("one batch too many", {"data_size": "10001", "batch_size": "1"}),
        ("too many training batches", {"data_size": "100000", "train": "true"}),
        ("one training batch too many", {"data_size": "1001", "batch_size": "1", "train": "true"}),
        ("both limits at once", {"data_size": "1000000", "input_size": "1024", "batch_size": "1", "train": "true"}),
        ("hidden state without a GRU", {"inputs": "hidden"}),
        ("hidden state with a CNN", {"inputs": "hidden", "model": "cnn"}),
        ("hidden with a bad model", {"inputs": "hidden", "model": "transformer"}),
        ("every setting bad", {name: "[x](https://example.com)" for name in PARAMS}),
        ("every setting 100,000 characters", {name: "9" * LONG for name in PARAMS}),
    ]
    for what, params in joint:
        add(f"joint: {what}", params)
    return cases


def one_line(text: str) -> bool:
    return len(str(text).splitlines()) == 1


def check_link(case: dict) -> dict:
    """from_query on one link; problems found (empty when it held)."""
    problems: list[str] = []
    try:
        config, warnings = from_query(case["params"])
    except Exception as error:
        return {"problems": [f"raised {type(error).__name__}: {shorten(str(error), 200)}"], "warnings": [], "config": None}
    if not isinstance(config, RunConfig):
        problems.append(f"returned {type(config).__name__}, not a RunConfig")
    else:
        try:
            if RunConfig(**config.to_dict()) != config:
                problems.append("the RunConfig does not rebuild from its own settings")
        except Exception as error:
            problems.append(f"invalid RunConfig: {shorten(str(error), 200)}")
    for warning in warnings:
        if not isinstance(warning, str) or not one_line(warning) or not warning.endswith("."):
            problems.append(f"warning not one line ending in '.': {shorten(warning, 300)}")
    if case["bad"] and not warnings:
        problems.append("a bad link gave no warning")
    return {"problems": problems, "warnings": warnings, "config": config}


def page_sample(checked: list[tuple[dict, dict]], size: int) -> list[tuple[dict, dict]]:
    """Up to `size` links for the real page, one per kind of link in turn, each a quick run."""
    by_kind: dict[str, list] = {}
    for case, result in checked:
        config = result["config"]
        if config is None or config.num_batches > 500 or config.num_batches * config.gpus > 4000:
            continue  # a long run tells nothing more here
        if any(re.search(r"[\ud800-\udfff]", str(k) + str(v)) for k, v in case["params"].items()):
            continue  # a browser cannot send a lone surrogate in a URL (it is not UTF-8)
        by_kind.setdefault(case["what"].split(":")[0].split(" with ")[0], []).append((case, result))
    shuffle = random.Random(0).shuffle  # the same sample every time
    for kind in by_kind.values():
        shuffle(kind)
    chosen, depth = [], 0
    while len(chosen) < size and any(len(v) > depth for v in by_kind.values()):
        for kind in by_kind.values():
            if len(kind) > depth and len(chosen) < size:
                chosen.append(kind[depth])
        depth += 1
    return chosen


def page_check(case: dict, result: dict, timeout: float) -> list[str]:
    """The link's page through AppTest: no exception, every from_query warning shown as a warning."""
    import logging

    from streamlit.testing.v1 import AppTest
    from dpviz.echo import markdown_text

    for name in [n for n in logging.Logger.manager.loggerDict if n.startswith("streamlit")] + ["streamlit"]:
        logging.getLogger(name).setLevel(logging.ERROR)  # AppTest's "missing ScriptRunContext" notes

    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for name, value in case["params"].items():
        app.query_params[name] = value
    try:
        app.run()
    except Exception as error:
        return [f"AppTest raised {type(error).__name__}: {shorten(str(error), 200)}"]
    problems = [f"exception shown: {shorten(e.value, 300)}" for e in app.exception]
    shown = [w.value for w in app.warning]
    for warning in result["warnings"]:
        if markdown_text(warning) not in shown:
            problems.append(f"warning not shown: {shorten(warning, 200)}")
    return problems


def part_links(sample: int, timeout: float) -> dict:
    cases = link_matrix()
    start = time.perf_counter()
    checked = [(case, check_link(case)) for case in cases]
    seconds = time.perf_counter() - start
    warnings = [w for _, r in checked for w in r["warnings"]]
    failures = [{"link": case["what"], "params": shorten(case["params"], 200), "problems": r["problems"]}
                for case, r in checked if r["problems"]]
    longest = max(warnings, key=len, default="")
    page_failures, start = [], time.perf_counter()
    chosen = page_sample(checked, sample)
    for case, result in chosen:
        problems = page_check(case, result, timeout)
        if problems:
            page_failures.append({"link": case["what"], "params": shorten(case["params"], 200), "problems": problems})
    two_sentences = sum(1 for w in warnings if re.search(r"\. [A-Z]", w))
    return {
        "links": len(cases), "links_meant_bad": sum(c["bad"] for c in cases), "warnings": len(warnings),
        "from_query_seconds": round(seconds, 2), "failures": failures, "longest_warning_chars": len(longest),
        "longest_warning": longest, "warnings_with_a_second_sentence": two_sentences,
        "page_links": len(chosen), "page_links_what": [c["what"] for c, _ in chosen],
        "page_warnings_expected": sum(len(r["warnings"]) for _, r in chosen),
        "page_seconds": round(time.perf_counter() - start, 1), "page_failures": page_failures,
    }


# ------------------------------------------------------------------------------------------------ (b) cli

def cli_options() -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """The CLI's options, read from its parser: numbers (option -> setting), choices, file paths and flags."""
    from dpviz.cli import build_parser

    numbers, choices, paths, flags = {}, [], [], []
    for action in build_parser()._actions:
        option = next((o for o in action.option_strings if o.startswith("--")), None)
        if option in (None, "--help"):
            continue
        if action.nargs == 0:
            flags.append(option)
        elif action.choices:
            choices.append(option)
        elif getattr(action.type, "__name__", None) in LIMITS:
            numbers[option] = action.type.__name__
        else:
            paths.append(option)
    return numbers, choices, paths, flags


BAD_TEXT = [  # (what, value) tried for every option that takes a value
    ("empty", ""), ("non-numeric", "many"), ("float", "2.5"), ("exponent", "1e3"), ("huge", str(10**30)),
    ("negative", "-5"), ("unicode", "ünïcødé"), ("emoji", "🚀"), ("newline", "3\n4"), ("escape sequence", "\x1b[31m3"),
    ("lone surrogate (a non-UTF-8 byte)", "\udcff"), ("markdown link", "[x](https://example.com)"),
    ("markdown image", "![x](http://h/x.png)"), ("100,000 characters", "x" * LONG), ("NUL", "\x00"),
]


def bad_paths() -> list[tuple[str, str]]:
    """(what, path) for --trace and --chrome-trace: none can take the file."""
    paths = [
        ("folder does not exist", "/no/such/folder/t.json"), ("a folder", "/tmp"), ("the current folder", "."),
        ("the root folder", "/"), ("empty", ""), ("300-character name", "t" * 300 + ".json"),
        ("300-character folder", "d" * 300 + "/t.json"), ("over PATH_MAX", "a/" * 2100 + "t.json"),
        ("a file as the folder", str(ROOT / "README.md") + "/t.json"),
        ("newline in the folder", "/no/such\nfolder/t.json"), ("escape sequence in the folder", "/no/such/\x1b[31mred/t.json"),
        ("non-UTF-8 folder", "/no/such/\udcff/t.json"), ("in /proc (cannot create files)", "/proc/dpviz-t.json"),
        ("NUL in the name", "t\x00.json"),
    ]
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        read_only = OUT / "read-only"
        read_only.mkdir(parents=True, exist_ok=True)
        read_only.chmod(0o555)
        paths.append(("read-only folder", str(read_only / "t.json")))
    return paths


def cli_matrix() -> list[dict]:
    cases: list[dict] = []
    add = lambda what, argv: cases.append({"what": what, "argv": argv})
    numbers, choices, paths, flags = cli_options()
    for option, name in numbers.items():
        low, high = LIMITS[name]
        for what, value in BAD_TEXT + [("below the minimum", str(low - 1)), ("above the maximum", str(high + 1)),
                                       ("5,000 digits", "9" * 5000)]:
            add(f"{option} {what}", [option, value])
            add(f"{option}= {what}", [f"{option}={value}"])
    for option in choices:
        for what, value in [("empty", ""), ("unknown", "no-such"), ("unicode", "ünïcødé"), ("emoji", "🚀"),
                            ("newline", "linear\nx"), ("escape sequence", "\x1b[31mx"),
                            ("markdown link", "[x](https://example.com)"), ("100,000 characters", "x" * LONG),
                            ("negative number", "-5"), ("NUL", "\x00")]:
            add(f"{option} {what}", [option, value])
            add(f"{option}= {what}", [f"{option}={value}"])
    for option in [*numbers, *choices, *paths]:
        add(f"{option} without a value (last)", [option])
        add(f"{option} without a value (an option next)", [option, "--train"])
    for flag in flags:
        add(f"flag with a value: {flag}=yes", [f"{flag}=yes"])
        add(f"flag with a value: {flag} false", [flag, "false"])
    for what, argv in [
        ("--frobnicate", ["--frobnicate"]), ("--GPUS", ["--GPUS", "3"]), ("--batch_size", ["--batch_size", "3"]),
        ("-g", ["-g", "3"]), ("-x", ["-x"]), ("---gpus", ["---gpus", "3"]), ("after --", ["--", "--gpus", "3"]),
        ("a positional word", ["extra"]), ("a positional number", ["3"]), ("a trailing word", ["--gpus", "3", "extra"]),
        ("unicode option", ["--ünïcødé"]), ("100,000-character option", ["--" + "x" * LONG]),
        ("markdown option", ["--[x](https://example.com)"]), ("a lone dash", ["-"]), ("escape sequence option", ["--\x1b[2J"]),
    ]:
        add(f"unknown option: {what}", argv)
    for argv in (["--gpu", "3"], ["--gp", "3"], ["--gpu=3"], ["--batch", "3"], ["--batch-s", "3"], ["--data", "3"],
                 ["--input", "3"], ["--output", "3"], ["--see", "3"], ["--back", "simulated"], ["--mod", "mlp"],
                 ["--inp", "tuple"], ["--pre", "idle-gpus"], ["--tra", "t.json"], ["--chrome", "c.json"], ["--no-shuf"],
                 ["--preset", "idle-gpus", "--gpu", "3"]):
        add(f"abbreviated option: {' '.join(argv)}", argv)
    for option in paths:
        for what, path in bad_paths():
            add(f"{option} {what}", [option, path])
            add(f"{option}= {what}", [f"{option}={path}"])
        add(f"{option} starting with a dash", [option, "-x.json"])
    for what, argv in [
        ("--inputs hidden (linear)", ["--inputs", "hidden"]), ("--inputs hidden --model mlp", ["--inputs", "hidden", "--model", "mlp"]),
        ("--inputs hidden --model cnn", ["--inputs", "hidden", "--model", "cnn"]),
        ("--inputs hidden --model loss", ["--inputs", "hidden", "--model", "loss"]),
        ("--preset rnn-hidden-dim --model linear", ["--preset", "rnn-hidden-dim", "--model", "linear"]),
        ("--preset idle-gpus --inputs hidden", ["--preset", "idle-gpus", "--inputs", "hidden"]),
    ]:
        add(f"hidden without a GRU: {what}", argv)
    for what, argv in [
        ("too many batches", ["--data-size", "1000000", "--batch-size", "1"]),
        ("one batch too many", ["--data-size", "10001", "--batch-size", "1"]),
        ("too many training batches", ["--data-size", "100000", "--train"]),
        ("one training batch too many", ["--data-size", "1001", "--batch-size", "1", "--train"]),
        ("data_size x input_size over the limit", ["--data-size", "1000000", "--input-size", "17"]),
        ("cnn images over the limit", ["--model", "cnn", "--input-size", "1024", "--data-size", "17"]),
        ("gru sequences over the limit", ["--model", "gru", "--input-size", "1024", "--data-size", "2731"]),
        ("a training preset on a million rows", ["--preset", "batchnorm-one-row", "--data-size", "1000000"]),
        ("cuda on 16 devices (more than this machine has)", ["--backend", "cuda", "--gpus", "16"]),
    ]:
        add(f"joint: {what}", argv)
    for name in PRESETS:
        add(f"preset {name} with --gpus 0", ["--preset", name, "--gpus", "0"])
        add(f"preset {name} with --batch-size x", ["--preset", name, "--batch-size", "x"])
        add(f"preset {name} with --model transformer", ["--preset", name, "--model", "transformer"])
    return cases


def control_characters(text: str) -> bool:
    """Whether a message shows a raw control character (an escape sequence a terminal would obey), bar the last newline."""
    return any(ord(c) < 32 and c != "\n" or ord(c) == 127 for c in text) or "\n" in text.rstrip("\n")


def judge(code, out: str, err: str) -> list[str]:
    problems = []
    if code != 2:
        problems.append(f"exit status {code!r}, not 2")
    if out:
        problems.append(f"{len(out):,} characters on stdout: {shorten(out[:200], 200)}")
    if not err.endswith("\n") or err.count("\n") != 1 or "\r" in err:
        problems.append(f"stderr is not one line: {shorten(err, 400)}")
    if "Traceback" in err:
        problems.append("a traceback on stderr")
    return problems


def run_in_process(argv: list[str]) -> dict:
    from dpviz.cli import main

    out, err, code = io.StringIO(), io.StringIO(), None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except SystemExit as exit:
        code = exit.code
    except Exception as error:
        err.write("".join(traceback.format_exception_only(type(error), error)))
        return {"code": "raised", "out": out.getvalue(), "err": err.getvalue(),
                "problems": [f"raised {type(error).__name__}: {shorten(str(error), 200)}"]}
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "problems": judge(code, out.getvalue(), err.getvalue())}


def run_as_process(argv: list[str]) -> dict:
    result = subprocess.run([sys.executable, "-m", "dpviz", *argv], cwd=ROOT, capture_output=True, timeout=300)
    out = result.stdout.decode("utf-8", "backslashreplace")
    err = result.stderr.decode("utf-8", "backslashreplace")
    return {"code": result.returncode, "out": out, "err": err, "problems": judge(result.returncode, out, err)}


def process_sample(cases: list[dict], size: int) -> list[dict]:
    """Up to `size` command lines a shell can pass (no NUL), of different kinds."""
    kinds = ["--gpus 100,000", "without a value (last)", "unknown option: 100,000", "abbreviated option: --gpu 3",
             "--trace newline", "--chrome-trace 300-character folder", "--trace non-UTF-8", "hidden without a GRU",
             "joint: too many batches", "preset idle-gpus with --gpus 0", "--model= markdown", "--seed negative"]
    chosen = []
    for kind in kinds:
        match = next((c for c in cases if kind in c["what"] and "\x00" not in "".join(c["argv"]) and c not in chosen), None)
        if match and len(chosen) < size:
            chosen.append(match)
    return chosen


def part_cli(sample: int) -> dict:
    cases = cli_matrix()
    start = time.perf_counter()
    failures, ran, raw_controls = [], [], []
    for case in cases:
        result = run_in_process(case["argv"])
        case["result"] = result
        if result["code"] in (0, 1):
            ran.append(case["what"])  # valid here: it ran the tutorial (counted apart)
            continue
        if result["problems"]:
            failures.append({"argv": shorten(case["argv"], 200), "what": case["what"], "exit": result["code"],
                             "problems": result["problems"], "stderr": shorten(result["err"], 400),
                             "reachable_from_a_shell": "\x00" not in "".join(case["argv"])})
        if control_characters(result["err"]):
            raw_controls.append({"what": case["what"], "stderr": shorten(result["err"], 300)})
    seconds = time.perf_counter() - start
    longest = max((c["result"]["err"] for c in cases if c["what"] not in ran), key=len, default="")
    long_messages = [{"what": c["what"], "chars": len(c["result"]["err"].rstrip("\n")), "stderr": shorten(c["result"]["err"], 200)}
                     for c in cases if c["what"] not in ran and len(c["result"]["err"].rstrip("\n")) > LONG_MESSAGE]
    chosen, process_failures, start = process_sample(cases, sample), [], time.perf_counter()
    for case in chosen:
        result = run_as_process(case["argv"])
        if result["problems"]:
            process_failures.append({"argv": shorten(case["argv"], 200), "what": case["what"], "exit": result["code"],
                                     "problems": result["problems"], "stderr": shorten(result["err"], 400)})
    return {
        "command_lines": len(cases), "ran_valid_here": ran, "in_process_seconds": round(seconds, 1),
        "failures": failures, "longest_message_chars": len(longest.rstrip("\n")), "longest_message": longest.rstrip("\n"),
        "messages_with_raw_control_characters": raw_controls, "messages_over_limit": long_messages,
        "processes": len(chosen), "processes_what": [c["what"] for c in chosen],
        "process_seconds": round(time.perf_counter() - start, 1), "process_failures": process_failures,
    }


# ------------------------------------------------------------------------------------------ (c) closed tab

def tree_cpu_seconds(root: int) -> float:
    """utime + stime in seconds, summed over the server `root` and every process it started that is alive."""
    ticks = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5); the list starts at field 3
        except (OSError, IndexError, ValueError):
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """(seconds, cpu seconds, rss bytes) of a process tree every EVERY seconds, on a thread."""

    def __init__(self, pid: int):
        self.pid, self.samples = pid, []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = (time.perf_counter(), tree_cpu_seconds(self.pid), tree_rss(self.pid))
            with self._lock:
                self.samples.append(sample)
            self._stop.wait(EVERY)

    def since(self, start: float) -> list[tuple[float, float, int]]:
        with self._lock:
            return [s for s in self.samples if s[0] >= start]

    def share(self, end: float, window: float = IDLE_WINDOW) -> float | None:
        """Share of one core used over the `window` seconds up to `end`."""
        with self._lock:
            upto = [s for s in self.samples if s[0] <= end]
        if not upto:
            return None
        last = upto[-1]
        first = next((s for s in reversed(upto) if s[0] <= last[0] - window), None)
        return None if first is None else (last[1] - first[1]) / (last[0] - first[0])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def quiet_after(samples: list[tuple[float, float, int]], start: float) -> tuple[float, float, int] | None:
    """The first window of IDLE_WINDOW seconds after `start` under IDLE_SHARE of a core: (quiet from, confirmed at,
    RSS then), seconds after `start`; None if there was none."""
    for k, (t, cpu, rss) in enumerate(samples):
        earlier = [s for s in samples[:k] if s[0] <= t - IDLE_WINDOW and s[0] >= start]
        if earlier and (cpu - earlier[-1][1]) / (t - earlier[-1][0]) < IDLE_SHARE:
            return earlier[-1][0] - start, t - start, rss
    return None


def during_run(page, timeout_ms: int, hold: float) -> dict:
    """Wait until the progress bar counts batches, then `hold` seconds more."""
    page.wait_for_selector(PROGRESS, timeout=timeout_ms)
    page.locator(PROGRESS).get_by_text(re.compile(r"Batch [\d,]+ of")).first.wait_for(timeout=timeout_ms)
    time.sleep(hold)
    text = page.locator(PROGRESS).first.inner_text() if page.locator(PROGRESS).count() else "(no bar)"
    return {"progress_at_close": text.strip()}


def while_drawing(page, timeout_ms: int, hold: float) -> dict:
    """Wait until the run has finished (the progress bar goes) and the page is being built."""
    page.wait_for_selector(PROGRESS, timeout=timeout_ms)
    page.wait_for_selector(PROGRESS, state="detached", timeout=timeout_ms)
    return {"script_running_at_close": page.locator(IDLE).count() == 0,
            "charts_drawn_at_close": page.locator(SVG).count()}


CLOSED_TABS = {
    # 10,000 batches on 16 devices: a minute or more here.
    "during the run": (RunConfig(data_size=1_000_000, batch_size=100, gpus=16, input_size=16), during_run),
    # 5,000 batches on 16 devices, closed once the run is done and the figures are being built.
    "while figures are built": (RunConfig(data_size=1_000_000, batch_size=200, gpus=16, input_size=16), while_drawing),
}


def tutorial_page(browser, server, timeout_s: float) -> None:
    """Open the tutorial's page in a session of its own, wait until it is drawn, close it."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(server.url + "/", wait_until="commit", timeout=int(timeout_s * 1000))
        page.wait_for_selector(f"{IDLE} {SVG}", timeout=int(timeout_s * 1000))
    finally:
        context.close()


def closed_tab(browser, name: str, config: RunConfig, moment, timeout_s: float, hold: float, after_s: float,
               linger: float) -> dict:
    result: dict = {"config": config.to_dict(), "batches": config.num_batches}
    with Server(OUT / f"server-closed-tab-{name.replace(' ', '-')}.log") as server:
        server.wait_healthy()
        pid = server.process.pid
        rss, cpu = RssSampler(pid), CpuSampler(pid)
        try:
            time.sleep(IDLE_WINDOW + 1)
            result["cold_idle_rss_mb"] = round(tree_rss(pid) / 1e6)
            tutorial_page(browser, server, timeout_s)  # once: torch and dpviz loaded
            time.sleep(IDLE_WINDOW + 3)
            rss.reset()
            result["idle_rss_mb"] = round(tree_rss(pid) / 1e6)
            result["idle_share_of_a_core"] = round(cpu.share(time.perf_counter()) or 0, 3)
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            opened = time.perf_counter()
            try:
                page.goto(server.url + "/" + query(config), wait_until="commit", timeout=int(timeout_s * 1000))
                result.update(moment(page, int(timeout_s * 1000), hold))
            except Exception as error:
                result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            finally:
                closed = time.perf_counter()
                result["open_seconds"] = round(closed - opened, 1)
                result["share_before_close"] = round(cpu.share(closed) or 0, 2)
                result["rss_at_close_mb"] = round(tree_rss(pid) / 1e6)
                page.close()
                context.close()
            deadline, found = closed + after_s, None
            while time.perf_counter() < deadline:
                time.sleep(EVERY)
                found = quiet_after(cpu.since(closed - EVERY), closed)
                if found:
                    break
            if found:
                quiet_from, confirmed, rss_then = found
                time.sleep(5)  # and a little later: what the process gives back
                result.update(idle_after_s=round(quiet_from, 1), idle_confirmed_after_s=round(confirmed, 1),
                              rss_when_idle_mb=round(rss_then / 1e6), rss_5s_later_mb=round(tree_rss(pid) / 1e6))
            else:
                result.update(idle_after_s=None, still_busy_share=round(cpu.share(time.perf_counter()) or 0, 2),
                              rss_at_end_mb=round(tree_rss(pid) / 1e6))
            if linger:  # past the window in which the closed page could reconnect to its session
                time.sleep(max(0.0, closed + linger - time.perf_counter()))
                result["rss_after_reconnect_window_mb"] = round(tree_rss(pid) / 1e6)
                result["share_after_reconnect_window"] = round(cpu.share(time.perf_counter()) or 0, 3)
                # Streamlit drops expired sessions when its session store is next used: one more visitor.
                tutorial_page(browser, server, timeout_s)
                time.sleep(5)
                result["rss_after_one_more_page_mb"] = round(tree_rss(pid) / 1e6)
            result["peak_rss_mb"] = round(rss.peak / 1e6)
            result["server_alive"] = server.process.poll() is None
        finally:
            cpu.stop()
            rss.stop()
    return result


def part_closed_tab(browser, names: list[str], timeout_s: float, hold: float, after_s: float, linger: float) -> dict:
    return {name: closed_tab(browser, name, *CLOSED_TABS[name], timeout_s, hold, after_s, linger) for name in names}


# ---------------------------------------------------------------------------------------------- (d) sessions

def session_links(count: int) -> list[dict]:
    """`count` links, each a different run: the presets first, then 1 to 16 devices with other settings."""
    own = [  # gpus, then settings; 2 and 8 devices are the presets' (state-lost, idle-gpus)
        (1, dict(data_size=100, batch_size=30)),
        (3, dict(model="mlp", train=True, data_size=300, batch_size=64)),
        (4, dict(model="cnn", input_size=8, data_size=200, batch_size=32)),
        (5, dict(model="gru", data_size=150, batch_size=25)),
        (6, dict(model="gru_dim1", inputs="hidden", data_size=120, batch_size=24)),
        (7, dict(model="loss", data_size=210, batch_size=35)),
        (9, dict(model="counter", data_size=90, batch_size=18)),
        (10, dict(train=True, shuffle=False, data_size=2000, batch_size=100)),
        (11, dict(inputs="tuple", data_size=1100, batch_size=110)),
        (12, dict(model="mlp", inputs="dict", data_size=600, batch_size=48)),
        (13, dict(inputs="list", data_size=1300, batch_size=13)),
        (14, dict(model="cnn", input_size=4, train=True, data_size=280, batch_size=28)),
        (15, dict(model="gru", train=True, data_size=300, batch_size=30)),
        (16, dict(data_size=10_000, batch_size=64, input_size=16, output_size=8)),
        (2, dict(data_size=77, batch_size=7, seed=7)),
        (8, dict(data_size=800, batch_size=50, output_size=3)),
    ]
    links = [{"name": f"preset {name}", "query": f"?preset={name}", "preset": name, "config": preset.config}
             for name, preset in PRESETS.items()]
    for i, (gpus, settings) in enumerate(own):
        config = RunConfig(gpus=gpus, seed=settings.pop("seed", 100 + i), **settings)
        links.append({"name": f"{gpus} GPUs, {config.model}{', train' if config.train else ''}, "
                              f"{config.data_size:,} rows / {config.batch_size:,}", "query": query(config),
                      "preset": None, "config": config})
    links = links[:count]
    while len(links) < count:  # more sessions than links: the same links again, other seeds
        base = links[len(links) % len(own)]["config"]
        config = RunConfig(**{**base.to_dict(), "seed": 1000 + len(links)})
        links.append({"name": f"{config.gpus} GPUs, seed {config.seed}", "query": query(config), "preset": None, "config": config})
    for link in links:  # every link is good: it reproduces its run without a warning
        params = dict(urllib.parse.parse_qsl(link["query"][1:]))
        assert from_query(params) == (link["config"], []), link
    return links


def own_page(page, link: dict) -> list[str]:
    """What on the page is not this link's run (empty when it all is)."""
    config, problems = link["config"], []
    if page.locator(EXCEPTION).count():
        problems.append("exception shown: " + page.locator(EXCEPTION).first.inner_text()[:300])
    slider = page.locator(".st-key-gpus input[type=range]")
    value = slider.first.input_value() if slider.count() else None
    if value != str(config.gpus):
        problems.append(f"Number of GPUs slider shows {value}, the link has {config.gpus}")
    info = " ".join(page.locator(INFO).all_inner_texts())
    wanted = f"Simulated devices: {config.gpus} CPU thread{'s' if config.gpus != 1 else ''}"
    if wanted not in info:
        problems.append(f"no '{wanted}' in the info boxes: {info[:200]!r}")
    if link["preset"]:
        title = PRESETS[link["preset"]].title
        if f"Pitfall: {title}" not in info:
            problems.append(f"the preset's box 'Pitfall: {title}' is missing")
    elif "Pitfall:" in info:
        problems.append("a preset's box is shown on a page that is no preset")
    url = shown_config(page)
    differs = {k: (url.get(k), v) for k, v in to_query(config).items() if url.get(k) != v}
    if differs:
        problems.append(f"the page's URL differs (shown, link): {differs}")
    field = page.get_by_label("Batch size", exact=True)
    if field.count() and field.input_value() != str(config.batch_size):
        problems.append(f"Batch size shows {field.input_value()}, the link has {config.batch_size}")
    return problems


def part_sessions(browser, count: int, stagger: float, timeout_s: float, linger: float) -> dict:
    links = session_links(count)
    result: dict = {"sessions": len(links)}
    contexts, pages = [], []
    with Server(OUT / "server-sessions.log") as server:
        server.wait_healthy()
        pid = server.process.pid
        rss = RssSampler(pid)
        try:
            time.sleep(1)
            rss.reset()
            result["idle_rss_mb"] = round(tree_rss(pid) / 1e6)
            start = time.perf_counter()
            for link in links:
                context = browser.new_context(viewport=VIEWPORT)
                contexts.append(context)
                page = context.new_page()
                page.set_default_timeout(int(timeout_s * 1000))
                pages.append(page)
                page.goto(server.url + "/" + link["query"], wait_until="commit", timeout=int(timeout_s * 1000))
                time.sleep(stagger)
            result["all_opened_s"] = round(time.perf_counter() - start, 1)
            done: dict[int, float] = {}
            deadline = start + timeout_s
            while len(done) < len(pages) and time.perf_counter() < deadline:
                for i, page in enumerate(pages):
                    if i in done:
                        continue
                    try:
                        if page.locator(IDLE).count() and page.locator(f"{SVG}, {EXCEPTION}").count():
                            done[i] = time.perf_counter() - start
                    except Exception:
                        pass  # a page busy with its scripts answers on the next round
                time.sleep(0.5)
            result["all_idle_s"] = round(max(done.values()), 1) if len(done) == len(pages) else None
            result["first_idle_s"] = round(min(done.values()), 1) if done else None
            rows = []
            for i, (link, page) in enumerate(zip(links, pages)):
                row = {"link": link["name"], "query": link["query"], "idle_s": round(done[i], 1) if i in done else None}
                row["problems"] = own_page(page, link) if i in done else ["not idle before the timeout"]
                rows.append(row)
            result["own_page"] = sum(not r["problems"] for r in rows)
            result["rss_all_idle_mb"] = round(tree_rss(pid) / 1e6)
            draw_start = time.perf_counter()
            for row, page in zip(rows, pages):  # then every tab of every page
                try:
                    draw_everything(page, int(timeout_s * 1000))
                    row["drawn"] = True
                except Exception as error:
                    row["drawn"] = False
                    row["problems"].append(f"drawing every tab: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            result["all_tabs_drawn"] = sum(r.get("drawn", False) for r in rows)
            result["draw_all_tabs_s"] = round(time.perf_counter() - draw_start, 1)
            time.sleep(2)
            result["rss_all_open_mb"] = round(tree_rss(pid) / 1e6)
            result["peak_rss_mb"] = round(rss.peak / 1e6)
            for context in contexts:
                context.close()
            contexts = []
            closed = time.perf_counter()
            time.sleep(10)
            result["rss_10s_after_closing_mb"] = round(tree_rss(pid) / 1e6)
            if linger:
                time.sleep(max(0.0, closed + linger - time.perf_counter()))
                result["rss_after_reconnect_window_mb"] = round(tree_rss(pid) / 1e6)
                tutorial_page(browser, server, timeout_s)
                time.sleep(5)
                result["rss_after_one_more_page_mb"] = round(tree_rss(pid) / 1e6)
            result["server_alive"] = server.process.poll() is None
            result["pages"] = rows
        finally:
            for context in contexts:
                with contextlib.suppress(Exception):
                    context.close()
            rss.stop()
    return result


# ------------------------------------------------------------------------------------------------ report

def report_links(r: dict) -> None:
    print("### (a) Bad links\n")
    print("| links tried | meant bad | warnings | from_query raised / invalid config / not one line / silent | longest warning |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {r['links']} | {r['links_meant_bad']} | {r['warnings']} | {len(r['failures'])} | {r['longest_warning_chars']} characters |")
    print(f"\nLongest warning: {r['longest_warning']!r}")
    print(f"Warnings with a second sentence after the first full stop (\"... got 'x'. Using ... instead.\"): "
          f"{r['warnings_with_a_second_sentence']} of {r['warnings']} (each is one line ending in a full stop).")
    print(f"\nReal page (AppTest, app.py): {r['page_links']} links, {r['page_warnings_expected']} warnings expected, "
          f"{len(r['page_failures'])} failures, {r['page_seconds']} s.")
    for failure in r["failures"] + r["page_failures"]:
        print(f"- FAILED {failure['link']}: {failure['params']}: {'; '.join(failure['problems'])}")
    print(flush=True)


def report_cli(r: dict) -> None:
    print("### (b) Bad command lines\n")
    print("| command lines | run in-process | as `python -m dpviz` | valid here (ran) | not exit 2 + one line + empty stdout | longest message |")
    print("|---:|---:|---:|---:|---:|---:|")
    failures = len(r["failures"]) + len(r["process_failures"])
    print(f"| {r['command_lines']} | {r['command_lines']} | {r['processes']} | {len(r['ran_valid_here'])} | {failures} | "
          f"{r['longest_message_chars']} characters |")
    print(f"\nLongest message: {shorten(r['longest_message'], 300)}")
    if r["messages_over_limit"]:
        by_kind: dict[str, int] = {}
        for m in r["messages_over_limit"]:
            by_kind[m["what"]] = m["chars"]
        print(f"Messages over {LONG_MESSAGE} characters (one line, but the value is not cut): {len(r['messages_over_limit'])}: "
              + "; ".join(f"{what} ({chars:,})" for what, chars in by_kind.items()))
    print(f"Subprocesses: {', '.join(r['processes_what'])}.")
    for name in r["ran_valid_here"]:
        print(f"- valid here (ran the tutorial): {name}")
    for failure in r["failures"]:
        where = "" if failure["reachable_from_a_shell"] else " (in-process only: a real argv cannot hold a NUL byte)"
        stderr = "" if any("stderr is not one line" in p for p in failure["problems"]) else f"; stderr {failure['stderr']}"
        print(f"- FAILED{where} {failure['what']}: argv {failure['argv']}: exit {failure['exit']}; "
              f"{'; '.join(failure['problems'])}{stderr}")
    for failure in r["process_failures"]:
        print(f"- FAILED as a process {failure['what']}: argv {failure['argv']}: exit {failure['exit']}; "
              f"{'; '.join(failure['problems'])}")
    if r["messages_with_raw_control_characters"]:
        print(f"- {len(r['messages_with_raw_control_characters'])} messages print a raw control character, e.g.: "
              + "; ".join(f"{m['what']}: {m['stderr']}" for m in r["messages_with_raw_control_characters"][:4]))
    print(flush=True)


def report_closed(results: dict) -> None:
    print("### (c) Closed tab\n")
    print("| closed | batches | CPU before close | idle after | RSS idle (warm) | RSS peak | RSS at close | RSS once idle | 5 s later "
          f"| {RECONNECT_WINDOW} s after closing | then after one more page |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        idle = f"{r['idle_after_s']} s" if r.get("idle_after_s") is not None else f"NOT within the wait ({r.get('still_busy_share')} cores)"
        print(f"| {name} | {r['batches']:,} | {r['share_before_close']:.0%} of a core | {idle} | {r['idle_rss_mb']} MB | "
              f"{r['peak_rss_mb']} MB | {r['rss_at_close_mb']} MB | {r.get('rss_when_idle_mb', r.get('rss_at_end_mb'))} MB | "
              f"{r.get('rss_5s_later_mb', '-')} MB | {r.get('rss_after_reconnect_window_mb', '-')} MB | "
              f"{r.get('rss_after_one_more_page_mb', '-')} MB |")
    for name, r in results.items():
        facts = {k: r[k] for k in ("progress_at_close", "script_running_at_close", "charts_drawn_at_close", "error") if k in r}
        print(f"- {name}: server RSS {r['cold_idle_rss_mb']} MB before any page, {r['idle_rss_mb']} MB idle after the "
              f"tutorial's page (torch and dpviz loaded); page open {r['open_seconds']} s; idle confirmed {r.get('idle_confirmed_after_s')} s after "
              f"closing; server alive {r['server_alive']}; {facts}")
    print(flush=True)


def report_sessions(r: dict) -> None:
    print("### (d) Concurrent sessions\n")
    print("| sessions | showed their own run | every tab drawn | all idle after | RSS idle (cold) | RSS peak | all open "
          f"| 10 s after closing | {RECONNECT_WINDOW} s after closing | then after one more page |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {r['sessions']} | {r['own_page']} | {r['all_tabs_drawn']} | {r['all_idle_s']} s | {r['idle_rss_mb']} MB | "
          f"{r['peak_rss_mb']} MB | {r['rss_all_open_mb']} MB | {r['rss_10s_after_closing_mb']} MB | "
          f"{r.get('rss_after_reconnect_window_mb', '-')} MB | {r.get('rss_after_one_more_page_mb', '-')} MB |")
    print(f"\nOpened {r['sessions']} pages in {r['all_opened_s']} s; first idle after {r['first_idle_s']} s; "
          f"every tab of every page drawn in {r['draw_all_tabs_s']} s more; server alive {r['server_alive']}.")
    for row in r["pages"]:
        if row["problems"]:
            print(f"- FAILED {row['link']} ({row['query'][:120]}): {'; '.join(row['problems'])}")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ["links", "cli", "closed-tab", "sessions"]
    parser.add_argument("--quick", action="store_true", help="5 pages and 3 processes sampled, one closed tab, 6 sessions")
    parser.add_argument("--only", nargs="+", choices=parts, help="these parts only")
    parser.add_argument("--sessions", type=int, help="concurrent sessions (default 20, 6 with --quick)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds any one page may take (default 1200)")
    parser.add_argument("--linger", type=float, default=RECONNECT_WINDOW,
                        help=f"seconds after closing pages to read the server's RSS once more (default {RECONNECT_WINDOW}; 0: not)")
    args = parser.parse_args()
    chosen = args.only or parts
    sessions = args.sessions or (6 if args.quick else 20)
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start\n", flush=True)
    path = OUT / "bench_reliability.json"
    try:  # parts not run this time keep their last results (each part says when it ran)
        results: dict = json.loads(path.read_text())
    except (OSError, ValueError):
        results = {}
    results.update(cpus=os.cpu_count(), load_at_start=load)

    def save(part: str | None = None) -> None:
        if part:
            results.setdefault("ran_at", {})[part] = time.strftime("%Y-%m-%d %H:%M:%S")
        path.write_text(json.dumps(results, indent=2, ensure_ascii=True, default=str) + "\n")
    if "links" in chosen:
        results["links"] = part_links(5 if args.quick else 20, timeout=300)
        report_links(results["links"])
        save("links")
    if "cli" in chosen:
        results["cli"] = part_cli(3 if args.quick else 10)
        report_cli(results["cli"])
        save("cli")
    browser_parts = [p for p in ("closed-tab", "sessions") if p in chosen]
    if browser_parts:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            sys.exit("Playwright for Python is missing: .venv/bin/pip install -r requirements-dev.txt")
        if not os.access(CHROMIUM, os.X_OK):
            sys.exit(f"Chromium is missing at {CHROMIUM}: apt-get install chromium (or set DPVIZ_CHROMIUM)")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                if "closed-tab" in browser_parts:
                    names = list(CLOSED_TABS)[:1] if args.quick else list(CLOSED_TABS)
                    results["closed_tab"] = part_closed_tab(browser, names, args.timeout, hold=5, after_s=60, linger=args.linger)
                    report_closed(results["closed_tab"])
                    save("closed_tab")
                if "sessions" in browser_parts:
                    results["sessions"] = part_sessions(browser, sessions, stagger=0.2, timeout_s=args.timeout, linger=args.linger)
                    report_sessions(results["sessions"])
                    save("sessions")
            finally:
                browser.close()
    load = os.getloadavg()
    results["load_at_end"] = load
    save()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end; results in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
