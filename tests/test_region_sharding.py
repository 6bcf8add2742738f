"""Every region op on sharded feature maps, on the portable program and on the CPU's.

Each row of ``regions.py`` (the core ops; the ``jaxpool.torch`` rows bind them) runs in NCX on
both programs (``dispatch.force``) and in NXC, whose programs are one: one of the row's
variants (dealt out over the three) and its vector-Jacobian product in the maps.  A sharding is
a property of how an op reads the map, which its variants share: each layout and program is
checked per op, not per variant.  The boxes are replicated, and every sharded result equals
the unsharded one.

* ``channels`` (every layout and program): the maps sharded 8 ways by channel.  No collective,
  forward or gradient, except where an output channel sums input channels of several shards
  (``Row.channel_sums``, position-sensitive pooling over several bins: XLA gathers them).
* ``images x channels`` (one layout and program per op, in turns, :data:`CASES`): a 2 x 4 mesh.
  Each image's shard pools its own boxes and the outputs are added: an all-reduce only.
"""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest
import regions
from cases import COLLECTIVE
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxpool._src import dispatch

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

CHANNELS = 32
IMAGES = 2
BOXES = 6
# (layout, program forced): NXC runs the same program on every platform.
PROGRAMS = (("NCX", "portable"), ("NCX", "cpu"), ("NXC", None))
MESHES = {"channels": (8,), "images x channels": (2, 4)}

SHARDED_ROWS = [row for row in regions.ROWS if "NXC" in row.layouts]
CASES = [
    pytest.param(
        row,
        fmt,
        program,
        row.variants[k % len(row.variants)],
        ("channels", "images x channels") if k == i % len(PROGRAMS) else ("channels",),
        id=f"{row.name}-{fmt}-{program or 'any'}",
    )
    for i, row in enumerate(SHARDED_ROWS)
    for k, (fmt, program) in enumerate(PROGRAMS)
] + [
    # Adaptive sampling shares the reads of a fixed ratio, and compiles slowly: once, as GPUs
    # and TPUs run it.
    pytest.param(
        regions.ADAPTIVE_AVERAGE,
        "NCX",
        "portable",
        regions.ADAPTIVE_AVERAGE.variants[0],
        tuple(MESHES),
        id="roi_align_adaptive_avg-NCX",
    )
]


def _program(row: regions.Row, data_format: str, variant: dict):
    """``f(*maps, *boxes) -> (output, cotangents of the maps)``."""
    levels = len(row.maps)

    def f(*args):
        maps, boxes = args[:levels], args[levels:]
        out, pullback = jax.vjp(lambda m: row.call(m, boxes, data_format, **variant), maps)
        return out, pullback(out)

    return f


@pytest.mark.parametrize("row,data_format,program,variant,meshes", CASES)
def test_sharded_maps(row, data_format, program, variant, meshes):
    devices = jax.devices()
    assert len(devices) >= 8, "conftest.py provides 8 host devices"
    rng = np.random.default_rng(4)
    maps = [rng.standard_normal((IMAGES, CHANNELS, h, w)).astype(np.float32) for h, w in row.maps]
    maps = [m if data_format == "NCX" else np.moveaxis(m, 1, -1) for m in maps]
    boxes = row.boxes(rng, BOXES, IMAGES)
    f = _program(row, data_format, variant)
    with dispatch.force(program) if program else contextlib.nullcontext():
        want = jax.jit(f)(*maps, *boxes)
        for name in meshes:
            shape = MESHES[name]
            axes = ("n", "c") if len(shape) == 2 else ("c",)
            mesh = Mesh(np.array(devices[:8]).reshape(shape), axes)
            images = "n" if "n" in axes else None
            spec = P(images, "c") if data_format == "NCX" else P(images, None, None, "c")
            sharded = [jax.device_put(m, NamedSharding(mesh, spec)) for m in maps]
            replicated = [jax.device_put(b, NamedSharding(mesh, P())) for b in boxes]
            compiled = jax.jit(f).lower(*sharded, *replicated).compile()
            found = sorted(set(COLLECTIVE.findall(compiled.as_text())))
            if name == "channels" and not row.channel_sums:
                assert not found, f"{name}: {found}"
            elif name != "channels":
                assert set(found) <= {"all-reduce"}, f"{name}: {found}"
            got = compiled(*sharded, *replicated)
            for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                scale = max(1.0, float(np.max(np.abs(w), initial=0)))
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-6 * scale, err_msg=name)
