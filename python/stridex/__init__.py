"""stridex: zero-copy CPU and GPU arrays across frameworks, with every detail right.

``stridex.view(obj)`` imports any array (DLPack, CUDA array interface, NumPy array interface,
buffer protocol) as a :class:`View`; a View is consumed by any framework through the same
protocols. The native core lives in ``stridex._stridex``.
"""

from ._stridex import Device, Dtype, View  # noqa: F401
from ._stridex import *  # noqa: F401,F403  (view, from_pointer, DevicePtr, VirtualBuffer, ...)

__version__ = "0.1.0"

# Views pickle as handles to shared memory (stridex.ipc); multiprocessing and Dask distributed
# learn about them only once they are imported, and stridex imports neither.
from . import _post_import

_post_import.install()


def dtype(spec) -> Dtype:
    """A stridex Dtype from a name ('float32'), a Dtype, or anything with a NumPy dtype."""
    if isinstance(spec, Dtype):
        return spec
    if isinstance(spec, str):
        return Dtype(spec)
    np_dtype = getattr(spec, "dtype", spec)  # arrays and dtype objects alike
    name = getattr(np_dtype, "name", None)
    if name is None:
        raise TypeError(f"expected a dtype name, a stridex.Dtype or a NumPy dtype, found {type(spec).__name__}")
    return Dtype("bool" if name == "bool" else name)
