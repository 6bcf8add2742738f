"""Every region op on sharded feature maps, on the portable program and on the CPU's.

Each row of ``regions.py`` (the core ops; the ``jaxpool.torch`` rows bind them) runs in one
program per layout: the outputs of the row's variants in that layout and their vector-Jacobian
product in the maps.  NCX runs on both programs (``dispatch.force``); in NXC the programs are
one.  Compiled for two meshes of the 8 host devices, with the boxes replicated:

* ``channels``: the maps sharded 8 ways by channel.  No collective at all, forward or
  gradient, except where an output channel sums input channels that lie in several shards
  (``Row.channel_sums``: position-sensitive bilinear pooling over several spatial bins, whose
  docstring says that XLA gathers them); there the results are checked.
* ``images x channels``: a 2 x 4 mesh, the maps sharded by image and by channel.  Each image's
  shard pools its own boxes, and the outputs are added: an all-reduce, and no all-gather or
  all-to-all.

Every sharded result equals the unsharded one.
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

CASES = [
    pytest.param(row, fmt, program, id=f"{row.name}-{fmt}-{program or 'any'}")
    for row in regions.ROWS
    if "NXC" in row.layouts
    for fmt, program in PROGRAMS
] + [
    # Adaptive sampling shares the reads of a fixed ratio, and compiles slowly: once, as GPUs
    # and TPUs run it.
    pytest.param(regions.ADAPTIVE_AVERAGE, "NCX", "portable", id="roi_align_adaptive_avg-NCX")
]


def _program(row: regions.Row, data_format: str):
    """``f(*maps, *boxes) -> (outputs, cotangents of the maps)``."""
    levels = len(row.maps)

    def f(*args):
        maps, boxes = args[:levels], args[levels:]
        out, pullback = jax.vjp(lambda m: row.outputs(m, boxes, data_format), maps)
        return out, pullback(out)

    return f


def _spec(mesh_axes: tuple[str, ...], data_format: str) -> P:
    images = "n" if "n" in mesh_axes else None
    return P(images, "c") if data_format == "NCX" else P(images, None, None, "c")


@pytest.mark.parametrize("row,data_format,program", CASES)
def test_sharded_maps(row, data_format, program):
    devices = jax.devices()
    assert len(devices) >= 8, "conftest.py provides 8 host devices"
    rng = np.random.default_rng(4)
    maps = [rng.standard_normal((IMAGES, CHANNELS, h, w)).astype(np.float32) for h, w in row.maps]
    maps = [m if data_format == "NCX" else np.moveaxis(m, 1, -1) for m in maps]
    boxes = row.boxes(rng, BOXES, IMAGES)
    f = _program(row, data_format)
    with dispatch.force(program) if program else contextlib.nullcontext():
        want = jax.jit(f)(*maps, *boxes)
        for name, shape in MESHES.items():
            axes = ("n", "c") if len(shape) == 2 else ("c",)
            mesh = Mesh(np.array(devices[:8]).reshape(shape), axes)
            sharded = [
                jax.device_put(m, NamedSharding(mesh, _spec(axes, data_format))) for m in maps
            ]
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
