"""The layout the engine seam keeps: an engine is one folder, the toolkits name no engine, and the imports
run one way.

- analysis/, figures/ and exports/ are engine-neutral toolkits: no module, function or class in them is named
  for an engine;
- nothing outside dpviz/engines/X/ imports dpviz.engines.X, except the registry (an engine may build on
  another engine's package);
- no import cycle, counting every import (at the top of a module or inside a function): the registry imports
  plain declarations only, so dpviz.config (each engine's options and names) and dpviz.trace.model (a trace's
  spec), which look an engine up by name there, stand above it.
Every engine's readers (dpviz/engines/X/read/) import without torch: tests/test_readers.py."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from dpviz.engines import ENGINES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dpviz"
TOOLKITS = ("analysis", "figures", "exports")
REGISTRY = "dpviz.engines"
# Modules below the page that look an engine up by name in the registry: each engine's options, a trace's spec.
LOOK_ENGINES_UP = {"dpviz.config", "dpviz.trace.model"}


def engine_words() -> set[str]:
    """What names an engine: its name, its label and its short name, as one lower-case word each."""
    words = set()
    for spec in ENGINES.values():
        words |= {re.sub(r"[^a-z0-9]", "", text.lower()) for text in (spec.name, spec.label, spec.short)}
    return words


def named_for_an_engine(path: Path, words: set[str]) -> list[str]:
    """The module itself and every function or class in it whose name has an engine's word as one of its parts."""
    def named(name: str) -> bool:
        parts = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()  # FsdpStep -> fsdp_step
        return bool(set(re.split(r"[^a-z0-9]+", parts)) & words)

    found = [f"{path.relative_to(ROOT)}: the module"] if named(path.stem) else []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and named(node.name):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    return found


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    """The dpviz modules `path` imports anywhere in it (a name imported from a package counts as its module when
    it is one), annotations under TYPE_CHECKING aside."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for inner in ast.walk(node)}

    def known_prefix(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("dpviz"):
            found |= {known_prefix(f"{node.module}.{alias.name}") for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {known_prefix(alias.name) for alias in node.names if alias.name.startswith("dpviz")}
    return found - {None, module_of(path)}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    paths = {module_of(path): path for path in root.rglob("*.py")}
    return {module: imports(path, set(paths)) for module, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_or_function_of_a_toolkit_is_named_for_an_engine():
    words = engine_words()
    assert {"dp", "ddp", "zero1", "fsdp", "dataparallel", "distributeddataparallel"} <= words
    files = [path for toolkit in TOOLKITS for path in (PACKAGE / toolkit).glob("*.py")]
    assert len(files) > 25
    assert [place for path in files for place in named_for_an_engine(path, words)] == []


def test_the_name_scan_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "summary_ddp.py"
    sample.write_text("def key_figures_dp(trace): pass\nclass FsdpStep: pass\ndef explain(trace): pass\n"
                      "def dropout(x): pass\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = named_for_an_engine(sample, engine_words())
    finally:
        ROOT = saved
    assert found == ["summary_ddp.py: the module", "summary_ddp.py:1: key_figures_dp", "summary_ddp.py:2: FsdpStep"]


def test_nothing_outside_an_engines_folder_imports_it_but_the_registry():
    graph = import_graph()
    outside = []
    for module, targets in graph.items():
        for target in targets:
            parts = target.split(".")
            if len(parts) < 3 or parts[:2] != ["dpviz", "engines"] or parts[2] not in ENGINES:
                continue
            mine = module.split(".")
            inside_an_engine = mine[:2] == ["dpviz", "engines"] and len(mine) > 2 and mine[2] in ENGINES
            if module != REGISTRY and not inside_an_engine:
                outside.append(f"{module} -> {target}")
    assert outside == []
    # The scan sees the imports it judges: the registry's of every spec, an engine's of another's package.
    assert {f"dpviz.engines.{name}.spec" for name in ENGINES} <= graph[REGISTRY]
    assert "dpviz.engines.ddp.rank" in graph["dpviz.engines.fsdp.rank"]


def test_imports_run_one_way():
    graph = import_graph()
    assert cycles(graph) == []
    # The registry imports plain declarations only: nothing it reaches looks an engine up by name in turn, so the
    # config and the trace, which do, stand above it.
    assert not any(_reaches(graph, REGISTRY, module) for module, targets in graph.items() if REGISTRY in targets)
    assert LOOK_ENGINES_UP <= {module for module, targets in graph.items() if REGISTRY in targets}
    # The cycle finder finds a cycle.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target == goal:
                return True
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return False


def test_options_belong_to_their_engine():
    """RunConfig keeps the settings every engine reads; each engine declares its own in its package, and the
    config holds them as that dataclass; widgets, links and flags follow from the declarations."""
    import dataclasses

    from dpviz.cli import build_parser
    from dpviz.config import ENGINE_OPTIONS, RunConfig
    from dpviz.page.link import from_query, to_query

    common = {f.name for f in dataclasses.fields(RunConfig)} - {"options"}
    assert common and not common & set(ENGINE_OPTIONS)
    assert {"bucket_cap_mb", "reshard_after_forward", "optimizer"} <= set(ENGINE_OPTIONS)
    flags = " ".join(build_parser().format_help().split())
    for name, spec in ENGINES.items():
        # The tutorial's defaults, changed only as the engine's own rules ask (a pipeline cuts no single Linear)
        values = {**RunConfig().to_dict(), "engine": name}
        fitted = spec.part("fit")(values) if spec.has("fit") else {}
        config = RunConfig(**{**values, **fitted})
        if spec.options_type is None:
            assert config.options is None and not spec.options
            continue
        home = spec.options_type.__module__.split(".")
        assert home[:2] == ["dpviz", "engines"] and home[2] in ENGINES and home[3] == "options", spec.options_type
        assert isinstance(config.options, spec.options_type)
        assert [o.name for o in spec.options] == [f.name for f in dataclasses.fields(spec.options_type)]
        for option in spec.options:
            flag = f"--{'no-' if option.kind == 'flag' and option.unset else ''}{option.name.replace('_', '-')}"
            assert (getattr(config, option.name) == option.unset or option.name in fitted) and flag in flags, flag
        assert RunConfig(**config.to_dict()) == config and from_query(to_query(config)) == (config, [])
    fsdp = RunConfig(engine="fsdp", gpus=4, reshard_after_forward=False)
    assert fsdp.options.reshard_after_forward is False and fsdp.bucket_cap_mb is None  # another engine's: unset
    assert dataclasses.replace(fsdp, gpus=2).options == fsdp.options
