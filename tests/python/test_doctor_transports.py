"""`python -m stridex doctor --transports` on a CPU machine: the transports section, in text and JSON."""

from __future__ import annotations

import json

from test_doctor import run_cli

ARGS = ("doctor", "--device", "cpu", "--frameworks", "numpy", "--cases", "contiguous", "--no-progress", "--transports")


def test_transports_section_reports_the_mechanism_of_each():
    proc = run_cli(*ARGS, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    moved = {t["name"]: t for t in json.loads(proc.stdout)["transports"]}
    mp = moved["multiprocessing (cpu)"]
    assert mp["status"] == "pass" and "shared memory fd" in mp["carried_by"]
    try:
        import distributed  # noqa: F401
    except ImportError:
        assert moved["dask over tcp"]["status"] == "skip"
    else:
        tcp = moved["dask over tcp (cpu View)"]
        assert tcp["status"] == "pass" and tcp["carried_by"] == "dask frames (host buffers) over tcp"
    assert all(t["status"] in ("pass", "skip") for t in moved.values()), moved


def test_without_the_flag_there_is_no_transports_section():
    proc = run_cli(*ARGS[:-1], "--json")
    assert "transports" not in json.loads(proc.stdout)


def test_a_failed_transport_is_the_cause_the_exit_line_names(monkeypatch, capfd):
    import argparse

    from stridex import doctor
    from stridex.doctor import transports

    failed = transports.Transport(
        "multiprocessing (cuda:0, VirtualBuffer)",
        transports.FAIL,
        "-",
        0.1,
        "TypeError: incompatible function arguments",
    )
    monkeypatch.setattr(transports, "run", lambda devices: [failed])
    parser = argparse.ArgumentParser()
    doctor.add_arguments(parser)
    assert doctor.main(parser.parse_args([*ARGS[1:], "--in-process"])) == 1
    out = capfd.readouterr().out
    assert "exit status 1: 1 transport(s) failed: multiprocessing (cuda:0, VirtualBuffer) (transports, below)" in out
    assert "claimed stridex check(s) failed" not in out
