"""What is installed: frameworks (imported lazily, never fatally) and devices.

A framework is one of three things here: ``ok`` (imported, version known), ``missing`` (not
installed) or ``broken`` (installed, but importing it raised: the doctor shows the reason and goes
on). Imports print nothing to stdout: some frameworks announce themselves there (Warp), which would
corrupt ``--json``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Known:
    name: str  # what the user types (--frameworks) and what the matrix prints
    module: str  # what is imported
    dists: tuple[str, ...]  # distribution names to read a version from, first found wins
    role: str = "arrays"  # "arrays": producer and/or consumer; "dtypes": only provides dtypes


# The frameworks the doctor knows, in the order it prints them.
KNOWN: tuple[Known, ...] = (
    Known("numpy", "numpy", ("numpy",)),
    Known("ml_dtypes", "ml_dtypes", ("ml-dtypes", "ml_dtypes"), role="dtypes"),
    Known("torch", "torch", ("torch",)),
    Known("cupy", "cupy", ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0")),
    Known("jax", "jax", ("jax",)),
    Known("warp", "warp", ("warp-lang",)),
    Known("numba-cuda", "numba.cuda", ("numba-cuda", "numba")),
    Known("cuda.core", "cuda.core", ("cuda-core", "cuda_core")),
    Known("tensorflow", "tensorflow", ("tensorflow", "tensorflow-cpu", "tf-nightly")),
    Known("mlx", "mlx.core", ("mlx",)),
    Known("paddle", "paddle", ("paddlepaddle", "paddlepaddle-gpu")),
    # Python's own buffers (buffers.py): on every machine, so a fresh install checks more than NumPy
    Known("memoryview", "builtins", ()),
    Known("ctypes", "ctypes", ()),
)
KNOWN_BY_NAME = {k.name: k for k in KNOWN}


@dataclass
class FrameworkInfo:
    name: str
    module_name: str
    status: str  # "ok" | "missing" | "broken"
    version: str | None = None
    reason: str | None = None  # why missing or broken
    role: str = "arrays"
    module: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        if self.status == "ok":
            return f"{self.name} {self.version or '(version unknown)'}"
        if self.status == "missing":
            return f"{self.name}: not installed"
        return f"{self.name}: import failed: {self.reason}"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "module": self.module_name,
            "status": self.status,
            "version": self.version,
            "reason": self.reason,
            "role": self.role,
        }

    @classmethod
    def from_json(cls, d: dict) -> FrameworkInfo:
        return cls(d["name"], d["module"], d["status"], d.get("version"), d.get("reason"), d.get("role", "arrays"))


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as "Type: first line of its message", shortened: what a cell's reason shows."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > limit:
        first = first[: limit - 3] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _version(module: Any, dists: tuple[str, ...]) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken metadata folder is not worth a crash
            continue
    version = getattr(module, "__version__", None)
    if version is None and getattr(module, "__name__", "") in sys.stdlib_module_names:
        return f"Python {platform.python_version()}"  # the standard library's version is Python's
    return str(version) if version is not None else None


def _is_installed(module_name: str) -> bool:
    top = module_name.split(".")[0]
    try:
        if importlib.util.find_spec(top) is None:
            return False
        if top != module_name:  # e.g. numba installed but not numba.cuda, mlx without mlx.core
            return importlib.util.find_spec(module_name) is not None
        return True
    except (ImportError, ValueError):
        return False
    except Exception:  # noqa: BLE001 - find_spec itself failed: let the import show the reason
        return True


# Set before any framework is imported (users may override them): JAX preallocates 75% of GPU memory
# and TensorFlow all of it, which would starve every other framework in the matrix.
GPU_MEMORY_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def probe(
    name: str,
    module_name: str,
    dists: tuple[str, ...] = (),
    role: str = "arrays",
    importer: Callable[[str], Any] = importlib.import_module,
) -> FrameworkInfo:
    """Import one framework. Never raises (KeyboardInterrupt aside): a failure becomes the status."""
    for key, value in GPU_MEMORY_ENV.items():
        os.environ.setdefault(key, value)
    if module_name not in sys.modules and not _is_installed(module_name):
        return FrameworkInfo(name, module_name, "missing", role=role, reason="not installed")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            module = importer(module_name)
    except KeyboardInterrupt:
        raise
    except ModuleNotFoundError as exc:
        # the module itself missing is "missing"; a dependency it needs missing is "broken"
        if exc.name and module_name.startswith(exc.name):
            return FrameworkInfo(name, module_name, "missing", role=role, reason="not installed")
        return FrameworkInfo(name, module_name, "broken", role=role, reason=one_line(exc))
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends from a broken import too
        return FrameworkInfo(name, module_name, "broken", role=role, reason=one_line(exc))
    return FrameworkInfo(name, module_name, "ok", version=_version(module, dists or (name,)), role=role, module=module)


def discover(names: list[str] | None = None, extra: list[Known] | None = None) -> list[FrameworkInfo]:
    """Probe the known frameworks (or only `names`), plus `extra` ones, in the known order."""
    known = list(KNOWN) + list(extra or [])
    if names is not None:
        wanted = set(names)
        unknown = wanted - {k.name for k in known}
        if unknown:
            raise ValueError(
                f"unknown framework(s): {', '.join(sorted(unknown))}; known: {', '.join(k.name for k in known)}"
            )
        known = [k for k in known if k.name in wanted]
    return [probe(k.name, k.module, k.dists, k.role) for k in known]


# ---------------------------------------------------------------------------------------------
# Devices


@dataclass
class DeviceReport:
    devices: list[str]  # "cpu", "cuda:0", ...
    cuda_source: str  # who told us about CUDA devices
    cuda_note: str | None = None  # why there are none, when there are none
    names: dict[str, str] = field(default_factory=dict)  # "cuda:0" -> "NVIDIA H100 80GB HBM3"

    def to_json(self) -> dict:
        return {
            "devices": self.devices,
            "cuda_source": self.cuda_source,
            "cuda_note": self.cuda_note,
            "names": self.names,
        }

    @classmethod
    def from_json(cls, d: dict) -> DeviceReport:
        return cls(list(d["devices"]), d["cuda_source"], d.get("cuda_note"), dict(d.get("names") or {}))


def discover_devices(stridex_module: Any, frameworks: dict[str, FrameworkInfo]) -> DeviceReport:
    """CPU always; CUDA GPUs from stridex's CUDA layer, else from a framework that can count them."""
    notes = []
    count = None
    source = "none"
    available = getattr(stridex_module, "cuda_available", None)
    device_count = getattr(stridex_module, "device_count", None)
    if available is not None and device_count is not None:
        try:
            count = int(device_count()) if available() else 0
            source = "stridex"
        except Exception as exc:  # noqa: BLE001
            notes.append(f"stridex.device_count() failed: {one_line(exc)}")
    else:
        notes.append("stridex has no CUDA layer (stridex.cuda_available/device_count missing)")
    names: dict[str, str] = {}
    torch = frameworks.get("torch")
    cupy = frameworks.get("cupy")
    if count is None or count == 0:
        # stridex missing its CUDA layer, or it found none: ask the frameworks (and say so)
        if torch is not None and torch.ok:
            try:
                if torch.module.cuda.is_available():
                    count, source = torch.module.cuda.device_count(), "torch"
            except Exception as exc:  # noqa: BLE001
                notes.append(f"torch.cuda: {one_line(exc)}")
        if not count and cupy is not None and cupy.ok:
            try:
                count, source = cupy.module.cuda.runtime.getDeviceCount(), "cupy"
            except Exception as exc:  # noqa: BLE001
                notes.append(f"cupy: {one_line(exc)}")
    count = count or 0
    if torch is not None and torch.ok and count:
        for i in range(count):
            with contextlib.suppress(Exception):
                names[f"cuda:{i}"] = torch.module.cuda.get_device_name(i)
    devices = ["cpu"] + [f"cuda:{i}" for i in range(count)]
    note = None if count else ("; ".join(notes) or "no CUDA device found")
    return DeviceReport(devices, source if count else "none", note, names)
