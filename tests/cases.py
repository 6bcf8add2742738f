"""Inputs shared by the test modules: special values, hypothesis strategies of attributes,
valid and invalid, with the rules that tell them apart (computed here, never by jaxpool), and
random regions of interest.
"""

from __future__ import annotations

import re

import chex
import hypothesis
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import reference
from hypothesis import strategies as st


def special(seed):
    """A float32 (2, 2, 6, 6) input with a few NaN, +inf and -inf among small integers."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (2, 2, 6, 6)).astype(np.float32)
    flat = x.reshape(-1)
    spots = rng.choice(flat.size, 9, replace=False)
    flat[spots[:3]], flat[spots[3:6]], flat[spots[6:]] = np.nan, np.inf, -np.inf
    return x


def tie_free(shape, seed=0):
    """Float32 values of ``shape``, all distinct: a maximum and its index are unambiguous."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) / 4 - 3).astype(np.float32)


def assert_trees_equal(a, b):
    """``a`` and ``b`` hold the same arrays, bit for bit (as NumPy)."""
    chex.assert_trees_all_equal(jax.tree.map(np.asarray, a), jax.tree.map(np.asarray, b))


def to_layout(x, data_format):
    """NCX ``x`` in ``data_format``."""
    return np.moveaxis(x, 1, -1) if data_format == "NXC" else x


def from_layout(a, data_format):
    """``a`` in ``data_format`` as NCX NumPy."""
    return np.moveaxis(np.asarray(a), -1, 1) if data_format == "NXC" else np.asarray(a)


def without_layout(attrs):
    """The attributes the NCX reference takes."""
    return {k: v for k, v in attrs.items() if k != "data_format"}


ROUNDINGS = ("floor", "ceil", "ceil_torch")
AUTO_PADS = ("explicit", "valid", "same_upper", "same_lower")
# Mostly valid values, sometimes invalid ones (wrong case, wrong type, out of range).
ROUNDING = st.sampled_from([*ROUNDINGS] * 6 + ["FLOOR", "Ceil", "round", 1])
AUTO_PAD = st.sampled_from([*AUTO_PADS] * 5 + ["SAME", "Same_Upper", None])
LAYOUT = st.sampled_from(["NCX"] * 5 + ["NXC"] * 5 + ["ncx"])
SPECIAL = [np.nan, np.inf, -np.inf]


def _per_axis(draw, nd, low, high, bad):
    """An int, a tuple, or now and then an invalid value, for a per-axis attribute."""
    kind = draw(st.sampled_from(["int"] * 4 + ["tuple"] * 5 + ["bad"]))
    if kind == "int":
        return draw(st.integers(low, high))
    if kind == "tuple":
        return tuple(draw(st.integers(low, high)) for _ in range(nd))
    return draw(st.sampled_from(bad(nd)))


def _bad_sizes(low):
    # nd + 2 entries: too many in both layouts (nd + 1 is an NXC input without a batch axis)
    return lambda nd: [low - 1, (low,) * (nd + 2), float(low + 1), str(low + 1), True]


def _valid_per_axis(value, nd, low):
    if isinstance(value, (bool, float, str)):
        return False
    if isinstance(value, tuple):
        return len(value) == nd and all(v >= low for v in value)
    return value >= low


@st.composite
def inputs(draw, dtype_choices=("float32", "float32", "int32", "float16")):
    """NCX inputs of 1 to 3 spatial axes: small integers (many ties), now and then a NaN or an
    infinity."""
    nd = draw(st.integers(1, 3))
    high = {1: 7, 2: 6, 3: 4}[nd]
    spatial = tuple(draw(st.integers(1, high)) for _ in range(nd))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), *spatial)
    dtype = np.dtype(draw(st.sampled_from(dtype_choices)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape).astype(dtype)  # small integers: many ties
    if dtype.kind == "f" and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            x.flat[rng.integers(x.size)] = SPECIAL[rng.integers(3)]
    return x


@st.composite
def sliding_cases(draw, with_dilations):
    """``(x, attrs)`` of a max or average pooling, ``attrs`` including ``data_format``."""
    x = draw(inputs())
    nd = x.ndim - 2
    attrs = dict(
        kernel=_per_axis(draw, nd, 1, 4, _bad_sizes(1)),
        strides=draw(st.one_of(st.none(), st.just(0)))
        if draw(st.integers(0, 5)) == 0
        else _per_axis(draw, nd, 1, 3, _bad_sizes(1)),
        pads_begin=_per_axis(draw, nd, 0, 2, _bad_sizes(0)),
        pads_end=_per_axis(draw, nd, 0, 2, _bad_sizes(0)),
        rounding_type=draw(ROUNDING),
        auto_pad=draw(AUTO_PAD),
        data_format=draw(LAYOUT),
    )
    if with_dilations:
        attrs["dilations"] = _per_axis(draw, nd, 1, 3, _bad_sizes(1))
    return x, attrs


def valid_sliding(x, attrs):
    """Whether ``attrs`` (from :func:`sliding_cases`) describe a valid pooling of ``x``."""
    nd = x.ndim - 2
    ok = (
        _valid_per_axis(attrs["kernel"], nd, 1)
        and (attrs["strides"] is None or _valid_per_axis(attrs["strides"], nd, 1))
        and _valid_per_axis(attrs["pads_begin"], nd, 0)
        and _valid_per_axis(attrs["pads_end"], nd, 0)
        and _valid_per_axis(attrs.get("dilations", 1), nd, 1)
        and attrs["rounding_type"] in ROUNDINGS
        and attrs["auto_pad"] in AUTO_PADS
        and attrs["data_format"] in ("NCX", "NXC")
    )
    if not ok:
        return False
    window = [attrs[k] for k in ("kernel", "strides", "pads_begin", "pads_end")]
    rules = attrs.get("dilations"), attrs["rounding_type"], attrs["auto_pad"]
    try:
        reference.sliding_geometry(x.shape[2:], *window, *rules)
    except reference.Invalid:
        return False
    return True


@st.composite
def adaptive_cases(draw):
    """``(x, output_size, data_format)`` of an adaptive pooling."""
    x = draw(inputs())
    nd = x.ndim - 2
    kind = draw(st.sampled_from(["int"] * 3 + ["tuple"] * 6 + ["bad"]))
    if kind == "int":
        size = draw(st.integers(1, 5))
    elif kind == "tuple":
        size = tuple(draw(st.one_of(st.integers(1, 5), st.none())) for _ in range(nd))
    else:
        size = draw(st.sampled_from([0, -1, (1,) * (nd + 2), 2.0, "2", (0,) * nd]))
    return x, size, draw(LAYOUT)


def valid_adaptive(x, size, data_format):
    """Whether ``size`` and ``data_format`` (from :func:`adaptive_cases`) are valid for ``x``."""
    nd = x.ndim - 2
    if data_format not in ("NCX", "NXC"):
        return False
    if isinstance(size, tuple):
        return len(size) == nd and all(s is None or s >= 1 for s in size)
    return isinstance(size, int) and size >= 1


def fuzz(max_examples):
    """The settings of a property test: reproducible examples (derandomized, no database),
    no deadline, and no health check on slow data generation."""
    return hypothesis.settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )


# --------------------------------------------------------------------------------------------
# Random adaptive poolings that the runtime accepts.
# --------------------------------------------------------------------------------------------

ADAPTIVE_DTYPES = ("float16", "bfloat16", "float32", "int8", "uint8", "int32")


def _sample(rng, dtype, shape, int32_range):
    """Random NCX data of ``dtype``: the integer types over their range (int32 over
    ``int32_range``), the floating-point ones from a standard normal."""
    for name, (low, high) in {"int8": (-128, 128), "uint8": (0, 256), "int32": int32_range}.items():
        if dtype == name:
            return rng.integers(low, high, shape).astype(name)
    return rng.standard_normal(shape).astype(np.float32).astype(_numpy_dtype(dtype))


def _numpy_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else name


def adaptive_sample(rng, dtype, shape, ties=False):
    """Random NCX data of ``dtype``; ``ties`` draws from few values (many ties)."""
    if ties:
        return rng.integers(0, 3, shape).astype(_numpy_dtype(dtype))
    return _sample(rng, dtype, shape, (-10_000, 10_000))


def adaptive_config(seed):
    """A random adaptive pooling: shape, output size (``None`` entries, 1, larger than the
    input), dtype, layout and whether the data has many ties."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    top = (24, 11, 6)[nd - 1]
    spatial = [int(v) for v in rng.integers(1, top + 1, nd)]
    output_size = []
    for length in spatial:
        kind = int(rng.integers(6))  # None, 1, larger than the input, or up to its size
        extra, high = (length, 4) if kind == 2 else (0, length + 1)
        output_size.append((None, 1)[kind] if kind < 2 else extra + int(rng.integers(1, high)))
    return dict(
        shape=(int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial),
        output_size=output_size,
        dtype=ADAPTIVE_DTYPES[seed % len(ADAPTIVE_DTYPES)],
        data_format=("NCX", "NXC")[int(rng.integers(2))],
        ties=bool(rng.integers(4) == 0),
    )


def runtime_size(cfg):
    """The configuration's output size with ``None`` replaced by the input size."""
    sizes = zip(cfg["shape"][2:], cfg["output_size"], strict=True)
    return [s if o is None else o for s, o in sizes]


def call_in_layout(fn, x, cfg, **kwargs):
    """Runs ``fn(x, cfg["output_size"])`` on NCX ``x`` in the config's layout and returns NCX
    NumPy outputs."""
    fmt = cfg["data_format"]
    out = fn(to_layout(x, fmt), cfg["output_size"], data_format=fmt, **kwargs)
    return (
        tuple(from_layout(o, fmt) for o in out) if isinstance(out, tuple) else from_layout(out, fmt)
    )


# --------------------------------------------------------------------------------------------
# Random average poolings that the runtime accepts.
# --------------------------------------------------------------------------------------------

AVG_DTYPES = ADAPTIVE_DTYPES


def avg_sample(rng, dtype, shape):
    """Random NCX data of ``dtype`` (int32 in the int8 range: the runtime's int32 AvgPool
    sometimes runs as int8)."""
    return _sample(rng, dtype, shape, (-128, 128))


def avg_config(seed):
    """A random AvgPool configuration that the runtime accepts (with the exclude_pad rule of
    its CPU plugin), of a dtype chosen by ``seed`` and a random layout."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    spatial = [int(v) for v in rng.integers(1, 8 if nd < 3 else 5, nd)]
    window = []  # (kernel, pad at the beginning, pad at the end) per axis
    exclude_pad = bool(rng.integers(2))
    auto_pad = AUTO_PADS[int(rng.integers(4))] if rng.integers(3) else "explicit"
    for length in spatial:
        k = int(rng.integers(1, min(4, length + (0 if auto_pad == "valid" else 2)) + 1))
        # The runtime refuses exclude_pad with a pad as large as the kernel.
        top = k - 1 if exclude_pad else 2
        pb, pe = (int(v) for v in rng.integers(0, top + 1, 2))
        while k > length + pb + pe:
            pe += 1
        window.append((k, pb, pe))
    kernel, pads_begin, pads_end = (list(v) for v in zip(*window))
    rounding_type = ROUNDINGS[int(rng.integers(3))]
    return dict(
        shape=(int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial),
        kernel=kernel,
        strides=[int(v) for v in rng.integers(1, 4, nd)],
        pads_begin=pads_begin,
        pads_end=pads_end,
        exclude_pad=exclude_pad,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        opset=14 if rounding_type == "ceil_torch" or rng.integers(2) else 1,
        dtype=AVG_DTYPES[seed % len(AVG_DTYPES)],
        data_format=("NCX", "NXC")[int(rng.integers(2))],
    )


# One (NCX shape, output size) for each form the adaptive programs take: global pooling (one
# reduction over the spatial axes), small bins (one chain over the taps of all axes: tiling and
# non-tiling, 1-D to 3-D, outputs larger than the input) and large bins (one axis at a time:
# narrow bins chained, wide ones as bin windows, tiling or not, with an axis left as it is).
ADAPTIVE_FORMS = (
    ((2, 3, 7, 7), (1, 1)),
    ((2, 3, 2, 3, 4), (1, 1, 1)),
    ((2, 3, 50, 50), (16, 16)),
    ((2, 3, 14, 14), (4, 4)),
    ((2, 3, 32, 12), (16, None)),
    ((1, 2, 6, 6, 6), (4, 5, 7)),
    ((2, 3, 20), (3,)),
    ((2, 3, 30, 17), (4, 3)),
    ((2, 3, 60), (2,)),
    ((2, 3, 61), (2,)),
    ((2, 3, 50), (3,)),
    ((2, 3, 64, 9), (4, 2)),
    ((1, 2, 40, 7), (1, 3)),
    ((2, 2, 21, 22), (2, 3)),
    ((1, 2, 9, 9, 9), (2, 2, 2)),
    ((1, 1, 9, 30, 4), (2, 2, 4)),
)


def form_config(form, data_format):
    """The configuration (as :func:`adaptive_config` gives) of ``ADAPTIVE_FORMS[form]``."""
    shape, output_size = ADAPTIVE_FORMS[form]
    return dict(shape=shape, output_size=list(output_size), data_format=data_format)


# --------------------------------------------------------------------------------------------
# Random ONNX sliding windows that ONNX Runtime runs as specified.
# --------------------------------------------------------------------------------------------

ONNX_AUTO_PADS = dict(zip(("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), AUTO_PADS))


def onnx_window(rng):
    """ONNX attributes, the matching jaxpool keyword arguments, and an NCX input shape.

    ONNX Runtime refuses pads as large as the kernel.  With ``SAME_*`` it computes the pads
    from the undilated kernel and lets them go negative, unlike the specification's formula
    (and OpenVINO's, jaxpool's): those configurations are left out.
    """
    while True:
        nd = int(rng.integers(1, 4))
        kernel = [int(v) for v in rng.integers(1, 4, nd)]
        strides = [int(v) for v in rng.integers(1, 4, nd)]
        dilations = [int(v) for v in rng.integers(1, 3, nd)]
        span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        in_spatial = [int(rng.integers(s, s + 5)) for s in span]
        auto_pad = str(rng.choice(list(ONNX_AUTO_PADS), p=[0.55, 0.15, 0.15, 0.15]))
        ceil_mode = int(rng.integers(0, 2))
        pads_begin = [int(rng.integers(0, k)) for k in kernel]
        pads_end = [int(rng.integers(0, k)) for k in kernel]
        if auto_pad.startswith("SAME"):
            dilations = [1] * nd
            if any((-(-n // s) - 1) * s + k < n for n, s, k in zip(in_spatial, strides, kernel)):
                continue
        kwargs = dict(kernel=kernel, strides=strides, dilations=dilations)
        attrs = dict(kernel_shape=kernel, strides=strides, dilations=dilations, ceil_mode=ceil_mode)
        attrs["auto_pad"] = auto_pad
        kwargs["rounding_type"] = "ceil_torch" if ceil_mode else "floor"
        kwargs["auto_pad"] = ONNX_AUTO_PADS[auto_pad]
        if auto_pad == "NOTSET":
            attrs["pads"] = pads_begin + pads_end
            kwargs.update(pads_begin=pads_begin, pads_end=pads_end)
        batch, channels = (int(v) for v in rng.integers(1, 3, 2))
        return attrs, kwargs, (batch, channels, *in_spatial)


# --------------------------------------------------------------------------------------------
# Regions of interest.
# --------------------------------------------------------------------------------------------


def random_boxes(rng, count, height, width, scale, inverted=0.0):
    """``(x_1, y_1, x_2, y_2)`` in image pixels: sub-pixel boxes, boxes of any size up to the
    map, partly outside it, and the whole map; a fraction ``inverted`` of them with their
    corners swapped."""
    h_img, w_img = height / scale, width / scale
    kind = rng.integers(0, 4, count)
    cx = rng.uniform(-0.2 * w_img, 1.2 * w_img, count)
    cy = rng.uniform(-0.2 * h_img, 1.2 * h_img, count)
    w = np.where(kind == 0, rng.uniform(0, 2 / scale, count), rng.uniform(0, w_img, count))
    h = np.where(kind == 0, rng.uniform(0, 2 / scale, count), rng.uniform(0, h_img, count))
    whole = kind == 3
    w, h = np.where(whole, w_img, w), np.where(whole, h_img, h)
    cx, cy = np.where(whole, w_img / 2, cx), np.where(whole, h_img / 2, cy)
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    if inverted:
        swap = rng.uniform(size=count) < inverted
        boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


# The collectives of XLA's compiled HLO: a channel-sharded pool that needs none shows none.
COLLECTIVE = re.compile(
    r"\b(all-gather|all-reduce|collective-permute|all-to-all|reduce-scatter|"
    r"collective-broadcast|ragged-all-to-all)\b"
)


def check_box_derivatives(functions, rois, rng):
    """The forward derivative of each function (one, or a dict of named ones) in the float64
    boxes ``rois`` against central differences (and not all zero), and its reverse derivative
    as the forward one's adjoint, all of them in one program."""
    if callable(functions):
        functions = {"": functions}
    u = jnp.asarray(rng.standard_normal(rois.shape))
    w = {k: rng.standard_normal(jax.eval_shape(f, rois).shape) for k, f in functions.items()}
    eps = 1e-6

    @jax.jit
    def derivatives(r, u, w):
        out = {}
        for name, f in functions.items():
            _, jvp = jax.jvp(f, (r,), (u,))
            (vjp,) = jax.vjp(f, r)[1](w[name])
            out[name] = jvp, (f(r + eps * u) - f(r - eps * u)) / (2 * eps), vjp
        return out

    for name, (jvp, diff, vjp) in derivatives(rois, u, w).items():
        np.testing.assert_allclose(jvp, diff, atol=1e-6, err_msg=name)
        assert np.abs(np.asarray(jvp)).max() > 0, name
        np.testing.assert_allclose(
            jnp.vdot(jvp, w[name]), jnp.vdot(u, vjp), rtol=1e-10, err_msg=name
        )
