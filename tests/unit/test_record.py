"""The plugin's NamedTuple behaves as typing's does: the same class, made twice, compared on everything
the code and its users may touch."""

from __future__ import annotations

import copy
import pickle
import typing
from typing import Any

import pytest

from jax_rocm7_plugin import _record


def _define(base: Any) -> Any:
    # Pickle finds classes by module and name: both live in this module's namespace under their own names.
    class Sample(base):
        """A record with a method and a property."""

        name: str
        size: int
        tags: tuple[str, ...] = ()
        note: str | None = None

        @property
        def label(self) -> str:
            return f"{self.name}:{self.size}"

        def grown(self, by: int) -> Sample:
            return self._replace(size=self.size + by)

    return Sample


Theirs = _define(typing.NamedTuple)
Theirs.__qualname__ = Theirs.__name__ = "Theirs"
Ours = _define(_record.NamedTuple)
Ours.__qualname__ = Ours.__name__ = "Ours"

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("a", 1), {}),
    (("a", 1, ("x",), "n"), {}),
    (("a",), {"size": 2}),
    ((), {"name": "a", "size": 2, "note": "n"}),
    (("a", 1), {"tags": ("y", "z")}),
]
BAD_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("a",), {}),
    (("a", 1, (), None, "extra"), {}),
    (("a", 1), {"colour": "red"}),
    (("a", 1), {"name": "b"}),
    ((), {"size": 1}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_construction_and_everything_a_record_offers(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    theirs, ours = Theirs(*args, **kwargs), Ours(*args, **kwargs)
    assert tuple(ours) == tuple(theirs) and isinstance(ours, tuple)
    assert ours == theirs and hash(ours) == hash(theirs)  # tuples compare by value, as typing's do
    assert repr(ours).replace("Ours", "Theirs") == repr(theirs)
    assert ours._fields == theirs._fields == Ours.__match_args__ == Theirs.__match_args__
    assert ours._field_defaults == theirs._field_defaults
    assert ours._asdict() == theirs._asdict()
    assert tuple(ours._replace(note="changed")) == tuple(theirs._replace(note="changed"))
    assert tuple(ours.grown(3)) == tuple(theirs.grown(3)) and type(ours.grown(3)) is Ours
    assert ours.label == theirs.label and ours.name == theirs.name and ours[1] == theirs[1]
    assert tuple(Ours._make(list(theirs))) == tuple(theirs)
    assert pickle.loads(pickle.dumps(ours)) == ours and type(pickle.loads(pickle.dumps(ours))) is Ours
    assert copy.copy(ours) == ours and copy.deepcopy(ours) == ours
    match ours:
        case Ours(name, size):
            assert (name, size) == (theirs.name, theirs.size)
    with pytest.raises(AttributeError):
        ours.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ours.undeclared = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args", "kwargs"), BAD_CALLS)
def test_bad_construction_raises_type_error_as_typing_does(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        Theirs(*args, **kwargs)
    with pytest.raises(TypeError):
        Ours(*args, **kwargs)


def test_bad_replace_and_make_raise_as_typing_does() -> None:
    for cls in (Theirs, Ours):
        with pytest.raises(ValueError, match="unexpected field names"):
            cls("a", 1)._replace(colour="red")
        with pytest.raises(TypeError):
            cls._make(["a"])


def test_bad_definitions_are_refused_as_typing_refuses_them() -> None:
    for base in (typing.NamedTuple, _record.NamedTuple):
        with pytest.raises(TypeError):

            class DefaultThenRequired(base):  # type: ignore[misc, valid-type]
                first: int = 0
                second: int

        with pytest.raises((ValueError, TypeError)):

            class Underscored(base):  # type: ignore[misc, valid-type]
                _hidden: int


def test_annotations_are_never_evaluated() -> None:
    """The point of it: a name only the type checker knows is fine (typing's compiles it; ours reads names)."""

    class Lazy(_record.NamedTuple):
        value: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821

    assert Lazy(1).value == 1
