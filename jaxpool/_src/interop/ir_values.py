"""IR attribute strings, read as the OpenVINO runtime reads them: comma-separated integer
lists (``"2, 2"`` or ``"2,2"``), case-insensitive words and booleans, numbers."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from jaxpool._src.interop.bound import Attributes

INT_LIST_RE = re.compile(r"^\s*-?\d+\s*(,\s*-?\d+\s*)*$")
INT_RE = re.compile(r"^\s*-?\d+\s*$")


class IRAttributes(Attributes):
    """A layer's ``<data>`` attributes, IR strings; each reader takes the runtime's default
    where the attribute is absent (``None``: required)."""

    version: int

    def text(self, name: str, default: str | None) -> str:
        if default is None:
            self.require(name)
            return self.values[name]
        return self.values.get(name, default)

    def ints(self, name: str, minimum: int) -> tuple[int, ...] | None:
        """An integer list, or ``None`` where it is absent (the function's default)."""
        if name not in self.values:
            return None
        text = self.values[name]
        if not INT_LIST_RE.match(text):
            raise ValueError(
                f"`{name}` (={text!r}) must be comma-separated integers, such as '2, 2'."
            )
        values = tuple(int(v) for v in text.split(","))
        if any(v < minimum for v in values):
            what = "positive" if minimum == 1 else "non-negative"
            raise ValueError(f"`{name}` (={text!r}) must be {what} on every spatial axis.")
        return values

    def word(self, name: str, allowed: Sequence[str], default: str | None, hint: str = "") -> str:
        text = self.text(name, default)
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError(
                f"`{name}` (={text!r}) of {self.where} must be one of {list(allowed)}{hint}."
            )
        return value

    def boolean(self, name: str, default: str | None) -> bool:
        text = self.text(name, default)
        value = text.strip().lower()
        if value in ("true", "1"):
            return True
        if value in ("false", "0"):
            return False
        raise ValueError(f"`{name}` (={text!r}) must be 'true' or 'false' (or '1' or '0').")

    def integer(self, name: str, minimum: int, default: str | None = None) -> int:
        return integer(name, self.text(name, default), minimum)

    def number(self, name: str, default: str | None = None) -> float:
        return number(name, self.text(name, default))

    def numbers(self, name: str) -> tuple[float, ...]:
        """A required comma-separated list of numbers."""
        return tuple(number(name, item) for item in self.text(name, None).split(","))


def integer(name: str, text: str, minimum: int) -> int:
    if not INT_RE.match(text):
        raise ValueError(f"`{name}` (={text!r}) must be an integer.")
    value = int(text)
    if value < minimum:
        raise ValueError(f"`{name}` (={text!r}) must be at least {minimum}.")
    return value


def number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"`{name}` (={text!r}) must be a number, such as '0.0625'.") from None
    if not np.isfinite(value):
        raise ValueError(f"`{name}` (={text!r}) must be finite.")
    return value
