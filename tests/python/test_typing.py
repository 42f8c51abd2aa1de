"""The shipped type stubs (generated at build time, with py.typed): `mypy --strict` accepts an
example that uses the whole public API and reports every planted mistake, and nothing else."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import stridex

pytest.importorskip("mypy", reason="mypy not installed (tests/run_all.sh installs it)")

HERE = Path(__file__).resolve().parent.parent / "typing"
PACKAGE_ROOT = Path(stridex.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mypy_errors() -> tuple[dict[str, set[tuple[int, str]]], str]:
    """One strict mypy run over both files (numpy's stubs make each run take seconds): file -> errors."""
    env = dict(os.environ)
    if PACKAGE_ROOT.name != "site-packages":  # a staged build (tools/dev-python): tell mypy where
        env["MYPYPATH"] = str(PACKAGE_ROOT)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--show-error-codes",
            "--no-error-summary",
            "public_api.py",
            "newcomer.py",
            "mistakes.py",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    errors: dict[str, set[tuple[int, str]]] = {}
    for m in re.finditer(r"^(.*?):(\d+): error: .*\[([\w-]+)\]$", result.stdout, re.M):
        errors.setdefault(Path(m.group(1)).name, set()).add((int(m.group(2)), m.group(3)))
    return errors, result.stdout


def test_stubs_ship_with_the_package():
    assert (PACKAGE_ROOT / "stridex" / "py.typed").is_file()
    stub = (PACKAGE_ROOT / "stridex" / "_stridex.pyi").read_text()
    assert "def view(obj: object, /, *, stream: object = None, dtype: stridex.typing.DtypeLike | None" in stub
    assert "def __iter__(self) -> Iterator[View]:" in stub
    assert "def memory_stats(device: stridex.typing.DeviceLike | int = 0) -> stridex.typing.MemoryStats:" in stub
    # help() and the stubs name public types only: no private alias a user cannot import.
    assert not re.search(r"\b_(DtypeLike|DeviceLike|T|HasDtype)\b", stub)
    assert "def shape(self) -> tuple[int, ...]:" in stub


def test_public_api_example_type_checks_and_runs(mypy_errors):
    errors, output = mypy_errors
    assert [name for name in errors if name != "mistakes.py"] == [], output  # stubs and example clean
    for example in ("public_api.py", "newcomer.py"):
        run = subprocess.run([sys.executable, str(HERE / example)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


def test_planted_mistakes_are_reported(mypy_errors):
    source = HERE / "mistakes.py"
    expected = {
        (n, m.group(1))
        for n, line in enumerate(source.read_text().splitlines(), 1)
        if (m := re.search(r"# E: ([\w-]+)$", line))
    }
    assert len(expected) >= 10
    errors, output = mypy_errors
    assert errors.get("mistakes.py") == expected, output
