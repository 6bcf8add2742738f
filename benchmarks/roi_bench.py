"""Benchmark of ``jaxpool.roi_align`` on a Mask R-CNN box head, on the CPU.

Workload: features ``2 x 256 x 200 x 272`` (a P2 level of an 800 x 1088 image), 1000 boxes,
``7 x 7`` bins, ``sampling_ratio=2``, ``aligned_mode="half_pixel_for_nn"`` (torchvision's
``aligned=True``), ``spatial_scale=1/4``; forward, and forward+backward (the gradient in the
features of ``sum(y * ct)``).

Contenders, interleaved round by round in a rotating order after a warm-up (a slow moment of
a shared machine hits all of them alike); the reported time is the median over rounds and the
reported ratio the median over rounds of the per-round ratio ``jaxpool / contender``:

* ``jaxpool-NCX`` / ``jaxpool-NXC``: ``jaxpool.roi_align`` on features in either layout (the
  output in the same layout);
* ``plain-jax``: the textbook JAX program (a gather of the four neighbours of every sample
  from the NCX features by advanced indexing, weighted and averaged), differentiated by JAX;
* ``openvino``: the OpenVINO CPU runtime's ROIAlign-9, f32, two threads, forward only.

Run ``python benchmarks/roi_bench.py [--rounds 7] [--boxes 1000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxpool  # noqa: E402

OUT = 7
RATIO = 2
SCALE = 0.25


def plain_roi_align(x: jax.Array, rois: jax.Array, batch: jax.Array) -> jax.Array:
    """The textbook JAX ROIAlign (``aligned=True``, fixed sampling ratio) on NCX features."""
    _, _, height, width = x.shape
    x1, y1, x2, y2 = (rois[:, i] * SCALE - 0.5 for i in range(4))
    offsets = (jnp.arange(OUT)[:, None] + (jnp.arange(RATIO) + 0.5) / RATIO).reshape(-1)

    def axis(start, end, length):
        v = start[:, None] + offsets[None, :] * ((end - start) / OUT)[:, None]
        inside = (v >= -1) & (v <= length)
        v = jnp.clip(v, 0, length - 1)
        low = jnp.floor(v).astype(jnp.int32)
        high = jnp.minimum(low + 1, length - 1)
        frac = v - low
        return low, high, jnp.where(inside, 1 - frac, 0), jnp.where(inside, frac, 0)

    y_low, y_high, wy_low, wy_high = axis(y1, y2, height)
    x_low, x_high, wx_low, wx_high = axis(x1, x2, width)
    b = batch[:, None, None]
    total = 0
    for yi, wy in ((y_low, wy_low), (y_high, wy_high)):
        for xi, wx in ((x_low, wx_low), (x_high, wx_high)):
            values = x[b, :, yi[:, :, None], xi[:, None, :]]  # (R, S, S, C)
            total = total + (wy[:, :, None] * wx[:, None, :])[..., None] * values
    r, c = total.shape[0], total.shape[-1]
    pooled = total.reshape(r, OUT, RATIO, OUT, RATIO, c).mean((2, 4))
    return pooled.transpose(0, 3, 1, 2)


def workload(boxes: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 256, 200, 272), dtype=np.float32)
    corner = rng.uniform(0, [1088, 800], (boxes, 2))
    size = rng.uniform(16, 400, (boxes, 2))
    rois = np.concatenate([corner, np.minimum(corner + size, [1088, 800])], 1)
    batch = rng.integers(0, 2, boxes).astype(np.int32)
    return x, rois.astype(np.float32), batch


def jaxpool_fn(data_format: str):
    def f(x, rois, batch):
        y = jaxpool.roi_align(
            x,
            rois,
            batch,
            OUT,
            spatial_scale=SCALE,
            sampling_ratio=RATIO,
            aligned_mode="half_pixel_for_nn",
            data_format=data_format,
        )
        return y

    return f


def compiled(f, x, rois, batch, backward: bool):
    if backward:
        ct = jnp.ones(jax.eval_shape(f, x, rois, batch).shape, jnp.float32)

        def g(x, rois, batch):
            return jax.vjp(lambda a: f(a, rois, batch), x)[1](ct)[0]

        fn = g
    else:
        fn = f
    start = time.perf_counter()
    exe = jax.jit(fn).lower(x, rois, batch).compile()
    seconds = time.perf_counter() - start
    return (lambda: exe(x, rois, batch).block_until_ready()), seconds


def openvino_fn(x, rois, batch):
    import openvino as ov
    import openvino.opset9 as ops

    xp = ops.parameter(list(x.shape), ov.Type.f32)
    rp = ops.parameter(list(rois.shape), ov.Type.f32)
    bp = ops.parameter([rois.shape[0]], ov.Type.i32)
    node = ops.roi_align(
        xp,
        rp,
        bp,
        pooled_h=OUT,
        pooled_w=OUT,
        sampling_ratio=RATIO,
        spatial_scale=SCALE,
        mode="avg",
        aligned_mode="half_pixel_for_nn",
    )
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2}
    model = ov.Core().compile_model(ov.Model(node.outputs(), [xp, rp, bp]), "CPU", config)
    request = model.create_infer_request()
    return lambda: request.infer([x, rois, batch])


def run(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    names = list(contenders)
    for name in names:  # warm-up
        contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for k in range(rounds):
        order = names[k % len(names) :] + names[: k % len(names)]
        for name in order:
            time.sleep(0.05)
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times


def report(title: str, times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    print(title)
    result = {}
    for name, values in times.items():
        ratios = {
            other: statistics.median(a / b for a, b in zip(times["jaxpool-NCX"], theirs))
            for other, theirs in times.items()
            if other != "jaxpool-NCX"
        }
        result[name] = {"median_ms": 1e3 * statistics.median(values)}
        line = f"  {name:12s} {result[name]['median_ms']:9.1f} ms"
        if name != "jaxpool-NCX":
            line += f"   jaxpool-NCX / {name} = {ratios[name]:.2f}"
            result[name]["jaxpool_ncx_ratio"] = ratios[name]
        print(line)
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--boxes", type=int, default=1000)
    parser.add_argument("--json", help="write the medians and ratios to this file")
    args = parser.parse_args(argv)

    x, rois, batch = workload(args.boxes)
    x_ncx, x_nxc = jnp.asarray(x), jnp.asarray(np.moveaxis(x, 1, -1))
    r, b = jnp.asarray(rois), jnp.asarray(batch)
    results = {}
    for backward in (False, True):
        contenders = {}
        for name, f, features in (
            ("jaxpool-NCX", jaxpool_fn("NCX"), x_ncx),
            ("jaxpool-NXC", jaxpool_fn("NXC"), x_nxc),
            ("plain-jax", plain_roi_align, x_ncx),
        ):
            contenders[name], seconds = compiled(f, features, r, b, backward)
            print(f"  compiled {name} ({'fwd+bwd' if backward else 'fwd'}) in {seconds:.1f} s")
        if not backward:
            contenders["openvino"] = openvino_fn(x, rois, batch)
        title = "forward+backward" if backward else "forward"
        results[title] = report(f"{title}, {args.boxes} boxes:", run(contenders, args.rounds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
