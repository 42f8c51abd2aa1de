"""Builds the test-only extension modules of tests/python/ext (stridex_seed_ext, stridex_testing)
with CMake, once per session, and puts them on sys.path. They are never part of the package: the
product's _stridex carries no test code.

The build folder is STRIDEX_EXT_BUILD_DIR, or build/test-ext-<python> in the repository, so that a
second run rebuilds only what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODULES = ("stridex_seed_ext", "stridex_testing")

_built: str | None = None


class BuildError(RuntimeError):
    """The test extensions could not be built (the message says which command failed and why)."""


def build_folder() -> str:
    tag = sysconfig.get_config_var("SOABI") or f"py{sys.version_info.major}{sys.version_info.minor}"
    return os.environ.get("STRIDEX_EXT_BUILD_DIR") or os.path.join(REPO, "build", f"test-ext-{tag}")


def build_test_extensions() -> str:
    """The folder holding both modules (already on sys.path). Raises BuildError."""
    global _built
    if _built is not None:
        return _built
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake is not installed: cannot build the test extensions (tests/python/ext)")
    build = build_folder()
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(os.path.join(build, "Makefile")) else []
    configure = [
        cmake,
        "-S",
        os.path.join(HERE, "ext"),
        "-B",
        build,
        *generator,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DSTRIDEX_WERROR=ON",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DSTRIDEX_SOURCE_DIR={REPO}",
    ]
    for command in (configure, [cmake, "--build", build, "--parallel", str(os.cpu_count() or 2)]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            raise BuildError(
                f"building the test extensions failed: {' '.join(command)}\n{result.stdout[-4000:]}\n"
                f"{result.stderr[-4000:]}"
            )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    folders = set()
    for name in MODULES:
        found = [root for root, _, files in os.walk(build) if f"{name}{suffix}" in files]
        if not found:
            raise BuildError(f"no {name}{suffix} under {build}")
        folders.add(found[0])
    for folder in folders:
        if folder not in sys.path:
            sys.path.insert(0, folder)
    _built = build
    return build
