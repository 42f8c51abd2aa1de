"""The doctor's "copy kernels" lines: the kernel image this build carries (read from the embedded
fatbin: architectures, compiler, size; no GPU needed) and, on each GPU checked, which code of it the
driver loaded: the image's SASS for that GPU, or code it compiled from the image's PTX."""

from __future__ import annotations

from typing import Any

from .discovery import one_line


def collect(sx: Any, devices: list[str]) -> dict:
    """The image, and per chosen GPU what was loaded (loading it there) or why it could not be."""
    native = sx._stridex
    image = dict(native._kernel_image())
    gpus: dict[str, dict] = {}
    if image["source"] != "none":
        for device in devices:
            if not device.startswith("cuda:"):
                continue
            try:
                gpus[device] = dict(native._loaded_kernels(int(device.split(":")[1])))
            except Exception as exc:  # noqa: BLE001 - a driver too old for the image is a finding, not a crash
                gpus[device] = {"error": one_line(exc)}
    image["gpus"] = gpus
    return image


def _archs(prefix: str, archs: list[int]) -> str:
    return " ".join(f"{prefix}_{a}" for a in archs)


def render_text(info: dict) -> str:
    if info["source"] == "none":
        return (
            "\ncopy kernels: none (built with STRIDEX_CUDA_KERNELS=OFF): "
            "GPU copies of transposed or permuted layouts are refused\n"
        )
    parts = [f"SASS {_archs('sm', info['sass'])}"]
    if info["ptx"]:
        parts.append(f"PTX {_archs('compute', info['ptx'])}")
    lines = ["", f"copy kernels: embedded ({info['compiler']}, {info['bytes'] // 1024} KiB): {', '.join(parts)}"]
    for device, gpu in info["gpus"].items():
        if "error" in gpu:
            lines.append(f"  {device}: the image does not load: {gpu['error']}")
        elif gpu["from_ptx"]:
            lines.append(
                f"  {device} (sm_{gpu['device_arch']}): runs sm_{gpu['binary_arch']} code the driver compiled "
                f"from the image's PTX (ISA {gpu['ptx_version'] // 10}.{gpu['ptx_version'] % 10})"
            )
        else:
            lines.append(f"  {device} (sm_{gpu['device_arch']}): runs the image's SASS sm_{gpu['binary_arch']}")
    return "\n".join(lines) + "\n"
