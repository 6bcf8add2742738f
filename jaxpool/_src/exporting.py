"""The one point where an exporter takes over the calls of jaxpool's public ops.

An exporter to another format (``jaxpool.onnx.export``, through jax2onnx) needs each op as one
operation of its own, with the op's attributes, not the XLA program that computes it.  Every
public op is decorated with :func:`exportable`; while :data:`EXPORTER` is set (only while a
model is traced for export) a call goes to it, with the op and its arguments, instead of the
op.  Otherwise the decorator only reads a module global, after refusing arrays that hold no
numbers (their argument named).  This module imports nothing of any exporter.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from jaxpool._src import arguments

F = TypeVar("F", bound=Callable[..., Any])

# exporter(op, args, kwargs) -> the op's outputs; set by the exporter while it traces a model.
EXPORTER: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any] | None = None


def exportable(op: F) -> F:
    """Lets an active exporter take the calls of the public op ``op``, and refuses arrays of
    strings or objects under their argument's name first (every public op passes here)."""

    signature = inspect.signature(op)

    @functools.wraps(op)
    def call(*args: Any, **kwargs: Any) -> Any:
        arguments.check_numeric_arguments(signature, args, kwargs)
        if EXPORTER is None:
            return op(*args, **kwargs)
        return EXPORTER(op, args, kwargs)

    return call  # type: ignore[return-value]


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Runs the ops themselves, also while an exporter is active (to compute what it binds)."""
    global EXPORTER
    exporter, EXPORTER = EXPORTER, None
    try:
        yield
    finally:
        EXPORTER = exporter
