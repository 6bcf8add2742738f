"""A layer's fields are the parameters of the function it calls, read from its signature.

Each op's parameters (names, order, kinds, defaults) are written once, in its public
function; the layers of every framework declare them as dataclass fields when the class is
created, less the arrays the layer is called on and the arguments its framework fixes.  So
``inspect.signature`` of a layer (``help``, IPython, the API pages) and its error for a
missing or unknown argument are those of a hand-written constructor; a static type checker
sees a constructor that takes any arguments.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def options(
    function: Callable[..., Any],
    call: Callable[..., Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    without: Collection[str] = (),
    keep: Collection[str] | None = None,
) -> list[inspect.Parameter]:
    """The parameters of ``function`` that a layer takes at construction: all but the inputs
    that the layer's ``call(self, ...)`` takes by position (``function``'s first parameters,
    by the same names) and those ``without``, only those in ``keep`` where given, with the
    layer's ``defaults`` where they are not the function's."""
    inputs = [p.name for p in inspect.signature(call).parameters.values() if p.kind in _POSITIONAL]
    inputs = inputs[1:]  # after `self`
    parameters = list(inspect.signature(function).parameters.values())
    first = [p.name for p in parameters[: len(inputs)]]
    if first != inputs:
        raise TypeError(
            f"a layer called on {inputs} cannot call `{function.__name__}`, whose first "
            f"parameters are {first}."
        )
    defaults = defaults or {}
    return [
        p.replace(default=defaults.get(p.name, p.default))
        for p in parameters[len(inputs) :]
        if p.name not in without and (keep is None or p.name in keep)
    ]


def declare(
    cls: type,
    parameters: Sequence[inspect.Parameter],
    field: Callable[..., Any] = dataclasses.field,
    keyword_only: bool = True,
    **metadata: Any,
) -> None:
    """Declares ``parameters`` as the fields of ``cls`` (its own annotations, in order), for
    the dataclass transform that follows: ``field(default=..., kw_only=..., **metadata)``,
    a keyword-only parameter keyword-only where ``keyword_only``."""
    cls.__annotations__ = {p.name: p.annotation for p in parameters}
    for p in parameters:
        default = dataclasses.MISSING if p.default is p.empty else p.default
        kw_only = keyword_only and p.kind is p.KEYWORD_ONLY
        setattr(cls, p.name, field(default=default, kw_only=kw_only, **metadata))


def values(module: Any) -> dict[str, Any]:
    """The fields of the dataclass ``module`` by name (Flax's ``parent`` and ``name`` aside)."""
    return {
        f.name: getattr(module, f.name)
        for f in dataclasses.fields(module)
        if f.init and f.name not in ("parent", "name")
    }
