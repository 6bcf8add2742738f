"""psroi_align against ``reference.ps_roi_align`` (torchvision's CPU kernel) and roi_align.

Values on random cases with fixed seeds: boxes from sub-pixel to the whole map, partly outside
it and inverted, batch indices outside ``[0, N)``, every ``aligned_mode``, sampling ratios 0 to
3 and scales 1 to 1/16, both layouts.  Derivatives: the gradient in ``x`` is the adjoint of
the reference's linear map (``<J v, w> = <v, J^T w>``).  Derivatives in the boxes, transforms,
16-bit maps, empty inputs and NaN boxes: with the rest of the family in ``test_roi.py``.
"""

from __future__ import annotations

import functools
import itertools

import cases
import jax
import numpy as np
import pytest
import reference

import jaxpool

ALIGNED_MODES = ("half_pixel_for_nn", "asymmetric", "half_pixel")
SCALES = (1.0, 0.5, 1 / 16)
ATOL = 2e-5


def check(got, want, data_format="NCX"):
    got = cases.from_layout(got, data_format).astype(np.float32)
    want = np.asarray(want, np.float32)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL * max(1.0, np.abs(want).max()))


def random_boxes(rng, height, width, scale):
    """16 boxes on a map of ``height x width`` at ``scale``, and batch indices (some outside
    [0, 2))."""
    rois = cases.random_boxes(rng, 16, height, width, scale, inverted=0.25)
    return rois, rng.choice([-1, 0, 1, 2, 5], 16, p=[0.1, 0.35, 0.35, 0.1, 0.1])


def random_case(seed):
    """Features ``[2, D * out_h * out_w, H, W]``, boxes, batch indices, the output size and
    the scale."""
    rng = np.random.default_rng(seed)
    out = tuple(int(v) for v in rng.integers(1, 4, 2))
    dim = int(rng.integers(1, 3))
    height, width = (int(v) for v in rng.integers(1, 13, 2))
    x = rng.standard_normal((2, dim * out[0] * out[1], height, width)).astype(np.float32)
    scale = SCALES[seed % len(SCALES)]
    return x, *random_boxes(rng, height, width, scale), out, scale


VALUE_CASES = list(itertools.product(ALIGNED_MODES, range(4)))


# Each case compiles its programs once for three draws of boxes; the layouts take turns, so
# that every aligned mode and ratio runs in both.
@pytest.mark.parametrize("aligned_mode,sampling_ratio", VALUE_CASES)
def test_matches_reference(aligned_mode, sampling_ratio):
    seed = VALUE_CASES.index((aligned_mode, sampling_ratio))
    data_format = ("NCX", "NXC")[(seed + seed // 4) % 2]
    x, rois, batch, out, scale = random_case(seed)
    rng = np.random.default_rng(100 + seed)
    draws = [(rois, batch)] + [random_boxes(rng, *x.shape[2:], scale) for _ in range(2)]
    kwargs = dict(spatial_scale=scale, sampling_ratio=sampling_ratio, aligned_mode=aligned_mode)
    pool = jax.jit(
        lambda a, r, b: jaxpool.psroi_align(a, r, b, out, data_format=data_format, **kwargs)
    )
    for rois, batch in draws:
        want = reference.ps_roi_align(x, rois, batch, out, **kwargs)
        got = pool(cases.to_layout(x, data_format), rois, batch)
        assert got.dtype == np.float32
        check(got, want, data_format)


@pytest.mark.parametrize("aligned_mode", ALIGNED_MODES)
def test_matches_roi_align_of_the_bins_channels(aligned_mode):
    """Bin ``(i, j)`` of output channel ``c`` is roi_align's bin ``(i, j)`` of input channel
    ``(c * out_h + i) * out_w + j``."""
    rng = np.random.default_rng(ALIGNED_MODES.index(aligned_mode))
    out_h, out_w, dim = 2, 3, 2
    x = rng.standard_normal((2, dim * out_h * out_w, 11, 9)).astype(np.float32)
    low = rng.uniform(-2, 12, (10, 2))
    rois = np.concatenate([low, low + rng.uniform(1, 14, (10, 2))], 1).astype(np.float32)
    batch = rng.integers(0, 2, 10)
    for sampling_ratio in (0, 2):
        kwargs = dict(sampling_ratio=sampling_ratio, aligned_mode=aligned_mode, spatial_scale=0.5)
        every = np.asarray(jaxpool.roi_align(x, rois, batch, (out_h, out_w), mode="avg", **kwargs))
        i, j = np.arange(out_h)[:, None], np.arange(out_w)[None, :]
        want = every.reshape(10, dim, out_h, out_w, out_h, out_w)[:, :, i, j, i, j]
        got = jaxpool.psroi_align(x, rois, batch, (out_h, out_w), **kwargs)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_rules():
    """The docstring's rules: torchvision's default corners (``x * scale - 0.5``, no bound on
    the size), zeros for batch indices outside ``[0, N)``, 0 for bins without samples, and the
    adaptive count ``ceil(bin size)`` beyond the map and on a larger map."""
    x = np.arange(2 * 4 * 6 * 6, dtype=np.float32).reshape(2, 4, 6, 6) + 10
    # One call (one program): batch indices outside [0, N), then an inverted box (with adaptive
    # sampling: ceil of a negative bin size, no samples, 0, not NaN), then boxes larger than the
    # map (ceil(bin size) samples, as many as torchvision takes).
    rois = np.array(
        [[0.0, 0.0, 4.0, 4.0]] * 4
        + [[3.0, 3.0, 1.0, 1.0], [-20.0, -20.0, 30.0, 30.0], [-90.0, 1.0, 400.0, 3.0]],
        np.float32,
    )
    batch = np.array([-1, 2, 7, 1, 0, 1, 0])
    got = np.asarray(jaxpool.psroi_align(x, rois, batch, 2))
    assert np.all(got[:3] == 0) and np.all(got[3] > 0)
    assert np.all(got[4] == 0)
    check(got, reference.ps_roi_align(x, rois, batch, (2, 2)))
    # A box of size 0.4 takes one sample per bin at its bin centre (torchvision: no clamp).
    thin = np.array([[2.0, 2.0, 2.4, 2.4]], np.float32)
    got = np.asarray(jaxpool.psroi_align(x[:, :1], thin, np.array([0]), 1))
    np.testing.assert_allclose(got, reference.ps_roi_align(x[:, :1], thin, [0], (1, 1)))
    np.testing.assert_allclose(got[0, 0, 0, 0], 10 + 1.7 * 6 + 1.7, rtol=1e-6)
    # A 38x50 map at scale 1/16, 7x7 bins (adaptive sampling up to 6 x 8 samples per bin, read
    # by one stacked gather).
    rng = np.random.default_rng(100)
    x = rng.standard_normal((2, 2 * 49, 38, 50)).astype(np.float32)
    rois = cases.random_boxes(rng, 12, 38, 50, 1 / 16)
    batch = rng.integers(0, 2, 12)
    want = reference.ps_roi_align(x, rois, batch, (7, 7), spatial_scale=1 / 16)
    check(jaxpool.psroi_align(x, rois, batch, 7, spatial_scale=1 / 16), want)


# Adaptive sampling with one aligned mode, every mode with a fixed ratio (the modes only move
# the boxes), and both ways of reading fixed ratios: 2 in one unrolled chain, 5 in a loop over
# tiles.  Each case its own map, all of them in one program.
ADJOINT_CASES = [*zip(ALIGNED_MODES, (2, 5, 2)), ("half_pixel_for_nn", 0)]


def test_gradient_is_adjoint_of_reference():
    """psroi_align is linear in ``x``: the reference applied to ``v`` is ``J v``, the gradient
    (``vjp``) is its adjoint, and ``jvp`` is ``J v``."""
    functions, xs, vs, ws, jvs = {}, {}, {}, {}, {}
    for aligned_mode, sampling_ratio in ADJOINT_CASES:
        name = f"{aligned_mode}-{sampling_ratio}"
        x, rois, batch, out, scale = random_case(50 + sampling_ratio)
        kwargs = dict(spatial_scale=scale, sampling_ratio=sampling_ratio, aligned_mode=aligned_mode)
        functions[name] = functools.partial(
            jaxpool.psroi_align, rois=rois, batch_indices=batch, output_size=out, **kwargs
        )
        rng = np.random.default_rng(sampling_ratio)
        xs[name], vs[name] = x, rng.standard_normal(x.shape).astype(np.float32)
        jvs[name] = reference.ps_roi_align(vs[name].astype(np.float64), rois, batch, out, **kwargs)
        ws[name] = rng.standard_normal(jvs[name].shape).astype(np.float32)

    @jax.jit
    def derivatives(xs, vs, ws):
        return {
            name: (jax.vjp(f, xs[name])[1](ws[name])[0], jax.jvp(f, (xs[name],), (vs[name],))[1])
            for name, f in functions.items()
        }

    for name, (jtw, tangent) in derivatives(xs, vs, ws).items():
        jv_w = jvs[name].ravel() @ ws[name].ravel().astype(np.float64)
        v_jtw = np.asarray(jtw, np.float64).ravel() @ vs[name].ravel().astype(np.float64)
        assert abs(jv_w - v_jtw) / (1 + abs(jv_w)) < 1e-5, name
        check(tangent, jvs[name])
