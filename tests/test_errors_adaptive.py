"""Bad inputs of the pools that take an output size: ``jaxpool.adaptive_max_pool``,
``adaptive_avg_pool`` and ``fractional_max_pool`` (rows as in ``bad_inputs``)."""

from __future__ import annotations

import numpy as np
from bad_inputs import (
    F32,
    INDEX_TYPES,
    S8,
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
from test_errors_windows import x_rules

import jaxpool

ADAPTIVE = (jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool)
FMP = jaxpool.fractional_max_pool

# fmt: off
OUTPUT_SIZE = [
    *x_rules("output_size"),
    rule("output_size-zero", X, 0, error=V,
         match=r"`output_size` \(=0\) must be positive on every spatial axis"),
    rule("output_size-negative", X, (2, -1), error=V, match=names("output_size", "-1")),
    rule("output_size-len3", X, (2, 2, 2), error=V, match=names("output_size", r"\(2, 2, 2\)")),
    rule("output_size-len2", X1, [2, 2], error=V,
         match=r"`output_size` \(=\[2, 2\]\) must have one entry"),
    rule("output_size-float", X, 2.5, error=T, match=r"`output_size` must be an int, got 2\.5"),
    rule("output_size-string", X1, "2", error=T,
         match="`output_size` must be an int or a sequence"),
    rule("output_size-string-4", X, "4", error=T, match=names("output_size", "'4'")),
    rule("data_format-Nxc", X, 2, data_format="Nxc", error=V,
         match=names("data_format", "'Nxc'")),
    rule("data_format-NWC", X1, 2, data_format="NWC", error=V, match=r"`data_format` \(='NWC'\)"),
]
# fractional_max_pool: a kernel, an output size and one sample per plane and axis (of X pooled
# by 2 to 3 with S8, unless a row says otherwise).
FRACTIONAL = [
    rule("rank2", x=np.zeros((8, 8), F32), error=V, match="`x` must have rank"),
    rule("kernel-zero", kernel=0, error=V, match=names("kernel", r"0\) must be positive")),
    rule("kernel-len3", kernel=(2, 2, 2), error=V, match=names("kernel", r"\(2, 2, 2\)")),
    rule("output_size-zero", output_size=(0, 3), error=V, match=names("output_size", r"\(0, 3\)")),
    rule("output_size-float", output_size=2.5, error=T, match=names("output_size", "2.5")),
    rule("too-large", kernel=4, output_size=6, error=V,
         match=r"(?s)`output_size` \(=6\) and `kernel` \(=4\).*<= 8.*got 6 \+ 4 - 1"),
    rule("samples-shape", samples=np.zeros((2, 3, 3), F32), error=V,
         match=names("samples", r"\(2, 3, 2\).*\(2, 3, 3\)")),
    rule("samples-NXC-shape", x=np.zeros((2, 8, 8, 3), F32), samples=np.zeros((2, 8, 2), F32),
         data_format="NXC", error=V, match=names("samples", r"\(2, 8, 2\)")),
    rule("samples-batch-axes", x=np.zeros((2, 3, 8, 8, 4), F32), kernel=(2, 2),
         samples=np.zeros((3, 4, 2), F32), data_format="NXC", error=V,
         match=r"`samples` of shape \(3, 4, 2\) must begin with the batch axes \(2, 3\)"),
    rule("samples-int", samples=S8.astype(np.int32), error=T, match=names("samples", "int32")),
    rule("samples-strings", samples=S8.astype(str), error=T, match=non_numeric("samples")),
    rule("data_format", data_format="NHWC", error=V, match=names("data_format", "'NHWC'")),
    rule("return_indices", return_indices="yes", error=T, match=names("return_indices", "'yes'")),
    rule("i64-without-x64", return_indices=True, index_element_type="i64", error=V,
         match=names("index_element_type", "'i64'")),
    rule("index_element_type-lists", return_indices=True, index_element_type="int8", error=V,
         match=INDEX_TYPES),
]
ROWS = [
    *family(ADAPTIVE, OUTPUT_SIZE),
    *(row(f"{f.__name__}-output_size-traced", traced(f, "output_size", X), 2, error=T,
          match=rf"`output_size` must be static Python ints, got a {TRACED}") for f in ADAPTIVE),
    row("adaptive_max_pool-return_indices-int", jaxpool.adaptive_max_pool, X1, 2, return_indices=1,
        error=T, match="`return_indices` must be a bool, got 1"),
    row("adaptive_max_pool-index_element_type-int16", jaxpool.adaptive_max_pool, X, 2,
        return_indices=True, index_element_type="int16", error=V,
        match=names("index_element_type", "'int16'")),
    row("adaptive_max_pool-index_element_type-i16", jaxpool.adaptive_max_pool, X1, 2,
        return_indices=True, index_element_type="i16", error=V,
        match=r"`index_element_type` \(='i16'\)"),
    row("adaptive_max_pool-index_element_type-object-lists", jaxpool.adaptive_max_pool, X, 2,
        return_indices=True, index_element_type=object(), error=T,
        match=r"`index_element_type` must be one of .*" + INDEX_TYPES + ".*got <object"),
    row("adaptive_max_pool-i64-no-x64", jaxpool.adaptive_max_pool, X, 2, return_indices=True,
        index_element_type="i64", error=V, match=r"`index_element_type` \(='i64'\) needs 64-bit"),
    row("adaptive_max_pool-index-overflow", abstract(jaxpool.adaptive_max_pool),
        (1, 1, 2**16, 2**16), output_size=2, return_indices=True, error=V,
        match=names("index_element_type", "65536")),
    row("fractional_max_pool-output_size-traced", traced(FMP, "output_size", X, 2, samples=S8), 3,
        error=T, match=names("output_size", TRACED)),
    *family([defaults(FMP, x=X, kernel=2, output_size=3, samples=S8)], FRACTIONAL),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
