"""Convert the pooling layers of an OpenVINO model to JAX and check them against the runtime.

    python examples/openvino_convert.py [model_dir]

A small pooling network is built with ``openvino.opset1/8/14`` and saved as IR
(``model.xml`` + ``model.bin``).  The script then reads only the files: it walks the graph of
``model.xml``, turns every pooling ``<layer>`` into a JAX callable with
``jaxpool.openvino.layer``, reads the ``Const`` inputs from ``model.bin``, and compares every
layer and the whole network with the OpenVINO runtime.
"""

from __future__ import annotations

import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import jax
import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import openvino.opset8 as opset8
import openvino.opset14 as opset14

from jaxpool import openvino as jov

POOLS = ("MaxPool", "AvgPool", "AdaptiveMaxPool", "AdaptiveAvgPool")
ELEMENT_TYPES = {"i32": np.int32, "i64": np.int64, "f32": np.float32}


def build_model(path: Path, shape=(1, 3, 20, 24)) -> None:
    """A chain of pooling layers of every kind, each output also a model output."""
    x = opset8.parameter(list(shape), np.float32, name="image")
    m1 = opset14.max_pool(
        x,
        [2, 2],
        [1, 1],
        [1, 1],
        [1, 1],
        [3, 3],
        rounding_type="ceil_torch",
        index_element_type="i32",
        axis=2,
        name="max14",
    )
    a1 = opset1.avg_pool(
        m1.output(0),
        [1, 2],
        [1, 1],
        [1, 1],
        [3, 3],
        exclude_pad=True,
        rounding_type="ceil",
        name="avg1",
    )
    m2 = opset1.max_pool(a1, [1, 1], [0, 0], [0, 0], [2, 2], auto_pad="same_lower", name="max1")
    m3 = opset8.max_pool(
        m2,
        [2, 1],
        [1, 1],
        [0, 0],
        [0, 0],
        [2, 2],
        auto_pad="same_upper",
        index_element_type="i32",
        name="max8",
    )
    a2 = opset14.avg_pool(
        m3.output(0),
        [1, 1],
        [0, 0],
        [0, 0],
        [2, 3],
        exclude_pad=False,
        rounding_type="ceil_torch",
        auto_pad="valid",
        name="avg14",
    )
    size = opset8.constant(np.array([3, 4], np.int64), name="size")
    g1 = opset8.adaptive_max_pool(a2, size, index_element_type="i32", name="adaptive_max")
    g2 = opset8.adaptive_avg_pool(
        g1.output(0), opset8.constant(np.array([2, 2], np.int32)), name="adaptive_avg"
    )
    outputs = [
        *m1.outputs(),
        a1.output(0),
        m2.output(0),
        *m3.outputs(),
        a2.output(0),
        *g1.outputs(),
        g2.output(0),
    ]
    ov.save_model(ov.Model(outputs, [x], "pools"), path, compress_to_fp16=False)


def convert(xml_path: Path):
    """Reads the IR files; returns ``run(x, feeds=None) -> {(layer_name, port): array}``.

    With ``feeds`` (outputs of the runtime, keyed like the result), every pooling layer takes
    its inputs from ``feeds`` instead of from the converted layers before it: layer by layer.
    """
    root = ElementTree.parse(xml_path).getroot()
    weights = xml_path.with_suffix(".bin").read_bytes()
    layers = {e.get("id"): e for e in root.iter("layer")}
    sources = {}  # (to_layer, to_port) -> (from_layer, from_port)
    for edge in root.iter("edge"):
        sources[(edge.get("to-layer"), edge.get("to-port"))] = (
            edge.get("from-layer"),
            edge.get("from-port"),
        )
    pools, consts = {}, {}
    for lid, element in layers.items():
        if element.get("type") in POOLS:
            pools[lid] = jov.layer(ElementTree.tostring(element, encoding="unicode"))
            print(f"  {element.get('name')}: {pools[lid]!r}")
        elif element.get("type") == "Const":
            data = element.find("data")
            offset, size = int(data.get("offset")), int(data.get("size"))
            dtype = ELEMENT_TYPES[data.get("element_type")]
            consts[lid] = np.frombuffer(weights[offset : offset + size], dtype)
        elif element.get("type") not in ("Parameter", "Result"):
            raise ValueError(f"layer type {element.get('type')!r} is not a pooling layer")

    def out_key(lid, port):
        ports = [p.get("id") for p in layers[lid].find("output").iter("port")]
        return layers[lid].get("name"), ports.index(port)

    def run(x, feeds=None):
        values = {}

        def value(lid, port, fed=False):
            element = layers[lid]
            if element.get("type") == "Parameter":
                return x
            if element.get("type") == "Const":
                return consts[lid]
            if fed:
                return feeds[out_key(lid, port)]
            if (lid, port) in values:
                return values[(lid, port)]
            in_ports = [p.get("id") for p in element.find("input").iter("port")]
            inputs = [value(*sources[(lid, p)], fed=feeds is not None) for p in in_ports]
            out = pools[lid](*inputs)
            out = out if isinstance(out, tuple) else (out,)
            for p, o in zip(
                [p.get("id") for p in element.find("output").iter("port")], out, strict=True
            ):
                values[(lid, p)] = o
            return values[(lid, port)]

        results = {}
        for lid, element in layers.items():
            if element.get("type") == "Result":
                src_lid, src_port = sources[(lid, "0")]
                results[out_key(src_lid, src_port)] = value(src_lid, src_port)
        return results

    return run


def main(model_dir: str | None = None, shape=(1, 3, 20, 24), seed: int = 0) -> dict:
    """Builds, converts and checks; returns the largest difference per layer output."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir or tmp) / "model.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        build_model(path, shape)
        print(f"saved {path}; converting its pooling layers:")
        run = convert(path)
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

        core = ov.Core()
        model = core.read_model(path)
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled([x])
        reference = {}
        for i, out in enumerate(model.outputs):
            source = out.get_node().input_value(0)
            reference[(source.get_node().get_friendly_name(), source.get_index())] = np.asarray(
                result[compiled.outputs[i]]
            )

    # Layer by layer: each converted layer gets the runtime's input and must give its output
    # (max values and all indices exactly, averages to float32 rounding).
    print("layer by layer:")
    layerwise = run(x, feeds=reference)
    for key in sorted(reference):
        got, ref = np.asarray(layerwise[key]), reference[key]
        exact = np.issubdtype(ref.dtype, np.integer) or "max" in key[0]
        diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
        kind = "indices" if np.issubdtype(ref.dtype, np.integer) else "values"
        print(
            f"  {key[0]:>13} {kind:<7} {str(ref.shape):<14} "
            f"{'equal' if diff == 0 else f'max |diff| {diff:.1e}'}"
        )
        if got.shape != ref.shape or (exact and diff != 0) or diff > 1e-6:
            raise AssertionError(f"{key} differs from the runtime by {diff}")

    # End to end: the whole converted network as one XLA program.
    ours = jax.jit(run)(x)
    differences = {
        key: float(np.max(np.abs(np.asarray(ours[key], np.float64) - ref)))
        for key, ref in reference.items()
        if not np.issubdtype(ref.dtype, np.integer)
    }
    end = ("adaptive_avg", 0)
    print(
        f"end to end: the network output {reference[end].shape} agrees with the runtime to "
        f"{max(differences.values()):.1e} over every float output"
    )
    if max(differences.values()) > 1e-5:
        raise AssertionError(f"end-to-end outputs differ from the runtime: {differences}")
    return differences


if __name__ == "__main__":
    main(*sys.argv[1:2])
