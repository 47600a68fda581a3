"""A command's `--json FILE`: its findings written as JSON, or one line and exit status 2 when the file cannot be
written (dpviz/cli_plan.py's plan, dpviz/cli_compare.py's comparison)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def write_json(parser: argparse.ArgumentParser, path: Path | None, found: dict) -> None:
    """`found` as JSON in `path` (nothing when None); a path that takes no file ends the command in one line."""
    if path is None:
        return
    try:
        path.write_text(json.dumps(found, indent=1))
    except OSError as error:
        parser.exit(2, f"{parser.prog}: cannot write {str(path)[:80]!r}: {error.strerror}.\n")
