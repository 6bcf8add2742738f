"""The picture of the Detection page: the pyramid level each level rule gives a box.

The steps are drawn from the three formulas of ``jaxpool.multilevel_roi_align`` (written out
below in NumPy, as the Detection page states them), for a box of any size: the x axis is
``sqrt(area)`` in image pixels, the y axis the map the box is pooled on.  Where jaxpool has
``multilevel_roi_align``, the levels are first checked against it: each map of a pyramid
holds one constant value, its number, and a box pooled to one sample reads the number of the
map it was pooled on.
"""

from __future__ import annotations

import math
import pathlib

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import jaxpool  # noqa: E402

NAMES = ("fpn_levels.png",)
RULES = ("torchvision", "detectron2", "openvino")
STYLES = {
    "torchvision": {"color": "#1f77b4", "lw": 2.6, "offset": 0.08},
    "detectron2": {"color": "#ff7f0e", "lw": 2.0, "ls": (0, (5, 2)), "offset": 0.0},
    "openvino": {"color": "#2ca02c", "lw": 2.0, "ls": (0, (1, 1.5)), "offset": -0.08},
}
# The pyramids drawn: the usual FPN maps P2 to P5, and a pyramid that starts one level
# coarser (P3 to P6), where the OpenVINO runtime's rule, which counts from the first map,
# leaves the other two.
PYRAMIDS = ((1 / 4, 1 / 8, 1 / 16, 1 / 32), (1 / 8, 1 / 16, 1 / 32, 1 / 64))
CANONICAL_SIZE = 224
CANONICAL_LEVEL = 4


def level(
    side: np.ndarray,
    rule: str,
    spatial_scales: tuple[float, ...],
    canonical_size: float = CANONICAL_SIZE,
    canonical_level: int = CANONICAL_LEVEL,
) -> np.ndarray:
    """The index in ``spatial_scales`` of the map a box of ``sqrt(area)`` ``side`` pools on."""
    side = np.asarray(side, np.float64)
    if rule == "openvino":
        index = np.floor(2 + np.log2(side / 224 + 1e-6))
        return np.clip(index, 0, len(spatial_scales) - 1).astype(int)
    if rule == "torchvision":
        k = np.floor(canonical_level + np.log2(side / canonical_size) + 1e-6)
    elif rule == "detectron2":
        k = np.floor(canonical_level + np.log2(side / canonical_size + 1e-8))
    else:
        raise ValueError(f"`rule` (={rule!r}) must be one of {RULES}.")
    k_min, k_max = (round(-math.log2(s)) for s in (spatial_scales[0], spatial_scales[-1]))
    return (np.clip(k, k_min, k_max) - k_min).astype(int)


def thresholds(rule: str, spatial_scales: tuple[float, ...]) -> list[float]:
    """The sizes at which ``rule`` moves a box to the next map, from ``level`` itself."""
    sides = np.geomspace(1, 1 << 14, 14 * 4096 + 1)  # steps of 2 ** (1 / 4096)
    levels = level(sides, rule, spatial_scales)
    return [float(sides[i + 1]) for i in np.flatnonzero(np.diff(levels))]


def jaxpool_level(side: np.ndarray, rule: str, spatial_scales: tuple[float, ...]) -> np.ndarray:
    """The map ``jaxpool.multilevel_roi_align`` pools a square of each ``side`` on."""
    import jax.numpy as jnp

    image = 1 << 11
    features = [
        jnp.full((1, 1, round(image * s), round(image * s)), float(i + 1), jnp.float32)
        for i, s in enumerate(spatial_scales)
    ]
    centre = image / 2
    side = np.asarray(side, np.float32)
    rois = np.stack([centre - side / 2, centre - side / 2, centre + side / 2, centre + side / 2])
    pooled = jaxpool.multilevel_roi_align(
        features,
        jnp.asarray(rois.T),
        jnp.zeros(len(side), jnp.int32),
        1,
        spatial_scales=spatial_scales,
        sampling_ratio=1,
        level_rule=rule,
        canonical_size=CANONICAL_SIZE,
        canonical_level=CANONICAL_LEVEL,
    )
    return np.asarray(pooled).reshape(-1).round().astype(int) - 1


def check_against_jaxpool() -> None:
    """The formulas give the levels ``jaxpool.multilevel_roi_align`` uses (when it exists),
    on sizes from 16 to 1024 pixels, none within half a percent of a threshold."""
    if not hasattr(jaxpool, "multilevel_roi_align"):
        return
    sides = np.geomspace(16, 1024, 61)
    for spatial_scales in PYRAMIDS:
        for rule in RULES:
            want = level(sides, rule, spatial_scales)
            got = jaxpool_level(sides, rule, spatial_scales)
            if not np.array_equal(got, want):
                wrong = np.flatnonzero(got != want)
                raise RuntimeError(
                    f"level rule {rule!r} on the maps {spatial_scales}: jaxpool pools boxes of "
                    f"sqrt(area) {sides[wrong].round(1).tolist()} on maps {got[wrong].tolist()}, "
                    f"the formula gives {want[wrong].tolist()}"
                )


def _map_name(scale: float) -> str:
    k = round(-math.log2(scale))
    return f"P{k}  (1/{1 << k})"


def _panel(ax, spatial_scales: tuple[float, ...], title: str) -> None:
    sides = np.geomspace(16, 1024, 4001)
    for rule in RULES:
        style = dict(STYLES[rule])
        offset = style.pop("offset")
        ax.step(
            sides, level(sides, rule, spatial_scales) + offset, where="post", label=rule, **style
        )
    first = {}
    for rule in RULES:
        for t in thresholds(rule, spatial_scales):
            if 16 < t < 1024:
                first.setdefault(round(t), []).append(rule)
    for t, rules in sorted(first.items()):
        ax.axvline(t, color="#999999", lw=0.8, ls=":", zorder=0)
        # A threshold of only some of the rules names them; the last one's label goes left.
        names = "" if len(rules) == len(RULES) else "\n" + ",\n".join(rules)
        right = t > 600
        ax.annotate(
            f"{t}{names}",
            (t, len(spatial_scales) - 0.45),
            xytext=(-3 if right else 3, 0),
            textcoords="offset points",
            fontsize=7,
            ha="right" if right else "left",
            va="top",
            color="#444444",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlim(16, 1024)
    ticks = [16, 32, 64, 112, 224, 448, 896]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yticks(range(len(spatial_scales)), [_map_name(s) for s in spatial_scales])
    ax.set_ylim(-0.4, len(spatial_scales) - 0.1)
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(axis="y", color="#eeeeee")


def draw_levels(path: pathlib.Path) -> None:
    """The map of each box size under each rule, on both pyramids."""
    check_against_jaxpool()
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 6.4), sharex=True)
    _panel(
        axes[0],
        PYRAMIDS[0],
        "spatial_scales=(1/4, 1/8, 1/16, 1/32): the three rules agree",
    )
    _panel(
        axes[1],
        PYRAMIDS[1],
        "spatial_scales=(1/8, 1/16, 1/32, 1/64): openvino counts from the first map",
    )
    axes[0].legend(loc="lower right", fontsize=8, title="level_rule", title_fontsize=8)
    axes[1].set_xlabel("sqrt(area) of the box, image pixels")
    for ax in axes:
        ax.set_ylabel("pooled on")
    fig.suptitle(
        f"The map each box is pooled on (canonical_size={CANONICAL_SIZE}, "
        f"canonical_level={CANONICAL_LEVEL})",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_all(out: pathlib.Path) -> None:
    draw_levels(out / "fpn_levels.png")


if __name__ == "__main__":
    draw_all(pathlib.Path("."))
