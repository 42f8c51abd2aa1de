"""The frameworks' own DLPack test suites, run with a stridex.View in the middle: every array a
suite hands to its framework's from_dlpack goes through stridex.view() first. stridex must never
break a hand-over that works without it, so each suite must pass as it passes on its own.

Only suites that ship inside the installed package can run here (NumPy's does; the torch, CuPy and
JAX wheels ship no tests). Each suite runs in a subprocess, once plain and once with the View in
the middle, and the two outcomes are compared test by test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# (framework, the module whose from_dlpack the suite calls, the suite's path inside the package)
SUITES = [("numpy", "numpy", "_core/tests/test_dlpack.py")]

MIDDLE = textwrap.dedent("""
    import importlib
    import stridex
    module = importlib.import_module({module!r})
    plain = module.from_dlpack
    def from_dlpack(x, *args, **kwargs):
        return plain(stridex.view(x), *args, **kwargs)
    module.from_dlpack = from_dlpack
""")

REPORT = textwrap.dedent("""
    import json
    outcomes = dict()
    def pytest_runtest_logreport(report):
        if report.when == "call" or report.outcome != "passed":
            outcomes[report.nodeid.split("::", 1)[1]] = report.outcome
    def pytest_sessionfinish(session):
        with open({path!r}, "w") as f:
            json.dump(outcomes, f)
""")


def run_suite(suite: str, tmp_path, middle: str) -> dict[str, str]:
    where = tmp_path / ("middle" if middle else "plain")
    where.mkdir()
    results = where / "outcomes.json"
    # A plugin module rather than a conftest.py: the suite lives inside the framework's package.
    (where / "stridex_in_the_middle.py").write_text(middle + REPORT.format(path=str(results)))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep.join([str(where), *sys.path]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "stridex_in_the_middle",
            "--rootdir",
            str(where),
            "-c",
            os.devnull,
            "-o",
            "addopts=",
            "-W",
            "ignore::DeprecationWarning",
            suite,
        ],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert results.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(results.read_text())


@pytest.mark.parametrize("framework,module,suite", SUITES, ids=[s[0] for s in SUITES])
def test_the_frameworks_own_dlpack_suite_passes_with_a_view_in_the_middle(framework, module, suite, tmp_path):
    package = pytest.importorskip(framework)
    path = os.path.join(os.path.dirname(package.__file__), suite)
    if not os.path.exists(path):
        pytest.skip(f"this {framework} ships no {suite}")
    plain = run_suite(path, tmp_path, "")
    middle = run_suite(path, tmp_path, MIDDLE.format(module=module))
    assert plain, "the suite ran no test"
    assert middle == plain, {
        k: (plain.get(k), middle.get(k)) for k in set(plain) | set(middle) if plain.get(k) != middle.get(k)
    }
