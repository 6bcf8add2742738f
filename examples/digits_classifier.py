"""A Flax NNX digit classifier that takes images of any size, thanks to adaptive pooling.

    python examples/digits_classifier.py

The 8x8 scikit-learn digits are enlarged to several sizes (8, 12 and 16 pixels by default).
One network sees all of them: its convolutions and max pooling work at any size, and an
adaptive max-pooling head turns every feature map into the same 3x3 grid before the classifier.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from sklearn.datasets import load_digits

from jaxpool import nn as pnn


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of ``[N, 8, 8]`` images to ``[N, size, size, 1]`` (channels-last)."""
    out = jax.image.resize(jnp.asarray(images), (images.shape[0], size, size), "linear")
    return np.asarray(out)[..., None]


class Classifier(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, width: int = 16):
        self.conv1 = nnx.Conv(1, width, (3, 3), rngs=rngs)
        self.pool = pnn.MaxPool(2, auto_pad="same_upper")  # ceil(size / 2): any size works
        self.conv2 = nnx.Conv(width, 2 * width, (3, 3), rngs=rngs)
        self.head = pnn.AdaptiveMaxPool(3)  # every size ends as a 3x3 grid
        self.linear = nnx.Linear(9 * 2 * width, 10, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.pool(nnx.relu(self.conv1(x)))
        x = self.head(nnx.relu(self.conv2(x)))
        return self.linear(x.reshape(x.shape[0], -1))


@nnx.jit
def train_step(model, optimizer, x, labels):
    def loss_fn(model):
        logits = model(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def predict(model, x):
    return jnp.argmax(model(x), axis=-1)


def main(
    epochs: int = 4,
    sizes: tuple[int, ...] = (8, 12, 16),
    batch_size: int = 64,
    learning_rate: float = 1e-2,
    seed: int = 0,
) -> dict:
    """Trains on every size in turn; returns the losses and the test accuracy per size."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    n_test = len(labels) // 5
    test, train = order[:n_test], order[n_test:]
    data = {size: resize(images, size) for size in sizes}

    model = nnx.jit(lambda: Classifier(nnx.Rngs(seed)))()
    optimizer = nnx.Optimizer(model, optax.adam(learning_rate), wrt=nnx.Param)
    losses = []
    for epoch in range(epochs):
        start = time.perf_counter()
        perm = rng.permutation(train)
        epoch_losses = []
        for b in range(len(perm) // batch_size):
            batch = perm[b * batch_size : (b + 1) * batch_size]
            size = sizes[b % len(sizes)]  # each batch has one size; sizes alternate
            epoch_losses.append(
                float(train_step(model, optimizer, data[size][batch], labels[batch]))
            )
        losses.append(float(np.mean(epoch_losses)))
        print(
            f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f} "
            f"({time.perf_counter() - start:.1f} s)"
        )

    accuracy = {
        size: float(np.mean(np.asarray(predict(model, data[size][test])) == labels[test]))
        for size in sizes
    }
    for size, acc in accuracy.items():
        print(f"test accuracy at {size}x{size}: {acc:.3f}")
    mean = float(np.mean(list(accuracy.values())))
    print(f"test accuracy over all sizes: {mean:.3f} ({n_test} test digits per size)")
    return {"losses": losses, "accuracy": accuracy, "test_accuracy": mean}


if __name__ == "__main__":
    main()
