"""`dpviz page`: the page, from wherever dpviz is installed, as `streamlit run app.py` opens it in the checkout.

    dpviz page                                           # http://localhost:8501; links take the same query parameters
    dpviz page --trace run.json                          # a recorded run, as `streamlit run app.py -- --trace run.json`
    dpviz page --server.port 8600 --server.headless true # any of Streamlit's own settings, as `streamlit run` takes them

Streamlit runs dpviz/page/script/app.py, with the page's Streamlit settings beside it. A bad option is one line on
stderr and exit status 2, before any server starts.
"""
from __future__ import annotations

import os
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
                        (`streamlit config show` lists them)
"""


class PageError(Exception):
    """An option `dpviz page` cannot take, said in one sentence."""


def main(argv: Sequence[str], prog: str = "dpviz page") -> int:
    """Serve the page until it is stopped; 2 and one line for a bad option."""
    try:
        trace, settings = parse(argv)
    except PageError as error:
        print(f"{prog}: {_printable(str(error))}", file=sys.stderr)
        return 2
    except _Help:
        print(USAGE.format(prog=prog), end="")
        return 0
    from streamlit.web import cli as streamlit

    page_arguments = ["--", "--trace", trace] if trace else []
    # Click's own main: it ends the process with the server's exit status (0 after Ctrl-C).
    streamlit.main.main(args=["run", str(SCRIPT), *settings, *page_arguments], prog_name="streamlit")
    return 0


class _Help(Exception):
    pass


def parse(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The trace to open (an absolute path, or None) and Streamlit's settings as `streamlit run` takes them."""
    trace, settings, names = None, [], None
    arguments = list(argv)
    while arguments:
        argument = arguments.pop(0)
        if argument in ("-h", "--help"):
            raise _Help
        name, given, value = argument.partition("=")
        if not name.startswith("--"):
            raise PageError(f"it takes options only, got {_cut(argument)!r}; see --help.")
        if not given:
            if not arguments:
                raise PageError(f"{name} needs a value.")
            value = arguments.pop(0)
        if name == "--trace":
            trace = _trace(value)
            continue
        names = names if names is not None else _streamlit_options()
        if name[2:] not in names:
            raise PageError(f"{_cut(name)} is neither --trace nor one of Streamlit's settings (such as --server.port; "
                            "`streamlit config show` lists them).")
        settings += [name, value]
    return trace, settings


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


def _streamlit_options() -> set[str]:
    """The names of Streamlit's settings (server.port, theme.base, ...), which `streamlit run` takes as flags.

    Read from the table Streamlit declares them in, not from get_config_options(): that would parse the settings
    before `streamlit run` does, and Streamlit then warns that the server's settings changed. Where a Streamlit
    lacks the table, every name passes here and `streamlit run` refuses an unknown one itself."""
    from streamlit import config

    declared = getattr(config, "_config_options_template", None)
    return set(declared) if declared else _Everything()


class _Everything(set):
    def __contains__(self, name: object) -> bool:
        return True


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog=os.path.basename(sys.argv[0])))
