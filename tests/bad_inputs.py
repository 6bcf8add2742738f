"""What the bad-input tables (``tests/test_errors_*.py``, one per public module) share.

Each row is ``(fn, args, kwargs, exception, match)``: ``fn(*args, **kwargs)`` must raise
``exception`` (``ValueError`` or ``TypeError``, at trace time) with a message that
``re.search(match, message)`` finds.  Most messages name the argument in backticks and echo the
offending value; :func:`names` matches both, in any order.  ``fn`` is a public function, or a
small wrapper (``__wrapped__`` is the public function) that traces an argument under jit or
evaluates shapes only.
"""

from __future__ import annotations

import functools
import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

V, T = ValueError, TypeError
TRACED = r"traced value \w*Tracer"
# Accepted spellings of `index_element_type`, strings and dtypes, as its errors list them.
INDEX_TYPES = r"'i32', 'i64', 'int32', 'int64'.*jnp\.int32, jnp\.int64.*None"
F32 = np.float32

X = np.zeros((2, 3, 8, 8), F32)
X1 = np.ones((1, 1, 4), F32)
Y = np.zeros((2, 3, 4, 4), F32)
IDX = np.zeros((2, 3, 4, 4), np.int32)
S_X = X.astype(str)
HUGE = (2**12, 2**10, 2**5, 2**5)  # 2**32 elements, 16 GiB (never allocated)
# Regions: NCHW features with 8 channels, 3 boxes of 4 or 5 numbers, and their images.
X_ROI = np.zeros((2, 8, 6, 6), F32)
R4 = np.zeros((3, 4), F32)
R5 = np.zeros((3, 5), F32)
B = np.zeros(3, np.int32)
PYRAMID = [np.zeros((2, 8, 8, 8), F32), np.zeros((2, 8, 4, 4), F32)]
FPN2 = (1 / 4, 1 / 8)
S8 = np.zeros((2, 3, 2), F32)  # fractional max pooling's samples for the planes of X
# Indices that 2x2 windows of an 8x8 map give (axis=2), to be unpooled into a 5x5 map: the
# 72 of 96 that name positions 25 and beyond would be lost.
Y8 = np.ones((2, 3, 4, 4), F32)
I8 = np.broadcast_to((2 * np.arange(4)[:, None] + 1) * 8 + 2 * np.arange(4) + 1, Y8.shape)
LOST = r"(?s)`indices` \(taken with `axis`=2\).*`output_shape` \(=\(%s\)\): 72 of 96 values"


def names(argument, value):
    """A regex that finds `argument` in backticks and ``value`` (a regex) in a message."""
    return rf"(?s)(?=.*`{re.escape(argument)}`)(?=.*{value})"


def non_numeric(argument):
    """A regex for jaxpool's error for an array of strings or objects passed as `argument`."""
    return rf"`{re.escape(argument)}` must be an array of numbers or booleans, got .*dtype (<U|obj)"


def traced(fn, attribute, *args, **static):
    """``value -> fn(*args, **static, attribute=value)`` with ``value`` traced under jit."""

    @functools.wraps(fn)
    def call(value):
        return jax.jit(lambda v: fn(*args, **static, **{attribute: v}))(jnp.asarray(value))

    return call


def abstract(fn):
    """``(shape, **kwargs) -> fn(x, **kwargs)`` on a float32 ``x`` of ``shape`` that is never
    allocated (``jax.eval_shape``)."""

    @functools.wraps(fn)
    def call(shape, *args, **kwargs):
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        return jax.eval_shape(lambda x: fn(x, *args, **kwargs), x)

    return call


def defaults(fn, **good):
    """``fn`` called with the ``good`` keyword arguments, where a row's own replace them."""

    @functools.wraps(fn)
    def call(*args, **bad):
        return fn(*args, **{**good, **bad})

    return call


def row(id, fn, *args, error, match, **kwargs):
    return pytest.param(fn, args, kwargs, error, match, id=id)


def rule(name, *args, error, match, **kwargs):
    """A row without its function, for :func:`family`."""
    return name, args, kwargs, error, match


def family(fns, rules):
    """Every rule as a row of every function of ``fns``, with the id ``"{function}-{name}"``."""
    return [
        pytest.param(fn, args, kwargs, error, match, id=f"{fn.__name__}-{name}")
        for fn in fns
        for name, args, kwargs, error, match in rules
    ]


def bad_input_test(rows):
    """The test of a table: each row raises its error with a message that its regex finds."""

    @pytest.mark.parametrize(("fn", "args", "kwargs", "error", "match"), rows)
    def test_bad_input(fn, args, kwargs, error, match):
        with pytest.raises(error, match=match):
            fn(*args, **kwargs)

    return test_bad_input


def public(fn):
    """The function a row calls, unwrapped to the op's definition (the public ops are wrapped
    by ``exporting.exportable``)."""
    if isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.unwrap(fn)
