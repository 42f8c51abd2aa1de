"""stridex: zero-copy CPU and GPU arrays across frameworks, with every detail right.

``stridex.view(obj)`` imports any array (DLPack, CUDA array interface, NumPy array interface,
buffer protocol) as a :class:`View`; a View is consumed by any framework through the same
protocols. The native core lives in ``stridex._stridex``; importing stridex imports no framework.
"""

from __future__ import annotations

from typing import Any

from ._stridex import *  # noqa: F401,F403  (view, from_pointer, DevicePtr, VirtualBuffer, ...)
from ._stridex import NO_SYNC, ConsumedCapsuleError, Device, DevicePtr, Dtype, NoSyncType, PointerInfo, View, VirtualBuffer
from ._stridex import __version__ as __version__  # CMakeLists.txt's project(VERSION): the one version
from ._stridex import cuda_available, device_count, from_pointer, pointer_info, view
from ._stridex import Shortcut, set_shortcuts, shortcuts  # the framework shortcuts and their switch
from ._shortcuts import shortcuts_disabled

# Views pickle as handles to shared memory (stridex.ipc); multiprocessing and Dask distributed
# learn about them only once they are imported, and stridex imports neither.
from . import _post_import

_post_import.install()


def dtype(spec: Any) -> Dtype:
    """A stridex Dtype from a name (``'float32'``), a Dtype, a NumPy dtype or scalar type
    (``np.float32``, ``ml_dtypes.bfloat16``), or anything with a ``.dtype`` (an array)."""
    if isinstance(spec, Dtype):
        return spec
    if isinstance(spec, str):
        return Dtype(spec)
    if isinstance(spec, type):  # a scalar type: np.float32, ml_dtypes.bfloat16, float, bool
        import numpy

        try:
            spec = numpy.dtype(spec)
        except TypeError:
            raise TypeError(f"expected a dtype name, a stridex.Dtype or a NumPy dtype, found the type "
                            f"{spec.__name__}") from None
    np_dtype = getattr(spec, "dtype", spec)  # arrays and dtype objects alike
    name = getattr(np_dtype, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"expected a dtype name, a stridex.Dtype or a NumPy dtype, found {type(spec).__name__}")
    return Dtype(name)


__all__ = ["NO_SYNC", "ConsumedCapsuleError", "Device", "DevicePtr", "Dtype", "NoSyncType", "PointerInfo", "View", "VirtualBuffer",
           "__version__", "cuda_available", "device_count", "dtype", "from_pointer", "pointer_info", "view",
           "Shortcut", "set_shortcuts", "shortcuts", "shortcuts_disabled"]
