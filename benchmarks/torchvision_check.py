"""torchvision's region ops against jaxpool's, on random cases: values and feature gradients.

torchvision's wheels need a CUDA build of PyTorch, so the test suite checks jaxpool against a
reference of its own (``tests/reference.py``); this script checks both against torchvision
itself where it imports (its CUDA kernels when a GPU is there, else its CPU kernels):

* ``roi_align(aligned=False|True)`` against ``jaxpool.roi_align`` (``aligned_mode``
  ``"asymmetric"`` or ``"half_pixel_for_nn"``), fixed and adaptive sampling;
* ``roi_pool`` against ``jaxpool.roi_pool``;
* ``ps_roi_align`` against ``jaxpool.psroi_align``;
* ``ps_roi_pool`` against ``jaxpool.torch.ps_roi_pool`` (``jaxpool.psroi_pool(rounding=
  "torchvision")``): values agree; the gradient is its forward's adjoint, which torchvision's
  backward kernels are not in bins that reach the map's last row or column (they clip the bins
  to ``[0, H]``, their forward to ``[0, H - 1]``), so its difference is reported, not failed;
* ``MultiScaleRoIAlign`` against ``jaxpool.multilevel_roi_align(level_rule="torchvision",
  aligned_mode="asymmetric")``;
* the ``jaxpool.torch`` binders ``roi_align``, ``roi_pool``, ``ps_roi_align`` and
  ``multi_scale_roi_align`` (boxes as ``[K, 5]`` rows, or per image for the last; records
  ``torch.*``) against the same torchvision calls;
* ``tests/reference.py``'s ``roi_align``, ``ps_roi_align``, ``multilevel_roi_align``,
  ``torchvision_roi_pool`` and ``torchvision_ps_roi_pool`` (with their backward kernels)
  against torchvision, so that the suite's oracle is checked too.

Boxes reach outside the map, are larger than it, or are empty.  Each op runs in float64 (where
a difference above 1e-9 is a difference of rule) and float32 (to the rounding of the kernels'
arithmetic and atomics).  ``--oracle reference`` runs the script where torchvision is missing,
with ``tests/reference.py`` standing in for it (values only): a dry run of the script itself.

Run ``python3 benchmarks/torchvision_check.py [--cases 6] [--json out.json]``; the exit status
is 1 where an op that should agree does not.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import reference  # noqa: E402  (tests/reference.py)

import jaxpool  # noqa: E402
import jaxpool.torch  # noqa: E402

TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
# Records whose differences are expected, reported but not failed.
PS_ROI_POOL_GRADIENT = (
    "ps_roi_pool gradient (torchvision's backward clips bins to H, its forward to H - 1)"
)
EXPECTED = (PS_ROI_POOL_GRADIENT,)
# A case's (H, W) map, output size, spatial scale, sampling ratio, aligned.
CONFIGS = [
    ((13, 17), (7, 7), 1.0, 2, True),
    ((13, 17), (7, 7), 0.25, 0, True),
    ((20, 9), (3, 5), 0.5, 1, False),
    ((8, 8), (2, 2), 0.0625, 0, False),
    ((1, 5), (4, 3), 1.0, 3, True),
    ((16, 24), (14, 14), 0.5, 0, True),
    ((50, 68), (7, 7), 0.25, 2, True),
]


def random_boxes(rng: np.random.Generator, k: int, height: float, width: float) -> np.ndarray:
    """``[k, 4]`` boxes in image pixels: inside, across the border, outside, larger than the
    image, and a few empty or inverted ones."""
    x1 = rng.uniform(-0.3, 1.1, k) * width
    y1 = rng.uniform(-0.3, 1.1, k) * height
    w = rng.uniform(0.0, 1.6, k) * width
    h = rng.uniform(0.0, 1.6, k) * height
    w[: k // 8] = 0.0
    h[k // 8 : k // 4] *= -0.05
    return np.stack([x1, y1, x1 + w, y1 + h], 1)


def stats(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float]:
    """The largest absolute difference and that relative to the largest value of ``theirs``."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes differ: {ours.shape} against {theirs.shape}")
    diff = float(np.max(np.abs(ours.astype(np.float64) - theirs), initial=0.0))
    return diff, diff / max(float(np.max(np.abs(theirs), initial=0.0)), 1.0)


class Torchvision:
    """torchvision's ops on numpy inputs; values and the gradient in ``x`` of ``sum(y * ct)``."""

    def __init__(self) -> None:
        import torch
        import torchvision

        self.torch, self.ops = torch, torchvision.ops
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.where = f"torchvision {torchvision.__version__} on {self.device}"

    def __call__(self, fn: Callable, x: np.ndarray, ct: np.ndarray, *args, **kwargs):
        t = self.torch
        xt = t.tensor(x, device=self.device, requires_grad=True)

        def convert(a):
            return t.tensor(a, device=self.device) if isinstance(a, np.ndarray) else a

        args = [[convert(b) for b in a] if isinstance(a, list) else convert(a) for a in args]
        y = fn(xt, *args, **kwargs)
        y.backward(t.tensor(ct, device=self.device))
        return y.detach().cpu().numpy(), xt.grad.cpu().numpy()


def ours(fn: Callable, x: np.ndarray, ct: np.ndarray, *operands, **static):
    """jaxpool's values and the gradient in ``x`` of ``sum(y * ct)``: one compilation per op
    and static arguments, the boxes being operands."""
    y, g = _vjp(fn, tuple(static.items()), x, ct, *operands)
    return np.asarray(y), np.asarray(g)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _vjp(fn, static, x, ct, *operands):
    y, vjp = jax.vjp(lambda v: fn(v, *operands, **dict(static)), x)
    return y, vjp(ct.astype(y.dtype))[0]


def _multilevel_finest(p2, coarser, rois, batch, **static):
    return jaxpool.multilevel_roi_align([p2, *coarser], rois, batch, **static)


def _multi_scale_finest(p2, coarser, per_image, **static):
    return jaxpool.torch.multi_scale_roi_align([p2, *coarser], per_image, **static)


def cases(args: argparse.Namespace, channels: Callable[[tuple[int, int]], int]):
    """Per config and dtype, ``args.cases`` draws ``(config, dtype, x, boxes5)``, ``x`` with
    ``channels(output_size)`` channels."""
    rng = np.random.default_rng(args.seed)
    for config in CONFIGS:
        (height, width), out, scale, _, _ = config
        for dtype in ("float64", "float32"):
            for _ in range(args.cases):
                x = rng.standard_normal((2, channels(out), height, width)).astype(dtype)
                boxes = random_boxes(rng, args.boxes, height / scale, width / scale)
                batch = rng.integers(0, 2, args.boxes).astype(dtype)
                yield config, dtype, x, np.concatenate([batch[:, None], boxes.astype(dtype)], 1)


def check_roi_ops(args, tv, record) -> None:
    for config, dtype, x, boxes5 in cases(args, lambda out: 4):
        _, out, scale, ratio, aligned = config
        rois, batch = boxes5[:, 1:], boxes5[:, 0].astype(np.int32)
        ct = np.random.default_rng(1).standard_normal((len(rois), x.shape[1], *out)).astype(dtype)
        mode = "half_pixel_for_nn" if aligned else "asymmetric"

        static = dict(spatial_scale=scale, sampling_ratio=ratio, aligned_mode=mode)
        y, g = ours(jaxpool.roi_align, x, ct, rois, batch, output_size=out, **static)
        ref = reference.roi_align(x, rois, batch, out, **static)
        # torchvision's adaptive sampling is any ratio <= 0; the binder takes it as such.
        tv_ratio = ratio if ratio > 0 else -1
        kw = dict(output_size=out, spatial_scale=scale, sampling_ratio=tv_ratio, aligned=aligned)
        by, bg = ours(jaxpool.torch.roi_align, x, ct, boxes5, **kw)
        pool = dict(output_size=out, spatial_scale=scale)
        py, pg = ours(jaxpool.roi_pool, x, ct, boxes5, **pool)
        bpy, bpg = ours(jaxpool.torch.roi_pool, x, ct, boxes5, **pool)
        pool_ref, argmax = reference.torchvision_roi_pool(x, boxes5, out, scale)
        if tv is None:
            record("roi_align", dtype, (y, ref), None)
            record("torch.roi_align", dtype, (by, ref), None)
            record("roi_pool", dtype, (py, pool_ref), None)
            record("torch.roi_pool", dtype, (bpy, pool_ref), None)
            continue
        ty, tg = tv(tv.ops.roi_align, x, ct, boxes5, **kw)
        record("roi_align", dtype, (y, ty), (g, tg))
        record("torch.roi_align", dtype, (by, ty), (bg, tg))
        record("reference.roi_align", dtype, (ref, ty), None)

        ty, tg = tv(tv.ops.roi_pool, x, ct, boxes5, **pool)
        record("roi_pool", dtype, (py, ty), (pg, tg))
        record("torch.roi_pool", dtype, (bpy, ty), (bpg, tg))
        pool_grad = reference.torchvision_roi_pool_backward(ct, boxes5, argmax, x.shape)
        record("reference.torchvision_roi_pool", dtype, (pool_ref, ty), (pool_grad, tg))


def check_ps_ops(args, tv, record) -> None:
    for config, dtype, x, boxes5 in cases(args, lambda out: 2 * out[0] * out[1]):
        _, out, scale, ratio, _ = config
        rois, batch = boxes5[:, 1:], boxes5[:, 0].astype(np.int32)
        depth = 2
        ct = np.random.default_rng(2).standard_normal((len(rois), depth, *out)).astype(dtype)

        static = dict(output_size=out, spatial_scale=scale, sampling_ratio=ratio)
        y, g = ours(jaxpool.psroi_align, x, ct, rois, batch, **static)
        ref = reference.ps_roi_align(x, rois, batch, out, spatial_scale=scale, sampling_ratio=ratio)
        kw = dict(output_size=out, spatial_scale=scale, sampling_ratio=ratio if ratio > 0 else -1)
        by, bg = ours(jaxpool.torch.ps_roi_align, x, ct, boxes5, **kw)
        pool = dict(output_size=out, spatial_scale=scale)
        py, pg = ours(jaxpool.torch.ps_roi_pool, x, ct, boxes5, **pool)
        pool_ref = reference.torchvision_ps_roi_pool(x, boxes5, out, scale)
        if tv is None:
            record("ps_roi_align", dtype, (y, ref), None)
            record("torch.ps_roi_align", dtype, (by, ref), None)
            record("ps_roi_pool", dtype, (py, pool_ref), None)
            continue
        ty, tg = tv(tv.ops.ps_roi_align, x, ct, boxes5, **kw)
        record("ps_roi_align", dtype, (y, ty), (g, tg))
        record("torch.ps_roi_align", dtype, (by, ty), (bg, tg))
        record("reference.ps_roi_align", dtype, (ref, ty), None)

        ty, tg = tv(tv.ops.ps_roi_pool, x, ct, boxes5, **pool)
        record("ps_roi_pool", dtype, (py, ty), None)
        record(PS_ROI_POOL_GRADIENT, dtype, None, (pg, tg))
        pool_grad = reference.torchvision_ps_roi_pool_backward(ct, boxes5, x.shape, out, scale)
        record("reference.torchvision_ps_roi_pool", dtype, (pool_ref, ty), (pool_grad, tg))


def check_multiscale(args, tv, record) -> None:
    """``MultiScaleRoIAlign`` on a 4-level pyramid of two 256 x 320 images, boxes of 8 to 512
    pixels: every level receives boxes."""
    rng = np.random.default_rng(args.seed + 1)
    image = (256, 320)
    scales = (1 / 4, 1 / 8, 1 / 16, 1 / 32)
    for dtype in ("float64", "float32"):
        for ratio in (2, 0):
            for _ in range(args.cases):
                levels = [
                    rng.standard_normal((2, 8, int(image[0] * s), int(image[1] * s))).astype(dtype)
                    for s in scales
                ]
                size = np.exp(rng.uniform(np.log(8), np.log(512), (2, args.boxes)))
                x1 = rng.uniform(-32, image[1], (2, args.boxes))
                y1 = rng.uniform(-32, image[0], (2, args.boxes))
                per_image = [
                    np.stack([x1[i], y1[i], x1[i] + size[i], y1[i] + size[i] * 0.75], 1).astype(
                        dtype
                    )
                    for i in range(2)
                ]
                rois = np.concatenate(per_image)
                batch = np.repeat(np.arange(2, dtype=np.int32), args.boxes)
                ct = rng.standard_normal((len(rois), 8, 7, 7)).astype(dtype)
                kw = dict(spatial_scales=scales, sampling_ratio=ratio, aligned_mode="asymmetric")
                ref = reference.multilevel_roi_align(levels, rois, batch, 7, **kw)
                # The gradient in the finest level, the one ``x`` that both sides return.
                y, g = ours(
                    _multilevel_finest, levels[0], ct, levels[1:], rois, batch, output_size=7, **kw
                )
                by, bg = ours(
                    _multi_scale_finest,
                    levels[0],
                    ct,
                    levels[1:],
                    per_image,
                    image_shapes=(image, image),
                    output_size=7,
                    sampling_ratio=ratio if ratio > 0 else -1,
                )
                if tv is None:
                    record("multi_scale_roi_align", dtype, (y, ref), None)
                    record("torch.multi_scale_roi_align", dtype, (by, ref), None)
                    continue
                pooler = tv.ops.MultiScaleRoIAlign(["p2", "p3", "p4", "p5"], 7, ratio)

                def run(p2, boxes, levels=levels, pooler=pooler):
                    rest = [tv.torch.tensor(v, device=tv.device) for v in levels[1:]]
                    maps = dict(zip(["p2", "p3", "p4", "p5"], [p2, *rest]))
                    return pooler(maps, boxes, [image, image])

                ty, tg = tv(run, levels[0], ct, per_image)
                record("multi_scale_roi_align", dtype, (y, ty), (g, tg))
                record("torch.multi_scale_roi_align", dtype, (by, ty), (bg, tg))
                record("reference.multilevel_roi_align", dtype, (ref, ty), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=4, help="random draws per config and dtype")
    parser.add_argument("--boxes", type=int, default=24, help="boxes per draw")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--oracle", choices=("torchvision", "reference"), default="torchvision")
    parser.add_argument("--json", metavar="PATH", help="write the summary here")
    args = parser.parse_args(argv)
    tv = Torchvision() if args.oracle == "torchvision" else None
    where = tv.where if tv else "tests/reference.py (dry run)"
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; oracle: {where}")
    summary: dict[str, dict[str, Any]] = {}

    def record(op: str, dtype: str, values, grads) -> None:
        row = summary.setdefault(
            f"{op} / {dtype}",
            {
                "cases": 0,
                "value_abs": 0.0,
                "value_rel": 0.0,
                "grad_abs": 0.0,
                "grad_rel": 0.0,
                "cases_over_tolerance": 0,
            },
        )
        row["cases"] += 1
        worst = 0.0
        for kind, pair in (("value", values), ("grad", grads)):
            if pair is None:
                continue
            diff, rel = stats(*pair)
            row[f"{kind}_abs"] = max(row[f"{kind}_abs"], diff)
            row[f"{kind}_rel"] = max(row[f"{kind}_rel"], rel)
            worst = max(worst, rel)
        row["cases_over_tolerance"] += worst > TOLERANCE[dtype]

    def report() -> list[str]:
        """Prints the table and writes the JSON of the ops checked so far; returns the failed."""
        failed = [
            key
            for key, row in summary.items()
            if row["cases_over_tolerance"] and not key.startswith(EXPECTED)
        ]
        print(
            f"\n| op / dtype | cases | max abs diff (values) | relative | max abs diff (grad) "
            f"| relative | cases over {TOLERANCE} |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for key, r in summary.items():
            print(
                f"| {key} | {r['cases']} | {r['value_abs']:.3g} | {r['value_rel']:.3g} | "
                f"{r['grad_abs']:.3g} | {r['grad_rel']:.3g} | {r['cases_over_tolerance']} |",
                flush=True,
            )
        if args.json:
            meta = {"jax": jax.__version__, "device": jax.devices()[0].device_kind, "oracle": where}
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "tolerance": TOLERANCE, "ops": summary}, f, indent=1)
        return failed

    # The results so far are reported after each part, so that a run stopped by a time limit
    # keeps what it checked.
    for part in (check_roi_ops, check_ps_ops, check_multiscale):
        part(args, tv, record)
        failed = report()
    print("\nFAILED: " + ", ".join(failed) if failed else "\nevery op agrees")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
