"""Builds an examples/ extension the way a user does: stridex installed with `cmake --install`,
then the example configured with find_package(stridex CONFIG) against that prefix.

STRIDEX_PREFIX names an installed stridex to use (tests/run_all.sh installs build/ci there); without
it, the core is built and installed into a temporary prefix first. STRIDEX_EXAMPLES_BUILD_DIR keeps
the example builds between runs."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _run(command, what):
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"{what} failed: {' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


def _generator():
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def installed_prefix(tmp_path_factory) -> str:
    prefix = os.environ.get("STRIDEX_PREFIX")
    if prefix:
        return prefix
    cmake = shutil.which("cmake")
    work = tmp_path_factory.mktemp("stridex_install")
    build, prefix = str(work / "build"), str(work / "prefix")
    _run(
        [cmake, "-S", REPO, "-B", build, *_generator(), "-DCMAKE_BUILD_TYPE=Release", "-DSTRIDEX_BUILD_TESTS=OFF"],
        "configuring stridex",
    )
    _run([cmake, "--build", build, "--parallel", str(os.cpu_count() or 2)], "building stridex")
    _run([cmake, "--install", build, "--prefix", prefix], "installing stridex")
    return prefix


_built: dict[tuple[str, tuple[str, ...]], str] = {}


def build_example(tmp_path_factory, example: str, extra=()) -> str:
    """Configures and builds examples/<example>; returns its build folder (on sys.path). Built once
    per session: the test files of one example share the build."""
    key = (example, tuple(extra))
    if key in _built:
        return _built[key]
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed: cannot build the examples")
    prefix = installed_prefix(tmp_path_factory)
    root = os.environ.get("STRIDEX_EXAMPLES_BUILD_DIR")
    build = os.path.join(root, example) if root else str(tmp_path_factory.mktemp(example))
    _run(
        [
            cmake,
            "-S",
            os.path.join(REPO, "examples", example),
            "-B",
            build,
            *_generator(),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_PREFIX_PATH={prefix}",
            f"-DPython_EXECUTABLE={sys.executable}",
            *extra,
        ],
        f"configuring examples/{example}",
    )
    _run([cmake, "--build", build, "--parallel", str(os.cpu_count() or 2)], f"building examples/{example}")
    if build not in sys.path:
        sys.path.insert(0, build)
    _built[key] = build
    return build


def import_built(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip(f"{name} was not built ({e}): its binding library is not installed")
