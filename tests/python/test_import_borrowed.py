"""The exchange API's borrowed DLTensor (dltensor_from_py_object_no_sync), which stridex.view() uses
for producers whose quirk row says it describes everything the managed tensor would (torch: no
read-only tensors). The View then owns a reference to the object instead of a tensor that the
producer allocates and releases per import. Without a GPU: test producers whose type claims
torch's module; with torch: every case against the capsule path, CPU and CUDA."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import stridex
from conftest import cuda_device_count, shortcut_on

_internals = stridex._stridex._internals


@pytest.fixture
def testing():
    import stridex_testing

    return stridex_testing


@pytest.fixture
def torch_like(testing):
    """A test exchange producer on torch's quirk row (its module says torch)."""

    class Tensor(testing.ExchangeProducer):
        requires_grad = False
        conj_asked = 0
        conj = False

        def is_conj(self):
            type(self).conj_asked += 1
            return self.conj

    Tensor.__module__ = "torch"
    assert _internals.producer_for(Tensor) in ("torch", "torch<2.9")
    if _internals.producer_for(Tensor) != "torch":
        pytest.skip("the installed torch predates 2.9: its row does not borrow")
    return Tensor


def test_the_torch_row_borrows_and_refuses_like_dlpack_and_no_other_does():
    assert [r["name"] for r in _internals.producer_rows() if "torch_borrowed" in r["shortcuts"]] == ["torch"]
    assert [r["name"] for r in _internals.producer_rows() if r["exchange_skips_refusals"]] == ["torch"]


def test_what_tensor_dlpack_refuses_is_refused(torch_like):
    p = torch_like(np.zeros(3, np.float32))
    p.requires_grad = True
    with pytest.raises(BufferError, match="require gradient, use tensor.detach"):
        stridex.view(p)
    real = torch_like(np.zeros(3, np.float32))
    stridex.view(real)
    assert torch_like.conj_asked == 0  # only complex tensors can carry the conjugate bit
    z = torch_like(np.zeros(3, np.complex64))
    stridex.view(z)
    assert torch_like.conj_asked == 1
    z.conj = True
    with pytest.raises(BufferError, match="conjugate bit set.*resolve_conj"):
        stridex.view(z)


def test_only_tensors_that_can_require_grad_are_asked(torch_like):
    # torch lets only floating-point and complex tensors require grad: integer and boolean ones are
    # not asked (the getter is a fifth of an import), every other dtype is.
    asked = []

    class Counting(torch_like):
        @property
        def requires_grad(self):
            asked.append(str(np.asarray(self.array).dtype))
            return False

    for dtype in (np.int8, np.int64, np.uint16, np.bool_):
        stridex.view(Counting(np.zeros(3, dtype)))
    assert asked == []
    for dtype in (np.float16, np.float32, np.float64, np.complex64):
        stridex.view(Counting(np.zeros(3, dtype)))
    assert asked == ["float16", "float32", "float64", "complex64"]


def test_a_borrowed_tensor_is_owned_through_the_object(testing, torch_like, collect):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    p = torch_like(a)
    managed, borrowed = testing.exchange_calls()[0], testing.borrow_calls()
    before = sys.getrefcount(p)
    v = stridex.view(p)
    if not shortcut_on("torch_borrowed"):  # the managed tensor then: its deleter holds the object
        assert testing.exchange_calls()[0] == managed + 1 and testing.borrow_calls() == borrowed
        del v
        collect()
        return
    assert testing.exchange_calls()[0] == managed and testing.borrow_calls() == borrowed + 1
    assert (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly) == (
        a.ctypes.data,
        (3, 2),
        (4, 2),
        "float32",
        "cpu",
        False,
    )
    assert sys.getrefcount(p) == before + 2  # the View's owner and its source are the object itself
    np.from_dlpack(v)[1, 1] = 42
    assert a[1, 1] == 42  # aliasing, through the borrowed pointer
    del p
    collect()
    assert np.from_dlpack(v)[1, 1] == 42  # the View kept the object, and so the memory
    del v
    collect()


def test_such_a_refusal_is_final_not_a_cue_for_the_next_protocol(torch_like):
    # torch's __cuda_array_interface__ exports a conjugate view's memory as it is: after the
    # refusal, no other protocol of the tensor may be asked.
    asked = []

    class WithInterfaces(torch_like):
        def __dlpack__(self, **kwargs):
            asked.append("__dlpack__")
            return np.zeros(3, np.complex64).__dlpack__(**kwargs)

        @property
        def __cuda_array_interface__(self):
            asked.append("__cuda_array_interface__")
            return {"shape": (3,), "typestr": "<c8", "data": (0x1000, False), "version": 3}

    WithInterfaces.__module__ = "torch"
    z = WithInterfaces(np.zeros(3, np.complex64))
    z.conj = True
    with pytest.raises(BufferError, match="conjugate bit"):
        stridex.view(z)
    assert asked == []


def test_a_subclass_defined_elsewhere_keeps_torchs_refusals(torch_like):
    # A torch.Tensor subclass in user code (its __module__ is the user's) inherits torch's exchange
    # API, which exports a conjugate view unflagged: torch's row, and its refusals, go with it.
    class UserTensor(torch_like):
        pass

    UserTensor.__module__ = "mylib.tensors"
    assert _internals.producer_for(UserTensor) == _internals.producer_for(torch_like)
    z = UserTensor(np.zeros(3, np.complex64))
    z.conj = True
    with pytest.raises(BufferError, match="conjugate bit"):
        stridex.view(z)


def test_the_generic_row_takes_the_managed_tensor(testing):
    p = testing.ExchangeProducer(np.zeros(3, np.float32))
    managed, borrowed = testing.exchange_calls()[0], testing.borrow_calls()
    stridex.view(p)
    assert testing.exchange_calls()[0] == managed + 1 and testing.borrow_calls() == borrowed


def test_a_refusal_to_lend_is_the_producers_buffer_error(torch_like):
    # (without the shortcut torch_borrowed, the managed tensor is asked for, and refused)
    with pytest.raises(BufferError, match="refuses to lend" if shortcut_on("torch_borrowed") else "refuses to export"):
        stridex.view(torch_like(np.zeros(3, np.float32), refuse=True))


def test_a_borrowed_gpu_tensor_is_ready_on_the_producers_stream(testing, torch_like, recorded_orders):
    testing.set_work_stream(0x5000)
    try:
        v = stridex.view(torch_like(np.zeros(3, np.float32), device=(2, 0)))
        assert v.stream == 1 and testing.captured_orders() == [(0x5000, 1, "cuda:0")]
        v = stridex.view(torch_like(np.zeros(3, np.float32), device=(2, 0)), stream=stridex.NO_SYNC)
        assert v.stream == 0x5000 and testing.captured_orders() == []
    finally:
        testing.set_work_stream(0)


# ---- real torch: the borrowed tensor against the capsule path ------------------------------------


def _torch():
    return pytest.importorskip("torch")


def outcome(make):
    """The View's fields, or "refused" (torch's __dlpack__ and its exchange API word refusals
    differently: RuntimeError against BufferError for a nested tensor, say)."""
    try:
        v = make()
    except Exception:  # noqa: BLE001
        return "refused"
    return (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly)


def tensors(t, device):
    """Tensors as users hand them over, refusals included."""
    yield t.zeros((3, 4), device=device)
    yield t.arange(24, dtype=t.float64, device=device).reshape(2, 3, 4).transpose(0, 2)[:, 1:, ::2]
    yield t.zeros((), dtype=t.int8, device=device)
    yield t.zeros((0, 5), dtype=t.float16, device=device)
    yield t.zeros(4, dtype=t.bfloat16, device=device)
    yield t.zeros(4, dtype=t.bool, device=device)
    yield t.zeros(4, dtype=t.complex64, device=device)
    yield t.zeros(4, dtype=t.uint16, device=device)
    yield t.zeros(1, 3, device=device).expand(4, 3)  # a zero stride
    yield t.zeros(4, requires_grad=True, device=device)
    yield t.zeros(4, dtype=t.complex64, device=device).conj()  # the conjugate bit
    yield t.zeros(4, dtype=t.complex64, device=device).conj().resolve_conj()
    yield t.zeros(4, dtype=t.float32, device=device)._neg_view()  # the negative bit: torch exports it unflagged
    yield t.zeros(4, device=device).to_sparse()
    yield t.zeros(4, device="meta")
    yield t.nested.nested_tensor([t.zeros(2), t.zeros(3)], device=device)
    with t.inference_mode():
        yield t.zeros(4, device=device)
    if hasattr(t, "float8_e4m3fn"):
        yield t.zeros(4, dtype=t.float8_e4m3fn, device=device)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_torch_borrowed_views_equal_the_capsule_path(device):
    t = _torch()
    if device == "cuda" and (cuda_device_count() == 0 or not t.cuda.is_available()):
        pytest.skip("no CUDA device for torch")
    assert _internals.producer_for(t.Tensor) == "torch"
    for x in tensors(t, device):
        borrowed = outcome(lambda: stridex.view(x))
        capsule = outcome(lambda: stridex.view(x.__dlpack__(max_version=(1, 3))))
        assert borrowed == capsule, (x.dtype, x.layout, borrowed, capsule)
    with pytest.raises(BufferError, match="require gradient"):
        stridex.view(t.zeros(2, requires_grad=True, device=device))
    with pytest.raises(BufferError, match="conjugate bit"):
        stridex.view(t.zeros(2, dtype=t.complex64, device=device).conj())
    # The refusal holds through a View in the middle, as torch's own suite expects of __dlpack__.
    with pytest.raises(BufferError):
        t.from_dlpack(stridex.view(t.zeros(2, requires_grad=True, device=device)))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_torch_subclass_in_user_code_imports_as_torch_does(device):
    # Its type's module is the user's, not torch's: the row comes from its base, torch.Tensor.
    t = _torch()
    if device == "cuda" and (cuda_device_count() == 0 or not t.cuda.is_available()):
        pytest.skip("no CUDA device for torch")

    class UserTensor(t.Tensor):
        pass

    UserTensor.__module__ = "mylib.tensors"
    assert _internals.producer_for(UserTensor) == "torch"
    for x in tensors(t, device):
        try:
            sub = x.as_subclass(UserTensor)
        except Exception:  # noqa: BLE001 - a layout torch will not subclass: nothing to compare
            continue
        assert outcome(lambda: stridex.view(sub)) == outcome(lambda: stridex.view(x)), (x.dtype, x.layout)
    with pytest.raises(BufferError, match="conjugate bit"):
        stridex.view(t.zeros(2, dtype=t.complex64, device=device).conj().as_subclass(UserTensor))
    with pytest.raises(BufferError, match="require gradient"):
        stridex.view(t.zeros(2, requires_grad=True, device=device).as_subclass(UserTensor))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_proxy_of_a_torch_tensor_imports_as_torch_does(device):
    # A wrapper forwarding attributes: no exchange API on its type, so torch's bound __dlpack__ is
    # called, with torch's quirks (stream=None spelt out, the device made current, refusals final).
    t = _torch()
    if device == "cuda" and (cuda_device_count() == 0 or not t.cuda.is_available()):
        pytest.skip("no CUDA device for torch")

    class Proxy:
        def __init__(self, target):
            self._target = target

        def __getattr__(self, name):
            return getattr(self._target, name)

    for x in tensors(t, device):
        proxied = outcome(lambda: stridex.view(Proxy(x)))
        capsule = outcome(lambda: stridex.view(x.__dlpack__(max_version=(1, 3))))
        assert proxied == capsule, (x.dtype, x.layout, proxied, capsule)
    x = t.zeros(3, device=device)
    assert stridex.view(Proxy(x)).stream == stridex.view(x).stream
    with pytest.raises(BufferError, match="conjugate bit"):
        stridex.view(Proxy(t.zeros(2, dtype=t.complex64, device=device).conj()))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_torch_borrowed_view_aliases_and_keeps_the_tensor(device, collect):
    t = _torch()
    if device == "cuda" and (cuda_device_count() == 0 or not t.cuda.is_available()):
        pytest.skip("no CUDA device for torch")
    x = t.arange(6, dtype=t.float32, device=device)
    v = stridex.view(x)
    y = t.from_dlpack(v)
    y[1] = 42
    assert float(x[1]) == 42
    del x, y
    collect()
    assert t.from_dlpack(v).tolist() == [0, 42, 2, 3, 4, 5]
