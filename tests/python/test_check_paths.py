"""tools/check_paths.py, the test command's check that every repository path the docs, comments and
configuration name exists: run on a small repository planted with stale and live paths of every
form it reads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "check_paths.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

FILES = {
    "src/x.cpp": "// built with src/x.hpp (missing) and src/y.cpp\n"
    'const char* s = "src/in_a_string.cpp";  // not a comment: not read\n'
    "/* a block comment naming tests/gone_test.py\n   over two lines: docs/b.md */\n",
    "src/y.cpp": "// 1'000 is a digit separator, not a character literal: src/after_separator.cpp\n",
    "python/pkg/mod.py": '"""A docstring naming bench/doc_gone.py and docs/a.md."""\n'
    "import os  # a comment naming python/pkg/comment_gone.py\n"
    'PATH = "src/in_code.cpp"  # a string in code: not read\n',
    "CMakeLists.txt": '# cmake/Gone.cmake and cmake/Here.cmake\nset(X "# src/quoted.cpp")\n',
    "cmake/Here.cmake": "",
    "docs/a.md": "See `src/x.cpp`, `src/{x,y}.cpp`, `src/{x,z}.cpp`, `src/*.cpp` and `tests/none_*.py`.\n"
    "A URL is not a path: https://example.com/src/url_gone.cpp. Nor is nb_internals.h (nanobind's).\n"
    "Bare names: y.cpp, nothere.hpp; relative ones: pkg/mod.py, pkg/moved.py; folders: src/, tools/.\n"
    "A build output git ignores: `bench/build/`.\n",
    "docs/b.md": "",
    "docs/runs/log.txt": "logs of other machines are not read: src/old.cpp\n",
    "bench/.gitignore": "build/\n",
    "pyproject.toml": '[tool.x]\npaths = ["python/pkg", "docs/wheels.md"]\n',
}

STALE = [
    "CMakeLists.txt:1: cmake/Gone.cmake",
    "docs/a.md:1: src/{x,z}.cpp",
    "docs/a.md:1: tests/none_*.py",
    "docs/a.md:3: nothere.hpp",
    "docs/a.md:3: pkg/moved.py",
    "docs/a.md:3: tools/",
    "pyproject.toml:2: docs/wheels.md",
    "python/pkg/mod.py:1: bench/doc_gone.py",
    "python/pkg/mod.py:2: python/pkg/comment_gone.py",
    "src/x.cpp:1: src/x.hpp",
    "src/x.cpp:3: tests/gone_test.py",
    "src/y.cpp:1: src/after_separator.cpp",
]


def plant(root: Path, files: dict[str, str]) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_every_stale_path_is_listed_with_where_it_is_named(tmp_path):
    plant(tmp_path, FILES)
    result = check(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-1] == STALE
    assert lines[-1].startswith(f"{len(STALE)} path(s) named above do not exist")


def test_a_tree_whose_paths_all_exist_passes(tmp_path):
    made = [
        "cmake/Gone.cmake",
        "src/z.cpp",
        "tests/none_a.py",
        "src/nothere.hpp",
        "python/pkg/moved.py",
        "tools/keep",
        "docs/wheels.md",
        "bench/doc_gone.py",
        "python/pkg/comment_gone.py",
        "src/x.hpp",
        "tests/gone_test.py",
        "src/after_separator.cpp",
    ]
    plant(tmp_path, {**FILES, **{name: "" for name in made}})
    result = check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("every path named in ")
