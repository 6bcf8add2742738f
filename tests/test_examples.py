"""The example scripts run, on small sizes, and do what they claim."""

from __future__ import annotations

import importlib.util
import pathlib
import tempfile

import jax
import numpy as np
import openvino as ov  # imported before JAX starts threads: importing it forks
import openvino.opset8 as opset8
import pytest

import jaxpool

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(name, **kwargs):
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        return load(name).main(**kwargs)


def test_quickstart(tmp_path, monkeypatch, capsys):
    out = load("quickstart").main(out_path=str(tmp_path / "quickstart.png"), size=24)
    assert (tmp_path / "quickstart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    small, coarse, indices = (np.asarray(out[k]) for k in ("small", "coarse", "indices"))
    width = small.shape[2]
    assert small.shape[:2] == (1, 24) and coarse.shape == (1, 3, width // 8, 3)
    # Each index names a pixel of `small` that holds its bin's maximum.
    rows, cols = np.divmod(indices, small.shape[2])
    channel = np.arange(3)[None, None, None, :]
    np.testing.assert_array_equal(small[0, rows[0], cols[0], channel[0]], coarse[0])
    unpooled = np.asarray(out["unpooled"])
    assert np.count_nonzero(unpooled) <= coarse.size
    np.testing.assert_array_equal(
        jaxpool.adaptive_max_pool(unpooled, coarse.shape[1:3], data_format="NXC"), coarse
    )
    printed = capsys.readouterr().out
    assert "adaptive_max_pool" in printed and "max_unpool" in printed
    # Without a path, the figure goes to the temporary folder, not into the checkout.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = load("quickstart").main(size=24)
    assert out["figure"] == str(tmp_path / "jaxpool_quickstart.png")
    assert (tmp_path / "jaxpool_quickstart.png").exists()
    assert str(tmp_path) in capsys.readouterr().out


def test_digits_classifier(capsys):
    out = train("digits_classifier", epochs=3, sizes=(8, 12))
    assert out["losses"][-1] < 0.5 * out["losses"][0], out["losses"]
    assert out["test_accuracy"] >= 0.8, out
    assert set(out["accuracy"]) == {8, 12}
    assert capsys.readouterr().out.count("epoch ") == 3


def test_segnet(capsys):
    out = train("segnet", epochs=4, size=16, n_train=256)
    assert out["losses"][-1] < 0.6 * out["losses"][0], out["losses"]
    assert out["pixel_accuracy"] > out["background_fraction"], out
    assert capsys.readouterr().out.count("epoch ") == 4


def test_openvino_convert(tmp_path):
    differences = load("openvino_convert").main(model_dir=str(tmp_path), shape=(1, 2, 14, 17))
    assert (tmp_path / "model.xml").exists() and (tmp_path / "model.bin").exists()
    assert len(differences) == 7  # every float output of the seven layers
    assert max(differences.values()) <= 1e-5
    # A model of any other layer is refused by name.
    x = opset8.parameter([1, 1, 4, 4], np.float32)
    ov.save_model(ov.Model([opset8.relu(x)], [x]), tmp_path / "relu.xml")
    with pytest.raises(ValueError, match="layer type 'ReLU' is not a pooling layer"):
        load("openvino_convert").convert(tmp_path / "relu.xml")


def test_fpn_head(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # it imports the task from roi_head.py
    out = train("fpn_head", steps=100)
    # Both levels pool objects and background proposals, and the head learns on each: four
    # classes give a chance accuracy of about 0.25, and refinement improves the boxes.
    assert out["accuracy"] >= 0.85, out
    for level in out["levels"].values():
        assert level["objects"] >= 20 and level["proposals"] - level["objects"] >= 20, out
        assert level["accuracy"] >= 0.75, out
        assert level["iou_after"] > level["iou_before"], out
    printed = capsys.readouterr().out
    assert "P1 (stride 2)" in printed and "P2 (stride 4)" in printed


# jax2onnx's plugin of nnx.Linear reads the parameters through `.value`.
@pytest.mark.filterwarnings("ignore:'.value' access is now deprecated:DeprecationWarning")
def test_export_onnx(tmp_path, capsys):
    pytest.importorskip("jax2onnx")
    # optax's Adam mixes Python floats and ints; Flax's layers (and jax2onnx's) add their
    # biases across ranks.
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        out = load("export_onnx").main(epochs=1, out_dir=str(tmp_path))
    assert (tmp_path / "digits.onnx").exists()
    assert out["test_accuracy"] >= 0.7, out
    for runtime, difference in out["differences"].items():
        assert difference <= 1e-5 * out["largest_logit"], (runtime, out)
    printed = capsys.readouterr().out
    assert "onnxruntime: largest" in printed and "openvino: largest" in printed
