"""The public API is complete and documented: every public name of stridex, stridex.typing,
stridex.ipc and stridex.jax is in its module's __all__, has a docstring (each public method and
property of its classes too) and an entry in docs/api.md, and help() names no private type."""

import importlib
import inspect
import pydoc
import re
from pathlib import Path

import pytest

import stridex

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["stridex", "stridex.typing", "stridex.ipc", "stridex.jax"]
# nanobind puts the signature first in __doc__ ("name(self) -> str" for a property without one):
# that line is no documentation.
SIGNATURE = re.compile(r"^[\w.]*\(.*\)( -> .*)?$")


def module(name):
    if name == "stridex.jax":
        pytest.importorskip("jax", reason="stridex.jax needs jax")
    return importlib.import_module(name)


def prose(doc):
    lines = (doc or "").strip().splitlines()
    while lines and (not lines[0].strip() or SIGNATURE.match(lines[0].strip())):
        lines = lines[1:]
    return "\n".join(lines).strip()


def documented_in_api_md():
    return set(re.findall(r"\.\. auto\w+:: ([\w.]+)", (ROOT / "docs" / "api.md").read_text()))


def stridex_objects(m):
    """The public objects of `m` that stridex defines (not the modules and types it imports)."""
    for name in dir(m):
        obj = getattr(m, name)
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        origin = getattr(obj, "__module__", None) if inspect.isclass(obj) or callable(obj) else type(obj).__module__
        if isinstance(origin, str) and origin.split(".")[0] == "stridex":
            yield name


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_name(name):
    m = module(name)
    assert sorted(set(stridex_objects(m)) - set(m.__all__)) == []
    assert all(hasattr(m, n) for n in m.__all__)


def test_all_of_stridex_holds_every_public_name_of_the_extension():
    public = {n for n in dir(stridex._stridex) if not n.startswith("_")}
    assert sorted(public - set(stridex.__all__)) == []


def test_star_import_gives_copy_and_empty_and_keeps_the_standard_typing():
    scope: dict = {}
    exec("import typing\nfrom stridex import *", scope)  # noqa: S102 - what a user's star import gives
    assert scope["copy"] is stridex.copy and scope["empty"] is stridex.empty
    assert scope["device_uuid"] is stridex.device_uuid
    assert scope["typing"].__name__ == "typing"  # stridex.typing is a submodule, not in __all__


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_has_an_entry_in_the_reference(name):
    m = module(name)
    missing = sorted(f"{name}.{n}" for n in m.__all__ if f"{name}.{n}" not in documented_in_api_md())
    assert missing == [], f"docs/api.md has no entry for {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_and_member_has_a_docstring(name):
    m = module(name)
    missing = []
    for n in m.__all__:
        obj = getattr(m, n)
        if not (inspect.isclass(obj) or callable(obj)):
            continue  # data (NO_SYNC's type is documented, __version__ is a str, ArrayT a TypeVar)
        if not prose(obj.__doc__):
            missing.append(f"{name}.{n}")
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if member.startswith("_") or not (callable(value) or inspect.isdatadescriptor(value)):
                    continue  # private, or a dataclass field's default
                if not prose(getattr(value, "__doc__", None)):
                    missing.append(f"{name}.{n}.{member}")
    assert missing == [], f"no docstring: {missing}"


@pytest.mark.parametrize(
    "member", ["permute", "reshape", "squeeze", "T", "item", "tolist", "__iter__", "__float__", "__bool__"]
)
def test_view_members_a_newcomer_looks_up_are_documented(member):
    assert prose(getattr(stridex.View, member).__doc__)


def test_help_names_no_private_type():
    text = pydoc.plain(pydoc.render_doc(stridex._stridex))
    assert "DtypeLike" in text  # the signatures name the public aliases ...
    assert re.findall(r"\b_(?:DtypeLike|DeviceLike|T|HasDtype)\b", text) == []  # ... never private ones
