"""Training-scale benchmark of jaxpool on an accelerator, bf16 and f32, with its targets.

The workloads of issue 22 at the sizes a training run pools (``--scale training``, the default
on a GPU); with the batch divided by 16 (``--scale cpu``, the per-sample sizes of a training run
at a batch a few CPU cores hold); or divided down to batch 2 and about an eighth of the spatial
size (``--scale tiny``, the default elsewhere), which runs every path on a CPU in a minute:

* stem max pool 256x64x112x112 k3 s2 p1, VGG 128x128x112x112 k2 s2, 3-D 8x64x32x112x112 k2 s2,
  1-D 256x256x4096 k4 s4, average pooling on the stem, adaptive max/avg 64x512x50x50 -> 16x16,
  global max/avg 256x2048x7x7 -> 1x1;
* in both layouts (NCX, NXC), in bf16 and f32, forward (values, and with indices where the
  op has them) and forward+backward;
* against ``lax.reduce_window`` (and its ``jax.grad``), ``jnp.max``/``jnp.mean`` for the global
  pools, PyTorch (CUDA where torch has it, else the CPU; channels-last for NXC) and the memory
  floor: a donated in-place ``x + 1`` copy timed in the same rounds (``bench.in_place_copy``);
* plus one training step of a Flax NNX ResNet-18 (bf16 compute) with Flax's pools
  (``nnx.max_pool``, ``jnp.mean``) against the same network with jaxpool's.

The method is ``bench.py``'s: every contender of a group runs in the same process, interleaved
round by round after a warm-up; JAX contenders are compiled ahead of time (compile time: the
median of ``--compiles`` compilations from cleared caches); a reported ratio is the median over
rounds of the per-round ratio.  ``--check`` compares every contender's outputs with jaxpool's:
max values and indices exactly, averages and gradients to the dtype's rounding (the inputs are
built so that no window holds two equal values, and the cotangents so that sums of them are
exact), and the two ResNet-18 variants' loss and updated parameters on one batch.

Run ``python3 benchmarks/training.py --help`` for the options; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402  (puts the repository root on sys.path, imports jax and jaxpool)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from bench import DTYPES, LAYOUTS, MODES, Contender, Target, Workload  # noqa: E402

import jaxpool  # noqa: E402
from jaxpool._src import dispatch  # noqa: E402

# (training-scale workload, its tiny twin): shapes are NCX, each also run channels-last.
WORKLOADS: list[tuple[Workload, Workload]] = [
    (
        Workload("stem", "max_pool", (256, 64, 112, 112), kernel=3, strides=2, pad=1),
        Workload("stem", "max_pool", (2, 64, 14, 14), kernel=3, strides=2, pad=1),
    ),
    (
        Workload("vgg", "max_pool", (128, 128, 112, 112), kernel=2, strides=2),
        Workload("vgg", "max_pool", (2, 128, 14, 14), kernel=2, strides=2),
    ),
    (
        Workload("3d", "max_pool", (8, 64, 32, 112, 112), kernel=2, strides=2),
        Workload("3d", "max_pool", (2, 64, 4, 14, 14), kernel=2, strides=2),
    ),
    (
        Workload("1d", "max_pool", (256, 256, 4096), kernel=4, strides=4),
        Workload("1d", "max_pool", (2, 256, 512), kernel=4, strides=4),
    ),
    (
        Workload("avg_stem", "avg_pool", (256, 64, 112, 112), kernel=3, strides=2, pad=1),
        Workload("avg_stem", "avg_pool", (2, 64, 14, 14), kernel=3, strides=2, pad=1),
    ),
    (
        Workload("adaptive_max", "adaptive_max_pool", (64, 512, 50, 50), output_size=16),
        Workload("adaptive_max", "adaptive_max_pool", (2, 512, 25, 25), output_size=8),
    ),
    (
        Workload("adaptive_avg", "adaptive_avg_pool", (64, 512, 50, 50), output_size=16),
        Workload("adaptive_avg", "adaptive_avg_pool", (2, 512, 25, 25), output_size=8),
    ),
    (
        Workload("global_max", "adaptive_max_pool", (256, 2048, 7, 7), output_size=1),
        Workload("global_max", "adaptive_max_pool", (2, 256, 7, 7), output_size=1),
    ),
    (
        Workload("global_avg", "adaptive_avg_pool", (256, 2048, 7, 7), output_size=1),
        Workload("global_avg", "adaptive_avg_pool", (2, 256, 7, 7), output_size=1),
    ),
]

# The ResNet-18 step: (batch, image side, classes) per scale.
RESNET = {"training": (256, 224, 1000), "cpu": (8, 112, 100), "tiny": (2, 32, 10)}

# --scale cpu divides the training batch by this.
CPU_BATCH_DIVISOR = 16

# Targets (issue 22).
FWD_X_FLOOR = 1.2
IDX_X_FLOOR = 1.25
BWD_VS_TORCH = 1.0
BWD_X_FLOOR = 1.5
RESNET_VS_FLAX = 1.0


def group_keys() -> list[str]:
    """The keys ``workload/layout/mode/dtype`` of every pooling group (``--only`` searches
    them), and ``resnet18/bf16`` for the training step."""
    keys = [
        f"{wl.name}/{layout}/{mode}/{dtype}"
        for wl, _ in WORKLOADS
        for dtype in DTYPES
        for layout in LAYOUTS
        for mode in MODES
    ]
    return keys + ["resnet18/bf16"]


# --------------------------------------------------------------------------------------------
# Inputs: no window holds two equal values, and sums of cotangents are exact.
# --------------------------------------------------------------------------------------------


def window_extents(wl: Workload) -> tuple[int, ...]:
    """Per spatial axis, the most consecutive positions one window (or adaptive bin) spans."""
    if wl.op in ("max_pool", "avg_pool"):
        return (wl.kernel,) * wl.nd
    out = []
    for n in wl.shape[2:]:
        o = wl.output_size
        out.append(max(-(-(i + 1) * n // o) - i * n // o for i in range(o)))
    return tuple(out)


def tie_free_input(wl: Workload, rng: np.random.Generator) -> np.ndarray:
    """An NCX float32 array, exact in bf16, in which no window holds two equal values.

    ``x = (codes * r + code) / 16``: ``code`` numbers the positions of a window by their
    residues modulo the window's extent on each axis (distinct within any window), ``r`` is a
    random integer, and ``|x * 16| < 256`` keeps every value an exact bf16 number.  So the
    argmax of every window is unique and every max op's values, indices and gradients are
    defined without a tie rule, in both dtypes.
    """
    extents = window_extents(wl)
    codes = math.prod(extents)
    code = np.zeros(wl.shape[2:], np.int32)
    for axis, (n, e) in enumerate(zip(wl.shape[2:], extents)):
        shape = [1] * wl.nd
        shape[axis] = n
        code = code * e + (np.arange(n, dtype=np.int32) % e).reshape(shape)
    bound = max(0, 256 // codes - 1)
    r = rng.integers(-bound, bound + 1, size=wl.shape, dtype=np.int32)
    x = (r * codes + code).astype(np.float32)
    x *= np.float32(1 / 16)
    return x


@functools.lru_cache(maxsize=1)  # the groups of one workload follow each other
def cached_input(wl: Workload) -> np.ndarray:
    x = tie_free_input(wl, np.random.default_rng(0))
    x.flags.writeable = False
    return x


def exact_cotangent(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Integers in [-8, 8] over 16: any sum of up to 16 of them is exact in bf16."""
    ct = rng.integers(-8, 9, size=shape, dtype=np.int32).astype(np.float32)
    ct *= np.float32(1 / 16)
    return ct


# --------------------------------------------------------------------------------------------
# --check: every contender's outputs against jaxpool's.
# --------------------------------------------------------------------------------------------

EPS = {"f32": 2.0**-22, "bf16": 2.0**-8}


def outputs_ncx(c: Contender, layout: str) -> list[np.ndarray]:
    """A contender's outputs as NumPy arrays in the logical NCX layout (float32 or ints)."""
    if c.name.startswith("torch"):
        return c.outputs
    outs = c.outputs
    outs = outs if isinstance(outs, tuple | list) else (outs,)
    res = []
    for o in outs:
        a = np.asarray(o)  # NumPy converts (no XLA program per shape)
        a = a.astype(np.float32) if jnp.issubdtype(a.dtype, jnp.floating) else a
        res.append(bench.to_layout(a, "NCX", source=layout))
    return res


def compare(
    label: str, got: np.ndarray, want: np.ndarray, exact: bool, terms: int, dtype: str
) -> dict:
    """One check: equal, or close to ``terms`` roundings of the dtype."""
    ok = got.shape == want.shape
    err = math.inf
    if ok:
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        err = float(diff.max()) if diff.size else 0.0
        if exact:
            ok = bool(np.array_equal(got, want))
        else:
            scale = float(np.abs(want).max()) if want.size else 0.0
            tol = EPS[dtype] * (2 + terms) * max(scale, 1e-6)
            ok = err <= tol
    return {"check": label, "ok": ok, "max_abs_err": err, "exact": exact}


def check_group(
    wl: Workload, layout: str, mode: str, dtype: str, cs: list[Contender], x_ncx: np.ndarray
) -> list:
    by_name = {c.name: c for c in cs}
    ref = outputs_ncx(by_name["jaxpool"], layout)
    checks = []
    jax_out = by_name["jaxpool"].outputs
    checks.append(
        {
            "check": f"jaxpool returns {dtype}",
            "ok": jax_out.dtype == DTYPES[dtype],
            "max_abs_err": 0.0,
            "exact": True,
        }
    )
    is_max = wl.has_indices
    terms = math.prod(window_extents(wl))
    for c in cs:
        if c.name == "jaxpool":
            continue
        outs = outputs_ncx(c, layout)
        what = "values" if mode == "fwd" else "dx"
        # A maximum is one of the inputs; a max op's gradient sums at most `terms` exact
        # cotangents: both exact.  Averages round.
        checks.append(compare(f"{c.name} {what}", outs[0], ref[0], is_max, terms, dtype))
        if c.name == "jaxpool+idx":  # the indices point at the maxima
            n, ch = wl.shape[:2]
            at = np.take_along_axis(
                x_ncx.reshape(n, ch, -1), outs[1].reshape(n, ch, -1).astype(np.int64), axis=2
            )
            checks.append(
                compare("x at jaxpool+idx indices", at.reshape(outs[0].shape), ref[0], True, 0, "")
            )
        if mode == "fwd" and is_max and len(outs) > 1:
            if "jaxpool+idx" in by_name and c.name != "jaxpool+idx":
                want = outputs_ncx(by_name["jaxpool+idx"], layout)[1]
                got = outs[1].astype(np.int64)
                checks.append(compare(f"{c.name} indices", got, want.astype(np.int64), True, 0, ""))
    return checks


# --------------------------------------------------------------------------------------------
# One group.
# --------------------------------------------------------------------------------------------


def run_group(wl, layout, mode, dtype, args, torch, floor) -> dict:
    cs, sizes, x_ncx = bench.build_group(
        wl,
        layout,
        mode,
        torch,
        dtype=dtype,
        x_ncx=cached_input(wl),
        cotangent=functools.partial(exact_cotangent, rng=np.random.default_rng(1)),
        compiles=args.compiles,
        axis=2,  # per plane, as PyTorch's
        keep=args.check,
    )
    if mode != "fwd":  # the indices are an output of the forward only
        sizes.pop("indices", None)
    checks = check_group(wl, layout, mode, dtype, cs, x_ncx) if args.check else []
    rows, by_name, bandwidth = bench.time_group(cs, floor, args)
    names = list(by_name)
    x_floor = {r["contender"]: r["x_floor"] for r in rows}
    targets = []
    if mode == "fwd":
        targets.append(Target("jaxpool time / memory floor", x_floor["jaxpool"], FWD_X_FLOOR))
        if "jaxpool+idx" in x_floor:
            targets.append(
                Target("jaxpool+idx time / memory floor", x_floor["jaxpool+idx"], IDX_X_FLOOR)
            )
    else:
        torch_name = next((n for n in names if n.startswith("torch")), None)
        value = bench.paired_ratio(by_name["jaxpool"], by_name[torch_name]) if torch_name else None
        targets.append(Target(f"jaxpool / {torch_name or 'torch'}", value, BWD_VS_TORCH))
        targets.append(Target("jaxpool time / memory floor", x_floor["jaxpool"], BWD_X_FLOOR))
    targets += [bench.compile_target(c, mode) for c in cs if c.name.startswith("jaxpool")]
    result = bench.group_result(wl, layout, mode, sizes, bandwidth, rows, targets)
    return (
        {"key": f"{wl.name}/{layout}/{mode}/{dtype}", "dtype": dtype} | result | {"checks": checks}
    )


# --------------------------------------------------------------------------------------------
# ResNet-18 training step: Flax's pools against jaxpool's.
# --------------------------------------------------------------------------------------------


def resnet18(pools: str, num_classes: int, dtype: Any, seed: int = 0):
    """A Flax NNX ResNet-18 (channels-last, bf16 compute, f32 parameters): 7x7 s2 conv, BN,
    ReLU, 3x3 s2 p1 max pool, four stages of two basic blocks, global average pool, FC.
    ``pools``: ``"flax"`` (``nnx.max_pool``, ``jnp.mean``) or ``"jaxpool"``."""
    from flax import nnx

    rngs = nnx.Rngs(seed)

    def conv(cin, cout, k, s):
        return nnx.Conv(
            cin,
            cout,
            (k, k),
            strides=(s, s),
            padding=((k // 2, k // 2),) * 2,
            use_bias=False,
            dtype=dtype,
            rngs=rngs,
        )

    def norm(c):
        return nnx.BatchNorm(c, use_running_average=False, momentum=0.9, dtype=dtype, rngs=rngs)

    class Block(nnx.Module):
        def __init__(self, cin, cout, stride):
            self.conv1, self.bn1 = conv(cin, cout, 3, stride), norm(cout)
            self.conv2, self.bn2 = conv(cout, cout, 3, 1), norm(cout)
            self.down = (
                nnx.Sequential(conv(cin, cout, 1, stride), norm(cout))
                if stride != 1 or cin != cout
                else None
            )

        def __call__(self, x):
            y = nnx.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return nnx.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nnx.Module):
        def __init__(self):
            self.pools = pools
            self.conv, self.bn = conv(3, 64, 7, 2), norm(64)
            blocks, cin = [], 64
            for i, cout in enumerate((64, 128, 256, 512)):
                for j in range(2):
                    blocks.append(Block(cin, cout, 2 if i > 0 and j == 0 else 1))
                    cin = cout
            self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks
            self.fc = nnx.Linear(512, num_classes, dtype=dtype, rngs=rngs)

        def __call__(self, x):
            x = nnx.relu(self.bn(self.conv(x)))
            if self.pools == "flax":
                x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
            else:
                x = jaxpool.max_pool(x, 3, 2, 1, 1, data_format="NXC")
            for block in self.blocks:
                x = block(x)
            if self.pools == "flax":
                x = jnp.mean(x, axis=(1, 2))
            else:
                x = jaxpool.adaptive_avg_pool(x, 1, data_format="NXC")
                x = x.reshape(x.shape[0], x.shape[-1])
            return self.fc(x)

    return ResNet18()


def resnet_step(pools: str, num_classes: int):
    """``(step, state)``: a jittable SGD-with-momentum step ``(params, batch_stats, opt_state,
    images, labels) -> (params, batch_stats, opt_state, loss)`` and its initial state."""
    import optax
    from flax import nnx

    model = resnet18(pools, num_classes, jnp.bfloat16)
    graphdef, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
    opt = optax.sgd(1e-3, momentum=0.9)

    def step(params, stats, opt_state, images, labels):
        model = nnx.merge(graphdef, params, stats)

        def loss_fn(model):
            logits = model(images).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)  # with respect to the nnx.Param
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        _, _, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
        return params, stats, opt_state, loss

    return step, (params, stats, opt.init(params))


def rel_diff(a, b) -> float:
    """``|a - b| / |b|`` over all the leaves of two pytrees."""
    num = den = 0.0
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
        num += float(np.sum((u - v) ** 2))
        den += float(np.sum(v**2))
    return math.sqrt(num / max(den, 1e-30))


def run_resnet(args) -> dict:
    batch, side, classes = RESNET[args.scale]
    rng = np.random.default_rng(0)
    images = jnp.asarray(rng.standard_normal((batch, side, side, 3), np.float32), jnp.bfloat16)
    labels = jnp.asarray(rng.integers(0, classes, batch), jnp.int32)
    contenders, first = [], {}
    for pools in ("flax", "jaxpool"):
        copy = lambda tree: jax.tree.map(jnp.copy, tree)  # noqa: E731
        # Flax's BatchNorm mixes bf16 and f32: it needs JAX's standard promotion rules.
        with jax.numpy_dtype_promotion("standard"):
            step, state0 = resnet_step(pools, classes)
            jax.clear_caches()
            t0 = time.perf_counter()
            jitted = jax.jit(step, donate_argnums=(0, 1, 2))
            compiled = jitted.lower(*state0, images, labels).compile()
            compile_s = time.perf_counter() - t0
        *after, loss = compiled(*copy(state0), images, labels)  # one step from the same state
        # SGD with momentum: after the first step its trace holds the gradients.
        first[pools] = (jax.device_get(after[2]), float(loss))
        holder = [copy(state0)]

        def call(compiled=compiled, holder=holder):
            *holder[0], loss = compiled(*holder[0], images, labels)
            return loss

        io = bench.nbytes(state0, images, labels)
        contenders.append(
            Contender(f"{pools} pools", call, io, wait=jax.block_until_ready, compile_s=compile_s)
        )
    checks = []
    if args.check:
        (p_flax, l_flax), (p_pool, l_pool) = first["flax"], first["jaxpool"]
        tol = 2e-2 * max(1.0, abs(l_flax))
        checks.append(
            {
                "check": "loss: jaxpool pools vs flax pools",
                "ok": abs(l_pool - l_flax) <= tol and math.isfinite(l_pool),
                "max_abs_err": abs(l_pool - l_flax),
                "exact": False,
            }
        )
        d = rel_diff(p_pool, p_flax)
        norm = math.sqrt(
            sum(float(np.sum(np.square(g, dtype=np.float64))) for g in jax.tree.leaves(p_flax))
        )
        checks.append(
            {
                "check": "gradients: |jaxpool - flax| / |flax|",
                "ok": d <= 1e-2 and 0 < norm < math.inf,
                "max_abs_err": d,
                "exact": False,
            }
        )
    bench.interleaved(contenders, **bench.timing(args) | {"max_call_s": math.inf})
    flax_c, pool_c = contenders
    rows = [
        bench.timing_row(c)
        | {
            "compile_s": c.compile_s,
            "vs": "jaxpool pools" if c is flax_c else None,
            "ratio": bench.paired_ratio(pool_c, flax_c) if c is flax_c else None,
        }
        for c in contenders
    ]
    ratio = bench.paired_ratio(pool_c, flax_c)
    target = Target("jaxpool pools step / flax pools step", ratio, RESNET_VS_FLAX)
    return {
        "key": "resnet18/bf16",
        "workload": "resnet18",
        "dtype": "bf16",
        "describe": f"train step, batch {batch} at {side}x{side}, {classes} classes, NXC",
        "batch": batch,
        "image": side,
        "classes": classes,
        "rows": rows,
        "targets": [dataclasses.asdict(target) | {"verdict": target.verdict}],
        "checks": checks,
    }


# --------------------------------------------------------------------------------------------
# Output.
# --------------------------------------------------------------------------------------------


def title(g: dict) -> str:
    if g["workload"] == "resnet18":
        return f"resnet18 [{g['describe']}] bf16"
    return f"{g['workload']} [{g['dtype']} {g['describe']}] {g['layout']} {g['mode']}"


def print_checks(g: dict) -> None:
    for c in g["checks"]:
        verdict = "ok" if c["ok"] else "FAILED"
        print(f"    check  {c['check']:<44} max err {c['max_abs_err']:<10.3g} {verdict}")


def print_checks_summary(groups: list[dict]) -> None:
    checks = [c | {"key": g["key"]} for g in groups for c in g["checks"]]
    if checks:
        failed = [c for c in checks if not c["ok"]]
        for c in failed:
            print(f"  check FAILED {c['key']}: {c['check']} (max err {c['max_abs_err']:.3g})")
        print(f"Checks: {len(checks) - len(failed)} ok, {len(failed)} failed")


def _ratios(g: dict) -> str:
    if g["workload"] != "resnet18":
        return bench.ratios_cell(g)
    flax = next(r for r in g["rows"] if r["contender"] == "flax pools")
    return f"{flax['ratio']:.2f} (vs flax pools, {flax['median_s'] * 1e3:.3g} ms)"


def _verdicts(g: dict) -> str:
    passed = sum(t["verdict"] == "PASS" for t in g["targets"])
    return f"{passed}/{len(g['targets'])} PASS"


# The README's table of a run; the ResNet-18 step's row is its jaxpool pools' and the ratio
# to Flax's pools.
TABLE = (
    ("workload", lambda g: f"{g['workload']} {g['describe']}"),
    ("dtype", lambda g: g["dtype"]),
    ("layout", lambda g: g.get("layout", "NXC")),
    ("mode", lambda g: g.get("mode", "train step")),
    (
        "jaxpool ms",
        lambda g: (
            bench.cell(g, "jaxpool", "median_s", ".3g", 1e3)
            or bench.cell(g, "jaxpool pools", "median_s", ".3g", 1e3)
        ),
    ),
    ("x floor", lambda g: bench.cell(g, "jaxpool", "x_floor", ".2f")),
    ("+ indices ms", lambda g: bench.cell(g, "jaxpool+idx", "median_s", ".3g", 1e3)),
    ("x floor", lambda g: bench.cell(g, "jaxpool+idx", "x_floor", ".2f")),
    ("paired ratio jaxpool / peer", _ratios),
    (
        "compile s",
        lambda g: "/".join(
            f"{r['compile_s']:.2f}" for r in g["rows"] if r["contender"].startswith("jaxpool")
        ),
    ),
    ("targets", _verdicts),
)


markdown_table = functools.partial(bench.markdown_table, columns=TABLE)


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale",
        choices=("training", "cpu", "tiny"),
        help="training: the issue's shapes (default on a GPU); cpu: their batch / 16; "
        "tiny: batch 2, spatial / 8 "
        "(default elsewhere)",
    )
    parser.add_argument("--dtype", default="f32,bf16", help="comma-separated: f32, bf16")
    parser.add_argument(
        "--only",
        metavar="REGEX",
        help="searched in 'workload/layout/mode/dtype' (e.g. 'stem/NXC', 'bwd/bf16$') and "
        "'resnet18/bf16'",
    )
    parser.add_argument("--reps", type=int, default=15, help="timed rounds per group")
    bench.add_timing_options(parser)
    parser.add_argument(
        "--compiles",
        type=int,
        help="compilations per JAX contender, from cleared caches; the median is reported "
        "(default 3; tiny 1)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="results file (default results/training_gpu.json for a full training-scale run "
        "on a GPU, results/training_cpu.json for a full cpu-scale run on a CPU, "
        "results/training_tiny.json at tiny scale, else results/training_partial.json)",
    )
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the ratio targets (PNG)")
    parser.add_argument(
        "--table", metavar="JSON", help="print the markdown table of a results file"
    )
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-resnet", action="store_true", help="leave the ResNet-18 step out")
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare every contender's outputs (and the ResNet-18 variants') with jaxpool's",
    )
    parser.add_argument(
        "--program",
        choices=("auto", *dispatch.PROGRAMS),
        default="auto",
        help="jaxpool's programs: auto (the platform's), or force 'portable' (what a GPU "
        "runs) or 'cpu' on any platform",
    )
    args = parser.parse_args(argv)
    gpu = jax.default_backend() == "gpu"
    if args.scale is None:
        args.scale = "training" if gpu else "tiny"
    if args.compiles is None:
        args.compiles = 3 if args.scale == "training" else 1
    if args.min_stretch_ms is None:
        args.min_stretch_ms = 20.0 if gpu else 2.0
    args.dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    for d in args.dtypes:
        if d not in DTYPES:
            parser.error(f"--dtype: {d!r} is not one of {list(DTYPES)}")
    if args.json is None:
        if args.scale == "tiny":
            name = "training_tiny"
        elif args.scale == "cpu" and not gpu and not args.only and args.dtype == "f32,bf16":
            name = "training_cpu"
        elif gpu and not args.only and args.dtype == "f32,bf16":
            name = "training_gpu"
        else:
            name = "training_partial"
        args.json = os.path.join(bench.RESULTS, name + ".json")
    args.gpu = gpu
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(markdown_table(json.load(f)["groups"]))
        return 0
    torch = None
    if not args.no_torch:
        import torch as _torch

        torch = bench.Torch("cuda" if _torch.cuda.is_available() else "cpu")
    force = dispatch.force(args.program) if args.program != "auto" else contextlib.nullcontext()

    def write(groups: list[dict], errors: list[dict]) -> list[dict]:
        failed = [c for g in groups for c in g["checks"] if not c["ok"]]
        result = {
            "meta": bench.environment(torch)
            | {
                "backend": jax.default_backend(),
                "scale": args.scale,
                "dtypes": args.dtypes,
                "program": args.program,
                "rounds": args.reps,
                "warmup": args.warmup,
                "compiles": args.compiles,
                "min_stretch_ms": args.min_stretch_ms,
                "settle_ms": args.settle_ms,
                "only": args.only,
                "check": args.check,
                "checks_failed": len(failed),
            },
            "groups": groups,
            "errors": errors,
        }
        bench.write_json(result, args.json)
        return failed

    with force:
        groups, errors = run(args, torch, write)
    bench.print_summary(groups, lambda g: f"{g['key']:<32}")
    print_checks_summary(groups)
    for e in errors:
        print(f"  ERROR {e['key']}: {e['error']}")
    failed = write(groups, errors)
    if args.plot:
        # A bar per ratio target (time over the memory floor, over PyTorch, over Flax's step).
        bars = [
            (f"{g['key']}: {t['label']}", t["value"], t["limit"])
            for g in groups
            for t in g["targets"]
            if t["unit"] == "x" and t["value"] is not None
        ]
        where = f"{jax.devices()[0].device_kind} ({jax.default_backend()}), {args.scale} scale"
        xlabel = "paired time ratio (median over rounds); black tick: the target"
        bench.plot(bars, args.plot, f"jaxpool at training scale, {where}", xlabel, ticks=True)
        print(f"wrote {args.plot}")
    print("\n" + markdown_table(groups))
    return 1 if failed or errors else 0


def run(args, torch: bench.Torch | None, write: Callable) -> tuple[list[dict], list[dict]]:
    """The groups that ran, and ``{"key", "error"}`` for each group that raised (so that one
    failure, an op PyTorch lacks in a dtype or an out-of-memory, does not end a long run).
    ``write(groups, errors)`` saves the results after every group, so that a run stopped
    part-way keeps the groups it finished."""
    floor = bench.in_place_copy(quick=args.scale == "tiny")
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind} ({jax.default_backend()}), "
        f"torch on {torch.device if torch else '-'}, scale {args.scale}, {args.reps} rounds, "
        f"program {args.program}; floor = io bytes / '{bench.FLOOR}', timed in every round"
    )
    jobs: list[tuple[str, Callable[[], dict]]] = []
    for training_wl, tiny_wl in WORKLOADS:
        wl = {"training": training_wl, "cpu": training_wl.scaled(CPU_BATCH_DIVISOR)}.get(
            args.scale, tiny_wl
        )
        for dtype in args.dtypes:
            for layout in LAYOUTS:
                for mode in MODES:
                    key = f"{wl.name}/{layout}/{mode}/{dtype}"
                    if not args.only or re.search(args.only, key):
                        job = functools.partial(
                            run_group, wl, layout, mode, dtype, args, torch, floor
                        )
                        jobs.append((key, job))
    if not args.no_resnet and "bf16" in args.dtypes:
        if not args.only or re.search(args.only, "resnet18/bf16"):
            jobs.append(("resnet18/bf16", functools.partial(run_resnet, args)))
    groups, errors = [], []
    for key, job in jobs:
        try:
            g = job()
        except Exception as e:  # recorded and reported; the exit status is 1
            print(f"\n{key}: FAILED: {type(e).__name__}: {e}")
            errors.append({"key": key, "error": f"{type(e).__name__}: {e}"})
            write(groups, errors)
            continue
        bench.print_group(g, title(g))
        print_checks(g)
        groups.append(g)
        write(groups, errors)
    return groups, errors


if __name__ == "__main__":
    sys.exit(main())
