"""The ROI family's two programs for an NCX map, timed against each other and against NXC.

Every ROI op reads its map channels-last, so an NCX map is transposed first and the pooled
bins are transposed back.  ``jaxpool._src.dispatch`` chooses the program of those transposes
per platform: on a CPU a loop that writes the transposed array out (a plain transpose is
fused into the gathers there, which then read with a stride of ``H * W``), elsewhere a plain
transpose.  This benchmark times both programs, on the platform it runs on, in the same
rounds as the same op on the NXC map, on the Mask R-CNN workloads of ``detection.py``:

* ``box/fwd``, ``box/fwd+bwd``, ``mask/fwd``: ``multilevel_roi_align`` of the box head (1000
  boxes to 7 x 7) and the mask head (100 boxes to 14 x 14), ``sampling_ratio=2``;
* ``P2-one-image/fwd``: ``roi_align`` of 500 boxes on the first image's P2 level alone
  (``1 x 256 x 200 x 272``), the one-image path of the transposition.

Contenders ``NCX portable`` (the plain transpose), ``NCX cpu`` (the loop) and ``NXC``; the
results are their medians and the paired ratios to NXC (the target of ``detection.py`` is
NCX at most 1.3x NXC).

    python3 benchmarks/layouts.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402  (puts the repository root on sys.path, imports jax and jaxpool)
import detection  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxpool  # noqa: E402
from jaxpool._src import dispatch  # noqa: E402

PROGRAMS = ("portable", "cpu")


def workloads(data: dict, scale: detection.Scale) -> dict[str, tuple[dict[str, Callable], Any]]:
    """Name -> (layout -> program, arguments per layout)."""
    pyramid = data["pyramid"]
    found: dict[str, tuple[dict[str, Callable], Any]] = {}
    for head in scale.heads:
        rois = jnp.asarray(data["rois"][: head.boxes])
        batch = jnp.asarray(data["batch"][: head.boxes])
        for mode in ("fwd", "fwd+bwd"):
            if head.name == "mask" and mode == "fwd+bwd":
                continue
            fns, args = {}, {}
            for layout in detection.LAYOUTS:
                fn = detection.multilevel_fn(
                    head.output_size, pyramid.scales, 2, layout, data["canonical_size"]
                )
                a = (data[layout], rois, batch)
                if mode == "fwd+bwd":
                    out = jax.eval_shape(fn, *a)
                    fn, a = detection.with_backward(fn), (*a, jnp.ones(out.shape, out.dtype))
                fns[layout], args[layout] = fn, a
            found[f"{head.name}/{mode}"] = (fns, args)
    count = min(500, len(data["rois"]))
    rois = jnp.asarray(data["rois"][:count])
    zeros = jnp.zeros(count, jnp.int32)
    fns, args = {}, {}
    for layout in detection.LAYOUTS:
        fns[layout] = detection.roi_align_fn(7, pyramid.scales[0], 2, layout)
        args[layout] = (data[layout][0][:1], rois, zeros)
    found["P2-one-image/fwd"] = (fns, args)
    return found


def run(name: str, fns: dict, args: dict, timing: dict) -> dict:
    contenders = []
    for program in PROGRAMS:
        with dispatch.force(program):
            contenders.append(
                bench.jax_contender(f"NCX {program}", fns["NCX"], *args["NCX"], compiles=1)
            )
    contenders.append(bench.jax_contender("NXC", fns["NXC"], *args["NXC"], compiles=1))
    outs = [c.outputs for c in contenders]
    err = max(
        float(jnp.max(jnp.abs(jnp.asarray(a) - jnp.asarray(b))))
        for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1]), strict=True)
    )
    bench.interleaved(contenders, **timing)
    nxc = contenders[-1]
    row = {
        "workload": name,
        "programs_max_abs_diff": err,
        "median_ms": {c.name: 1e3 * statistics.median(c.times) for c in contenders},
        "x_NXC": {c.name: bench.paired_ratio(c, nxc) for c in contenders[:-1]},
        "compile_s": {c.name: c.compile_s for c in contenders},
    }
    cells = "  ".join(
        f"{c.name} {row['median_ms'][c.name]:.3f} ms"
        + (f" ({row['x_NXC'][c.name]:.2f}x NXC)" if c is not nxc else "")
        for c in contenders
    )
    print(f"{name:<18} {cells}  |portable - cpu| {err:.1e}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="detection.py's quick scale")
    parser.add_argument("--json", metavar="PATH", help="where to write the results")
    parser.add_argument("--reps", type=int, default=7, help="timed rounds")
    bench.add_timing_options(parser)
    args = parser.parse_args(argv)
    gpu = jax.default_backend() == "gpu"
    if args.min_stretch_ms is None:
        args.min_stretch_ms = 20.0 if gpu else 2.0
    scale = detection.SCALES["quick" if args.quick else "full"]
    data = detection.build_data(scale, openvino=False)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; jaxpool {jaxpool.__version__}")
    rows = []
    for name, (fns, fargs) in workloads(data, scale).items():
        rows.append(run(name, fns, fargs, bench.timing(args)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": bench.environment(None), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
