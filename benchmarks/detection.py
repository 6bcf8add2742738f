"""Benchmark of region pooling as detection models call it, on the CPU, with its targets.

The Mask R-CNN heads on the feature pyramid (FPN) of an 800 x 1088 image: levels P2-P5 of
``2 x 256 x 200 x 272``, ``100 x 136``, ``50 x 68`` and ``25 x 34`` (``spatial_scales`` 1/4 to
1/32); the box head pools 1000 boxes to ``7 x 7``, the mask head 100 of them to ``14 x 14``.
The boxes (fixed seed) have sizes ``sqrt(w * h)`` log-uniform from 16 to 800 pixels and aspect
ratios ``h / w`` log-uniform in ``[0.5, 2]``, clipped to the image and placed inside it, on
either image at random.  Every box is pooled with ``aligned_mode="half_pixel_for_nn"``
(torchvision's ``aligned=True``) on the level torchvision's ``LevelMapper`` assigns it, with
``sampling_ratio`` 2 and 0 (adaptive), forward and forward+backward (the gradient in the
features of ``sum(y * ct)``), on features in both layouts.  The contenders of one group (a
head, a sampling ratio and a mode; both layouts) are timed in the same rounds:

* ``multilevel-NCX`` / ``multilevel-NXC``: ``jaxpool.multilevel_roi_align``;
* ``per-level-NCX`` / ``-NXC``: the floor of the design.  The boxes are partitioned on the host
  by the same rule and each level's ``jaxpool.roi_align`` pools exactly the boxes it receives
  (the rows ``P2-NCX`` ... ``P5-NXC``); the per-level calls' times are summed within each round;
* ``all-levels-NCX`` / ``-NXC``: what a user writes by hand with static shapes: every box
  pooled on every level by ``jaxpool.roi_align``, then selected by its level;
* ``openvino``: the OpenVINO CPU runtime's ExperimentalDetectronROIFeatureExtractor-6 (f32, two
  threads, NCX, forward only, ``aligned=True``), one extractor per image since it takes one
  image's maps.  Its own level rule counts the canonical level from the first map: on this
  pyramid, whose first map has stride 4, every box gets torchvision's level;
* ``gather floor``: the least a program can do for the same samples.  The host computes every
  bilinear corner that jaxpool's samples read (``sampling_ratio`` samples per bin and axis, or
  ``ceil`` of the bin size for 0, as the runtime counts them, on each box's level) as rows of
  the pyramid flattened channels-last; the program reads those rows, weights them and sums
  them per bin (forward), or scatter-adds the weighted cotangents there (forward+backward,
  whose forward a linear op does not need).  The ``x gather`` column is each contender's
  paired ratio to it;
* in forward+backward groups ``multilevel-NCX fwd`` (and NXC), and in ``sampling_ratio=0``
  groups ``multilevel-NCX sr=2`` (and NXC): references for the ratio targets, timed in the
  same rounds.

The adaptive-sampling workloads pool one map ``2 x 256 x 50 x 68`` (``spatial_scale`` 1/16) with
``jaxpool.roi_align``, ``sampling_ratio=0`` against ``sampling_ratio=2`` on the same boxes, in
both layouts, forward and forward+backward: ``small-bins``, 100 boxes whose bins are at most 2
pixels (adaptive counts 1 or 2); ``small-bins-vmap``, the same under ``jax.vmap`` over two such
box sets; and ``issue``, 100 boxes of random sizes up to the whole map.

Targets (CPU, paired ratios of medians over rounds): ``multilevel_roi_align`` at most 1.2x the
per-level sum, 0.2x the OpenVINO extractor (NCX), 1.5x the gather floor, NCX at most 1.3x NXC,
forward+backward at most 3x its forward, compile (``lower`` + ``compile``) at most 2 s, and on
the Mask R-CNN boxes ``sampling_ratio=0`` at most 2x ``sampling_ratio=2``;
``roi_align(sampling_ratio=0)`` with adaptive counts of at most 2 at most 1.5x
``sampling_ratio=2`` (``small-bins`` and ``small-bins-vmap``); the compile time of
``sampling_ratio=0`` at most 2x that of ``sampling_ratio=2`` (every adaptive group:
``multilevel_roi_align`` and ``roi_align``, each compile time the median of ``--compiles``).
The compile time of ``multilevel_roi_align`` is also reported as a first call from cleared
caches (``first call s``: tracing, compilation and one run).

The method is ``bench.py``'s: the contenders of a group run interleaved round by round in a
rotating order after a warm-up, each timed stretch after ``--settle-ms`` of idle time; JAX
contenders are compiled ahead of time; a program whose XLA temp memory exceeds
``--max-temp-gib`` is left out of its group (its targets read ``n/a``).  ``--check`` compares
the outputs (forward) or gradients (forward+backward) of ``multilevel_roi_align`` with the
per-level and all-levels programs' and the other layout's, and in the forward with the gather
floor's (which so reads the samples jaxpool reads), before timing.

Run ``python3 benchmarks/detection.py --help`` for the options; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402  (puts the repository root on sys.path, imports jax and jaxpool)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from bench import LAYOUTS, MODES, Contender, Target  # noqa: E402
from jax import lax  # noqa: E402

import jaxpool  # noqa: E402

ALIGNED = "half_pixel_for_nn"
SAMPLING_RATIOS = (2, 0)
CANONICAL_SIZE, CANONICAL_LEVEL = 224, 4  # torchvision's LevelMapper
FLOOR = "gather floor"

# Targets.
VS_PER_LEVEL = 1.2
VS_OPENVINO = 0.2
BWD_VS_FWD = 3.0
COMPILE_S = 2.0
NCX_VS_NXC = 1.3
VS_GATHER = 1.5
SMALL_BINS_VS_FIXED = 1.5
ADAPTIVE_VS_FIXED = 2.0
COMPILE_VS_FIXED = 2.0

# --------------------------------------------------------------------------------------------
# Workloads.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pyramid:
    """Feature maps of ``batch`` images of ``image`` pixels (height, width), one level per
    stride, finest first."""

    batch: int
    channels: int
    image: tuple[int, int]
    strides: tuple[int, ...] = (4, 8, 16, 32)

    @property
    def scales(self) -> tuple[float, ...]:
        return tuple(1 / s for s in self.strides)

    @property
    def shapes(self) -> tuple[tuple[int, int], ...]:
        return tuple((-(-self.image[0] // s), -(-self.image[1] // s)) for s in self.strides)

    def describe(self) -> str:
        levels = ", ".join(f"{h}x{w}" for h, w in self.shapes)
        return f"{self.batch}x{self.channels} FPN {levels}"


@dataclasses.dataclass(frozen=True)
class Head:
    name: str
    boxes: int
    output_size: int


@dataclasses.dataclass(frozen=True)
class Scale:
    """The sizes of one run: the pyramid, the heads, the range of box sizes and the level
    rule's canonical size (both in image pixels), and the adaptive workloads' channels and
    boxes (their map has the stride 16 on the image)."""

    pyramid: Pyramid
    heads: tuple[Head, ...]
    box_sizes: tuple[float, float]
    canonical_size: float
    adaptive_channels: int
    adaptive_boxes: int


SCALES = {
    "full": Scale(
        Pyramid(2, 256, (800, 1088)),
        (Head("box", 1000, 7), Head("mask", 100, 14)),
        box_sizes=(16, 800),
        canonical_size=CANONICAL_SIZE,
        adaptive_channels=256,
        adaptive_boxes=100,
    ),
    # The image, the boxes and the canonical size divided by 8 (so that the boxes spread over
    # the levels alike), two levels, 8 channels and few boxes: every path, in seconds.
    "quick": Scale(
        Pyramid(2, 8, (100, 136), strides=(4, 8)),
        (Head("box", 24, 7), Head("mask", 6, 14)),
        box_sizes=(2, 100),
        canonical_size=CANONICAL_SIZE // 8,
        adaptive_channels=8,
        adaptive_boxes=6,
    ),
}
ADAPTIVE = ("small-bins", "small-bins-vmap", "issue")
# ``--quick`` runs these groups unless ``--only`` names others: every contender, the forward
# reference, both modes, adaptive sampling and vmap.
QUICK = ("box/sr2/fwd", "mask/sr2/fwd+bwd", "small-bins-vmap/fwd+bwd")


def group_keys(scale: Scale) -> list[str]:
    """The keys of every group (``--only`` searches them): ``head/srN/mode`` and
    ``adaptive-workload/mode``."""
    keys = [
        f"{head.name}/sr{sr}/{mode}"
        for head in scale.heads
        for sr in SAMPLING_RATIOS
        for mode in MODES
    ]
    return keys + [f"{name}/{mode}" for name in ADAPTIVE for mode in MODES]


def detection_boxes(
    count: int, pyramid: Pyramid, rng: np.random.Generator, sizes: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` boxes ``(x_1, y_1, x_2, y_2)`` (float32) inside the image and their images
    (int32): ``sqrt(w * h)`` log-uniform in ``sizes``, ``h / w`` log-uniform in ``[0.5, 2]``,
    each side clipped to the image."""
    height, width = pyramid.image
    size = np.exp(rng.uniform(np.log(sizes[0]), np.log(sizes[1]), count))
    aspect = np.exp(rng.uniform(np.log(0.5), np.log(2.0), count))
    w = np.minimum(size / np.sqrt(aspect), width)
    h = np.minimum(size * np.sqrt(aspect), height)
    x1, y1 = rng.uniform(0, width - w), rng.uniform(0, height - h)
    rois = np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)
    return rois, rng.integers(0, pyramid.batch, count).astype(np.int32)


def uniform_boxes(
    count: int, pyramid: Pyramid, rng: np.random.Generator, low: float, high: tuple[float, float]
) -> np.ndarray:
    """``count`` boxes inside the image, width and height uniform in ``[low, high)``."""
    height, width = pyramid.image
    w = rng.uniform(low, min(high[1], width), count)
    h = rng.uniform(low, min(high[0], height), count)
    x1, y1 = rng.uniform(0, width - w), rng.uniform(0, height - h)
    return np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)


def torchvision_levels(
    rois: Any, scales: tuple[float, ...], canonical_size: float, xp: Any = np
) -> Any:
    """The level index of each box by torchvision's ``LevelMapper`` (float32, as it computes):
    ``floor(4 + log2(sqrt(area) / canonical_size) + 1e-6)``, clamped to the levels, counted
    from the first."""
    rois = xp.asarray(rois, np.float32)
    area = (rois[:, 2] - rois[:, 0]) * (rois[:, 3] - rois[:, 1])
    k = xp.floor(
        CANONICAL_LEVEL + xp.log2(xp.sqrt(area) / np.float32(canonical_size)) + np.float32(1e-6)
    )
    k_min, k_max = -math.log2(scales[0]), -math.log2(scales[-1])
    return (xp.clip(k, k_min, k_max) - k_min).astype(np.int32)


# --------------------------------------------------------------------------------------------
# The programs.
# --------------------------------------------------------------------------------------------


def multilevel_fn(
    out: int, scales: tuple[float, ...], ratio: int, layout: str, canonical_size: float
) -> Callable:
    def f(features, rois, batch):
        return jaxpool.multilevel_roi_align(
            features,
            rois,
            batch,
            out,
            spatial_scales=scales,
            sampling_ratio=ratio,
            aligned_mode=ALIGNED,
            level_rule="torchvision",
            canonical_size=canonical_size,
            data_format=layout,
        )

    return f


def roi_align_fn(out: int, scale: float, ratio: int, layout: str) -> Callable:
    def f(x, rois, batch):
        return jaxpool.roi_align(
            x,
            rois,
            batch,
            out,
            spatial_scale=scale,
            sampling_ratio=ratio,
            aligned_mode=ALIGNED,
            data_format=layout,
        )

    return f


def all_levels_fn(
    out: int, scales: tuple[float, ...], ratio: int, layout: str, canonical_size: float
) -> Callable:
    """Every box pooled on every level, the result of its own level kept."""

    def f(features, rois, batch):
        level = torchvision_levels(rois, scales, canonical_size, xp=jnp)[:, None, None, None]
        pooled = [
            roi_align_fn(out, scale, ratio, layout)(x, rois, batch)
            for x, scale in zip(features, scales)
        ]
        return jnp.select([level == i for i in range(len(pooled))], pooled)

    return f


def vmapped(f: Callable) -> Callable:
    """``f(x, rois, batch)`` over sets of boxes ``[S, R, 4]`` and batch indices ``[S, R]``."""
    return jax.vmap(f, in_axes=(None, 0, 0))


def with_backward(f: Callable) -> Callable:
    """``(x, *rest, ct) -> d sum(f(x, *rest) * ct) / dx``."""

    def loss(x, *rest):
        *args, ct = rest
        return jnp.sum(f(x, *args) * ct)

    return jax.grad(loss)


# The gather floor: the corners of every sample as rows of the flattened pyramid.


def axis_corners(coord: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The two elements and weights a bilinear sample at ``coord`` reads along an axis of
    ``length`` by the runtime's rule (``jaxpool._src.bilinear``): nothing below -1 or past
    ``length``, clamped at both ends."""
    inside = (coord >= -1) & (coord <= length)
    v = np.maximum(coord, 0)
    low = np.floor(v)
    edge = low >= length - 1
    low = np.where(edge, length - 1, low)
    frac = np.where(edge, 0, v - low)
    low_i = np.where(inside, low, 0).astype(np.int64)
    high_i = np.where(edge | ~inside, low_i, low_i + 1)
    weight = np.stack([np.where(inside, 1 - frac, 0), np.where(inside, frac, 0)], -1)
    return np.stack([low_i, high_i], -1), weight


def sample_counts(rois: np.ndarray, scale: np.ndarray, out: int, ratio: int) -> np.ndarray:
    """Samples per bin along y and x, ``(R, 2)``: ``ratio``, or ``ceil`` of the bin size."""
    size = np.stack([rois[:, 3] - rois[:, 1], rois[:, 2] - rois[:, 0]], 1) * scale[:, None]
    if ratio > 0:
        return np.full(size.shape, ratio, np.int64)
    return np.maximum(np.ceil(size / out), 0).astype(np.int64)


def floor_corners(
    rois: np.ndarray, batch: np.ndarray, levels: np.ndarray, pyramid: Pyramid, out: int, ratio: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """The corners read by the samples of every bin, grouped by the number of samples per bin
    ``n``: per group, the rows ``(B, 4 n)`` (int32) of the pyramid flattened channels-last
    (levels one after another, each ``[N, H, W]`` row-major) and their weights ``(B, 4 n)``,
    divided by ``n``; ``B`` is the group's boxes times ``out * out`` bins.  And the boxes in
    the order of the groups' bins (a box without samples has none)."""
    shapes = np.asarray(pyramid.shapes)
    scales = np.asarray(pyramid.scales)[levels]
    offsets = np.concatenate([[0], np.cumsum(pyramid.batch * shapes[:, 0] * shapes[:, 1])])
    counts = sample_counts(rois, scales, out, ratio)
    groups: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for cy, cx in sorted({tuple(c) for c in counts}):
        if cy * cx == 0:
            continue
        mine = np.flatnonzero((counts[:, 0] == cy) & (counts[:, 1] == cx))
        r, s = rois[mine].astype(np.float64), scales[mine][:, None]
        height, width = shapes[levels[mine], 0][:, None], shapes[levels[mine], 1][:, None]
        axes = []
        for lo, hi, count, length in ((1, 3, cy, height), (0, 2, cx, width)):
            start, size = r[:, lo : lo + 1] * s - 0.5, (r[:, hi : hi + 1] - r[:, lo : lo + 1]) * s
            step = size / out
            grid = np.arange(out)[:, None] + (np.arange(count)[None, :] + 0.5) / count
            coord = start[:, :, None] + step[:, :, None] * grid[None]  # (b, out, count)
            axes.append(axis_corners(coord, length[:, :, None]))
        (yi, yw), (xi, xw) = axes
        # (b, out_h, cy, 2) and (b, out_w, cx, 2) -> (b, out_h, out_w, cy, 2, cx, 2)
        base = offsets[levels[mine]] + batch[mine] * (height * width)[:, 0]
        row = (
            base.reshape(-1, 1, 1, 1, 1, 1, 1)
            + yi[:, :, None, :, :, None, None] * width.reshape(-1, 1, 1, 1, 1, 1, 1)
            + xi[:, None, :, None, None, :, :]
        )
        weight = yw[:, :, None, :, :, None, None] * xw[:, None, :, None, None, :, :] / (cy * cx)
        n = cy * cx
        row = row.reshape(len(mine) * out * out, 4 * n).astype(np.int32)
        weight = weight.reshape(len(mine) * out * out, 4 * n).astype(np.float32)
        groups.setdefault(n, []).append((row, weight, mine))
    parts = [groups[n] for n in sorted(groups)]
    corners = [
        (np.concatenate([p[0] for p in g]), np.concatenate([p[1] for p in g])) for g in parts
    ]
    return corners, np.concatenate([p[2] for g in parts for p in g])


def flat_pyramid(features_nxc: list[np.ndarray]) -> np.ndarray:
    """The levels channels-last, one row per position: ``[sum N * H * W, C]``."""
    channels = features_nxc[0].shape[-1]
    return np.concatenate([f.reshape(-1, channels) for f in features_nxc])


def gather_floor(table: jax.Array, corners: list[tuple[jax.Array, jax.Array]]) -> jax.Array:
    """The weighted sum of each bin's corner rows, the groups' bins one after another in one
    array ``(sum B, C)``, as the pooling ops return one array (whose pages a large one faults
    in on every call).  One read per corner slot, added elementwise, so that XLA fuses the
    reads and the sum into one loop, which writes its group's rows in place."""
    out = jnp.zeros((sum(rows.shape[0] for rows, _ in corners), table.shape[1]), table.dtype)
    start = 0
    for rows, weights in corners:
        total = None
        for k in range(rows.shape[1]):
            term = table[rows[:, k]] * weights[:, k, None]
            total = term if total is None else total + term
        out = lax.dynamic_update_slice(out, total, (start, 0))
        start += rows.shape[0]
    return out


def gather_floor_backward(
    table: jax.Array, corners: list[tuple[jax.Array, jax.Array]], cts: list[jax.Array]
) -> jax.Array:
    """The adjoint of :func:`gather_floor`: the weighted cotangents scatter-added to their
    rows, one corner slot after another in a loop, so that only one slot's updates exist at a
    time (a single scatter of every slot writes them all out first: 800 MB for the box head)."""
    dx = jnp.zeros_like(table)
    for (rows, weights), ct in zip(corners, cts):

        def slot(dx, corner, ct=ct):
            row, weight = corner
            return dx.at[row].add(weight[:, None] * ct), None

        dx, _ = lax.scan(slot, dx, (rows.T, weights.T))
    return dx


# --------------------------------------------------------------------------------------------
# Contenders.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Options:
    """What every group's contenders share: compilations per timed compile, the memory bound,
    the notes of programs left out."""

    compiles: int
    max_temp_bytes: int
    notes: list[str] = dataclasses.field(default_factory=list)


def compiled(name: str, fn: Callable, *args: Any, opts: Options, compiles: int = 1):
    """``bench.jax_contender``, or ``None`` (with a note) for a program too large to run."""
    try:
        return bench.jax_contender(
            name, fn, *args, compiles=compiles, max_temp_bytes=opts.max_temp_bytes
        )
    except bench.TooLarge as e:
        opts.notes.append(f"left out: {e}")
        print(f"  note: left out {e}")
        return None


def first_call_s(fn: Callable, *args: Any) -> float:
    """Seconds of a first ``jax.jit(fn)`` call from cleared caches: tracing, compilation and
    one run."""
    jax.clear_caches()
    t0 = time.perf_counter()
    jax.block_until_ready(jax.jit(fn)(*args))
    return time.perf_counter() - t0


def summed(name: str, parts: list[Contender]) -> Contender:
    """A contender whose time in each round is the sum of ``parts``' times in that round (over
    the rounds all of them took part in)."""
    rounds = min(len(c.times) for c in parts)
    c = Contender(name, lambda: None, sum(c.io_bytes for c in parts))
    c.times = [sum(p.times[r] for p in parts) for r in range(rounds)]
    c.faults = [sum(p.faults[r] for p in parts) for r in range(rounds)] if parts[0].faults else []
    if all(p.compile_s is not None for p in parts):
        c.compile_s = sum(p.compile_s for p in parts)
    return c


def openvino_extractor(
    features_ncx: list[np.ndarray],
    rois: np.ndarray,
    batch: np.ndarray,
    pyramid: Pyramid,
    out: int,
    ratio: int,
) -> Contender:
    """ExperimentalDetectronROIFeatureExtractor-6 on the OpenVINO CPU runtime (f32, two
    threads): one extractor per image, whose maps it takes as ``[1, C, H, W]``, in one model."""
    import openvino as ov
    import openvino.opset6 as ops
    from openvino.utils.node_factory import NodeFactory

    factory = NodeFactory("opset6")
    attrs = {
        "output_size": out,
        "sampling_ratio": ratio,
        "pyramid_scales": list(pyramid.strides),
        "aligned": True,
    }
    params, inputs, outputs = [], [], []
    for image in range(pyramid.batch):
        mine = np.ascontiguousarray(rois[batch == image])
        if not len(mine):
            continue
        maps = [f[image : image + 1] for f in features_ncx]
        nodes = [ops.parameter(list(a.shape), ov.Type.f32) for a in (mine, *maps)]
        extractor = factory.create(
            "ExperimentalDetectronROIFeatureExtractor", [n.output(0) for n in nodes], attrs
        )
        params += nodes
        inputs += [mine, *maps]
        outputs.append(extractor.output(0))
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": bench.THREADS}
    model = ov.Core().compile_model(ov.Model(outputs, params), "CPU", config)
    request = model.create_infer_request()
    feed = dict(enumerate(inputs))
    results = request.infer(feed, share_inputs=True, share_outputs=True)
    io = sum(a.nbytes for a in inputs) + sum(np.asarray(r).nbytes for r in results.values())
    return Contender(
        "openvino", lambda: request.infer(feed, share_inputs=True, share_outputs=True), io
    )


# --------------------------------------------------------------------------------------------
# Checks: multilevel_roi_align against the per-level and all-levels programs.
# --------------------------------------------------------------------------------------------


def compare(label: str, got: Any, want: Any, rtol: float = 1e-5) -> dict:
    """One check: equal to ``rtol`` (float32 rounding) relative to the largest value compared."""
    got = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(got)]
    want = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(want)]
    ok = len(got) == len(want) and all(a.shape == b.shape for a, b in zip(got, want))
    err = math.inf
    if ok:
        err = max((float(np.abs(a - b).max()) if a.size else 0.0) for a, b in zip(got, want))
        scale = max((float(np.abs(b).max()) if b.size else 0.0) for b in want)
        ok = err <= rtol * max(scale, 1e-6)
    return {"check": label, "ok": ok, "max_abs_err": err}


def check_detection(
    by_name: dict[str, Contender], levels: np.ndarray, mode: str, floor_order: np.ndarray
) -> list[dict]:
    """``multilevel_roi_align``'s outputs (or gradients) against the per-level programs'
    (reassembled in box order), the all-levels program's, the other layout's, and in the
    forward the gather floor's (its boxes in ``floor_order``: the floor reads the samples that
    jaxpool reads; the host computes their positions in float64)."""
    checks = []
    num_levels = int(levels.max()) + 1 if len(levels) else 0
    for layout in LAYOUTS:
        ml = by_name.get(f"multilevel-{layout}")
        if ml is None:
            continue
        want = ml.outputs
        parts = {lv: by_name.get(f"P{lv + 2}-{layout}") for lv in range(num_levels)}
        parts = {lv: c for lv, c in parts.items() if c is not None}
        if mode == "fwd" and parts:
            got = np.zeros(want.shape, np.float32)
            for lv, c in parts.items():
                got[levels == lv] = np.asarray(c.outputs)
            keep = np.isin(levels, list(parts))
            checks.append(compare(f"per-level-{layout} values", got[keep], np.asarray(want)[keep]))
        elif parts:
            got = [parts[lv].outputs for lv in sorted(parts)]
            checks.append(
                compare(f"per-level-{layout} dx", got, [want[lv] for lv in sorted(parts)])
            )
        if f"all-levels-{layout}" in by_name:
            what = "values" if mode == "fwd" else "dx"
            got = by_name[f"all-levels-{layout}"].outputs
            checks.append(compare(f"all-levels-{layout} {what}", got, want))
    if "multilevel-NCX" in by_name and "multilevel-NXC" in by_name:
        got, want = by_name["multilevel-NXC"].outputs, by_name["multilevel-NCX"].outputs
        if mode == "fwd":
            got, want = np.moveaxis(np.asarray(got), -1, 1), np.asarray(want)
        else:
            got = [np.moveaxis(np.asarray(g), -1, 1) for g in got]
        checks.append(compare("multilevel-NXC against multilevel-NCX", got, want))
    if mode == "fwd" and FLOOR in by_name and "multilevel-NXC" in by_name:
        want = np.asarray(by_name["multilevel-NXC"].outputs)[floor_order]
        got = np.asarray(by_name[FLOOR].outputs).reshape(want.shape)
        checks.append(compare(f"{FLOOR} values", got, want, rtol=1e-4))
    return checks


# --------------------------------------------------------------------------------------------
# Groups.
# --------------------------------------------------------------------------------------------


def rows_of(
    contenders: list[Contender],
    floor: Contender | None,
    ref: Callable[[str], str],
    first_calls: dict[str, float] | None = None,
) -> list[dict]:
    """A result row per contender: the harness's timing row, compile time, first call, XLA
    temp memory, page faults, and the paired ratios to the gather floor and of the contender
    that ``ref`` names for it (``time(ref) / time(contender)``, as ``bench.py``'s rows)."""
    first_calls = first_calls or {}
    by_name = {c.name: c for c in contenders}
    rows = []
    for c in contenders:
        vs = ref(c.name)
        vs = vs if vs in by_name and vs != c.name else None
        rows.append(
            bench.timing_row(c)
            | {
                "io_bytes": c.io_bytes,
                "compile_s": c.compile_s,
                "first_call_s": first_calls.get(c.name),
                "temp_bytes": c.temp_bytes,
                "faults_per_call": statistics.median(c.faults) if c.faults else None,
                "x_gather": None if floor is None or c is floor else bench.paired_ratio(c, floor),
                "vs": vs,
                "ratio": bench.paired_ratio(by_name[vs], c) if vs else None,
            }
        )
    return rows


def ratio_target(by_name: dict[str, Contender], a: str, b: str, limit: float) -> Target:
    value = bench.paired_ratio(by_name[a], by_name[b]) if a in by_name and b in by_name else None
    return Target(f"{a} / {b}", value, limit)


def compile_target(by_name: dict[str, Contender], a: str, b: str, limit: float) -> Target:
    """The ratio of two contenders' compile times (``lower`` + ``compile``)."""
    times = [by_name[n].compile_s if n in by_name else None for n in (a, b)]
    value = times[0] / times[1] if None not in times and times[1] else None
    return Target(f"{a} compile / {b} compile", value, limit)


def detection_group(head: Head, ratio: int, mode: str, data: dict, args, opts: Options) -> dict:
    """One head with one sampling ratio in one mode, both layouts, timed in the same rounds."""
    pyramid: Pyramid = data["pyramid"]
    out, scales = head.output_size, pyramid.scales
    rois, batch = data["rois"][: head.boxes], data["batch"][: head.boxes]
    canonical = data["canonical_size"]
    levels = torchvision_levels(rois, scales, canonical)
    r, b = jnp.asarray(rois), jnp.asarray(batch)
    backward = mode == "fwd+bwd"
    rng = np.random.default_rng(1)
    ct_ncx = rng.standard_normal((len(rois), pyramid.channels, out, out), dtype=np.float32)

    cs: list[Contender] = []
    first_calls: dict[str, float] = {}
    per_level: dict[str, list[Contender]] = {}
    for layout in LAYOUTS:
        feats = data[layout]
        ct = jnp.asarray(bench.to_layout(ct_ncx, layout))
        ml = multilevel_fn(out, scales, ratio, layout, canonical)
        programs = [
            ("multilevel", ml),
            ("all-levels", all_levels_fn(out, scales, ratio, layout, canonical)),
        ]
        if backward:
            programs.append(("multilevel fwd", ml))
        if ratio != 2:
            programs.append(("multilevel sr=2", multilevel_fn(out, scales, 2, layout, canonical)))
        # The compile times of a target's ratio, each the median of --compiles.
        timed = ("multilevel", "multilevel sr=2")
        for what, fn in programs:
            name = f"{what.split()[0]}-{layout}" + "".join(f" {w}" for w in what.split()[1:])
            args_ = (feats, r, b)
            if backward and what != "multilevel fwd":
                fn, args_ = with_backward(fn), (feats, r, b, ct)
            c = compiled(
                name, fn, *args_, opts=opts, compiles=opts.compiles if what in timed else 1
            )
            if c is not None and what == "multilevel":
                first_calls[name] = first_call_s(fn, *args_)
            if c is not None:
                cs.append(c)
        parts = []
        for lv, scale in enumerate(scales):
            mine = np.flatnonzero(levels == lv)
            if not len(mine):
                continue
            fn = roi_align_fn(out, scale, ratio, layout)
            args_ = (feats[lv], jnp.asarray(rois[mine]), jnp.asarray(batch[mine]))
            if backward:
                ct_l = jnp.asarray(bench.to_layout(ct_ncx[mine], layout))
                fn, args_ = with_backward(fn), (*args_, ct_l)
            c = compiled(f"P{lv + 2}-{layout}", fn, *args_, opts=opts)
            if c is None:
                parts = []
                break
            parts.append(c)
        cs += parts
        per_level[layout] = parts

    corners, floor_order = floor_corners(rois, batch, levels, pyramid, out, ratio)
    corners = [(jnp.asarray(rw), jnp.asarray(w)) for rw, w in corners]
    if backward:
        cts = [
            jnp.asarray(rng.standard_normal((rw.shape[0], pyramid.channels), np.float32))
            for rw, _ in corners
        ]
        floor = compiled(FLOOR, gather_floor_backward, data["table"], corners, cts, opts=opts)
    else:
        floor = compiled(FLOOR, gather_floor, data["table"], corners, opts=opts)
    if floor is not None:
        cs.append(floor)
    if not backward and data.get("openvino"):
        cs.append(openvino_extractor(data["NCX_np"], rois, batch, pyramid, out, ratio))

    by_name = {c.name: c for c in cs}
    checks = check_detection(by_name, levels, mode, floor_order) if args.check else []
    bench.interleaved(cs, **bench.timing(args))
    for layout, parts in per_level.items():
        if parts:
            cs.append(summed(f"per-level-{layout}", parts))
    by_name = {c.name: c for c in cs}

    def ref(name: str) -> str:
        layout = "NXC" if "NXC" in name else "NCX"
        return f"multilevel-{layout}"

    rows = rows_of(cs, floor, ref, first_calls)
    targets = []
    for layout in LAYOUTS:
        ml = f"multilevel-{layout}"
        targets.append(ratio_target(by_name, ml, f"per-level-{layout}", VS_PER_LEVEL))
        targets.append(ratio_target(by_name, ml, FLOOR, VS_GATHER))
        if backward:
            targets.append(ratio_target(by_name, ml, f"{ml} fwd", BWD_VS_FWD))
        if ratio != 2:
            targets.append(ratio_target(by_name, ml, f"{ml} sr=2", ADAPTIVE_VS_FIXED))
            targets.append(compile_target(by_name, ml, f"{ml} sr=2", COMPILE_VS_FIXED))
        compile_s = by_name[ml].compile_s if ml in by_name else None
        targets.append(Target(f"{ml} compile", compile_s, COMPILE_S, "s"))
    targets.append(ratio_target(by_name, "multilevel-NCX", "multilevel-NXC", NCX_VS_NXC))
    if not backward:
        targets.append(ratio_target(by_name, "multilevel-NCX", "openvino", VS_OPENVINO))
    return {
        "key": f"{head.name}/sr{ratio}/{mode}",
        "workload": f"{head.name} sr={ratio}",
        "op": "multilevel_roi_align",
        "mode": mode,
        "describe": (
            f"{pyramid.describe()}, {head.boxes} boxes -> {out}x{out}, sampling_ratio={ratio}"
        ),
        "boxes_per_level": np.bincount(levels, minlength=len(scales)).tolist(),
        "rows": rows,
        "targets": [dataclasses.asdict(t) | {"verdict": t.verdict} for t in targets],
        "checks": checks,
    }


def adaptive_group(name: str, mode: str, data: dict, args, opts: Options) -> dict:
    """``roi_align`` with ``sampling_ratio=0`` against 2 on the same boxes, both layouts."""
    w = data["adaptive"][name]
    backward = mode == "fwd+bwd"
    cs = []
    for layout in LAYOUTS:
        x = data["adaptive"][layout]
        for ratio in (0, 2):
            fn = roi_align_fn(OUT_ADAPTIVE, ADAPTIVE_SCALE, ratio, layout)
            if name.endswith("vmap"):
                fn = vmapped(fn)
            args_ = (x, w["rois"], w["batch"])
            if backward:
                shape = jax.eval_shape(fn, *args_).shape
                ct = jnp.asarray(np.random.default_rng(1).standard_normal(shape, np.float32))
                fn, args_ = with_backward(fn), (*args_, ct)
            c = compiled(f"sr={ratio}-{layout}", fn, *args_, opts=opts, compiles=opts.compiles)
            if c is not None:
                cs.append(c)
    bench.interleaved(cs, **bench.timing(args))
    by_name = {c.name: c for c in cs}
    rows = rows_of(cs, None, lambda n: n.replace("sr=2", "sr=0"))
    targets = [
        compile_target(by_name, f"sr=0-{layout}", f"sr=2-{layout}", COMPILE_VS_FIXED)
        for layout in LAYOUTS
    ]
    if name != "issue":
        targets += [
            ratio_target(by_name, f"sr=0-{layout}", f"sr=2-{layout}", SMALL_BINS_VS_FIXED)
            for layout in LAYOUTS
        ]
    ratios = {
        f"sr=0-{layout} / sr=2-{layout}": bench.paired_ratio(
            by_name[f"sr=0-{layout}"], by_name[f"sr=2-{layout}"]
        )
        for layout in LAYOUTS
        if f"sr=0-{layout}" in by_name and f"sr=2-{layout}" in by_name
    }
    return {
        "key": f"{name}/{mode}",
        "workload": name,
        "op": "roi_align",
        "mode": mode,
        "describe": w["describe"],
        "rows": rows,
        "ratios": ratios,
        "targets": [dataclasses.asdict(t) | {"verdict": t.verdict} for t in targets],
        "checks": [],
    }


# --------------------------------------------------------------------------------------------
# Data.
# --------------------------------------------------------------------------------------------

OUT_ADAPTIVE = 7
ADAPTIVE_STRIDE = 16
ADAPTIVE_SCALE = 1 / ADAPTIVE_STRIDE
# Boxes of at most this many image pixels a side have bins of at most 2 pixels on the map of
# stride 16 (7 bins), so adaptive counts of 1 or 2; kept below 224 so that rounding in the
# scaled coordinates cannot make a count of 3.
SMALL_BOX = 220


def build_data(scale: Scale, openvino: bool) -> dict:
    """The pyramid in both layouts (and NCX on the host, and flattened channels-last for the
    gather floor), the detection boxes, and the adaptive workloads' map and boxes."""
    pyramid = scale.pyramid
    rng = np.random.default_rng(0)
    ncx = [
        rng.standard_normal((pyramid.batch, pyramid.channels, h, w), dtype=np.float32)
        for h, w in pyramid.shapes
    ]
    nxc = [bench.to_layout(f, "NXC") for f in ncx]
    count = max(h.boxes for h in scale.heads)
    rois, batch = detection_boxes(count, pyramid, rng, scale.box_sizes)
    data = {
        "pyramid": pyramid,
        "NCX_np": ncx,
        "NCX": [jnp.asarray(f) for f in ncx],
        "NXC": [jnp.asarray(f) for f in nxc],
        "table": jnp.asarray(flat_pyramid(nxc)),
        "rois": rois,
        "batch": batch,
        "canonical_size": scale.canonical_size,
        "openvino": openvino,
    }
    height, width = (-(-side // ADAPTIVE_STRIDE) for side in pyramid.image)
    x = rng.standard_normal((2, scale.adaptive_channels, height, width), np.float32)
    n = scale.adaptive_boxes
    small = [uniform_boxes(n, pyramid, rng, 16, (SMALL_BOX, SMALL_BOX)) for _ in range(2)]
    batches = [rng.integers(0, 2, n).astype(np.int32) for _ in range(2)]
    issue = uniform_boxes(n, pyramid, rng, 16, pyramid.image)
    shape = "x".join(map(str, x.shape))
    data["adaptive"] = {
        "NCX": jnp.asarray(x),
        "NXC": jnp.asarray(bench.to_layout(x, "NXC")),
        "small-bins": {
            "rois": jnp.asarray(small[0]),
            "batch": jnp.asarray(batches[0]),
            "describe": f"{shape}, {n} boxes with bins <= 2 px -> 7x7",
        },
        "small-bins-vmap": {
            "rois": jnp.asarray(np.stack(small)),
            "batch": jnp.asarray(np.stack(batches)),
            "describe": f"{shape}, vmap over 2 sets of {n} boxes with bins <= 2 px -> 7x7",
        },
        "issue": {
            "rois": jnp.asarray(issue),
            "batch": jnp.asarray(batches[0]),
            "describe": f"{shape}, {n} boxes of random sizes up to the map -> 7x7",
        },
    }
    return data


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------


def print_checks(g: dict) -> None:
    for c in g["checks"]:
        verdict = "ok" if c["ok"] else "FAILED"
        print(f"    check {c['check']:<44} max abs err {c['max_abs_err']:.2e} {verdict}")


def _per_layout(*names: str, key: str = "median_s", spec: str = ".5g", scale: float = 1e3):
    """A table cell: ``key`` of the first of ``names`` (``{L}`` the layout) that the group
    has, NCX / NXC."""

    def cell(g: dict) -> str:
        values = []
        for layout in LAYOUTS:
            found = (bench.cell(g, n.format(L=layout), key, spec, scale) for n in names)
            values.append(next((v for v in found if v), ""))
        return " / ".join(values) if any(values) else ""

    return cell


def _targets(g: dict) -> str:
    verdicts = [t["verdict"] for t in g["targets"]]
    if not verdicts:
        return ""
    text = f"{verdicts.count('PASS')}/{len(verdicts) - verdicts.count('n/a')} PASS"
    return text + (f", {verdicts.count('n/a')} n/a" if "n/a" in verdicts else "")


# The README's table of a run: per group, the median times (NCX / NXC) and the targets met.
TABLE: tuple[tuple[str, Callable[[dict], str]], ...] = (
    ("group", lambda g: g["key"]),
    ("multilevel ms", _per_layout("multilevel-{L}")),
    ("per-level ms", _per_layout("per-level-{L}")),
    ("all-levels ms", _per_layout("all-levels-{L}")),
    ("gather floor ms", lambda g: bench.cell(g, FLOOR, "median_s", ".5g", 1e3)),
    ("openvino ms", lambda g: bench.cell(g, "openvino", "median_s", ".5g", 1e3)),
    ("sr=0 ms", _per_layout("sr=0-{L}")),
    ("sr=2 ms", _per_layout("sr=2-{L}", "multilevel-{L} sr=2")),
    (
        "compile s",
        _per_layout("multilevel-{L}", "sr=0-{L}", key="compile_s", spec=".2f", scale=1.0),
    ),
    (
        "sr=2 compile s",
        _per_layout("multilevel-{L} sr=2", "sr=2-{L}", key="compile_s", spec=".2f", scale=1.0),
    ),
    ("targets", _targets),
)


def target_bars(groups: list[dict]) -> list[tuple[str, float, float]]:
    """A bar per measured ratio target: ``(label, value, limit)``."""
    return [
        (f"{g['key']}: {t['label']}", t["value"], t["limit"])
        for g in groups
        for t in g["targets"]
        if t["value"] is not None and t["unit"] == "x"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a pyramid of a 100x136 image with 8 channels, 24 and 6 boxes, 1 round, 1 warm-up "
        "round, one compilation per compile time; the QUICK groups unless --only is given "
        "(what the test suite runs)",
    )
    parser.add_argument(
        "--only", metavar="PATTERN", help="regex over the group keys, e.g. 'box/sr2' or 'bins'"
    )
    parser.add_argument(
        "--reps", "--rounds", dest="reps", type=int, help="timed rounds per group (default 9)"
    )
    bench.add_timing_options(parser)
    parser.add_argument(
        "--compiles",
        type=int,
        help="compilations per compile time of multilevel_roi_align and of the programs the "
        "compile targets compare, median (default 3)",
    )
    parser.add_argument(
        "--max-temp-gib",
        type=float,
        default=8.0,
        metavar="GIB",
        help="leave out a program that needs more XLA temp memory than this (default 8)",
    )
    parser.add_argument(
        "--check", action="store_true", help="compare the programs' outputs before timing"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="results file (default results/detection_cpu.json, on a GPU detection_gpu.json; "
        "with --quick or --only "
        "results/partial.json)",
    )
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the ratio targets (PNG)")
    parser.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out")
    parser.add_argument(
        "--table", metavar="JSON", help="print the markdown table of a results file and exit"
    )
    args = parser.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(bench.markdown_table(json.load(f)["groups"], TABLE))
        return 0
    if args.reps is None:
        args.reps = 1 if args.quick else 9
    if args.compiles is None:
        args.compiles = 1 if args.quick else 3
    if args.quick:
        args.warmup = min(args.warmup, 1)
    gpu = jax.default_backend() == "gpu"
    if args.min_stretch_ms is None:
        args.min_stretch_ms = 20.0 if gpu else 2.0
    if args.json is None:
        name = "partial" if args.quick or args.only else f"detection_{'gpu' if gpu else 'cpu'}"
        args.json = os.path.join(bench.RESULTS, name + ".json")
    scale = SCALES["quick" if args.quick else "full"]
    opts = Options(args.compiles, int(args.max_temp_gib * 2**30))
    openvino = None
    if not args.no_openvino:
        import openvino

    data = build_data(scale, openvino is not None)
    levels = torchvision_levels(data["rois"], scale.pyramid.scales, scale.canonical_size)
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind}, {os.cpu_count()} cores, "
        f"{args.reps} rounds; {scale.pyramid.describe()}; boxes per level "
        f"{np.bincount(levels, minlength=len(scale.pyramid.strides)).tolist()}"
    )
    skipped = []
    if getattr(jaxpool, "multilevel_roi_align", None) is None:
        skipped.append("multilevel_roi_align")
        print("\nnote: jaxpool.multilevel_roi_align is not available; skipping its groups")

    def write(groups: list[dict], errors: list[dict]) -> int:
        failed = sum(not c["ok"] for g in groups for c in g["checks"])
        result = {
            "meta": bench.environment(None)
            | {
                "backend": jax.default_backend(),
                "openvino": None if openvino is None else openvino.__version__,
                "cpu_count": os.cpu_count(),
                "threads": bench.THREADS,
                "pyramid": dataclasses.asdict(scale.pyramid),
                "heads": [dataclasses.asdict(h) for h in scale.heads],
                "rounds": args.reps,
                "warmup": args.warmup,
                "min_stretch_ms": args.min_stretch_ms,
                "settle_ms": args.settle_ms,
                "compiles": args.compiles,
                "max_temp_gib": args.max_temp_gib,
                "quick": args.quick,
                "only": args.only,
                "skipped": skipped,
                "notes": opts.notes,
                "checks_failed": failed,
            },
            "groups": groups,
            "errors": errors,
        }
        bench.write_json(result, args.json)
        return failed

    # The results file is rewritten after every group, so that a run stopped part-way (a
    # lent machine's time running out) keeps the groups it finished; a group that raises is
    # recorded and the run goes on.
    groups: list[dict] = []
    errors: list[dict] = []
    for key in group_keys(scale):
        if args.only and not re.search(args.only, key):
            continue
        if args.quick and not args.only and key not in QUICK:
            continue
        name, *rest = key.split("/")
        try:
            if name in ADAPTIVE:
                g = adaptive_group(name, rest[0], data, args, opts)
            elif skipped:
                continue
            else:
                head = next(h for h in scale.heads if h.name == name)
                g = detection_group(head, int(rest[0][2:]), rest[1], data, args, opts)
        except Exception as e:  # recorded and reported; the exit status is 1
            print(f"\n{key}: FAILED: {type(e).__name__}: {e}")
            errors.append({"key": key, "error": f"{type(e).__name__}: {e}"})
            write(groups, errors)
            continue
        bench.print_group(g, f"{g['key']} [{g['describe']}]")
        print_checks(g)
        groups.append(g)
        write(groups, errors)
    bench.print_summary(groups, where=lambda g: f"{g['key']:<24}")
    failed = write(groups, errors)
    if args.check:
        print(f"  checks: {failed} failed")
    for e in errors:
        print(f"  ERROR {e['key']}: {e['error']}")
    if args.plot:
        xlabel = "paired time ratio (median over rounds); the ticks are the targets"
        where = f"{jax.devices()[0].device_kind} ({jax.default_backend()})"
        bench.plot(
            target_bars(groups),
            args.plot,
            f"Detection targets, float32, {where}",
            xlabel,
            ticks=True,
        )
        print(f"wrote {args.plot}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
