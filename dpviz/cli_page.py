"""`dpviz page`: the page, from wherever dpviz is installed, as `streamlit run app.py` opens it in the checkout.

    dpviz page                                           # http://localhost:8501; links take the same query parameters
    dpviz page --trace run.json                          # a recorded run, as `streamlit run app.py -- --trace run.json`
    dpviz page --server.port 8600 --server.headless true # any of Streamlit's own settings, as `streamlit run` takes them

Streamlit runs dpviz/page/script/app.py, with the page's Streamlit settings beside it. A bad option or value is one
line on stderr and exit status 2, before any server starts.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

SCRIPT = Path(__file__).resolve().parent / "page" / "script" / "app.py"

USAGE = """usage: {prog} [--trace FILE] [--SECTION.OPTION VALUE ...]

Open dpviz's page (Streamlit serves it, by default at http://localhost:8501).

options:
  -h, --help            show this message and exit
  --trace FILE          open a trace written by `dpviz --trace FILE` (any engine) instead of a live run
  --SECTION.OPTION VALUE
                        any of Streamlit's own settings, as `streamlit run` takes them: --server.port 8600,
                        --server.address 0.0.0.0, --server.headless true (no browser opened), ...
                        (`streamlit run --help` lists them); they win over every config.toml
"""


class PageError(Exception):
    """An option `dpviz page` cannot take, said in one sentence."""


def main(argv: Sequence[str], prog: str = "dpviz page") -> int:
    """Serve the page until it is stopped; 2 and one line for a bad option or value."""
    if any(argument in ("-h", "--help") for argument in argv):
        print(USAGE.format(prog=prog), end="")
        return 0
    import click
    from streamlit.web import cli as streamlit

    try:
        trace, settings = parse(argv, streamlit_options(streamlit.main_run))
        page_arguments = ["--", "--trace", trace] if trace else []
        # Not standalone: Click would print a usage block for a bad value; here it is one line like every other.
        streamlit.main.main(args=["run", str(SCRIPT), *settings, *page_arguments], prog_name="streamlit",
                            standalone_mode=False)
    except PageError as error:
        return _refused(prog, str(error))
    except click.ClickException as error:  # a value Streamlit refuses: --server.port abc
        return _refused(prog, error.format_message())
    except click.exceptions.Abort:
        return 130
    return 0


def _refused(prog: str, message: str) -> int:
    line = " ".join(message.split())
    print(f"{prog}: {''.join(c if c.isprintable() else repr(c)[1:-1] for c in line)}", file=sys.stderr)
    return 2


def parse(argv: Sequence[str], names: set[str]) -> tuple[str | None, list[str]]:
    """The trace to open (an absolute path, or None) and Streamlit's settings as `streamlit run` takes them;
    `names` are the settings' flags (--server.port, ...)."""
    trace, settings = None, []
    arguments = [argument for argument in argv if argument != "--"]  # `-- --trace x`, as the checkout's command has it
    while arguments:
        argument = arguments.pop(0)
        name, given, value = argument.partition("=")
        if not name.startswith("--"):
            raise PageError(f"it takes options only, got {_cut(argument)!r}; see --help.")
        if not given:
            if not arguments:
                raise PageError(f"{name} needs a value.")
            value = arguments.pop(0)
        if name == "--trace":
            trace = _trace(value)
        elif name in names:
            settings += [name, value]
        else:
            raise PageError(f"{_cut(name)} is neither --trace nor one of Streamlit's settings (such as --server.port; "
                            "`streamlit run --help` lists them).")
    return trace, settings


def streamlit_options(run_command) -> set[str]:
    """The flags `streamlit run` takes for Streamlit's settings (--server.port, --theme.base, ...)."""
    return {flag for param in run_command.params for flag in getattr(param, "opts", ()) if "." in flag}


def _trace(value: str) -> str:
    path = Path(value).expanduser()
    try:
        if not path.is_file():
            raise PageError(f"--trace: no file {_cut(value)!r} (write one with `dpviz --trace FILE`).")
        with path.open("rb"):  # readable now; whether it is a trace the page says, as it does for any upload
            pass
    except OSError as error:
        raise PageError(f"--trace: cannot read {_cut(value)!r}: {(error.strerror or str(error)).lower()}.") from None
    except ValueError:  # a NUL byte, which no file name may hold
        raise PageError("--trace: a file name cannot hold a NUL byte.") from None
    return str(path.resolve())


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
