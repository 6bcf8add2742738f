"""Whole models built from jaxpool's layers, exported with ``jaxpool.onnx.export`` and run in
ONNX Runtime and in OpenVINO (its ONNX frontend), which must give the model's outputs.

The models are small and randomly initialised.  OpenVINO computes in float32
(``INFERENCE_PRECISION_HINT``): a CPU with bfloat16 would otherwise compute in bfloat16.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import openvino as ov
import pytest
from flax import nnx

pytest.importorskip("jax2onnx")

import onnxruntime as ort  # noqa: E402

import jaxpool  # noqa: E402
import jaxpool.nn.eqx as peqx  # noqa: E402
import jaxpool.onnx  # noqa: E402
from jaxpool import nn as pnn  # noqa: E402

ort.set_default_logger_severity(3)

pytestmark = [
    # Whole models through two runtimes.
    pytest.mark.whole_program,
    # jax2onnx's plugin of nnx.Linear reads the parameters through `.value`.
    pytest.mark.filterwarnings("ignore:'.value' access is now deprecated:DeprecationWarning"),
    # The layers (and jax2onnx's versions of them) add their biases across ranks.
    pytest.mark.usefixtures("rank_promotion"),
]

RTOL = 1e-5  # float32: relative to the largest output


@pytest.fixture
def rank_promotion():
    with jax.numpy_rank_promotion("allow"):
        yield


def run_onnx_runtime(path, args):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, (np.asarray(a) for a in args))))


def run_openvino(path, args):
    model = ov.convert_model(str(path))
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled([np.asarray(a) for a in args])
    return [results[output] for output in compiled.outputs]


def assert_close(got, want, what):
    """Indices equal, values to ``RTOL``."""
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape, (what, g.shape, w.shape)
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            scale = float(np.max(np.abs(w)))
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def deploy(fn, args, path, runtimes=(run_onnx_runtime, run_openvino)):
    """Exports ``fn`` to ``path`` and checks each runtime's outputs against ``fn``'s; returns
    the model's node types."""
    want = [np.asarray(w) for w in jax.tree.leaves(fn(*args))]
    model = jaxpool.onnx.export(fn, *args, path=path)
    for run in runtimes:
        assert_close(run(path, args), want, run.__name__)
    return [node.op_type for node in model.graph.node]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class NNXClassifier(nnx.Module):
    """Channels-last; the unpooling puts the pooled maxima back in place (an encoder-decoder
    step) before the second convolution."""

    def __init__(self, rngs: nnx.Rngs, *, combine: str = "sum", width: int = 4):
        self.conv1 = nnx.Conv(1, width, (3, 3), rngs=rngs)
        self.pool = pnn.MaxPool(2, return_indices=True, axis=0)
        self.unpool = pnn.MaxUnpool(axis=0, combine=combine)
        self.conv2 = nnx.Conv(width, 2 * width, (3, 3), rngs=rngs)
        self.head = pnn.AdaptiveAvgPool(3)
        self.linear = nnx.Linear(9 * 2 * width, 10, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.conv1(x))
        y, indices = self.pool(h)
        h = self.unpool(y, indices, h.shape)
        h = self.head(nnx.relu(self.conv2(h)))
        return self.linear(h.reshape(h.shape[0], -1))


class EqxClassifier(eqx.Module):
    """Channels-first and unbatched, as Equinox's layers are: mapped over the batch with
    ``jax.vmap``."""

    conv1: eqx.nn.Conv2d
    pool: peqx.MaxPool
    unpool: peqx.MaxUnpool
    conv2: eqx.nn.Conv2d
    head: peqx.AdaptiveAvgPool
    linear: eqx.nn.Linear

    def __init__(self, key, width: int = 4):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(1, width, 3, padding=1, key=k1)
        self.pool = peqx.MaxPool(2, num_spatial_dims=2, return_indices=True)
        self.unpool = peqx.MaxUnpool(num_spatial_dims=2)
        self.conv2 = eqx.nn.Conv2d(width, 2 * width, 3, key=k2)
        self.head = peqx.AdaptiveAvgPool((2, 3), num_spatial_dims=2)
        self.linear = eqx.nn.Linear(6 * 2 * width, 10, key=k3)

    def __call__(self, x):
        h = jax.nn.relu(self.conv1(x))
        y, indices = self.pool(h)
        h = self.unpool(y, indices, h.shape)
        h = self.head(jax.nn.relu(self.conv2(h)))
        return self.linear(h.reshape(-1))


class RoiHead(nnx.Module):
    """Boxes (image pixels, the feature map at half resolution) pooled to 3x3 bins, then
    classified."""

    def __init__(self, rngs: nnx.Rngs, channels: int = 4):
        self.linear = nnx.Linear(3 * 3 * channels, 5, rngs=rngs)

    def __call__(self, features, boxes, batch_indices):
        options = dict(sampling_ratio=2, aligned_mode="half_pixel_for_nn", data_format="NXC")
        pooled = jaxpool.roi_align(features, boxes, batch_indices, 3, spatial_scale=0.5, **options)
        return self.linear(pooled.reshape(pooled.shape[0], -1))


BOXES = np.array(
    [[1.2, 0.7, 12.1, 10.3], [0.0, 0.0, 16.0, 14.0], [3.4, 2.2, 6.1, 13.9]], np.float32
)
BATCH_INDICES = np.array([0, 1, 1], np.int32)


# combine="max" exports as MaxUnpool (ONNX Runtime runs it; OpenVINO's ONNX frontend may not
# convert it, which is OpenVINO's to change); combine="sum" (the layers' default, the same values
# where no position is named twice, as with these non-overlapping windows) as ScatterElements.
@pytest.mark.parametrize("combine, unpool", [("sum", "ScatterElements"), ("max", "MaxUnpool")])
def test_nnx_classifier(tmp_path, combine, unpool):
    model = NNXClassifier(nnx.Rngs(0), combine=combine)
    runtimes = (run_onnx_runtime, run_openvino) if combine == "sum" else (run_onnx_runtime,)
    types = deploy(model, [_x((2, 11, 13, 1))], tmp_path / "nnx.onnx", runtimes)
    assert {"MaxPool", unpool, "Gemm"} <= set(types)


def test_eqx_classifier(tmp_path):
    model = EqxClassifier(jax.random.key(0))
    types = deploy(jax.vmap(model), [_x((2, 1, 10, 12))], tmp_path / "eqx.onnx")
    # The mapped batch is pooled as the nodes' batch axis: one node per layer.
    assert types.count("MaxPool") == 1 and types.count("AveragePool") == 1


def test_roi_head(tmp_path):
    args = [_x((2, 8, 9, 4), seed=1), BOXES, BATCH_INDICES]
    types = deploy(RoiHead(nnx.Rngs(0)), args, tmp_path / "roi.onnx")
    assert types.count("RoiAlign") == 1


def test_vmapped_ops_export(tmp_path):
    """Under ``jax.vmap`` the window ops and unpooling pool the mapped axis as part of their
    batch axis (one node for the batch), whatever axis is mapped, with flat indices that stay
    the example's; the ROI ops, whose boxes index their own example's batch, are exported
    once per example."""

    def per_example(x):
        y, indices = jaxpool.max_pool(x, 2, return_indices=True, axis=0)
        restored = jaxpool.max_unpool(y, indices, x.shape, axis=0, combine="max")
        pooled = jaxpool.roi_align(x, BOXES, BATCH_INDICES, 2, spatial_scale=0.5)
        spatial, positions = jaxpool.adaptive_max_pool(x, (3, 4), return_indices=True)
        summed = jaxpool.max_unpool(spatial, positions, x.shape, axis=2)
        return indices, positions, restored, pooled, summed, jaxpool.avg_pool(x, 3, 2, 1, 1)

    fn = jax.vmap(per_example, in_axes=1, out_axes=(0, 0, 0, 1, 0, 0))
    types = deploy(fn, [_x((2, 3, 4, 8, 9))], tmp_path / "mapped.onnx", (run_onnx_runtime,))
    assert types.count("MaxPool") == types.count("MaxUnpool") == 1
    assert types.count("AveragePool") == types.count("ScatterElements") == 1
    assert types.count("RoiAlign") == 3
