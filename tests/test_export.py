"""Every public function, and its derivative, through ``jax.export`` for every platform at once.

One artifact per function for ``platforms=("cpu", "cuda", "tpu")`` (refused where the program
holds a custom call outside JAX's compatibility guarantees), serialized, deserialized and called
on the CPU: the same bits as the direct call.  Each row computes, in one program, the function
in both layouts and every dtype it takes, each once (:func:`_layouts_and_dtypes`), and the VJP
of its floating output.  A public function added without its row fails
:func:`test_every_public_function_has_a_row`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax import export

import jaxpool
import jaxpool.onnx
import jaxpool.openvino
import jaxpool.torch

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

PLATFORMS = ("cpu", "cuda", "tpu")
# Public callables that are no pooling function: they register, export or describe the export.
NOT_FUNCTIONS = {
    "torch.register_torchax",
    "onnx.export",
    "onnx.export_table",
    "onnx.register_export",
}

FLOATS = ("float32", "bfloat16")
WINDOW_DTYPES = (*FLOATS, "int32")
LAYOUTS = ("NCX", "NXC")


def _values(shape, dtype, seed=0):
    """Tie-free values of ``shape`` in ``dtype`` (small integers for integer dtypes)."""
    rng = np.random.default_rng(seed)
    values = rng.permutation(int(np.prod(shape))).reshape(shape)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return jnp.asarray(values - values.size // 2, dtype)
    return jnp.asarray(values / values.size - 0.5, dtype)


def _map(layout, dtype, shape=(2, 4, 6, 7), seed=0):
    """An NCX-shaped map, in ``layout``."""
    x = _values(shape, dtype, seed)
    return x if layout == "NCX" else jnp.moveaxis(x, 1, -1)


BOXES = np.array([[0.5, 1.0, 5.5, 4.0], [-1.0, 0.0, 9.0, 7.5], [2.2, 2.7, 3.1, 3.3]])
BATCH = np.array([1, 0, 1], np.int32)
BOXES5 = np.concatenate([BATCH[:, None].astype(BOXES.dtype), BOXES], 1)
ROTATED = np.array(
    [[3.0, 2.5, 4.0, 3.0, 0.4], [2.0, 3.0, 6.0, 5.0, -1.2], [4.5, 3.5, 1.0, 1.0, 2.0]]
)


# A build: build(layout, dtype) -> (fn, args): ``fn(*args)`` returns an array or a tuple whose
# first entry is the pooled values, differentiated in ``args[0]``.  Layout None is PyTorch's
# (NCX, no ``data_format``).
Build = Callable[[str | None, str], tuple[Callable[..., Any], tuple[Any, ...]]]


def _x(fn: Callable[..., Any], *attrs: Any, shape=(2, 4, 6, 7), **kwargs: Any) -> Build:
    def build(layout, dtype):
        kw = kwargs if layout is None else {**kwargs, "data_format": layout}
        return (lambda x: fn(x, *attrs, **kw)), (_map(layout or "NCX", dtype, shape),)

    return build


def _min_pool(x, *attrs, data_format, **kwargs):
    # NXC with two leading batch axes, the tuple kernel fixing the spatial axes
    x = x if data_format == "NCX" else x[None]
    return jaxpool.min_pool(x, *attrs, data_format=data_format, **kwargs)


def _unpool(layout, dtype):
    x = _map(layout, dtype)
    y, i = jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True, data_format=layout)
    return (lambda y, i: jaxpool.max_unpool(y, i, x.shape, axis=0, data_format=layout)), (y, i)


def _fractional(layout, dtype):
    u = jnp.asarray(np.random.default_rng(1).uniform(size=(2, 4, 2)), jnp.float32)
    return (
        lambda x, u: jaxpool.fractional_max_pool(
            x, 2, (3, 4), u, data_format=layout, return_indices=True
        ),
        (_map(layout, dtype), u),
    )


def _regions(call: Callable[..., Any], rois: np.ndarray) -> Build:
    """``call(x, boxes, layout)``; in PyTorch's layout ``call(x, boxes)``."""

    def build(layout, dtype):
        fn = call if layout is None else (lambda x, b: call(x, b, layout))
        return fn, (_map(layout or "NCX", dtype), jnp.asarray(rois, jnp.float32))

    return build


def _multilevel(layout, dtype):
    p2 = _map(layout or "NCX", dtype, (2, 4, 8, 8))
    p3 = _map(layout or "NCX", dtype, (2, 4, 4, 4), seed=1)
    boxes = jnp.asarray([[0.0, 0.0, 6.0, 6.0], [1.0, 2.0, 30.0, 28.0], [3, 3, 9, 12.0]])
    if layout is None:  # torchvision's MultiScaleRoIAlign: a list of boxes per image
        return (
            lambda p2, p3, b0, b1: jaxpool.torch.multi_scale_roi_align(
                [p2, p3], [b0, b1], [(32, 32)] * 2, 2, 2, canonical_scale=16
            ),
            (p2, p3, boxes[:2], boxes[2:]),
        )
    attrs = dict(spatial_scales=(0.25, 0.125), sampling_ratio=2, canonical_size=16)
    return (
        lambda p2, p3, b: jaxpool.multilevel_roi_align(
            [p2, p3], b, jnp.asarray(BATCH), 2, canonical_level=3, data_format=layout, **attrs
        ),
        (p2, p3, boxes),
    )


def _torch_unpool(nd):
    x = _map("NCX", "float32", (2, 3, *(6,) * nd))
    y, i = getattr(jaxpool.torch, f"max_pool{nd}d")(x, 2, return_indices=True)
    unpool = getattr(jaxpool.torch, f"max_unpool{nd}d")
    return lambda layout, dtype: (lambda y, i: unpool(y, i, 2, output_size=x.shape[2:]), (y, i))


def _torch_fractional(nd):
    samples = np.random.default_rng(2).uniform(size=(2, 3, nd))
    call = getattr(jaxpool.torch, f"fractional_max_pool{nd}d")

    def build(layout, dtype):
        return (
            lambda x, u: call(x, 2, output_size=4, return_indices=True, _random_samples=u),
            (_map("NCX", dtype, (2, 3, *(7,) * nd)), jnp.asarray(samples, dtype)),
        )

    return build


def _torch_windows(nd: int) -> dict[str, Build]:
    def pool(name: str, *attrs: Any, **kwargs: Any) -> tuple[str, Build]:
        fn = getattr(jaxpool.torch, f"{name}{nd}d")
        return f"torch.{name}{nd}d", _x(fn, *attrs, shape=(2, 3, *(6, 7, 5)[:nd]), **kwargs)

    return dict(
        [
            pool("max_pool", 3, 2, 1, return_indices=True),
            pool("avg_pool", 3, 2, 1, ceil_mode=True),
            pool("lp_pool", 2, 2),
            pool("adaptive_max_pool", 3, return_indices=True),
            pool("adaptive_avg_pool", 4),
        ]
    )


def _roi_align(x, b, f):
    return (
        jaxpool.roi_align(x, b, BATCH, 2, sampling_ratio=2, data_format=f),
        jaxpool.roi_align(x, b, BATCH, (2, 3), mode="max", data_format=f),
    )


def _deformable(x, b, f):
    offsets = jnp.full((3, 2, 2, 2), 0.1, jnp.float32)
    return jaxpool.deformable_psroi_pool(
        x, b, offsets, output_dim=1, group_size=2, spatial_bins=2, data_format=f
    )


# Functions of floating and int32 maps.
WINDOW_ROWS: dict[str, Build] = {
    "max_pool": _x(jaxpool.max_pool, 3, 2, 1, 1, rounding_type="ceil", return_indices=True),
    "min_pool": _x(_min_pool, (3, 3), 2, 1, 1, rounding_type="ceil", return_indices=True),
    "avg_pool": _x(jaxpool.avg_pool, 3, 2, 1, 1, exclude_pad=True),
    "adaptive_max_pool": _x(jaxpool.adaptive_max_pool, (4, 3), return_indices=True),
    "adaptive_avg_pool": _x(jaxpool.adaptive_avg_pool, (4, 3)),
}
# Functions of floating maps, in both layouts; those of jaxpool.torch, .openvino and .onnx in
# PyTorch's.
FLOAT_ROWS: dict[str, Build] = {
    "lp_pool": _x(jaxpool.lp_pool, 2, 1),
    "fractional_max_pool": _fractional,
    "max_unpool": _unpool,
    "roi_pool": _regions(lambda x, b, f: jaxpool.roi_pool(x, b, (2, 3), data_format=f), BOXES5),
    "roi_align": _regions(_roi_align, BOXES),
    "roi_align_rotated": _regions(
        lambda x, b, f: jaxpool.roi_align_rotated(x, b, BATCH, 2, data_format=f), ROTATED
    ),
    "psroi_pool": _regions(lambda x, b, f: jaxpool.psroi_pool(x, b, 1, 2, data_format=f), BOXES5),
    "psroi_align": _regions(
        lambda x, b, f: jaxpool.psroi_align(x, b, BATCH, 2, data_format=f), BOXES
    ),
    "deformable_psroi_pool": _regions(_deformable, BOXES5),
    "multilevel_roi_align": _multilevel,
    "openvino.layer": _x(
        jaxpool.openvino.layer(
            "MaxPool",
            {"kernel": "3,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1"},
            index_element_type="i32",
        )
    ),
    "onnx.node": _x(
        jaxpool.onnx.node(onnx.helper.make_node("LpPool", ["x"], ["y"], kernel_shape=(2, 2), p=3))
    ),
    **_torch_windows(1),
    **_torch_windows(2),
    **_torch_windows(3),
    "torch.fractional_max_pool2d": _torch_fractional(2),
    "torch.fractional_max_pool3d": _torch_fractional(3),
    "torch.roi_align": _regions(
        lambda x, b: jaxpool.torch.roi_align(x, b, 2, 0.5, 2, aligned=True), BOXES5
    ),
    "torch.roi_pool": _regions(lambda x, b: jaxpool.torch.roi_pool(x, b, (2, 3), 0.5), BOXES5),
    "torch.ps_roi_align": _regions(
        lambda x, b: jaxpool.torch.ps_roi_align(x, b, 2, 0.5, 2), BOXES5
    ),
    "torch.ps_roi_pool": _regions(lambda x, b: jaxpool.torch.ps_roi_pool(x, b, 2, 0.5), BOXES5),
    "torch.multi_scale_roi_align": _multilevel,
}
# name -> (layouts, dtypes, build)
ROWS = {
    **{name: (LAYOUTS, WINDOW_DTYPES, build) for name, build in WINDOW_ROWS.items()},
    **{
        name: ((None,) if "." in name else LAYOUTS, FLOATS, build)
        for name, build in FLOAT_ROWS.items()
    },
    **{f"torch.max_unpool{nd}d": ((None,), ("float32",), _torch_unpool(nd)) for nd in (1, 2, 3)},
}


def _public_functions() -> set[str]:
    found = set()
    for prefix, module in (
        ("", jaxpool),
        ("torch.", jaxpool.torch),
        ("openvino.", jaxpool.openvino),
        ("onnx.", jaxpool.onnx),
    ):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or (
                callable(obj) and inspect.isfunction(inspect.unwrap(obj))
            ):
                found.add(prefix + name)
    return found - NOT_FUNCTIONS


def test_every_public_function_has_a_row():
    public = _public_functions()
    assert public - set(ROWS) == set(), "public functions without an export row"
    assert set(ROWS) - public == set(), "export rows of no public function"


def _with_vjp(fn: Callable[..., Any]):
    """``fn``'s outputs and, for a floating first output, its VJP in ``args[0]`` with a fixed
    cotangent."""

    def outputs(*args):
        out = fn(*args)
        first = out[0] if isinstance(out, tuple) else out
        if not jnp.issubdtype(first.dtype, jnp.floating):
            return out, None

        def values(a):
            o = fn(a, *args[1:])
            return o[0] if isinstance(o, tuple) else o

        y, vjp = jax.vjp(values, args[0])
        ct = jnp.cos(jnp.arange(y.size, dtype=jnp.float32)).reshape(y.shape).astype(y.dtype)
        return out, vjp(ct)

    return outputs


def _layouts_and_dtypes(layouts, dtypes):
    """Every layout and every dtype, each once at least (NCX float32, NXC bfloat16, NCX int32)."""
    count = max(len(layouts), len(dtypes))
    return [(layouts[i % len(layouts)], dtypes[i % len(dtypes)]) for i in range(count)]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_exports_for_every_platform_with_the_same_bits(name):
    layouts, dtypes, build = ROWS[name]
    cases = [build(layout, dtype) for layout, dtype in _layouts_and_dtypes(layouts, dtypes)]
    programs = [_with_vjp(fn) for fn, _ in cases]
    arguments = tuple(args for _, args in cases)

    def every_case(arguments):
        return [program(*args) for program, args in zip(programs, arguments)]

    exported = export.export(jax.jit(every_case), platforms=PLATFORMS)(arguments)
    assert exported.platforms == PLATFORMS
    restored = export.deserialize(exported.serialize())
    got = restored.call(arguments)
    expected = jax.jit(every_case)(arguments)
    got_leaves, got_tree = jax.tree.flatten(got)
    expected_leaves, expected_tree = jax.tree.flatten(expected)
    assert got_tree == expected_tree
    for g, e in zip(got_leaves, expected_leaves):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
