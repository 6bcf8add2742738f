"""Train a Flax NNX digit classifier, export it to ONNX and run it in ONNX Runtime and OpenVINO.

    python examples/export_onnx.py [--epochs 4] [--out-dir DIR]

The scikit-learn 8x8 digits, enlarged to 16x16, go through a convolution, a jaxpool max pool
that keeps its argmax indices, an unpooling that puts the maxima back in place (a decoder
step), a second convolution and an adaptive average-pooling head before a linear classifier.
After training, ``jaxpool.onnx.export`` writes the whole model as ``digits.onnx`` (into
``--out-dir``, or a temporary directory that is removed afterwards): the pools become ONNX's
``MaxPool`` (with ``Indices``) and ``AveragePool``, the unpooling a ``ScatterElements``.  ONNX
Runtime and OpenVINO (which reads the ONNX file itself) then classify the test digits, and
the script prints the largest difference of each to JAX's logits.  Needs the ``export`` extra
(jax2onnx), onnxruntime and openvino.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import openvino as ov
import optax
from flax import nnx
from sklearn.datasets import load_digits

import jaxpool.onnx
from jaxpool import nn as pnn

SIZE = 16


class Classifier(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, width: int = 8):
        self.conv1 = nnx.Conv(1, width, (3, 3), rngs=rngs)
        self.pool = pnn.MaxPool(2, return_indices=True, axis=2)  # indices within each plane
        self.unpool = pnn.MaxUnpool(axis=2)
        self.conv2 = nnx.Conv(width, 2 * width, (3, 3), strides=2, rngs=rngs)
        self.head = pnn.AdaptiveAvgPool(3)
        self.linear = nnx.Linear(9 * 2 * width, 10, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:  # x: [N, H, W, 1]
        h = nnx.relu(self.conv1(x))
        y, indices = self.pool(h)
        h = self.unpool(y, indices, h.shape)  # the maxima in place, zeros elsewhere
        h = self.head(nnx.relu(self.conv2(h)))
        return self.linear(h.reshape(h.shape[0], -1))


@nnx.jit
def train_step(model, optimizer, x, labels):
    def loss_fn(model):
        logits = model(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def largest_difference(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))


def main(
    epochs: int = 4,
    out_dir: str | None = None,
    batch_size: int = 64,
    learning_rate: float = 1e-2,
    seed: int = 0,
) -> dict:
    """Trains, exports and runs the model; returns the test accuracy, the largest difference
    of each runtime's logits to JAX's, and the ONNX file's path."""
    digits = load_digits()
    shape = (len(digits.images), SIZE, SIZE)
    images = jax.image.resize(jnp.asarray(digits.images / 16.0), shape, "linear")
    images = np.asarray(images, np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    n_test = len(labels) // 5
    test, train = order[:n_test], order[n_test:]

    model = nnx.jit(lambda: Classifier(nnx.Rngs(seed)))()  # one program, not one per layer
    optimizer = nnx.Optimizer(model, optax.adam(learning_rate), wrt=nnx.Param)
    for epoch in range(epochs):
        start = time.perf_counter()
        perm = rng.permutation(train)
        losses = [
            float(train_step(model, optimizer, images[batch], labels[batch]))
            for batch in np.array_split(perm, len(perm) // batch_size)
        ]
        print(
            f"epoch {epoch + 1}/{epochs}: loss {np.mean(losses):.4f} "
            f"({time.perf_counter() - start:.1f} s)"
        )

    x = images[test]
    logits = np.asarray(nnx.jit(lambda model, x: model(x))(model, x))
    accuracy = float(np.mean(logits.argmax(-1) == labels[test]))
    print(f"test accuracy in JAX: {accuracy:.3f} ({n_test} digits)")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(out_dir or tmp) / "digits.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx_model = jaxpool.onnx.export(model, x, path=path)
        nodes = sorted({node.op_type for node in onnx_model.graph.node})
        print(f"exported {path}: {', '.join(nodes)}")

        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (by_ort,) = session.run(None, {session.get_inputs()[0].name: x})
        # OpenVINO reads the ONNX file itself (`ov.convert_model(path)` gives the same model,
        # to save as IR).  f32: a CPU with bfloat16 would otherwise compute in bfloat16.
        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        outputs = {"onnxruntime": by_ort, "openvino": compiled(x)[compiled.output(0)]}

    differences = {}
    for runtime, got in outputs.items():
        differences[runtime] = largest_difference(got, logits)
        same = float(np.mean(got.argmax(-1) == logits.argmax(-1)))
        print(
            f"{runtime}: largest |logit difference| to JAX {differences[runtime]:.1e} "
            f"(logits up to {np.max(np.abs(logits)):.1f}); the same class for {same:.1%} "
            "of the digits"
        )
    return {
        "test_accuracy": accuracy,
        "differences": differences,
        "largest_logit": float(np.max(np.abs(logits))),
        "path": str(path),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--out-dir", default=None, help="keep digits.onnx there")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.epochs, args.out_dir, seed=args.seed)
