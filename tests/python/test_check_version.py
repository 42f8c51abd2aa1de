"""tools/check_version.py, the check that every statement of the version agrees with its one home
(CMakeLists.txt's project(VERSION)): on the repository itself, and on small trees planted with each
kind of disagreement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "check_version.py"

GOOD = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.24)\nproject(stridex VERSION 1.2.3 LANGUAGES CXX)\n",
    "pyproject.toml": '[project]\nname = "stridex"\ndynamic = ["version"]\n\n[tool.scikit-build]\n'
    'metadata.version.input = "CMakeLists.txt"\n'
    "metadata.version.regex = 'project\\(stridex VERSION (?P<value>[0-9.]+)'\n",
    "CHANGELOG.md": "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2027-01-01\n\n## [1.1.0] - 2026-12-01\n",
    "examples/app/CMakeLists.txt": "find_package(stridex 1.2 CONFIG REQUIRED)\n",
    "docs/install.md": "```cmake\nfind_package(stridex CONFIG REQUIRED)\n```\n",
    "docs/conf.py": "import stridex\nrelease = version = stridex.__version__\n",
    "python/stridex/__init__.py": "from ._stridex import __version__ as __version__\n",
    "src/extension/CMakeLists.txt": 'target_compile_definitions(_stridex PRIVATE STRIDEX_VERSION="${PROJECT_VERSION}")\n',
}


def run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def plant(root: Path, changes: dict[str, str]) -> Path:
    for name, text in {**GOOD, **changes}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_repository_states_one_version():
    result = run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_agreeing_statements_pass(tmp_path):
    result = run(plant(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("version 1.2.3: ")


def test_each_disagreement_is_named(tmp_path):
    result = run(
        plant(
            tmp_path,
            {
                "pyproject.toml": GOOD["pyproject.toml"]
                .replace('dynamic = ["version"]', 'version = "1.2.3"')
                .replace("(?P<value>[0-9.]+)", "(?P<value>[0-9]+)"),
                "CHANGELOG.md": "# Changelog\n\n## [Unreleased]\n\n## [1.1.0] - 2026-12-01\n",
                "examples/app/CMakeLists.txt": "find_package(stridex 1.1 CONFIG REQUIRED)\n",
                "docs/conf.py": 'release = "1.2.3"\n',
                "python/stridex/ipc/__init__.py": '__version__ = "1.2"\n',
                "src/extension/CMakeLists.txt": 'target_compile_definitions(_stridex PRIVATE STRIDEX_VERSION="1.2.3")\n',
            },
        )
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "pyproject.toml: a static [project] version (keep it dynamic: CMakeLists.txt is its home)",
        "pyproject.toml: its version regex reads '1' from CMakeLists.txt, expected '1.2.3'",
        "CHANGELOG.md: the newest released entry is 1.1.0, CMakeLists.txt says 1.2.3",
        "docs/conf.py:1: a version literal '1.2.3' (take stridex.__version__, from CMakeLists.txt)",
        "examples/app/CMakeLists.txt:1: find_package(stridex 1.1) asks for another minor version than 1.2.3",
        "python/stridex/ipc/__init__.py:1: a version literal '1.2' (take stridex.__version__, from CMakeLists.txt)",
        "src/extension/CMakeLists.txt: STRIDEX_VERSION is '1.2.3', not ${PROJECT_VERSION}",
        "7 statement(s) of the version disagree with CMakeLists.txt",
    ]


def test_without_a_project_version_nothing_else_is_compared(tmp_path):
    result = run(plant(tmp_path, {"CMakeLists.txt": "project(stridex LANGUAGES CXX)\n"}))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "CMakeLists.txt: no project(stridex VERSION X.Y.Z), the version's one home"
