"""The doctor's shortcut check (python/stridex/doctor/shortcuts.py): each framework shortcut stridex
takes against the framework's public protocol on this machine, in the text, in the JSON and in the
exit status; and that the check can fail: a disagreement, a crash and a hang each fail it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import types


import stridex
from stridex import doctor
from stridex.doctor import shortcuts
from conftest import shortcut_on
from test_doctor import run_cli

ARGS = ("doctor", "--device", "cpu", "--cases", "contiguous", "--no-progress")


def frameworks_here() -> str:
    try:
        import jax  # noqa: F401
    except ImportError:
        return "numpy"
    return "numpy,jax"


def test_each_shortcut_of_the_frameworks_here_gives_the_public_protocols_view():
    proc = run_cli(*ARGS, "--frameworks", frameworks_here(), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == doc["exit_status"] == 0, proc.stderr[-3000:]
    checks = {c["name"]: c for c in doc["shortcuts"]}
    assert list(checks) == [s.name for s in stridex.shortcuts()]
    numpy = checks["numpy_struct"]
    assert (numpy["status"], numpy["framework"], numpy["enabled"]) == ("pass", "numpy", shortcut_on("numpy_struct"))
    assert numpy["compared"] >= 10 and numpy["version"] and numpy["detail"].endswith("arrays on cpu")
    if "jax" in frameworks_here():
        # 6 arrays compared, and 5 of them deleted by JAX while a View taken through the shortcut lives
        assert checks["jaxlib_export"]["status"] == "pass" and checks["jaxlib_export"]["compared"] >= 11
    for name in ("cupy_c_api", "cupy_layout", "torch_getter", "torch_borrowed"):
        assert checks[name]["status"] == "skip" and checks[name]["detail"].endswith("not among --frameworks")


def test_the_text_has_a_section_and_a_disabled_shortcut_is_still_checked():
    env = dict(os.environ, STRIDEX_DISABLE_SHORTCUTS="numpy_struct")
    proc = run_cli(*ARGS, "--frameworks", "numpy", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = proc.stdout[proc.stdout.index("\nshortcuts: ") :]
    line = next(x for x in section.splitlines() if "numpy_struct" in x)
    assert line.startswith("  ✓ numpy_struct") or line.startswith("  ok numpy_struct")
    assert "the same View (or refusal) in " in line and "[off here: STRIDEX_DISABLE_SHORTCUTS" in line
    assert proc.stdout.index("exit status 0") < proc.stdout.index("\nshortcuts: ")


def in_process_doctor(capfd, *extra: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    doctor.add_arguments(parser)
    status = doctor.main(parser.parse_args([*ARGS[1:], "--frameworks", "numpy", "--in-process", *extra]))
    return status, capfd.readouterr().out


def test_a_shortcut_that_disagrees_fails_the_doctor(monkeypatch, capfd):
    # numpy_struct made to report other strides than __dlpack__ does: what a NumPy release that
    # moved a field of its struct would look like.
    own = shortcuts._outcome

    def skewed(sx, x, stream):
        out = own(sx, x, stream)
        taken = {s.name for s in sx.shortcuts() if s.enabled} == {"numpy_struct"}
        if taken and out[0] != "error" and out[1]:
            out = (out[0], out[1], tuple(s + 1 for s in out[2]), *out[3:])
        return out

    monkeypatch.setattr(shortcuts, "_outcome", skewed)
    before = {s.name: s.enabled for s in stridex.shortcuts()}
    status, out = in_process_doctor(capfd)
    assert status == 1
    assert "exit status 1: 1 shortcut(s) differ from the public protocol: numpy_struct (shortcuts, below)" in out
    assert "claimed stridex check(s) failed" not in out
    line = next(x for x in out.splitlines() if "numpy_struct" in x and "shortcuts, below" not in x)
    assert (
        "cpu float32 (3, 4), default stream: strides (5, 2) through the shortcut, (4, 1) through the public "
        "protocol" in line
    )
    assert {s.name: s.enabled for s in stridex.shortcuts()} == before  # the check left the switch as it was


def test_the_json_names_the_disagreement(monkeypatch, capfd):
    monkeypatch.setattr(
        shortcuts,
        "_outcome",
        lambda sx, x, stream: (
            ("error", "BufferError: refused") if {s.name for s in sx.shortcuts() if s.enabled} else (1, (2,))
        ),
    )
    status, out = in_process_doctor(capfd, "--json")
    doc = json.loads(out)
    assert status == doc["exit_status"] == 1
    check = next(c for c in doc["shortcuts"] if c["name"] == "numpy_struct")
    assert check["status"] == "fail" and check["compared"] == 1
    assert check["detail"] == (
        "cpu float32 (3, 4), default stream: through the shortcut BufferError: refused; "
        "through the public protocol a View"
    )


def aborting_child(names, devices):
    code = f'print(\'{{"begin": "{names[0]}"}}\', flush=True); import os; os.abort()'
    return [sys.executable, "-c", code]


def test_a_shortcut_that_crashes_the_check_is_a_failure_and_the_rest_go_on(monkeypatch):
    monkeypatch.setattr(shortcuts, "_child_command", aborting_child)
    results = {r.name: r for r in shortcuts.run(["cpu"], ["numpy", "jax"], timeout=60)}
    for name in ("numpy_struct", "jaxlib_export"):
        assert results[name].status == "fail", results[name]
        assert results[name].detail == "crashed the process (SIGABRT); the doctor went on in a new one"
    assert shortcuts.failed_names(list(results.values())) == ["numpy_struct", "jaxlib_export"]


def test_a_check_that_hangs_is_a_failure(monkeypatch):
    monkeypatch.setattr(
        shortcuts,
        "_child_command",
        lambda names, devices: [
            sys.executable,
            "-c",
            f'print(\'{{"begin": "{names[0]}"}}\', flush=True); import time; time.sleep(60)',
        ],
    )
    (result,) = [r for r in shortcuts.run(["cpu"], ["numpy"], timeout=2) if r.status != "skip"]
    assert (result.name, result.status) == ("numpy_struct", "fail")
    assert result.detail == "no result within 2 s: the check hung (the doctor stopped it)"


def test_a_framework_that_is_not_installed_is_skipped_with_the_reason(monkeypatch):
    real = shortcuts.importlib.util.find_spec
    monkeypatch.setattr(shortcuts.importlib.util, "find_spec", lambda name: None if name == "numpy" else real(name))
    results = {r.name: r for r in shortcuts.run(["cpu"], ["numpy"], in_process=True)}
    assert (results["numpy_struct"].status, results["numpy_struct"].detail) == ("skip", "numpy is not installed")


def test_a_shortcut_this_framework_version_does_not_take_is_skipped_with_the_reason():
    # cupy_layout asked of NumPy's arrays: no type of NumPy's takes it, as CuPy >= 14.3 takes only cupy_c_api.
    info = types.SimpleNamespace(
        name="cupy_layout", framework="numpy", enabled=True, checked="taken for CuPy 13.4 to 14.2"
    )
    result = shortcuts.check(stridex, info, ["cpu"])
    import numpy

    assert (result.status, result.compared) == ("skip", 0)
    assert result.detail == f"not taken with numpy {numpy.__version__} here (taken for CuPy 13.4 to 14.2)"


def test_no_devices_of_the_framework_is_a_skip():
    info = next(s for s in stridex.shortcuts() if s.name == "numpy_struct")
    result = shortcuts.check(stridex, info, ["cuda:0"])
    assert (result.status, result.detail) == ("skip", "numpy makes no arrays on cuda:0")
