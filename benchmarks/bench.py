"""Benchmark of jaxpool against its peers, with the performance targets it checks.

Every contender of one workload runs in the same process, interleaved round by round
(A B C, B C A, C A B, ...) after a warm-up, so that a slow moment of a shared machine hits all
of them alike.  Each round gives one time per contender; the reported time is the median over
rounds and the reported ratio is the median over rounds of the per-round ratio
``jaxpool / peer`` (a paired ratio).  JAX contenders are compiled ahead of time with
``jax.jit(f).lower(...).compile()`` (timed separately).  Every timed stretch ends with a wait
for its last result (``jax.block_until_ready``, ``torch.cuda.synchronize``); calls shorter
than ``--min-stretch-ms`` (2 ms on a CPU, 20 ms on a GPU, where a call of tens of
microseconds would otherwise share its stretch with the launch and the wait) are repeated
back to back inside it.  Each timed stretch starts after ``--settle-ms`` of idle time: the
worker threads of PyTorch's OpenMP runtime keep spinning for a few milliseconds after a call,
and a contender timed right after it would share the cores with them.

Peers:

* ``reduce_window``: ``lax.reduce_window`` max (or sum, times ``1 / kernel size``) in the same
  layout, which is what ``flax.linen.max_pool``/``avg_pool`` call; values only.  For
  ``lp_pool``: the ``1 / p``-th power of ``reduce_window``'s sum of ``|x|**p``.
* ``grad(reduce_window)``: ``jax.grad`` of the same, for forward+backward.
* ``torch-NCHW`` / ``torch-CL``: PyTorch on the CPU with two threads, on a contiguous tensor or a
  channels-last one (a permuted ``N, L, C`` view for 1-D); indices are requested where the op
  has them; backward is ``y.backward(ct)``.
* ``openvino``: the OpenVINO CPU runtime, f32, two threads, NCX only, forward only.

On a GPU (JAX's default backend ``gpu``) the PyTorch peers run on CUDA (``torch-NCHW`` /
``torch-CL``) and OpenVINO, a CPU runtime, is left out; the results go to
``results/gpu.json``.

This module is also the harness of ``training.py``, ``roi_bench.py`` and ``detection.py``: the
contenders, the interleaved rounds, the paired ratios, the targets and the printed and written
results.

Run ``python3 benchmarks/bench.py --help`` for the options; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # not on Windows
    resource = None

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import jaxpool  # noqa: E402
from jaxpool._src import dispatch  # noqa: E402

THREADS = 2
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# --------------------------------------------------------------------------------------------
# Workloads.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """One pooling problem; ``shape`` is the NCX shape, run in both layouts."""

    name: str
    op: str  # max_pool | avg_pool | lp_pool | adaptive_max_pool | adaptive_avg_pool | max_unpool
    shape: tuple[int, ...]
    kernel: int = 1
    strides: int = 1
    pad: int = 0
    output_size: int = 1
    p: int = 2  # lp_pool's exponent

    @property
    def nd(self) -> int:
        return len(self.shape) - 2

    @property
    def padded(self) -> bool:
        return self.pad > 0

    @property
    def has_indices(self) -> bool:
        return self.op in ("max_pool", "adaptive_max_pool")

    def describe(self) -> str:
        dims = "x".join(map(str, self.shape))
        if self.op.startswith("adaptive"):
            return f"{dims} -> {self.output_size}^{self.nd}"
        if self.op == "lp_pool":
            return f"{dims} k{self.kernel} s{self.strides} p{self.pad} L{self.p}"
        return f"{dims} k{self.kernel} s{self.strides} p{self.pad}"

    def scaled(self, batch_divisor: int) -> Workload:
        n = max(1, self.shape[0] // batch_divisor)
        return dataclasses.replace(self, shape=(n, *self.shape[1:]))


WORKLOADS = [
    Workload("stem", "max_pool", (32, 64, 112, 112), kernel=3, strides=2, pad=1),
    Workload("vgg", "max_pool", (32, 128, 56, 56), kernel=2, strides=2),
    Workload("3d", "max_pool", (4, 32, 32, 64, 64), kernel=2, strides=2),
    Workload("1d", "max_pool", (64, 128, 4096), kernel=4, strides=4),
    Workload("avg_stem", "avg_pool", (32, 64, 112, 112), kernel=3, strides=2, pad=1),
    Workload("avg_vgg", "avg_pool", (32, 128, 56, 56), kernel=2, strides=2),
    # The stem's shape and overlapping windows, unpadded: PyTorch's lp_pool2d has no padding.
    Workload("lp", "lp_pool", (32, 64, 112, 112), kernel=3, strides=2, p=2),
    Workload("adaptive_max", "adaptive_max_pool", (16, 256, 50, 50), output_size=16),
    Workload("adaptive_avg", "adaptive_avg_pool", (16, 256, 50, 50), output_size=16),
    Workload("global_max", "adaptive_max_pool", (32, 512, 7, 7), output_size=1),
    Workload("global_avg", "adaptive_avg_pool", (32, 512, 7, 7), output_size=1),
    Workload("unpool_vgg", "max_unpool", (32, 128, 56, 56), kernel=2, strides=2),
]

# ``--quick`` runs these (at batch / 16) unless ``--only`` names others.
QUICK = ("stem", "vgg", "avg_vgg", "adaptive_max", "adaptive_avg")

LAYOUTS = ("NCX", "NXC")
MODES = ("fwd", "fwd+bwd")

# --------------------------------------------------------------------------------------------
# Timing.
# --------------------------------------------------------------------------------------------


def _no_wait(out: Any) -> Any:
    return out


@dataclasses.dataclass
class Contender:
    """One timed callable.  ``io_bytes``: bytes of its arguments plus its results.

    ``call`` may return before the device has finished (JAX and CUDA run asynchronously);
    ``wait(out)`` blocks until the result ``out`` of a call is ready.  ``outputs``: what a
    first call returned, for the checks; :func:`interleaved` drops them to free the memory.
    """

    name: str
    call: Callable[[], Any]
    io_bytes: int
    wait: Callable[[Any], Any] = _no_wait
    compile_s: float | None = None
    temp_bytes: int | None = None
    times: list[float] = dataclasses.field(default_factory=list)
    faults: list[float] = dataclasses.field(default_factory=list)
    outputs: Any = None


def minor_faults() -> int | None:
    """The process's minor page faults so far: each is a page of freshly mapped memory
    touched for the first time, as in every buffer that the allocator maps afresh for a call
    (with glibc, every buffer over 32 MiB)."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


SLOW_ROUNDS = 3


def interleaved(
    contenders: list[Contender],
    rounds: int,
    warmup: int,
    min_call_s: float = 2e-3,
    max_call_s: float = math.inf,
    settle_s: float = 0.0,
) -> None:
    """Times every contender once per round, rotating the order each round.

    Calls faster than ``min_call_s`` are repeated within a round (the same count for every
    contender of the group), back to back with one wait for the device after the last, and
    the time per call is recorded, with the minor page faults per call.  Each timed stretch
    starts after ``settle_s`` seconds of sleep, so that no thread of the previous contender
    is still spinning on the cores.  A contender whose warm-up
    call took longer than ``max_call_s`` takes part in the first ``SLOW_ROUNDS`` rounds only
    (its paired ratios use those rounds).
    """
    fastest = math.inf
    slow = set()
    for _ in range(max(1, warmup)):
        for c in contenders:
            t0 = time.perf_counter()
            c.wait(c.call())
            elapsed = time.perf_counter() - t0
            fastest = min(fastest, elapsed)
            if elapsed > max_call_s:
                slow.add(c.name)
    inner = max(1, math.ceil(min_call_s / max(fastest, 1e-7)))
    for c in contenders:
        c.times, c.faults, c.outputs = [], [], None
    for r in range(rounds):
        k = r % len(contenders)
        for c in contenders[k:] + contenders[:k]:
            if c.name in slow and r >= SLOW_ROUNDS:
                continue
            time.sleep(settle_s)
            f0 = minor_faults()
            t0 = time.perf_counter()
            for _ in range(inner):
                out = c.call()
            c.wait(out)
            c.times.append((time.perf_counter() - t0) / inner)
            if f0 is not None:
                c.faults.append((minor_faults() - f0) / inner)


def timing(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`interleaved`'s arguments from the command line's timing options."""
    return dict(
        rounds=args.reps,
        warmup=args.warmup,
        min_call_s=args.min_stretch_ms / 1e3,
        max_call_s=args.max_call_s,
        settle_s=args.settle_ms / 1e3,
    )


def paired_ratio(a: Contender, b: Contender) -> float:
    """Median over rounds of ``time(a) / time(b)`` (over the rounds both took part in)."""
    return statistics.median(x / y for x, y in zip(a.times, b.times, strict=False))


def quartiles(times: list[float]) -> tuple[float, float, float]:
    q = np.quantile(np.asarray(times), [0.25, 0.5, 0.75])
    return float(q[0]), float(q[1]), float(q[2])


def nbytes(*trees: Any) -> int:
    total = 0
    for leaf in jax.tree_util.tree_leaves(trees):
        if hasattr(leaf, "element_size"):  # a torch tensor
            total += leaf.element_size() * leaf.numel()
        else:
            total += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
    return total


COMPILES = 3  # compile time: the median of this many compilations from a cleared cache


class TooLarge(MemoryError):
    """A compiled program needs more scratch memory than the caller allows."""


def jax_contender(
    name: str,
    fn: Callable,
    *args: Any,
    compiles: int = COMPILES,
    max_temp_bytes: int | None = None,
) -> Contender:
    """Compiles ``fn`` ahead of time (timed: the median of ``compiles`` tracings and
    compilations, each after ``jax.clear_caches()``) and returns a contender calling the
    executable, with the outputs of a first call.  A program whose XLA temp memory exceeds
    ``max_temp_bytes`` raises :class:`TooLarge` before it runs."""
    times = []
    for _ in range(max(1, compiles)):
        jax.clear_caches()
        t0 = time.perf_counter()
        compiled = jax.jit(fn).lower(*args).compile()
        times.append(time.perf_counter() - t0)
    compile_s = float(np.median(times))
    memory = compiled.memory_analysis()
    temp = None if memory is None else int(memory.temp_size_in_bytes)
    if max_temp_bytes is not None and temp is not None and temp > max_temp_bytes:
        raise TooLarge(f"{name} needs {temp / 2**30:.1f} GiB of XLA temp memory")
    out = jax.block_until_ready(compiled(*args))
    return Contender(
        name,
        lambda: compiled(*args),
        nbytes(args, out),
        wait=jax.block_until_ready,
        compile_s=compile_s,
        temp_bytes=temp,
        outputs=out,
    )


FLOOR = "xla x+1 in place"


def in_place_copy(quick: bool) -> Contender:
    """A jitted ``x + 1`` on a large float32 array with the input donated, so that the output
    reuses its buffer: the memory floor's copy.  Its ``io_bytes`` are what it reads and
    writes."""
    n = (1 << 24) if quick else (1 << 26)
    state = [jnp.zeros((n,), jnp.float32)]
    increment = jax.jit(lambda x: x + 1, donate_argnums=0).lower(state[0]).compile()

    def call():
        state[0] = increment(state[0])
        return state[0]

    return Contender(FLOOR, call, 2 * 4 * n, jax.block_until_ready)


def copy_bandwidth(quick: bool, floor: Contender) -> dict[str, float]:
    """Bytes (read + written) per second of three copies of a large float32 array.

    ``xla x+1 in place``: ``floor`` (:func:`in_place_copy`).  ``xla x+1``: the same into a
    fresh output buffer, as every XLA op without donation writes (the new pages are faulted in
    on every call).  ``np.copyto``: NumPy into a preallocated array.
    """
    n = floor.io_bytes // 8
    x = jnp.zeros((n,), jnp.float32)
    a = np.zeros((n,), np.float32)
    b = np.empty_like(a)
    contenders = [
        floor,
        jax_contender("xla x+1", lambda x: x + 1, x),
        Contender("np.copyto", lambda: np.copyto(b, a), 2 * a.nbytes),
    ]
    interleaved(contenders, rounds=3 if quick else 15, warmup=1)
    return {c.name: c.io_bytes / statistics.median(c.times) for c in contenders}


def times_floor(c: Contender, floor: Contender) -> float:
    """Median over rounds of ``c``'s time over its memory floor in that round: its bytes over
    the bandwidth of ``floor``, timed in the same rounds (a paired ratio, like the others)."""
    return statistics.median(
        t * floor.io_bytes / (f * c.io_bytes) for t, f in zip(c.times, floor.times, strict=False)
    )


def dispatch_floor(quick: bool, min_call_s: float) -> float:
    """Seconds per call of a jitted ``x + 1`` on one element, timed as the workloads are: the
    cost of a call whatever its work (on a GPU, rows near it measure the dispatch, not the
    op)."""
    one = jax_contender("xla x+1 on one element", lambda x: x + 1, jnp.zeros((1,), jnp.float32))
    interleaved([one], rounds=3 if quick else 15, warmup=1, min_call_s=min_call_s)
    return statistics.median(one.times)


# --------------------------------------------------------------------------------------------
# Contenders per op.
# --------------------------------------------------------------------------------------------


def to_layout(x: np.ndarray, layout: str, source: str = "NCX") -> np.ndarray:
    """``x``, in ``source`` layout, in ``layout`` (NCX or NXC), contiguous."""
    if layout == source:
        return x
    return np.ascontiguousarray(np.moveaxis(x, 1, -1) if layout == "NXC" else np.moveaxis(x, -1, 1))


def window_tuples(wl: Workload, layout: str):
    """``lax.reduce_window`` window, strides and padding for ``wl`` in ``layout``."""
    k, s, p = (wl.kernel,) * wl.nd, (wl.strides,) * wl.nd, ((wl.pad, wl.pad),) * wl.nd
    if layout == "NCX":
        return (1, 1, *k), (1, 1, *s), ((0, 0), (0, 0), *p)
    return (1, *k, 1), (1, *s, 1), ((0, 0), *p, (0, 0))


def jaxpool_fn(
    wl: Workload, layout: str, indices: bool, axis: int | None = None
) -> Callable | None:
    """The jaxpool forward for ``wl`` (``None`` if the function is not there yet);
    ``max_pool``'s indices flattened from ``axis`` (its default where ``None``)."""
    fn = getattr(jaxpool, wl.op, None)
    if fn is None:
        return None
    if wl.op in ("max_pool", "avg_pool"):
        kw: dict[str, Any] = dict(data_format=layout)
        if indices:
            kw["return_indices"] = True
            if axis is not None:
                kw["axis"] = axis
        return lambda x: fn(x, wl.kernel, wl.strides, wl.pad, wl.pad, **kw)
    if wl.op == "lp_pool":
        return lambda x: fn(x, wl.kernel, wl.strides, wl.pad, wl.pad, p=wl.p, data_format=layout)
    if wl.op == "adaptive_max_pool":
        return lambda x: fn(x, wl.output_size, data_format=layout, return_indices=indices)
    if wl.op == "adaptive_avg_pool":
        return lambda x: fn(x, wl.output_size, data_format=layout)
    raise ValueError(wl.op)


def reduce_window_fn(wl: Workload, layout: str) -> Callable | None:
    if wl.op not in ("max_pool", "avg_pool", "lp_pool"):
        return None
    window, strides, padding = window_tuples(wl, layout)
    if wl.op == "max_pool":
        return lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding)
    if wl.op == "lp_pool":
        p = wl.p

        def lp(x):
            total = lax.reduce_window(jnp.abs(x) ** p, 0.0, lax.add, window, strides, padding)
            return total ** (1 / p)

        return lp
    scale = 1.0 / math.prod(window)
    return lambda x: lax.reduce_window(x, 0.0, lax.add, window, strides, padding) * scale


def xla_reduce_fn(wl: Workload, layout: str) -> Callable | None:
    """Global pooling as a plain XLA reduction (only for an adaptive output of 1)."""
    if not wl.op.startswith("adaptive") or wl.output_size != 1:
        return None
    axes = tuple(range(2, 2 + wl.nd)) if layout == "NCX" else tuple(range(1, 1 + wl.nd))
    reduce = jnp.max if wl.op == "adaptive_max_pool" else jnp.mean
    return lambda x: reduce(x, axis=axes, keepdims=True)


def peer_fn(wl: Workload, layout: str) -> tuple[str, Callable | None]:
    """``reduce_window`` (what Flax's pools call) or, for a global pool, ``jnp.max/mean``."""
    fn = reduce_window_fn(wl, layout)
    if fn is not None:
        return "reduce_window", fn
    return "xla-reduce", xla_reduce_fn(wl, layout)


def grad_of(fn: Callable) -> Callable:
    """``x, ct -> d sum(fn(x) * ct) / dx``."""
    return jax.grad(lambda x, ct: jnp.sum(fn(x) * ct))


class Torch:
    """PyTorch contenders on ``device`` ("cpu", two threads, or "cuda"), imported lazily."""

    def __init__(self, device: str = "cpu"):
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(THREADS)
        self.torch, self.F, self.device = torch, F, device
        self.dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}

    def wait(self, out: Any) -> Any:
        """Blocks until the device has finished (CUDA runs asynchronously)."""
        if self.device != "cpu":
            self.torch.cuda.synchronize()
        return out

    def tensor(self, x_ncx: np.ndarray, layout: str):
        """The NCX data as a torch tensor: contiguous, or channels-last in memory."""
        t = self.torch.from_numpy(np.array(x_ncx)).to(self.device)
        if layout == "NCX":
            return t
        if t.ndim == 4:
            return t.contiguous(memory_format=self.torch.channels_last)
        if t.ndim == 5:
            return t.contiguous(memory_format=self.torch.channels_last_3d)
        return t.permute(0, 2, 1).contiguous().permute(0, 2, 1)  # 1-D: a permuted N, L, C

    def forward(self, wl: Workload, indices: bool) -> Callable:
        F, nd = self.F, wl.nd
        if wl.op == "max_pool":
            pool = getattr(F, f"max_pool{nd}d")
            return lambda x: pool(x, wl.kernel, wl.strides, wl.pad, return_indices=indices)
        if wl.op == "avg_pool":
            pool = getattr(F, f"avg_pool{nd}d")
            return lambda x: pool(x, wl.kernel, wl.strides, wl.pad, count_include_pad=True)
        if wl.op == "lp_pool":  # no padding argument: the workload has none
            pool = getattr(F, f"lp_pool{nd}d")
            return lambda x: pool(x, wl.p, wl.kernel, wl.strides)
        if wl.op == "adaptive_max_pool":
            pool = getattr(F, f"adaptive_max_pool{nd}d")
            return lambda x: pool(x, wl.output_size, return_indices=indices)
        if wl.op == "adaptive_avg_pool":
            return lambda x: getattr(F, f"adaptive_avg_pool{nd}d")(x, wl.output_size)
        raise ValueError(wl.op)

    def contender(
        self,
        name: str,
        wl: Workload,
        layout: str,
        x_ncx: np.ndarray,
        mode: str,
        ct_ncx: np.ndarray | None = None,
        *,
        dtype: str = "f32",
        keep: bool = False,
    ) -> Contender:
        """The forward (with indices where the op has them), or ``op(x).backward(ct)`` with
        ``ct`` given by ``ct_ncx``, in ``dtype``.  ``keep``: its outputs (NCX, on the host) as
        ``outputs``."""
        torch = self.torch
        x = self.tensor(x_ncx, layout).to(self.dtypes[dtype])  # keeps the memory format
        fwd = self.forward(wl, indices=mode == "fwd")
        with torch.no_grad():
            y = fwd(x)
        if mode == "fwd":
            out = y if isinstance(y, tuple) else (y,)
            c = Contender(name, lambda: fwd(x), nbytes([x, *out]), self.wait)
            c.outputs = [self.numpy(o) for o in out] if keep else None
            return c
        xg = x.detach().clone().requires_grad_(True)
        ct = torch.empty_like(y)  # the output's memory format
        ct.copy_(torch.from_numpy(np.array(ct_ncx)).to(self.device))

        def call():
            xg.grad = None
            fwd(xg).backward(ct)

        c = Contender(name, call, nbytes([x, ct, x]), self.wait)
        if keep:
            call()
            self.wait(None)
            c.outputs = [self.numpy(xg.grad)]
        return c

    def numpy(self, t) -> np.ndarray:
        """A tensor on the host as NumPy: floats in float32 (NumPy has no bfloat16)."""
        t = t.detach().cpu()
        return t.float().numpy() if t.is_floating_point() else t.numpy()

    def unpool(
        self, name: str, wl: Workload, layout: str, x_ncx: np.ndarray, mode: str
    ) -> Contender:
        F, nd = self.F, wl.nd
        x = self.tensor(x_ncx, layout)
        y, idx = getattr(F, f"max_pool{nd}d")(x, wl.kernel, wl.strides, return_indices=True)
        unpool = getattr(F, f"max_unpool{nd}d")
        size = list(x.shape)
        if mode == "fwd":
            return Contender(
                name,
                lambda: unpool(y, idx, wl.kernel, wl.strides, output_size=size),
                nbytes([y, idx, x]),
                self.wait,
            )
        yg = y.detach().clone().requires_grad_(True)
        ct = self.torch.randn_like(x)

        def call():
            yg.grad = None
            unpool(yg, idx, wl.kernel, wl.strides, output_size=size).backward(ct)

        return Contender(name, call, nbytes([y, idx, ct, y]), self.wait)


class OpenVINO:
    """OpenVINO CPU runtime contenders (NCX, forward only), imported lazily."""

    def __init__(self):
        import openvino as ov

        self.ov = ov
        self.core = ov.Core()

    def contender(self, wl: Workload, x: np.ndarray, values_only: bool = False) -> Contender | None:
        """The op's newest version; ``values_only`` gives MaxPool-1 for ``max_pool``.

        The CPU plugin runs MaxPool-8/-14 (with indices) as a reference node and MaxPool-1
        as its optimised pooling kernel, hence both.
        """
        ov = self.ov
        import openvino.opset1 as o1
        import openvino.opset8 as o8
        import openvino.opset14 as o14

        param = o8.parameter(list(x.shape), ov.Type.f32)
        nd = wl.nd
        k, s, p = [wl.kernel] * nd, [wl.strides] * nd, [wl.pad] * nd
        name = "openvino-values" if values_only else "openvino"
        if values_only and wl.op != "max_pool":
            return None
        if values_only:
            node = o1.max_pool(param, s, p, p, k, "floor", "explicit")
        elif wl.op == "max_pool":
            node = o14.max_pool(param, s, [1] * nd, p, p, k, "floor", "explicit", "i32", 0)
        elif wl.op == "avg_pool":
            node = o14.avg_pool(param, s, p, p, k, False, "floor", "explicit")
        elif wl.op == "adaptive_max_pool":
            size = o8.constant(np.full(nd, wl.output_size, np.int64))
            node = o8.adaptive_max_pool(param, size, "i32")
        elif wl.op == "adaptive_avg_pool":
            size = o8.constant(np.full(nd, wl.output_size, np.int64))
            node = o8.adaptive_avg_pool(param, size)
        else:
            return None
        model = ov.Model(node.outputs(), [param])
        compiled = self.core.compile_model(
            model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": THREADS}
        )
        request = compiled.create_infer_request()
        inputs = {0: x}
        results = request.infer(inputs, share_inputs=True, share_outputs=True)
        io = x.nbytes + sum(np.asarray(r).nbytes for r in results.values())
        return Contender(
            name, lambda: request.infer(inputs, share_inputs=True, share_outputs=True), io
        )


# --------------------------------------------------------------------------------------------
# The performance targets.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Target:
    label: str
    value: float | None
    limit: float
    unit: str = "x"

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "n/a"
        return "PASS" if self.value <= self.limit else "MISS"


def ratio_targets(wl: Workload, layout: str, mode: str) -> list[tuple[str, str, float]]:
    """``(jaxpool contender, peer, limit)`` for the ratio targets of one group."""
    torch = "torch-NCHW" if layout == "NCX" else "torch-CL"
    out: list[tuple[str, str, float]] = []
    if wl.op == "max_pool" and mode == "fwd":
        if layout == "NCX":
            out += [
                ("jaxpool+idx", "reduce_window", 1.5 if wl.padded else 1.0),
                ("jaxpool+idx", torch, 0.3),
            ]
        else:
            out += [("jaxpool+idx", "reduce_window", 1.5), ("jaxpool+idx", torch, 1.5)]
        out.append(("jaxpool", "reduce_window", 0.7))
    elif wl.op == "max_pool":
        out += [
            ("jaxpool", "grad(reduce_window)", 0.35),
            ("jaxpool", torch, 0.35 if layout == "NCX" else 1.3),
        ]
    elif wl.op == "avg_pool" and mode == "fwd":
        out.append(("jaxpool", "reduce_window", 0.6))
    elif wl.op == "lp_pool":
        # The sums of |x|**p run as avg_pool's; the gradient divides the cotangents in a loop of
        # its own (lp_pool.py), without which it would fall behind grad(reduce_window).
        if mode == "fwd":
            out.append(("jaxpool", "reduce_window", 0.6))
        else:
            out.append(("jaxpool", "grad(reduce_window)", 1.0))
    elif wl.op == "adaptive_avg_pool" and mode == "fwd" and wl.output_size == 16:
        out.append(("jaxpool", torch, 0.7 if layout == "NCX" else 1.0))
    elif wl.op == "adaptive_max_pool" and mode == "fwd" and wl.output_size == 16:
        out.append(("jaxpool+idx", torch, 1.0 if layout == "NCX" else 1.5))
    return out


# --------------------------------------------------------------------------------------------
# One group: a workload in one layout and mode.
# --------------------------------------------------------------------------------------------


def device_array(a: np.ndarray, dtype: str) -> jax.Array:
    """``a`` in ``dtype`` on JAX's default device, converted by NumPy (ml_dtypes)."""
    return jax.device_put(np.asarray(a, DTYPES[dtype]))


def build_group(
    wl: Workload,
    layout: str,
    mode: str,
    torch: Torch | None,
    openvino: OpenVINO | None = None,
    *,
    portable: bool = False,
    dtype: str = "f32",
    x_ncx: np.ndarray | None = None,
    cotangent: Callable[[tuple[int, ...]], np.ndarray] | None = None,
    compiles: int = COMPILES,
    axis: int | None = None,
    keep: bool = False,
) -> tuple[list[Contender], dict[str, int], np.ndarray]:
    """The contenders of one group, the byte sizes of its input, output and indices (where
    the op has them), and its input (NCX, float32).

    ``x_ncx`` and ``cotangent`` (an NCX shape to a float32 cotangent) give the data, random
    normal where ``None``; every contender takes it in ``dtype``.  JAX contenders keep the
    outputs of a first call as ``outputs``, PyTorch's only with ``keep``.  ``axis``: where
    ``max_pool``'s indices are flattened from.  With ``portable``, jaxpool's portable
    programs (what a GPU or TPU runs) join as the contenders ``portable`` and
    ``portable+idx``, so that the ratios show what the CPU programs buy.
    """
    rng = np.random.default_rng(0)
    if x_ncx is None:
        x_ncx = rng.standard_normal(wl.shape, dtype=np.float32)
    if cotangent is None:
        cotangent = lambda shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    x_np = to_layout(x_ncx, layout)
    x = device_array(x_np, dtype)
    torch_name = "torch-NCHW" if layout == "NCX" else "torch-CL"
    cs: list[Contender] = []
    sizes: dict[str, int] = {"input": nbytes(x)}

    def add_jax(name: str, fn: Callable, *args: Any) -> None:
        cs.append(jax_contender(name, fn, *args, compiles=compiles))

    if wl.op == "max_unpool":
        if getattr(jaxpool, "max_unpool", None) is None:
            raise LookupError("max_unpool")
        y, idx = jaxpool.max_pool(
            x, wl.kernel, wl.strides, return_indices=True, axis=2, data_format=layout
        )
        sizes["output"] = nbytes(x)
        sizes["indices"] = nbytes(idx)

        def unpool(y, idx):  # the indices are an argument, not a baked-in constant
            return jaxpool.max_unpool(y, idx, x.shape, axis=2, data_format=layout)

        if mode == "fwd":
            add_jax("jaxpool", unpool, y, idx)
        else:
            ct = device_array(to_layout(cotangent(wl.shape), layout), dtype)
            add_jax(
                "jaxpool", jax.grad(lambda y, idx, ct: jnp.sum(unpool(y, idx) * ct)), y, idx, ct
            )
        if torch is not None:
            cs.append(torch.unpool(torch_name, wl, layout, x_ncx, mode))
        return cs, sizes, x_ncx

    fwd = jaxpool_fn(wl, layout, indices=False)
    if fwd is None:
        raise LookupError(wl.op)
    idx_fn = jaxpool_fn(wl, layout, indices=True, axis=axis)
    y = jax.eval_shape(fwd, x)
    sizes["output"] = nbytes(y)
    if wl.has_indices:
        sizes["indices"] = nbytes(jax.eval_shape(idx_fn, x)[1])
    peer_name, peer = peer_fn(wl, layout)

    if mode == "fwd":
        add_jax("jaxpool", fwd, x)
        if wl.has_indices:
            add_jax("jaxpool+idx", idx_fn, x)
        if portable:
            with dispatch.force("portable"):
                add_jax("portable", fwd, x)
                if wl.has_indices:
                    add_jax("portable+idx", idx_fn, x)
        if peer is not None:
            add_jax(peer_name, peer, x)
        if torch is not None:
            cs.append(torch.contender(torch_name, wl, layout, x_ncx, mode, dtype=dtype, keep=keep))
        if openvino is not None and layout == "NCX":
            for values_only in (False, True):
                c = openvino.contender(wl, x_np, values_only)
                if c is not None:
                    cs.append(c)
    else:
        y_ncx_shape = y.shape if layout == "NCX" else (y.shape[0], y.shape[-1], *y.shape[1:-1])
        ct_ncx = cotangent(tuple(y_ncx_shape))
        ct = device_array(to_layout(ct_ncx, layout), dtype)
        add_jax("jaxpool", grad_of(fwd), x, ct)
        if portable:
            with dispatch.force("portable"):
                add_jax("portable", grad_of(fwd), x, ct)
        if peer is not None:
            add_jax(f"grad({peer_name})", grad_of(peer), x, ct)
        if torch is not None:
            c = torch.contender(torch_name, wl, layout, x_ncx, mode, ct_ncx, dtype=dtype, keep=keep)
            cs.append(c)
    return cs, sizes, x_ncx


# Which jaxpool contender a peer's ratio column compares against.
def matched_jaxpool(peer: str, names: list[str]) -> str | None:
    if peer.startswith("jaxpool"):
        return None
    if peer.startswith("portable"):
        return peer.replace("portable", "jaxpool")
    if "jaxpool+idx" in names and (peer.startswith("torch") or peer == "openvino"):
        return "jaxpool+idx"
    return "jaxpool" if "jaxpool" in names else None


def timing_row(c: Contender) -> dict:
    """The start of a contender's result row: its rounds, median and quartiles."""
    q25, med, q75 = quartiles(c.times)
    return {
        "contender": c.name,
        "rounds": len(c.times),
        "median_s": med,
        "q25_s": q25,
        "q75_s": q75,
        "times_s": c.times,
    }


def time_group(
    cs: list[Contender], floor: Contender, args
) -> tuple[list[dict], dict[str, Contender], float]:
    """Times the contenders of a group with the floor's copy in the same rounds, so that a slow
    moment of the machine moves the floor with them.  Returns one result row per contender
    (medians, the floor ratio, the paired ratio against the matched jaxpool contender), the
    contenders by name, and the floor's bandwidth."""
    interleaved(cs + [floor], **timing(args))
    by_name = {c.name: c for c in cs}
    names = list(by_name)
    bandwidth = floor.io_bytes / statistics.median(floor.times)
    rows = []
    for c in cs:
        ref = matched_jaxpool(c.name, names)
        rows.append(
            timing_row(c)
            | {
                "io_bytes": c.io_bytes,
                "floor_s": c.io_bytes / bandwidth,
                "x_floor": times_floor(c, floor),
                "compile_s": c.compile_s,
                "temp_bytes": c.temp_bytes,
                "faults_per_call": statistics.median(c.faults) if c.faults else None,
                "vs": ref,
                "ratio": paired_ratio(by_name[ref], c) if ref else None,
            }
        )
    return rows, by_name, bandwidth


COMPILE_S = {"fwd": 0.5, "fwd+bwd": 1.0}  # the compile-time target per mode


def compile_target(c: Contender, mode: str) -> Target:
    return Target(f"{c.name} compile", c.compile_s, COMPILE_S[mode], "s")


def group_result(
    wl: Workload,
    layout: str,
    mode: str,
    sizes: dict[str, int],
    bandwidth: float,
    rows: list[dict],
    targets: list[Target],
) -> dict:
    """A timed group as the results file records it."""
    return {
        "workload": wl.name,
        "op": wl.op,
        "layout": layout,
        "mode": mode,
        "shape_ncx": list(wl.shape),
        "describe": wl.describe(),
        "sizes_bytes": sizes,
        "floor_bandwidth_Bps": bandwidth,
        "rows": rows,
        "targets": [dataclasses.asdict(t) | {"verdict": t.verdict} for t in targets],
    }


def run_group(wl: Workload, layout: str, mode: str, args, torch, openvino, floor):
    cs, sizes, _ = build_group(wl, layout, mode, torch, openvino, portable=args.portable)
    if wl.op != "max_unpool":  # a forward with indices writes both
        sizes["output"] += sizes.get("indices", 0)
    rows, by_name, bandwidth = time_group(cs, floor, args)
    names = list(by_name)
    ratios = {
        f"{a}/{b}": paired_ratio(by_name[a], by_name[b])
        for a in names
        if a.startswith("jaxpool")
        for b in names
        if not b.startswith("jaxpool")
    }

    targets = []
    for a, b, limit in ratio_targets(wl, layout, mode):
        value = paired_ratio(by_name[a], by_name[b]) if a in by_name and b in by_name else None
        targets.append(Target(f"{a} / {b}", value, limit))
    for c in cs:
        if not c.name.startswith("jaxpool"):
            continue
        targets.append(compile_target(c, mode))
        if c.temp_bytes is not None:
            if mode == "fwd":
                limit, what = sizes["output"], "output"
            else:
                limit = sizes["input"] + sizes.get("indices", 0)
                what = "input+indices" if "indices" in sizes else "input"
            targets.append(
                Target(f"{c.name} XLA temp <= {what}", c.temp_bytes / 2**20, limit / 2**20, "MiB")
            )
    if (
        wl.op == "max_pool"
        and mode == "fwd"
        and wl.name in ("vgg", "3d", "1d")
        and "jaxpool+idx" in by_name
    ):
        r = next(r for r in rows if r["contender"] == "jaxpool+idx")
        targets.append(Target("jaxpool+idx time / memory floor", r["x_floor"], 2.5))
    return group_result(wl, layout, mode, sizes, bandwidth, rows, targets) | {"ratios": ratios}


# --------------------------------------------------------------------------------------------
# Output.
# --------------------------------------------------------------------------------------------


def fmt(value: float | None, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


# The columns of a group's printed table: header, width, the key a row must have for the
# column to show, and the cell.
COLUMNS: tuple[tuple[str, int, str, Callable[[dict], str]], ...] = (
    ("median ms", 10, "median_s", lambda r: f"{r['median_s'] * 1e3:.3f}"),
    ("IQR ms", 15, "q25_s", lambda r: f"{r['q25_s'] * 1e3:.2f}-{r['q75_s'] * 1e3:.2f}"),
    ("x floor", 9, "x_floor", lambda r: f"{r['x_floor']:.2f}"),
    ("compile s", 10, "compile_s", lambda r: fmt(r["compile_s"], ".3f")),
    (
        "temp MiB",
        10,
        "temp_bytes",
        lambda r: fmt(r["temp_bytes"] and r["temp_bytes"] / 2**20, ".2f"),
    ),
    ("faults", 8, "faults_per_call", lambda r: fmt(r["faults_per_call"], ".0f")),
    ("first call s", 13, "first_call_s", lambda r: fmt(r["first_call_s"], ".3f")),
    ("x gather", 9, "x_gather", lambda r: fmt(r["x_gather"], ".2f")),
)


def print_group(g: dict, title: str | None = None) -> None:
    """A group's rows (the columns its rows have) and targets, under ``title`` (by default
    the workload, its description, layout and mode)."""
    if title is None:
        title = f"{g['workload']} [{g['describe']}] {g['layout']} {g['mode']}"
    print(f"\n{title}")
    columns = [c for c in COLUMNS if any(c[2] in r for r in g["rows"])]
    header = "".join(f"{name:>{width}}" for name, width, _, _ in columns)
    print(f"  {'contender':<22}{header}   {'ratio (jaxpool/peer)':<24}")
    for r in g["rows"]:
        ratio = f"{r['ratio']:.3f} ({r['vs']})" if r["ratio"] is not None else ""
        if r["rounds"] < max(row["rounds"] for row in g["rows"]):
            ratio += f" [{r['rounds']} rounds]"
        cells = "".join(f"{cell(r):>{width}}" for _, width, _, cell in columns)
        print(f"  {r['contender']:<22}{cells}   {ratio}")
    for t in g["targets"]:
        value = fmt(t["value"], ".3f", "n/a")
        print(
            f"    target {t['label']:<44} {value:>9} <= {t['limit']:.3g} {t['unit']:<3} "
            f"{t['verdict']}"
        )


def print_summary(groups: list[dict], where: Callable[[dict], str] | None = None) -> None:
    """The count of verdicts, and every target that did not pass, in the group ``where`` names
    (by default its workload, layout and mode)."""
    if where is None:
        where = lambda g: f"{g['workload']:<13}{g['layout']:<4}{g['mode']:<8}"  # noqa: E731
    print("\nTargets summary")
    counts = {"PASS": 0, "MISS": 0, "n/a": 0}
    for g in groups:
        for t in g["targets"]:
            counts[t["verdict"]] += 1
            if t["verdict"] != "PASS":
                value = fmt(t["value"], ".3f", "n/a")
                print(
                    f"  {t['verdict']:<5}{where(g)}"
                    f"{t['label']:<44}{value:>9} <= {t['limit']:.3g} {t['unit']}"
                )
    print(f"  {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['n/a']} n/a")


def cell(g: dict, contender: str, key: str, spec: str, scale: float = 1.0) -> str:
    """A row's value, formatted; empty where the group has no such row or value."""
    r = next((r for r in g["rows"] if r["contender"] == contender), {})
    return "" if r.get(key) is None else format(r[key] * scale, spec)


def ratios_cell(g: dict) -> str:
    """Every paired ratio of a group, with its two contenders."""
    return "; ".join(
        f"{r['ratio']:.2f} ({r['vs']} vs {r['contender']})"
        for r in g["rows"]
        if r["ratio"] is not None
    )


# The README's table of a run: times and the paired ratios per group.
TABLE: tuple[tuple[str, Callable[[dict], str]], ...] = (
    ("workload", lambda g: f"{g['workload']} {g['describe']}"),
    ("layout", lambda g: g["layout"]),
    ("mode", lambda g: g["mode"]),
    ("jaxpool ms", lambda g: cell(g, "jaxpool", "median_s", ".3g", 1e3)),
    ("jaxpool + indices ms", lambda g: cell(g, "jaxpool+idx", "median_s", ".3g", 1e3)),
    ("paired ratio jaxpool / peer", ratios_cell),
)


def markdown_table(
    groups: list[dict], columns: tuple[tuple[str, Callable[[dict], str]], ...] = TABLE
) -> str:
    """A markdown table with a row per group; ``columns``: header and cell of each column."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(f(g) for _, f in columns) + " |" for g in groups]
    return "\n".join(lines)


def plot(
    bars: list[tuple[str, float, float]], path: str, title: str, xlabel: str, ticks: bool = False
) -> None:
    """A horizontal bar per ``(label, value, limit)`` on a log scale: green where the value is
    at most its limit, else red; ``ticks`` marks the limits."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed; no plot written")
        return
    if not bars:
        return
    labels, values, limits = zip(*bars)
    fig, ax = plt.subplots(figsize=(10, 0.22 * len(values) + 1.5))
    colors = ["tab:green" if v <= lim else "tab:red" for v, lim in zip(values, limits)]
    ax.barh(range(len(values)), values, color=colors)
    if ticks:
        ax.scatter(limits, range(len(values)), marker="|", color="black", s=60, zorder=3)
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------


def add_timing_options(parser: argparse.ArgumentParser) -> None:
    """The options of :func:`timing` but ``--reps``, whose default differs per script."""
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument(
        "--min-stretch-ms",
        type=float,
        metavar="MS",
        help="repeat shorter calls back to back within a timed stretch (default 2; GPU 20)",
    )
    parser.add_argument(
        "--settle-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="idle time before each timed stretch, for the threads of the previous contender "
        "to stop spinning (default 20)",
    )
    parser.add_argument(
        "--max-call-s",
        type=float,
        default=2.0,
        metavar="S",
        help=f"a contender slower than this per call runs {SLOW_ROUNDS} rounds",
    )


def environment(torch: Torch | None) -> dict[str, Any]:
    """The versions and the machine, for the results file."""
    return {
        "jax": jax.__version__,
        "jaxpool": getattr(jaxpool, "__version__", None),
        "torch": None if torch is None else torch.torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": jax.devices()[0].device_kind,
        "torch_device": None if torch is None else torch.device,
    }


def write_json(result: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="batch / 16, 3 rounds, 1 warm-up round, the QUICK workloads "
        "unless --only is given (about a minute)",
    )
    parser.add_argument(
        "--only", metavar="PATTERN", help="regex over 'workload/layout/mode', e.g. 'vgg|stem/NCX'"
    )
    parser.add_argument("--reps", type=int, help="timed rounds per group (default 15; quick 3)")
    add_timing_options(parser)
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="results file (default results/latest.json, on a GPU results/gpu.json, "
        "with --quick or --only results/partial.json)",
    )
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the ratios (PNG)")
    parser.add_argument(
        "--table", metavar="JSON", help="print the markdown table of a results file and exit"
    )
    parser.add_argument(
        "--portable",
        action="store_true",
        help="also time jaxpool's portable programs (what a GPU or TPU runs) on this backend",
    )
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out")
    args = parser.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(markdown_table(json.load(f)["groups"]))
        return 0
    if args.reps is None:
        args.reps = 3 if args.quick else 15
    if args.quick:
        args.warmup = min(args.warmup, 1)

    gpu = jax.default_backend() == "gpu"
    if args.min_stretch_ms is None:
        args.min_stretch_ms = 20.0 if gpu else 2.0
    if args.json is None:  # a partial run does not replace the full results
        name = "partial" if args.quick or args.only else ("gpu" if gpu else "latest")
        args.json = os.path.join(RESULTS, name + ".json")
    torch = None if args.no_torch else Torch("cuda" if gpu else "cpu")
    openvino = None if args.no_openvino or gpu else OpenVINO()
    floor = in_place_copy(args.quick)
    bandwidths = copy_bandwidth(args.quick, floor)
    dispatch = dispatch_floor(args.quick, args.min_stretch_ms / 1e3)
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind}, {os.cpu_count()} cores, "
        f"{args.reps} rounds; copy bandwidth (GB/s): "
        + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in bandwidths.items())
        + f"; floor = io bytes / '{FLOOR}', timed in every round of each group"
        + f"; dispatch floor {dispatch * 1e3:.4f} ms per call (x + 1 on one element)"
    )

    groups = []
    skipped = set()
    for wl in WORKLOADS:
        if args.quick:
            wl = wl.scaled(16)
        for layout in LAYOUTS:
            for mode in MODES:
                key = f"{wl.name}/{layout}/{mode}"
                if args.only and not re.search(args.only, key):
                    continue
                if args.quick and not args.only and wl.name not in QUICK:
                    continue
                try:
                    g = run_group(wl, layout, mode, args, torch, openvino, floor)
                except LookupError as e:
                    if str(e).strip("'") not in skipped:
                        print(
                            f"\nnote: jaxpool.{str(e).strip(chr(39))} is not available; "
                            f"skipping its workloads"
                        )
                        skipped.add(str(e).strip("'"))
                    continue
                print_group(g)
                groups.append(g)
    print_summary(groups)

    result = {
        "meta": environment(torch)
        | {
            "openvino": None if openvino is None else openvino.ov.__version__,
            "cpu_count": os.cpu_count(),
            "threads": THREADS,
            "copy_bandwidth_Bps": bandwidths,
            "floor_bandwidth": f"{FLOOR}, timed in every round of each group",
            "dispatch_floor_s": dispatch,
            "rounds": args.reps,
            "warmup": args.warmup,
            "min_stretch_ms": args.min_stretch_ms,
            "settle_ms": args.settle_ms,
            "quick": args.quick,
            "only": args.only,
            "skipped": sorted(skipped),
        },
        "groups": groups,
    }
    write_json(result, args.json)
    if args.plot:
        bars = [
            (
                f"{g['workload']} {g['layout']} {g['mode']}: {r['vs']} / {r['contender']}",
                r["ratio"],
                1.0,
            )
            for g in groups
            for r in g["rows"]
            if r["ratio"] is not None
        ]
        where = "GPU " + jax.devices()[0].device_kind if gpu else "CPU"
        xlabel = "paired time ratio jaxpool / peer (median over rounds; < 1: jaxpool faster)"
        plot(bars, args.plot, f"jaxpool vs peers, float32, {where}", xlabel)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
