"""Discovery: a framework that is missing, one whose import raises, and what the doctor shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from stridex.doctor import discovery
from stridex.doctor.discovery import discover, probe


@pytest.fixture
def fake_packages(tmp_path, monkeypatch):
    """Writes packages into a folder on sys.path; forgets them afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(name: str, source: str, submodule: str | None = None, sub_source: str = "") -> None:
        pkg = tmp_path / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text(textwrap.dedent(source))
        if submodule:
            (pkg / f"{submodule}.py").write_text(textwrap.dedent(sub_source))
        written.append(name)

    yield write
    for name in written:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def test_missing_framework_is_missing_not_an_error():
    info = probe("nothing", "stridex_doctor_no_such_module")
    assert info.status == "missing" and not info.ok
    assert info.describe() == "nothing: not installed"
    info = probe("nothing", "stridex_doctor_no_such_module.core")
    assert info.status == "missing"


def test_framework_whose_import_raises_is_broken_with_reason(fake_packages):
    fake_packages("sxd_boom", "raise RuntimeError('no GPU driver for you')\n")
    info = probe("boom", "sxd_boom")
    assert info.status == "broken"
    assert info.reason == "RuntimeError: no GPU driver for you"
    assert info.describe() == "boom: import failed: RuntimeError: no GPU driver for you"
    assert info.to_json()["status"] == "broken"


def test_missing_dependency_is_broken_not_missing(fake_packages):
    fake_packages("sxd_needy", "import stridex_doctor_absent_dependency\n")
    info = probe("needy", "sxd_needy")
    assert info.status == "broken"
    assert "ModuleNotFoundError" in info.reason and "stridex_doctor_absent_dependency" in info.reason


def test_system_exit_during_import_is_caught(fake_packages):
    fake_packages("sxd_exits", "import sys\nsys.exit(3)\n")
    assert probe("exits", "sxd_exits").status == "broken"


def test_submodule_import_failure(fake_packages):
    fake_packages("sxd_pkg", "", submodule="core", sub_source="raise ImportError('libfoo.so: cannot open')\n")
    info = probe("pkg", "sxd_pkg.core")
    assert info.status == "broken" and "libfoo.so" in info.reason


def test_import_chatter_does_not_reach_stdout(fake_packages, capsys):
    fake_packages("sxd_chatty", "print('Chatty 1.0 initialized')\n__version__ = '1.0'\n")
    info = probe("chatty", "sxd_chatty")
    assert info.ok and info.version == "1.0"
    captured = capsys.readouterr()
    assert captured.out == "" and "Chatty 1.0 initialized" in captured.err


def test_discover_known_frameworks():
    infos = {i.name: i for i in discover()}
    assert [k.name for k in discovery.KNOWN] == list(infos)
    import numpy

    assert infos["numpy"].ok and infos["numpy"].version == numpy.__version__
    assert all(i.status in ("ok", "missing", "broken") for i in infos.values())
    with pytest.raises(ValueError, match="unknown framework"):
        discover(["numpy", "not-a-framework"])


def test_devices_without_cuda_layer_say_why():
    class NoCuda:  # a stridex without its CUDA layer, on a machine without torch/cupy
        pass

    report = discovery.discover_devices(NoCuda(), {})
    assert report.devices == ["cpu"]
    assert "stridex has no CUDA layer" in report.cuda_note

    class Cuda:
        @staticmethod
        def cuda_available():
            return True

        @staticmethod
        def device_count():
            return 2

    assert discovery.discover_devices(Cuda(), {}).devices == ["cpu", "cuda:0", "cuda:1"]


def test_cli_shows_a_broken_framework_and_goes_on(tmp_path):
    # a fake `mlx` package whose `mlx.core` fails to import, first on the path
    (tmp_path / "mlx").mkdir()
    (tmp_path / "mlx" / "__init__.py").write_text("")
    (tmp_path / "mlx" / "core.py").write_text("raise OSError('libmlx.so: undefined symbol: _ZN3mlx')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    args = [
        sys.executable,
        "-m",
        "stridex",
        "doctor",
        "--frameworks",
        "numpy,mlx",
        "--cases",
        "contiguous",
        "--no-progress",
    ]
    text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=240, encoding="utf-8")
    assert "mlx: import failed: OSError: libmlx.so: undefined symbol" in text.stdout, text.stdout + text.stderr
    assert re.search(r"numpy\s+(→|->)\s+numpy", text.stdout)  # the rest still ran
    doc = json.loads(
        subprocess.run(args + ["--json"], capture_output=True, text=True, env=env, timeout=240, encoding="utf-8").stdout
    )
    (mlx,) = [f for f in doc["frameworks"] if f["name"] == "mlx"]
    assert mlx["status"] == "broken" and "undefined symbol" in mlx["reason"]
    assert all("mlx" not in (c["producer"], c["consumer"]) for c in doc["results"])
