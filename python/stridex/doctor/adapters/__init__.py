"""The framework adapters, one module per framework, and the registry the doctor reads."""

from __future__ import annotations

from ..adapter import Adapter
from .buffers import CtypesAdapter, MemoryviewAdapter
from .cuda_core_adapter import CudaCoreAdapter
from .cupy_adapter import CupyAdapter
from .experimental import TensorflowAdapter, MlxAdapter, PaddleAdapter
from .jax_adapter import JaxAdapter
from .numba_adapter import NumbaAdapter
from .numpy_adapter import NumpyAdapter
from .torch_adapter import TorchAdapter
from .warp_adapter import WarpAdapter

ADAPTERS: dict[str, type[Adapter]] = {
    "numpy": NumpyAdapter,
    "torch": TorchAdapter,
    "cupy": CupyAdapter,
    "jax": JaxAdapter,
    "warp": WarpAdapter,
    "numba-cuda": NumbaAdapter,
    "cuda.core": CudaCoreAdapter,
    "tensorflow": TensorflowAdapter,
    "mlx": MlxAdapter,
    "paddle": PaddleAdapter,
    "memoryview": MemoryviewAdapter,
    "ctypes": CtypesAdapter,
}

__all__ = [
    "ADAPTERS",
    "Adapter",
    "NumpyAdapter",
    "TorchAdapter",
    "CupyAdapter",
    "JaxAdapter",
    "WarpAdapter",
    "NumbaAdapter",
    "CudaCoreAdapter",
    "TensorflowAdapter",
    "MlxAdapter",
    "PaddleAdapter",
    "MemoryviewAdapter",
    "CtypesAdapter",
]
