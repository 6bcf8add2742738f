"""Convert the pooling nodes of an ONNX model to JAX and check them against ONNX Runtime.

    python examples/onnx_convert.py [model_dir]

A small pooling network is built with ``onnx.helper`` and saved as ``model.onnx``.  The script
then reads only the file: it walks the graph's nodes (stored in topological order), turns every
pooling node into a JAX callable with ``jaxpool.onnx.node``, and compares every node and the
whole network with ONNX Runtime.  The indices are int32 (``index_element_type="i32"``), so the
script runs without ``jax_enable_x64``; ONNX Runtime's are int64.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import jaxpool.onnx

OPSET = 21  # AveragePool's dilations need 19; ONNX Runtime runs GlobalLpPool up to 21


def build_model(path: Path, shape=(1, 3, 20, 24)) -> None:
    """A chain of pooling nodes of every kind, each output also a model output."""
    nodes = [
        helper.make_node(
            "MaxPool", ["image"], ["max", "max_indices"], kernel_shape=[2, 2], strides=[2, 2]
        ),
        # The pooled input had the shape MaxUnpool infers: (in - 1) * strides + kernel.
        helper.make_node(
            "MaxUnpool", ["max", "max_indices"], ["unpooled"], kernel_shape=[2, 2], strides=[2, 2]
        ),
        # The last window of each axis reaches past the end padding: ONNX's divisor counts
        # only the padded input there.
        helper.make_node(
            "AveragePool",
            ["unpooled"],
            ["average"],
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
            count_include_pad=1,
        ),
        helper.make_node(
            "LpPool",
            ["average"],
            ["norm"],
            kernel_shape=[2, 2],
            dilations=[2, 1],
            pads=[1, 0, 1, 0],
            p=3,
        ),
        helper.make_node(
            "MaxPool",
            ["norm"],
            ["same", "same_indices"],
            kernel_shape=[2, 2],
            strides=[2, 2],
            auto_pad="SAME_UPPER",
            storage_order=1,
        ),
        helper.make_node("GlobalAveragePool", ["same"], ["global_average"]),
        helper.make_node("GlobalMaxPool", ["same"], ["global_max"]),
        helper.make_node("GlobalLpPool", ["same"], ["global_norm"], p=2),
    ]
    outputs = [
        helper.make_tensor_value_info(
            name, TensorProto.INT64 if name.endswith("indices") else TensorProto.FLOAT, None
        )
        for node in nodes
        for name in node.output
    ]
    graph = helper.make_graph(
        nodes,
        "pools",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(shape))],
        outputs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(model, path)


def convert(path: Path):
    """Reads the model; returns ``run(inputs, feeds=None) -> {output name: array}``.

    With ``feeds`` (ONNX Runtime's outputs by name), every node takes its inputs from ``feeds``
    instead of from the converted nodes before it: node by node.
    """
    model = onnx.load(path)
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    (opset,) = (o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    pools = []
    for node in model.graph.node:
        pool = jaxpool.onnx.node(node, index_element_type="i32", opset=opset)
        print(f"  {node.op_type:<18} {list(node.input)} -> {list(node.output)}: {pool!r}")
        pools.append((node, pool))

    def run(inputs, feeds=None):
        values = {**constants, **inputs}
        for node, pool in pools:
            source = values if feeds is None else {**values, **feeds}
            out = pool(*(source[name] for name in node.input if name))
            out = out if isinstance(out, tuple) else (out,)
            values.update(zip(node.output, out))
        return {o.name: values[o.name] for o in model.graph.output}

    return run


def main(model_dir: str | None = None, shape=(1, 3, 20, 24), seed: int = 0) -> dict:
    """Builds, converts and checks; returns the largest difference per output."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir or tmp) / "model.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        build_model(path, shape)
        print(f"saved {path}; converting its pooling nodes:")
        run = convert(path)
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        reference = dict(zip(names, session.run(names, {"image": x})))

    # Node by node: each converted node gets ONNX Runtime's inputs and must give its outputs
    # (maxima and indices exactly, sums to float32 rounding).
    print("node by node:")
    nodewise = run({"image": x}, feeds=reference)
    differences = {}
    for name, ref in reference.items():
        got = np.asarray(nodewise[name])
        diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
        print(f"  {name:>15} {str(ref.shape):<15} {'equal' if diff == 0 else f'{diff:.1e}'}")
        exact = "max" in name or "indices" in name or "same" in name
        if got.shape != ref.shape or (exact and diff != 0) or diff > 1e-5 * (1 + np.abs(ref).max()):
            raise AssertionError(f"{name} differs from ONNX Runtime by {diff}")
        differences[name] = diff

    # End to end: the whole converted network as one XLA program.
    ours = jax.jit(run)({"image": x})
    worst = max(
        float(np.max(np.abs(np.asarray(ours[name], np.float64) - ref.astype(np.float64))))
        for name, ref in reference.items()
    )
    print(f"end to end, one jitted program: max |diff| {worst:.1e}")
    return differences


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
