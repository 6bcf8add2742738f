"""Every public function, and its derivative, through ``jax.export`` for every platform at once.

One artifact per function for ``platforms=("cpu", "cuda", "tpu")`` (which ``jax.export``
refuses where the program holds a custom call outside JAX's compatibility guarantees), its
bytes serialized and deserialized, and the deserialized artifact called on the CPU: the same
bits as the direct call.  Each row computes, in one program, the function in both layouts and
every dtype it takes (the PyTorch functions in PyTorch's layout), each once, not their product
(:func:`_layouts_and_dtypes`), and the vector-Jacobian product of its floating output in its
differentiable argument.  The table must name every public function: a function added without
its row fails :func:`test_every_public_function_has_a_row`.
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


# A row: (layouts, dtypes, build), build(layout, dtype) -> (fn, args, wrt): ``fn(*args)``
# returns an array or a tuple whose first entry is the pooled values, differentiated in
# ``args[wrt]`` (``wrt`` None: no derivative).
Build = Callable[[str, str], tuple[Callable[..., Any], tuple[Any, ...], int | None]]


def _x_only(call: Callable[..., Any]) -> Build:
    def build(layout, dtype):
        return (lambda x: call(x, layout)), (_map(layout, dtype),), 0

    return build


def _unpool(layout, dtype):
    x = _map(layout, dtype)
    y, i = jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True, data_format=layout)
    return (
        lambda y, i: jaxpool.max_unpool(y, i, x.shape, axis=0, data_format=layout),
        (y, i),
        0,
    )


def _fractional(layout, dtype):
    u = jnp.asarray(np.random.default_rng(1).uniform(size=(2, 4, 2)), jnp.float32)
    return (
        lambda x, u: jaxpool.fractional_max_pool(
            x, 2, (3, 4), u, data_format=layout, return_indices=True
        ),
        (_map(layout, dtype), u),
        0,
    )


def _regions(call: Callable[..., Any], rois: np.ndarray, shape=(2, 4, 6, 7)) -> Build:
    def build(layout, dtype):
        boxes = jnp.asarray(rois, jnp.float32)
        return (lambda x, b: call(x, b, layout)), (_map(layout, dtype, shape), boxes), 0

    return build


def _multilevel(layout, dtype):
    p2 = _map(layout, dtype, (2, 4, 8, 8))
    p3 = _map(layout, dtype, (2, 4, 4, 4), seed=1)
    boxes = jnp.asarray(np.array([[0.0, 0.0, 6.0, 6.0], [1.0, 2.0, 30.0, 28.0], [3, 3, 9, 12.0]]))
    return (
        lambda p2, p3, b: jaxpool.multilevel_roi_align(
            [p2, p3],
            b.astype(jnp.float32),
            jnp.asarray(BATCH),
            2,
            spatial_scales=(0.25, 0.125),
            sampling_ratio=2,
            canonical_size=16,
            canonical_level=3,
            data_format=layout,
        ),
        (p2, p3, boxes),
        0,
    )


def _torch(call: Callable[..., Any], shape=(2, 4, 6, 7), extra: tuple[Any, ...] = ()) -> Build:
    def build(layout, dtype):
        return call, (_map("NCX", dtype, shape), *extra), 0

    return build


def _torch_unpool(nd):
    shape = (2, 3, *(6,) * nd)
    x = _map("NCX", "float32", shape)
    pool = getattr(jaxpool.torch, f"max_pool{nd}d")
    unpool = getattr(jaxpool.torch, f"max_unpool{nd}d")
    y, i = pool(x, 2, return_indices=True)

    def build(layout, dtype):
        return (lambda y, i: unpool(y, i, 2, output_size=x.shape[2:])), (y, i), 0

    return build


def _torch_windows(nd: int) -> dict[str, tuple[tuple[str, ...], tuple[str, ...], Build]]:
    shape = (2, 3, *(6, 7, 5)[:nd])
    t = jaxpool.torch
    nct = (("NCX",), FLOATS)
    return {
        f"torch.max_pool{nd}d": (
            *nct,
            _torch(lambda x: getattr(t, f"max_pool{nd}d")(x, 3, 2, 1, return_indices=True), shape),
        ),
        f"torch.avg_pool{nd}d": (
            *nct,
            _torch(lambda x: getattr(t, f"avg_pool{nd}d")(x, 3, 2, 1, ceil_mode=True), shape),
        ),
        f"torch.lp_pool{nd}d": (
            *nct,
            _torch(lambda x: getattr(t, f"lp_pool{nd}d")(x, 2, 2), shape),
        ),
        f"torch.adaptive_max_pool{nd}d": (
            *nct,
            _torch(
                lambda x: getattr(t, f"adaptive_max_pool{nd}d")(x, 3, return_indices=True), shape
            ),
        ),
        f"torch.adaptive_avg_pool{nd}d": (
            *nct,
            _torch(lambda x: getattr(t, f"adaptive_avg_pool{nd}d")(x, 4), shape),
        ),
        f"torch.max_unpool{nd}d": (("NCX",), ("float32",), _torch_unpool(nd)),
    }


def _torch_fractional(nd):
    shape = (2, 3, *(7,) * nd)
    samples = np.random.default_rng(2).uniform(size=(2, 3, nd))
    call = getattr(jaxpool.torch, f"fractional_max_pool{nd}d")

    def build(layout, dtype):
        return (
            lambda x, u: call(x, 2, output_size=4, return_indices=True, _random_samples=u),
            (_map("NCX", dtype, shape), jnp.asarray(samples, dtype)),
            0,
        )

    return (("NCX",), FLOATS, build)


def _torch_regions(call, shape=(2, 4, 6, 7)):
    return (("NCX",), FLOATS, _torch(call, shape, (jnp.asarray(BOXES5, jnp.float32),)))


def _torch_multi_scale(layout, dtype):
    p2 = _map("NCX", dtype, (2, 4, 8, 8))
    p3 = _map("NCX", dtype, (2, 4, 4, 4), seed=1)
    first = jnp.asarray([[0.0, 0.0, 6.0, 6.0], [1.0, 2.0, 30.0, 28.0]], jnp.float32)
    second = jnp.asarray([[3.0, 3.0, 9.0, 12.0]], jnp.float32)
    return (
        lambda p2, p3, b0, b1: jaxpool.torch.multi_scale_roi_align(
            [p2, p3], [b0, b1], [(32, 32)] * 2, 2, 2, canonical_scale=16
        ),
        (p2, p3, first, second),
        0,
    )


ROWS: dict[str, tuple[tuple[str, ...], tuple[str, ...], Build]] = {
    "max_pool": (
        LAYOUTS,
        WINDOW_DTYPES,
        _x_only(
            lambda x, f: jaxpool.max_pool(
                x, 3, 2, 1, 1, rounding_type="ceil", data_format=f, return_indices=True
            )
        ),
    ),
    # NXC with two leading batch axes, the tuple kernel fixing the spatial axes
    "min_pool": (
        LAYOUTS,
        WINDOW_DTYPES,
        _x_only(
            lambda x, f: jaxpool.min_pool(
                x if f == "NCX" else x[None],
                (3, 3),
                2,
                1,
                1,
                rounding_type="ceil",
                data_format=f,
                return_indices=True,
            )
        ),
    ),
    "avg_pool": (
        LAYOUTS,
        WINDOW_DTYPES,
        _x_only(lambda x, f: jaxpool.avg_pool(x, 3, 2, 1, 1, exclude_pad=True, data_format=f)),
    ),
    "lp_pool": (LAYOUTS, FLOATS, _x_only(lambda x, f: jaxpool.lp_pool(x, 2, 1, data_format=f))),
    "adaptive_max_pool": (
        LAYOUTS,
        WINDOW_DTYPES,
        _x_only(
            lambda x, f: jaxpool.adaptive_max_pool(x, (4, 3), data_format=f, return_indices=True)
        ),
    ),
    "adaptive_avg_pool": (
        LAYOUTS,
        WINDOW_DTYPES,
        _x_only(lambda x, f: jaxpool.adaptive_avg_pool(x, (4, 3), data_format=f)),
    ),
    "fractional_max_pool": (LAYOUTS, FLOATS, _fractional),
    "max_unpool": (LAYOUTS, FLOATS, _unpool),
    "roi_pool": (
        LAYOUTS,
        FLOATS,
        _regions(lambda x, b, f: jaxpool.roi_pool(x, b, (2, 3), data_format=f), BOXES5),
    ),
    "roi_align": (
        LAYOUTS,
        FLOATS,
        _regions(
            lambda x, b, f: (
                jaxpool.roi_align(x, b, BATCH, 2, sampling_ratio=2, data_format=f),
                jaxpool.roi_align(x, b, BATCH, (2, 3), mode="max", data_format=f),
            ),
            BOXES,
        ),
    ),
    "roi_align_rotated": (
        LAYOUTS,
        FLOATS,
        _regions(lambda x, b, f: jaxpool.roi_align_rotated(x, b, BATCH, 2, data_format=f), ROTATED),
    ),
    "psroi_pool": (
        LAYOUTS,
        FLOATS,
        _regions(lambda x, b, f: jaxpool.psroi_pool(x, b, 1, 2, data_format=f), BOXES5),
    ),
    "psroi_align": (
        LAYOUTS,
        FLOATS,
        _regions(lambda x, b, f: jaxpool.psroi_align(x, b, BATCH, 2, data_format=f), BOXES),
    ),
    "deformable_psroi_pool": (
        LAYOUTS,
        FLOATS,
        _regions(
            lambda x, b, f: jaxpool.deformable_psroi_pool(
                x,
                b,
                jnp.full((3, 2, 2, 2), 0.1, jnp.float32),
                output_dim=1,
                group_size=2,
                spatial_bins=2,
                data_format=f,
            ),
            BOXES5,
        ),
    ),
    "multilevel_roi_align": (LAYOUTS, FLOATS, _multilevel),
    "openvino.layer": (
        ("NCX",),
        FLOATS,
        _torch(
            jaxpool.openvino.layer(
                "MaxPool",
                {"kernel": "3,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1"},
                index_element_type="i32",
            )
        ),
    ),
    "onnx.node": (
        ("NCX",),
        FLOATS,
        _torch(
            jaxpool.onnx.node(
                onnx.helper.make_node("LpPool", ["x"], ["y"], kernel_shape=(2, 2), p=3)
            )
        ),
    ),
    **_torch_windows(1),
    **_torch_windows(2),
    **_torch_windows(3),
    "torch.fractional_max_pool2d": _torch_fractional(2),
    "torch.fractional_max_pool3d": _torch_fractional(3),
    "torch.roi_align": _torch_regions(
        lambda x, b: jaxpool.torch.roi_align(x, b, 2, 0.5, 2, aligned=True)
    ),
    "torch.roi_pool": _torch_regions(lambda x, b: jaxpool.torch.roi_pool(x, b, (2, 3), 0.5)),
    "torch.ps_roi_align": _torch_regions(lambda x, b: jaxpool.torch.ps_roi_align(x, b, 2, 0.5, 2)),
    "torch.ps_roi_pool": _torch_regions(lambda x, b: jaxpool.torch.ps_roi_pool(x, b, 2, 0.5)),
    "torch.multi_scale_roi_align": (("NCX",), FLOATS, _torch_multi_scale),
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


def _with_vjp(fn: Callable[..., Any], args: tuple[Any, ...], wrt: int | None):
    """``fn``'s outputs and, for a floating first output, its VJP in ``args[wrt]`` with a fixed
    cotangent."""

    def outputs(*args):
        out = fn(*args)
        first = out[0] if isinstance(out, tuple) else out
        if wrt is None or not jnp.issubdtype(first.dtype, jnp.floating):
            return out, None

        def values(a):
            o = fn(*args[:wrt], a, *args[wrt + 1 :])
            return o[0] if isinstance(o, tuple) else o

        y, vjp = jax.vjp(values, args[wrt])
        ct = jnp.cos(jnp.arange(y.size, dtype=jnp.float32)).reshape(y.shape).astype(y.dtype)
        return out, vjp(ct)

    return outputs


def _layouts_and_dtypes(layouts, dtypes):
    """Every layout and every dtype, each at least once: ``NCX float32, NXC bfloat16, NCX
    int32`` for the window functions."""
    count = max(len(layouts), len(dtypes))
    return [(layouts[i % len(layouts)], dtypes[i % len(dtypes)]) for i in range(count)]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_exports_for_every_platform_with_the_same_bits(name):
    layouts, dtypes, build = ROWS[name]
    cases = [build(layout, dtype) for layout, dtype in _layouts_and_dtypes(layouts, dtypes)]
    programs = [_with_vjp(fn, args, wrt) for fn, args, wrt in cases]
    arguments = tuple(args for _, args, _ in cases)

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
