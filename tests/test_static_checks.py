"""The project's gates, run by the README's test command: mypy in strict mode on gateway/ and
providers/ (configured in pyproject.toml), and ruff's lint and format checks on everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_mypy_strict_is_clean():
    result = run("mypy", "--no-error-summary")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_lint_is_clean():
    result = run("ruff", "check", "--quiet", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = run("ruff", "format", "--check", "--quiet", ".")
    assert result.returncode == 0, result.stdout + result.stderr
