"""Leading batch axes of channels-last inputs, as ``flax.linen``'s pools take them.

A window op pools an input with one batch axis, ``[N, *spatial, C]`` in ``NXC``.  Where the
window's attribute is a sequence (``kernel`` or ``output_size``, as Flax's ``window_shape``),
its length fixes the number of spatial axes, so an ``NXC`` input may hold any number of
leading batch axes: ``(*spatial, C)`` (none) or ``(B1, B2, *spatial, C)`` (several).  They are
merged into the one batch axis ``N = B1 * B2 * ...`` (1 where there is none) before the op
and split again on its outputs, so the op is the op on the input reshaped to one batch axis:
its indices are those of the reshaped input (``axis=0`` the row-major position in the whole
tensor, batch axes first; ``axis=2`` the position in each ``(n, c)`` plane).  An int
attribute, ``NCX``, and an input with exactly one batch axis keep the op as it is.

The merge wraps the public op outside :func:`exporting.exportable`, so an exporter binds the
op on its one batch axis, the reshapes around it.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import arguments

F = TypeVar("F", bound=Callable[..., Any])


def leading_axes(name: str, shape: Sequence[Any], spec_name: str, spec: Any) -> tuple | None:
    """The batch axes of a channels-last input ``name`` of ``shape`` ahead of the spatial axes
    that the sequence ``spec`` (the argument ``spec_name``) counts, or ``None`` where the input
    has exactly one (or ``spec`` fixes no number of spatial axes)."""
    if isinstance(spec, np.ndarray):
        spec = spec.tolist()
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
        return None
    nd = len(spec)
    if nd not in (1, 2, 3) or len(shape) == nd + 2:
        return None  # the op's own checks speak for a sequence of the wrong length
    if len(shape) < nd + 1:
        raise ValueError(
            f"`{name}` of shape {tuple(shape)} (NXC) has fewer axes than the {nd} spatial axes "
            f"of `{spec_name}` (={spec!r}) and the channel axis: it needs shape "
            f"(*batch, {', '.join(['spatial'] * nd)}, C) with any number of batch axes."
        )
    return tuple(shape[: len(shape) - nd - 1])


def _merged(a: Any, lead: tuple) -> jax.Array:
    a = jnp.asarray(a)
    return a.reshape((math.prod(lead), *a.shape[len(lead) :]))


def _merged_shape(output_shape: Any, lead: tuple, rank: int) -> Any:
    """``output_shape`` (the full shape of ``y``'s pooled input) on one batch axis."""
    if not isinstance(output_shape, Sequence) or len(output_shape) != rank:
        raise ValueError(
            f"`output_shape` (={output_shape!r}) must have one entry per axis of `y` ({rank}), "
            f"its batch axes {lead} first."
        )
    if tuple(output_shape[: len(lead)]) != lead:
        raise ValueError(
            f"`output_shape` (={tuple(output_shape)!r}) must begin with the batch axes {lead} "
            "of `y`."
        )
    return (math.prod(lead), *output_shape[len(lead) :])


def merges_batch_axes(
    spec_name: str,
    arrays: tuple[str, ...] = ("x",),
    shape_name: str | None = None,
    per_plane: tuple[str, ...] = (),
) -> Callable[[F], F]:
    """Lets the window op take any number of leading batch axes where ``data_format="NXC"``
    and its argument ``spec_name`` is a sequence: the arguments ``arrays`` (and the shape
    argument ``shape_name``, and the arrays ``per_plane`` that lead with the same batch axes
    but are not maps) are merged to one batch axis, the outputs split again."""

    def decorate(op: F) -> F:
        signature = inspect.signature(op)
        names = list(signature.parameters)
        first_at, spec_at = names.index(arrays[0]), names.index(spec_name)

        def argument(args: tuple, kwargs: dict, name: str, at: int) -> Any:
            return args[at] if at < len(args) else kwargs.get(name)

        @functools.wraps(op)
        def call(*args: Any, **kwargs: Any) -> Any:
            # `data_format` is keyword-only: the ops' own calls return here at once
            first = argument(args, kwargs, arrays[0], first_at)
            if kwargs.get("data_format") != "NXC" or first is None:
                return op(*args, **kwargs)
            spec = argument(args, kwargs, spec_name, spec_at)
            lead = leading_axes(arrays[0], np.shape(first), spec_name, spec)
            if lead is None:
                return op(*args, **kwargs)
            values = signature.bind(*args, **kwargs).arguments
            for name in arrays:
                arguments.check_numeric(name, values[name])
                if np.shape(values[name]) != np.shape(first):
                    raise ValueError(
                        f"`{name}` of shape {np.shape(values[name])} must have the shape of "
                        f"`{arrays[0]}` ({np.shape(first)})."
                    )
                values[name] = _merged(values[name], lead)
            for name in per_plane:
                arguments.check_numeric(name, values[name])
                if np.shape(values[name])[: len(lead)] != lead:
                    raise ValueError(
                        f"`{name}` of shape {np.shape(values[name])} must begin with the batch "
                        f"axes {lead} of `{arrays[0]}`."
                    )
                values[name] = _merged(values[name], lead)
            if shape_name is not None:
                rank = len(lead) + values[arrays[0]].ndim - 1
                values[shape_name] = _merged_shape(values[shape_name], lead, rank)
            out = op(**values)
            return jax.tree.map(lambda o: o.reshape((*lead, *o.shape[1:])), out)

        return call  # type: ignore[return-value]

    return decorate
