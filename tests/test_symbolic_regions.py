"""Every region op through ``jax.export`` with a symbolic number of boxes, and of images.

Each row of ``regions.py`` is exported, in one program, for ``platforms=("cpu", "cuda",
"tpu")`` with its box count ``r`` symbolic, and its maps' first axis too (``"n, ..."``, where
the row allows it); serialized, deserialized, and called at two sizes against the program
compiled for those sizes: the same bits in every output, and the same gradients to the
rounding of their sums.  The program holds every variant of the row in its layout, and the
vector-Jacobian product of the first one in the maps and the boxes the op is smooth in.  Under
symbolic shapes the portable NCX program is the NXC one between two transposes
(``layout.row_major`` is the identity there), so the NXC variants run what it adds to the
CPU's.

Gradients are checked once per program family: not for the ``jaxpool.torch`` rows (they bind the
core ops) nor for the second row of ``psroi_pool``, and with adaptive sampling in
``test_symbolic_adaptive.py``, which differentiates every adaptive op on boxes larger than the
map.  A symbolic dimension is at least 1, so no export is called with no boxes; the ops' own
tests cover ``R = 0``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import regions
from jax import export

import jaxpool
from jaxpool import torch as tv

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

PLATFORMS = ("cpu", "cuda", "tpu")
CHANNELS = 8
# (images, boxes) of the two calls of each artifact, with a static and a symbolic image count.
SIZES = ((2, 1), (2, 5))
SYMBOLIC_IMAGES_SIZES = ((1, 1), (3, 5))
# The rows whose gradients are in their programs (the module docstring).
GRADIENTS = {row.name for row in regions.ROWS if row.portable} - {"psroi_pool_spatial_bins"}


def _program(row: regions.Row, layouts: tuple[str, ...], gradients: bool):
    """``f(*maps, *boxes) -> (outputs, cotangents)``: the outputs of ``row``'s variants in each
    of ``layouts`` (the maps given once per layout), and with ``gradients`` the vector-Jacobian
    product of the first output (its own cotangent) in the first layout's maps and the smooth
    box arrays."""
    levels = len(row.maps)

    def f(*args):
        maps, boxes = args[: levels * len(layouts)], args[levels * len(layouts) :]
        out = tuple(
            y
            for k, fmt in enumerate(layouts)
            for y in row.outputs(maps[k * levels : (k + 1) * levels], boxes, fmt)
        )
        if not gradients:
            return out, ()

        def first(maps, smooth):
            given = list(boxes)
            for i, b in zip(row.smooth, smooth):
                given[i] = b
            return row.call(maps, tuple(given), layouts[0], **row.variants_in(layouts[0])[0])

        y, pullback = jax.vjp(first, maps[:levels], tuple(boxes[i] for i in row.smooth))
        return out, pullback(y)

    return f


def _arguments(row: regions.Row, layouts, images: int, count: int, seed: int = 0):
    """The maps in each of ``layouts`` and the boxes of ``row`` at a size."""
    rng = np.random.default_rng(seed)
    maps = [rng.standard_normal((images, CHANNELS, h, w)).astype(np.float32) for h, w in row.maps]
    laid = [m if fmt == "NCX" else np.moveaxis(m, 1, -1) for fmt in layouts for m in maps]
    return (*laid, *row.boxes(rng, count, images))


def _same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (
        f"{what}: largest difference {np.max(np.abs(got - want))}"
    )


@pytest.mark.parametrize("row", (*regions.ROWS, *regions.ADAPTIVE_ROWS), ids=lambda r: r.name)
def test_symbolic_box_count(row):
    """``R`` symbolic (``"r, 4"``, ``"r"``), and ``N`` where the row allows it."""
    layouts = row.layouts
    f = _program(row, layouts, row.name in GRADIENTS)
    images, sizes = ("n", SYMBOLIC_IMAGES_SIZES) if row.symbolic_images else (None, SIZES)
    maps = (images and f"{images}, ...",) * (len(row.maps) * len(layouts))
    args = _arguments(row, layouts, *sizes[0])
    specs = export.symbolic_args_specs(args, (*maps, *row.specs))
    exported = export.export(jax.jit(f), platforms=PLATFORMS)(*specs)
    restored = export.deserialize(exported.serialize())
    for seed, size in enumerate(sizes):
        args = _arguments(row, layouts, *size, seed=seed)
        (values, grads), (want_values, want_grads) = restored.call(*args), jax.jit(f)(*args)
        for k, (got, want) in enumerate(zip(values, want_values, strict=True)):
            _same_bits(got, want, f"output {k} at {size}")
        # The gradients' sums may be ordered otherwise in the program refined from symbolic
        # shapes: equal to their rounding.
        for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True):
            scale = max(1.0, float(np.max(np.abs(want), initial=0)))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale)


_X, _BATCH = np.zeros((2, 8, 9, 10), np.float32), np.zeros(5, np.int32)
_ROWS, _OFFSETS = np.zeros((5, 5), np.float32), np.zeros((5, 4, 2, 2), np.float32)
_ALIGN = (lambda x, b, i: jaxpool.roi_align(x, b, i, 2), (_X, _ROWS[:, 1:], _BATCH))
# (function, arguments, their shapes, what the error names)
STATIC_DIMENSIONS = [
    (*_ALIGN, ("2, c, 9, 10", "r, 4", "r"), "`x` .* symbolic C"),
    (*_ALIGN, ("n, 8, h, 10", "r, 4", "r"), "`x` .* symbolic H"),
    (
        lambda x, r: jaxpool.roi_pool(x, r, 2, data_format="NXC"),
        (np.moveaxis(_X, 1, -1), _ROWS),
        ("n, 9, w, 8", "r, 5"),
        "`x` .* symbolic W",
    ),
    (
        lambda x, r: jaxpool.psroi_pool(x, r, 2, 2),
        (_X, _ROWS),
        (None, "r, k"),
        "`rois` .* symbolic row width",
    ),
    (
        lambda x, r, o: jaxpool.deformable_psroi_pool(x, r, o, output_dim=2, group_size=2),
        (_X, _ROWS, _OFFSETS),
        (None, "r, 5", "r, k, 2, 2"),
        "`offsets` .* symbolic 2 \\* K",
    ),
    (
        lambda x, b, i: jaxpool.multilevel_roi_align([x], b, i, 2, spatial_scales=(1.0,)),
        _ALIGN[1],
        ("2, 8, 9, w", "r, 4", "r"),
        "`features\\[0\\]` .* symbolic W",
    ),
    (
        lambda x, r: tv.ps_roi_align(x, r, 2),
        (_X, _ROWS),
        ("2, c, 9, 10", "r, 5"),
        "`input` .* symbolic C",
    ),
]


@pytest.mark.parametrize("f,args,shapes,match", STATIC_DIMENSIONS)
def test_static_dimensions_are_named(f, args, shapes, match):
    """Only the numbers of images and boxes may be symbolic: the error names the dimension."""
    specs = export.symbolic_args_specs(args, shapes)
    with pytest.raises(ValueError, match=match):
        export.export(jax.jit(f))(*specs)
