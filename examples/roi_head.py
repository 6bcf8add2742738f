"""An ROI head trained on a small synthetic detection task, with ``jaxpool.roi_align``.

    python examples/roi_head.py [--steps 300] [--seed 0]

Each 32 x 32 image holds three squares, each of one of three classes (a class is a colour).
Proposals are the true boxes, jittered, plus random background boxes.  A tiny backbone (two
3 x 3 convolutions, channels-last) makes features; ``jaxpool.roi_align`` pools each proposal to
4 x 4 (``aligned_mode="half_pixel_for_nn"``, torchvision's ``aligned=True``); an MLP classifies
it (three classes and background) and regresses the offsets from the proposal to its true box.
The gradient flows through the ROI pooling into the backbone.  Prints the losses, the
classification accuracy and the mean IoU of the refined boxes on held-out images.
"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxpool

SIZE = 32
CLASSES = 3
COLOURS = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0]], np.float32)
OBJECTS = 3
BACKGROUND = 3  # proposals per image that cover no object
POOLED = 4


def make_batch(rng: np.random.Generator, images: int):
    """Images ``[B, H, W, 3]``, proposals ``[B * P, 4]``, their batch indices, labels and
    true boxes (``CLASSES`` marks a background proposal)."""
    x = rng.normal(0.0, 0.05, (images, SIZE, SIZE, 3)).astype(np.float32)
    proposals, batch, labels, targets = [], [], [], []
    for b in range(images):
        for _ in range(OBJECTS):
            size = rng.integers(6, 13)
            x1, y1 = rng.integers(0, SIZE - size, 2)
            label = int(rng.integers(0, CLASSES))
            x[b, y1 : y1 + size, x1 : x1 + size] += COLOURS[label]
            box = np.array([x1, y1, x1 + size, y1 + size], np.float32)
            jitter = rng.normal(0.0, 0.12 * size, 4).astype(np.float32)
            proposals.append(box + jitter)
            batch.append(b)
            labels.append(label)
            targets.append(box)
        for _ in range(BACKGROUND):
            # Small boxes in the corners rarely overlap an object much; good enough here.
            corner = rng.uniform(0, SIZE - 5, 2)
            proposals.append(np.r_[corner, corner + 4].astype(np.float32))
            batch.append(b)
            labels.append(CLASSES)
            targets.append(proposals[-1])
    return (
        jnp.asarray(x),
        jnp.asarray(np.stack(proposals)),
        jnp.asarray(np.array(batch, np.int32)),
        jnp.asarray(np.array(labels, np.int32)),
        jnp.asarray(np.stack(targets)),
    )


def init(key: jax.Array) -> dict:
    keys = jax.random.split(key, 5)

    def dense(k, shape):
        return jax.random.normal(k, shape) * np.sqrt(2.0 / np.prod(shape[:-1]))

    return {
        "conv1": dense(keys[0], (3, 3, 3, 16)),
        "conv2": dense(keys[1], (3, 3, 16, 16)),
        "fc": dense(keys[2], (POOLED * POOLED * 16, 64)),
        "cls": dense(keys[3], (64, CLASSES + 1)),
        "reg": dense(keys[4], (64, 4)) * 0.1,
    }


def forward(params: dict, x: jax.Array, proposals: jax.Array, batch: jax.Array):
    """Class logits and box offsets (in units of the proposal's size) of each proposal."""
    conv = functools.partial(
        jax.lax.conv_general_dilated,
        window_strides=(1, 1),
        padding="SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    features = jax.nn.relu(conv(x, params["conv1"]))
    features = jax.nn.relu(conv(features, params["conv2"]))
    pooled = jaxpool.roi_align(
        features,
        proposals,
        batch,
        POOLED,
        sampling_ratio=2,
        aligned_mode="half_pixel_for_nn",
        data_format="NXC",
    )  # [R, 4, 4, 16]
    hidden = jax.nn.relu(pooled.reshape(pooled.shape[0], -1) @ params["fc"])
    return hidden @ params["cls"], hidden @ params["reg"]


def box_size(boxes: jax.Array) -> jax.Array:
    return jnp.maximum(boxes[:, 2:] - boxes[:, :2], 1.0)


def refine(proposals: jax.Array, offsets: jax.Array) -> jax.Array:
    """Each corner moved by its offset times the proposal's size."""
    return proposals + offsets * jnp.tile(box_size(proposals), 2)


def loss_fn(params, x, proposals, batch, labels, targets):
    logits, offsets = forward(params, x, proposals, batch)
    classification = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    foreground = (labels < CLASSES).astype(jnp.float32)
    wanted = (targets - proposals) / jnp.tile(box_size(proposals), 2)
    regression = (optax.huber_loss(offsets, wanted).sum(-1) * foreground).sum()
    return classification + regression / foreground.sum(), (classification, regression)


def iou(a: jax.Array, b: jax.Array) -> jax.Array:
    low, high = jnp.maximum(a[:, :2], b[:, :2]), jnp.minimum(a[:, 2:], b[:, 2:])
    inter = jnp.prod(jnp.clip(high - low, 0), -1)
    area = jnp.prod(a[:, 2:] - a[:, :2], -1) + jnp.prod(b[:, 2:] - b[:, :2], -1)
    return inter / (area - inter)


def main(steps: int = 300, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    params = init(jax.random.key(seed))
    optimizer = optax.adam(3e-3)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state, *data):
        (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, *data)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(params, updates), state, loss, parts

    loss = jnp.inf
    for i in range(steps):
        params, state, loss, (cls_loss, reg_loss) = step(params, state, *make_batch(rng, 8))
        if verbose and (i % 100 == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {float(loss):.3f}  (classes {float(cls_loss):.3f})")

    x, proposals, batch, labels, targets = make_batch(np.random.default_rng(seed + 1), 32)
    logits, offsets = jax.jit(forward)(params, x, proposals, batch)
    accuracy = float((logits.argmax(-1) == labels).mean())
    foreground = labels < CLASSES
    before = float(iou(proposals, targets)[foreground].mean())
    after = float(iou(refine(proposals, offsets), targets)[foreground].mean())
    if verbose:
        print(
            f"held-out accuracy {accuracy:.3f}; mean IoU of the object proposals "
            f"{before:.3f} -> {after:.3f} after refinement"
        )
    return {"loss": float(loss), "accuracy": accuracy, "iou_before": before, "iou_after": after}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.steps, args.seed)
