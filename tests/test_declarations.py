"""How each model says it is split (dpviz.catalogue.ModelSpec, a user's pipeline_layers and tp_plan), held to the
model torch builds: every declared layer a module of it, the layers holding each parameter once, every
tensor-parallel path an nn.Linear and each Linear named once, each declared plan applied with torch's own
parallelize_module on 2 gloo ranks giving one process's output and gradients, and each real size building."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import dpviz
from dpviz.catalogue import MODEL_SPECS, cut_models
from dpviz.engines.pipeline.layers import fitting, problem_of, split
from dpviz.engines.workload import declared
from dpviz.engines.workload.models import build_model, build_real, random_rows
from dpviz.engines.workload.own import OwnModelError
from dpviz.splitting import SHARED, GROUP, expand, matches

ROOT = Path(__file__).resolve().parents[1]
LISTED = [name for name, spec in MODEL_SPECS.items() if spec.listed]
CUT = list(cut_models())
PLANNED = [name for name in LISTED if MODEL_SPECS[name].tensor.styles]
TIMEOUT = 300  # two rank processes importing torch on a shared machine


def built(name: str) -> nn.Module:
    return build_model(name, 5, 2)[0]


# ---- a pipeline's layers

@pytest.mark.parametrize("name", CUT)
def test_each_declared_layer_is_a_module_of_the_built_model_and_the_layers_hold_every_parameter_once(name):
    model = built(name)
    modules = dict(model.named_modules())
    names = expand(MODEL_SPECS[name].pipeline.layers, [path for path in modules if path])
    assert len(names) == MODEL_SPECS[name].pipeline.count  # what a config is judged by, without torch
    for layer in names:
        assert all(part in modules for part in layer.split(GROUP)), layer
    layers = declared.layers(model, name)
    assert [layer for layer, _ in layers] == names
    held = [id(p) for _, module in layers for p in module.parameters()]
    assert sorted(held) == sorted(id(p) for p in model.parameters())  # each once, none left out


@pytest.mark.parametrize("name", CUT)
def test_the_declared_layers_run_one_after_another_compute_the_models_forward(name):
    model = built(name).eval()
    x = random_rows(name, 5, 3, torch.Generator().manual_seed(0))
    y = x
    for _, layer in declared.layers(model, name):
        y = layer(y)
    torch.testing.assert_close(y, model(x))


@pytest.mark.parametrize("name", [n for n in LISTED if n not in CUT])
def test_a_model_that_cannot_be_cut_says_why_in_one_clause(name):
    why = MODEL_SPECS[name].pipeline.why_not
    assert why and not why.endswith(".")
    assert problem_of(name, 2).startswith(f"model {name} {why}, so it cannot be cut")
    with pytest.raises(ValueError, match="cannot be cut into pipeline stages"):
        declared.layers(built(name), name)


def test_the_fitting_model_comes_from_the_declarations():
    counts = {name: MODEL_SPECS[name].pipeline.count for name in CUT}
    for stages in range(2, 12):
        name, layers = fitting(stages)
        fits = [n for n, c in counts.items() if c >= stages]
        assert layers == counts[name] and (counts[name] == min(counts[n] for n in fits) if fits else
                                           counts[name] == max(counts.values()))


# ---- tensor-parallel plans

@pytest.mark.parametrize("name", PLANNED)
def test_each_tensor_parallel_path_is_a_linear_and_every_linear_is_named_once(name):
    model = built(name)
    linears = [path for path, module in model.named_modules() if isinstance(module, nn.Linear)]
    styles = MODEL_SPECS[name].tensor.styles
    for path in linears:
        assert sum(matches(pattern, path) for pattern in styles) == 1, path
    for pattern, style in styles.items():
        hits = [path for path, _ in model.named_modules() if path and matches(pattern, path)]
        assert hits and (style == SHARED or set(hits) <= set(linears)), pattern
    assert declared.tensor_plan(model, name) == styles


@pytest.mark.parametrize("name", [n for n in LISTED if n not in PLANNED])
def test_a_model_with_no_sound_plan_says_why_in_one_clause(name):
    why = MODEL_SPECS[name].tensor.why_not
    assert why and not why.endswith(".")
    with pytest.raises(ValueError, match=f"model {name} .* so it has no tensor-parallel plan"):
        declared.tensor_plan(built(name), name)


def ranks(model: str, world: int = 2) -> list[subprocess.CompletedProcess]:
    """`world` processes of tests/tp_rank.py on MODEL at once, each holding its rank to one process's run."""
    with tempfile.TemporaryDirectory(prefix="dpviz-tp-ranks-") as folder:  # their rendezvous file: no port to race for
        rendezvous = str(Path(folder) / "rendezvous")
        started = [subprocess.Popen([sys.executable, str(ROOT / "tests" / "tp_rank.py"), model, str(rank), str(world),
                                     rendezvous], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for rank in range(world)]
        done = []
        for process in started:
            try:
                out, err = process.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                for other in started:
                    other.kill()
                raise
            done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("name", PLANNED)
def test_torchs_parallelize_module_on_the_declared_plan_computes_what_one_process_does(name, world):
    for rank, result in enumerate(ranks(name, world)):
        assert result.returncode == 0 and result.stdout.strip() == "equal", (rank, result.stdout, result.stderr[-2000:])


# ---- real sizes

@pytest.mark.parametrize("name, size", [(n, s) for n in LISTED for s in MODEL_SPECS[n].sizes])
def test_each_real_size_builds_on_the_meta_device_and_cuts_as_declared(name, size):
    real = MODEL_SPECS[name].sizes[size]
    with torch.device("meta"):
        model, rows = build_real(name, size, 2)
    assert rows.shape == (2, *real.row) and next(model.parameters()).is_meta
    if MODEL_SPECS[name].pipeline.layers:
        layers = declared.layers(model, name)
        assert problem_of(name, len(layers), len(layers)) is None and problem_of(name, len(layers) + 1, len(layers))


# ---- a module of one's own

class Tower(nn.Module):
    """No nn.Sequential: an embedding, two blocks and a head, declared as a pipeline's layers and a TP plan."""

    pipeline_layers = ["embed", "blocks.*", "head"]
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise", "head": "whole"}

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 16)
        self.blocks = nn.ModuleList(Up() for _ in range(2))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def test_a_module_of_ones_own_is_cut_as_its_pipeline_layers_say():
    torch.manual_seed(0)
    model = Tower()
    assert [name for name, _ in declared.layers(model, None)] == ["embed", "blocks.0", "blocks.1", "head"]
    trace = dpviz.record(model, torch.randn(8, 6), engine="pipeline", gpus=3, train=True, microbatches=4)
    names = ["embed", "blocks.0", "blocks.1", "head"]
    assert trace.failure is None and trace.facts["layers"] == [[names[i] for i in cut] for cut in split(4, 3)]


def test_an_nn_sequential_is_still_cut_by_its_children_and_other_modules_are_told_what_to_declare():
    assert [name for name, _ in declared.layers(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), None)] == ["0", "1"]
    with pytest.raises(ValueError, match="list their names in a pipeline_layers attribute"):
        declared.layers(nn.Linear(2, 2), None)
    with pytest.raises(ValueError, match="declares no tp_plan .* no plan is sound without one"):
        declared.tensor_plan(nn.Sequential(nn.Linear(2, 2)), None)


class Declaring(Tower):
    def __init__(self, layers=None, plan=None):
        super().__init__()
        if layers is not None:
            self.pipeline_layers = layers
        if plan is not None:
            self.tp_plan = plan


@pytest.mark.parametrize("layers, plan, words", [
    (["embed", "blocks.*", "tail"], None, "pipeline_layers names 'tail', which is no module of your Declaring"),
    (["embed", "layers.*", "head"], None, "pipeline_layers names 'layers.*', which matches no module of your Declaring"),
    (["embed", "blocks.0", "head"], None, "pipeline_layers leaves out blocks.1.up.weight and 3 more"),
    (["embed", "blocks", "blocks.0", "head"], None, "puts blocks.0.up.weight in both 'blocks' and 'blocks.0'"),
    ("embed", None, "pipeline_layers must be a non-empty list of your model's module names, got 'embed'"),
    (None, {"blocks.*": "colwise"}, "tp_plan names 'blocks.0', a Up, not an nn.Linear"),
    (None, {"blocks.*.up": "sideways"}, "tp_plan gives 'blocks.*.up' 'sideways'"),
    (None, {"blocks.*.side": "colwise"}, "tp_plan names 'blocks.*.side', which matches no module"),
])
def test_a_bad_declaration_is_refused_in_one_sentence_whatever_the_engine(layers, plan, words):
    for engine in ("dp", "pipeline"):
        with pytest.raises(OwnModelError) as error:
            dpviz.record(Declaring(layers, plan), torch.randn(8, 6), engine=engine, gpus=2, train=True)
        message = str(error.value)
        assert words in message and message.endswith(".") and "\n" not in message, message


OWN_TP = '''
import torch
from torch import nn

class Tower(nn.Module):
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise", "head": "whole", "embed": "whole"}

    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Linear(6, 16), nn.Linear(16, 3)
        self.blocks = nn.ModuleList(nn.ModuleDict({"up": nn.Linear(16, 32), "down": nn.Linear(32, 16)}) for _ in range(2))

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = x + block["down"](torch.relu(block["up"](x)))
        return self.head(x)

def build():
    return Tower()

def rows():
    return torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
'''


def test_a_module_of_ones_own_with_a_tp_plan_computes_under_torchs_parallelize_module_what_one_process_does(tmp_path):
    path = tmp_path / "tower.py"
    path.write_text(textwrap.dedent(OWN_TP))
    for rank, result in enumerate(ranks(f"{path}:build")):
        assert result.returncode == 0 and result.stdout.strip() == "equal", (rank, result.stdout, result.stderr[-2000:])


# ---- no engine names a model

def test_no_engine_page_or_analysis_names_a_catalogue_model():
    """What an engine must know of a model is in its declaration: no string in the engines (but the folder that
    builds the models), the page or the analysis is a model's name ("linear" and "loss" are also a plot's tick mode
    and a phase, so they are told apart by what they are compared with)."""
    import ast

    names = set(MODEL_SPECS) - {"own"}
    found = []
    for folder in ("engines", "page", "analysis"):
        for path in sorted((ROOT / "dpviz" / folder).rglob("*.py")):
            if "workload" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Compare):
                    said = ast.unparse(node)
                    if "model" in said and any(isinstance(c, ast.Constant) and c.value in names
                                               for c in [node.left, *node.comparators]):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {said}")
                elif isinstance(node, ast.Constant) and node.value in names - {"linear", "loss"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []
