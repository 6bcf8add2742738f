"""torch.nn.functional's fractional max pooling, bound to jaxpool.fractional_max_pool.

PyTorch's rules around the op: a batched or unbatched input, ``output_size`` or
``output_ratio`` (``int(input_size * ratio)``), its checks and their wording, and
``_random_samples`` of shape ``[N', C, nd]`` with ``N' >= N``, in the input's dtype, whose 2-D
entries hold ``(w, h)``.  Without them the samples are ``jax.random.uniform(key, (N, C, nd),
dtype)``, read as PyTorch reads ``_random_samples``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxpool._src import arguments
from jaxpool._src import window as window_lib
from jaxpool._src.fractional_max_pool import fractional_max_pool

_AXES = {2: ("height", "width"), 3: ("time", "height", "width")}


def _ratio(name: str, output_ratio: Any, nd: int) -> tuple[float, ...]:
    """``output_ratio``, a number or one per spatial axis, each in ``(0, 1)``."""
    if isinstance(output_ratio, numbers.Real) and not isinstance(output_ratio, bool):
        ratio = (output_ratio,) * nd
    elif isinstance(output_ratio, Sequence) and not isinstance(output_ratio, str):
        if len(output_ratio) != nd:
            raise ValueError(
                f"{name} requires `output_ratio` to either be a single number or a tuple of "
                f"{nd}, got {output_ratio!r}."
            )
        ratio = tuple(output_ratio)
    else:
        raise TypeError(f"`output_ratio` must be a number or a tuple, got {output_ratio!r}.")
    if not all(
        isinstance(r, numbers.Real) and not isinstance(r, bool) and 0 < float(r) < 1 for r in ratio
    ):
        raise ValueError(f"`output_ratio` must be between 0 and 1 (got {output_ratio!r}).")
    return tuple(float(r) for r in ratio)


def _samples(name: str, samples: Any, key: Any, x: jax.Array, nd: int) -> jax.Array:
    """The samples of the ``(n, c)`` planes of ``x`` (batched), in the core op's axis order."""
    n, c = x.shape[:2]
    if samples is None:
        if key is None:
            raise TypeError(
                f"{name} needs `key` (a JAX PRNG key, e.g. jax.random.key(0)) to draw its "
                "samples when `_random_samples` is None, got key=None."
            )
        samples = jax.random.uniform(key, (n, c, nd), x.dtype)
    else:
        arguments.check_numeric("_random_samples", samples)
        samples = jnp.asarray(samples)
        if samples.dtype != x.dtype:
            raise TypeError(
                f"Expect `_random_samples` to have the same dtype as `input` ({x.dtype}), "
                f"got {samples.dtype}."
            )
        if samples.ndim != 3 or samples.shape[0] < n or samples.shape[1:] != (c, nd):
            raise ValueError(
                f"Expect `_random_samples` of shape [N', {c}, {nd}] with N' >= {n} (the "
                f"input's batch), got {samples.shape}."
            )
        samples = samples[:n]
    # PyTorch's 2-D kernel reads sample 0 for the width and 1 for the height.
    return samples[..., ::-1] if nd == 2 else samples


def _fractional_max_pool(
    nd: int,
    input: Any,
    kernel_size: Any,
    output_size: Any,
    output_ratio: Any,
    return_indices: bool,
    _random_samples: Any,
    key: Any,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    name = f"fractional_max_pool{nd}d"
    arguments.check_numeric("input", input)
    x = jnp.asarray(input)
    if x.ndim not in (nd + 1, nd + 2) or 0 in x.shape[x.ndim - nd - 1 :]:
        raise ValueError(
            f"{name}(): Expected a non-empty {nd + 1}D or {nd + 2}D `input`, but got shape "
            f"{x.shape}."
        )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name}(): `input` must have a floating dtype, got {x.dtype}.")
    batched = x.ndim == nd + 2
    x = x if batched else x[None]
    spatial = x.shape[2:]
    if output_size is None and output_ratio is None:
        raise ValueError(
            f"{name} requires specifying either an `output_size` or an `output_ratio`."
        )
    if output_size is not None and output_ratio is not None:
        raise ValueError(
            f"only one of `output_size` (={output_size!r}) and `output_ratio` "
            f"(={output_ratio!r}) may be specified."
        )
    if output_size is None:
        ratio = _ratio(name, output_ratio, nd)
        output_size = tuple(int(length * r) for length, r in zip(spatial, ratio))
        if 0 in output_size:
            raise ValueError(
                f"`output_ratio` (={output_ratio!r}) gives the empty output {output_size} for "
                f"`input` of shape {x.shape[x.ndim - nd :]}."
            )
    kernel = window_lib.per_axis("kernel_size", kernel_size, nd, 1)
    out = window_lib.per_axis("output_size", output_size, nd, 1)
    # PyTorch's 3-D check is strict: one start position fewer than the 2-D rule allows.
    slack = 1 if nd == 2 else 0
    for axis, length, k, o in zip(_AXES[nd], spatial, kernel, out):
        if o + k - 1 >= length + slack:
            raise ValueError(
                f"{name}(): pool {axis} {k} too large relative to input {axis} {length}: "
                f"`kernel_size` (={kernel_size!r}) with `output_size` (={output_size!r})."
            )
    samples = _samples(name, _random_samples, key, x, nd)
    result = fractional_max_pool(x, kernel, out, samples, return_indices=return_indices)
    if batched:
        return result
    if isinstance(result, tuple):
        return result[0][0], result[1][0]
    return result[0]


def fractional_max_pool2d(
    input: jax.typing.ArrayLike,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: jax.typing.ArrayLike | None = None,
    *,
    key: jax.Array | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """``torch.nn.functional.fractional_max_pool2d`` of a ``(N, C, H, W)`` or ``(C, H, W)``
    array: :func:`jaxpool.fractional_max_pool` with PyTorch's arguments.

    Exactly one of ``output_size`` and ``output_ratio`` (in ``(0, 1)``; the output size is
    ``int(input_size * ratio)``).  ``_random_samples``: ``(N', C, 2)`` in the input's dtype,
    ``N' >= N``, holding ``(w, h)`` per plane, as PyTorch takes them; without them the
    samples are ``jax.random.uniform(key, (N, C, 2), input.dtype)``, read the same way.
    Values, indices (positions in each plane) and gradients are PyTorch's; a window's last
    NaN wins, as in PyTorch's kernels.

    Example:
      >>> import jax.numpy as jnp, jaxpool.torch
      >>> x = jnp.arange(25.0).reshape(1, 5, 5)
      >>> u = jnp.full((1, 1, 2), 0.5)
      >>> jaxpool.torch.fractional_max_pool2d(x, 2, (2, 3), _random_samples=u)[0].tolist()
      [[6.0, 8.0, 9.0], [21.0, 23.0, 24.0]]
    """
    return _fractional_max_pool(
        2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples, key
    )


def fractional_max_pool3d(
    input: jax.typing.ArrayLike,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: jax.typing.ArrayLike | None = None,
    *,
    key: jax.Array | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """``torch.nn.functional.fractional_max_pool3d`` of a ``(N, C, T, H, W)`` or
    ``(C, T, H, W)`` array: :func:`jaxpool.fractional_max_pool` with PyTorch's arguments.

    As :func:`fractional_max_pool2d`, with ``_random_samples`` of shape ``(N', C, 3)`` holding
    ``(t, h, w)``, and PyTorch's 3-D size check, ``output_size + kernel_size - 1 < input_size``
    (one start position fewer than the 2-D rule allows).
    """
    return _fractional_max_pool(
        3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples, key
    )


# PyTorch's name -> the function that binds it.
BINDERS = {
    "fractional_max_pool2d": fractional_max_pool2d,
    "fractional_max_pool3d": fractional_max_pool3d,
}
