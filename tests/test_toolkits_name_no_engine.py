"""The toolkits every engine is read through (analysis, figures, page, exports) name no engine: what differs comes
from each engine's spec and vocabulary, its colours from the one legend of kinds. A string that is an engine's name
("dp", "fsdp") in their code is a branch on a name, which an engine added later would miss."""
import ast
from pathlib import Path

import pytest

from dpviz.engines import ENGINES

ROOT = Path(__file__).resolve().parent.parent / "dpviz"
TOOLKITS = ("analysis", "figures", "page", "exports")


def named_engines(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every string constant in `path` that is an engine's name (docstrings are words, not code)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ENGINES
            and id(node) not in docstrings]


@pytest.mark.parametrize("toolkit", TOOLKITS)
def test_no_engine_is_named_in_a_toolkit(toolkit):
    found = {str(path.relative_to(ROOT)): names for path in sorted((ROOT / toolkit).rglob("*.py"))
             if (names := named_engines(path))}
    assert found == {}


def test_the_check_finds_a_name_where_there_is_one(tmp_path):
    code = tmp_path / "reader.py"
    code.write_text('"""dp in a docstring is words."""\nDP = vocabulary("dp")\nif trace.engine == "fsdp":\n    pass\n')
    assert named_engines(code) == [(2, "dp"), (3, "fsdp")]
