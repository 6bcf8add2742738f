"""The pictures of the Semantics page, drawn from what jaxpool computes.

Each picture shows one spatial axis: the input elements (white, numbered), the padding
(grey, hatched) and, one row per output, the window that output reads.  The windows are drawn
from the formulas of the Semantics page, and every picture first checks them against jaxpool:
the number of outputs against the shape jaxpool returns, and the input elements each window
covers against the elements that change that output (an average pool of one-hot inputs).
"""

from __future__ import annotations

import math
import pathlib

import matplotlib

matplotlib.use("Agg")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import jaxpool  # noqa: E402

NAMES = ("rounding.png", "auto_pad.png", "adaptive.png")
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def _covers(pool, length: int) -> np.ndarray:
    """``covers[j, o]``: input element ``j`` changes output ``o`` (one-hot inputs, batched)."""
    eye = jnp.eye(length, dtype=jnp.float32).reshape(length, 1, length)
    return np.asarray(jax.jit(pool)(eye))[:, 0, :] != 0


def _sliding(length, kernel, stride, begin, end, rounding="floor", auto_pad="explicit"):
    """The windows ``(start, stop)`` of a pool with these attributes, checked against jaxpool."""
    if auto_pad == "valid":
        begin = end = 0
    elif auto_pad in ("same_upper", "same_lower"):
        total = max(0, (math.ceil(length / stride) - 1) * stride + kernel - length)
        small, large = total // 2, total - total // 2
        begin, end = (small, large) if auto_pad == "same_upper" else (large, small)
    span = (length + begin + end - kernel) / stride
    count = (math.ceil(span) if rounding != "floor" else math.floor(span)) + 1
    if rounding == "ceil_torch" and (count - 1) * stride >= length + begin:
        count -= 1  # the last window would start in the end padding
    windows = [(o * stride - begin, o * stride - begin + kernel) for o in range(count)]

    def pool(x):
        return jaxpool.avg_pool(
            x, kernel, stride, begin, end, rounding_type=rounding, auto_pad=auto_pad
        )

    covers = _covers(pool, length)
    assert covers.shape[1] == count, (length, kernel, stride, rounding, auto_pad, covers.shape)
    for o, (start, stop) in enumerate(windows):
        expected = [max(start, 0) <= j < min(stop, length) for j in range(length)]
        assert covers[:, o].tolist() == expected, (o, start, stop, covers[:, o])
    return windows, begin, end


def _adaptive(length, size):
    """The bins ``[floor(i L / O), ceil((i + 1) L / O))``, checked against jaxpool."""
    bins = [(i * length // size, -(-(i + 1) * length // size)) for i in range(size)]
    covers = _covers(lambda x: jaxpool.adaptive_avg_pool(x, size), length)
    for o, (start, stop) in enumerate(bins):
        assert covers[:, o].tolist() == [start <= j < stop for j in range(length)], (o, bins)
    return bins


def _panel(ax, title, length, begin, end, windows, xlim):
    for j in range(-begin, length + end):
        pad = not 0 <= j < length
        ax.add_patch(
            Rectangle(
                (j, 0),
                1,
                1,
                facecolor="#dddddd" if pad else "white",
                edgecolor="black",
                hatch="//" if pad else None,
                lw=1,
            )
        )
        ax.text(
            j + 0.5,
            0.5,
            "pad" if pad else str(j),
            ha="center",
            va="center",
            fontsize=7 if pad else 9,
        )
    for o, (start, stop) in enumerate(windows):
        y = -0.75 * (o + 1)
        color = COLORS[o % len(COLORS)]
        ax.add_patch(
            Rectangle(
                (start + 0.08, y),
                stop - start - 0.16,
                0.5,
                facecolor=color,
                alpha=0.85,
                edgecolor="none",
            )
        )
        ax.text(
            (start + stop) / 2,
            y + 0.25,
            f"y[{o}]",
            color="white",
            ha="center",
            va="center",
            fontsize=8,
            fontweight="bold",
        )
    lowest = -0.75 * max(len(windows), 1)
    ax.set_xlim(*xlim)
    ax.set_ylim(lowest - 0.2, 1.15)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=9, loc="left")


def draw_rounding(path: pathlib.Path) -> None:
    """``floor``, ``ceil`` and ``ceil_torch`` on two inputs."""
    cases = [(6, 3, 2, 1, 1), (5, 2, 2, 1, 1)]
    fig, axes = plt.subplots(3, 2, figsize=(7.5, 6.6))
    for col, (length, kernel, stride, begin, end) in enumerate(cases):
        for row, rounding in enumerate(("floor", "ceil", "ceil_torch")):
            windows, b, e = _sliding(length, kernel, stride, begin, end, rounding)
            title = f'rounding_type="{rounding}": {len(windows)} outputs'
            if row == 0:
                case = f"L={length}, kernel={kernel}, strides={stride}, pads {begin},{end}"
                title = f"{case}\n\n{title}"
            _panel(axes[row, col], title, length, b, e, windows, (-1.2, 7.6))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_auto_pad(path: pathlib.Path) -> None:
    """``valid``, ``same_upper`` and ``same_lower``."""
    length, kernel, stride = 6, 3, 2
    modes = [
        ("valid", "floor"),
        ("same_upper", "floor"),
        ("same_lower", "floor"),
        ("valid", "ceil"),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(7.5, 4.6))
    for ax, (auto_pad, rounding) in zip(axes.flat, modes):
        windows, b, e = _sliding(length, kernel, stride, 0, 0, rounding, auto_pad)
        title = f'"{auto_pad}", "{rounding}": pads {b},{e}; {len(windows)} outputs'
        _panel(ax, title, length, b, e, windows, (-1.2, length + 1.2))
    fig.suptitle(
        f"auto_pad and rounding_type, L={length}, kernel={kernel}, strides={stride}", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_adaptive(path: pathlib.Path) -> None:
    """Adaptive bins, overlapping when ``L`` is not a multiple of ``O``, and ``O > L``."""
    cases = [(5, 3), (7, 3), (3, 5)]
    fig, axes = plt.subplots(1, 3, figsize=(7.5, 2.6))
    for ax, (length, size) in zip(axes, cases):
        bins = _adaptive(length, size)
        _panel(ax, f"L={length}, output_size={size}", length, 0, 0, bins, (-0.2, 7.2))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_all(out: pathlib.Path) -> None:
    draw_rounding(out / "rounding.png")
    draw_auto_pad(out / "auto_pad.png")
    draw_adaptive(out / "adaptive.png")


if __name__ == "__main__":
    draw_all(pathlib.Path("."))
