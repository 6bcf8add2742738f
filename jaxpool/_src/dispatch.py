"""The one place that chooses, for each op, between its portable program and a CPU program.

Every op has one portable program: its definition, written next to the specification, and
what GPUs and TPUs run.  XLA's CPU backend runs some of those programs far from the memory
floor (``reduce_window`` most of all), so :mod:`jaxpool._src.cpu` holds programs for the CPU.
:data:`CPU_PROGRAMS` names them: for each op, a function of the op's arguments that returns
its CPU program, or ``None`` where the portable program is the faster one on a CPU too.  The
choosers read the attributes, never the batch N, which may be a symbolic dimension of
``jax.export``: every CPU program keeps N an axis of its own (its slices, pads, reshapes and
gathers act on the other axes), so it takes any N, as the portable programs do.
:func:`run` is the only caller of ``lax.platform_dependent`` in the package, so a program is
chosen once per op and traced for both platforms; XLA keeps the branch of the platform it
compiles for.

:func:`force` makes every op run one kind of program on any platform, so that the tests check
both kinds on a CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxpool._src.cpu import adaptive as cpu_adaptive
from jaxpool._src.cpu import avg_pool as cpu_avg_pool
from jaxpool._src.cpu import layout as cpu_layout
from jaxpool._src.cpu import max_pool as cpu_max_pool

PROGRAMS = ("portable", "cpu")

# Op name -> the CPU program for the op's arguments, or None.  The names are those the op
# modules pass to `run`.
CPU_PROGRAMS: dict[str, Callable[..., Callable[..., Any] | None]] = {
    "max_pool": cpu_max_pool.values_program,
    "max_pool_argmax": cpu_max_pool.argmax_program,
    "avg_pool": cpu_avg_pool.sum_program,
    "lp_pool": cpu_avg_pool.sum_program,  # the window sums of |x|**p
    "adaptive_max_pool": cpu_adaptive.max_program,
    "adaptive_max_pool_argmax": cpu_adaptive.argmax_program,
    "adaptive_avg_pool": cpu_adaptive.sum_program,
    # The ROI family's layout changes around its channels-last reads.
    "channels_last": lambda x: cpu_layout.channels_last,
    "from_channels_last": lambda y: cpu_layout.from_channels_last,
    "row_major": lambda a: cpu_layout.as_stored,
}

# The ops whose floating outputs are elements of their input ``x`` (the first argument), the
# maxima, with their positions -> whether a CPU runs the op on a bfloat16 ``x`` in float32 for
# the op's arguments.  XLA's CPU backend computes each bfloat16 operation in float32 and
# rounds its result back to bfloat16, inside the fused loop, between every two operations of
# a chain; taking ``x`` in float32 and rounding once at the end is exact (float32 holds every
# bfloat16 value, and a maximum is one of them), gives the same bits and saves those
# roundings (the bfloat16 workloads of ``benchmarks/training.py`` on a CPU).  A single
# reduction (global maxima) has no chain, and its conversion would cost a pass of its own.
WIDENED_ON_CPU: dict[str, Callable[..., bool]] = {
    "max_pool": lambda x, window: True,
    "max_pool_argmax": lambda x, window, index_offset, nan: True,
    "adaptive_max_pool": lambda x, window: not window.is_global,
    "adaptive_max_pool_argmax": lambda x, window, nan: True,
}

_forced: str | None = None


def run(op: str, portable: Callable[..., Any], *args: Any) -> Any:
    """``portable(*args)``, or on a CPU the op's CPU program, where it has one for ``args``.

    ``args`` are the op's arguments: arrays, and hashable attributes such as a window.  Where
    both platforms run the same program it is traced once, with no choice in the program.
    """
    cpu = CPU_PROGRAMS[op](*args) or portable
    if args[0].dtype == jnp.bfloat16 and WIDENED_ON_CPU.get(op, lambda *_: False)(*args):
        cpu = _in_float32(cpu)
    if _forced == "portable":
        return portable(*args)
    if _forced == "cpu":
        return cpu(*args)
    if cpu is portable:
        return portable(*args)
    return lax.platform_dependent(cpu=lambda: cpu(*args), default=lambda: portable(*args))


def _in_float32(program: Callable[..., Any]) -> Callable[..., Any]:
    """``program`` run on its first argument widened to float32, its float32 outputs rounded
    back to that argument's dtype (its integer outputs, positions and indices, as they are)."""

    def widened(x: jax.Array, *rest: Any) -> Any:
        out = program(x.astype(jnp.float32), *rest)
        return jax.tree.map(lambda a: a.astype(x.dtype) if a.dtype == jnp.float32 else a, out)

    return widened


@contextlib.contextmanager
def force(program: str) -> Iterator[None]:
    """Runs every op's ``"portable"`` program, or its ``"cpu"`` program where it has one, on
    any platform, inside the ``with`` block.  Clears JAX's caches on entry and exit, so that
    no program compiled under another choice is reused."""
    global _forced
    if program not in PROGRAMS:
        raise ValueError(f"`program` (={program!r}) must be one of {list(PROGRAMS)}.")
    previous, _forced = _forced, program
    jax.clear_caches()
    try:
        yield
    finally:
        _forced = previous
        jax.clear_caches()
