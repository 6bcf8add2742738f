"""Random attribute combinations, valid and invalid, against ``tests/reference.py``.

A valid configuration must match the reference exactly (values and indices; averages to
float32 rounding); an invalid one must raise ``ValueError`` or ``TypeError``, and nothing
else may happen.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxpool

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# Mostly valid values, sometimes invalid ones (wrong case, wrong type, out of range).
ROUNDING = st.sampled_from(["floor", "ceil", "ceil_torch"] * 6 + ["FLOOR", "Ceil", "round", 1])
AUTO_PAD = st.sampled_from(["explicit", "valid", "same_upper", "same_lower"] * 5
                           + ["SAME", "Same_Upper", None])
LAYOUT = st.sampled_from(["NCX"] * 5 + ["NXC"] * 5 + ["ncx"])
SPECIAL = [np.nan, np.inf, -np.inf]


def _require(name):
    fn = getattr(jaxpool, name, None)
    if fn is None:
        pytest.skip(f"jaxpool.{name} is not available")
    return fn


def _per_axis(draw, nd, low, high, bad):
    """An int, a tuple, or now and then an invalid value, for a per-axis attribute."""
    kind = draw(st.sampled_from(["int"] * 4 + ["tuple"] * 5 + ["bad"]))
    if kind == "int":
        return draw(st.integers(low, high))
    if kind == "tuple":
        return tuple(draw(st.integers(low, high)) for _ in range(nd))
    return draw(st.sampled_from(bad(nd)))


def _bad_sizes(low):
    return lambda nd: [low - 1, (low,) * (nd + 1), float(low + 1), str(low + 1), True]


def _valid_per_axis(value, nd, low):
    if isinstance(value, (bool, float, str)):
        return False
    if isinstance(value, tuple):
        return len(value) == nd and all(v >= low for v in value)
    return value >= low


@st.composite
def _input(draw, dtype_choices=("float32", "float32", "int32", "float16")):
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


def _layout(x, data_format):
    return np.moveaxis(x, 1, -1) if data_format == "NXC" else x


def _from_layout(a, data_format):
    return np.moveaxis(np.asarray(a), -1, 1) if data_format == "NXC" else np.asarray(a)


@st.composite
def _sliding(draw, with_dilations):
    x = draw(_input())
    nd = x.ndim - 2
    attrs = dict(
        kernel=_per_axis(draw, nd, 1, 4, _bad_sizes(1)),
        strides=draw(st.one_of(st.none(), st.just(0)))
        if draw(st.integers(0, 5)) == 0 else _per_axis(draw, nd, 1, 3, _bad_sizes(1)),
        pads_begin=_per_axis(draw, nd, 0, 2, _bad_sizes(0)),
        pads_end=_per_axis(draw, nd, 0, 2, _bad_sizes(0)),
        rounding_type=draw(ROUNDING),
        auto_pad=draw(AUTO_PAD),
        data_format=draw(LAYOUT),
    )
    if with_dilations:
        attrs["dilations"] = _per_axis(draw, nd, 1, 3, _bad_sizes(1))
    return x, attrs


def _valid_sliding(x, attrs):
    nd = x.ndim - 2
    ok = (_valid_per_axis(attrs["kernel"], nd, 1)
          and (attrs["strides"] is None or _valid_per_axis(attrs["strides"], nd, 1))
          and _valid_per_axis(attrs["pads_begin"], nd, 0)
          and _valid_per_axis(attrs["pads_end"], nd, 0)
          and _valid_per_axis(attrs.get("dilations", 1), nd, 1)
          and attrs["rounding_type"] in ("floor", "ceil", "ceil_torch")
          and attrs["auto_pad"] in ("explicit", "valid", "same_upper", "same_lower")
          and attrs["data_format"] in ("NCX", "NXC"))
    if not ok:
        return False
    try:
        reference.sliding_geometry(
            x.shape[2:], attrs["kernel"], attrs["strides"], attrs["pads_begin"],
            attrs["pads_end"], attrs.get("dilations"), attrs["rounding_type"], attrs["auto_pad"])
    except reference.Invalid:
        return False
    return True


def _reference_attrs(attrs):
    return {k: v for k, v in attrs.items() if k != "data_format"}


@settings(max_examples=80, **SETTINGS)
@given(_sliding(with_dilations=True), st.integers(-5, 5), st.booleans())
def test_max_pool_fuzz(config, axis, return_indices):
    _require("max_pool")
    x, attrs = config
    fmt = attrs["data_format"]
    valid = _valid_sliding(x, attrs) and -x.ndim <= axis < x.ndim
    if not valid:
        with pytest.raises((ValueError, TypeError)):
            jaxpool.max_pool(_layout(x, fmt), **attrs, return_indices=return_indices, axis=axis)
        return
    y_ref, i_ref = reference.max_pool(x, **_reference_attrs(attrs), axis=axis % x.ndim)
    out = jaxpool.max_pool(_layout(x, fmt), **attrs, return_indices=return_indices, axis=axis)
    y = out[0] if return_indices else out
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(_from_layout(y, fmt), y_ref)
    if return_indices:
        np.testing.assert_array_equal(_from_layout(out[1], fmt), i_ref)


@settings(max_examples=60, **SETTINGS)
@given(_sliding(with_dilations=False), st.sampled_from([False, True, False, True, "yes"]))
def test_avg_pool_fuzz(config, exclude_pad):
    _require("avg_pool")
    x, attrs = config
    fmt = attrs["data_format"]
    if not (_valid_sliding(x, attrs) and isinstance(exclude_pad, bool)):
        with pytest.raises((ValueError, TypeError)):
            jaxpool.avg_pool(_layout(x, fmt), **attrs, exclude_pad=exclude_pad)
        return
    expected = reference.avg_pool(x, **_reference_attrs(attrs), exclude_pad=exclude_pad)
    y = jaxpool.avg_pool(_layout(x, fmt), **attrs, exclude_pad=exclude_pad)
    assert y.dtype == x.dtype
    y = _from_layout(y, fmt)
    if x.dtype.kind == "i":
        # Round half to even of the exact mean; a float32 mean may sit just across a .5.
        assert np.max(np.abs(y.astype(np.int64) - expected.astype(np.int64)), initial=0) <= 1
        exact = reference.avg_pool(x.astype(np.float64), **_reference_attrs(attrs),
                                   exclude_pad=exclude_pad)
        clear = np.abs(exact - np.floor(exact) - 0.5) > 1e-3
        np.testing.assert_array_equal(y[clear], expected[clear])
    else:
        tol = 1e-3 if x.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(y.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol)


@st.composite
def _adaptive(draw):
    x = draw(_input())
    nd = x.ndim - 2
    kind = draw(st.sampled_from(["int"] * 3 + ["tuple"] * 6 + ["bad"]))
    if kind == "int":
        size = draw(st.integers(1, 5))
    elif kind == "tuple":
        size = tuple(draw(st.one_of(st.integers(1, 5), st.none())) for _ in range(nd))
    else:
        size = draw(st.sampled_from([0, -1, (1,) * (nd + 1), 2.0, "2", (0,) * nd]))
    return x, size, draw(LAYOUT)


def _valid_size(x, size):
    nd = x.ndim - 2
    if isinstance(size, tuple):
        return len(size) == nd and all(s is None or s >= 1 for s in size)
    return isinstance(size, int) and size >= 1


@settings(max_examples=40, **SETTINGS)
@given(_adaptive())
def test_adaptive_max_pool_fuzz(config):
    _require("adaptive_max_pool")
    x, size, fmt = config
    if not (_valid_size(x, size) and fmt in ("NCX", "NXC")):
        with pytest.raises((ValueError, TypeError)):
            jaxpool.adaptive_max_pool(_layout(x, fmt), size, data_format=fmt,
                                      return_indices=True)
        return
    y_ref, i_ref = reference.adaptive_max_pool(x, size)
    y, i = jaxpool.adaptive_max_pool(_layout(x, fmt), size, data_format=fmt,
                                     return_indices=True)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(_from_layout(y, fmt), y_ref)
    np.testing.assert_array_equal(_from_layout(i, fmt), i_ref)
    assert 0 <= np.min(i_ref) and np.max(i_ref) < math.prod(x.shape[2:])


@settings(max_examples=40, **SETTINGS)
@given(_adaptive())
def test_adaptive_avg_pool_fuzz(config):
    _require("adaptive_avg_pool")
    x, size, fmt = config
    if not (_valid_size(x, size) and fmt in ("NCX", "NXC")):
        with pytest.raises((ValueError, TypeError)):
            jaxpool.adaptive_avg_pool(_layout(x, fmt), size, data_format=fmt)
        return
    expected = reference.adaptive_avg_pool(x, size)
    y = _from_layout(jaxpool.adaptive_avg_pool(_layout(x, fmt), size, data_format=fmt), fmt)
    assert y.dtype == x.dtype
    if x.dtype.kind == "i":
        assert np.max(np.abs(y.astype(np.int64) - expected.astype(np.int64))) <= 1
    else:
        tol = 1e-3 if x.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(y.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol)


@settings(max_examples=30, **SETTINGS)
@given(_sliding(with_dilations=True), st.integers(0, 2))
def test_max_unpool_fuzz(config, axis):
    """Unpooling what max_pool found is the reference's scatter-add of the same indices."""
    _require("max_unpool")
    x, attrs = config
    if not _valid_sliding(x, attrs) or x.dtype.kind != "f":
        return
    fmt = attrs["data_format"]
    y, i = jaxpool.max_pool(_layout(x, fmt), **attrs, return_indices=True, axis=axis)
    out = jaxpool.max_unpool(y, i, _layout(x, fmt).shape, axis=axis, data_format=fmt)
    expected = reference.max_unpool(_from_layout(y, fmt), _from_layout(i, fmt), x.shape,
                                    axis=axis)
    np.testing.assert_array_equal(_from_layout(out, fmt), expected)
