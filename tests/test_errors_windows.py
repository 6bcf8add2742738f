"""Bad inputs of the window pools: ``jaxpool.max_pool``, ``min_pool``, ``avg_pool`` and
``lp_pool`` (rows as in ``bad_inputs``); the window rules are checked on all four."""

from __future__ import annotations

import math
import re

import jax.numpy as jnp
import numpy as np
from bad_inputs import (
    F32,
    HUGE,
    INDEX_TYPES,
    S_X,
    TRACED,
    X1,
    T,
    V,
    X,
    abstract,
    bad_input_test,
    defaults,
    family,
    names,
    non_numeric,
    row,
    rule,
    traced,
)

import jaxpool

POOLS = (jaxpool.max_pool, jaxpool.min_pool, jaxpool.avg_pool, jaxpool.lp_pool)
RANK = r"`x` must have rank 3, 4 or 5 \(batch, channels and 1 to 3 spatial axes\), got shape "
ENTRY = r"must have one entry per spatial axis"
FLOATING = r"`x` must have a floating or integer dtype, got "
PADDED = r"more than the padded input"


# fmt: off
def x_rules(attribute):
    """The rules on ``x`` of every pool that pools its spatial axes, ``attribute`` the argument
    that an NXC input without enough axes for it is blamed on."""
    return [
        rule("rank2", np.zeros((4, 4), F32), 2, error=V, match=RANK + r"\(4, 4\)"),
        rule("rank6", np.zeros((1,) * 6, F32), 1, error=V,
             match=RANK + r"\(1, 1, 1, 1, 1, 1\)"),
        rule("empty-spatial", np.zeros((1, 1, 0, 4), F32), 1, error=V,
             match=r"`x` must have non-empty spatial axes, got shape \(1, 1, 0, 4\)"),
        rule("NXC-too-few-axes", np.zeros((6, 3), F32), (2, 2), data_format="NXC", error=V,
             match=names(attribute, r"\(6, 3\)")),
        *[rule(name, x, 2, error=T, match=FLOATING + name)
          for name, x in [("complex64", X.astype(np.complex64)), ("bool", X > 0)]],
        rule("x-strings", S_X, 2, error=T, match=non_numeric("x")),
        rule("x-objects", X.astype(object), 2, error=T, match=non_numeric("x")),
        rule("x-strings-batch-axes", S_X, (2,), data_format="NXC", error=T,
             match=non_numeric("x")),
    ]


# The window description every pool reads: its rank, attributes, dtype and extent rules.
WINDOW = [
    *x_rules("kernel"),
    rule("kernel-len3", X, (2, 2, 2), error=V, match=r"`kernel` \(=\(2, 2, 2\)\) " + ENTRY),
    rule("strides-len1", X, 2, [1], error=V, match=names("strides", r"\[1\]")),
    rule("pads_begin-len3", X, 2, 1, (0, 0, 0), error=V, match=names("pads_begin", r"\(0, 0, 0\)")),
    rule("pads_end-len1", X, 2, 1, 0, (1,), error=V, match=r"`pads_end` \(=\(1,\)\) " + ENTRY),
    rule("dilations-len3", X, 2, dilations=(1, 1, 1), error=V,
         match=names("dilations", r"\(1, 1, 1\)")),
    rule("kernel-zero", X, 0, error=V, match=r"`kernel` \(=0\) must be positive"),
    rule("kernel-negative", X, (2, -3), error=V, match=names("kernel", "-3")),
    rule("strides-zero", X, 2, 0, error=V, match=r"`strides` \(=0\) must be positive"),
    rule("dilations-zero", X, 2, dilations=(1, 0), error=V,
         match=r"`dilations` \(=\(1, 0\)\) must be positive"),
    rule("pads_begin-negative", X, 2, 1, -1, error=V,
         match=r"`pads_begin` \(=-1\) must be at least 0"),
    rule("pads_end-negative", X, 2, 1, 0, (0, -2), error=V, match=names("pads_end", "-2")),
    rule("kernel-float", X, 2.0, error=T, match=r"`kernel` must be an int, got 2.0"),
    rule("strides-float", X, 2, (1.5, 1), error=T, match=names("strides", r"1\.5")),
    rule("kernel-float-array", X, np.array([2.0, 2.0]), error=T, match=names("kernel", r"2\.0")),
    rule("kernel-string", X, "2", error=T,
         match=r"`kernel` must be an int or a sequence.*got '2'"),
    rule("kernel-bool", X, True, error=T, match=names("kernel", "True")),
    rule("kernel-none", X, None, error=T, match=names("kernel", "None")),
    rule("rounding-none", X, 2, rounding_type=None, error=T, match=names("rounding_type", "None")),
    *[rule(f"{a}-{v}", X, 2, **{a: v}, error=V, match=rf"`{a}` \(={v!r}\)")
      for a, values in [("rounding_type", ["FLOOR", "CEIL"]),
                        ("auto_pad", ["Same_Upper", "SAME", "same"]),
                        ("data_format", ["ncx", "NHWC", "NCHW"])] for v in values],
    rule("kernel-too-large", X, 9, error=V, match=r"`kernel` \(=\(9, 9\)\).*" + PADDED),
    rule("dilated-kernel-too-large", X, 3, 1, 0, 0, dilations=4, error=V,
         match=names("kernel", "3")),
    rule("dilated-kernel-refused-by-the-runtime-too", np.zeros((1, 1, 4, 4), F32), kernel=[3, 3],
         strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[3, 1], error=V,
         match="`kernel`"),
]
# What the argmax pools add: indices, their axis and their type (of X pooled by 2 with indices
# unless a row says otherwise).
INDICES = [
    rule("return_indices-string", return_indices="yes", error=T,
         match=r"`return_indices` must be a bool, got 'yes'"),
    rule("return_indices-int", return_indices=1, error=T, match=names("return_indices", "1")),
    rule("axis-4", axis=4, error=V, match=r"`axis` \(=4\)"),
    rule("axis--5", axis=-5, error=V, match=names("axis", "-5")),
    rule("axis-float", axis=1.0, error=T, match=names("axis", r"1\.0")),
    rule("index_element_type-I32", index_element_type="I32", error=V,
         match=names("index_element_type", "'I32'")),
    rule("index_element_type-int8", index_element_type="int8", error=V,
         match="`index_element_type`"),
    rule("index_element_type-u8-lists", index_element_type="u8", error=V,
         match=r"`index_element_type` \(='u8'\).*" + INDEX_TYPES),
    rule("index_element_type-int16-dtype-lists", index_element_type=jnp.int16, error=V,
         match=r"`index_element_type` \(=.*int16.*\).*" + INDEX_TYPES),
    rule("index_element_type-float32", index_element_type=jnp.float32, error=V,
         match=names("index_element_type", "float32")),
    rule("index_element_type-i64-no-x64", index_element_type="i64", error=V,
         match=r"`index_element_type` \(='i64'\).*x64"),
    rule("index_element_type-int64-no-x64", index_element_type=jnp.int64, error=V,
         match=names("index_element_type", "64")),
]
# Indices of 2**32 elements (never allocated) that int32 cannot hold.
OVERFLOW = [
    rule("index-overflow", HUGE, error=V, match=r"`index_element_type`.*int32"),
    rule("index-overflow-i32", HUGE, axis=0, index_element_type="i32", error=V,
         match=r"`index_element_type`"),
    rule("index-overflow-int8", (2**12, 2**10, 2**10), error=V, match="overflows"),
]
ARGMAX = [defaults(f, kernel=2, return_indices=True) for f in (jaxpool.max_pool, jaxpool.min_pool)]
ROWS = [
    *family(POOLS, WINDOW),
    *family([defaults(f, x=X) for f in ARGMAX], INDICES),
    *family([abstract(f) for f in ARGMAX], OVERFLOW),
    *(row(f"{f.__name__}-{name}", traced(f, a, X, **k), v, error=T,
          match=rf"`{a}` must be static Python ints, got a {TRACED}")
      for f in POOLS for name, a, v, k in [("kernel-traced", "kernel", 2, {}),
                                           ("kernel-traced-array", "kernel", [2, 2], {}),
                                           ("strides-traced", "strides", [1, 1], {"kernel": 2})]),
    # avg_pool: other values of the window rules, and its own attributes.
    row("avg_pool-kernel-zero-on-one-axis", jaxpool.avg_pool, X, (2, 0), error=V,
        match=names("kernel", r"\(2, 0\)")),
    row("avg_pool-kernel-len2", jaxpool.avg_pool, X1, kernel=[2, 2], error=V,
        match=r"`kernel` \(=\[2, 2\]\) must have one entry"),
    row("avg_pool-strides-negative", jaxpool.avg_pool, X, 2, -1, error=V,
        match=names("strides", "-1")),
    row("avg_pool-pads-len3", jaxpool.avg_pool, X, 2, 1, (1, 1, 1), error=V,
        match=names("pads_begin", r"\(1, 1, 1\)")),
    row("avg_pool-kernel-fraction", jaxpool.avg_pool, X, 1.5, error=T,
        match=names("kernel", r"1\.5")),
    row("avg_pool-rounding-round", jaxpool.avg_pool, X1, kernel=2, rounding_type="round", error=V,
        match=r"`rounding_type` \(='round'\)"),
    row("avg_pool-kernel-too-large-padded", jaxpool.avg_pool, X, (2, 11), 1, 1, 1, error=V,
        match=names("kernel", "11")),
    row("avg_pool-empty-last-axis", jaxpool.avg_pool, np.zeros((1, 1, 4, 0), F32), 1, error=V,
        match=names("x", r"\(1, 1, 4, 0\)")),
    row("avg_pool-exclude_pad-yes", jaxpool.avg_pool, X1, kernel=2, exclude_pad="yes", error=T,
        match=r"`exclude_pad` must be a bool, got 'yes'"),
    *(row(f"avg_pool-{a}-{v}", jaxpool.avg_pool, X, 2, **{a: v}, error=e,
          match=names(a, re.escape(repr(v))))
      for a, v, e in [("rounding_type", "Ceil", V), ("auto_pad", "VALID", V),
                      ("data_format", "nxc", V), ("exclude_pad", "true", T),
                      ("divisor_rule", "torch", V), ("divisor_override", 0, V),
                      ("divisor_override", 2.0, T), ("integer_division", "floor", V)]),
    # lp_pool: its norm, and the dilation rules on one spatial axis.
    *(row(f"lp_pool-p-{name}", jaxpool.lp_pool, X1, kernel=2, p=p, error=V, match=rf"`p` \(={m}\)")
      for name, p, m in [("zero", 0, "0"), ("negative", -1.5, "-1.5"), ("inf", math.inf, "inf"),
                         ("nan", math.nan, "nan")]),
    row("lp_pool-integer-x", jaxpool.lp_pool, X1.astype(np.int32), 2, error=T,
        match="`x` must have a floating dtype, got int32"),
    row("lp_pool-p-bool", jaxpool.lp_pool, X1, kernel=2, p=True, error=T,
        match=r"`p` must be a positive int or float, got True"),
    row("lp_pool-p-string", jaxpool.lp_pool, X1, kernel=2, p="2", error=T,
        match=r"`p` must be a positive int or float, got '2'"),
    row("lp_pool-dilations-zero-1d", jaxpool.lp_pool, np.ones((1, 1, 5), F32), kernel=2,
        dilations=0, error=V, match=r"`dilations` \(=0\)"),
    row("lp_pool-dilated-kernel-too-large-1d", jaxpool.lp_pool, np.ones((1, 1, 5), F32), kernel=4,
        dilations=2, error=V, match=r"`kernel` \(=\(4,\)\) with `dilations`"),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
