"""IR attribute strings, read as the OpenVINO runtime reads them: comma-separated integer
lists (``"2, 2"`` or ``"2,2"``), case-insensitive words and booleans, numbers."""

from __future__ import annotations

import re

import numpy as np

INT_LIST_RE = re.compile(r"^\s*-?\d+\s*(,\s*-?\d+\s*)*$")
INT_RE = re.compile(r"^\s*-?\d+\s*$")


def int_list(name: str, text: str, minimum: int) -> tuple[int, ...]:
    if not INT_LIST_RE.match(text):
        raise ValueError(f"`{name}` (={text!r}) must be comma-separated integers, such as '2, 2'.")
    values = tuple(int(v) for v in text.split(","))
    if any(v < minimum for v in values):
        what = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"`{name}` (={text!r}) must be {what} on every spatial axis.")
    return values


def word(name: str, text: str, allowed: tuple[str, ...], where: str, hint: str = "") -> str:
    value = text.strip().lower()
    if value not in allowed:
        raise ValueError(f"`{name}` (={text!r}) of {where} must be one of {list(allowed)}{hint}.")
    return value


def boolean(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"`{name}` (={text!r}) must be 'true' or 'false' (or '1' or '0').")


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
