"""One table of bad inputs for every public function.

Each case must raise ``ValueError`` or ``TypeError`` (as listed) at trace time, with a message
that names the argument in backticks and echoes the offending value.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool

X = np.zeros((2, 3, 8, 8), np.float32)
Y = np.zeros((2, 3, 4, 4), np.float32)
IDX = np.zeros((2, 3, 4, 4), np.int32)


def _call(name, *args, **kwargs):
    def run():
        fn = getattr(jaxpool, name, None)
        if fn is None:
            pytest.skip(f"jaxpool.{name} is not available")
        return fn(*args, **kwargs)
    return run


def _traced(name, attribute, value, **static):
    """Calls ``jaxpool.<name>`` under jit with ``attribute`` traced from an argument."""
    def run():
        fn = getattr(jaxpool, name, None)
        if fn is None:
            pytest.skip(f"jaxpool.{name} is not available")
        if name == "max_unpool":
            return jax.jit(lambda v: fn(Y, IDX, **{attribute: v}))(jnp.asarray(value))
        return jax.jit(lambda v: fn(X, **static, **{attribute: v}))(jnp.asarray(value))
    return run


def _abstract(name, shape, **kwargs):
    """Calls ``jaxpool.<name>`` on a float32 input of ``shape`` without allocating it."""
    def run():
        fn = getattr(jaxpool, name, None)
        if fn is None:
            pytest.skip(f"jaxpool.{name} is not available")
        return jax.eval_shape(lambda x: fn(x, **kwargs), jax.ShapeDtypeStruct(shape, jnp.float32))
    return run


def _layer(*args):
    def run():
        openvino = getattr(jaxpool, "openvino", None)
        if openvino is None:
            pytest.skip("jaxpool.openvino is not available")
        layer = openvino.layer(*args)
        return layer(X) if not str(getattr(layer, "type", "")).startswith("Adaptive") else layer(
            X, (2, 2))
    return run


def _echo(value):
    return re.escape(str(value))


V, T = ValueError, TypeError
TRACED = r"traced value \w*Tracer"
# (id, call, exception, argument named in backticks, regex of the echoed value)
CASES = [
    # ------------------------------------------------------------------ max_pool
    ("max_pool-rank2", _call("max_pool", np.zeros((4, 4), np.float32), 2), V, "x", r"\(4, 4\)"),
    ("max_pool-rank6", _call("max_pool", np.zeros((1,) * 6, np.float32), 1), V, "x",
     r"\(1, 1, 1, 1, 1, 1\)"),
    ("max_pool-kernel-len3", _call("max_pool", X, (2, 2, 2)), V, "kernel", r"\(2, 2, 2\)"),
    ("max_pool-strides-len1", _call("max_pool", X, 2, [1]), V, "strides", r"\[1\]"),
    ("max_pool-pads_begin-len3", _call("max_pool", X, 2, 1, (0, 0, 0)), V, "pads_begin",
     r"\(0, 0, 0\)"),
    ("max_pool-pads_end-len1", _call("max_pool", X, 2, 1, 0, (1,)), V, "pads_end", r"\(1,\)"),
    ("max_pool-dilations-len3", _call("max_pool", X, 2, dilations=(1, 1, 1)), V, "dilations",
     r"\(1, 1, 1\)"),
    ("max_pool-kernel-zero", _call("max_pool", X, 0), V, "kernel", "0"),
    ("max_pool-kernel-negative", _call("max_pool", X, (2, -3)), V, "kernel", "-3"),
    ("max_pool-strides-zero", _call("max_pool", X, 2, 0), V, "strides", "0"),
    ("max_pool-dilations-zero", _call("max_pool", X, 2, dilations=(1, 0)), V, "dilations",
     r"\(1, 0\)"),
    ("max_pool-pads_begin-negative", _call("max_pool", X, 2, 1, -1), V, "pads_begin", "-1"),
    ("max_pool-pads_end-negative", _call("max_pool", X, 2, 1, 0, (0, -2)), V, "pads_end", "-2"),
    ("max_pool-kernel-float", _call("max_pool", X, 2.0), T, "kernel", r"2\.0"),
    ("max_pool-strides-float", _call("max_pool", X, 2, (1.5, 1)), T, "strides", r"1\.5"),
    ("max_pool-kernel-float-array", _call("max_pool", X, np.array([2.0, 2.0])), T, "kernel",
     r"2\.0"),
    ("max_pool-kernel-string", _call("max_pool", X, "2"), T, "kernel", "'2'"),
    ("max_pool-kernel-bool", _call("max_pool", X, True), T, "kernel", "True"),
    ("max_pool-kernel-none", _call("max_pool", X, None), T, "kernel", "None"),
    ("max_pool-rounding-FLOOR", _call("max_pool", X, 2, rounding_type="FLOOR"), V,
     "rounding_type", "'FLOOR'"),
    ("max_pool-rounding-none", _call("max_pool", X, 2, rounding_type=None), T,
     "rounding_type", "None"),
    ("max_pool-auto_pad-Same_Upper", _call("max_pool", X, 2, auto_pad="Same_Upper"), V,
     "auto_pad", "'Same_Upper'"),
    ("max_pool-auto_pad-SAME", _call("max_pool", X, 2, auto_pad="SAME"), V, "auto_pad",
     "'SAME'"),
    ("max_pool-data_format-ncx", _call("max_pool", X, 2, data_format="ncx"), V, "data_format",
     "'ncx'"),
    ("max_pool-data_format-NHWC", _call("max_pool", X, 2, data_format="NHWC"), V,
     "data_format", "'NHWC'"),
    ("max_pool-axis-4", _call("max_pool", X, 2, return_indices=True, axis=4), V, "axis", "4"),
    ("max_pool-axis--5", _call("max_pool", X, 2, return_indices=True, axis=-5), V, "axis",
     "-5"),
    ("max_pool-axis-float", _call("max_pool", X, 2, return_indices=True, axis=1.0), T, "axis",
     r"1\.0"),
    ("max_pool-complex", _call("max_pool", X.astype(np.complex64), 2), T, "x", "complex64"),
    ("max_pool-bool", _call("max_pool", X > 0, 2), T, "x", "bool"),
    ("max_pool-kernel-traced", _traced("max_pool", "kernel", 2), T, "kernel", TRACED),
    ("max_pool-strides-traced", _traced("max_pool", "strides", [1, 1], kernel=2), T, "strides",
     TRACED),
    ("max_pool-kernel-too-large", _call("max_pool", X, 9), V, "kernel", "9"),
    ("max_pool-dilated-kernel-too-large", _call("max_pool", X, 3, 1, 0, 0, dilations=4), V,
     "kernel", "3"),
    ("max_pool-empty-spatial", _call("max_pool", np.zeros((1, 1, 0, 4), np.float32), 1), V,
     "x", r"\(1, 1, 0, 4\)"),
    ("max_pool-index_element_type-I32",
     _call("max_pool", X, 2, return_indices=True, index_element_type="I32"), V,
     "index_element_type", "'I32'"),
    ("max_pool-index_element_type-i64-no-x64",
     _call("max_pool", X, 2, return_indices=True, index_element_type="i64"), V,
     "index_element_type", "i64"),
    ("max_pool-index_element_type-int64-no-x64",
     _call("max_pool", X, 2, return_indices=True, index_element_type=jnp.int64), V,
     "index_element_type", "64"),
    ("max_pool-index_element_type-float32",
     _call("max_pool", X, 2, return_indices=True, index_element_type=jnp.float32), V,
     "index_element_type", "float32"),
    ("max_pool-return_indices-string", _call("max_pool", X, 2, return_indices="yes"), T,
     "return_indices", "'yes'"),
    ("max_pool-index-overflow",
     _abstract("max_pool", (2**12, 2**10, 2**5, 2**5), kernel=2, return_indices=True), V,
     "index_element_type", "int32"),
    # ------------------------------------------------------------------ avg_pool
    ("avg_pool-rank2", _call("avg_pool", np.zeros((8, 8), np.float32), 2), V, "x", r"\(8, 8\)"),
    ("avg_pool-kernel-zero", _call("avg_pool", X, (2, 0)), V, "kernel", r"\(2, 0\)"),
    ("avg_pool-strides-negative", _call("avg_pool", X, 2, -1), V, "strides", "-1"),
    ("avg_pool-pads-len3", _call("avg_pool", X, 2, 1, (1, 1, 1)), V, "pads_begin",
     r"\(1, 1, 1\)"),
    ("avg_pool-kernel-float", _call("avg_pool", X, 1.5), T, "kernel", r"1\.5"),
    ("avg_pool-rounding-Ceil", _call("avg_pool", X, 2, rounding_type="Ceil"), V,
     "rounding_type", "'Ceil'"),
    ("avg_pool-auto_pad-VALID", _call("avg_pool", X, 2, auto_pad="VALID"), V, "auto_pad",
     "'VALID'"),
    ("avg_pool-data_format-nxc", _call("avg_pool", X, 2, data_format="nxc"), V, "data_format",
     "'nxc'"),
    ("avg_pool-exclude_pad-string", _call("avg_pool", X, 2, exclude_pad="true"), T,
     "exclude_pad", "'true'"),
    ("avg_pool-complex", _call("avg_pool", X.astype(np.complex64), 2), T, "x", "complex64"),
    ("avg_pool-bool", _call("avg_pool", X > 0, 2), T, "x", "bool"),
    ("avg_pool-kernel-too-large", _call("avg_pool", X, (2, 11), 1, 1, 1), V, "kernel", "11"),
    ("avg_pool-kernel-traced", _traced("avg_pool", "kernel", 2), T, "kernel", TRACED),
    ("avg_pool-empty-spatial", _call("avg_pool", np.zeros((1, 1, 4, 0), np.float32), 1), V,
     "x", r"\(1, 1, 4, 0\)"),
    # ------------------------------------------------------------------ adaptive pools
    ("adaptive_max_pool-output_size-zero", _call("adaptive_max_pool", X, 0), V, "output_size",
     "0"),
    ("adaptive_max_pool-output_size-len3", _call("adaptive_max_pool", X, (2, 2, 2)), V,
     "output_size", r"\(2, 2, 2\)"),
    ("adaptive_max_pool-rank2", _call("adaptive_max_pool", np.zeros((3, 3), np.float32), 2), V,
     "x", r"\(3, 3\)"),
    ("adaptive_max_pool-data_format-Nxc", _call("adaptive_max_pool", X, 2, data_format="Nxc"),
     V, "data_format", "'Nxc'"),
    ("adaptive_max_pool-index_element_type-int32",
     _call("adaptive_max_pool", X, 2, return_indices=True, index_element_type="int32"), V,
     "index_element_type", "'int32'"),
    ("adaptive_max_pool-i64-no-x64",
     _call("adaptive_max_pool", X, 2, return_indices=True, index_element_type="i64"), V,
     "index_element_type", "i64"),
    ("adaptive_max_pool-output_size-traced", _traced("adaptive_max_pool", "output_size", 2), T,
     "output_size", TRACED),
    ("adaptive_max_pool-complex", _call("adaptive_max_pool", X.astype(np.complex64), 2), T, "x",
     "complex64"),
    ("adaptive_max_pool-index-overflow",
     _abstract("adaptive_max_pool", (1, 1, 2**16, 2**16), output_size=2, return_indices=True),
     V, "index_element_type", r"65536"),
    ("adaptive_avg_pool-output_size-negative", _call("adaptive_avg_pool", X, (2, -1)), V,
     "output_size", "-1"),
    ("adaptive_avg_pool-output_size-float", _call("adaptive_avg_pool", X, 2.5), T,
     "output_size", r"2\.5"),
    ("adaptive_avg_pool-output_size-string", _call("adaptive_avg_pool", X, "4"), T,
     "output_size", "'4'"),
    ("adaptive_avg_pool-bool", _call("adaptive_avg_pool", X > 0, 2), T, "x", "bool"),
    ("adaptive_avg_pool-empty-spatial",
     _call("adaptive_avg_pool", np.zeros((1, 1, 0, 3), np.float32), 1), V, "x",
     r"\(1, 1, 0, 3\)"),
    # ------------------------------------------------------------------ max_unpool
    ("max_unpool-indices-float", _call("max_unpool", Y, IDX.astype(np.float32), X.shape), T,
     "indices", "float32"),
    ("max_unpool-indices-shape", _call("max_unpool", Y, IDX[:, :, :2], X.shape), V, "indices",
     r"\(2, 3, 2, 4\)"),
    ("max_unpool-output_shape-rank", _call("max_unpool", Y, IDX, (2, 3, 8)), V, "output_shape",
     r"\(2, 3, 8\)"),
    ("max_unpool-output_shape-batch", _call("max_unpool", Y, IDX, (5, 3, 8, 8)), V,
     "output_shape", r"\(5, 3, 8, 8\)"),
    ("max_unpool-output_shape-zero", _call("max_unpool", Y, IDX, (2, 3, 0, 8)), V,
     "output_shape", r"\(2, 3, 0, 8\)"),
    ("max_unpool-output_shape-float", _call("max_unpool", Y, IDX, (2, 3, 8.0, 8)), T,
     "output_shape", r"8\.0"),
    ("max_unpool-output_shape-traced", _traced("max_unpool", "output_shape", X.shape), T,
     "output_shape", TRACED),
    ("max_unpool-axis-3", _call("max_unpool", Y, IDX, X.shape, axis=3), V, "axis", "3"),
    ("max_unpool-axis-out-of-range", _call("max_unpool", Y, IDX, X.shape, axis=7), V, "axis",
     "7"),
    ("max_unpool-data_format-nxc", _call("max_unpool", Y, IDX, X.shape, data_format="nxc"), V,
     "data_format", "'nxc'"),
    ("max_unpool-y-complex", _call("max_unpool", Y.astype(np.complex64), IDX, X.shape), T, "y",
     "complex64"),
    ("max_unpool-y-rank2", _call("max_unpool", Y[0, 0], IDX[0, 0], (8, 8)), V, "y", r"\(4, 4\)"),
    # ------------------------------------------------------------------ openvino.layer
    ("layer-malformed-xml", _layer("<layer type='MaxPool' version='opset8'><data"), V,
     "xml_or_type", "<layer"),
    ("layer-unknown-type", _layer("FooPool", {"kernel": "2,2", "strides": "2,2"}), V,
     "xml_or_type", "FooPool"),
    ("layer-unknown-version", _layer("MaxPool-3", {"kernel": "2,2", "strides": "2,2"}), V,
     "xml_or_type", "MaxPool-3"),
    ("layer-bad-int-list", _layer("MaxPool", {"kernel": "2,x", "strides": "2,2"}), V, "kernel",
     "'2,x'"),
    ("layer-negative-stride", _layer("AvgPool", {"kernel": "2,2", "strides": "-1,2"}), V,
     "strides", "-1"),
    ("layer-missing-kernel", _layer("MaxPool", {"strides": "2,2"}), V, "kernel", "missing"),
    ("layer-unknown-attribute",
     _layer("MaxPool-1", {"kernel": "2,2", "strides": "2,2", "dilations": "1,1"}), V,
     "dilations", "MaxPool"),
    ("layer-bad-bool", _layer("AvgPool", {"kernel": "2,2", "strides": "2,2",
                                          "exclude-pad": "maybe"}), V, "exclude-pad", "'maybe'"),
    ("layer-bad-rounding", _layer("MaxPool-8", {"kernel": "2,2", "strides": "2,2",
                                                "rounding_type": "round"}), V, "rounding_type",
     "'round'"),
    ("layer-ceil_torch-before-14",
     _layer("MaxPool-8", {"kernel": "2,2", "strides": "2,2", "rounding_type": "ceil_torch"}), V,
     "rounding_type", "ceil_torch"),
    ("layer-bad-axis", _layer("MaxPool-8", {"kernel": "2,2", "strides": "2,2", "axis": "x"}), V,
     "axis", "'x'"),
    ("layer-kernel-wrong-length",
     _layer("MaxPool", {"kernel": "2,2,2", "strides": "2,2,2"}), V, "kernel", r"\(2, 2, 2\)"),
]


def test_table_is_large_and_unique():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 40


@pytest.mark.parametrize(("call", "error", "argument", "value"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input(call, error, argument, value):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    named = rf"`{re.escape(argument)}`"
    assert re.search(named, message), f"{message!r} does not name `{argument}`"
    assert re.search(value, message), f"{message!r} does not echo {value!r}"
