"""The detection benchmark (``benchmarks/detection.py``) runs every path at tiny scale.

One ``--quick --check`` run: a two-level pyramid of a 100x136 image with 8 channels and a few
boxes; the box head forward (every contender: ``multilevel_roi_align``, the per-level calls,
the all-levels program, the gather floor, OpenVINO's extractor), the mask head
forward+backward (with its forward as a reference), and adaptive sampling under ``vmap``,
forward+backward.  The timings mean nothing here; the checks (``multilevel_roi_align``
against the per-level and all-levels programs), the targets, the results file and the
Performance page's table of it are what is tested.  The results go to ``tmp_path`` only.
About 30 s of CPU time (2 cores), most of it compiling.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

# openvino and matplotlib are in the test extra: a missing one fails, never skips.
import matplotlib  # noqa: F401
import openvino  # noqa: F401
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import benchmark_summary  # noqa: E402
import detection  # noqa: E402

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program


def _quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("detection")
    path, png = out / "detection.json", out / "detection.png"
    results = sorted(os.listdir(ROOT / "benchmarks" / "results"))
    argv = ["--quick", "--check", "--reps", "1", "--warmup", "1", "--min-stretch-ms", "0"]
    argv += ["--settle-ms", "0", "--json", str(path), "--plot", str(png)]
    status = detection.main(argv)
    assert sorted(os.listdir(ROOT / "benchmarks" / "results")) == results  # nothing written there
    with open(path) as f:
        return status, json.load(f), png


def _every_group_runs(status, result, png):
    assert status == 0
    assert result["meta"]["quick"] and result["meta"]["skipped"] == []
    assert [g["key"] for g in result["groups"]] == list(detection.QUICK)
    assert os.path.getsize(png) > 0
    table = detection.bench.markdown_table(result["groups"], detection.TABLE)
    assert len(table.splitlines()) == 2 + len(detection.QUICK)


def _every_contender_is_there(result):
    for g in result["groups"]:
        names = {r["contender"] for r in g["rows"]}
        for r in g["rows"]:
            assert r["rounds"] == 1 and r["median_s"] > 0, (g["key"], r["contender"])
        if g["op"] == "roi_align":
            assert names == {"sr=0-NCX", "sr=2-NCX", "sr=0-NXC", "sr=2-NXC"}
            continue
        for layout in ("NCX", "NXC"):
            want = {f"multilevel-{layout}", f"per-level-{layout}", f"all-levels-{layout}"}
            want |= {f"P{2 + lv}-{layout}" for lv, n in enumerate(g["boxes_per_level"]) if n}
            if g["mode"] == "fwd+bwd":
                want.add(f"multilevel-{layout} fwd")
            if "sr=0" in g["workload"]:
                want.add(f"multilevel-{layout} sr=2")
            assert want <= names, (g["key"], want - names)
        assert detection.FLOOR in names
        assert ("openvino" in names) == (g["mode"] == "fwd")
        compile_rows = [r for r in g["rows"] if r["contender"].startswith("multilevel-")]
        assert all(r["compile_s"] > 0 for r in compile_rows)
        first = [r for r in compile_rows if r["first_call_s"] is not None]
        assert {r["contender"] for r in first} == {"multilevel-NCX", "multilevel-NXC"}
        assert all(r["x_gather"] > 0 for r in g["rows"] if r["contender"] != detection.FLOOR)


def _every_target_is_measured(result):
    for g in result["groups"]:
        assert g["targets"], g["key"]
        assert {t["verdict"] for t in g["targets"]} <= {"PASS", "MISS"}, g["key"]
    labels = {t["label"] for g in result["groups"] for t in g["targets"]}
    for label in (
        "multilevel-NCX / per-level-NCX",
        "multilevel-NXC / gather floor",
        "multilevel-NCX / openvino",
        "multilevel-NCX / multilevel-NXC",
        "multilevel-NXC / multilevel-NXC fwd",
        "multilevel-NCX compile",
        "sr=0-NXC / sr=2-NXC",
    ):
        assert label in labels


def _every_check_passes(result):
    for g in result["groups"]:
        if g["op"] == "multilevel_roi_align":
            # per-level and all-levels in both layouts, NXC against NCX, the floor's values
            assert len(g["checks"]) == (6 if g["mode"] == "fwd" else 5), g["key"]
        assert all(c["ok"] for c in g["checks"]), g["key"]
    assert result["meta"]["checks_failed"] == 0


def _performance_summary_takes_every_target(result):
    results = next(r for r in benchmark_summary.RESULTS if r.key == "detection_cpu")
    table, met, total = benchmark_summary.summary_table(results, result)
    targets = [t for g in result["groups"] for t in g["targets"]]
    assert total == len(targets)
    assert met == sum(t["verdict"] == "PASS" for t in targets)
    # every row but the adaptive sampling on the pyramid, whose groups are not among QUICK
    assert len(table.splitlines()) == 2 + len(results.rows) - 1


# One run, and every check of it in one test: a module fixture would run once per xdist
# worker.
def test_quick_run(tmp_path_factory):
    status, result, png = _quick_run(tmp_path_factory)
    _every_group_runs(status, result, png)
    _every_contender_is_there(result)
    _every_target_is_measured(result)
    _every_check_passes(result)
    _performance_summary_takes_every_target(result)
