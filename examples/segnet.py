"""A SegNet-style encoder-decoder: max pooling remembers where the maxima were, unpooling puts
the decoder's features back exactly there.

    python examples/segnet.py

The task is synthetic: noisy images holding a bright square and a dim disk; every pixel is
labelled background, square or disk.  The encoder pools with ``return_indices=True`` and the
decoder calls ``max_unpool`` with those indices (``axis=2``: positions within each feature
map, PyTorch's convention), so object boundaries survive the down- and up-sampling.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpool import nn as pnn


def make_data(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images ``[n, size, size, 1]`` and their labels ``[n, size, size]`` (0, 1, 2)."""
    rng = np.random.default_rng(seed)
    r, c = np.mgrid[0:size, 0:size]
    images = 0.2 * rng.standard_normal((n, size, size)).astype(np.float32)
    labels = np.zeros((n, size, size), np.int32)
    for k in range(n):
        s = rng.integers(size // 4, size // 2)
        top, left = rng.integers(0, size - s, 2)
        labels[k, top : top + s, left : left + s] = 1
        radius = rng.integers(size // 6, size // 4)
        cy, cx = rng.integers(radius, size - radius, 2)
        labels[k][(r - cy) ** 2 + (c - cx) ** 2 <= radius**2] = 2
    images += np.where(labels == 1, 1.0, np.where(labels == 2, 0.5, 0.0)).astype(np.float32)
    return images[..., None], labels


class SegNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, width: int = 8, classes: int = 3):
        self.enc1 = nnx.Conv(1, width, (3, 3), rngs=rngs)
        self.enc2 = nnx.Conv(width, 2 * width, (3, 3), rngs=rngs)
        self.pool = pnn.MaxPool(2, return_indices=True, axis=2, index_element_type="i32")
        self.unpool = pnn.MaxUnpool(axis=2)
        self.dec2 = nnx.Conv(2 * width, width, (3, 3), rngs=rngs)
        self.dec1 = nnx.Conv(width, classes, (3, 3), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        h1 = nnx.relu(self.enc1(x))
        p1, i1 = self.pool(h1)
        h2 = nnx.relu(self.enc2(p1))
        p2, i2 = self.pool(h2)
        u2 = self.unpool(p2, i2, h2.shape)  # back to the positions of the maxima
        d2 = nnx.relu(self.dec2(u2))
        u1 = self.unpool(d2, i1, h1.shape)
        return self.dec1(u1)


@nnx.jit
def train_step(model, optimizer, x, labels):
    def loss_fn(model):
        logits = model(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def pixel_accuracy(model, x, labels):
    return jnp.mean(jnp.argmax(model(x), axis=-1) == labels)


def main(
    epochs: int = 6,
    size: int = 24,
    n_train: int = 256,
    batch_size: int = 32,
    learning_rate: float = 1e-2,
    seed: int = 0,
) -> dict:
    """Trains the SegNet; returns the loss per epoch and the test pixel accuracy."""
    x, y = make_data(n_train, size, seed)
    x_test, y_test = make_data(64, size, seed + 1)
    model = nnx.jit(lambda: SegNet(nnx.Rngs(seed)))()
    optimizer = nnx.Optimizer(model, optax.adam(learning_rate), wrt=nnx.Param)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(epochs):
        start = time.perf_counter()
        perm = rng.permutation(n_train)
        batch_losses = [
            float(
                train_step(
                    model, optimizer, x[perm[b : b + batch_size]], y[perm[b : b + batch_size]]
                )
            )
            for b in range(0, n_train - batch_size + 1, batch_size)
        ]
        losses.append(float(np.mean(batch_losses)))
        print(
            f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f} "
            f"({time.perf_counter() - start:.1f} s)"
        )
    accuracy = float(pixel_accuracy(model, x_test, y_test))
    background = float(np.mean(y_test == 0))
    print(f"test pixel accuracy {accuracy:.3f} (all-background guess: {background:.3f})")
    return {"losses": losses, "pixel_accuracy": accuracy, "background_fraction": background}


if __name__ == "__main__":
    main()
