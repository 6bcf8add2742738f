"""The training-scale benchmark (``benchmarks/training.py``) runs every path at tiny scale.

One run at ``--scale tiny`` with ``--check``: every workload in bfloat16 (float32 runs the same
programs and is left to full runs, to keep the suite short), both layouts,
forward (with indices) and forward+backward, against ``reduce_window``/``jnp.max``/``jnp.mean``
and PyTorch on the CPU, and the ResNet-18 training step with Flax's pools and jaxpool's.
jaxpool runs its portable programs, the ones a GPU runs.  The timings mean nothing here; the
checks (every contender's outputs against jaxpool's) and the results file are what is tested.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

# torch, flax and optax are in the test extra: a missing one fails, never skips.
import flax  # noqa: E402, F401
import matplotlib  # noqa: E402, F401
import optax  # noqa: E402, F401
import torch  # noqa: E402, F401

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import training  # noqa: E402


def _tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("training")
    path, png = out / "training.json", out / "training.png"
    argv = ["--scale", "tiny", "--reps", "1", "--warmup", "1", "--min-stretch-ms", "0"]
    argv += ["--settle-ms", "0", "--check", "--program", "portable", "--dtype", "bf16"]
    argv += ["--json", str(path), "--plot", str(png)]
    status = training.main(argv)
    with open(path) as f:
        return status, json.load(f), png


def _every_group_runs(tiny_run):
    status, result, png = tiny_run
    assert result["errors"] == []
    assert status == 0
    keys = [g["key"] for g in result["groups"]]
    assert sorted(keys) == sorted(k for k in training.group_keys() if k.endswith("/bf16"))
    assert len(keys) == len(set(keys)) == 9 * 2 * 2 + 1
    assert result["meta"]["scale"] == "tiny"
    assert result["meta"]["torch_device"] == "cpu"
    assert os.path.getsize(png) > 0
    table = training.markdown_table(result["groups"])
    assert len(table.splitlines()) == 2 + len(keys)


def _every_contender_is_there(tiny_run):
    _, result, _ = tiny_run
    for g in result["groups"]:
        names = {r["contender"] for r in g["rows"]}
        if g["workload"] == "resnet18":
            assert names == {"flax pools", "jaxpool pools"}
            continue
        peer = "torch-NCHW" if g["layout"] == "NCX" else "torch-CL"
        assert "jaxpool" in names and peer in names, g["key"]
        if g["op"] in ("max_pool", "avg_pool"):
            peer = "reduce_window"
        elif g["workload"].startswith("global"):
            peer = "xla-reduce"
        else:
            peer = None
        if peer is not None:
            assert (peer if g["mode"] == "fwd" else f"grad({peer})") in names, g["key"]
        if g["mode"] == "fwd" and g["op"] in ("max_pool", "adaptive_max_pool"):
            assert "jaxpool+idx" in names, g["key"]
        for r in g["rows"]:
            assert r["rounds"] == 1 and r["median_s"] > 0 and r["x_floor"] > 0
        verdicts = {t["verdict"] for t in g["targets"]}
        assert verdicts <= {"PASS", "MISS"}, g["key"]  # every target measured


def _every_check_passes(tiny_run):
    _, result, _ = tiny_run
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
    run = _tiny_run(tmp_path_factory)
    _every_group_runs(run)
    _every_contender_is_there(run)
    _every_check_passes(run)
