"""Typed records that cost little to define: typing.NamedTuple's class syntax over a cheaper builder.

`class Finding(NamedTuple): ...` with typing's NamedTuple checks every field's annotation when the
class is made; with `from __future__ import annotations` each one is compiled (typing.ForwardRef),
~0.3 ms a class. The loader's path inside `import jax` defines about fifteen records, and that was a
third of what the plugin cost every process on a GPU machine (benchmarks/import_overhead.py --gpu-path).

Type checkers see typing.NamedTuple. At run time `NamedTuple` here builds the same kind of class --
a tuple subclass with `_fields`, `_field_defaults`, `_make`, `_replace`, `_asdict`, `__match_args__`,
a constructor taking positions and keywords, the same repr, equality, hashing and pickling -- reading
only the annotations' names, never their values. tests/unit/test_record.py holds it to typing's
behaviour. Stdlib only: the foundation layer, importable by everything.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:

    def _constructor(name: str, fields: tuple[str, ...], defaults: dict[str, Any]) -> Any:
        count = len(fields)
        required = [f for f in fields if f not in defaults]

        def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
            if len(args) == count and not kwargs:  # the common case: every field by position
                return tuple.__new__(cls, args)
            if len(args) > count:
                raise TypeError(
                    f"{name}.__new__() takes {count + 1} positional arguments but {len(args) + 1} were given"
                )
            values = list(args)
            for field in fields[len(args) :]:
                if field in kwargs:
                    values.append(kwargs.pop(field))
                elif field in defaults:
                    values.append(defaults[field])
                else:
                    missing = [f for f in required if f not in fields[: len(args)] and f not in kwargs and f != field]
                    names = ", ".join(repr(f) for f in [field, *missing])
                    raise TypeError(f"{name}.__new__() missing required argument(s): {names}")
            if kwargs:
                extra = next(iter(kwargs))
                how = "multiple values for argument" if extra in fields else "an unexpected keyword argument"
                raise TypeError(f"{name}.__new__() got {how} {extra!r}")
            return tuple.__new__(cls, values)

        return __new__

    class _RecordType(type):
        def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
            if namespace.get("_record_root"):
                return super().__new__(mcls, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults: dict[str, Any] = {}
            for field in fields:
                if field.startswith("_"):
                    raise ValueError(f"field names cannot start with an underscore: {field!r}")
                if field in namespace:
                    defaults[field] = namespace.pop(field)
                elif defaults:
                    raise TypeError(
                        f"non-default namedtuple field {field} cannot follow default field"
                        f"{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}"
                    )
            namespace.update(
                __slots__=(),
                _fields=fields,
                _field_defaults=defaults,
                __match_args__=fields,
                __new__=_constructor(name, fields, defaults),
            )
            for index, field in enumerate(fields):
                namespace[field] = property(itemgetter(index), doc=f"Alias for field number {index}")
            return super().__new__(mcls, name, bases, namespace)

    class NamedTuple(tuple, metaclass=_RecordType):
        """Base of the records (see the module's docstring); subclass it as typing.NamedTuple."""

        __slots__ = ()
        _record_root = True
        _fields: tuple[str, ...] = ()

        @classmethod
        def _make(cls, iterable: Any) -> Any:
            values = tuple(iterable)
            if len(values) != len(cls._fields):
                raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(values)}")
            return tuple.__new__(cls, values)

        def _replace(self, /, **changes: Any) -> Any:
            values = tuple(map(changes.pop, self._fields, self))
            if changes:
                raise ValueError(f"Got unexpected field names: {list(changes)!r}")
            return tuple.__new__(type(self), values)

        def _asdict(self) -> dict[str, Any]:
            return dict(zip(self._fields, self, strict=True))

        def __repr__(self) -> str:
            inner = ", ".join(f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True))
            return f"{type(self).__name__}({inner})"

        def __getnewargs__(self) -> tuple[Any, ...]:
            return tuple(self)
