"""`python -m stridex doctor` and `bench` as CI runs them: subprocesses over the CPU frameworks here.

The first test is the acceptance test of the whole project on a CPU machine: every claimed pair
passes, and NumPy -> NumPy through stridex aliases the memory. It fails until stridex.view and the
View's exports exist, by design.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

TIMEOUT = 240  # the whole CPU doctor takes seconds; the bound only stops a hang


def run_cli(*args: str, env: dict | None = None, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stridex", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
        encoding="utf-8",
    )


def find(doc: dict, producer: str, consumer: str, case: str, device: str = "cpu") -> dict:
    for cell in doc["results"]:
        if (cell["device"], cell["producer"], cell["consumer"], cell["case"]) == (device, producer, consumer, case):
            return cell
    raise AssertionError(f"no result for {device} {producer} -> {consumer} {case}")


@pytest.fixture(scope="module")
def cpu_doctor() -> tuple[subprocess.CompletedProcess, dict]:
    proc = run_cli("doctor", "--json", "--device", "cpu")
    try:
        doc = json.loads(proc.stdout)  # the whole stdout is one JSON document: nothing else leaks there
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"stdout is not JSON ({exc}); stderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[:3000]}"
        ) from exc
    return proc, doc


def test_cpu_doctor_passes_and_numpy_roundtrip_aliases(cpu_doctor):
    proc, doc = cpu_doctor
    cell = find(doc, "numpy", "numpy", "contiguous")
    assert cell["stridex"]["status"] == "pass", f"numpy -> numpy through stridex: {cell['stridex']['reason']}"
    assert cell["stridex"]["aliasing"] == "write", "aliasing must be verified by a write through one side"
    assert cell["stridex"]["claimed"] is True
    failed = [
        f"{c['producer']} -> {c['consumer']} {c['case']}: {c['stridex']['reason']}"
        for c in doc["results"]
        if c["stridex"]["status"] == "fail" and c["stridex"].get("claimed")
    ]
    assert not failed, "claimed stridex pairs failed:\n" + "\n".join(failed)
    assert doc["exit_status"] == 0
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_cpu_doctor_claims_the_writability_cells(cpu_doctor):
    """docs/export.md, "Writability": JAX arrays go back to JAX and on to Warp through stridex (claimed,
    passing); NumPy's read-only import of a legacy-only producer (Warp) is its own rule on both routes."""
    _, doc = cpu_doctor
    names = {f["name"] for f in doc["frameworks"] if f.get("version")}
    if not {"jax", "warp"} <= names:
        pytest.skip("needs jax and warp")
    for producer, consumer, case in [
        ("jax", "jax", "contiguous"),
        ("jax", "jax", "readonly"),
        ("jax", "warp", "contiguous"),
        ("warp", "numpy", "contiguous"),
    ]:
        cell = find(doc, producer, consumer, case)
        assert cell["stridex"]["claimed"] is True, f"{producer} -> {consumer} {case} must be claimed"
        assert cell["stridex"]["status"] == "pass", f"{producer} -> {consumer} {case}: {cell['stridex']['reason']}"
        assert cell["native"]["status"] == "pass", f"{producer} -> {consumer} {case} natively"
    notes = find(doc, "warp", "numpy", "contiguous")["stridex"]["notes"]
    assert any("read-only" in n and "its own rule" in n for n in notes), notes
    refused = find(doc, "numpy", "jax", "readonly")
    assert refused["native"]["status"] == refused["stridex"]["status"] == "fail"  # NumPy refuses; so does stridex
    assert refused["stridex"]["claimed"] is False


def test_cpu_doctor_document_shape(cpu_doctor):
    proc, doc = cpu_doctor
    assert proc.returncode == doc["exit_status"]
    names = {f["name"]: f for f in doc["frameworks"]}
    assert names["numpy"]["status"] == "ok" and names["numpy"]["version"]
    assert "torch" in names  # every known framework is listed, installed or not
    assert doc["devices"]["devices"][0] == "cpu"
    assert {c["name"] for c in doc["cases"]} >= {
        "contiguous",
        "strided",
        "negative",
        "0-d",
        "empty",
        "bool",
        "bfloat16",
        "readonly",
    }
    for cell in doc["results"]:
        for route in ("native", "stridex"):
            outcome = cell[route]
            assert outcome["status"] in ("pass", "fail", "n/a")
            if outcome["status"] != "pass":
                assert outcome["reason"], f"{cell} has no reason"
        if cell["case"] == "copy":  # stridex's own copy: the native route never applies
            assert cell["native"]["status"] == "n/a", cell
            if cell["stridex"]["status"] == "pass":
                assert cell["stridex"]["aliasing"] == "copy"
        else:
            assert (cell["native"]["status"] == "n/a") == (cell["stridex"]["status"] == "n/a")
    # native NumPy -> NumPy works on every NumPy >= 2.1, and the doctor proves it by writing
    native = find(doc, "numpy", "numpy", "strided")["native"]
    assert native["status"] == "pass" and native["aliasing"] == "write" and native["how"] == "numpy.from_dlpack"
    # a case one side cannot represent is "does not apply", with the reason
    assert "bfloat16" in {c["case"] for c in doc["results"]}
    summary = doc["summary"]["stridex"]
    assert summary["pass"] + summary["fail"] + summary["n/a"] == len(doc["results"])


def test_text_matrix_shows_versions_and_symbols():
    proc = run_cli("doctor", "--frameworks", "numpy", "--cases", "contiguous,bfloat16", "--no-progress")
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    import numpy

    assert f"numpy {numpy.__version__}" in out
    assert re.search(r"numpy\s+(→|->)\s+numpy", out)
    assert "contig" in out and "bf16" in out
    assert "✓" in out or "ok" in out
    assert ("exit status 0" in out) == (proc.returncode == 0)
    assert proc.stderr == ""  # --no-progress: nothing on stderr for a clean run


def test_progress_goes_to_stderr_only():
    proc = run_cli("doctor", "--frameworks", "numpy", "--cases", "contiguous", "--json")
    json.loads(proc.stdout)
    assert "doctor:" in proc.stderr  # progress and the check count


def test_version_and_help():
    import stridex

    proc = run_cli("--version")
    assert proc.returncode == 0 and f"stridex {stridex.__version__}" in proc.stdout
    proc = run_cli("--help")
    assert proc.returncode == 0 and "doctor" in proc.stdout and "bench" in proc.stdout
    proc = run_cli("doctor", "--help")
    assert proc.returncode == 0 and "--frameworks" in proc.stdout and "exit status" in proc.stdout
    proc = run_cli()
    assert proc.returncode == 2 and "doctor" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--cases", "nope"), "unknown case"),
        (("--frameworks", "nope"), "unknown framework"),
        (("--adapter", "no_such_module_for_doctor:X"), "no_such_module_for_doctor"),
    ],
)
def test_usage_errors_exit_2(args, message):
    proc = run_cli("doctor", *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_bench_quick_cpu():
    proc = run_cli("bench", "--quick", "--frameworks", "numpy", "--device", "cpu", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "### Import" in out and "### Hand-over" in out
    assert "| cpu" in out and "numpy.from_dlpack" in out
    row = next(line for line in out.splitlines() if "numpy → numpy" in line)
    native = row.split("|")[4].strip()
    assert native.replace(",", "").replace(".", "").isdigit(), row  # a number of ns, not "—"


def test_bench_json():
    proc = run_cli("bench", "--quick", "--frameworks", "numpy", "--device", "cpu", "--repeat", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["empty_call_ns"] > 0
    (row,) = [r for r in doc["handovers"] if r["producer"] == "numpy" and r["consumer"] == "numpy"]
    assert row["native_ns"] > 0 and row["via_stridex_view_ns"] > 0
    assert doc["schema"] == 1 and not _keys_with_spaces(doc)


def _keys_with_spaces(node) -> list[str]:
    """Every key of a JSON document that has whitespace in it (the documents promise none)."""
    if isinstance(node, dict):
        return [k for k in node if re.search(r"\s", k)] + [b for v in node.values() for b in _keys_with_spaces(v)]
    if isinstance(node, list):
        return [b for v in node for b in _keys_with_spaces(v)]
    return []


def test_doctor_json_has_schema_and_no_keys_with_spaces(cpu_doctor):
    _, doc = cpu_doctor
    assert doc["schema"] == 2
    assert _keys_with_spaces(doc) == []


def test_absent_device_exits_3():
    for json_flag in ((), ("--json",)):
        proc = run_cli("doctor", "--device", "cuda:7", "--cases", "contiguous", *json_flag)
        assert proc.returncode == 3, proc.stderr
        assert "--device cuda:7: no such device here" in proc.stderr and "nothing was checked" in proc.stderr
        assert proc.stdout == ""


def test_absent_framework_named_exits_3_after_checking_the_rest():
    import importlib.util

    if importlib.util.find_spec("tensorflow") is not None:
        pytest.skip("tensorflow is installed here")
    proc = run_cli("doctor", "--frameworks", "numpy,tensorflow", "--cases", "contiguous", "--json")
    assert proc.returncode == 3, proc.stderr
    assert "--frameworks names what is not usable here: tensorflow: not installed" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["exit_status"] == 3 and doc["unusable"] == ["tensorflow: not installed"]
    assert find(doc, "numpy", "numpy", "contiguous")["stridex"]["status"] == "pass"  # the rest was checked
    proc = run_cli("bench", "--frameworks", "numpy,tensorflow", "--device", "cpu", "--quick")
    assert proc.returncode == 3 and "tensorflow: not installed" in proc.stderr


def test_absent_gpu_exits_3_on_a_machine_without_one():
    import stridex

    if stridex.cuda_available():
        pytest.skip("this machine has a CUDA device")
    proc = run_cli("doctor", "--device", "cuda", "--quick")
    assert proc.returncode == 3 and "--device cuda: no such device here" in proc.stderr
    proc = run_cli("bench", "--device", "cuda", "--quick")
    assert proc.returncode == 3 and "nothing was measured" in proc.stderr


def test_nothing_checked_exits_3():
    # the stream case applies only on GPUs: on the CPU nothing is checked, which must not pass
    proc = run_cli("doctor", "--device", "cpu", "--cases", "stream", "--frameworks", "numpy", "--no-progress")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "exit status 3: nothing was checked" in proc.stdout
    assert "nothing was checked" in proc.stderr


def test_ascii_only_stdout_falls_back_to_plain_symbols():
    env = dict(os.environ, PYTHONIOENCODING="ascii", LANG="C", LC_ALL="C")
    for args in (
        ("doctor", "--frameworks", "numpy", "--cases", "contiguous,bool", "--no-progress"),
        ("doctor", "--help"),
        ("bench", "--help"),
        ("--help",),
        ("bench", "--quick", "--frameworks", "numpy", "--device", "cpu", "--repeat", "1"),
    ):
        proc = subprocess.run([sys.executable, "-m", "stridex", *args], capture_output=True, env=env, timeout=TIMEOUT)
        assert proc.returncode == 0, (args, proc.stderr.decode(errors="replace")[-2000:])
        proc.stdout.decode("ascii")  # every byte is ASCII
    assert re.search(
        rb"numpy +-> numpy +ok ok",
        subprocess.run(
            [
                sys.executable,
                "-m",
                "stridex",
                "doctor",
                "--frameworks",
                "numpy",
                "--cases",
                "contiguous",
                "--no-progress",
            ],
            capture_output=True,
            env=env,
            timeout=TIMEOUT,
        ).stdout,
    )


def test_help_and_version_import_no_framework():
    code = (
        "import sys, contextlib, io\n"
        "import stridex.__main__ as cli\n"
        "for argv in (['--help'], ['--version']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        cli.main(argv)\n"
        "print(sorted(m for m in ('numpy', 'jax', 'warp', 'torch', 'ml_dtypes') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_cmake_dir_outside_a_wheel_says_so_or_points_at_the_config():
    import stridex

    proc = run_cli("--cmake-dir")
    config = os.path.join(os.path.dirname(stridex.__file__), "lib", "cmake", "stridex")
    if os.path.isdir(config):  # installed from the wheel
        assert proc.returncode == 0 and proc.stdout.strip() == config
        assert os.path.isfile(os.path.join(config, "stridexConfig.cmake"))
        include = run_cli("--include-dir").stdout.strip()
        assert include == os.path.join(os.path.dirname(stridex.__file__), "include")
        assert os.path.isfile(os.path.join(include, "stridex", "view.hpp"))
    else:  # a staged development build
        assert proc.returncode == 1 and "was not installed from a wheel" in proc.stderr
