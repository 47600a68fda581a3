"""dpviz as an installed package: the wheel `pip install .` builds, and the `dpviz` command and the library used from
a folder of the user's own, with nothing of the checkout on PYTHONPATH.

requirements.txt installs the checkout itself (`-e .`), so this environment's `dpviz` command and `import dpviz` from
another folder are the installed ones. CI also installs the built wheel into a fresh environment and runs
tests/installed_smoke.py there.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DistributedSampler

import dpviz
from dpviz.trace import json_io as trace_json

from budget import limit
from installed_smoke import OWN  # the model of a user's own that CI's smoke test runs too

ROOT = Path(__file__).resolve().parents[1]
COMMAND = Path(sys.executable).parent / "dpviz"

# A user's model file with no `if __name__ == "__main__":` guard: each rank imports it again, top-level code and all.
UNGUARDED = OWN + 'print("own.py imported")\n'

# The same model in a package of the user's, named as package.module:FUNCTION, in a module that has a main guard.
GUARDED = OWN + 'if __name__ == "__main__":\n    raise SystemExit("not run")\n'


def user_env() -> dict[str, str]:
    """The environment of a user's shell: nothing of the checkout on PYTHONPATH, one thread per process (2 cores)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return {**env, "OMP_NUM_THREADS": "1"}


def run(*command: str | Path, cwd: Path, starts: float = 1, then_s: float = 0) -> subprocess.CompletedProcess:
    if not COMMAND.exists():
        pytest.fail(f"no dpviz command at {COMMAND}: `pip install -r requirements.txt` installs the checkout itself")
    return subprocess.run([str(c) for c in command], cwd=cwd, env=user_env(), capture_output=True, text=True,
                          timeout=limit(starts=starts, then_s=then_s))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel .` builds from the files git tracks or would (what a git URL gives), away from the checkout."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: setuptools is already in this environment, and the test then needs no package index.
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(out), str(source)], capture_output=True, text=True, timeout=limit(starts=2, then_s=60))
    assert done.returncode == 0, done.stderr[-2000:]
    (built,) = out.glob("dpviz-*.whl")
    return built


def test_the_wheel_holds_every_module_and_every_file_the_package_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "dpviz"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
    package = {name for name in tracked.stdout.split() if "__pycache__" not in name}
    assert package - names == set(), "files of the package left out of the wheel"
    assert {"dpviz/py.typed", "dpviz/page/run_costs.json", "dpviz/page/script/app.py",
            "dpviz/page/script/.streamlit/config.toml"} <= names
    assert not {name for name in names if name.startswith(("tests/", "bench/", "docs/"))}


def test_the_wheel_declares_its_version_dependencies_and_command(wheel):
    archive = zipfile.ZipFile(wheel)
    info = next(name.split("/")[0] for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    assert metadata["Name"] == "dpviz" and metadata["Version"] == dpviz.__version__
    requires = {line.split(";")[0].replace(" ", "") for line in metadata.get_all("Requires-Dist")}
    pinned = (ROOT / "requirements.txt").read_text().split()
    torch_pin = next(word for word in pinned if word.startswith("torch=="))
    floor = next(word for word in requires if word.startswith("torch"))
    # A floor, not the pin: the user's own build of torch (CPU or CUDA) stays; the floor is the version pinned for tests.
    assert floor == "torch>=" + ".".join(torch_pin.removeprefix("torch==").split(".")[:2])
    assert any(word.startswith("streamlit") for word in requires) and any(word.startswith("plotly") for word in requires)
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "dpviz = dpviz.command:main" in entry_points


def test_the_installed_page_has_the_checkouts_streamlit_settings():
    # Two copies, because Streamlit reads a script's settings from beside the script: app.py's for the checkout (and a
    # host that runs it), the package's for `dpviz page`. They must not drift apart.
    assert (ROOT / "dpviz/page/script/.streamlit/config.toml").read_bytes() == (ROOT / ".streamlit/config.toml").read_bytes()
    # The script sits alone in its folder, which Streamlit puts first on sys.path.
    assert sorted(p.name for p in (ROOT / "dpviz/page/script").iterdir() if p.name != "__pycache__") == [".streamlit", "app.py"]


def test_dpviz_is_the_same_command_as_python_m_dpviz(tmp_path):
    installed = run(COMMAND, "--help", cwd=tmp_path)
    module = subprocess.run([sys.executable, "-m", "dpviz", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=limit(starts=1))
    assert installed.returncode == module.returncode == 0, installed.stderr
    # words alike: argparse wraps each at its own width, "python -m" and "dpviz" may fall on two lines
    assert " ".join(installed.stdout.split()) == " ".join(module.stdout.split()).replace("python -m dpviz", "dpviz")
    for flag in ("--engine", "--gpus", "--bucket-cap-mb", "--microbatches", "--schedule", "--preset", "--model"):
        assert flag in installed.stdout
    assert "dpviz plan" in installed.stdout and "dpviz page" in installed.stdout
    version = run(COMMAND, "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"dpviz {dpviz.__version__}"
    bad = run(COMMAND, "--gpus", "many", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (2, "dpviz: argument --gpus: gpus must be a whole number between 1 and 16, got 'many'.\n")


def test_dpviz_plan_from_any_folder(tmp_path):
    done = run(COMMAND, "plan", "--model", "transformer", "--gpus", "4", "--optimizer", "adam", "--json", "plan.json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads((tmp_path / "plan.json").read_text())
    assert found == json.loads(json.dumps(dpviz.plan("transformer", gpus=4, optimizer="adam")))
    assert found["engines"]["ddp"]["devices"] and "DistributedDataParallel" in done.stdout
    bad = run(COMMAND, "plan", "--model", "transformer", "--gpus", "0", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("dpviz plan: ") and bad.stderr.count("\n") == 1


def test_the_library_from_any_folder(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        import dpviz
        from dpviz.config import RunConfig

        trace = dpviz.record(RunConfig(batch_size=30, data_size=100, gpus=3))
        plan = dpviz.plan("mlp", gpus=2)
        print(json.dumps({"where": dpviz.__file__, "rows": [[s.rows for s in trace.replicas(b.index)] for b in trace.batches],
                          "engines": sorted(plan["engines"])}))
    """))
    done = run(sys.executable, script, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["where"]).resolve() == Path(dpviz.__file__).resolve()  # the installed package, found without help
    batches = [30, 30, 30, 10]
    assert found["rows"] == [[len(c) for c in torch.arange(n).chunk(3)] for n in batches]  # torch's own split
    assert found["engines"] == sorted(dpviz.plan("mlp", gpus=2)["engines"])


def ranks_rows(trace) -> list[list[int]]:
    """Rows each rank ran in each step, as the trace recorded them."""
    return [[span.rows for span in trace.replicas(batch.index)] for batch in trace.batches]


@pytest.mark.parametrize("layout", ["file without a main guard", "package module with a main guard"])
def test_a_users_model_runs_under_ddp_from_the_users_folder(tmp_path, layout):
    if layout.startswith("file"):
        (tmp_path / "own.py").write_text(UNGUARDED)
        model, example = "own.py:build", "own.py:batch"
    else:
        (tmp_path / "models").mkdir()
        (tmp_path / "models" / "__init__.py").write_text("")
        (tmp_path / "models" / "net.py").write_text(GUARDED)
        model, example = "models.net:build", "models.net:batch"
    done = run(COMMAND, "--engine", "ddp", "--gpus", "2", "--train", "--data-size", "24", "--model", model,
               "--example", example, "--trace", "run.json", cwd=tmp_path, starts=4, then_s=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    trace = trace_json.loads((tmp_path / "run.json").read_text())
    assert trace.engine == "ddp" and trace.facts["model"]["class"] == "Net"
    reference = nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3))
    assert trace.facts["model"]["parameters"] == sum(p.numel() for p in reference.parameters())
    # Each rank's rows per step: torch's DistributedSampler over the 24 rows, 12 a step.
    per_rank = [len(list(DistributedSampler(range(24), num_replicas=2, rank=r, shuffle=False))) for r in range(2)]
    assert [sum(step[r] for step in ranks_rows(trace)) for r in range(2)] == per_rank


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_torchrun_runs_the_installed_dpviz_on_a_users_model_from_the_users_folder(tmp_path):
    (tmp_path / "own.py").write_text(UNGUARDED)
    done = run(sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "dpviz", "--engine", "ddp",
               "--train", "--model", "own.py:build", "--example", "own.py:batch", "--trace", "run.json",
               cwd=tmp_path, starts=4, then_s=60)
    assert done.returncode == 0, done.stderr[-2000:]
    trace = trace_json.loads((tmp_path / "run.json").read_text())
    assert trace.engine == "ddp" and len(trace.lanes) == 2 and trace.facts["model"]["class"] == "Net"


@pytest.mark.parametrize("arguments, said", [
    (["--port", "8600"], "dpviz page: --port is neither --trace nor one of Streamlit's settings"),
    (["--trace", "missing.json"], "dpviz page: --trace: no file 'missing.json'"),
    (["--trace"], "dpviz page: --trace needs a value."),
    (["run.json"], "dpviz page: it takes options only, got 'run.json'"),
    (["--", "--trace", "missing.json"], "dpviz page: --trace: no file 'missing.json'"),  # the checkout's form
    (["--server.port", "many"], "dpviz page: Invalid value for '--server.port'"),  # a value Streamlit refuses
])
def test_dpviz_page_refuses_a_bad_option_in_one_line_before_serving(tmp_path, arguments, said):
    done = run(COMMAND, "page", *arguments, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


def test_the_library_docs_install_example_runs_from_another_folder(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs/library.md").read_text(), re.S)
    (example,) = [b for b in blocks if 'dpviz.plan("transformer", size="7b"' in b]
    done = run(sys.executable, "-c", example + "\nprint(trace.config.gpus, plan['gpus'])", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "8"]
