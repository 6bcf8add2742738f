"""The bound operation that every format's binder returns, and what binders share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

Arguments = tuple[tuple[str, Any], ...]


def direct(op: Bound, *inputs: Any) -> Any:
    """Calls the function with the inputs in order and the bound keyword arguments."""
    return op.fn(*inputs, **op.kwargs)


@dataclasses.dataclass(frozen=True, repr=False)
class Bound:
    """An operation of a model format, bound to the jaxpool function that computes it.

    Call it with the operation's inputs in the format's order and layout (NCX); it returns
    one array, or a tuple for an operation with several outputs.

    Attributes:
      type: the operation's type in its format, e.g. ``"MaxPool"``.
      version: its version (an OpenVINO opset's operation version), or ``None``.
      fn: the jaxpool function that computes it.
      arguments: the keyword arguments bound to ``fn``, as ``(name, value)`` pairs.
      inputs: the names of the operation's inputs, in order; the last ``optional`` of them
        may be left out.
      optional: how many of the last inputs may be left out.
      outputs: how many outputs a call returns.
      call: ``call(op, *inputs)`` computes the outputs (``fn`` with the inputs in order and
        ``arguments``, unless the format's semantics need more).
      note: what the call adds to ``fn``, shown by ``repr``.
    """

    type: str
    version: int | None
    fn: Callable[..., Any]
    arguments: Arguments = ()
    inputs: tuple[str, ...] = ("x",)
    optional: int = 0
    outputs: int = 1
    call: Callable[..., Any] = direct
    note: str = ""

    @property
    def name(self) -> str:
        """How messages name the operation, e.g. ``"MaxPool-8"``."""
        return self.type if self.version is None else f"{self.type}-{self.version}"

    @property
    def function(self) -> str:
        """The name of the jaxpool function, e.g. ``"max_pool"``."""
        return self.fn.__name__

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :attr:`fn`, as a dict."""
        return dict(self.arguments)

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return self.outputs

    def __call__(self, *inputs: Any) -> Any:
        least = len(self.inputs) - self.optional
        if not least <= len(inputs) <= len(self.inputs):
            count = str(least) if not self.optional else f"{least} or {len(self.inputs)}"
            raise TypeError(
                f"{self.name} takes {count} input(s) ({_listed(self.inputs, self.optional)}), "
                f"got {len(inputs)}."
            )
        return self.call(self, *inputs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments)
        note = f", {self.note}" if self.note else ""
        return f"<{self.name}: jaxpool.{self.function}({args}){note}>"


def _listed(names: tuple[str, ...], optional: int) -> str:
    quoted = [f"`{name}`" for name in names]
    if optional:
        quoted[-optional:] = [f"an optional {name}" for name in quoted[-optional:]]
    if len(quoted) == 1:
        return quoted[0]
    return f"{', '.join(quoted[:-1])} and {quoted[-1]}"


class Attributes:
    """An operation's attributes as its format states them, read by the operation's binder.

    Each format reads its values its own way (a subclass); what binders share is here: the
    operation's identity, the check of required attributes, and :meth:`bind`.
    """

    def __init__(
        self, cls: type[Bound], op_type: str, version: int | None, values: Mapping[str, Any]
    ):
        self.cls, self.type, self.version, self.values = cls, op_type, version, dict(values)
        self.where = op_type if version is None else f"{op_type}-{version}"

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def require(self, *names: str) -> None:
        for name in names:
            if name not in self.values:
                raise ValueError(
                    f"`{name}` is a required attribute of {self.where} and is missing."
                )

    def bind(self, fn: Callable[..., Any], arguments: Arguments = (), **fields: Any) -> Bound:
        """The bound operation: ``fn`` with ``arguments``; ``fields`` as :class:`Bound`'s."""
        return self.cls(self.type, self.version, fn, arguments, **fields)
