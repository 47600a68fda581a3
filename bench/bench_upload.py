"""What an upload costs the page's one server process: peak memory and time to load it and draw every view.

    .venv/bin/python bench/bench_upload.py              # every case
    .venv/bin/python bench/bench_upload.py largest      # only the cases whose name contains "largest"

The hosted page is one Python process serving every visitor in a 690 MB budget, of which the server
itself takes about 390 MB: an upload may cost about 300 MB at its peak. Each case below is a file
within the 64 MiB upload limit, written under bench/out/ (git-ignored). Each is measured in a fresh
process that first imports dpviz and every view (as the server has) and reads the file (as Streamlit
holds an upload) after drawing a small trace once (as the server has), then resets the kernel's peak-RSS mark (/proc/self/clear_refs), so what it reports
is the peak resident memory of trace_json.loads and, when the file is accepted, of drawing everything
the page, the report and the downloads draw (bench/fuzz_uploads.py: draw_everything, the flows of the
first, last and failed batch and the first and last timeline windows, without a test's extra checks),
over that baseline.

The largest real trace is recorded once (10,000 batches on 16 simulated devices: a minute or two) and
kept in bench/out/largest.json. Prints a markdown table.
"""
from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
LARGEST = OUT / "largest.json"
FILL = 63 * 2**20  # each hostile file fills the upload limit but for a margin
sys.path.insert(0, str(ROOT))  # run from anywhere without installing


def largest_trace() -> bytes:
    """The largest trace the limits allow, recorded once: 10,000 batches of 100 rows on 16 devices."""
    if not LARGEST.exists():
        from dpviz import RunConfig, record
        from dpviz.trace import json_io as trace_json

        print("recording the largest trace (a minute or two) ...", file=sys.stderr, flush=True)
        trace = record(RunConfig(data_size=1_000_000, batch_size=100, gpus=16, input_size=16, backend="simulated"))
        OUT.mkdir(parents=True, exist_ok=True)
        LARGEST.write_text(trace_json.dumps(trace))
    return LARGEST.read_bytes()


def small_trace() -> dict:
    """The tutorial's run as plain JSON values, to pad or corrupt."""
    from dpviz import RunConfig, record
    from dpviz.trace import json_io as trace_json

    return json.loads(trace_json.dumps(record(RunConfig(backend="simulated"))))


def _filled(unit: bytes, head: bytes = b"[", tail: bytes = b"]") -> bytes:
    """head, `unit` repeated to FILL bytes (its trailing comma dropped), tail."""
    body = unit * (FILL // len(unit))
    return head + body[:-1] + tail if body.endswith(b",") else head + body + tail


def _padded(edit) -> bytes:
    data = small_trace()
    edit(data)
    return json.dumps(data).encode()


def _largest_with_emoji() -> bytes:
    """The largest trace with one 4-byte character, raw: decoded whole, Python would hold its text at 4
    bytes a character."""
    return largest_trace().replace(b'"torch_version":"', '"torch_version":"\U0001F600 '.encode(), 1)


CASES = {
    "largest real trace (10,000 batches, 16 GPUs)": largest_trace,
    "largest real trace with one raw emoji": _largest_with_emoji,
    "63 MB of nested empty lists [[],[],...]": lambda: _filled(b"[],"),
    '63 MB of {"a":[[],[],...]}': lambda: _filled(b"[],", b'{"a":[', b"]}"),
    "63 MB of [0,0,0,...]": lambda: _filled(b"0,"),
    "20 MB of 5,000,000 floats (within the counts)": lambda: b"[" + b"0.5," * 4_999_999 + b"0.5]",
    "63 MB lane name": lambda: _padded(lambda d: d["lanes"][0].update(name="x" * FILL)),
    "deep nesting, 63 MB of [": lambda: b"[" * FILL,
    "deep nesting, 900,000 levels": lambda: b"[" * 900_000 + b"]" * 900_000,
    "2,500,000 thread names": lambda: _padded(lambda d: d["threads"].extend(f"Thread-{i} (worker)" for i in range(2_500_000))),
    "300 warnings of 200,000 characters": lambda: _padded(lambda d: d["warnings"].extend(
        {"category": "UserWarning", "message": "w" * 200_000, "batch": 0, "count": 1} for _ in range(300))),
    "16 warnings of 20,000 characters (accepted)": lambda: _padded(lambda d: d["warnings"].extend(
        {"category": "UserWarning", "message": f"{i} " + "w" * 19_990, "batch": 0, "count": 1} for i in range(16))),
    "63 MB of non-ASCII text in a failure message": lambda: _padded(lambda d: d.update(
        failure={"batch": 3, "type": "RuntimeError", "message": "\u00e9\u4e2d\U0001F600" * (FILL // 9), "replica": 0})
    ).replace(b"\\u00e9\\u4e2d\\ud83d\\ude00", "\u00e9\u4e2d\U0001F600".encode()),
}


def _status(key: str) -> float:
    """A /proc/self/status figure in MB."""
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(path: str) -> None:
    """Measure one file in this fresh process; print the result as JSON."""
    from dpviz import TraceError
    from dpviz.trace import json_io as trace_json
    from fuzz_uploads import draw_everything  # imports every view

    # A server has drawn a trace before: first calls' one-off costs (torch's, plotly's) are not the upload's.
    draw_everything(trace_json.loads(json.dumps(small_trace())))
    data = Path(path).read_bytes()
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak-RSS mark starts again from here
    base = _status("VmRSS")
    result = {"base_mb": base, "base_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    start = time.perf_counter()
    try:
        trace = trace_json.loads(data)
        result["outcome"] = "accepted"
    except TraceError as error:
        trace, result["outcome"] = None, f"rejected: {error}"
    result["load_s"] = time.perf_counter() - start
    result["load_peak_mb"] = _status("VmHWM") - base
    if trace is not None:
        start = time.perf_counter()
        draw_everything(trace, every=False, verify=False)  # what a server does, not a test's checks too
        result["draw_s"] = time.perf_counter() - start
    result["peak_mb"] = _status("VmHWM") - base
    result["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(name: str, make) -> dict:
    """Write case `name`'s file and measure it in a fresh process."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "upload-case.json"
    data = make()
    path.write_bytes(data)
    size = len(data) / 2**20
    del data
    gc.collect()
    run = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True)
    path.unlink()
    if run.returncode:
        raise SystemExit(f"{name}: the measuring process failed:\n{run.stderr[-3000:]}")
    return {"size_mb": size, **json.loads(run.stdout.strip().splitlines()[-1])}


def main() -> None:
    wanted = sys.argv[1:]
    print("| case | file MB | outcome | load s | draw s | load peak MB | load+draw peak MB | absolute peak MB |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, make in CASES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        result = measure(name, make)
        draw = f"{result['draw_s']:.1f}" if "draw_s" in result else "-"
        outcome = result["outcome"].replace("|", "\\|")
        print(f"| {name} | {result['size_mb']:.1f} | {outcome} | {result['load_s']:.2f} | {draw} | {result['load_peak_mb']:.0f} "
              f"| {result['peak_mb']:.0f} | {result['base_mb'] + result['peak_mb']:.0f} |", flush=True)
    print("\nPeaks are resident memory over the process's baseline (dpviz and every view imported, the file read); "
          "absolute is the baseline plus that peak.")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        main()
