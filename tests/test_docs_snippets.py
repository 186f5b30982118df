"""Every snippet of README.md and docs/**/*.md is checked, and every relative link resolves.

A fenced block names its language. `toml` loads as a gateway configuration with the settings
loader (a block marked `<!-- fragment -->` on the line before it is merged into a minimal base; one
marked `<!-- not-gateway-config: ... -->` is another program's file and need only be TOML);
`python` compiles; each `gateway ...` command of a `sh` block parses with the CLI's own argument
parser; `json` parses. The examples that can run are run by their own tests (test_loop_readme,
test_agents_sdk, test_settings, test_stop_reason_table), which read them from the pages; the
one kept as a copy in a test is checked against its page here.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.cli import parse_args
from gateway.settings import parse_settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
CHECKED = {"toml", "python", "sh", "bash", "json"}
UNCHECKED = {"text"}  # program output, diagrams
FRAGMENT = "<!-- fragment -->"
NOT_GATEWAY_CONFIG = "<!-- not-gateway-config:"
OPERATORS = {"|", "||", "&&", "&", ";"}
REDIRECTS = {">", ">>", "<", "2>", "2>&1"}
BASE: dict[str, Any] = {
    "providers": {"mock": {"kind": "mock"}},
    "routes": [{"match": "mock*", "provider": "mock"}],
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str  # the line before the fence

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, lang = opening.group(1), opening.group(2)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        marker = lines[i - 1].strip() if i else ""
        yield Block(page, i + 1, lang, "\n".join(body) + "\n", marker)
        i = end + 1


BLOCKS = [block for page in PAGES for block in blocks(page)]


def of_kind(*langs: str) -> list[Any]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.lang in langs]


def test_every_block_names_a_language_this_test_knows():
    unnamed = [b.id for b in BLOCKS if b.lang not in CHECKED | UNCHECKED]
    assert not unnamed, f"fenced blocks without a known language (```text for output): {unnamed}"


# --- toml -----------------------------------------------------------------------------------------


def merged(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """Tables merged key by key, arrays of tables ([[routes]], [[keys]]) appended."""
    out = dict(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + value
        else:
            out[key] = value
    return out


def with_named_providers(data: dict[str, Any]) -> dict[str, Any]:
    """A fragment's routes may name providers it does not define: they become mock ones."""
    providers = dict(data.get("providers", {}))
    for route in data.get("routes", []):
        for target in [route, *route.get("targets", [])]:
            if "provider" in target:
                providers.setdefault(target["provider"], {"kind": "mock"})
    return {**data, "providers": providers}


def variables(value: Any, key: str = "") -> Iterator[str]:
    """The environment variables a configuration names (`*_env` keys, `headers_env` values)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "headers_env" and isinstance(v, dict):
                yield from v.values()
            else:
                yield from variables(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from variables(item, key)
    elif isinstance(value, str) and key.endswith("_env"):
        yield value


def load_toml_block(block: Block) -> None:
    data = tomllib.loads(block.text)
    if block.marker.startswith(NOT_GATEWAY_CONFIG):
        return
    if block.marker == FRAGMENT:
        data = with_named_providers(merged(BASE, data))
    env = {name: "docs-snippet-value-0123456789abcdef" for name in variables(data)}
    parse_settings(data, block.id, env=env)


@pytest.mark.parametrize("block", of_kind("toml"))
def test_toml_blocks_are_gateway_configurations(block: Block):
    load_toml_block(block)


def test_a_broken_configuration_block_fails():
    broken = Block(ROOT / "README.md", 1, "toml", '[providers.x]\nkind = "nope"\n', FRAGMENT)
    with pytest.raises(Exception, match="providers"):
        load_toml_block(broken)


# --- python, json ---------------------------------------------------------------------------------


@pytest.mark.parametrize("block", of_kind("python"))
def test_python_blocks_compile(block: Block):
    compile(block.text, block.id, "exec")


@pytest.mark.parametrize("block", of_kind("json"))
def test_json_blocks_parse(block: Block):
    orjson.loads(block.text)


def test_the_agent_example_run_by_its_test_is_the_page_s():
    from tests.test_loop_readme import EXAMPLE

    page = ROOT / "docs" / "agent-loop.md"
    assert EXAMPLE in [b.text for b in blocks(page) if b.lang == "python"]


# --- sh -------------------------------------------------------------------------------------------


def commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a shell snippet: words, without the variables set before them or
    redirections, split at pipes, `&&`, `;` and `&`. A quoted string may span lines."""
    pending = ""
    for line in script.replace("\\\n", " ").splitlines():
        pending += line + "\n"
        lexer = shlex.shlex(pending, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # a quotation still open: the next line continues it
            continue
        pending = ""
        command: list[str] = []
        skip_next = False
        for word in [*words, ";"]:
            if skip_next:
                skip_next = False
            elif word in REDIRECTS:
                skip_next = True
            elif word in OPERATORS:
                if command:
                    yield command
                command = []
            elif command or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
                command.append(word)


def gateway_argv(command: list[str]) -> list[str] | None:
    """The gateway's arguments when `command` runs the gateway (directly, with `python -m
    gateway`, or as the image's entry point with `docker run ... llm-gateway ARGS`)."""
    program = Path(command[0]).name
    if program == "gateway":
        return command[1:]
    if program.startswith("python") and command[1:3] == ["-m", "gateway"]:
        return command[3:]
    if command[:2] == ["docker", "run"] and "llm-gateway" in command:
        rest = command[command.index("llm-gateway") + 1 :]
        return rest or None
    return None


def gateway_commands(block: Block) -> list[list[str]]:
    return [argv for c in commands(block.text) if (argv := gateway_argv(c)) is not None]


def parses(argv: list[str]) -> str | None:
    """None when the CLI's parser takes `argv`, else what it said."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse_args(argv)
    except SystemExit as exc:
        return f"exit {exc.code}: {err.getvalue().strip()}"
    return None


@pytest.mark.parametrize("block", of_kind("sh", "bash"))
def test_gateway_commands_in_shell_blocks_parse(block: Block):
    failures = {
        shlex.join(argv): said for argv in gateway_commands(block) if (said := parses(argv))
    }
    assert not failures, failures


def test_the_shell_check_finds_the_commands_and_refuses_a_wrong_one():
    found = [argv for b in BLOCKS if b.lang in ("sh", "bash") for argv in gateway_commands(b)]
    assert ["serve"] in found  # the README's first command, after its `&&`s
    assert ["keys", "hash"] in found  # after a pipe
    assert len(found) >= 15
    assert parses(["serve", "--no-such-flag"]) is not None
    example = "A=1 gateway audit --since 24h > out.txt &\ncurl -d '{\n  \"a\": 1}' x | gateway x\n"
    assert list(commands(example)) == [
        ["gateway", "audit", "--since", "24h"],
        ["curl", "-d", '{\n  "a": 1}', "x"],
        ["gateway", "x"],
    ]


def test_ci_runs_the_readme_test_command_verbatim():
    readme = [b for b in blocks(ROOT / "README.md") if b.lang == "sh"]
    test_command = next(b.text.strip() for b in readme if "pytest" in b.text)
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# --- links ----------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    inside = False
    seen: dict[str, int] = {}
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside and line.startswith("#"):
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
    return {name if n == 0 else f"{name}-{n}" for name, count in seen.items() for n in range(count)}


def links(page: Path) -> Iterator[tuple[int, str]]:
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                yield number, target


def broken_links(page: Path) -> list[str]:
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not file.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{where} (no such heading)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_point_at_files_that_exist(page: Path):
    assert not broken_links(page)


def test_the_link_check_sees_a_broken_link(tmp_path: Path):
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope) `[code](no.md)`\n"
    )
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        found = broken_links(page)
    finally:
        ROOT = root
    assert found == [
        "page.md:1: missing.md (no such file)",
        "page.md:1: there.md#nope (no such heading)",
    ]


def test_every_docs_page_is_linked_from_the_readme_or_the_docs_index():
    linked = {
        (page.parent / target.partition("#")[0]).resolve()
        for page in (ROOT / "README.md", ROOT / "docs" / "README.md")
        for _, target in links(page)
    }
    pages = [p for p in PAGES if p.parent == ROOT / "docs" and p.name != "README.md"]
    assert [p.name for p in pages if p not in linked] == []


def test_the_readme_is_a_quickstart():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250
