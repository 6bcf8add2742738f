"""An ROI head trained on a small synthetic detection task, with ``jaxpool.roi_align``.

    python examples/roi_head.py [--steps 300] [--seed 0]

Each 32 x 32 image holds three squares, each of one of three classes (a class is a colour).
Proposals are the true boxes, jittered, plus random background boxes.  A tiny backbone (two
3 x 3 convolutions, channels-last) makes features; ``jaxpool.roi_align`` pools each proposal to
4 x 4 (``aligned_mode="half_pixel_for_nn"``, torchvision's ``aligned=True``); an MLP classifies
it (three classes and background) and regresses the offsets from the proposal to its true box.
The gradient flows through the ROI pooling into the backbone.  Prints the losses, the
classification accuracy and the mean IoU of the refined boxes on held-out images.

``examples/fpn_head.py`` puts the same head on a two-level feature pyramid; it imports the
task, the head and the training loop from here.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence

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
HIDDEN = 64
# Offsets are regressed in tenths of the proposal's size (Faster R-CNN's box coder weights
# 10, 10): the corrections are about a tenth of a box, and the Huber loss of such small
# targets would hardly pull against the classification loss.
OFFSET_UNIT = 0.1


def make_batch(
    rng: np.random.Generator,
    images: int,
    *,
    size: int = SIZE,
    sides: Sequence[tuple[int, int]] = ((6, 13),),
    background_sides: Sequence[tuple[int, int]] = ((4, 5),),
):
    """Images ``[B, size, size, 3]``, proposals ``[B * P, 4]``, their batch indices, labels
    and true boxes (``CLASSES`` marks a background proposal).

    Each object's side is drawn from ``[low, high)`` of one of ``sides`` (chosen at random),
    each background box's from one of ``background_sides``.
    """
    x = rng.normal(0.0, 0.05, (images, size, size, 3)).astype(np.float32)
    proposals, batch, labels, targets = [], [], [], []
    for b in range(images):
        covered = np.zeros((size, size), bool)
        for _ in range(OBJECTS):
            side = rng.integers(*sides[rng.integers(len(sides))])
            x1, y1 = rng.integers(0, size - side, 2)
            label = int(rng.integers(0, CLASSES))
            x[b, y1 : y1 + side, x1 : x1 + side] += COLOURS[label]
            covered[y1 : y1 + side, x1 : x1 + side] = True
            box = np.array([x1, y1, x1 + side, y1 + side], np.float32)
            jitter = rng.normal(0.0, 0.12 * side, 4).astype(np.float32)
            proposals.append(box + jitter)
            batch.append(b)
            labels.append(label)
            targets.append(box)
        for _ in range(BACKGROUND):
            box = background_box(rng, covered, background_sides)
            proposals.append(box)
            batch.append(b)
            labels.append(CLASSES)
            targets.append(box)
    return (
        jnp.asarray(x),
        jnp.asarray(np.stack(proposals)),
        jnp.asarray(np.array(batch, np.int32)),
        jnp.asarray(np.array(labels, np.int32)),
        jnp.asarray(np.stack(targets)),
    )


def background_box(
    rng: np.random.Generator, covered: np.ndarray, sides: Sequence[tuple[int, int]]
) -> np.ndarray:
    """A square of a side drawn from one of ``sides``, placed mostly off the objects
    (``covered`` marks their pixels): the first of a few random places with at most a tenth
    of it on an object, else the least covered place."""
    size = covered.shape[0]
    side = int(rng.integers(*sides[rng.integers(len(sides))]))
    best, least = None, np.inf
    for _ in range(20):
        corner = rng.uniform(0, size - side, 2)
        x1, y1 = np.round(corner).astype(int)
        on_objects = covered[y1 : y1 + side, x1 : x1 + side].mean()
        if on_objects < least:
            best, least = np.r_[corner, corner + side].astype(np.float32), on_objects
        if on_objects <= 0.1:
            break
    return best


def dense(rng: np.random.Generator, shape: tuple[int, ...], gain: float = 1.0) -> jax.Array:
    """He-initialised weights; the fan-in is every axis but the last."""
    scale = gain * np.sqrt(2.0 / np.prod(shape[:-1]))
    return jnp.asarray(rng.normal(0.0, scale, shape), jnp.float32)


def init_head(rng: np.random.Generator, inputs: int) -> dict:
    """The MLP of the head: a hidden layer, then class logits and box offsets."""
    return {
        "fc": dense(rng, (inputs, HIDDEN)),
        "cls": dense(rng, (HIDDEN, CLASSES + 1)),
        "reg": dense(rng, (HIDDEN, 4), gain=0.1),
    }


def init(rng: np.random.Generator) -> dict:
    return {
        "conv1": dense(rng, (3, 3, 3, 16)),
        "conv2": dense(rng, (3, 3, 16, 16)),
        **init_head(rng, POOLED * POOLED * 16),
    }


def conv(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """A "same" convolution of channels-last images with an ``HWIO`` kernel."""
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def head(params: dict, pooled: jax.Array):
    """Class logits and box offsets (in ``OFFSET_UNIT`` of the proposal's size) of pooled
    regions."""
    hidden = jax.nn.relu(pooled.reshape(pooled.shape[0], -1) @ params["fc"])
    return hidden @ params["cls"], hidden @ params["reg"]


def forward(params: dict, x: jax.Array, proposals: jax.Array, batch: jax.Array):
    """Class logits and box offsets of each proposal."""
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
    return head(params, pooled)


def box_size(boxes: jax.Array) -> jax.Array:
    return jnp.maximum(boxes[:, 2:] - boxes[:, :2], 1.0)


def refine(proposals: jax.Array, offsets: jax.Array) -> jax.Array:
    """Each corner moved by its offset, in ``OFFSET_UNIT`` of the proposal's size."""
    return proposals + offsets * OFFSET_UNIT * jnp.tile(box_size(proposals), 2)


def loss_fn(params, x, proposals, batch, labels, targets, *, forward=forward):
    """Cross-entropy over the classes, plus the Huber loss of the offsets of the objects."""
    logits, offsets = forward(params, x, proposals, batch)
    classification = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    foreground = (labels < CLASSES).astype(jnp.float32)
    wanted = (targets - proposals) / (OFFSET_UNIT * jnp.tile(box_size(proposals), 2))
    regression = (optax.huber_loss(offsets, wanted).sum(-1) * foreground).sum()
    return classification + regression / foreground.sum(), (classification, regression)


def iou(a: jax.Array, b: jax.Array) -> jax.Array:
    low, high = jnp.maximum(a[:, :2], b[:, :2]), jnp.minimum(a[:, 2:], b[:, 2:])
    inter = jnp.prod(jnp.clip(high - low, 0), -1)
    area = jnp.prod(a[:, 2:] - a[:, :2], -1) + jnp.prod(b[:, 2:] - b[:, :2], -1)
    return inter / (area - inter)


def train(
    params: dict,
    batches: Callable[[], tuple],
    steps: int,
    *,
    forward: Callable = forward,
    verbose: bool = True,
):
    """Adam on ``loss_fn`` with this ``forward``, one batch from ``batches()`` per step;
    returns the parameters and the last loss."""
    optimizer = optax.adam(3e-3)
    state = optimizer.init(params)
    loss_of = functools.partial(loss_fn, forward=forward)

    @jax.jit
    def step(params, state, *data):
        (loss, parts), grads = jax.value_and_grad(loss_of, has_aux=True)(params, *data)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(params, updates), state, loss, parts

    loss = jnp.inf
    for i in range(steps):
        params, state, loss, (cls_loss, reg_loss) = step(params, state, *batches())
        if verbose and (i % 100 == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {float(loss):.3f}  (classes {float(cls_loss):.3f})")
    return params, float(loss)


def evaluate(params: dict, data: tuple, *, forward: Callable = forward) -> dict:
    """Per proposal: whether its class is right, and the IoU of the object proposals with
    their true boxes before and after refinement (NaN for background proposals)."""

    @jax.jit
    def scores(params, x, proposals, batch, labels, targets):
        logits, offsets = forward(params, x, proposals, batch)
        foreground = labels < CLASSES
        return {
            "correct": logits.argmax(-1) == labels,
            "before": jnp.where(foreground, iou(proposals, targets), jnp.nan),
            "after": jnp.where(foreground, iou(refine(proposals, offsets), targets), jnp.nan),
        }

    return jax.tree.map(np.asarray, scores(params, *data))


def main(steps: int = 300, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    params, loss = train(init(rng), lambda: make_batch(rng, 8), steps, verbose=verbose)
    result = evaluate(params, make_batch(np.random.default_rng(seed + 1), 32))
    accuracy = float(result["correct"].mean())
    before, after = float(np.nanmean(result["before"])), float(np.nanmean(result["after"]))
    if verbose:
        print(
            f"held-out accuracy {accuracy:.3f}; mean IoU of the object proposals "
            f"{before:.3f} -> {after:.3f} after refinement"
        )
    return {"loss": loss, "accuracy": accuracy, "iou_before": before, "iou_after": after}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.steps, args.seed)
