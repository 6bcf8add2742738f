"""An Equinox digit classifier built on jaxpool's Equinox layers.

    python examples/eqx_classifier.py

The scikit-learn 8x8 digits, enlarged to 12x12, go through a convolution, a jaxpool max pool
with ``rounding_type="ceil"`` (which Equinox's own pools call ``use_ceil``), a second
convolution and an adaptive max-pooling head (PyTorch's bins, which Equinox's own adaptive
pools do not use) before a linear classifier.  Equinox layers take one unbatched example
``(C, H, W)``; the batch is a ``jax.vmap``.
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits

from jaxpool.nn import eqx as peqx


class Classifier(eqx.Module):
    conv1: eqx.nn.Conv2d
    pool: peqx.MaxPool
    conv2: eqx.nn.Conv2d
    head: peqx.AdaptiveMaxPool
    linear: eqx.nn.Linear

    def __init__(self, key: jax.Array, width: int = 16):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(1, width, 3, padding=1, key=k1)
        self.pool = peqx.MaxPool(2, num_spatial_dims=2, rounding_type="ceil")
        self.conv2 = eqx.nn.Conv2d(width, 2 * width, 3, padding=1, key=k2)
        self.head = peqx.AdaptiveMaxPool(3, num_spatial_dims=2)
        self.linear = eqx.nn.Linear(9 * 2 * width, 10, key=k3)

    def __call__(self, x: jax.Array) -> jax.Array:  # x: (1, H, W)
        x = self.pool(jax.nn.relu(self.conv1(x)))
        x = self.head(jax.nn.relu(self.conv2(x)))
        return self.linear(x.reshape(-1))


def loss_fn(model: Classifier, x: jax.Array, labels: jax.Array) -> jax.Array:
    logits = jax.vmap(model)(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def main(
    epochs: int = 4, size: int = 12, batch_size: int = 64, learning_rate: float = 1e-2,
    seed: int = 0,
) -> dict:  # fmt: skip
    """Trains the classifier; returns the mean loss per epoch and the test accuracy."""
    digits = load_digits()
    images = jnp.asarray((digits.images / 16.0).astype(np.float32))
    images = jax.image.resize(images, (images.shape[0], size, size), "linear")[:, None]
    labels = jnp.asarray(digits.target.astype(np.int32))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    n_test = len(labels) // 5
    test, train = order[:n_test], order[n_test:]

    model = Classifier(jax.random.key(seed))
    optimizer = optax.adam(learning_rate)
    state = optimizer.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, state, x, y):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state, loss

    losses = []
    for epoch in range(epochs):
        start = time.perf_counter()
        perm = rng.permutation(train)
        epoch_losses = []
        for b in range(len(perm) // batch_size):
            batch = perm[b * batch_size : (b + 1) * batch_size]
            model, state, loss = step(model, state, images[batch], labels[batch])
            epoch_losses.append(float(loss))
        losses.append(float(np.mean(epoch_losses)))
        print(
            f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f} "
            f"({time.perf_counter() - start:.1f} s)"
        )
    predict = eqx.filter_jit(lambda m, x: jnp.argmax(jax.vmap(m)(x), axis=-1))
    accuracy = float(jnp.mean(predict(model, images[test]) == labels[test]))
    print(f"test accuracy: {accuracy:.3f}")
    return {"losses": losses, "test_accuracy": accuracy}


if __name__ == "__main__":
    with jax.numpy_dtype_promotion("standard"):
        main()
