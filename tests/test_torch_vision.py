"""``jaxpool.torch``'s torchvision region ops against ``tests/reference.py``'s torchvision
kernels: values and feature gradients on random boxes (inside the map, across its border,
outside it, larger than it, empty and inverted), both box formats, under ``jit`` and eagerly;
and the core ``psroi_pool``'s ``rounding="torchvision"`` that ``ps_roi_pool`` binds.

Values and gradients are compared in float64.  The linear ops (``roi_align``, ``ps_roi_align``,
``ps_roi_pool``, ``multi_scale_roi_align``) are checked through the adjoint identity ``<J v, w>
= <v, J^T w>``, with the reference computing ``J v``; ``roi_pool``'s and ``ps_roi_pool``'s
gradients are also compared element by element with the reference's backward kernels.
"""

from __future__ import annotations

import functools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import regions

import jaxpool
import jaxpool.torch as tv

# Compilation dominates the time of these tests: each static configuration compiles once and
# serves several random draws.
# roi_align's and ps_roi_align's cases: (H, W) map, output size, spatial scale, sampling ratio
# (-1 and 0 adaptive), aligned.
ALIGN_CONFIGS = [
    ((7, 9), (2, 2), 1.0, -1, False),
    ((7, 9), (3, 2), 0.5, 2, True),
    ((6, 5), 3, 0.625, 0, True),
]
# roi_pool's and ps_roi_pool's: (H, W) map, output size, spatial scale.
POOL_CONFIGS = [
    ((7, 9), (2, 2), 1.0),
    ((8, 6), (1, 4), 0.25),
    ((9, 7), (2, 3), 0.625),
]
DRAWS = 4  # random draws per config
BOXES = 6  # boxes per draw
BATCH = 2


def random_boxes(rng: np.random.Generator, k: int, height: float, width: float) -> np.ndarray:
    """``[k, 4]`` boxes in image pixels: inside, across the border, outside, larger than the
    image, one empty and one inverted."""
    x1 = rng.uniform(-0.4, 1.1, k) * width
    y1 = rng.uniform(-0.4, 1.1, k) * height
    w = rng.uniform(0.0, 1.6, k) * width
    h = rng.uniform(0.0, 1.6, k) * height
    w[0] = 0.0
    h[1] *= -0.2
    return np.stack([x1, y1, x1 + w, y1 + h], 1)


def draws(seed: int, configs, channels):
    """Per config, ``DRAWS`` cases ``(config, x, rows, per_image)``: ``x`` float64 with
    ``channels(output_size)`` channels, ``rows`` the ``[K, 5]`` boxes (sorted by image) and
    ``per_image`` the same boxes as a list of ``[L_i, 4]`` arrays."""
    rng = np.random.default_rng(seed)
    for config in configs:
        (height, width), out, scale = config[:3]
        for _ in range(DRAWS):
            x = rng.standard_normal((BATCH, channels(reference._pair(out)), height, width))
            boxes = random_boxes(rng, BOXES, height / scale, width / scale)
            batch = np.sort(rng.integers(0, BATCH, BOXES))
            rows = np.concatenate([batch[:, None].astype(np.float64), boxes], 1)
            per_image = [boxes[batch == i] for i in range(BATCH)]
            yield config, x, rows, per_image


@functools.partial(jax.jit, static_argnums=(0, 1))
def _value_and_vjp(fn, static, x, ct, boxes):
    y, vjp = jax.vjp(lambda v: fn(v, boxes, **dict(static)), x)
    return y, vjp(ct)[0]


def value_and_vjp(fn, x, ct, boxes, **static):
    """``fn(x, boxes, **static)`` and the gradient in ``x`` (a map or a list of maps) of
    ``sum(y * ct)``, under ``jit`` with the boxes as operands (one compilation per static
    arguments and shapes)."""
    return jax.tree.map(np.asarray, _value_and_vjp(fn, tuple(static.items()), x, ct, boxes))


def diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0))


def torchvision_reference(
    name, x, rows, output_size, spatial_scale, sampling_ratio=0, aligned=False
):
    """The op's value by the reference (``roi_pool``'s with its argmax)."""
    if name in ("roi_pool", "ps_roi_pool"):
        return getattr(reference, f"torchvision_{name}")(x, rows, output_size, spatial_scale)
    boxes, batch = rows[:, 1:], rows[:, 0].astype(int)
    kwargs = dict(spatial_scale=spatial_scale, sampling_ratio=max(sampling_ratio, 0))
    if name == "roi_align":
        kwargs["aligned_mode"] = "half_pixel_for_nn" if aligned else "asymmetric"
        return reference.roi_align(x, boxes, batch, output_size, **kwargs)
    # torchvision's 0 / 0 (a box with a count of 0 samples): NaN, and no gradient.
    return reference.ps_roi_align(
        x, boxes, batch, reference._pair(output_size), empty_bin="nan", **kwargs
    )


STATIC = ("output_size", "spatial_scale", "sampling_ratio", "aligned")
# Per op: its configs, its channels (from the output size), how many of STATIC it takes.
OPS = {
    "roi_align": (ALIGN_CONFIGS, lambda out: 3, 4),
    "ps_roi_align": (ALIGN_CONFIGS, lambda out: 2 * out[0] * out[1], 3),
    "roi_pool": (POOL_CONFIGS, lambda out: 3, 2),
    "ps_roi_pool": (POOL_CONFIGS, lambda out: 2 * out[0] * out[1], 2),
}


@pytest.mark.parametrize("name", OPS)
def test_values_and_gradients(name, x64):
    """Values, and gradients: ``roi_pool``'s against the reference's backward kernel,
    ``ps_roi_pool``'s against the forward's adjoint (torchvision's backward kernels differ from
    it in bins that reach the map's last row or column; see the next tests), the others'
    through the adjoint identity.  Boxes as a list of ``[L_i, 4]`` arrays give what their
    ``[K, 5]`` rows gave (``roi_align`` takes boxes and batch indices apart, ``ps_roi_pool``
    takes rows: the two ways the binders pass boxes on)."""
    configs, channels, taken = OPS[name]
    drawn = list(draws(list(OPS).index(name), configs, channels))
    assert len(drawn) == len(configs) * DRAWS
    value_gaps, grad_gaps, empties = [], [], 0
    for k, (config, x, rows, per_image) in enumerate(drawn):
        static = dict(zip(STATIC[:taken], config[1:]))
        want = torchvision_reference(name, x, rows, **static)
        want, argmax = want if name == "roi_pool" else (want, None)
        nan = np.isnan(want)
        empties += nan.any()
        rng = np.random.default_rng(k)
        ct = np.where(nan, 0.0, rng.standard_normal(want.shape))
        y, g = value_and_vjp(getattr(tv, name), x, ct, jnp.asarray(rows), **static)
        np.testing.assert_array_equal(np.isnan(y), nan)
        value_gaps.append(diff(np.where(nan, 0, y), np.where(nan, 0, want)))
        if name == "roi_pool":
            grad_gaps.append(
                diff(g, reference.torchvision_roi_pool_backward(ct, rows, argmax, x.shape))
            )
        elif name == "ps_roi_pool":
            adjoint = reference.torchvision_ps_roi_pool_backward(
                ct, rows, x.shape, *config[1:], last=1
            )
            grad_gaps.append(diff(g, adjoint))
        else:
            v = rng.standard_normal(x.shape)
            jv, jtw = np.where(nan, 0.0, torchvision_reference(name, v, rows, **static)), g
            a, b = float(jv.ravel() @ ct.ravel()), float(v.ravel() @ jtw.ravel())
            grad_gaps.append(abs(a - b) / (1.0 + abs(a)))
        if k == 0 and name in ("roi_align", "ps_roi_pool"):
            listed = [jnp.asarray(b) for b in per_image]
            y_list, g_list = value_and_vjp(getattr(tv, name), x, ct, listed, **static)
            np.testing.assert_array_equal(y_list, y)
            np.testing.assert_array_equal(g_list, g)
    assert bool(empties) == (name == "ps_roi_align"), empties
    assert max(value_gaps) <= (0 if name == "roi_pool" else 1e-12), value_gaps
    assert max(grad_gaps) < 1e-12, grad_gaps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roi_pool_bin_edges_and_maximum_follow_torchvision(dtype, x64):
    """Bin edges in the input's dtype (a box of 29 rows over 7 bins: float64's last bin ends at
    ``ceil(7 * (29 / 7)) = 30``, float32's at 29) and the strictly larger scan from
    ``-FLT_MAX``: a NaN never becomes the maximum, and a bin of NaN and ``-inf`` alone gives
    ``-FLT_MAX`` with no gradient (``jaxpool.roi_pool`` propagates the NaN)."""
    x = np.zeros((1, 2, 31, 3), dtype)
    x[0, :, 20] = 1.0
    x[0, :, 29] = 5.0
    x[0, 1, 21:25] = np.array([np.nan, 7.0, np.nan, -np.inf])[:, None]
    x[0, 1, 0:5, 1:] = [np.nan, -np.inf]
    rows = np.array([[0.0, 0.0, 0.0, 2.0, 28.0], [0.0, 1.0, 0.0, 2.0, 4.0]], dtype)
    want, argmax = reference.torchvision_roi_pool(x, rows, (7, 1))
    ct = np.random.default_rng(0).standard_normal(want.shape).astype(dtype)
    y, g = value_and_vjp(tv.roi_pool, x, ct, jnp.asarray(rows), output_size=(7, 1))
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(
        g, reference.torchvision_roi_pool_backward(ct, rows, argmax, x.shape)
    )
    assert want[0, 0, -1, 0] == (5.0 if dtype == np.float64 else 0.0)
    assert want[0, 1, -2, 0] == 7.0 and want[1, 1, 0, 0] == -np.finfo(np.float32).max
    assert np.isnan(jaxpool.roi_pool(x, rows, (7, 1))[0, 1, -2, 0])


def test_ps_roi_pool_gradient_where_torchvision_backward_agrees(x64):
    """Boxes that end before the last row and column: torchvision's backward kernels and the
    adjoint of its forward (this gradient) agree."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 12, 9, 10))
    low = rng.uniform(-2.0, 4.0, (8, 2))
    high = np.minimum(low + rng.uniform(0.0, 5.0, (8, 2)), 7.4)
    rows = np.concatenate([rng.integers(0, 2, (8, 1)), low, high], 1)
    ct = rng.standard_normal((8, 2, 2, 3))
    y, g = value_and_vjp(tv.ps_roi_pool, x, ct, jnp.asarray(rows), output_size=(2, 3))
    np.testing.assert_allclose(y, reference.torchvision_ps_roi_pool(x, rows, (2, 3)), atol=1e-12)
    want = reference.torchvision_ps_roi_pool_backward(ct, rows, x.shape, (2, 3))
    np.testing.assert_allclose(g, want, atol=1e-12)


def test_roi_pool_bins_of_boxes_larger_than_the_map(x64):
    """Bins longer than one chunk are read whole."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 20, 24))
    rows = np.array([[0.0, -30.0, -25.0, 60.0, 55.0], [0.0, 2.0, 1.0, 23.0, 19.0]])
    want, _ = reference.torchvision_roi_pool(x, rows, 1)
    np.testing.assert_array_equal(tv.roi_pool(x, rows, 1), want)
    want = reference.torchvision_ps_roi_pool(np.tile(x, (1, 2, 1, 1)), rows, (2, 1))
    np.testing.assert_allclose(tv.ps_roi_pool(np.tile(x, (1, 2, 1, 1)), rows, (2, 1)), want)


# --------------------------------------------------------------------------------------------
# The core option: psroi_pool(rounding="torchvision").
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("group_size", [2, (3, 2)])
def test_psroi_pool_torchvision_rounding(group_size, data_format, x64):
    """OpenVINO's batch index -1, which ends the list of boxes, is not torchvision's: it zeroes
    its own box (the first) and the boxes after it are pooled."""
    gh, gw = reference._pair(group_size)
    rng = np.random.default_rng(gh * 10 + gw)
    x = rng.standard_normal((2, 3 * gh * gw, 8, 7))
    rows = np.concatenate([rng.integers(0, 2, (9, 1)), random_boxes(rng, 9, 16, 14)], 1)
    rows = np.concatenate([[[-1.0, 0.0, 0.0, 8.0, 8.0], [0.0, 2.0, 0.0, 10.0, 6.0]], rows])
    want = reference.torchvision_ps_roi_pool(x, rows, (gh, gw), 0.5)
    kwargs = dict(spatial_scale=0.5, rounding="torchvision", data_format=data_format)
    y = jaxpool.psroi_pool(cases.to_layout(x, data_format), rows, 3, group_size, **kwargs)
    y = np.asarray(cases.from_layout(y, data_format))
    np.testing.assert_allclose(y, want, atol=1e-12)
    assert not np.any(y[0]) and np.all(y[1] != 0)


def test_ps_roi_pool_float32_never_reads_the_last_row_and_column():
    """torchvision's forward clips every bin to ``[0, H - 1]``."""
    x = jnp.zeros((1, 1, 4, 5)).at[0, 0, 3, :].set(1.0).at[0, 0, :, 4].set(1.0)
    y = tv.ps_roi_pool(x, jnp.array([[0.0, 0.0, 0.0, 9.0, 9.0]]), 1)
    assert y.tolist() == [[[[0.0]]]]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    rows = np.concatenate([rng.integers(0, 2, (6, 1)), random_boxes(rng, 6, 18, 18)], 1)
    rows = rows.astype(np.float32)
    want = reference.torchvision_ps_roi_pool(x, rows, 2, 0.5)
    y = tv.ps_roi_pool(x, rows, 2, 0.5)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want, atol=1e-5)


# --------------------------------------------------------------------------------------------
# multi_scale_roi_align.
# --------------------------------------------------------------------------------------------

# Per case: the image shapes, the maps' (H, W) (finest first), the output size, the sampling
# ratio, the canonical scale and level.
PYRAMIDS = [
    ([(64, 80), (60, 72)], [(16, 20), (8, 10), (4, 5)], 3, 2, 224, 4),
    ([(64, 80), (64, 64)], [(16, 20), (8, 10)], (2, 3), -1, 32, 3),
    ([(40, 40), (30, 36)], [(10, 10)], 2, 0, 224, 4),
    # Maps that skip a level (scales 1/8 and 1/32): level 4 on the 1/32 map, level 5 zeros.
    ([(128, 128), (120, 128)], [(16, 16), (4, 4)], 2, 2, 32, 4),
]


@pytest.mark.parametrize("case", range(len(PYRAMIDS)))
def test_multi_scale_roi_align(case, x64):
    images, sizes, out, ratio, canonical_scale, canonical_level = PYRAMIDS[case]
    rng = np.random.default_rng(case)
    static = dict(image_shapes=tuple(images), output_size=out, sampling_ratio=ratio)
    static.update(canonical_scale=canonical_scale, canonical_level=canonical_level)
    for draw in range(DRAWS):
        maps = [rng.standard_normal((2, 3, h, w)) for h, w in sizes]
        side = np.exp(rng.uniform(np.log(2.0), np.log(100.0), (2, 4)))
        corner = rng.uniform(-10, 60, (2, 4, 2))
        boxes = [
            np.concatenate([c, c + np.stack([s, s * 0.8], 1)], 1) for c, s in zip(corner, side)
        ]
        boxes[0][0, 2] = boxes[0][0, 0] - 1.0  # negative area: no level (several maps)
        want = reference.multi_scale_roi_align(maps, boxes, **static)
        ct = rng.standard_normal(want.shape)
        y, grads = value_and_vjp(tv.multi_scale_roi_align, maps, ct, boxes, **static)
        np.testing.assert_allclose(y, want, atol=1e-12)
        v = [rng.standard_normal(m.shape) for m in maps]
        a = float(reference.multi_scale_roi_align(v, boxes, **static).ravel() @ ct.ravel())
        b = sum(float(vi.ravel() @ gi.ravel()) for vi, gi in zip(v, grads))
        assert abs(a - b) / (1 + abs(a)) < 1e-12
        if draw == 0:
            eager = tv.multi_scale_roi_align(maps, boxes, **static)
            np.testing.assert_allclose(eager, y, atol=1e-12)


def test_multi_scale_scales_follow_the_largest_image_height():
    """Scales from the heights (``2 ** round(log2(H_l / H))``), the widths not entering: maps of
    heights 25 and 12 under images 100 high are 1/4 and 1/8."""
    shapes = [(1, 1, 25, 40), (1, 1, 12, 20)]
    assert reference.multi_scale_scales(shapes, [(100, 30), (90, 160)]) == [0.25, 0.125]
    maps = [jnp.ones((2, 1, 25, 40)), 2 * jnp.ones((2, 1, 12, 20))]
    # Areas of 8 x 8 and 150 x 90 pixels: levels 2 and 3 (the 1/4 and 1/8 maps).
    boxes = [jnp.array([[0.0, 0.0, 8.0, 8.0]]), jnp.array([[0.0, 0.0, 150.0, 90.0]])]
    y = tv.multi_scale_roi_align(maps, boxes, [(100, 30), (90, 160)], 1, 2)
    assert y[:, 0, 0, 0].tolist() == [1.0, 2.0]


# --------------------------------------------------------------------------------------------
# Transforms and shapes.
# --------------------------------------------------------------------------------------------


REGION_OPS = ("roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool")


def test_jit_equals_eager_batch_indices_outside_and_no_boxes():
    """jit equals eager; a batch index outside ``[0, N)`` (-1, N, far outside) gives zeros
    (every op in one program); no boxes, in either format, give no rows."""
    rng = np.random.default_rng(8)
    x = jnp.asarray(rng.standard_normal((2, 8, 7, 6)), jnp.float32)
    boxes = np.concatenate(
        [[[1.0, 2.0, 10.0, 9.0], [-3.0, 0.5, 6.0, 12.0]], random_boxes(rng, 3, 14, 12)]
    )
    batch = np.array([[0.0], [1.0], [-1.0], [2.0], [1e10]])
    rows = jnp.asarray(np.concatenate([batch, boxes], 1), jnp.float32)

    def every(a, r):
        return {name: getattr(tv, name)(a, r, 2, 0.5) for name in REGION_OPS}

    got = jax.jit(every)(x, rows)
    for name, want in every(x, rows).items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)
        assert not np.any(np.asarray(want[2:])) and np.any(np.asarray(want[:2])), name
        for no_boxes in (jnp.zeros((0, 5)), [jnp.zeros((0, 4)), jnp.zeros((0, 4))]):
            y = getattr(tv, name)(x, no_boxes, 2)
            assert y.shape == (0, 2 if name.startswith("ps") else 8, 2, 2), name


def test_nan_box_gives_nan_for_that_box_alone():
    """A box with a NaN coordinate: NaN in its whole output, no cotangent from it, every other
    box and its gradient in the features unchanged (the rows' variants of ``regions.py`` in one
    program)."""
    regions.check_nan_boxes({"torch.pools": (0, 1), "torch.aligns": (0, 1)})
