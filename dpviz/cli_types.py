"""A setting's flag as argparse reads it: its value checked by the same rules as the page's and a link's, a refusal
the one sentence RunConfig would say (dpviz/cli.py's run flags and dpviz/cli_plan.py's engine options)."""
from __future__ import annotations

import argparse
from typing import Callable

from dpviz.config import ConfigError, parse_setting


def setting(name: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            return parse_setting(name, text)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = name  # argparse names the type in its messages
    return parse
