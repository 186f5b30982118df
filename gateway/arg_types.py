"""argparse value types the command line's subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least_one(noun: str) -> Callable[[str], int]:
    """An int of 1 or more; `noun` names what the text should have been ("a whole number")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
        return value

    return parse
