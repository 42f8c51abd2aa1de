"""stridex signatures inside ``jax.jit``: XLA FFI targets made by ``<stridex/xla/ffi.hpp>``.

A C++ function whose parameters are ``stridex::Arg<...>`` is bound for XLA with
``stridex::xla_ffi::Host<&fn, "x", ...>`` (or ``Cuda<...>``); its ``target`` (a C struct
``StridexXlaTarget``: the handler, its platform and its signature as JSON) is exported by the
extension module as a capsule named ``stridex.xla_target``. :func:`ffi_function` registers the
handler with ``jax.ffi.register_ffi_target`` and returns a callable that calls it through
``jax.ffi.ffi_call``, checking every constraint at trace time from the abstract values::

    fill = stridex.jax.ffi_function("example_fill", ext.xla["fill"])
    y = jax.jit(fill)(x, value=2.0)        # the array in, the filled array out

Parameters map as in ``docs/extensions.md`` ("Inside jax.jit"): arrays are operands, a writable one
is written in place (its operand aliased to a result), an ``arg::output`` one is a result, and
scalars are attributes (static: known at trace time). Results are the writable and output
parameters in order, then the function's return value (a 0-d array). Importing this module imports
JAX; ``import stridex`` never does.
"""

from __future__ import annotations

import ctypes
import json
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import jax
import numpy as np

__all__ = ["Param", "Target", "FfiFunction", "read_target", "ffi_function"]

TARGET_CAPSULE = b"stridex.xla_target"
TARGET_ABI = 1


class _TargetStruct(ctypes.Structure):
    # StridexXlaTarget (include/stridex/xla/ffi.hpp); abi 1 fields, which later versions keep.
    _fields_ = [
        ("abi", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("handler", ctypes.c_void_p),
        ("platform", ctypes.c_char_p),
        ("signature", ctypes.c_char_p),
    ]


@dataclass(frozen=True)
class Param:
    """One parameter of the C++ function, as its signature describes it."""

    index: int
    name: str
    kind: str  # "in", "inout" (written in place), "out" (a result only) or "attr" (a static scalar)
    dtype: str | None  # the required dtype's name (always set for attributes); None: any
    constraints: str = ""  # "stridex.View[dtype=float32, ndim=1, ...]", as the casters print it
    ndim: int = -1
    shape: tuple[int, ...] | None = None  # -1 for an extent arg::any takes
    device: str | None = None  # "cpu", "cuda", ...: the device type required
    device_id: int = -1
    order: str = "any"  # "C", "F" or "any"
    may_copy: bool = False
    caller_stream: bool = False

    @property
    def is_array(self) -> bool:
        """True for an array parameter (in, inout, out); False for a static attribute."""
        return self.kind != "attr"


@dataclass(frozen=True)
class Target:
    """A handler and its signature, read from a ``StridexXlaTarget``."""

    handler: int  # the XLA_FFI_Handler's address
    platform: str  # "cpu" or "CUDA", as jax.ffi.register_ffi_target takes it
    params: tuple[Param, ...]
    returns: str | None  # the dtype of the return value (a 0-d result), or None
    signature: str  # the JSON it was read from

    @property
    def device_type(self) -> str:
        """The device type the handler runs on, in stridex's words: ``"cpu"`` or ``"cuda"``."""
        return "cpu" if self.platform == "cpu" else "cuda"


def read_target(target: Any) -> Target:
    """The handler and signature in ``target``: a capsule named ``stridex.xla_target`` (what the
    extension modules export) or the address (an int) of a ``StridexXlaTarget`` (a C symbol read
    with ctypes)."""
    if isinstance(target, int) and not isinstance(target, bool):
        if target == 0:
            raise ValueError("expected the address of a StridexXlaTarget, found NULL")
        address = target
    elif type(target).__name__ == "PyCapsule":
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        name = get_name(target)
        if name != TARGET_CAPSULE:
            found = "an unnamed capsule" if name is None else f"a capsule named {name.decode(errors='replace')!r}"
            raise TypeError(f"expected a capsule named 'stridex.xla_target', found {found}")
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        address = get_pointer(target, TARGET_CAPSULE)
    else:
        raise TypeError(
            f"expected a capsule named 'stridex.xla_target' or the address of a StridexXlaTarget, "
            f"found {type(target).__name__}"
        )
    struct = _TargetStruct.from_address(address)
    if struct.abi != TARGET_ABI:
        raise ValueError(f"expected a StridexXlaTarget of abi {TARGET_ABI}, found abi {struct.abi}")
    if not struct.handler or not struct.platform or not struct.signature:
        raise ValueError("the StridexXlaTarget has a NULL handler, platform or signature")
    text = struct.signature.decode()
    sig = json.loads(text)
    params = tuple(
        Param(
            index=i,
            name=p["name"],
            kind=p["kind"],
            dtype=p["dtype"],
            constraints=p.get("constraints", ""),
            ndim=p.get("ndim", -1),
            shape=None if p.get("shape") is None else tuple(p["shape"]),
            device=p.get("device"),
            device_id=p.get("device_id", -1),
            order=p.get("order", "any"),
            may_copy=p.get("may_copy", False),
            caller_stream=p.get("caller_stream", False),
        )
        for i, p in enumerate(sig["params"])
    )
    return Target(
        handler=struct.handler,
        platform=struct.platform.decode(),
        params=params,
        returns=sig.get("returns"),
        signature=text,
    )


# (name, platform) -> handler address: a name is registered once, and never for two handlers.
_registered: dict[tuple[str, str], int] = {}


def _register(name: str, target: Target) -> None:
    key = (name, target.platform)
    known = _registered.get(key)
    if known == target.handler:
        return
    if known is not None:
        raise ValueError(
            f"the XLA FFI target {name!r} is registered for {target.platform} with another handler "
            f"already: give this one another name"
        )
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(target.handler), platform=target.platform)
    _registered[key] = target.handler


# ---- trace-time checks ---------------------------------------------------------------------------


def _x64() -> bool:
    # Whether JAX keeps 64-bit dtypes here (jax_enable_x64, or its context manager around the call).
    return bool(np.dtype(jax.dtypes.canonicalize_dtype(np.float64)) == np.float64)


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(e) for e in shape) + (",)" if len(shape) == 1 else ")")


def _summary(dtype: np.dtype, shape: Sequence[int], device_type: str) -> str:
    # The terms of the C++ messages (stridex::view_summary): what an XLA buffer of this aval is.
    return f"{dtype.name}, shape={_shape_text(shape)}, device={device_type}"


def _is_f_contiguous(shape: Sequence[int]) -> bool:
    # A dense row-major buffer (every XLA buffer here) is F-contiguous by NumPy's rules when at most
    # one axis has an extent above 1, or it is empty (stridex::Layout::is_f_contiguous).
    return 0 in shape or sum(1 for e in shape if e != 1) <= 1


def _violation(p: Param, dtype: np.dtype, shape: Sequence[int], device_type: str) -> str | None:
    """What about this aval breaks p's constraints, or None."""
    if p.dtype is not None and dtype.name != p.dtype:
        return "dtype"
    if p.ndim != -1 and len(shape) != p.ndim:
        return "rank"
    if p.shape is not None and any(want != -1 and got != want for want, got in zip(p.shape, shape)):
        return "shape"
    if p.device is not None and p.device != device_type:
        return "device"
    if p.order == "F" and not p.may_copy and not _is_f_contiguous(shape):
        return "order"
    return None


class FfiFunction:
    """A registered target, callable inside ``jax.jit`` (and eagerly) with the C++ function's
    parameters, positionally or by name."""

    def __init__(self, name: str, target: Target, result_shapes: Mapping[str, Any], ffi_options: dict[str, Any]):
        self.name = name
        self.target = target
        self._result_shapes = dict(result_shapes)
        self._ffi_options = ffi_options
        unknown = set(self._result_shapes) - {p.name for p in target.params if p.kind == "out"}
        if unknown:
            outputs = [p.name for p in target.params if p.kind == "out"] or "none"
            raise TypeError(
                f"{name}: result_shapes names {sorted(unknown)}, which are no output parameters (outputs: {outputs})"
            )

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.constraints or p.dtype}" for p in self.target.params)
        return f"<stridex.jax.FfiFunction {self.name}({params}) on {self.target.platform}>"

    def _fail(self, p: Param, expected: str, found: str) -> TypeError:
        return TypeError(f"{self.name}: parameter {p.index} ({p.name}): expected {expected}, found {found}")

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        inputs = [p for p in self.target.params if p.kind != "out"]
        if len(args) > len(inputs):
            raise TypeError(
                f"{self.name}() takes {len(inputs)} arguments ({', '.join(p.name for p in inputs)}), {len(args)} given"
            )
        values: dict[str, Any] = {p.name: a for p, a in zip(inputs, args)}
        for key, value in kwargs.items():
            p = next((q for q in self.target.params if q.name == key), None)
            if p is None or p.kind == "out":
                what = "an output (give its shape in result_shapes)" if p is not None else "no parameter"
                raise TypeError(f"{self.name}() got an unexpected argument {key!r}: {what}")
            if key in values:
                raise TypeError(f"{self.name}() got several values for {key!r}")
            values[key] = value
        missing = [p.name for p in inputs if p.name not in values]
        if missing:
            raise TypeError(f"{self.name}() is missing {', '.join(missing)}")
        return [values[p.name] for p in inputs]

    def _attribute(self, p: Param, value: Any) -> Any:
        if isinstance(value, jax.core.Tracer):
            raise self._fail(
                p,
                f"a {p.dtype} attribute, known at trace time (an XLA attribute is static: close "
                f"over it, or mark it static in jax.jit)",
                "a traced value",
            )
        if getattr(value, "shape", ()) != ():
            raise self._fail(p, f"a {p.dtype} attribute", f"{type(value).__name__} of shape {getattr(value, 'shape')}")
        assert p.dtype is not None
        scalar_type = np.dtype(p.dtype).type
        try:
            if p.dtype == "bool":
                if not isinstance(value, (bool, np.bool_)):
                    raise TypeError
                return np.bool_(value)
            if np.issubdtype(scalar_type, np.integer):
                integer = operator.index(value)
                info = np.iinfo(scalar_type)
                if not info.min <= integer <= info.max:
                    raise TypeError
                return scalar_type(integer)
            if np.issubdtype(scalar_type, np.complexfloating):
                return scalar_type(complex(value))
            if isinstance(value, (complex, np.complexfloating)):
                raise TypeError
            return scalar_type(float(value))
        except (TypeError, ValueError, OverflowError):
            raise self._fail(p, f"a {p.dtype} attribute", f"{type(value).__name__} {value!r}") from None

    def _result(self, p: Param, operands: list[Any]) -> jax.ShapeDtypeStruct:
        spec = self._result_shapes.get(p.name)
        if callable(spec):
            spec = spec(*operands)
        if spec is None:
            if p.dtype is None or p.shape is None or -1 in p.shape:
                raise TypeError(
                    f"{self.name}: parameter {p.index} ({p.name}) is an output of {p.constraints}, whose "
                    f"shape the constraints do not fix: give result_shapes={{'{p.name}': ...}} (a "
                    f"jax.ShapeDtypeStruct, a shape, or a function of the array arguments)"
                )
            spec = p.shape
        if isinstance(spec, jax.ShapeDtypeStruct):
            shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
        elif hasattr(spec, "shape") and hasattr(spec, "dtype"):
            shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
        else:
            if p.dtype is None:
                raise TypeError(
                    f"{self.name}: parameter {p.index} ({p.name}) has no dtype constraint: give its "
                    f"result_shapes entry as a jax.ShapeDtypeStruct"
                )
            shape, dtype = tuple(operator.index(e) for e in spec), np.dtype(p.dtype)
        self._check_array(p, dtype, shape)
        return jax.ShapeDtypeStruct(shape, dtype)

    def _check_array(self, p: Param, dtype: np.dtype, shape: Sequence[int]) -> None:
        problem = _violation(p, dtype, shape, self.target.device_type)
        if problem is None:
            return
        found = _summary(dtype, shape, self.target.device_type)
        if (
            problem == "dtype"
            and p.dtype is not None
            and not _x64()
            and np.dtype(p.dtype).itemsize == 8
            and np.dtype(p.dtype).kind in "fiuc"
            and dtype.itemsize == 4
        ):
            found += " (JAX has 64-bit dtypes only with jax_enable_x64)"
        if problem == "order":
            found += " (XLA buffers are row-major)"
        raise self._fail(p, p.constraints, found)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = self.target
        values = self._bind(args, kwargs)
        operands: list[Any] = []
        attrs: dict[str, Any] = {}
        operand_of: dict[str, int] = {}
        for p, value in zip((q for q in target.params if q.kind != "out"), values):
            if p.kind == "attr":
                attrs[p.name] = self._attribute(p, value)
                continue
            if not hasattr(value, "shape") or not hasattr(value, "dtype"):
                value = jax.numpy.asarray(value)
            # What XLA will hold: a NumPy float64 array is float32 to JAX without jax_enable_x64.
            dtype = np.dtype(jax.dtypes.canonicalize_dtype(value.dtype))
            self._check_array(p, dtype, tuple(value.shape))
            operand_of[p.name] = len(operands)
            operands.append(value)
        results: list[jax.ShapeDtypeStruct] = []
        aliases: dict[int, int] = {}
        for p in target.params:
            if p.kind == "inout":
                aliases[operand_of[p.name]] = len(results)
                operand = operands[operand_of[p.name]]
                results.append(jax.ShapeDtypeStruct(tuple(operand.shape), operand.dtype))
            elif p.kind == "out":
                results.append(self._result(p, operands))
        if target.returns is not None:
            dtype = np.dtype(target.returns)
            if not _x64() and dtype.itemsize == 8 and dtype.kind in "fiu":
                raise TypeError(
                    f"{self.name}: returns {dtype.name}, which JAX has only with jax_enable_x64 "
                    f"(jax.config.update('jax_enable_x64', True))"
                )
            results.append(jax.ShapeDtypeStruct((), dtype))
        options = dict(self._ffi_options)
        if not results:
            options.setdefault("has_side_effect", True)  # nothing to return: kept only for its effects
        out = jax.ffi.ffi_call(self.name, results, input_output_aliases=aliases or None, **options)(*operands, **attrs)
        if not results:
            return None
        return out[0] if len(results) == 1 else tuple(out)


def ffi_function(
    name: str,
    target: Any,
    *,
    result_shapes: Mapping[str, Any] | None = None,
    vmap_method: str | None = None,
    **ffi_call_options: Any,
) -> FfiFunction:
    """Registers ``target``'s handler as the XLA FFI target ``name`` (for the platform the target
    was built for) and returns a callable usable inside ``jax.jit``.

    ``target``: a capsule named ``stridex.xla_target`` or the address of a ``StridexXlaTarget``.
    ``result_shapes``: for each ``arg::output`` parameter whose constraints do not fix its dtype and
    shape, a ``jax.ShapeDtypeStruct``, a shape (the dtype is the constraint's), or a function of the
    array arguments (in order) returning either. ``vmap_method`` and any other keyword go to
    ``jax.ffi.ffi_call``. A name is registered once per platform; registering it for another handler
    is a ValueError."""
    parsed = read_target(target)
    _register(name, parsed)
    options: dict[str, Any] = dict(ffi_call_options)
    if vmap_method is not None:
        options["vmap_method"] = vmap_method
    return FfiFunction(name, parsed, result_shapes or {}, options)
