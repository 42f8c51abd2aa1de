"""Builds a benchmark's own CMake project (bench/casters, bench/xla_ffi) in Release with this
Python, and puts its build folder on sys.path so that its modules import; exits naming the
command that failed. One helper for every benchmark that compiles its peers."""

from __future__ import annotations

import os
import subprocess
import sys


def build_project(source: str, build: str) -> None:
    generator = ["-G", "Ninja"] if subprocess.run(["which", "ninja"], capture_output=True).returncode == 0 else []
    for command in (
        [
            "cmake",
            "-S",
            source,
            "-B",
            build,
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        ["cmake", "--build", build, "--parallel", str(os.cpu_count() or 2)],
    ):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            name = os.path.relpath(source, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            sys.exit(f"building {name} failed: {' '.join(command)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    sys.path.insert(0, build)
