"""The PyTorch front end's one table: PyTorch's and torchvision's names -> their binders.

:func:`register_torchax` hands the same functions to torchax, at the two levels where torchax
looks an operator up: the ``torch.nn.functional`` functions (torchax's function mode sees them
first, with PyTorch's own signature, the front end's) and the ``aten`` operators they reach
(what torchax's dispatch mode sees, and what a ``torch.export``-ed program calls), each with
its schema's argument convention.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jaxpool._src.interop import torch_fractional, torch_nn, torch_vision
from jaxpool._src.roi_pool import TORCHVISION_MAX, roi_pool_any_method


def _merged(*tables: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    return {name: binder for table in tables for name, binder in table.items()}


BINDERS = _merged(torch_nn.BINDERS, torch_fractional.BINDERS, torch_vision.BINDERS)

# torch.nn.functional's names torchax meets in its function mode -> the front end's name.  A
# function with `return_indices` reaches the mode under its `_with_indices` name when the flag
# is set.  `fractional_max_pool*d` is left to its `aten` operator: PyTorch draws the samples
# with its own generator (torchax's key) before calling it.
_FUNCTIONAL = {
    **{f"max_pool{n}d": f"max_pool{n}d" for n in (1, 2, 3)},
    **{f"max_pool{n}d_with_indices": f"max_pool{n}d" for n in (1, 2, 3)},
    **{f"avg_pool{n}d": f"avg_pool{n}d" for n in (1, 2, 3)},
    **{f"lp_pool{n}d": f"lp_pool{n}d" for n in (1, 2, 3)},
    **{f"adaptive_max_pool{n}d": f"adaptive_max_pool{n}d" for n in (1, 2, 3)},
    **{f"adaptive_max_pool{n}d_with_indices": f"adaptive_max_pool{n}d" for n in (1, 2, 3)},
    **{f"adaptive_avg_pool{n}d": f"adaptive_avg_pool{n}d" for n in (1, 2, 3)},
    **{f"max_unpool{n}d": f"max_unpool{n}d" for n in (1, 2, 3)},
}


def _functional(name: str) -> Callable[..., Any]:
    # PyTorch's own signature: the front end's.  Looked up at each call, as the others are.
    def bound(*args: Any, **kwargs: Any) -> Any:
        return BINDERS[name](*args, **kwargs)

    bound.__name__ = name
    return bound


def _stride(stride: Any) -> Any:
    # aten's `stride=[]` is PyTorch's `stride=None`: the kernel's.
    return None if stride is None or len(stride) == 0 else tuple(stride)


def _aten_max_pool(name: str) -> Callable[..., Any]:
    def bound(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        return BINDERS[name](
            self,
            tuple(kernel_size),
            _stride(stride),
            padding,
            dilation,
            ceil_mode,
            return_indices=True,
        )

    return bound


def _aten_avg_pool(name: str) -> Callable[..., Any]:
    def bound(
        self,
        kernel_size,
        stride=(),
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        return BINDERS[name](
            self,
            tuple(kernel_size),
            _stride(stride),
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
        )

    return bound


def _aten_adaptive(name: str, **options: Any) -> Callable[..., Any]:
    def bound(self, output_size):
        return BINDERS[name](self, tuple(output_size), **options)

    return bound


def _aten_fractional(name: str) -> Callable[..., Any]:
    def bound(self, kernel_size, output_size, random_samples):
        return BINDERS[name](
            self,
            tuple(kernel_size),
            output_size=tuple(output_size),
            return_indices=True,
            _random_samples=random_samples,
        )

    return bound


def _aten_max_unpool(nd: int) -> Callable[..., Any]:
    # The operator carries no kernel or stride to check `output_size` against, as the
    # functional does: the indices themselves are checked against it.
    def bound(self, indices, output_size, stride=None, padding=None):
        return torch_nn.unpool_to(nd, self, indices, lambda y: tuple(output_size))

    return bound


def _aten_table() -> dict[str, Callable[..., Any]]:
    """``aten`` operator (``name.overload``) -> its binding, with the schema's arguments."""
    table: dict[str, Callable[..., Any]] = {}
    for n in (2, 3):
        table[f"max_pool{n}d_with_indices.default"] = _aten_max_pool(f"max_pool{n}d")
        table[f"avg_pool{n}d.default"] = _aten_avg_pool(f"avg_pool{n}d")
        table[f"adaptive_max_pool{n}d.default"] = _aten_adaptive(
            f"adaptive_max_pool{n}d", return_indices=True
        )
        table[f"_adaptive_avg_pool{n}d.default"] = _aten_adaptive(f"adaptive_avg_pool{n}d")
        table[f"fractional_max_pool{n}d.default"] = _aten_fractional(f"fractional_max_pool{n}d")
        table[f"max_unpool{n}d.default"] = _aten_max_unpool(n)
    return table


def _torchvision_table() -> dict[str, Callable[..., Any]]:
    """``torchvision`` operator -> its binding, with the schema's arguments."""

    def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
        return BINDERS["roi_align"](
            input, rois, (pooled_height, pooled_width), spatial_scale, sampling_ratio, aligned
        )

    def channel_mapping(output: Any, pooled_height: int, pooled_width: int) -> Any:
        # torchvision's second output: the input channel each output element read,
        # (c * pooled_height + i) * pooled_width + j.  Only its backward kernel reads it.
        import jax.numpy as jnp

        c = output.shape[1]
        mapping = jnp.arange(c * pooled_height * pooled_width, dtype=jnp.int32)
        return jnp.broadcast_to(mapping.reshape(c, pooled_height, pooled_width), output.shape)

    def ps_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
        output = BINDERS["ps_roi_align"](
            input, rois, (pooled_height, pooled_width), spatial_scale, sampling_ratio
        )
        return output, channel_mapping(output, pooled_height, pooled_width)

    def ps_roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
        output = BINDERS["ps_roi_pool"](input, rois, (pooled_height, pooled_width), spatial_scale)
        return output, channel_mapping(output, pooled_height, pooled_width)

    def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
        # torchvision's second output: the position h * W + w of the element each output took,
        # -1 where it took none (int32, as its kernels make it).  Only its backward reads it;
        # the gradient here flows through the values.
        return roi_pool_any_method(
            input,
            rois,
            (pooled_height, pooled_width),
            spatial_scale=spatial_scale,
            method=TORCHVISION_MAX,
            return_argmax=True,
        )

    return {
        "roi_align.default": roi_align,
        "roi_pool.default": roi_pool,
        "ps_roi_align.default": ps_roi_align,
        "ps_roi_pool.default": ps_roi_pool,
    }


class _Dropped:
    """Stands for an operator, or an overload, this PyTorch no longer has (see
    `_tolerant_overloads`); its overloads are dropped too."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, key: str) -> _Dropped:
        if key.startswith("__"):
            raise AttributeError(key)
        return _Dropped(f"{self.name}.{key}")

    def __repr__(self) -> str:
        return f"<dropped {self.name}>"


@contextlib.contextmanager
def _tolerant_overloads() -> Iterator[None]:
    """Lets torchax's tables name the ``aten`` operators and overloads that PyTorch removed.

    torchax 0.0.13 lists ``aten.prod.dim_Dimname``, ``aten.all.dimname`` (named-tensor
    overloads, gone in PyTorch 2.13), ``aten.cholesky`` (gone in 2.14), ... in its autocast
    and decomposition tables, built when it is imported, so the import fails with an
    ``AttributeError``.  While torchax imports, such a name gives a placeholder that matches no
    operator: the tables lose what PyTorch has no more, and nothing else changes.
    """
    import torch

    packet, namespace = torch._ops.OpOverloadPacket, torch._ops._OpNamespace
    overload, operator = packet.__getattr__, namespace.__getattr__

    def overload_(self: Any, key: str) -> Any:
        try:
            return overload(self, key)
        except AttributeError:
            if "name" in key.lower() and not key.startswith("__"):
                return _Dropped(f"{self}.{key}")
            raise

    def operator_(self: Any, key: str) -> Any:
        try:
            return operator(self, key)
        except AttributeError:
            if self.name == "aten" and not key.startswith("__"):
                return _Dropped(f"aten.{key}")
            raise

    packet.__getattr__ = overload_  # type: ignore[method-assign]
    namespace.__getattr__ = operator_  # type: ignore[method-assign]
    try:
        yield
    finally:
        packet.__getattr__ = overload  # type: ignore[method-assign]
        namespace.__getattr__ = operator  # type: ignore[method-assign]


def _import_torchax() -> Any:
    try:
        return _torchax_with_tables()
    except ImportError as error:
        raise ImportError(
            "jaxpool.torch.register_torchax needs torchax: `pip install torchax`."
        ) from error
    except AttributeError:
        # An operator torchax names is gone from this PyTorch: import again, tolerating it.
        for name in [m for m in sys.modules if m == "torchax" or m.startswith("torchax.")]:
            del sys.modules[name]
        with _tolerant_overloads():
            return _torchax_with_tables()


def _torchax_with_tables() -> Any:
    """torchax, with the modules that build its operator tables (imported by its first
    environment otherwise, outside :func:`_tolerant_overloads`)."""
    import torchax
    import torchax.decompositions  # noqa: F401
    from torchax.ops import jaten, jc10d, jtorch, jtorchvision_nms  # noqa: F401

    return torchax


def _on_jax_arrays(fn: Callable[..., Any], interop: Any) -> Callable[..., Any]:
    """A function of JAX arrays as torchax calls an operator: with and for its tensors."""

    def bound(*args: Any, **kwargs: Any) -> Any:
        return interop.torch_view(fn(*interop.jax_view(args), **interop.jax_view(kwargs)))

    bound.__name__ = getattr(fn, "__name__", "bound")
    bound.__wrapped__ = fn  # type: ignore[attr-defined]
    return bound


def register_torchax(env: Any = None) -> None:
    """Makes torchax run :mod:`jaxpool.torch`'s functions for PyTorch's pooling operators.

    After this call, a PyTorch program that torchax runs (``with torchax.default_env():``)
    pools with jaxpool: every function of ``torch.nn.functional`` that :mod:`jaxpool.torch`
    has (``max_pool*d``, ``avg_pool*d``, ``lp_pool*d``, ``adaptive_*_pool*d``,
    ``max_unpool*d``), and the ``aten`` operators they reach (``max_pool{2,3}d_with_indices``,
    ``avg_pool{2,3}d``, ``adaptive_max_pool{2,3}d``, ``_adaptive_avg_pool{2,3}d``,
    ``fractional_max_pool{2,3}d``, whose random samples PyTorch draws from torchax's key,
    ``max_unpool{2,3}d``, whose indices are checked against its ``output_size``),
    and, where ``torchvision`` imports, its ``roi_align``, ``roi_pool`` (with its argmax),
    ``ps_roi_align`` and ``ps_roi_pool`` operators (``MultiScaleRoIAlign`` included, which
    calls ``roi_align``).
    torchax differentiates them through JAX, so gradients are jaxpool's, which equal
    PyTorch's.

    torchax 0.0.13 does not import beside PyTorch 2.13 and newer, which removed operators and
    overloads its tables name (the named-tensor overloads, ``aten.cholesky``); this call
    imports it tolerating those (they match no operator), so call it before importing torchax.

    Args:
      env: the ``torchax`` environment to register in; ``torchax.default_env()`` if ``None``.

    Raises:
      ImportError: if torchax is not installed.
    """
    torchax = _import_torchax()
    import torch
    from torchax import interop

    if env is None:
        env = torchax.default_env()
    functional = {
        getattr(torch.nn.functional, name): _functional(bound)
        for name, bound in _FUNCTIONAL.items()
        if hasattr(torch.nn.functional, name)
    }
    aten = {
        getattr(getattr(torch.ops.aten, name.split(".")[0]), name.split(".")[1]): fn
        for name, fn in _aten_table().items()
    }
    operators: dict[Any, Callable[..., Any]] = {**functional, **aten}
    with contextlib.suppress(ImportError):
        import torchvision  # noqa: F401  (registers the torchvision operators)

        for name, fn in _torchvision_table().items():
            packet, overload = name.split(".")
            operators[getattr(getattr(torch.ops.torchvision, packet), overload)] = fn
    for operator, fn in operators.items():
        env.override_op_definition(operator, _on_jax_arrays(fn, interop))
