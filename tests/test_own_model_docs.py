"""The README's and docs/library.md's examples of recording your own model run as written."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300  # one interpreter importing torch and running one small batch


def block(path: str, marker: str) -> str:
    """The python code block of `path` that holds `marker`."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / path).read_text(), re.S)
    (found,) = [b for b in blocks if marker in b]
    return found


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_readmes_own_model_example_prints_what_its_comment_says():
    assert run(block("README.md", "dpviz.record(Scorer()")).split() == ["Scorer", "[(0,", "4),", "(1,", "4),", "(2,", "2)]"]


def test_the_library_docs_example_prints_what_its_comments_say():
    lines = run(block("docs/library.md", "TransformerEncoderLayer")).splitlines()
    assert lines[0].startswith("{'class': 'TransformerEncoderLayer', 'parameters': 2224, 'trainable': 2224")
    assert lines[1] == "[3, 3, 2]"


def test_the_library_docs_declaring_example_is_cut_as_its_comment_says():
    assert run(block("docs/library.md", "pipeline_layers = [")).splitlines() == ["[['embed', 'blocks.0'], ['blocks.1', 'head']]"]
