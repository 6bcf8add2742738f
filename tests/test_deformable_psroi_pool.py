"""deformable_psroi_pool against the OpenVINO runtime's DeformablePSROIPooling-1 (CPU plugin).

Values on random cases with fixed seeds, for every attribute: classes of offsets from one to
one per output channel, part grids smaller and larger than the bins, 1 to 20 samples per bin
(the longest read in tiles), scales 1 to 1/16, negative ``trans_std``, size-1 maps, boxes
from sub-pixel to many times the map, partly or wholly outside it, inverted and on
half-integers, offsets that push samples off the map; both layouts.
Derivatives: the gradient in ``x`` is the adjoint of the float64 reference's linear map
(``<J v, w> = <v, J^T w>``), the derivatives in the offsets agree with central differences in
float64, and those in the boxes (rounded to pixels) are 0.  Transforms, 16-bit maps, empty
inputs and NaN boxes: with the rest of the family in ``test_roi.py``.
"""

from __future__ import annotations

import functools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import pytest
import reference

import jaxpool

ATOL = 2e-5
_CORE = ov.Core()
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


@functools.cache
def _compiled(shapes, attrs):
    params = [opset1.parameter(list(s), ov.Type.f32) for s in shapes]
    offsets = dict(offsets=params[2]) if len(shapes) == 3 else {}
    node = opset1.deformable_psroi_pooling(*params[:2], **dict(attrs), **offsets)
    return _CORE.compile_model(ov.Model(node.outputs(), params), "CPU", _CONFIG)


def runtime_attrs(attrs, part_size):
    """The runtime's attributes of jaxpool's ``attrs``."""
    bins = attrs.get("spatial_bins", 1)
    bins_y, bins_x = (bins, bins) if isinstance(bins, int) else bins
    out = {k: v for k, v in attrs.items() if k != "spatial_bins"}
    out.update(spatial_bins_y=bins_y, spatial_bins_x=bins_x, part_size=part_size)
    return out | {k: float(attrs.get(k, 1.0)) for k in ("spatial_scale", "trans_std")}


def runtime(x, rois, offsets=None, **attrs):
    """The runtime's output for NCX ``x``, with jaxpool's attribute names."""
    attrs = runtime_attrs(attrs, 1 if offsets is None else offsets.shape[2])
    inputs = [np.ascontiguousarray(a, np.float32) for a in (x, rois, offsets) if a is not None]
    model = _compiled(tuple(a.shape for a in inputs), tuple(sorted(attrs.items())))
    return np.asarray(model(inputs)[model.outputs[0]])


def call(x, rois, offsets=None, data_format="NCX", **attrs):
    """deformable_psroi_pool of NCX ``x`` laid out in ``data_format``."""
    layout = cases.to_layout(x, data_format)
    return jaxpool.deformable_psroi_pool(layout, rois, offsets, data_format=data_format, **attrs)


def check(got, want, data_format="NCX"):
    got = cases.from_layout(got, data_format).astype(np.float32)
    want = np.asarray(want, np.float32)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL * max(1.0, np.abs(want).max()))


# (name, map (H, W), classes K or None for no offsets, part size, offsets' magnitude, layout,
# attributes).  C = output_dim * group_size**2.
# fmt: off
CONFIGS = [
    ("one-bin-size-1-rows", (1, 7), None, 1, 0, "NCX", dict(output_dim=1, group_size=1)),
    ("class-per-channel", (9, 6), 3, 2, 1, "NXC", dict(output_dim=3, group_size=2,
     spatial_scale=0.5, spatial_bins=(2, 3), trans_std=0.1)),
    ("9-samples", (10, 12), 1, 3, 1, "NCX", dict(output_dim=2, group_size=3,
     spatial_scale=1 / 16, spatial_bins=3)),
    ("tiles-fewer-parts", (7, 9), 2, 2, 1, "NXC", dict(output_dim=2, group_size=3,
     spatial_scale=0.25, spatial_bins=(5, 4), trans_std=0.5)),
    ("more-parts-size-1-columns", (5, 1), 2, 5, 1, "NCX", dict(output_dim=4, group_size=2,
     spatial_bins=(1, 2), trans_std=-0.75)),
    ("no-offsets", (8, 8), None, 1, 0, "NXC", dict(output_dim=1, group_size=4,
     spatial_scale=0.1875, spatial_bins=(2, 1))),
    ("pushed-off-the-map", (4, 5), 1, 2, 3, "NCX", dict(output_dim=2, group_size=2,
     spatial_scale=0.5, spatial_bins=3)),
]
# fmt: on
NUM_ROIS = 10


def random_case(config, seed):
    """Features ``[2, C, H, W]``, rows ``(batch_index, x_1, y_1, x_2, y_2)`` (fractional batch
    indices in ``[0, 2)``, corners on half-integers for odd seeds) and offsets (or None)."""
    _, (height, width), classes, part, reach, _, attrs = config
    rng = np.random.default_rng(seed)
    gs, scale = attrs["group_size"], attrs.get("spatial_scale", 1.0)
    x = rng.standard_normal((2, attrs["output_dim"] * gs * gs, height, width)).astype(np.float32)
    boxes = cases.random_boxes(rng, NUM_ROIS, height, width, scale, inverted=0.2)
    boxes[-1] = [-3 * width / scale, -2 * height / scale, 4 * width / scale, 3 * height / scale]
    if seed % 2:
        boxes = np.round(boxes * 2) / 2
    batch = rng.integers(0, 2, NUM_ROIS) + rng.uniform(0, 0.99, NUM_ROIS)
    rois = np.concatenate([batch[:, None], boxes], 1).astype(np.float32)
    offsets = None
    if classes is not None:
        offsets = rng.uniform(-reach, reach, (NUM_ROIS, 2 * classes, part, part))
        offsets = offsets.astype(np.float32)
    return x, rois, offsets


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_matches_runtime(config):
    """Three draws of each configuration; on the configurations whose scales and ``trans_std``
    float32 holds exactly, the float64 reference that the derivative tests use is the
    runtime's op too."""
    data_format, attrs = config[5], config[6]
    for seed in range(3):
        x, rois, offsets = random_case(config, seed)
        got = call(x, rois, offsets, data_format, **attrs)
        want = runtime(x, rois, offsets, **attrs)
        assert got.dtype == np.float32
        check(got, want, data_format)
        if config in CONFIGS[2:5]:
            check(reference.deformable_psroi_pool(x, rois, offsets, **attrs), want)


def test_runtime_rules():
    """The docstring's rules, each against the runtime: a batch index of -1 ends the list of
    boxes, indices are truncated, tiny and inverted boxes are 0.1 wide, samples outside
    ``[-0.5, L - 0.5]`` are skipped (a bin of none gives 0), and other batch indices outside
    ``[0, N)`` give zeros (where the runtime reads outside its input)."""
    config = CONFIGS[1]
    x, rois, offsets = random_case(config, 10)
    attrs = config[6]
    rois[:, 1:] = [3, 2, 8, 9]
    rois[:, 0] = [0, 1.9, -0.5, 0, 1, -0.99, 1, -1, 0, 1]
    rois[3, 1:] = [5, 4, 5.4, 3.6]  # a box of one pixel
    rois[4, 1:] = [9, 9, 1, 2]  # inverted
    rois[6, 1:] = [-40, -40, -30, -30]  # off the map
    offsets[6] = 0
    offsets[5, 0::2] = 40  # every bin pushed 4 box widths right, off the map
    got = call(x, rois, offsets, **attrs)
    want = runtime(x, rois, offsets, **attrs)
    check(got, want)
    assert np.all(want[5:] == 0) and np.all(want[6] == 0)
    assert np.all(np.abs(want[:5]).sum((1, 2, 3)) > 0)
    # Batch indices 2 and -2 read outside the runtime's input: zeros here.
    rois[:2, 0] = [2, -2]
    got = np.asarray(call(x, rois, offsets, **attrs))
    assert np.all(got[:2] == 0)
    check(got[2:5], want[2:5])


@pytest.mark.parametrize("config", CONFIGS[1:4], ids=[c[0] for c in CONFIGS[1:4]])
def test_openvino_layer_matches_runtime(config):
    """``openvino.layer("DeformablePSROIPooling", ...)`` from IR attribute strings, with and
    without its optional offsets."""
    attrs = config[6]
    x, rois, offsets = random_case(config, 0)
    ir = {k: repr(v) for k, v in runtime_attrs(attrs, offsets.shape[2]).items()}
    ir["mode"] = "bilinear_deformable"
    layer = jaxpool.openvino.layer("DeformablePSROIPooling", ir)
    assert layer.function == "deformable_psroi_pool"
    check(layer(x, rois, offsets), runtime(x, rois, offsets, **attrs))
    without = jaxpool.openvino.layer("DeformablePSROIPooling", {**ir, "part_size": "1"})
    check(without(x, rois), runtime(x, rois, **attrs))


def test_derivatives(x64):
    """Float64 features, rows off half-integers and offsets of two classes small enough to keep
    most samples on the map.  The op is linear in ``x``: the reference applied to ``v`` is
    ``J v``, the gradient (``vjp``) is its adjoint, and ``jvp`` is ``J v``.  In the offsets and
    the box corners together, forward and reverse derivatives against central differences;
    those in the corners, which are rounded to pixels, are 0."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 9, 11))
    low = rng.uniform(-2, 14, (6, 2))
    corners = np.concatenate([low, low + rng.uniform(1, 12, (6, 2))], 1)
    corners = np.floor(corners) + rng.uniform(0.1, 0.4, corners.shape)
    rois = np.concatenate([rng.integers(0, 2, (6, 1)), corners], 1)
    offsets = rng.uniform(-0.3, 0.3, (6, 4, 3, 3))
    attrs = dict(output_dim=4, group_size=2, spatial_scale=0.5, spatial_bins=(1, 2), trans_std=0.5)

    def f(a):
        return jaxpool.deformable_psroi_pool(a, rois, offsets, **attrs)

    v = rng.standard_normal(x.shape)
    jv = reference.deformable_psroi_pool(v, rois, offsets, **attrs)
    w = rng.standard_normal(jv.shape)
    y, f_vjp = jax.vjp(f, jnp.asarray(x))
    want = reference.deformable_psroi_pool(x, rois, offsets, **attrs)
    np.testing.assert_allclose(y, want, atol=1e-12)
    (jtw,) = f_vjp(jnp.asarray(w))
    np.testing.assert_allclose(np.vdot(jv, w), np.vdot(v, np.asarray(jtw)), rtol=1e-10)
    np.testing.assert_allclose(jax.jvp(f, (jnp.asarray(x),), (jnp.asarray(v),))[1], jv, atol=1e-12)

    split = offsets.size

    def g(p):
        o = p[:split].reshape(offsets.shape)
        r = jnp.concatenate([rois[:, :1], p[split:].reshape(-1, 4)], 1)
        return jaxpool.deformable_psroi_pool(x, r, o, **attrs)

    p = jnp.concatenate([jnp.asarray(offsets).ravel(), jnp.asarray(rois[:, 1:]).ravel()])
    cases.check_box_derivatives(g, p, rng)
    (grad,) = jax.vjp(g, p)[1](jnp.ones(want.shape))
    assert np.any(np.asarray(grad[:split])) and not np.any(np.asarray(grad[split:]))
