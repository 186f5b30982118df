"""`gateway keys hash` and `gateway keys new`: the lines a `[[keys]]` table needs.

    $ gateway keys new
    gw-3q2...                    # give this to the client; it is printed once, kept nowhere
    sha256 = "9f86d08..."        # paste this into the key's [[keys]] table
    $ printf %s "$KEY" | gateway keys hash
    sha256 = "9f86d08..."

`hash` reads the key from standard input (a terminal is asked without echo); surrounding
whitespace, such as the newline of `echo`, is not part of the key.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, TextIO


def add_keys_parser(subparsers: Any) -> argparse.ArgumentParser:
    keys: argparse.ArgumentParser = subparsers.add_parser(
        "keys",
        help="make gateway keys and the sha256 lines of [[keys]] tables",
        description="Gateway keys are configured by their SHA-256 only ([[keys]] sha256).",
    )
    actions = keys.add_subparsers(dest="keys_command", required=True)
    actions.add_parser(
        "hash", help="read a key on standard input, print its sha256 line for a [[keys]] table"
    )
    actions.add_parser("new", help="print a new random gw-... key, then its sha256 line")
    return keys


def sha256_line(key: str) -> str:
    from gateway.settings import hash_key  # not for `gateway --help`: the settings are heavy

    return f'sha256 = "{hash_key(key)}"'


def main_keys(
    args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if args.keys_command == "new":
        from gateway.access.keys import new_key

        key = new_key()
        print(key, file=stdout)
        print(sha256_line(key), file=stdout)
        return 0
    key = getpass.getpass("key: ") if stdin.isatty() else stdin.read()
    if not key.strip():
        print("gateway keys hash: no key on standard input", file=sys.stderr)
        return 2
    print(sha256_line(key), file=stdout)
    return 0
