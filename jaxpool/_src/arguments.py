"""Checks that every public call makes of its arguments before anything is traced."""

from __future__ import annotations

import inspect
from typing import Any

import jax
import numpy as np


def _holds_no_numbers(value: Any) -> bool:
    """Whether ``value`` is an array of a dtype JAX cannot hold (strings, bytes, objects,
    dates): JAX's own error for it names neither the argument nor the function."""
    if isinstance(value, jax.Array) or not hasattr(value, "dtype"):
        return False
    try:
        dtype = np.dtype(value.dtype)
    except TypeError:
        return False
    return not (jax.dtypes.issubdtype(dtype, np.number) or dtype == np.bool_)


def check_numeric(name: str, value: Any) -> None:
    """Refuses an array of strings, bytes, objects or dates passed as the argument ``name``."""
    if _holds_no_numbers(value):
        with np.printoptions(threshold=8, edgeitems=2):
            shown = repr(value)
        raise TypeError(
            f"`{name}` must be an array of numbers or booleans, got an array of dtype "
            f"{np.dtype(value.dtype)}: {shown}."
        )


def check_numeric_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """:func:`check_numeric` on every argument of a call of a public op, and on every element
    of a sequence argument (the maps of a pyramid), each under its parameter's name."""
    values = [*args, *kwargs.values()]
    if not any(
        _holds_no_numbers(v)
        or (isinstance(v, (list, tuple)) and any(_holds_no_numbers(e) for e in v))
        for v in values
    ):
        return
    try:
        bound = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return  # the op's own call raises the error of a wrong signature
    for name, value in bound.items():
        check_numeric(name, value)
        if isinstance(value, (list, tuple)):
            for i, element in enumerate(value):
                check_numeric(f"{name}[{i}]", element)
