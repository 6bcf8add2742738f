"""Benchmark of ``jaxpool.roi_align`` on a Mask R-CNN box head, on the CPU.

Workload: features ``2 x 256 x 200 x 272`` (a P2 level of an 800 x 1088 image), 1000 boxes,
``7 x 7`` bins, ``sampling_ratio=2`` (``--sampling-ratio``; 0 is adaptive sampling),
``aligned_mode="half_pixel_for_nn"`` (torchvision's ``aligned=True``), ``spatial_scale=1/4``;
forward, and forward+backward (the gradient in the features of ``sum(y * ct)``).  Each JAX
contender's compile time (``lower`` + ``compile``) is printed with its time.

The method is ``bench.py``'s: the contenders run interleaved round by round in a rotating
order after a warm-up (a slow moment of a shared machine hits all of them alike), each timed
stretch after 50 ms of idle time; JAX contenders are compiled ahead of time.  The reported time
is the median over rounds and the reported ratio the median over rounds of the per-round ratio
``jaxpool-NCX / contender``:

* ``jaxpool-NCX`` / ``jaxpool-NXC``: ``jaxpool.roi_align`` on features in either layout (the
  output in the same layout);
* ``plain-jax``: the textbook JAX program (a gather of the four neighbours of every sample
  from the NCX features by advanced indexing, weighted and averaged), differentiated by JAX;
  a fixed sampling ratio only (it is left out with ``--sampling-ratio 0``);
* ``openvino``: the OpenVINO CPU runtime's ROIAlign-9, f32, two threads, forward only.

Run ``python benchmarks/roi_bench.py [--rounds 7] [--boxes 1000] [--sampling-ratio 2]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402  (puts the repository root on sys.path, imports jax and jaxpool)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from bench import Contender  # noqa: E402

import jaxpool  # noqa: E402

OUT = 7
RATIO = 2
SCALE = 0.25


def plain_roi_align(x: jax.Array, rois: jax.Array, batch: jax.Array) -> jax.Array:
    """The textbook JAX ROIAlign (``aligned=True``, sampling ratio ``RATIO``) on NCX features."""
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


def roi_align_fn(data_format: str, ratio: int = RATIO):
    def f(x, rois, batch):
        y = jaxpool.roi_align(
            x,
            rois,
            batch,
            OUT,
            spatial_scale=SCALE,
            sampling_ratio=ratio,
            aligned_mode="half_pixel_for_nn",
            data_format=data_format,
        )
        return y

    return f


def roi_contender(name: str, f, x, rois, batch, backward: bool) -> Contender:
    """``f``, or its gradient in the features of ``sum(y * ct)``, compiled ahead of time."""
    if backward:
        ct = jnp.ones(jax.eval_shape(f, x, rois, batch).shape, jnp.float32)

        def g(x, rois, batch):
            return jax.vjp(lambda a: f(a, rois, batch), x)[1](ct)[0]

        return bench.jax_contender(name, g, x, rois, batch, compiles=1)
    return bench.jax_contender(name, f, x, rois, batch, compiles=1)


def openvino_contender(x, rois, batch, ratio: int = RATIO) -> Contender:
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
        sampling_ratio=ratio,
        spatial_scale=SCALE,
        mode="avg",
        aligned_mode="half_pixel_for_nn",
    )
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": bench.THREADS}
    model = ov.Core().compile_model(ov.Model(node.outputs(), [xp, rp, bp]), "CPU", config)
    request = model.create_infer_request()
    out = request.infer([x, rois, batch])
    io = bench.nbytes([x, rois, batch]) + sum(np.asarray(r).nbytes for r in out.values())
    return Contender("openvino", lambda: request.infer([x, rois, batch]), io)


def report(title: str, contenders: list[Contender]) -> dict[str, dict[str, float]]:
    """Prints and returns each contender's median, compile time (JAX contenders) and paired
    ratio ``jaxpool-NCX / it``."""
    print(title)
    ref = contenders[0]
    result = {}
    for c in contenders:
        result[c.name] = {"median_ms": 1e3 * statistics.median(c.times)}
        line = f"  {c.name:12s} {result[c.name]['median_ms']:9.1f} ms"
        if c.compile_s is not None:
            result[c.name]["compile_s"] = c.compile_s
            line += f"   compile {c.compile_s:5.2f} s"
        if c is not ref:
            ratio = bench.paired_ratio(ref, c)
            line += f"   {ref.name} / {c.name} = {ratio:.2f}"
            result[c.name]["jaxpool_ncx_ratio"] = ratio
        print(line)
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--boxes", type=int, default=1000)
    parser.add_argument(
        "--sampling-ratio",
        type=int,
        default=RATIO,
        help=f"samples per bin and axis of jaxpool and OpenVINO, 0 for adaptive (default {RATIO})",
    )
    parser.add_argument("--json", help="write the medians and ratios to this file")
    args = parser.parse_args(argv)

    x, rois, batch = workload(args.boxes)
    x_ncx, x_nxc = jnp.asarray(x), jnp.asarray(bench.to_layout(x, "NXC"))
    r, b = jnp.asarray(rois), jnp.asarray(batch)
    results = {}
    for backward in (False, True):
        contenders = []
        programs = [
            ("jaxpool-NCX", roi_align_fn("NCX", args.sampling_ratio), x_ncx),
            ("jaxpool-NXC", roi_align_fn("NXC", args.sampling_ratio), x_nxc),
        ]
        if args.sampling_ratio == RATIO:
            programs.append(("plain-jax", plain_roi_align, x_ncx))
        for name, f, features in programs:
            c = roi_contender(name, f, features, r, b, backward)
            print(f"  compiled {name} ({'fwd+bwd' if backward else 'fwd'}) in {c.compile_s:.1f} s")
            contenders.append(c)
        if not backward:
            contenders.append(openvino_contender(x, rois, batch, args.sampling_ratio))
        bench.interleaved(contenders, rounds=args.rounds, warmup=1, settle_s=0.05)
        title = "forward+backward" if backward else "forward"
        title_of = f"{title}, {args.boxes} boxes, sampling_ratio={args.sampling_ratio}:"
        results[title] = report(title_of, contenders)
    if args.json:
        bench.write_json(results, args.json)


if __name__ == "__main__":
    main()
