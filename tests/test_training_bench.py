"""The training-scale benchmark (``benchmarks/training.py``) runs every path at tiny scale.

One run at ``--scale tiny`` with ``--check`` of one group per path (``GROUPS``): every op
forward and forward+backward, the layouts spread over them, against ``reduce_window``/
``jnp.max``/``jnp.mean`` and PyTorch on the CPU, indices where the op has them, and the ResNet-18
training step with Flax's pools and jaxpool's; bfloat16 only (float32 runs the same programs).
The other groups (more kernels and ranks of the same contenders) are left to full runs, to keep
the suite short.  jaxpool runs its portable programs, the ones a GPU runs.  The timings mean
nothing here; the checks (every contender's outputs against jaxpool's) and the results file are
what is tested.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import re
import sys

# torch, flax and optax are in the test extra: a missing one fails, never skips.
import flax  # noqa: E402, F401
import matplotlib  # noqa: E402, F401
import optax  # noqa: E402, F401
import pytest
import torch  # noqa: E402, F401

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import training  # noqa: E402
from bench import LAYOUTS, MODES  # noqa: E402

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program

# One group per path: every op in both modes and both layouts among them, each peer (PyTorch
# in both layouts, ``reduce_window``, the XLA reduction and their gradients), the indices of
# both max ops, and the ResNet-18 step.
GROUPS = (
    "stem/NCX/fwd/bf16",
    "stem/NXC/fwd+bwd/bf16",
    "avg_stem/NXC/fwd/bf16",
    "avg_stem/NCX/fwd+bwd/bf16",
    "adaptive_max/NXC/fwd/bf16",
    "adaptive_max/NCX/fwd+bwd/bf16",
    "adaptive_avg/NCX/fwd/bf16",
    "adaptive_avg/NXC/fwd+bwd/bf16",
    "global_max/NCX/fwd/bf16",
    "global_avg/NXC/fwd+bwd/bf16",
    "resnet18/bf16",
)


def _tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("training")
    path, png = out / "training.json", out / "training.png"
    argv = ["--scale", "tiny", "--reps", "1", "--warmup", "1", "--min-stretch-ms", "0"]
    argv += ["--settle-ms", "0", "--check", "--program", "portable", "--dtype", "bf16"]
    argv += ["--only", "^(" + "|".join(map(re.escape, GROUPS)) + ")$"]
    argv += ["--json", str(path), "--plot", str(png)]
    status = training.main(argv)
    with open(path) as f:
        return status, json.load(f), png


def _every_group_runs(status, result, png):
    assert result["errors"] == []
    assert status == 0
    keys = [g["key"] for g in result["groups"]]
    assert sorted(keys) == sorted(GROUPS) and set(GROUPS) <= set(training.group_keys())
    pools = [g for g in result["groups"] if g["workload"] != "resnet18"]
    ops = {wl.op for wl, _ in training.WORKLOADS}
    assert {(g["op"], g["mode"]) for g in pools} == set(itertools.product(ops, MODES))
    assert {(g["layout"], g["mode"]) for g in pools} == set(itertools.product(LAYOUTS, MODES))
    assert result["meta"]["scale"] == "tiny"
    assert result["meta"]["torch_device"] == "cpu"
    assert os.path.getsize(png) > 0
    table = training.markdown_table(result["groups"])
    assert len(table.splitlines()) == 2 + len(keys)


def _every_contender_is_there(result):
    for g in result["groups"]:
        names = {r["contender"] for r in g["rows"]}
        if g["workload"] == "resnet18":
            assert names == {"flax pools", "jaxpool pools"}
            continue
        peer = "torch-NCHW" if g["layout"] == "NCX" else "torch-CL"
        assert "jaxpool" in names and peer in names, g["key"]
        # XLA's own: reduce_window for the window ops, a reduction for the global pools
        window = g["op"] in ("max_pool", "avg_pool")
        if window or g["workload"].startswith("global"):
            peer = "reduce_window" if window else "xla-reduce"
            assert (peer if g["mode"] == "fwd" else f"grad({peer})") in names, g["key"]
        if g["mode"] == "fwd" and g["op"] in ("max_pool", "adaptive_max_pool"):
            assert "jaxpool+idx" in names, g["key"]
        for r in g["rows"]:
            assert r["rounds"] == 1 and r["median_s"] > 0 and r["x_floor"] > 0
        verdicts = {t["verdict"] for t in g["targets"]}
        assert verdicts <= {"PASS", "MISS"}, g["key"]  # every target measured


def _every_check_passes(result):
    for g in result["groups"]:
        assert g["checks"], g["key"]
        failed = [c["check"] for c in g["checks"] if not c["ok"]]
        assert not failed, (g["key"], failed)
        names = {c["check"] for c in g["checks"]}
        if g["workload"] == "resnet18":
            assert len(names) == 2
            continue
        # every contender besides jaxpool is compared with it, indices included
        for r in g["rows"]:
            if r["contender"] != "jaxpool":
                assert any(n.startswith(r["contender"] + " ") for n in names), g["key"]
        if g["mode"] == "fwd" and g["op"] in ("max_pool", "adaptive_max_pool"):
            peer = "torch-NCHW" if g["layout"] == "NCX" else "torch-CL"
            assert f"{peer} indices" in names and "x at jaxpool+idx indices" in names
    assert result["meta"]["checks_failed"] == 0


# One run, and every check of it in one test: a module fixture would run once per xdist
# worker.
def test_tiny_run(tmp_path_factory):
    status, result, png = _tiny_run(tmp_path_factory)
    _every_group_runs(status, result, png)
    _every_contender_is_there(result)
    _every_check_passes(result)
