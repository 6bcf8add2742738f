"""An ROI head on a two-level feature pyramid, with ``jaxpool.multilevel_roi_align``.

    python examples/fpn_head.py [--steps 300] [--seed 0]

The task of ``roi_head.py`` on 64 x 64 images whose squares are small (sides 6 to 12) or
large (20 to 32), with background proposals of the same sizes.  A tiny FPN makes two levels
of 16 channels, channels-last: two 3 x 3 convolutions of stride 2 give C1 (stride 2) and C2
(stride 4); P2 is a 1 x 1 lateral of C2, P1 a lateral of C1 plus P2 upsampled, each smoothed
by a 3 x 3 convolution.  ``jaxpool.multilevel_roi_align`` pools each proposal to 4 x 4 on
the level its size assigns it to (torchvision's rule, as ``MultiScaleRoIAlign`` applies it):
with ``canonical_size=16`` and ``canonical_level=2``, a box of ``sqrt(area)`` 16 pixels or
more goes to P2, a smaller one to P1.  The MLP head of ``roi_head.py`` classifies and refines
the boxes; the gradient flows through the pooling into both levels.  Prints the losses, then
on held-out images how many proposals each level pooled, and the accuracy and mean IoU on
each level and on all.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import roi_head

import jaxpool

SIZE = 64
SIDES = ((6, 13), (20, 33))  # small and large squares, [low, high)
CHANNELS = 16
SPATIAL_SCALES = (1 / 2, 1 / 4)  # P1 and P2, finest first
CANONICAL_SIZE = 16  # a box of sqrt(area) 16 belongs on level 2 (stride 4) ...
CANONICAL_LEVEL = 2  # ... so smaller boxes go to level 1 (stride 2)


def make_batch(rng: np.random.Generator, images: int):
    return roi_head.make_batch(rng, images, size=SIZE, sides=SIDES, background_sides=SIDES)


def init(rng: np.random.Generator) -> dict:
    dense = roi_head.dense
    return {
        "c1": dense(rng, (3, 3, 3, CHANNELS)),
        "c2": dense(rng, (3, 3, CHANNELS, 2 * CHANNELS)),
        "lateral1": dense(rng, (1, 1, CHANNELS, CHANNELS)),
        "lateral2": dense(rng, (1, 1, 2 * CHANNELS, CHANNELS)),
        "smooth1": dense(rng, (3, 3, CHANNELS, CHANNELS)),
        "smooth2": dense(rng, (3, 3, CHANNELS, CHANNELS)),
        **roi_head.init_head(rng, roi_head.POOLED * roi_head.POOLED * CHANNELS),
    }


def pyramid(params: dict, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """P1 ``[B, 32, 32, 16]`` and P2 ``[B, 16, 16, 16]``: the bottom-up path, then the
    top-down path with lateral connections."""
    conv = roi_head.conv
    c1 = jax.nn.relu(conv(x, params["c1"], stride=2))
    c2 = jax.nn.relu(conv(c1, params["c2"], stride=2))
    p2 = conv(c2, params["lateral2"])
    p1 = conv(c1, params["lateral1"]) + jnp.repeat(jnp.repeat(p2, 2, axis=1), 2, axis=2)
    return conv(p1, params["smooth1"]), conv(p2, params["smooth2"])


def forward(params: dict, x: jax.Array, proposals: jax.Array, batch: jax.Array):
    """Class logits and box offsets of each proposal, pooled on its level of the pyramid."""
    pooled = jaxpool.multilevel_roi_align(
        pyramid(params, x),
        proposals,
        batch,
        roi_head.POOLED,
        spatial_scales=SPATIAL_SCALES,
        sampling_ratio=2,
        aligned_mode="half_pixel_for_nn",
        level_rule="torchvision",
        canonical_size=CANONICAL_SIZE,
        canonical_level=CANONICAL_LEVEL,
        data_format="NXC",
    )  # [R, 4, 4, 16]
    return roi_head.head(params, pooled)


def level_of(boxes: jax.Array) -> np.ndarray:
    """The pyramid level (0 for P1, 1 for P2) that torchvision's rule gives each box:
    ``floor(canonical_level + log2(sqrt(area) / canonical_size) + 1e-6)``, clamped to the
    levels there are, counted from the finest."""
    boxes = np.asarray(boxes, np.float64)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    k = np.floor(CANONICAL_LEVEL + np.log2(np.sqrt(area) / CANONICAL_SIZE) + 1e-6)
    k_min, k_max = (round(-np.log2(s)) for s in (SPATIAL_SCALES[0], SPATIAL_SCALES[-1]))
    return (np.clip(k, k_min, k_max) - k_min).astype(int)


def main(steps: int = 300, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    params, loss = roi_head.train(
        init(rng),
        lambda: make_batch(rng, 8),
        steps,
        forward=forward,
        verbose=verbose,
    )
    data = make_batch(np.random.default_rng(seed + 1), 32)
    result = roi_head.evaluate(params, data, forward=forward)
    level = level_of(data[1])
    per_level = {}
    for i, scale in enumerate(SPATIAL_SCALES):
        on = level == i
        per_level[i] = {
            "proposals": int(on.sum()),
            "objects": int((on & (np.asarray(data[3]) < roi_head.CLASSES)).sum()),
            "accuracy": float(result["correct"][on].mean()),
            "iou_before": float(np.nanmean(result["before"][on])),
            "iou_after": float(np.nanmean(result["after"][on])),
        }
        if verbose:
            p = per_level[i]
            print(
                f"P{i + 1} (stride {round(1 / scale)}): {p['proposals']} proposals "
                f"({p['objects']} objects); accuracy {p['accuracy']:.3f}, mean IoU "
                f"{p['iou_before']:.3f} -> {p['iou_after']:.3f}"
            )
    accuracy = float(result["correct"].mean())
    before = float(np.nanmean(result["before"]))
    after = float(np.nanmean(result["after"]))
    if verbose:
        print(
            f"held-out accuracy {accuracy:.3f}; mean IoU of the object proposals "
            f"{before:.3f} -> {after:.3f} after refinement"
        )
    return {
        "loss": loss,
        "accuracy": accuracy,
        "iou_before": before,
        "iou_after": after,
        "levels": per_level,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.steps, args.seed)
