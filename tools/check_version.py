#!/usr/bin/env python3
"""The version has one home, CMakeLists.txt's `project(stridex VERSION X.Y.Z)`; this checks that
everything else that states it or derives it agrees, and lists each disagreement (exit status 1).

    python3 tools/check_version.py [ROOT]        ROOT defaults to the checkout this script is in

  * pyproject.toml keeps the version dynamic, and its regex (scikit-build-core's provider) reads
    X.Y.Z out of the file it names;
  * CHANGELOG.md's newest released entry (`## [X.Y.Z] - date`, below `## [Unreleased]`) is X.Y.Z;
  * every `find_package(stridex A.B ...)` (examples, docs) asks for this X.Y: the CMake package is
    compatible within one minor version (cmake/StridexInstall.cmake);
  * no Python file of the package and no docs/conf.py writes a version literal (`__version__ =
    "..."`, `release = "..."`): they take the extension's, which CMake compiles in;
  * the extension's STRIDEX_VERSION is CMake's ${PROJECT_VERSION}, not a literal.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

VERSION = r"(\d+)\.(\d+)\.(\d+)"


def repository_files(root: Path) -> list[str]:
    """Tracked files and untracked ones git does not ignore; every file when ROOT is no checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
        return sorted({f for f in out.decode().split("\0") if f and (root / f).is_file()})
    except (OSError, subprocess.CalledProcessError):
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)


def read(root: Path, rel: str) -> str:
    path = root / rel
    return path.read_text(encoding="utf-8") if path.exists() else ""


def toml_string(text: str, table: str, key: str) -> str | None:
    """A string value of a TOML table, read the way this project writes it (one key a line)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        section = re.search(r"(?ms)^\[%s\]\s*$(.*?)(?=^\[|\Z)" % re.escape(table), text)
        if section is None:
            return None
        found = re.search(r"(?m)^%s\s*=\s*(['\"])(.*?)\1" % re.escape(key), section.group(1))
        if found is None:
            return None
        return found.group(2) if found.group(1) == "'" else found.group(2).replace("\\\\", "\\")
    node: object = tomllib.loads(text)
    for part in table.split(".") + key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, str) else None


def check(root: Path) -> tuple[str | None, list[str]]:
    problems: list[str] = []
    cmake = read(root, "CMakeLists.txt")
    m = re.search(r"project\(\s*stridex\s+VERSION\s+" + VERSION + r"\b", cmake)
    if m is None:
        return None, ["CMakeLists.txt: no project(stridex VERSION X.Y.Z), the version's one home"]
    version = ".".join(m.groups())
    major_minor = ".".join(m.groups()[:2])

    pyproject = read(root, "pyproject.toml")
    if re.search(r"(?m)^version\s*=", pyproject):
        problems.append("pyproject.toml: a static [project] version (keep it dynamic: CMakeLists.txt is its home)")
    regex = toml_string(pyproject, "tool.scikit-build", "metadata.version.regex")
    source = toml_string(pyproject, "tool.scikit-build", "metadata.version.input")
    if regex is None or source is None:
        problems.append("pyproject.toml: no [tool.scikit-build] metadata.version.regex and .input to read the version")
    else:
        found = re.search(regex, read(root, source))
        got = found.group("value") if found and "value" in found.groupdict() else None
        if got != version:
            problems.append(f"pyproject.toml: its version regex reads {got!r} from {source}, expected {version!r}")

    changelog = read(root, "CHANGELOG.md")
    releases = re.findall(r"(?m)^##\s+\[?(\d+\.\d+\.\d+)\]?", changelog)
    if not releases:
        problems.append(f"CHANGELOG.md: no released entry (## [{version}] - date)")
    elif releases[0] != version:
        problems.append(f"CHANGELOG.md: the newest released entry is {releases[0]}, CMakeLists.txt says {version}")

    for rel in repository_files(root):
        path = root / rel
        if rel.startswith("docs/runs/"):  # logs of past runs, printed by the version of their day
            continue
        if path.name == "CMakeLists.txt" or path.suffix in (".cmake", ".md"):
            text = path.read_text(encoding="utf-8", errors="replace")
            for hit in re.finditer(r"find_package\(\s*stridex\s+(\d+\.\d+)(\.\d+)?", text):
                if hit.group(1) != major_minor:
                    line = text.count("\n", 0, hit.start()) + 1
                    problems.append(
                        f"{rel}:{line}: find_package(stridex {hit.group(1)}{hit.group(2) or ''}) "
                        f"asks for another minor version than {version}"
                    )
        if rel.startswith("python/stridex/") and path.suffix == ".py" or rel == "docs/conf.py":
            text = path.read_text(encoding="utf-8", errors="replace")
            for hit in re.finditer(r"(?m)^\s*(?:__version__|release|version)\s*=\s*['\"]([^'\"]*)['\"]", text):
                line = text.count("\n", 0, hit.start()) + 1
                problems.append(
                    f"{rel}:{line}: a version literal {hit.group(1)!r} (take stridex.__version__, from CMakeLists.txt)"
                )
        if rel == "src/extension/CMakeLists.txt":
            text = path.read_text(encoding="utf-8", errors="replace")
            for hit in re.finditer(r'STRIDEX_VERSION="([^"]*)"', text):
                if hit.group(1) != "${PROJECT_VERSION}":
                    problems.append(f"{rel}: STRIDEX_VERSION is {hit.group(1)!r}, not ${{PROJECT_VERSION}}")
    return version, problems


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    version, problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} statement(s) of the version disagree with CMakeLists.txt")
        return 1
    print(f"version {version}: CMakeLists.txt, pyproject.toml, CHANGELOG.md and find_package(stridex) agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
