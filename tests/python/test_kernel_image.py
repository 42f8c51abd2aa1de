"""The copy kernels the installed stridex carries, checked without a GPU: the embedded fatbin is
not empty and holds SASS for the architectures users run that its nvcc can build, plus PTX of the
newest (cmake/StridexKernels.cmake); the doctor's lines about it; and on a GPU, which code of it the
driver loaded."""

from __future__ import annotations

import re

import pytest

import stridex
from stridex.doctor import kernels as doctor_kernels

native = stridex._stridex


def expected_sass(compiler: str) -> set[int]:
    """The release architectures, as far as the nvcc that built the image has them: CUDA 13 dropped
    sm_70, CUDA 12 before 12.8 had no Blackwell (sm_100, sm_120)."""
    major, minor = (int(x) for x in re.match(r"nvcc (\d+)\.(\d+)\.", compiler).groups())
    wanted = {75, 80, 86, 89, 90}
    if major < 13:
        wanted.add(70)
    if (major, minor) >= (12, 8):
        wanted |= {100, 120}
    return wanted


def test_the_installed_package_embeds_its_kernels():
    image = native._kernel_image()
    assert image["source"] == "embedded", image
    assert image["bytes"] > 100_000, image  # one architecture's SASS alone is larger, compressed
    assert re.fullmatch(r"nvcc \d+\.\d+\.\d+", image["compiler"]), image["compiler"]
    assert expected_sass(image["compiler"]) <= set(image["sass"]), image
    assert image["sass"] == sorted(set(image["sass"])), image  # one entry per architecture
    assert image["ptx"] == [max(image["sass"])], image  # PTX of the newest, for GPUs newer still


def test_the_doctor_names_the_image_and_its_architectures():
    image = {"source": "embedded", "bytes": 904_968, "compiler": "nvcc 13.0.88", "sass": [75, 90], "ptx": [90]}
    gpus = {
        "cuda:0": {"device_arch": 90, "binary_arch": 90, "ptx_version": 90, "from_ptx": False},
        "cuda:1": {"device_arch": 110, "binary_arch": 110, "ptx_version": 90, "from_ptx": True},
        "cuda:2": {"error": "cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    }
    assert doctor_kernels.render_text({**image, "gpus": gpus}).splitlines() == [
        "",
        "copy kernels: embedded (nvcc 13.0.88, 883 KiB): SASS sm_75 sm_90, PTX compute_90",
        "  cuda:0 (sm_90): runs the image's SASS sm_90",
        "  cuda:1 (sm_110): runs sm_110 code the driver compiled from the image's PTX (ISA 9.0)",
        "  cuda:2: the image does not load: cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    ]
    none = {"source": "none", "bytes": 0, "compiler": "", "sass": [], "ptx": [], "gpus": {}}
    assert "none (built with STRIDEX_CUDA_KERNELS=OFF)" in doctor_kernels.render_text(none)


def test_the_doctor_collects_this_builds_image():
    info = doctor_kernels.collect(stridex, ["cpu"])
    assert info == {**native._kernel_image(), "gpus": {}}


@pytest.mark.skipif(not stridex.cuda_available(), reason="no CUDA device (stridex.cuda_available() is False)")
def test_a_gpu_runs_code_of_the_image():
    image = native._kernel_image()
    loaded = native._loaded_kernels(0)
    assert loaded["device_arch"] >= 70, loaded
    if loaded["from_ptx"]:
        assert loaded["binary_arch"] == loaded["device_arch"], loaded  # the driver compiled it for this GPU
    else:
        # the SASS the driver picks: this GPU's major version, the highest minor version not above its own
        same_major = [a for a in image["sass"] if a // 10 == loaded["device_arch"] // 10 and a <= loaded["device_arch"]]
        assert loaded["binary_arch"] == max(same_major), (loaded, image)
    info = doctor_kernels.collect(stridex, ["cpu", "cuda:0"])
    assert info["gpus"] == {"cuda:0": loaded}
