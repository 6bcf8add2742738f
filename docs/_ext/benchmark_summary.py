"""The Performance page's summary: one short table of targets per committed results file.

Every figure comes from the JSON that ``benchmarks/bench.py``, ``benchmarks/training.py`` and
``benchmarks/detection.py`` write (each group's ``targets``: ``label``, ``value``, ``limit``,
``unit``, ``verdict``), so the table cannot disagree with the committed results.  Targets are
gathered into a few rows per file (``BENCH_ROWS``, ``TRAINING_ROWS``, ``DETECTION_ROWS``); a
target that no row takes fails the build, so that a new target is never left out silently.  A
results file that is not required and not committed yet gets a line saying how to write it.
Why a row misses is written by hand in ``WHY``, taken from the known misses of
``benchmarks/README.md``; a miss with no entry there reads "not analysed".
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from collections.abc import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Row:
    """A family of targets: those of ``ops`` (any op if empty) in ``mode`` (any if empty)
    whose label matches ``label`` (a regular expression searched in it)."""

    key: str
    title: str
    label: str
    ops: tuple[str, ...] = ()
    mode: str = ""

    def takes(self, group: dict, label: str) -> bool:
        return (
            (not self.ops or group.get("op") in self.ops)
            and (not self.mode or group.get("mode") == self.mode)
            and re.search(self.label, label) is not None
        )


BENCH_ROWS = [
    Row("max", "`max_pool`, values", r"^jaxpool / reduce_window$", ("max_pool",), "fwd"),
    Row(
        "max+idx",
        "`max_pool` with indices (the lower limit: NCX without padding)",
        r"^jaxpool\+idx / reduce_window$",
        ("max_pool",),
    ),
    Row("max+idx torch", "`max_pool` with indices", r"^jaxpool\+idx / torch-", ("max_pool",)),
    Row(
        "max+idx floor",
        "`max_pool` with indices (VGG, 3-D, 1-D)",
        r"memory floor$",
        ("max_pool",),
    ),
    Row("max bwd", "`max_pool` forward+backward", r"/ grad\(reduce_window\)$", ("max_pool",)),
    Row("max bwd torch", "`max_pool` forward+backward", r"/ torch-", ("max_pool",), "fwd+bwd"),
    Row("avg", "`avg_pool`", r"/ reduce_window$", ("avg_pool",)),
    Row("lp", "`lp_pool`", r"/ (grad\()?reduce_window\)?$", ("lp_pool",)),
    Row(
        "adaptive max",
        "`adaptive_max_pool` 50×50 → 16×16 with indices",
        r"/ torch-",
        ("adaptive_max_pool",),
    ),
    Row("adaptive avg", "`adaptive_avg_pool` 50×50 → 16×16", r"/ torch-", ("adaptive_avg_pool",)),
    Row("compile", "compile time, every op", r" compile$"),
    Row("temp", "XLA temp memory, every op", r"XLA temp"),
]

TRAINING_ROWS = [
    Row("floor", "forward, values, every op", r"^jaxpool time / memory floor$", mode="fwd"),
    Row("idx floor", "forward with indices", r"^jaxpool\+idx time / memory floor$"),
    Row("bwd torch", "forward+backward, every op", r"/ torch-", mode="fwd+bwd"),
    Row("bwd floor", "forward+backward, every op", r"memory floor$", mode="fwd+bwd"),
    Row("compile", "compile time, every op", r" compile$"),
    Row("resnet", "ResNet-18 training step, jaxpool's pools", r"pools step"),
]


# The region pooling of detection models (benchmarks/detection.py): both layouts in each group,
# the layout in each target's label.
DETECTION_ROWS = [
    Row("per-level", "`multilevel_roi_align`, box and mask heads", r"/ per-level-N(?:CX|XC)$"),
    Row("openvino", "`multilevel_roi_align` forward, NCX", r"/ openvino$"),
    Row("gather", "`multilevel_roi_align`", r"/ gather floor$"),
    Row("layout", "`multilevel_roi_align` on NCX features", r"^multilevel-NCX / multilevel-NXC$"),
    Row("bwd", "`multilevel_roi_align` forward+backward", r"/ multilevel-N(?:CX|XC) fwd$"),
    Row(
        "adaptive",
        "`multilevel_roi_align(sampling_ratio=0)` on the Mask R-CNN boxes",
        r"/ multilevel-N(?:CX|XC) sr=2$",
    ),
    Row(
        "small bins",
        "`roi_align(sampling_ratio=0)`, adaptive counts ≤ 2, with and without `vmap`",
        r"^sr=0-N(?:CX|XC) / sr=2-N(?:CX|XC)$",
        ("roi_align",),
    ),
    Row("compile", "`multilevel_roi_align` compile time (`lower` + `compile`)", r" compile$"),
]


def _group_name(group: dict, target: dict) -> str:
    return " ".join(group[k] for k in ("workload", "layout", "dtype") if group.get(k))


def _detection_name(group: dict, target: dict) -> str:
    """The group's key and the layout its target names (both layouts share a group)."""
    layout = re.search(r"N(?:CX|XC)", target["label"])
    return f"{group['key']} {layout.group(0)}" if layout else group["key"]


@dataclasses.dataclass(frozen=True)
class Results:
    """A results file and how the page names it; ``command`` writes it where it is not
    ``required`` to be committed yet; ``name`` names a group (and target) among the misses."""

    key: str
    path: str
    title: str
    rows: Sequence[Row]
    required: bool = True
    command: str = ""
    name: Callable[[dict, dict], str] = _group_name


RESULTS = [
    Results("cpu", "benchmarks/results/latest.json", "CPU", BENCH_ROWS),
    Results(
        "training_cpu",
        "benchmarks/results/training_cpu.json",
        "CPU, training scale (`--scale cpu`)",
        TRAINING_ROWS,
    ),
    Results("gpu", "benchmarks/results/gpu.json", "GPU, from an earlier revision", BENCH_ROWS),
    Results(
        "training_gpu",
        "benchmarks/results/training_gpu.json",
        "GPU (one H200), training scale",
        TRAINING_ROWS,
    ),
    Results(
        "detection_cpu",
        "benchmarks/results/detection_cpu.json",
        "CPU, region pooling in detection models",
        DETECTION_ROWS,
        required=False,
        command="python benchmarks/detection.py --json benchmarks/results/detection_cpu.json",
        name=_detection_name,
    ),
    Results(
        "detection_gpu",
        "benchmarks/results/detection_gpu.json",
        "GPU (one H200), region pooling in detection models",
        DETECTION_ROWS,
        name=_detection_name,
    ),
]

# Why a family misses, from the "Known misses" and GPU sections of benchmarks/README.md.
_CPU_TARGET_ON_GPU = "a CPU target: on this GPU every op runs at its memory or dispatch floor"
_GPU_TARGET_ON_CPU = "a GPU target: XLA's CPU loops stay well above an in-place copy"
_PYRAMID_COPY = (
    "every call copies the whole pyramid onto one channels-last map whatever the boxes, where "
    "the per-level calls read each level in place: on the box head the copy alone takes "
    "longer than every per-level call together.  Reading each level in place with static "
    "shapes means a loop over each level's boxes (a run-time trip count), which measured "
    "slower than the copy on this CPU"
)
WHY = {
    ("detection_cpu", "per-level"): _PYRAMID_COPY,
    ("detection_cpu", "openvino"): _PYRAMID_COPY,
    ("detection_cpu", "gather"): _PYRAMID_COPY + "; the floor reads the levels in place",
    ("detection_cpu", "layout"): (
        "NCX levels are transposed as they are copied onto the channels-last map, a slower "
        "pass than the NXC copy, and the output is transposed back"
    ),
    ("detection_cpu", "compile"): (
        "adaptive sampling compiles every program it may choose at run time (up to 8 on a "
        "P2 map: one fused, then loops over 1, 2 x 2, 4 x 4, ... tiles); a fixed ratio "
        "compiles one"
    ),
    ("detection_cpu", "adaptive"): (
        "the largest count among the boxes sets every box's program: one elongated box with "
        "5 or 6 samples per axis puts all 1000 boxes in the 2 x 2 tiles loop"
    ),
    ("detection_cpu", "small bins"): (
        "the adaptive program reads 3 x 3 elements per bin where 2 x 2 samples read 16, but "
        "its weights are summed per bin first, a pass of its own"
    ),
    ("detection_cpu", "bwd"): (
        "the gradient scatters into the pyramid's single map, then copies each level out"
    ),
    ("cpu", "max+idx floor"): (
        "the input is read twice (positions, then exact values): XLA's CPU backend makes no "
        "loop with two outputs; the 1-D outputs fault their pages in on every call"
    ),
    ("cpu", "avg"): (
        "its output faulted its pages in on every call in this run; without faults it runs "
        "near the memory floor"
    ),
    ("cpu", "max bwd torch"): (
        "XLA does not vectorise the backward's loop; on the stem, windows overlap and the "
        "gradient faults its pages in on every call"
    ),
    ("training_gpu", "floor"): (
        "where `reduce_window`, `jnp.max` or `jnp.mean` compute the same values jaxpool takes "
        "their time (0.99-1.07x): bfloat16 windows that overlap (k3 s2) run at the float32 "
        "time, and the global pools' 25-51 MB move in less than a call's dispatch "
        "(0.03-0.045 ms); the adaptive pools, with no XLA peer, take 0.37-0.55x PyTorch's "
        "CUDA time"
    ),
    ("training_gpu", "idx floor"): (
        "the positions are a second output; the global pools are bound by dispatch; every "
        "one takes 0.08-0.70x PyTorch's CUDA time with its indices"
    ),
    ("training_gpu", "bwd floor"): (
        "the backward of a max finds each window's maximum again before it scatters; every "
        "miss takes 0.09-0.55x PyTorch's CUDA time and at most `jax.grad(reduce_window)`'s "
        "(0.27-1.07x)"
    ),
    ("detection_gpu", "gather"): (
        "the floor reads each level in place; jaxpool first copies the pyramid onto one "
        "channels-last map (NXC), or transposes it there (NCX), a pass over 150 MB that takes "
        "longer than the gathers on this GPU"
    ),
    ("detection_gpu", "layout"): (
        "measured before the ROI ops constrained their channels-last map to a row-major "
        "layout: XLA's GPU layout assignment had turned the transposition into a layout of the "
        "gathers' operand, which then read every channel vector with a stride of H x W; with "
        "the constraint, in the same rounds, the box head took 1.9x NXC forward and 1.06x "
        "forward+backward (12.3x and 5.0x without)"
    ),
    ("detection_gpu", "compile"): (
        "adaptive sampling compiles every program it may choose at run time; a fixed ratio "
        "compiles one"
    ),
    ("detection_gpu", "adaptive"): (
        "the largest count among the boxes sets every box's program (NXC); NCX meets it "
        "because its transposition dominates both"
    ),
    ("detection_gpu", "small bins"): (
        "`sampling_ratio=2` in NXC takes 0.05 ms, the dispatch floor; the adaptive program "
        "adds the pass that sums each bin's weights and the choice of program, 0.04-0.13 ms "
        "more"
    ),
    ("training_cpu", "floor"): _GPU_TARGET_ON_CPU,
    ("training_cpu", "idx floor"): _GPU_TARGET_ON_CPU,
    ("training_cpu", "bwd floor"): _GPU_TARGET_ON_CPU,
    ("gpu", "max"): "a CPU target: on this GPU `reduce_window` is the same program",
    ("gpu", "max+idx"): (
        "a CPU target: `reduce_window` runs at the memory floor here, and the indices add "
        "bytes to write"
    ),
    ("gpu", "max+idx torch"): _CPU_TARGET_ON_GPU,
    ("gpu", "max bwd"): "a CPU target: on this GPU it would take less than the memory floor",
    ("gpu", "max bwd torch"): _CPU_TARGET_ON_GPU,
    ("gpu", "avg"): "a CPU target: on this GPU `reduce_window` runs at the memory floor",
    ("gpu", "adaptive max"): _CPU_TARGET_ON_GPU,
    ("gpu", "adaptive avg"): _CPU_TARGET_ON_GPU,
}
NOT_ANALYSED = "not analysed"

PEERS = {
    "reduce_window": "`reduce_window`",
    "grad(reduce_window)": "`jax.grad(reduce_window)`",
    "torch-NCHW": "PyTorch NCHW",
    "torch-CL": "PyTorch channels-last",
    "memory floor": "the memory floor",
    "flax pools step": "Flax's",
    "per-level-NCX": "the per-level sum",
    "per-level-NXC": "the per-level sum",
    "openvino": "OpenVINO's ExperimentalDetectronROIFeatureExtractor",
    "gather floor": "the gather floor",
    "multilevel-NXC": "NXC",
    "multilevel-NCX fwd": "its forward",
    "multilevel-NXC fwd": "its forward",
    "multilevel-NCX sr=2": "`sampling_ratio=2`",
    "multilevel-NXC sr=2": "`sampling_ratio=2`",
    "sr=2-NCX": "`sampling_ratio=2`",
    "sr=2-NXC": "`sampling_ratio=2`",
}
# Misses named one by one in the table; more are counted only, to keep the rows short.
NAMED_MISSES = 3


def _part(group: dict, target: dict) -> tuple[str, float]:
    """What a target compares, with its limit (the target column of its row), and the limit
    to order the parts of a row by (none for XLA temp, whose limit is each group's size)."""
    label, limit = target["label"], target["limit"]
    if target["unit"] == "s":
        return f"≤ {limit:g} s {group['mode']}", limit
    if "XLA temp" in label:
        return f"≤ {label.split('<= ')[-1]} ({group['mode']})", 0.0
    peer = label.split(" / ")[-1]
    return f"≤ {limit:g}× {PEERS.get(peer, f'`{peer}`')}", limit


def _measured(values: list[float], unit: str) -> str:
    digits = ".1f" if unit == "MiB" else ".2f"
    low, high = f"{min(values):{digits}}", f"{max(values):{digits}}"
    text = low if low == high else f"{low}–{high}"
    return text if unit == "x" else f"{text} {unit}"


def summary_table(results: Results, data: dict) -> tuple[str, int, int]:
    """The markdown table of one results file, and how many of its targets are met, of all."""
    rows: dict[str, dict] = {row.key: {"parts": {}, "met": 0, "missed": []} for row in results.rows}
    for group in data["groups"]:
        for target in group["targets"]:
            if target["value"] is None:  # a contender that did not run: no verdict
                continue
            row = next((r for r in results.rows if r.takes(group, target["label"])), None)
            if row is None:
                raise ValueError(
                    f"{results.path}: no row of the Performance summary takes the target "
                    f"{target['label']!r} of {group.get('key') or results.name(group, target)}; "
                    "add one in docs/_ext/benchmark_summary.py"
                )
            entry = rows[row.key]
            text, order = _part(group, target)
            part = entry["parts"].setdefault(text, (order, target["unit"], []))
            part[2].append(target["value"])
            if target["verdict"] == "PASS":
                entry["met"] += 1
            else:
                entry["missed"].append(results.name(group, target))
    lines = ["| target | measured | met? | why missed |", "| --- | --- | --- | --- |"]
    met = total = 0
    for row in results.rows:
        entry = rows[row.key]
        missed = entry["missed"]
        count = entry["met"] + len(missed)
        if not count:
            continue
        met, total = met + entry["met"], total + count
        parts = sorted(entry["parts"].items(), key=lambda item: item[1][0])
        target = f"{row.title}: " + "; ".join(text for text, _ in parts)
        measured = "; ".join(_measured(values, unit) for _, (_, unit, values) in parts)
        if not missed:
            verdict, why = f"met ({count})", ""
        else:
            verdict = f"**missed** {len(missed)} of {count}"
            if len(missed) <= NAMED_MISSES:
                verdict += ": " + ", ".join(missed)
            why = WHY.get((results.key, row.key), NOT_ANALYSED)
        lines.append(f"| {target} | {measured} | {verdict} | {why} |")
    return "\n".join(lines) + "\n", met, total


def _describe(meta: dict) -> str:
    device = meta.get("device", "")
    if device == "cpu":
        device = f"{meta['threads']} threads, " if meta.get("threads") else ""
    else:
        device += ", "
    dtypes = f"{' and '.join(meta['dtypes'])}, " if meta.get("dtypes") else ""
    return f"{device}{dtypes}jax {meta['jax']}, medians of {meta['rounds']} paired rounds"


def summary(root: pathlib.Path) -> str:
    """The markdown of every results file's table, each under a heading of its own."""
    out = []
    for results in RESULTS:
        path = root / results.path
        if not results.required and not path.exists():
            out += [
                f"## {results.title}: not measured yet\n",
                f"`{results.path}` is written by `{results.command}`.\n",
            ]
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        table, met, total = summary_table(results, data)
        unmeasured = sum(t["value"] is None for g in data["groups"] for t in g["targets"])
        more = (
            f" {unmeasured} more have no value: a program they compare was left out of the run."
            if unmeasured
            else ""
        )
        out += [
            f"## {results.title}: {met} of {total} targets met\n",
            f"`{results.path}`: {_describe(data['meta'])}.{more}\n",
            table,
        ]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The headline: jaxpool against each peer, one median ratio per results file and mode.
# --------------------------------------------------------------------------------------------

# (peer as the table names it, results files' stem without the platform, the peer contenders
# whose rows compare against jaxpool).  Each cell is the median of those rows' paired ratios
# (jaxpool / peer, per round) over the groups of one mode in one file: one run.
HEADLINE_PEERS = [
    (
        "`lax.reduce_window` (what Flax's pools call) and its gradient",
        "training",
        ("reduce_window", "grad(reduce_window)"),
    ),
    ("Flax's pools in a ResNet-18 training step", "training", ("flax pools",)),
    ("PyTorch, NCHW", "training", ("torch-NCHW",)),
    ("PyTorch, channels-last", "training", ("torch-CL",)),
    ("OpenVINO's ROI feature extractor (box and mask heads)", "detection", ("openvino",)),
    ("torchvision's `MultiScaleRoIAlign`", "detection", ("torchvision",)),
]
HEADLINE_PLATFORMS = (("cpu", "CPU"), ("gpu", "GPU"))


def _headline_cell(data: dict | None, mode: str, peers: Sequence[str]) -> str:
    if data is None:
        return "not measured"
    ratios = sorted(
        row["ratio"]
        for group in data["groups"]
        # A training step (a group without a mode) is a forward and a backward pass.
        if group.get("mode", "fwd+bwd") == mode
        for row in group["rows"]
        if row.get("contender") in peers and row.get("ratio") is not None
    )
    if not ratios:
        return "-"
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return f"{median:.2f}x ({len(ratios)})"


def headline(root: pathlib.Path) -> str:
    """The Performance page's first table: jaxpool's time over each peer's, per platform and
    mode, from the committed results (below 1: jaxpool is faster)."""
    files: dict[tuple[str, str], dict | None] = {}
    devices = {}
    for stem in {stem for _, stem, _ in HEADLINE_PEERS}:
        for platform, _ in HEADLINE_PLATFORMS:
            path = root / "benchmarks" / "results" / f"{stem}_{platform}.json"
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
            files[stem, platform] = data
            if data is not None:
                devices.setdefault(platform, data["meta"].get("device", platform))
    named = {p: "" if d == "cpu" else f" ({d})" for p, d in devices.items()}
    columns = [
        (platform, mode, f"{label}{named.get(platform, '')} {mode}")
        for platform, label in HEADLINE_PLATFORMS
        for mode in ("fwd", "fwd+bwd")
    ]
    lines = [
        "| jaxpool's time over | " + " | ".join(title for *_, title in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for peer, stem, contenders in HEADLINE_PEERS:
        cells = [_headline_cell(files[stem, p], mode, contenders) for p, mode, _ in columns]
        lines.append(f"| {peer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
