"""`jaxpool.openvino.layer` against the OpenVINO runtime, on IR written by `openvino.save_model`.

Every model is built with `openvino.opset1/8/14/16`, saved, read back by the runtime, and its
`<layer>` elements are handed to the bridge; both run the same input.  Max values and indices
must be equal.  Averages must equal the direct jaxpool call bit for bit and the runtime to
float32 rounding (the two sum in different orders).  Where jaxpool's documented numeric
policy differs from the CPU runtime on purpose (a max window with no input element, an
`exclude_pad` window with nothing to count), the comparison applies that documented rule.
(Bad layers and bad calls: test_errors_openvino.py.)
"""

from __future__ import annotations

import random
import re
import shutil
import xml.etree.ElementTree as ElementTree

import jax
import jax.numpy as jnp
import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import openvino.opset8 as opset8
import openvino.opset14 as opset14
import openvino.opset16 as opset16
import oracle
import pytest

import jaxpool
from jaxpool import openvino as jov

CORE = ov.Core()
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
OPSETS = {1: opset1, 8: opset8, 14: opset14, 16: opset16}
POOL_TYPES = ("MaxPool", "AvgPool", "AdaptiveMaxPool", "AdaptiveAvgPool")


# --------------------------------------------------------------------------------------------
# Helpers: build, save, read back, run.
# --------------------------------------------------------------------------------------------


def save_and_run(tmp_path, x, nodes_of):
    """Saves the model of ``nodes_of(parameter)`` (``{name: node}``) and runs it on ``x`` as the
    runtime reads it: ``{name: (layer_xml, [outputs...])}`` of each pooling layer."""
    param = opset8.parameter(list(x.shape), np.float32)
    nodes = nodes_of(param)
    for node_name, node in nodes.items():
        node.set_friendly_name(node_name)
    outputs = [output for node in nodes.values() for output in node.outputs()]
    ov.save_model(ov.Model(outputs, [param]), tmp_path / "model.xml", compress_to_fp16=False)
    return run_saved(tmp_path / "model.xml", x)


def run_saved(path, x):
    model = CORE.read_model(path)
    compiled = CORE.compile_model(model, "CPU", CONFIG)
    results = compiled([x])
    produced: dict[str, dict[int, np.ndarray]] = {}
    for out, port in zip(model.outputs, compiled.outputs):
        source = out.get_node().input_value(0)
        name = source.get_node().get_friendly_name()
        produced.setdefault(name, {})[source.get_index()] = np.asarray(results[port])
    return {
        element.get("name"): (
            ElementTree.tostring(element, encoding="unicode"),
            [out for _, out in sorted(produced[element.get("name")].items())],
        )
        for element in ElementTree.parse(path).getroot().iter("layer")
        if element.get("type") in POOL_TYPES
    }


def check(layer_xml, ref, *inputs, x64=False):
    """The bridge's layer of ``inputs`` against the runtime's outputs ``ref``; returns the layer
    and its outputs.  Maxima and indices are equal, with the documented rule for windows that
    hold no input element (-inf there); averages equal to float32 rounding, 0 where the CPU
    runtime gives NaN (an empty exclude-pad window)."""
    pool = jov.layer(layer_xml)
    with jax.enable_x64(x64):
        got = [np.asarray(o) for o in jax.tree.leaves(pool(*inputs))]
    assert len(got) == len(ref), layer_xml
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape and g.dtype == r.dtype
        if "Avg" in pool.type:
            assert np.all(g[np.isnan(r)] == 0)
            np.testing.assert_allclose(g, np.where(np.isnan(r), 0, r), rtol=3e-7, atol=1e-7)
        else:
            if g.dtype.kind == "f":
                g = np.where(np.isneginf(g), np.finfo(g.dtype).min, g)
            np.testing.assert_array_equal(g, r)
    return pool, got


def sample(grid, n, seed):
    """``n`` combinations of the grid's values in which every value of every attribute occurs
    (for ``n`` at least the longest list), mixed by a fixed seed."""
    rng = random.Random(seed)
    columns = {}
    for key, values in grid.items():
        column = [values[i % len(values)] for i in range(n)]
        rng.shuffle(column)
        columns[key] = column
    return [{key: columns[key][i] for key in grid} for i in range(n)]


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Grids of attributes, through save_model and back.
# --------------------------------------------------------------------------------------------

SLIDING = {
    "kernel": [(2, 2), (3, 2), (1, 3)],
    "strides": [(1, 1), (2, 2), (2, 3)],
    "pads": [((0, 0), (0, 0)), ((1, 0), (0, 1)), ((1, 1), (1, 1))],
    "rounding_type": ["floor", "ceil", "ceil_torch"],
    "auto_pad": ["explicit", "valid", "same_upper", "same_lower"],
}
# {op: {version: number of cases}}
GRID_SIZES = {"max_pool": {1: 5, 8: 6, 14: 7}, "avg_pool": {1: 6, 14: 8, 16: 12}}


def window_cases(op, version, n, seed):
    """``n`` cases of the attributes ``op`` has at ``version``, as jaxpool's keywords."""
    grid = dict(SLIDING, rounding_type=SLIDING["rounding_type"][: 3 if version >= 14 else 2])
    if op == "avg_pool":
        grid["exclude_pad"] = [False, True]
        if version >= 16:
            grid["dilations"] = [(1, 1), (2, 1), (1, 3), (3, 2)]
    elif version >= 8:
        grid.update(dilations=[(1, 1), (2, 1)], index_element_type=["i32", "i64"], axis=[0, 2, -1])
    cases = sample(grid, n, seed)
    for c in cases:
        c["pads_begin"], c["pads_end"] = c.pop("pads")
    return cases


@pytest.mark.parametrize(
    "op, version, n", [(op, v, n) for op, sizes in GRID_SIZES.items() for v, n in sizes.items()]
)
def test_window_grid(tmp_path, op, version, n):
    seed = version + (op == "avg_pool")
    x = rand((2, 3, 7, 8), seed)
    cases = window_cases(op, version, n, seed)

    def node(param, c):
        kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in c.items()}
        return getattr(OPSETS[version], op)(param, kernel_shape=kwargs.pop("kernel"), **kwargs)

    layers = save_and_run(
        tmp_path, x, lambda p: {f"pool{i}": node(p, c) for i, c in enumerate(cases)}
    )
    assert len(layers) == n
    kind = op.title().replace("_", "")  # MaxPool, AvgPool
    for i, c in enumerate(cases):
        pool, got = check(*layers[f"pool{i}"], x, x64=c.get("index_element_type") == "i64")
        assert (pool.type, pool.version, pool.function) == (kind, version, op)
        if op == "max_pool":
            assert len(got) == (1 if version == 1 else 2), c
        else:
            np.testing.assert_array_equal(got[0], np.asarray(jaxpool.avg_pool(x, **c)))


@pytest.mark.parametrize("shape", [(1, 2, 11), (1, 1, 4, 3, 5)])
def test_one_and_three_spatial_axes(tmp_path, shape):
    nd = len(shape) - 2
    x = rand(shape, nd)
    two, one, zero = [2] * nd, [1] * nd, [0] * nd
    sizes = {"amax": np.array([3] * nd, np.int64), "aavg": two}

    def nodes(param):
        return {
            "max1": opset1.max_pool(param, two, one, zero, two, rounding_type="ceil"),
            "max8": opset8.max_pool(
                param, one, two, zero, one, two, index_element_type="i32", axis=2
            ),
            "max14": opset14.max_pool(
                param, two, one, one, zero, two, "ceil_torch", "same_lower", "i32"
            ),
            "avg14": opset14.avg_pool(param, two, one, zero, two, True, "ceil_torch"),
            "amax": opset8.adaptive_max_pool(param, opset8.constant(sizes["amax"]), "i32"),
            "aavg": opset8.adaptive_avg_pool(param, opset8.constant(np.array(two, np.int32))),
        }

    layers = save_and_run(tmp_path, x, nodes)
    assert set(layers) == {"max1", "max8", "max14", "avg14", "amax", "aavg"}
    for name, (layer_xml, ref) in layers.items():
        check(layer_xml, ref, x, *([sizes[name]] if name in sizes else []))


def test_adaptive_pools(tmp_path):
    x = rand((2, 3, 7, 8), 5)
    output_sizes = [(1, 1), (3, 5), (7, 8), (4, 3), (2, 11)]

    def nodes(param):
        nodes = {}
        for i, output_size in enumerate(output_sizes):
            size = opset8.constant(np.array(output_size, np.int32))
            nodes[f"amax{i}"] = opset8.adaptive_max_pool(param, size, index_element_type="i32")
            nodes[f"aavg{i}"] = opset8.adaptive_avg_pool(param, size)
        return nodes

    layers = save_and_run(tmp_path, x, nodes)
    for i, output_size in enumerate(output_sizes):
        # the size as an array and as a list
        pool, _ = check(*layers[f"amax{i}"], x, jax.numpy.asarray(output_size))
        assert pool.type == "AdaptiveMaxPool" and pool.function == "adaptive_max_pool"
        assert pool.version == 8
        pool, (got,) = check(*layers[f"aavg{i}"], x, list(output_size))
        assert pool.arguments == ()
        np.testing.assert_array_equal(got, np.asarray(jaxpool.adaptive_avg_pool(x, output_size)))


# --------------------------------------------------------------------------------------------
# IR strings as the runtime reads them: edit a saved file, and both must agree.
# --------------------------------------------------------------------------------------------

EDITS = [
    # (layer, old, new): the runtime reads every edited file below.
    ("max14", 'rounding_type="ceil_torch"', 'rounding_type="CEIL_TORCH"'),
    ("max14", 'auto_pad="explicit"', 'auto_pad="Same_Lower"'),
    ("max14", 'kernel="3, 2"', 'kernel="3,2"'),
    ("max14", ' pads_begin="1, 1" pads_end="0, 1"', ""),
    ("max14", ' rounding_type="ceil_torch"', ""),
    ("max14", ' axis="2"', ""),
    ("max14", 'index_element_type="i32"', 'index_element_type="I32"'),
    ("max14", 'version="opset14"', 'version="opset16"'),
    ("max8", 'version="opset8"', 'version="opset13"'),
    ("max8", 'dilations="2, 1"', 'dilations=" 2 ,1 "'),
    ("max1", 'version="opset1"', 'version="opset7"'),
    ("max1", 'auto_pad="explicit"', 'auto_pad="VALID"'),
    ("avg1", 'exclude-pad="false"', 'exclude-pad="FALSE"'),
    ("avg1", 'exclude-pad="false"', 'exclude-pad="0"'),
    ("avg1", 'exclude-pad="false"', 'exclude-pad="True"'),
    ("avg1", ' exclude-pad="false"', ""),  # the runtime's default is true
    ("avg1", 'version="opset1"', 'version="opset13"'),
    ("avg1", 'rounding_type="floor"', 'rounding_type="Ceil"'),
]


@pytest.fixture(scope="module")
def edit_model(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("edits")
    x = rand((1, 2, 7, 6), 11)

    def nodes(param):
        return {
            "max14": opset14.max_pool(
                param, [2, 1], [1, 1], [1, 1], [0, 1], [3, 2], "ceil_torch", None, "i32", axis=2
            ),
            "max8": opset8.max_pool(
                param, [1, 2], [2, 1], [0, 0], [1, 0], [2, 2], index_element_type="i32"
            ),
            "max1": opset1.max_pool(param, [2, 2], [1, 0], [1, 1], [3, 3]),
            "avg1": opset1.avg_pool(param, [2, 2], [1, 1], [0, 1], [2, 3], exclude_pad=False),
        }

    return tmp_path, x, save_and_run(tmp_path, x, nodes)


@pytest.mark.parametrize("layer_name,old,new", EDITS)
def test_edited_ir_strings(edit_model, layer_name, old, new):
    tmp_path, x, layers = edit_model
    text = (tmp_path / "model.xml").read_text()
    start = text.index(f'name="{layer_name}"')
    end = text.index("</layer>", start)
    assert old in text[start:end], (layer_name, old)
    edited = text[:start] + text[start:end].replace(old, new) + text[end:]
    path = tmp_path / f"edit_{abs(hash((layer_name, old, new)))}.xml"
    path.write_text(edited)
    shutil.copy(tmp_path / "model.bin", path.with_suffix(".bin"))
    layer_xml, ref = run_saved(path, x)[layer_name]
    assert new in layer_xml
    check(layer_xml, ref, x)


def test_versions_of_opsets():
    def version(type_name, opset):
        data = "" if "Adaptive" in type_name else '<data kernel="2" strides="1"/>'
        return jov.layer(f'<layer type="{type_name}" version="{opset}">{data}</layer>').version

    assert [version("MaxPool", f"opset{n}") for n in (1, 7, 8, 13, 14, 16)] == [1, 1, 8, 8, 14, 14]
    assert [version("AvgPool", f"opset{n}") for n in (1, 13, 14, 15, 16)] == [1, 1, 14, 14, 16]
    assert version("AdaptiveMaxPool", "opset8") == version("AdaptiveAvgPool", "opset16") == 8
    assert jov.layer("MaxPool", {"kernel": "2", "strides": "1"}).version == 14
    assert jov.layer("AvgPool", {"kernel": "2", "strides": "1"}).version == 16
    assert jov.layer("AdaptiveMaxPool").version == 8


def test_type_name_and_xml_agree():
    data = (
        'kernel="3,2" strides="2, 1" pads_begin="1,0" pads_end="0, 1" dilations="1,2" '
        'rounding_type="ceil" axis="2" index_element_type="i32"'
    )
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', data))
    from_xml = jov.layer(
        f'<layer id="7" name="p" type="MaxPool" version="opset8">'
        f'<data {data}/><input><port id="0"/></input></layer>'
    )
    from_name = jov.layer("MaxPool-8", attrs)
    assert from_xml == from_name
    window = dict(kernel=(3, 2), strides=(2, 1), pads_begin=(1, 0), pads_end=(0, 1))
    kwargs = dict(window, rounding_type="ceil", auto_pad="explicit", dilations=(1, 2))
    kwargs.update(return_indices=True, index_element_type="i32", axis=2)
    assert from_xml.kwargs == kwargs
    element = ElementTree.fromstring(
        f'<layer type="MaxPool" version="opset8"><data {data}/></layer>'
    )
    assert jov.layer(element) == from_name
    assert "jaxpool.max_pool(kernel=(3, 2)" in repr(from_name)
    x = rand((1, 2, 6, 7))
    for got, want in zip(jax.jit(from_name)(x), jaxpool.max_pool(x, **kwargs), strict=True):
        np.testing.assert_array_equal(got, want)
    # MaxPool-1 returns values only.
    y1 = jov.layer("MaxPool-1", {k: attrs[k] for k in ("kernel", "strides")})(x)
    assert isinstance(y1, jax.Array)
    np.testing.assert_array_equal(y1, jaxpool.max_pool(x, (3, 2), (2, 1)))


# --------------------------------------------------------------------------------------------
# The examples of the specifications.
# --------------------------------------------------------------------------------------------

# MaxPool-8, examples 1 to 7: input, attributes, output0 (values), output1 (indices).
X3 = [[[[-1, 2, 3], [4, 5, -6], [-7, 8, 9]]]]
X3B = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[10, 11, 12], [13, 14, 15], [16, 17, 18]]]]
K2 = {"strides": "1, 1", "kernel": "2, 2", "rounding_type": "floor"}
MAXPOOL8_EXAMPLES = [
    (X3, dict(K2, pads_begin="1, 1", pads_end="1, 1", auto_pad="explicit"),
     [[[[-1, 2, 3, 3], [4, 5, 5, -6], [4, 8, 9, 9], [-7, 8, 9, 9]]]],
     [[[[0, 1, 2, 2], [3, 4, 4, 5], [3, 7, 8, 8], [6, 7, 8, 8]]]]),
    ([[[-1, 2, 3, 5, -7, 9, 1]]], dict(K2, strides="1", kernel="3", auto_pad="valid"),
     [[[3, 5, 5, 9, 9]]], [[[2, 3, 3, 5, 5]]]),
    (X3, dict(K2, auto_pad="same_lower"),
     [[[[-1, 2, 3], [4, 5, 5], [4, 8, 9]]]], [[[[0, 1, 2], [3, 4, 4], [3, 7, 8]]]]),
    ([[X3[0][0], [[2, -1, 5], [6, -7, 1], [8, 2, -3]]]], dict(K2, auto_pad="same_upper"),
     [[[[5, 5, 3], [8, 9, 9], [8, 9, 9]], [[6, 5, 5], [8, 2, 1], [8, 2, -3]]]],
     [[[[4, 4, 2], [7, 8, 8], [7, 8, 8]], [[12, 11, 11], [15, 16, 14], [15, 16, 17]]]]),
    (X3, dict(K2, strides="2, 2", rounding_type="ceil", auto_pad="valid"),
     [[[[5, 3], [8, 9]]]], [[[[4, 2], [7, 8]]]]),
    ([X3B[0][:1]], dict(K2, dilations="2, 2", auto_pad="explicit", pads_begin="1, 1",
                        pads_end="1, 1"),
     [[[[5, 6, 5], [8, 9, 8], [5, 6, 5]]]], [[[[4, 5, 4], [7, 8, 7], [4, 5, 4]]]]),
    (X3B, dict(K2, dilations="1, 1", auto_pad="explicit", pads_begin="0, 0", pads_end="0, 0",
               axis="2"),
     [[[[5, 6], [8, 9]], [[14, 15], [17, 18]]]], [[[[4, 5], [7, 8]], [[4, 5], [7, 8]]]]),
]  # fmt: skip


# Example 1 of the specification lists -6 (index 5) at [0, 0, 1, 3]; that window covers input
# rows 0-1 and column 2 (column 3 is padding), {3, -6}, and the runtime gives 3 (index 2).
MAXPOOL8_ERRATA = {1: [((0, 0, 1, 3), 3, 2)]}
INT_LISTS = ("kernel", "strides", "pads_begin", "pads_end", "dilations")


@pytest.mark.parametrize("example", range(1, 8))
def test_maxpool8_spec_examples(example):
    x, attrs, values, indices = MAXPOOL8_EXAMPLES[example - 1]
    x = np.asarray(x, np.float32)
    values, indices = np.asarray(values, np.float32), np.asarray(indices, np.int32)
    for at, value, index in MAXPOOL8_ERRATA.get(example, []):
        values[at], indices[at] = value, index
    attrs = dict(attrs, index_element_type="i32")
    for got, want in zip(jov.layer("MaxPool-8", attrs)(x), (values, indices), strict=True):
        np.testing.assert_array_equal(got, want)
    kwargs = {k: [int(n) for n in v.split(",")] if k in INT_LISTS else v for k, v in attrs.items()}
    kwargs["axis"] = int(attrs.get("axis", 0))
    for want, runtime in zip((values, indices), oracle.max_pool(x, **kwargs, opset=8), strict=True):
        np.testing.assert_array_equal(want, runtime)


# The XML examples of the AdaptiveMaxPool-8 and AdaptiveAvgPool-8 specifications, verbatim but
# for the whitespace between elements ("..." stands for the attributes a real IR writes).
ADAPTIVE_SPEC_XML = {
    "AdaptiveMaxPool-8": """
<layer ... type="AdaptiveMaxPool" ... >
    <data output_type="i64"/>
    <input><port id="0"><dim>1</dim><dim>3</dim><dim>32</dim><dim>32</dim></port></input>
    <input><port id="1"><dim>2</dim></port></input>
    <output>
        <port id="1"><dim>1</dim><dim>3</dim><dim>16</dim><dim>16</dim></port>
        <port id="2"><dim>1</dim><dim>3</dim><dim>16</dim><dim>16</dim></port>
    </output>
</layer>
""",
    "AdaptiveAvgPool-8": """
<layer ... type="AdaptiveAvgPool" ... >
    <data output_type="i64"/>
    <input><port id="0"><dim>1</dim><dim>3</dim><dim>32</dim><dim>32</dim></port></input>
    <input><port id="1"><dim>2</dim></port></input>
    <output>
        <port id="2"><dim>1</dim><dim>3</dim><dim>16</dim><dim>16</dim></port>
    </output>
</layer>
""",
}


@pytest.mark.parametrize("spec_xml", ADAPTIVE_SPEC_XML.values(), ids=ADAPTIVE_SPEC_XML.keys())
def test_adaptive_spec_xml_examples(spec_xml):
    with pytest.raises(ValueError, match=r"not well-formed XML"):
        jov.layer(spec_xml)
    block = spec_xml.replace("<layer ... type=", '<layer id="1" name="pool" type=')
    block = block.replace(" ... >", ' version="opset8">')
    element = ElementTree.fromstring(block)
    op_type = element.get("type")
    # The examples write <data output_type="i64"/>, an attribute neither op has (the runtime
    # ignores it); the bridge names it.
    with pytest.raises(ValueError, match=r"`output_type` is not an attribute of " + op_type):
        jov.layer(block)
    data = element.find("data")
    data.attrib.clear()
    if op_type == "AdaptiveMaxPool":
        data.set("index_element_type", "i32")
    in_dims, (size_len,), *out_ports = [
        [int(d.text) for d in p.iter("dim")] for p in element.iter("port")
    ]
    out_size = out_ports[0][2:]
    assert size_len == len(out_size)
    x = rand(in_dims, 3)
    if op_type == "AdaptiveMaxPool":
        ref = oracle.adaptive_max_pool(x, out_size)
    else:
        ref = [oracle.adaptive_avg_pool(x, out_size)]
    _, got = check(ElementTree.tostring(element, encoding="unicode"), ref, x, out_size)
    assert [list(g.shape) for g in got] == out_ports


def test_index_element_types():
    """An IR saved by ``openvino.save_model`` says ``i64``: it needs x64, or ``i32`` instead."""
    xml = (
        '<layer id="1" type="MaxPool" version="opset8"><data kernel="2" strides="2" '
        'pads_begin="0" pads_end="0" index_element_type="i64" axis="2"/></layer>'
    )
    x = jnp.arange(4.0).reshape(1, 1, 4)
    with pytest.raises(ValueError, match="jax_enable_x64"):
        jov.layer(xml)(x)
    values, indices = jov.layer(xml, index_element_type="i32")(x)
    assert indices.dtype == jnp.int32 and indices.tolist() == [[[1, 3]]]
    assert jov.layer("AdaptiveMaxPool", index_element_type="int32")(x, [2])[1].dtype == jnp.int32
    x = rand((1, 2, 6, 5), 9)
    with jax.enable_x64(True):
        got = jov.layer("AdaptiveMaxPool", {"index_element_type": "i64"})(x, np.array([4, 2]))
        want = jaxpool.adaptive_max_pool(x, (4, 2), return_indices=True, index_element_type="i64")
    assert got[1].dtype == np.int64
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
