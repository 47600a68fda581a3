"""Write the measured figures into README.md and docs/, from the bench scripts' own output (bench/out/*.json).

    .venv/bin/python bench/write_docs.py            # rewrite every block of figures
    .venv/bin/python bench/write_docs.py --check    # exit 1, naming each block, if any differs from its JSON

A block of figures in a markdown file sits between two comments that name the JSON file and the part of it
that it shows, and everything between them is this script's:

    <!-- figures: bench_page.json tutorial -->
    ...
    <!-- /figures -->

Nothing measured is written anywhere else in the docs by hand: tests/test_doc_figures.py checks every block
against its JSON and looks for figures outside the blocks. After a bench run, run this script, read the diff,
and commit the JSON and the docs together.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere without installing
from dpviz.engines import ENGINES, vocabulary  # noqa: E402  the engines' short names, as the page says them

OUT = ROOT / "bench" / "out"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- figures: (?P<file>[\w.]+\.json) (?P<part>\w+) -->\n)(?P<body>.*?)(<!-- /figures -->)", re.S)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def ratio(value: float) -> str:
    return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"


def measured_by(run: dict[str, Any]) -> str:
    load = lambda values: f"{values[0]:.2f}"
    return (f"*Measured by `{run['command']}` on {run['utc']} UTC: {run['cores']} cores, load average "
            f"{load(run['load_start'])} at the start and {load(run['load_end'])} at the end; torch {run['torch']}, "
            f"Python {run['python']}.*")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    rule = "|" + "|".join(["---"] * len(header)) + "|"
    return "\n".join(["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(cells) + " |" for cells in rows)])


def page_tutorial(f: dict[str, Any]) -> str:
    return table(
        ["first run", f"a new run, median of {f['new_runs']} (least, most)", "a minimal page's rerun, between them",
         "changed back", "the first tab's batch slider", "each other tab, first shown", "figures over the tabs"],
        [[ms(f["first_run_s"]), f"**{ms(f['new_runs_median_s'])}** ({ms(f['new_runs_least_s'])}, {ms(f['new_runs_most_s'])})",
          ms(f["minimal_rerun_median_s"]), ms(f["back_s"]), ms(f["slider_s"]),
          f"{ms(f['tabs_least_s'])} to {ms(f['tabs_most_s'])}",
          f"{f['figure_count']}, {f['figures_kib']:.0f} KiB, largest {f['largest_figure_kib']:.0f} KiB"]])


def page_large(f: dict[str, Any]) -> str:
    return table(
        ["first run", f"a new run ({f['new_run_change']})", "the bare forwards of its chunks", "new run ÷ bare",
         "first run ÷ bare", "changed back", "each other tab, first shown"],
        [[ms(f["first_run_s"]), f"**{ms(f['new_run_s'])}**", ms(f["bare_chunks_s"]), ratio(f["new_run_ratio"]),
          ratio(f["first_run_ratio"]), ms(f["back_s"]), f"{ms(f['tabs_least_s'])} to {ms(f['tabs_most_s'])}"]])


def engine_configs(f: dict[str, Any]) -> str:
    lines = ["| run | batches | replica threads at once | bare | bare-chunks | simulated DataParallel | recorded "
             "(`dpviz.record`) | recorded ÷ bare-chunks | recorded heap peak |", "|---|---|---|---|---|---|---|---|---|"]
    for c in f["configs"]:
        per = c["per_batch_us"]
        cell = lambda name: f"{per[name]:,.0f} µs" if name in per else ""
        over = c["over_bare_chunks"] or {}
        lines.append(f"| {c['label']} | {c['batches']:,} | {c['threads_at_once']} | {cell('bare')} | {cell('bare-chunks')} "
                     f"| {cell('simulated')} | {cell('recorded')} | "
                     f"{'**' + ratio(over['recorded']) + '**' if 'recorded' in over else ''} "
                     f"| {c['heap_peak_mib']['recorded']:.1f} MiB |")
    lines.append("")
    lines.append(f"Times are per batch, the best of several runs. Sixteen empty jobs at once cost "
                 f"{f['thread_started_us']:,.0f} µs per call with a thread started and joined for each (what "
                 f"`nn.DataParallel` does) and {f['thread_borrowed_us']:,.0f} µs borrowed from the pool; the process "
                 f"peaked at {f['peak_rss_mib']:.0f} MiB resident.")
    return "\n".join(lines)


def engines_bare(f: dict[str, Any]) -> str:
    rows = [[ENGINES[r["engine"]].short, str(r["ranks"]), ms(r["bare_s"]), ms(r["recorded_s"]),
             f"**{ratio(r['ratio'])}**", ", ".join(f"{x:.2f}" for x in r["ratios"])] for r in f["rows"]]
    return (table(["engine", "ranks", "bare step", "recorded step", "recorded ÷ bare (median of pairs)", "each pair"], rows)
            + f"\n\n{f['steps_rows']:,} rows in batches of 30, so each median is over tens of steps.")


def engines_ddp(f: dict[str, Any]) -> str:
    rows = [[ENGINES[s["engine"]].short, str(s["ranks"]), ms(s["engine_s"]), ms(s["ddp_s"]), ratio(s["ratio"]),
             ms(p["engine_s"]), ms(p["ddp_s"]), ratio(p["ratio"])] for s, p in ((r["step"], r["page"]) for r in f["rows"])]
    return table(["engine", "ranks", "step", "DDP's step", "ratio (median of pairs)", "page", "DDP's page", "ratio"], rows)


def first_chart(f: dict[str, Any]) -> str:
    return (f"Medians of {f['repeats']} cold starts each: **{ms(f['app_median_s'])}** for `app.py` against "
            f"{ms(f['minimal_median_s'])} for the minimal page, **{ratio(f['ratio'])}** (app.py "
            f"{ms(min(f['app_s']))} to {ms(max(f['app_s']))}; the minimal page {ms(min(f['minimal_s']))} to "
            f"{ms(max(f['minimal_s']))}).")


def ddp_ranks(f: dict[str, Any]) -> str:
    rows = [[str(r["ranks"]), ms(r["first_ddp_s"]), ms(r["later_ddp_s"]), ms(r["dp_s"]), ratio(r["later_ddp_s"] / r["dp_s"]),
             ms(r["start_s"]), ms(r["init_s"]), ms(r["ddp_s"]), ms(r["step0_s"]), ms(r["later_s"])] for r in f["rows"]]
    return table(["ranks", "first", "later", "dp", "later ÷ dp", "start", "init", "DDP()", "step 1", "later step"], rows)


def suite(f: dict[str, Any]) -> str:
    beside = f" with {f['busy_loops']} busy loops running beside it" if f.get("busy_loops") else ""
    install = ("the install before it took " + f"{f['install_s']:.0f} s" if f.get("install_s") is not None
               else "run by an environment already installed (`--venv`)")
    text = (f"The README's test command on a fresh clone in a folder named `{f['folder']}`{beside}: "
            f"**{f['passed']:,} passed**, {f['failed']} failed, {f['skipped']} skipped in **{f['seconds']:.0f} s** "
            f"({f['seconds'] / 60:.1f} min, {f['workers']} workers); {install}.")
    if not f.get("slowest"):
        return text
    rows = [[f"`{t['test']}`", t["when"], f"{t['seconds']:.1f} s"] for t in f["slowest"]]
    text += (f"\n\nThe {len(rows)} slowest, as pytest's `--durations` reports them (a test's setup is its "
             "fixtures' work, shared with the tests after it):\n\n" + table(["test", "phase", "time"], rows))
    if f.get("files"):  # where the time goes, file by file (on every worker together: more than the wall time)
        files = [[f"`{x['file']}`", f"{x['tests']:,}", f"{x['seconds']:.0f} s"] for x in f["files"]]
        text += (f"\n\nThe {len(files)} files that take longest, their tests' setups, calls and teardowns summed over "
                 "both workers:\n\n" + table(["file", "tests", "time"], files))
    return text


def costs(f: dict[str, Any]) -> str:
    runs, mb = f["runs"], lambda b: f"{b / 1e6:.0f} MB"
    low, high = f["measured"]["lanes"]["ranks"]
    rows = []
    for name in ENGINES:
        for model, training in (("linear", "forward"), ("linear", "sgd"), ("transformer", "adam")):
            row = runs.get(f"{name}/{model}/{training}")
            if row is None:
                continue
            lanes = f["measured"]["lanes"].get(name, (low, high))  # DataParallel's devices, a pipeline's stages
            rows.append([ENGINES[name].short, model, training, mb(row["fixed"] + lanes[0] * row["per_lane"]),
                         mb(row["fixed"] + lanes[1] * row["per_lane"]), f"{row['per_lane'] / 1e6:.1f} MB",
                         f"{row['seconds']:.2f} s"])
    floor = f["floor"]
    return (table(["engine", "model", "training", f"at {low} lanes", "at the most measured", "each further lane",
                   "alone, 4 steps"], rows)
            + f"\n\nAt {low} and {high} ranks (DataParallel: {' and '.join(map(str, f['measured']['lanes']['dp']))} "
            f"devices, threads of one process{own_lanes(f)}). The forkserver alone holds **{mb(floor['forkserver'])}**, a server that "
            f"has drawn a page {mb(floor['server'])}. Each element of the data set costs a process that holds it "
            f"{min(f['per_element'].values()):.1f} to {max(f['per_element'].values()):.1f} B; each batch of a run forward "
            f"only on {low} lanes adds {batch_range(f, 'forward', low)}, of a training run {batch_range(f, 'train', low)}. "
            f"All {len(runs)} rows are in `dpviz/page/run_costs.json`." + added(f))


def own_lanes(f: dict[str, Any]) -> str:
    """'; Pipeline: 2 and 4 stages': the engines measured at lane counts of their own, beside DataParallel's."""
    own = {name: lanes for name, lanes in f["measured"]["lanes"].items() if name not in ("dp", "ranks")}
    return "".join(f"; {ENGINES[name].label}: {' and '.join(map(str, lanes))} {vocabulary(name).lane_noun}s"
                   for name, lanes in own.items() if name in ENGINES)


def added(f: dict[str, Any]) -> str:
    """When rows were measured after the table (bench_costs.py --add): which, and when, beside the table's own date."""
    if not f.get("added"):
        return ""
    measured = f["measured"]
    later = "; ".join(f"{rows} on {when['utc']} UTC (load average {when['load'][0]:.2f})" for rows, when in f["added"].items())
    return (f" The table was measured on {measured['utc']} UTC (load average {measured['load'][0]:.2f}, "
            f"`.venv/bin/python bench/bench_costs.py`); rows added since by `--add`: {later}.")


def batch_range(f: dict[str, Any], kind: str, lanes: int) -> str:
    """What a batch adds to a run's processes on `lanes` lanes, over the engines: "2.1 to 27.4 KB"."""
    rates = [r[kind]["bytes"]["fixed"] + lanes * r[kind]["bytes"]["per_lane"]
             for r in f["per_batch"].values() if kind in r]  # a pipeline only trains
    return f"{min(rates) / 1e3:.1f} to {max(rates) / 1e3:.1f} KB"


def class_visitors(f: dict[str, Any]) -> str:
    limit = f"a {f['limit_mb']:,} MB cgroup" if f["limit_mb"] else "no memory limit"
    chart = f["first_chart_s"]
    missed = "".join(f"\n- not drawn: {line}" for line in f["not_drawn"])
    return (f"{f['visitors']} visitors at once in {limit}: **{f['drawn']} of {f['visitors']} pages drawn**, "
            f"**{f['oom_kills']} OOM kills**, the cgroup's peak charge {f['peak_charge_mb']:,.0f} MB, at most "
            f"{f['most_ranks_at_once']} rank processes at once; seconds to each page's first chart: p50 "
            f"{chart['p50']:.1f} s, p95 {chart['p95']:.1f} s, max {chart['max']:.1f} s; **{f['left_after']} processes "
            f"left** after every page closed; the server {'alive' if f['server_alive'] else 'dead'}"
            + (f"; the server's processes used {f['server_cpu_s']:.0f} CPU seconds in all, "
               f"{f['server_cpu_s'] / f['run']['cores']:.0f} s of work for each of this machine's {f['run']['cores']} cores"
               if "server_cpu_s" in f else "")
            + f".{missed}")


def pipeline_presets(f: dict[str, Any]) -> str:
    names = {"gpipe": "GPipe", "1f1b": "1F1B"}
    rows = [[f"`{p['preset']}`", names[p["schedule"]], f"{p['stages']}", f"{p['microbatches']}", f"{p['textbook']:.0%}",
             f"**{p['replayed']:.0%}** ({p['replayed_least']:.0%} to {p['replayed_most']:.0%})",
             f"{p['measured']:.0%} ({p['measured_least']:.0%} to {p['measured_most']:.0%})",
             f"{p['first_stage_held']}", f"{p['seconds']:.2f} s"] for p in f["presets"]]
    return table(["preset", "schedule", "stages", "microbatches", "idle, textbook", f"idle, replayed (median of "
                  f"{f['runs']})", "idle, this host's wall clock", "stage 1 kept", "a run"], rows)


RENDER: dict[tuple[str, str], Callable[[dict[str, Any]], str]] = {
    ("bench_pipeline.json", "presets"): pipeline_presets,
    ("bench_page.json", "tutorial"): page_tutorial,
    ("bench_page.json", "large"): page_large,
    ("bench_engine.json", "configs"): engine_configs,
    ("bench_engines.json", "against_bare"): engines_bare,
    ("bench_engines.json", "against_ddp"): engines_ddp,
    ("bench_start.json", "first_chart"): first_chart,
    ("bench_ddp.json", "ranks"): ddp_ranks,
    ("bench_costs.json", "table"): costs,
    ("bench_class.json", "visitors_30_690"): class_visitors,
    ("bench_class.json", "visitors_30_1500"): class_visitors,
    ("bench_class.json", "visitors_30_unlimited"): class_visitors,
    ("bench_suite.json", "fresh_clone"): suite,
    ("bench_suite.json", "busy_clone"): suite,
}


def render(file: str, part: str) -> str:
    """A block's text: its figures from bench/out/`file`'s `part`, then who measured them and when."""
    if (file, part) not in RENDER:
        raise ValueError(f"no block is written for {file} {part}: add it to RENDER")
    path = OUT / file
    if not path.exists():
        raise ValueError(f"bench/out/{file} is missing: run the bench script that writes it")
    data = json.loads(path.read_text())
    if part not in data:
        raise ValueError(f"bench/out/{file} holds no part {part!r}: run its bench with that part")
    figures = {**data[part]["figures"], "run": data[part]["run"]}  # a block may speak of the machine, too
    return f"{RENDER[file, part](figures)}\n\n{measured_by(data[part]['run'])}\n"


def blocks(text: str) -> list[re.Match]:
    return list(BLOCK.finditer(text))


def rewritten(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m["file"], m["part"]) + m.group(5), text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block differs")
    args = parser.parse_args()
    stale = []
    for path in DOCS:
        text = path.read_text()
        new = rewritten(text)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    verb = "differ from their JSON" if args.check else "rewritten"
    print(f"{', '.join(map(str, stale)) or 'no file'} {verb}")
    sys.exit(1 if args.check and stale else 0)


if __name__ == "__main__":
    main()
