"""max_unpool placed by the scatter (no window stated) against the dense placement of the
window stated (``kernel=...``), forward and gradient, on whatever device JAX uses.

Each row times the two programs in alternation, the same number of times, and prints the
medians as a Markdown table (milliseconds): ``python3 benchmarks/unpool_windows.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpool

# (layout, input shape, max_pool's window): windows that tile the map, overlapping ones
# (stride 2 and stride 1), 1-D and 3-D.
CASES = [
    ("NCX", (8, 64, 64, 64), dict(kernel=2)),
    ("NXC", (8, 64, 64, 64), dict(kernel=2)),
    ("NCX", (8, 64, 64, 64), dict(kernel=3, strides=2, pads_begin=1, pads_end=1)),
    ("NXC", (8, 64, 64, 64), dict(kernel=3, strides=2, pads_begin=1, pads_end=1)),
    ("NCX", (8, 32, 56, 56), dict(kernel=3, strides=1, pads_begin=1, pads_end=1)),
    ("NCX", (4, 16, 16, 32, 32), dict(kernel=2)),
    ("NCX", (16, 64, 1024), dict(kernel=2)),
]


def _unpool(y, i, shape, options):
    return jaxpool.max_unpool(y, i, shape, **options)


def _grad(unpool, y, i, ct):
    return jax.vjp(lambda v: unpool(v, i), y)[1](ct)[0]


def paired(calls, reps):
    """Median milliseconds of each ``(fn, args)``, timed in alternation after a warm-up."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))
    times = [[] for _ in calls]
    for _ in range(reps):
        for k, (fn, args) in enumerate(calls):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[k].append(time.perf_counter() - start)
    return [float(np.median(t)) * 1e3 for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=21)
    reps = parser.parse_args().reps
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}")
    print("| layout | shape | window | combine | forward: scatter / window | gradient: idem |")
    print("| --- | --- | --- | --- | --- | --- |")
    for fmt, shape, window in CASES:
        x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
        y, i = jaxpool.max_pool(x, **window, return_indices=True, axis=2, data_format=fmt)
        ct = jnp.asarray(rng.standard_normal(shape), jnp.float32)
        for combine in ("sum", "max", "torch"):
            calls = []
            for stated in ({}, window):
                options = dict(axis=2, combine=combine, data_format=fmt, **stated)
                unpool = functools.partial(_unpool, shape=shape, options=options)
                grad = functools.partial(_grad, unpool)
                calls += [(jax.jit(unpool), (y, i)), (jax.jit(grad), (y, i, ct))]
            fs, gs, fw, gw = paired(calls, reps)
            attrs = ", ".join(f"{k}={v}" for k, v in window.items())
            print(
                f"| {fmt} | {shape} | {attrs} | {combine} | {fs:.2f} / {fw:.2f} | "
                f"{gs:.2f} / {gw:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
