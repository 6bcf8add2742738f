"""One table of bad inputs for every public function.

Each row is ``(fn, args, kwargs, exception, match)``: ``fn(*args, **kwargs)`` must raise
``exception`` (``ValueError`` or ``TypeError``, at trace time) with a message that
``re.search(match, message)`` finds.  Most messages name the argument in backticks and echo the
offending value; :func:`names` matches both, in any order.  ``fn`` is a public function, or a
small wrapper (``__wrapped__`` is the public function) that traces an argument under jit,
evaluates shapes only, or builds and calls an OpenVINO layer or a Flax module.
"""

from __future__ import annotations

import functools
import inspect
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from onnx import helper

import jaxpool
import jaxpool.onnx
import jaxpool.torch
from jaxpool import nn as pnn
from jaxpool import openvino as jov
from jaxpool.nn import eqx as peqx

V, T = ValueError, TypeError
TRACED = r"traced value \w*Tracer"


def names(argument, value):
    """A regex that finds `argument` in backticks and ``value`` (a regex) in a message."""
    return rf"(?s)(?=.*`{re.escape(argument)}`)(?=.*{value})"


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


@functools.wraps(jaxpool.max_unpool)
def abstract_unpool(shape, **kwargs):
    """``max_unpool`` of float32 ``y`` and int32 indices of ``shape``, never allocated."""
    y = jax.ShapeDtypeStruct(shape, jnp.float32)
    i = jax.ShapeDtypeStruct(shape, jnp.int32)
    return jax.eval_shape(functools.partial(jaxpool.max_unpool, **kwargs), y, i)


X = np.zeros((2, 3, 8, 8), np.float32)
Y = np.zeros((2, 3, 4, 4), np.float32)
IDX = np.zeros((2, 3, 4, 4), np.int32)
X2 = np.zeros((1, 2, 6, 6), np.float32)
X1 = np.ones((1, 1, 4), np.float32)
# Indices that 2x2 windows of an 8x8 map give (axis=2), to be unpooled into a 5x5 map: the
# 72 of 96 that name positions 25 and beyond would be lost.
Y8 = np.ones((2, 3, 4, 4), np.float32)
I8 = np.broadcast_to((2 * np.arange(4)[:, None] + 1) * 8 + 2 * np.arange(4) + 1, Y8.shape)
LOST = r"(?s)`indices` \(taken with `axis`=2\).*`output_shape` \(=\(%s\)\): 72 of 96 values"
Y1 = np.ones((1, 2, 3), np.float32)
IDX1 = np.zeros((1, 2, 3), np.int32)
HUGE = (2**12, 2**10, 2**5, 2**5)  # 2**32 elements, 16 GiB (never allocated)


@functools.wraps(jov.layer)
def layer_called(*args):
    """Builds ``openvino.layer(*args)`` and calls it on ``X`` (and an output size of 2 x 2)."""
    pool = jov.layer(*args)
    return pool(X) if not pool.type.startswith("Adaptive") else pool(X, (2, 2))


@functools.wraps(jov.layer)
def layer_call(args, *inputs):
    """Builds ``openvino.layer(*args)`` and calls it on ``inputs``."""
    return jov.layer(*args)(*inputs)


@functools.wraps(jov.layer)
def layer_traced(args, *inputs):
    """Builds ``openvino.layer(*args)`` and calls it under jit, every input traced."""
    return jax.jit(jov.layer(*args))(*inputs)


def module_called(module, *inputs):
    """Calls an NNX module, or applies a Linen module without variables."""
    if hasattr(module, "apply"):
        return module.apply({}, *inputs)
    return module(*inputs)


def row(id, fn, *args, error, match, **kwargs):
    return pytest.param(fn, args, kwargs, error, match, id=id)


K = {"kernel": "2, 2", "strides": "1, 1"}

# fmt: off
ROWS = [
    # ------------------------------------------------------------------------------ max_pool
    row("max_pool-rank2", jaxpool.max_pool, np.zeros((4, 4), np.float32), 2, error=V,
        match=names("x", r"\(4, 4\)")),
    row("max_pool-rank2-message", jaxpool.max_pool, np.zeros((6, 6), np.float32), kernel=2, error=V,
        match="`x` must have rank"),
    row("max_pool-rank6", jaxpool.max_pool, np.zeros((1,) * 6, np.float32), 1, error=V,
        match=names("x", r"\(1, 1, 1, 1, 1, 1\)")),
    row("max_pool-kernel-len3", jaxpool.max_pool, X, (2, 2, 2), error=V,
        match=names("kernel", r"\(2, 2, 2\)")),
    row("max_pool-kernel-len3-message", jaxpool.max_pool, X2, kernel=(2, 2, 2), error=V,
        match=r"`kernel` \(=\(2, 2, 2\)\) must have one entry"),
    row("max_pool-strides-len1", jaxpool.max_pool, X, 2, [1], error=V,
        match=names("strides", r"\[1\]")),
    row("max_pool-pads_begin-len3", jaxpool.max_pool, X, 2, 1, (0, 0, 0), error=V,
        match=names("pads_begin", r"\(0, 0, 0\)")),
    row("max_pool-pads_end-len1", jaxpool.max_pool, X, 2, 1, 0, (1,), error=V,
        match=names("pads_end", r"\(1,\)")),
    row("max_pool-pads_end-len1-kw", jaxpool.max_pool, X2, kernel=2, pads_end=(1,), error=V,
        match="`pads_end`"),
    row("max_pool-dilations-len3", jaxpool.max_pool, X, 2, dilations=(1, 1, 1), error=V,
        match=names("dilations", r"\(1, 1, 1\)")),
    row("max_pool-kernel-zero", jaxpool.max_pool, X, 0, error=V, match=names("kernel", "0")),
    row("max_pool-kernel-zero-message", jaxpool.max_pool, X2, kernel=0, error=V,
        match=r"`kernel` \(=0\) must be positive"),
    row("max_pool-kernel-negative", jaxpool.max_pool, X, (2, -3), error=V,
        match=names("kernel", "-3")),
    row("max_pool-strides-zero", jaxpool.max_pool, X, 2, 0, error=V, match=names("strides", "0")),
    row("max_pool-strides-zero-message", jaxpool.max_pool, X2, kernel=2, strides=0, error=V,
        match=r"`strides` \(=0\) must be positive"),
    row("max_pool-dilations-zero", jaxpool.max_pool, X, 2, dilations=(1, 0), error=V,
        match=names("dilations", r"\(1, 0\)")),
    row("max_pool-dilations-zero-X2", jaxpool.max_pool, X2, kernel=2, dilations=(1, 0), error=V,
        match="`dilations`"),
    row("max_pool-pads_begin-negative", jaxpool.max_pool, X, 2, 1, -1, error=V,
        match=names("pads_begin", "-1")),
    row("max_pool-pads_begin-negative-message", jaxpool.max_pool, X2, kernel=2, pads_begin=-1,
        error=V, match=r"`pads_begin` \(=-1\) must be at least 0"),
    row("max_pool-pads_end-negative", jaxpool.max_pool, X, 2, 1, 0, (0, -2), error=V,
        match=names("pads_end", "-2")),
    row("max_pool-kernel-float", jaxpool.max_pool, X, 2.0, error=T, match=names("kernel", r"2\.0")),
    row("max_pool-kernel-float-message", jaxpool.max_pool, X2, kernel=2.0, error=T,
        match=r"`kernel` must be an int, got 2.0"),
    row("max_pool-strides-float", jaxpool.max_pool, X, 2, (1.5, 1), error=T,
        match=names("strides", r"1\.5")),
    row("max_pool-kernel-float-array", jaxpool.max_pool, X, np.array([2.0, 2.0]), error=T,
        match=names("kernel", r"2\.0")),
    row("max_pool-kernel-string", jaxpool.max_pool, X, "2", error=T, match=names("kernel", "'2'")),
    row("max_pool-kernel-string-message", jaxpool.max_pool, X2, kernel="2", error=T,
        match="`kernel` must be an int or a sequence"),
    row("max_pool-kernel-bool", jaxpool.max_pool, X, True, error=T, match=names("kernel", "True")),
    row("max_pool-kernel-none", jaxpool.max_pool, X, None, error=T, match=names("kernel", "None")),
    row("max_pool-rounding-FLOOR", jaxpool.max_pool, X, 2, rounding_type="FLOOR", error=V,
        match=names("rounding_type", "'FLOOR'")),
    row("max_pool-rounding-CEIL", jaxpool.max_pool, X2, kernel=2, rounding_type="CEIL", error=V,
        match=r"`rounding_type` \(='CEIL'\)"),
    row("max_pool-rounding-none", jaxpool.max_pool, X, 2, rounding_type=None, error=T,
        match=names("rounding_type", "None")),
    row("max_pool-auto_pad-Same_Upper", jaxpool.max_pool, X, 2, auto_pad="Same_Upper", error=V,
        match=names("auto_pad", "'Same_Upper'")),
    row("max_pool-auto_pad-SAME", jaxpool.max_pool, X, 2, auto_pad="SAME", error=V,
        match=names("auto_pad", "'SAME'")),
    row("max_pool-auto_pad-same", jaxpool.max_pool, X2, kernel=2, auto_pad="same", error=V,
        match=r"`auto_pad` \(='same'\)"),
    row("max_pool-data_format-ncx", jaxpool.max_pool, X, 2, data_format="ncx", error=V,
        match=names("data_format", "'ncx'")),
    row("max_pool-data_format-NHWC", jaxpool.max_pool, X, 2, data_format="NHWC", error=V,
        match=names("data_format", "'NHWC'")),
    row("max_pool-data_format-NCHW", jaxpool.max_pool, X2, kernel=2, data_format="NCHW", error=V,
        match=r"`data_format` \(='NCHW'\)"),
    row("max_pool-axis-4", jaxpool.max_pool, X, 2, return_indices=True, axis=4, error=V,
        match=names("axis", "4")),
    row("max_pool-axis-4-message", jaxpool.max_pool, X2, kernel=2, return_indices=True, axis=4,
        error=V, match=r"`axis` \(=4\)"),
    row("max_pool-axis--5", jaxpool.max_pool, X, 2, return_indices=True, axis=-5, error=V,
        match=names("axis", "-5")),
    row("max_pool-axis-float", jaxpool.max_pool, X, 2, return_indices=True, axis=1.0, error=T,
        match=names("axis", r"1\.0")),
    row("max_pool-complex", jaxpool.max_pool, X.astype(np.complex64), 2, error=T,
        match=names("x", "complex64")),
    row("max_pool-complex-message", jaxpool.max_pool, np.zeros((1, 2, 6), np.complex64), kernel=2,
        error=T, match="`x` must have a floating"),
    row("max_pool-bool", jaxpool.max_pool, X > 0, 2, error=T, match=names("x", "bool")),
    row("max_pool-bool-message", jaxpool.max_pool, np.zeros((1, 2, 6), bool), kernel=2, error=T,
        match="`x` must have a floating"),
    row("max_pool-kernel-traced", traced(jaxpool.max_pool, "kernel", X), 2, error=T,
        match=names("kernel", TRACED)),
    row("max_pool-kernel-traced-message", traced(jaxpool.max_pool, "kernel", X2), [2, 2], error=T,
        match="`kernel` must be static"),
    row("max_pool-strides-traced", traced(jaxpool.max_pool, "strides", X, kernel=2), [1, 1],
        error=T, match=names("strides", TRACED)),
    row("max_pool-kernel-too-large", jaxpool.max_pool, X, 9, error=V, match=names("kernel", "9")),
    row("max_pool-kernel-too-large-message", jaxpool.max_pool, X2, kernel=7, error=V,
        match="`kernel`.*more than the padded input"),
    row("max_pool-dilated-kernel-too-large", jaxpool.max_pool, X, 3, 1, 0, 0, dilations=4, error=V,
        match=names("kernel", "3")),
    row("max_pool-dilated-kernel-refused-by-the-runtime-too", jaxpool.max_pool,
        np.zeros((1, 1, 4, 4), np.float32), kernel=[3, 3], strides=[1, 1], pads_begin=[0, 0],
        pads_end=[0, 0], dilations=[3, 1], error=V, match="`kernel`"),
    row("max_pool-empty-spatial", jaxpool.max_pool, np.zeros((1, 1, 0, 4), np.float32), 1, error=V,
        match=names("x", r"\(1, 1, 0, 4\)")),
    row("max_pool-empty-spatial-message", jaxpool.max_pool, np.zeros((1, 2, 0), np.float32),
        kernel=1, error=V, match="non-empty spatial"),
    row("max_pool-index_element_type-I32", jaxpool.max_pool, X, 2, return_indices=True,
        index_element_type="I32", error=V, match=names("index_element_type", "'I32'")),
    row("max_pool-index_element_type-int8", jaxpool.max_pool, X2, kernel=2, return_indices=True,
        index_element_type="int8", error=V, match="`index_element_type`"),
    row("max_pool-index_element_type-i64-no-x64", jaxpool.max_pool, X, 2, return_indices=True,
        index_element_type="i64", error=V, match=names("index_element_type", "i64")),
    row("max_pool-index_element_type-i64-no-x64-message", jaxpool.max_pool,
        np.zeros((1, 1, 4), np.float32), 2, return_indices=True, index_element_type="i64", error=V,
        match="`index_element_type`.*x64"),
    row("max_pool-index_element_type-int64-no-x64", jaxpool.max_pool, X, 2, return_indices=True,
        index_element_type=jnp.int64, error=V, match=names("index_element_type", "64")),
    row("max_pool-index_element_type-float32", jaxpool.max_pool, X, 2, return_indices=True,
        index_element_type=jnp.float32, error=V, match=names("index_element_type", "float32")),
    row("max_pool-return_indices-string", jaxpool.max_pool, X, 2, return_indices="yes", error=T,
        match=names("return_indices", "'yes'")),
    row("max_pool-return_indices-string-X2", jaxpool.max_pool, X2, kernel=2, return_indices="yes",
        error=T, match="`return_indices`"),
    row("max_pool-index-overflow", abstract(jaxpool.max_pool), HUGE, kernel=2, return_indices=True,
        error=V, match=names("index_element_type", "int32")),
    row("max_pool-index-overflow-axis0", abstract(jaxpool.max_pool), HUGE, 2, return_indices=True,
        axis=0, error=V, match=r"`index_element_type`.*int32"),
    row("max_pool-index-overflow-i32", abstract(jaxpool.max_pool), HUGE, 2, return_indices=True,
        axis=0, index_element_type="i32", error=V, match=r"`index_element_type`"),
    row("max_pool-index-overflow-int8", abstract(jaxpool.max_pool), (2**12, 2**10, 2**10), 2,
        return_indices=True, error=V, match="overflows"),
    # ------------------------------------------------------------------------------ min_pool
    row("min_pool-bool", jaxpool.min_pool, X > 0, 2, error=T, match=names("x", "bool")),
    row("min_pool-kernel-zero", jaxpool.min_pool, X, 0, error=V, match=names("kernel", "0")),
    row("min_pool-return_indices-int", jaxpool.min_pool, X, 2, return_indices=1, error=T,
        match=names("return_indices", "1")),
    # ------------------------------------------- leading batch axes (NXC, a sequence window)
    row("max_pool-NXC-too-few-axes", jaxpool.max_pool, np.zeros((6, 3), np.float32), (2, 2),
        data_format="NXC", error=V, match=names("kernel", r"\(6, 3\)")),
    row("adaptive_avg_pool-NXC-too-few-axes", jaxpool.adaptive_avg_pool,
        np.zeros((6, 3), np.float32), (2, 2), data_format="NXC", error=V,
        match=names("output_size", r"\(6, 3\)")),
    row("max_unpool-NXC-output_shape-batch-axes", jaxpool.max_unpool, np.zeros((2, 3, 2, 2, 1)),
        np.zeros((2, 3, 2, 2, 1), np.int32), (3, 2, 4, 4, 1), axis=2, kernel=(2, 2),
        data_format="NXC", error=V, match=names("output_shape", r"\(2, 3\)")),
    row("max_unpool-NXC-output_shape-rank", jaxpool.max_unpool, np.zeros((2, 3, 2, 2, 1)),
        np.zeros((2, 3, 2, 2, 1), np.int32), (2, 3, 4, 4), axis=2, kernel=(2, 2),
        data_format="NXC", error=V, match=names("output_shape", r"\(2, 3, 4, 4\)")),
    row("max_unpool-NXC-indices-shape", jaxpool.max_unpool, np.zeros((2, 3, 2, 2, 1)),
        np.zeros((3, 2, 2, 2, 1), np.int32), (2, 3, 4, 4, 1), axis=2, kernel=(2, 2),
        data_format="NXC", error=V, match=names("indices", r"\(3, 2, 2, 2, 1\)")),
    # ------------------------------------------------------------------------------ avg_pool
    row("avg_pool-rank2", jaxpool.avg_pool, np.zeros((8, 8), np.float32), 2, error=V,
        match=names("x", r"\(8, 8\)")),
    row("avg_pool-rank2-message", jaxpool.avg_pool, np.ones((2, 3), np.float32), kernel=1, error=V,
        match="`x` must have rank"),
    row("avg_pool-bool-message", jaxpool.avg_pool, np.ones((1, 1, 4), bool), kernel=1, error=T,
        match="`x` must have a floating"),
    row("avg_pool-kernel-zero", jaxpool.avg_pool, X, (2, 0), error=V,
        match=names("kernel", r"\(2, 0\)")),
    row("avg_pool-kernel-zero-message", jaxpool.avg_pool, X1, kernel=0, error=V,
        match=r"`kernel` \(=0\) must be positive"),
    row("avg_pool-kernel-len2", jaxpool.avg_pool, X1, kernel=[2, 2], error=V,
        match=r"`kernel` \(=\[2, 2\]\) must have one entry"),
    row("avg_pool-strides-negative", jaxpool.avg_pool, X, 2, -1, error=V,
        match=names("strides", "-1")),
    row("avg_pool-strides-zero", jaxpool.avg_pool, X1, kernel=2, strides=0, error=V,
        match=r"`strides` \(=0\)"),
    row("avg_pool-pads-len3", jaxpool.avg_pool, X, 2, 1, (1, 1, 1), error=V,
        match=names("pads_begin", r"\(1, 1, 1\)")),
    row("avg_pool-pads_begin-negative", jaxpool.avg_pool, X1, kernel=2, pads_begin=-1, error=V,
        match=r"`pads_begin` \(=-1\)"),
    row("avg_pool-kernel-float", jaxpool.avg_pool, X, 1.5, error=T, match=names("kernel", r"1\.5")),
    row("avg_pool-kernel-float-message", jaxpool.avg_pool, X1, kernel=2.0, error=T,
        match="`kernel` must be an int"),
    row("avg_pool-rounding-Ceil", jaxpool.avg_pool, X, 2, rounding_type="Ceil", error=V,
        match=names("rounding_type", "'Ceil'")),
    row("avg_pool-rounding-round", jaxpool.avg_pool, X1, kernel=2, rounding_type="round", error=V,
        match=r"`rounding_type` \(='round'\)"),
    row("avg_pool-auto_pad-VALID", jaxpool.avg_pool, X, 2, auto_pad="VALID", error=V,
        match=names("auto_pad", "'VALID'")),
    row("avg_pool-auto_pad-same", jaxpool.avg_pool, X1, kernel=2, auto_pad="same", error=V,
        match=r"`auto_pad` \(='same'\)"),
    row("avg_pool-data_format-nxc", jaxpool.avg_pool, X, 2, data_format="nxc", error=V,
        match=names("data_format", "'nxc'")),
    row("avg_pool-data_format-NHWC", jaxpool.avg_pool, X1, kernel=2, data_format="NHWC", error=V,
        match=r"`data_format` \(='NHWC'\)"),
    row("avg_pool-exclude_pad-string", jaxpool.avg_pool, X, 2, exclude_pad="true", error=T,
        match=names("exclude_pad", "'true'")),
    row("avg_pool-exclude_pad-yes", jaxpool.avg_pool, X1, kernel=2, exclude_pad="yes", error=T,
        match=r"`exclude_pad` must be a bool, got 'yes'"),
    row("avg_pool-complex", jaxpool.avg_pool, X.astype(np.complex64), 2, error=T,
        match=names("x", "complex64")),
    row("avg_pool-bool", jaxpool.avg_pool, X > 0, 2, error=T, match=names("x", "bool")),
    row("avg_pool-kernel-too-large", jaxpool.avg_pool, X, (2, 11), 1, 1, 1, error=V,
        match=names("kernel", "11")),
    row("avg_pool-kernel-too-large-message", jaxpool.avg_pool, X1, kernel=9, error=V,
        match="more than the padded input"),
    row("avg_pool-kernel-traced", traced(jaxpool.avg_pool, "kernel", X), 2, error=T,
        match=names("kernel", TRACED)),
    row("avg_pool-empty-spatial", jaxpool.avg_pool, np.zeros((1, 1, 4, 0), np.float32), 1, error=V,
        match=names("x", r"\(1, 1, 4, 0\)")),
    # --------------------------------------------------------------------- adaptive_max_pool
    row("adaptive_max_pool-output_size-zero", jaxpool.adaptive_max_pool, X, 0, error=V,
        match=names("output_size", "0")),
    row("adaptive_max_pool-output_size-len3", jaxpool.adaptive_max_pool, X, (2, 2, 2), error=V,
        match=names("output_size", r"\(2, 2, 2\)")),
    row("adaptive_max_pool-rank2", jaxpool.adaptive_max_pool, np.zeros((3, 3), np.float32), 2,
        error=V, match=names("x", r"\(3, 3\)")),
    row("adaptive_max_pool-data_format-Nxc", jaxpool.adaptive_max_pool, X, 2, data_format="Nxc",
        error=V, match=names("data_format", "'Nxc'")),
    row("adaptive_max_pool-index_element_type-int16", jaxpool.adaptive_max_pool, X, 2,
        return_indices=True, index_element_type="int16", error=V,
        match=names("index_element_type", "'int16'")),
    row("adaptive_max_pool-index_element_type-i16", jaxpool.adaptive_max_pool, X1, 2,
        return_indices=True, index_element_type="i16", error=V,
        match=r"`index_element_type` \(='i16'\)"),
    row("adaptive_max_pool-i64-no-x64", jaxpool.adaptive_max_pool, X, 2, return_indices=True,
        index_element_type="i64", error=V, match=names("index_element_type", "i64")),
    row("adaptive_max_pool-i64-no-x64-message", jaxpool.adaptive_max_pool, X1, 2,
        return_indices=True, index_element_type="i64", error=V, match="needs 64-bit"),
    row("adaptive_max_pool-return_indices-int", jaxpool.adaptive_max_pool, X1, 2, return_indices=1,
        error=T, match="`return_indices` must be a bool, got 1"),
    row("adaptive_max_pool-output_size-traced", traced(jaxpool.adaptive_max_pool, "output_size", X),
        2, error=T, match=names("output_size", TRACED)),
    row("adaptive_max_pool-complex", jaxpool.adaptive_max_pool, X.astype(np.complex64), 2, error=T,
        match=names("x", "complex64")),
    row("adaptive_max_pool-index-overflow", abstract(jaxpool.adaptive_max_pool),
        (1, 1, 2**16, 2**16), output_size=2, return_indices=True, error=V,
        match=names("index_element_type", "65536")),
    # --------------------------------------------------------------------- adaptive_avg_pool
    row("adaptive_avg_pool-output_size-negative", jaxpool.adaptive_avg_pool, X, (2, -1), error=V,
        match=names("output_size", "-1")),
    row("adaptive_avg_pool-output_size-float", jaxpool.adaptive_avg_pool, X, 2.5, error=T,
        match=names("output_size", r"2\.5")),
    row("adaptive_avg_pool-output_size-string", jaxpool.adaptive_avg_pool, X, "4", error=T,
        match=names("output_size", "'4'")),
    row("adaptive_avg_pool-bool", jaxpool.adaptive_avg_pool, X > 0, 2, error=T,
        match=names("x", "bool")),
    row("adaptive_avg_pool-empty-spatial", jaxpool.adaptive_avg_pool,
        np.zeros((1, 1, 0, 3), np.float32), 1, error=V, match=names("x", r"\(1, 1, 0, 3\)")),
    row("adaptive_avg_pool-output_size-traced",
        traced(jaxpool.adaptive_avg_pool, "output_size", jnp.ones((1, 1, 4))), 2, error=T,
        match="`output_size` must be static"),
    # ------------------------------------------------------------------------------ max_unpool
    row("max_unpool-indices-float", jaxpool.max_unpool, Y, IDX.astype(np.float32), X.shape,
        axis=0, error=T, match=names("indices", "float32")),
    row("max_unpool-indices-float-message", jaxpool.max_unpool, Y1, IDX1.astype(np.float32),
        (1, 2, 6), axis=0, error=T, match="`indices` must have an integer dtype"),
    row("max_unpool-indices-shape", jaxpool.max_unpool, Y, IDX[:, :, :2], X.shape, axis=0, error=V,
        match=names("indices", r"\(2, 3, 2, 4\)")),
    row("max_unpool-indices-shape-message", jaxpool.max_unpool, Y1, IDX1[..., :2], (1, 2, 6),
        axis=0, error=V, match=r"`indices` of shape \(1, 2, 2\) must have the shape"),
    row("max_unpool-output_shape-rank", jaxpool.max_unpool, Y, IDX, (2, 3, 8), axis=0, error=V,
        match=names("output_shape", r"\(2, 3, 8\)")),
    row("max_unpool-output_shape-rank-message", jaxpool.max_unpool, Y1, IDX1, (1, 2),
        axis=0, error=V,
        match=r"`output_shape` \(=\(1, 2\)\) must have one entry per dimension of `y` \(3\)"),
    row("max_unpool-output_shape-batch", jaxpool.max_unpool, Y, IDX, (5, 3, 8, 8), axis=0, error=V,
        match=names("output_shape", r"\(5, 3, 8, 8\)")),
    row("max_unpool-output_shape-channels-message", jaxpool.max_unpool, Y1, IDX1, (1, 3, 6),
        axis=0, error=V, match="must keep the batch and channel sizes"),
    row("max_unpool-output_shape-batch-message", jaxpool.max_unpool, Y1, IDX1, (2, 2, 6),
        axis=0, error=V, match="must keep the batch and channel sizes"),
    row("max_unpool-output_shape-zero", jaxpool.max_unpool, Y, IDX, (2, 3, 0, 8), axis=0, error=V,
        match=names("output_shape", r"\(2, 3, 0, 8\)")),
    row("max_unpool-output_shape-zero-message", jaxpool.max_unpool, Y1, IDX1, (1, 2, 0),
        axis=0, error=V, match="must be positive on every dimension of `y`"),
    row("max_unpool-output_shape-int", jaxpool.max_unpool, Y1, IDX1, 6, axis=0, error=T,
        match="`output_shape` must be a sequence of ints"),
    row("max_unpool-output_shape-float", jaxpool.max_unpool, Y, IDX, (2, 3, 8.0, 8),
        axis=0, error=T, match=names("output_shape", r"8\.0")),
    row("max_unpool-output_shape-float-message", jaxpool.max_unpool, Y1, IDX1, (1, 2, 6.0),
        axis=0, error=T, match="`output_shape` must be an int"),
    row("max_unpool-output_shape-traced",
        traced(jaxpool.max_unpool, "output_shape", Y, IDX, axis=0), X.shape, error=T,
        match=names("output_shape", TRACED)),
    row("max_unpool-output_shape-huge-axis0", abstract_unpool, (2**12, 2**10, 16, 16),
        output_shape=HUGE, axis=0, error=V, match=r"`output_shape`.*4294967296"),
    row("max_unpool-output_shape-huge-axis2", abstract_unpool, (2**12, 2**10, 16, 16),
        output_shape=HUGE, axis=2, error=V, match=r"`output_shape`.*4294967296"),
    row("max_unpool-axis-3", jaxpool.max_unpool, Y, IDX, X.shape, axis=3, error=V,
        match=names("axis", "3")),
    row("max_unpool-axis-3-lost-coordinates", jaxpool.max_unpool, Y, IDX, (2, 3, 8, 8), axis=3,
        error=V, match=r"`axis` \(=3\) must be 0, 1 or 2"),
    row("max_unpool-axis--1-lost-coordinates", jaxpool.max_unpool, Y, IDX, (2, 3, 8, 8), axis=-1,
        error=V, match=r"`axis` \(=-1\) must be 0, 1 or 2"),
    row("max_unpool-axis-3-of-rank-3", jaxpool.max_unpool, Y1, IDX1, (1, 2, 6), axis=3, error=V,
        match=r"`axis` \(=3\) must be in \[-3, 3\)"),
    row("max_unpool-axis--4-of-rank-3", jaxpool.max_unpool, Y1, IDX1, (1, 2, 6), axis=-4, error=V,
        match=r"`axis` \(=-4\) must be in"),
    row("max_unpool-axis-out-of-range", jaxpool.max_unpool, Y, IDX, X.shape, axis=7, error=V,
        match=names("axis", "7")),
    row("max_unpool-data_format-nxc", jaxpool.max_unpool, Y, IDX, X.shape, data_format="nxc",
        axis=0, error=V, match=names("data_format", "'nxc'")),
    row("max_unpool-data_format-NWC", jaxpool.max_unpool, Y1, IDX1, (1, 2, 6), data_format="NWC",
        axis=0, error=V, match=r"`data_format` \(='NWC'\)"),
    row("max_unpool-y-complex", jaxpool.max_unpool, Y.astype(np.complex64), IDX, X.shape,
        axis=0, error=T, match=names("y", "complex64")),
    row("max_unpool-y-rank2", jaxpool.max_unpool, Y[0, 0], IDX[0, 0], (8, 8), axis=0, error=V,
        match=names("y", r"\(4, 4\)")),
    row("max_unpool-y-rank6", jaxpool.max_unpool, np.ones((1, 2, 3, 4, 5, 6)),
        np.zeros((1, 2, 3, 4, 5, 6), np.int32), (1, 2, 3, 4, 5, 6), axis=0, error=V,
        match="`y` must have rank"),
    # ---------------------------------------------------------------- openvino.layer: building
    row("layer-malformed-xml", layer_called, "<layer type='MaxPool' version='opset8'><data",
        error=V, match=names("xml_or_type", "<layer")),
    row("layer-unknown-type", layer_called, "FooPool", {"kernel": "2,2", "strides": "2,2"}, error=V,
        match=names("xml_or_type", "FooPool")),
    row("layer-unknown-version", layer_called, "MaxPool-3", {"kernel": "2,2", "strides": "2,2"},
        error=V, match=names("xml_or_type", "MaxPool-3")),
    row("layer-bad-int-list", layer_called, "MaxPool", {"kernel": "2,x", "strides": "2,2"}, error=V,
        match=names("kernel", "'2,x'")),
    row("layer-negative-stride", layer_called, "AvgPool", {"kernel": "2,2", "strides": "-1,2"},
        error=V, match=names("strides", "-1")),
    row("layer-missing-kernel", layer_called, "MaxPool", {"strides": "2,2"}, error=V,
        match=names("kernel", "missing")),
    row("layer-unknown-attribute", layer_called, "MaxPool-1",
        {"kernel": "2,2", "strides": "2,2", "dilations": "1,1"}, error=V,
        match=names("dilations", "MaxPool")),
    row("layer-bad-bool", layer_called, "AvgPool",
        {"kernel": "2,2", "strides": "2,2", "exclude-pad": "maybe"}, error=V,
        match=names("exclude-pad", "'maybe'")),
    row("layer-bad-rounding", layer_called, "MaxPool-8",
        {"kernel": "2,2", "strides": "2,2", "rounding_type": "round"}, error=V,
        match=names("rounding_type", "'round'")),
    row("layer-ceil_torch-before-14", layer_called, "MaxPool-8",
        {"kernel": "2,2", "strides": "2,2", "rounding_type": "ceil_torch"}, error=V,
        match=names("rounding_type", "ceil_torch")),
    row("layer-bad-axis", layer_called, "MaxPool-8",
        {"kernel": "2,2", "strides": "2,2", "axis": "x"}, error=V, match=names("axis", "'x'")),
    row("layer-kernel-wrong-length", layer_called, "MaxPool",
        {"kernel": "2,2,2", "strides": "2,2,2"}, error=V, match=names("kernel", r"\(2, 2, 2\)")),
    *(row(f"layer-{k}", jov.layer, xml_or_type, attrs, error=error, match=match)
      for k, (xml_or_type, attrs, error, match) in enumerate([
          ("MaxPooling", None, V, r"layer type 'MaxPooling'.*'MaxPool'"),
          ("maxpool", None, V, r"layer type 'maxpool'"),
          ("Convolution", None, V, r"layer type 'Convolution'"),
          ("MaxPool-9", K, V, r"MaxPool-9; MaxPool has the versions \[1, 8, 14\]"),
          ("AvgPool-8", K, V, r"AvgPool-8; AvgPool has the versions \[1, 14, 16\]"),
          ("AdaptiveMaxPool-14", None, V, r"AdaptiveMaxPool-14"),
          ("MaxPool_8", K, V, r"`xml_or_type` \(='MaxPool_8'\) must be a type name"),
          ('<layer type="MaxPool" version="opset0"><data kernel="2" strides="1"/></layer>', None, V,
           r"`version` \(='opset0'\).*unknown opset"),
          ('<layer type="MaxPool" version="opset17"><data kernel="2" strides="1"/></layer>', None,
           V, r"`version` \(='opset17'\).*unknown opset"),
          ('<layer type="MaxPool" version="experimental"/>', None, V,
           r"`version` \(='experimental'\).*must be 'opsetN'"),
          ('<layer type="AdaptiveAvgPool" version="opset7"/>', None, V,
           r"`version` \(='opset7'\) predates AdaptiveAvgPool"),
          ('<layer type="MaxPool"><data kernel="2" strides="1"/></layer>', None, V,
           r"without a `version` attribute"),
          ('<layer version="opset8"/>', None, V, r"without a `type` attribute"),
          ('<net><layer type="MaxPool" version="opset8"/></net>', None, V,
           r"must be a <layer> element, got a <net>"),
          ('<layer ... type="MaxPool" ... >', None, V, r"not well-formed XML"),
          ('<layer type="MaxPool" version="opset8"><data kernel="2"/><data strides="2"/>'
           "</layer>", None, V, r"2 <data> elements"),
          ("MaxPool-8", dict(K, bogus="1"), V,
           r"`bogus` is not an attribute of MaxPool-8; its attributes are \["),
          ("AvgPool-1", dict(K, exclude_pad="true"), V,
           r"`exclude_pad` is not an attribute of AvgPool-1 \(IR spells it `exclude-pad`\)"),
          ("MaxPool-1", dict(K, dilations="2, 2"), V,
           r"`dilations` is not an attribute of MaxPool-1 \(dilations need MaxPool-8"),
          ("MaxPool-1", dict(K, axis="2"), V, r"`axis` is not an attribute of MaxPool-1"),
          ("AvgPool-14", dict(K, dilations="2, 2"), V,
           r"`dilations` is not an attribute of AvgPool-14 \(dilations need AvgPool-16\)"),
          ("AvgPool", dict(K, dilations="1, 0"), V, r"`dilations` \(='1, 0'\) must be positive"),
          ("ExperimentalDetectronROIFeatureExtractor", {"output_size": "7", "sampling_ratio": "2"},
           V, r"`pyramid_scales` is a required attribute of "
           r"ExperimentalDetectronROIFeatureExtractor-6"),
          ("ExperimentalDetectronROIFeatureExtractor",
           {"output_size": "7", "sampling_ratio": "2", "pyramid_scales": "4,x"}, V,
           r"`pyramid_scales` \(='4,x'\) must be comma-separated integers"),
          ("ExperimentalDetectronROIFeatureExtractor-5", None, V,
           r"ExperimentalDetectronROIFeatureExtractor has the versions \[6\]"),
          ("MaxPool-1", dict(K, data_format="NCX"), V, r"`data_format` is not an attribute"),
          ("AdaptiveAvgPool", {"output_type": "i64"}, V,
           r"`output_type` is not an attribute of AdaptiveAvgPool-8; it has no attributes"),
          ("MaxPool-8", dict(K, rounding_type="ceil_torch"), V,
           r"`rounding_type` \(='ceil_torch'\) of MaxPool-8 must be one of \['floor', 'ceil'\] "
           r"\('ceil_torch' needs version 14\)"),
          ("AvgPool-1", dict(K, rounding_type="ceil_torch"), V, r"needs version 14"),
          ("MaxPool", dict(K, rounding_type="round"), V, r"`rounding_type` \(='round'\)"),
          ("AvgPool", dict(K, auto_pad="notset"), V,
           r"`auto_pad` \(='notset'\) of AvgPool-16 must be one of \['explicit', 'valid'"),
          ("MaxPool", {"kernel": "2 2", "strides": "1, 1"}, V,
           r"`kernel` \(='2 2'\) must be comma-separated integers"),
          ("MaxPool", {"kernel": "2,,2", "strides": "1, 1"}, V, r"`kernel` \(='2,,2'\)"),
          ("MaxPool", {"kernel": "2.0, 2", "strides": "1, 1"}, V, r"`kernel` \(='2.0, 2'\)"),
          ("MaxPool", {"kernel": "", "strides": "1, 1"}, V, r"`kernel` \(=''\)"),
          ("MaxPool", {"kernel": "0, 2", "strides": "1, 1"}, V,
           r"`kernel` \(='0, 2'\) must be positive"),
          ("MaxPool", dict(K, strides="1, 0"), V, r"`strides` \(='1, 0'\) must be positive"),
          ("MaxPool", dict(K, pads_begin="-1, 0"), V,
           r"`pads_begin` \(='-1, 0'\) must be non-negative"),
          ("MaxPool", dict(K, dilations="0, 1"), V, r"`dilations` \(='0, 1'\)"),
          ("MaxPool", dict(K, index_element_type="u8"), V,
           r"`index_element_type` \(='u8'\) of MaxPool-14 must be one of \['i32', 'i64'\]"),
          ("AdaptiveMaxPool", {"index_element_type": "int32"}, V,
           r"`index_element_type` \(='int32'\)"),
          ("MaxPool", dict(K, axis="two"), V, r"`axis` \(='two'\) must be an integer"),
          ("AvgPool", dict(K, **{"exclude-pad": "yes"}), V,
           r"`exclude-pad` \(='yes'\) must be 'true' or 'false'"),
          ("MaxPool", {"strides": "1, 1"}, V, r"`kernel` is a required attribute of MaxPool-14"),
          ("AvgPool-1", {"kernel": "2"}, V, r"`strides` is a required attribute of AvgPool-1"),
          ('<layer type="MaxPool" version="opset8"/>', None, V, r"`kernel` is a required"),
          ('<layer type="MaxPool" version="opset8"/>', {"kernel": "2"}, T,
           r"`attrs` must be None when `xml_or_type` is a <layer>"),
          ("MaxPool", {"kernel": [2, 2], "strides": "1"}, T,
           r"`attrs\['kernel'\]` must be an IR string .* got \[2, 2\] of type list"),
          ("MaxPool", [("kernel", "2")], T, r"`attrs` must be a mapping"),
          (8, None, T, r"`xml_or_type` must be <layer> XML text or a type name"),
      ])),
    # ----------------------------------------------------------------- openvino.layer: calling
    row("layer-call-avg-two-inputs", layer_call, ("AvgPool", K), X1, [2, 2], error=T,
        match=r"AvgPool-16 takes 1 input\(s\) \(`x`\), got 2"),
    row("layer-call-extractor-one-input", layer_call,
        ("ExperimentalDetectronROIFeatureExtractor",
         {"output_size": "2", "sampling_ratio": "2", "pyramid_scales": "4,8"}),
        np.zeros((3, 4), np.float32), error=T,
        match=r"takes 3 input\(s\) \(`rois`, `level_0` and `level_1`\), got 1"),
    row("layer-call-adaptive-one-input", layer_call, ("AdaptiveMaxPool",), X1, error=T,
        match=r"AdaptiveMaxPool-8 takes 2 input\(s\) \(`x` and `output_size`\), got 1"),
    row("layer-call-output_size-2d", layer_call, ("AdaptiveAvgPool",), X1, np.array([[2, 2]]),
        error=V, match=r"`output_size` of AdaptiveAvgPool-8 must be a 1-D"),
    row("layer-call-output_size-traced", layer_traced, ("AdaptiveAvgPool",),
        np.ones((1, 1, 4, 4), np.float32), np.array([2, 2]), error=T, match=r"`output_size`"),
    row("layer-call-kernel-refused-by-the-function", layer_call,
        ("MaxPool-1", {"kernel": "2, 2, 2", "strides": "1"}), np.ones((1, 1, 4, 4), np.float32),
        error=V, match=r"`kernel`"),
    row("layer-call-i64-without-x64", layer_call, ("MaxPool-8", K),
        np.ones((1, 1, 4, 4), np.float32), error=V, match=r"`index_element_type`"),
    # ------------------------------------------------------------------- Flax modules
    row("nn.MaxPool-rounding_type", module_called, pnn.MaxPool(2, rounding_type="round"),
        np.zeros((2, 7, 6, 3), np.float32), error=V, match=r"`rounding_type` \(='round'\)"),
    row("nn.linen.AvgPool-data_format", module_called, pnn.linen.AvgPool(2, data_format="NHWC"),
        np.zeros((2, 7, 6, 3), np.float32), error=V, match=r"`data_format` \(='NHWC'\)"),
]
# fmt: on

# The adaptive pools share these rows.
for _fn in (jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool):
    _name = _fn.__name__
    ROWS += [
        row(
            f"{_name}-rank2-message",
            _fn,
            np.ones((2, 3), np.float32),
            2,
            error=V,
            match="`x` must have rank",
        ),
        row(
            f"{_name}-bool-message",
            _fn,
            np.ones((1, 1, 4), bool),
            2,
            error=T,
            match="`x` must have a floating",
        ),
        row(
            f"{_name}-output_size-zero-message",
            _fn,
            X1,
            0,
            error=V,
            match=r"`output_size` \(=0\) must be positive on every spatial axis",
        ),
        row(
            f"{_name}-output_size-len2",
            _fn,
            X1,
            [2, 2],
            error=V,
            match=r"`output_size` \(=\[2, 2\]\) must have one entry",
        ),
        row(
            f"{_name}-output_size-string-message",
            _fn,
            X1,
            "2",
            error=T,
            match="`output_size` must be an int or a sequence",
        ),
        row(
            f"{_name}-output_size-float-message",
            _fn,
            X1,
            2.5,
            error=T,
            match="`output_size` must be an int",
        ),
        row(
            f"{_name}-data_format-NWC",
            _fn,
            X1,
            2,
            data_format="NWC",
            error=V,
            match=r"`data_format` \(='NWC'\)",
        ),
    ]


# ---------------------------------------------------------------- lp_pool, ROI, ONNX, Equinox
X_ROI = np.zeros((2, 8, 6, 6), np.float32)
R4 = np.zeros((3, 4), np.float32)
R5 = np.zeros((3, 5), np.float32)
B = np.zeros(3, np.int32)
X_EQX = np.zeros((4, 3, 9, 7), np.float32)  # a batch where Equinox layers take one example
PYRAMID = [np.zeros((2, 8, 8, 8), np.float32), np.zeros((2, 8, 4, 4), np.float32)]
FPN2 = (1 / 4, 1 / 8)


def called(fn, call):
    """``call`` (no arguments), counted as a row of the public function ``fn``."""
    return functools.wraps(fn)(lambda: call())


ROWS += [
    row(
        "lp_pool-bad-1",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p=0,
        error=V,
        match=r"`p` \(=0\)",
    ),
    row(
        "lp_pool-bad-2",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p=-1.5,
        error=V,
        match=r"`p` \(=-1.5\)",
    ),
    row(
        "lp_pool-bad-3",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p=math.inf,
        error=V,
        match=r"`p` \(=inf\)",
    ),
    row(
        "lp_pool-bad-4",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p=math.nan,
        error=V,
        match=r"`p` \(=nan\)",
    ),
    row(
        "lp_pool-bad-5",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p=True,
        error=T,
        match=r"`p` must be a positive int or float, got True",
    ),
    row(
        "lp_pool-bad-6",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        p="2",
        error=T,
        match=r"`p` must be a positive int or float, got '2'",
    ),
    row(
        "lp_pool-bad-7",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=2,
        dilations=0,
        error=V,
        match=r"`dilations` \(=0\)",
    ),
    row(
        "lp_pool-bad-8",
        jaxpool.lp_pool,
        np.ones((1, 1, 5), np.float32),
        kernel=4,
        dilations=2,
        error=V,
        match=r"`kernel` \(=\(4,\)\) with `dilations`",
    ),
    row(
        "roi_align-bad-1",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R5, B, 2)),
        error=V,
        match=r"`rois` \(shape \(3, 5\)\)",
    ),
    row(
        "roi_align-bad-2",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B[:2], 2)),
        error=V,
        match=r"`batch_indices` \(shape \(2,\)\)",
    ),
    row(
        "roi_align-bad-3",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B.astype(np.float32), 2)),
        error=T,
        match="`batch_indices`",
    ),
    row(
        "roi_align-bad-4",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4.astype(np.int32), B, 2)),
        error=T,
        match="`rois`",
    ),
    row(
        "roi_align-bad-5",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 2, mode="mean")),
        error=V,
        match="`mode` \\(='mean'\\)",
    ),
    row(
        "roi_align-bad-6",
        called(
            jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 2, aligned_mode="center")
        ),
        error=V,
        match="`aligned_mode`",
    ),
    row(
        "roi_align-bad-7",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 0)),
        error=V,
        match="`output_size`",
    ),
    row(
        "roi_align-bad-8",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, (2, 2, 2))),
        error=V,
        match="`output_size`",
    ),
    row(
        "roi_align-bad-9",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 2, sampling_ratio=-1)),
        error=V,
        match="`sampling_ratio`",
    ),
    row(
        "roi_align-bad-10",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI[0], R4, B, 2)),
        error=V,
        match="`x` must have rank 4",
    ),
    row(
        "roi_align-bad-11",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI.astype(np.int32), R4, B, 2)),
        error=T,
        match="`x`",
    ),
    row(
        "roi_align-bad-12",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 2, data_format="NHWC")),
        error=V,
        match="`data_format`",
    ),
    row(
        "roi_align-bad-13",
        called(jaxpool.roi_align, lambda: jaxpool.roi_align(X_ROI, R4, B, 2, spatial_scale="1")),
        error=T,
        match="`spatial_scale`",
    ),
    row(
        "psroi_align-bad-1",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        3,
        error=V,
        match=r"`x` has 8 channels.*3 \* 3 = 9 \(`output_size`=3\)",
    ),
    row(
        "psroi_align-bad-2",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        (2, 3),
        error=V,
        match=r"`x` has 8 channels.*2 \* 3 = 6 \(`output_size`=\(2, 3\)\)",
    ),
    row(
        "psroi_align-bad-3",
        jaxpool.psroi_align,
        X_ROI,
        R5,
        B,
        2,
        error=V,
        match=r"`rois` \(shape \(3, 5\)\)",
    ),
    row(
        "psroi_align-bad-4",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B[:2],
        2,
        error=V,
        match=r"`batch_indices` \(shape \(2,\)\)",
    ),
    row(
        "psroi_align-bad-5",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B.astype(np.float32),
        2,
        error=T,
        match=names("batch_indices", "float32"),
    ),
    row(
        "psroi_align-bad-6",
        jaxpool.psroi_align,
        X_ROI,
        R4.astype(np.int32),
        B,
        2,
        error=T,
        match=names("rois", "int32"),
    ),
    row(
        "psroi_align-bad-7",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        aligned_mode="aligned",
        error=V,
        match=names("aligned_mode", "'aligned'"),
    ),
    row("psroi_align-bad-8", jaxpool.psroi_align, X_ROI, R4, B, 0, error=V, match="`output_size`"),
    row(
        "psroi_align-bad-9",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        sampling_ratio=-1,
        error=V,
        match=r"`sampling_ratio` \(=-1\)",
    ),
    row(
        "psroi_align-bad-10",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        sampling_ratio=1.5,
        error=T,
        match="`sampling_ratio`",
    ),
    row(
        "psroi_align-bad-11",
        jaxpool.psroi_align,
        X_ROI[0],
        R4,
        B,
        2,
        error=V,
        match="`x` must have rank 4",
    ),
    row(
        "psroi_align-bad-12",
        jaxpool.psroi_align,
        X_ROI.astype(np.int32),
        R4,
        B,
        2,
        error=T,
        match=names("x", "int32"),
    ),
    row(
        "psroi_align-bad-13",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        data_format="NHWC",
        error=V,
        match=names("data_format", "'NHWC'"),
    ),
    row(
        "psroi_align-bad-14",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        spatial_scale="1",
        error=T,
        match=r"`spatial_scale` must be a float, got '1'",
    ),
    row(
        "psroi_align-bad-15",
        jaxpool.psroi_align,
        X_ROI,
        R4,
        B,
        2,
        spatial_scale=float("nan"),
        error=V,
        match=r"`spatial_scale` \(=nan\)",
    ),
    row(
        "psroi_align-bad-16",
        traced(jaxpool.psroi_align, "spatial_scale", X_ROI, R4, B, 2),
        0.5,
        error=T,
        match=r"`spatial_scale` must be a static Python float, got a " + TRACED,
    ),
    row(
        "multilevel_roi_align-bad-1",
        jaxpool.multilevel_roi_align,
        X_ROI,
        R4,
        B,
        2,
        spatial_scales=(1 / 4,),
        error=T,
        match="`features`",
    ),
    row(
        "multilevel_roi_align-bad-2",
        jaxpool.multilevel_roi_align,
        [],
        R4,
        B,
        2,
        spatial_scales=(),
        error=V,
        match="`features`",
    ),
    row(
        "multilevel_roi_align-bad-3",
        jaxpool.multilevel_roi_align,
        [PYRAMID[0], np.zeros((1, 8, 4, 4), np.float32)],
        R4,
        B,
        2,
        spatial_scales=FPN2,
        error=V,
        match="`features`",
    ),
    row(
        "multilevel_roi_align-bad-4",
        jaxpool.multilevel_roi_align,
        [PYRAMID[0], np.zeros((2, 4, 4, 4), np.float32)],
        R4,
        B,
        2,
        spatial_scales=FPN2,
        error=V,
        match="`features`",
    ),
    row(
        "multilevel_roi_align-bad-5",
        jaxpool.multilevel_roi_align,
        [PYRAMID[0], np.zeros((8, 4, 4), np.float32)],
        R4,
        B,
        2,
        spatial_scales=FPN2,
        error=V,
        match=r"`features\[1\]`",
    ),
    row(
        "multilevel_roi_align-bad-6",
        jaxpool.multilevel_roi_align,
        [p.astype(np.int32) for p in PYRAMID],
        R4,
        B,
        2,
        spatial_scales=FPN2,
        error=T,
        match=names("features[0]", "int32"),
    ),
    row(
        "multilevel_roi_align-bad-7",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 4,),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-8",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 4, 1 / 8, 1 / 16),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-9",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 4, 1 / 6),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-10",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(0.3, 0.15),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-11",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 8, 1 / 4),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-12",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 4, 1 / 4),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-13",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=(1 / 4, 0.0),
        error=V,
        match="`spatial_scales`",
    ),
    row(
        "multilevel_roi_align-bad-14",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        level_rule="fpn",
        error=V,
        match=names("level_rule", "'fpn'"),
    ),
    row(
        "multilevel_roi_align-bad-15",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        level_rule="Torchvision",
        error=V,
        match=names("level_rule", "'Torchvision'"),
    ),
    row(
        "multilevel_roi_align-bad-16",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        canonical_size=0,
        error=V,
        match=names("canonical_size", "0"),
    ),
    row(
        "multilevel_roi_align-bad-17",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        canonical_size=-224,
        error=V,
        match=names("canonical_size", "-224"),
    ),
    row(
        "multilevel_roi_align-bad-18",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        0,
        spatial_scales=FPN2,
        error=V,
        match="`output_size`",
    ),
    row(
        "multilevel_roi_align-bad-19",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        (2, 2, 2),
        spatial_scales=FPN2,
        error=V,
        match="`output_size`",
    ),
    row(
        "multilevel_roi_align-bad-20",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        (2, -1),
        spatial_scales=FPN2,
        error=V,
        match="`output_size`",
    ),
    row(
        "multilevel_roi_align-bad-21",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        data_format="NHWC",
        error=V,
        match=names("data_format", "'NHWC'"),
    ),
    row(
        "multilevel_roi_align-bad-22",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R5,
        B,
        2,
        spatial_scales=FPN2,
        error=V,
        match=r"`rois` \(shape \(3, 5\)\)",
    ),
    row(
        "multilevel_roi_align-bad-23",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4[0],
        B,
        2,
        spatial_scales=FPN2,
        error=V,
        match="`rois`",
    ),
    row(
        "multilevel_roi_align-bad-24",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4.astype(np.int32),
        B,
        2,
        spatial_scales=FPN2,
        error=T,
        match=names("rois", "int32"),
    ),
    row(
        "multilevel_roi_align-bad-25",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B[:2],
        2,
        spatial_scales=FPN2,
        error=V,
        match=r"`batch_indices` \(shape \(2,\)\)",
    ),
    row(
        "multilevel_roi_align-bad-26",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B[:, None],
        2,
        spatial_scales=FPN2,
        error=V,
        match="`batch_indices`",
    ),
    row(
        "multilevel_roi_align-bad-27",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B.astype(np.float32),
        2,
        spatial_scales=FPN2,
        error=T,
        match=names("batch_indices", "float32"),
    ),
    row(
        "multilevel_roi_align-bad-28",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        mode="mean",
        error=V,
        match=names("mode", "'mean'"),
    ),
    row(
        "multilevel_roi_align-bad-29",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        aligned_mode="aligned",
        error=V,
        match=names("aligned_mode", "'aligned'"),
    ),
    row(
        "multilevel_roi_align-bad-30",
        jaxpool.multilevel_roi_align,
        PYRAMID,
        R4,
        B,
        2,
        spatial_scales=FPN2,
        sampling_ratio=-1,
        error=V,
        match=r"`sampling_ratio` \(=-1\)",
    ),
    row(
        "roi_align_rotated-bad-1",
        called(jaxpool.roi_align_rotated, lambda: jaxpool.roi_align_rotated(X_ROI, R4, B, 2)),
        error=V,
        match=r"`rois` \(shape \(3, 4\)\)",
    ),
    row(
        "roi_align_rotated-bad-2",
        called(jaxpool.roi_align_rotated, lambda: jaxpool.roi_align_rotated(X_ROI, R5, B[:1], 2)),
        error=V,
        match="`batch_indices`",
    ),
    row(
        "roi_align_rotated-bad-3",
        called(
            jaxpool.roi_align_rotated,
            lambda: jaxpool.roi_align_rotated(X_ROI, R5, B, 2, clockwise=1),
        ),
        error=T,
        match="`clockwise`",
    ),
    row(
        "roi_pool-bad-1",
        called(jaxpool.roi_pool, lambda: jaxpool.roi_pool(X_ROI, R4, 2)),
        error=V,
        match=r"`rois` \(shape \(3, 4\)\)",
    ),
    row(
        "roi_pool-bad-2",
        called(jaxpool.roi_pool, lambda: jaxpool.roi_pool(X_ROI, R5, 2, method="avg")),
        error=V,
        match="`method` \\(='avg'\\)",
    ),
    row(
        "psroi_pool-bad-1",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R4, 2, 2)),
        error=V,
        match=r"`rois` \(shape \(3, 4\)\)",
    ),
    row(
        "psroi_pool-bad-2",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 3, 2)),
        error=V,
        match="8 channels.*`output_dim`",
    ),
    row(
        "psroi_pool-bad-3",
        called(
            jaxpool.psroi_pool,
            lambda: jaxpool.psroi_pool(X_ROI, R5, 2, 2, mode="bilinear", spatial_bins=3),
        ),
        error=V,
        match="8 channels.*bins_y",
    ),
    row(
        "psroi_pool-bad-4",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 0, 2)),
        error=V,
        match="`output_dim`",
    ),
    row(
        "psroi_pool-bad-5",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 2, 2, mode="max")),
        error=V,
        match="`mode`",
    ),
    row(
        "deformable_psroi_pool-rois-width",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI, R4, output_dim=2, group_size=2),
        ),
        error=V,
        match=r"`rois` \(shape \(3, 4\)\)",
    ),
    row(
        "deformable_psroi_pool-channels",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI, R5, output_dim=3, group_size=2),
        ),
        error=V,
        match=r"`x` has 8 channels.*3 \* 2\*\*2 = 12",
    ),
    row(
        "deformable_psroi_pool-output_dim",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI, R5, output_dim=0, group_size=2),
        ),
        error=V,
        match=r"`output_dim` \(=0\)",
    ),
    row(
        "deformable_psroi_pool-group_size",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI, R5, output_dim=8, group_size=0),
        ),
        error=V,
        match=r"`group_size` \(=0\)",
    ),
    row(
        "deformable_psroi_pool-output_dim-missing",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI, R5, group_size=2),
        ),
        error=T,
        match="output_dim",
    ),
    row(
        "deformable_psroi_pool-spatial_bins-zero",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, spatial_bins=0
            ),
        ),
        error=V,
        match=r"`spatial_bins` \(=0\)",
    ),
    row(
        "deformable_psroi_pool-spatial_bins-length",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, spatial_bins=(2, 2, 2)
            ),
        ),
        error=V,
        match=r"`spatial_bins` \(=\(2, 2, 2\)\)",
    ),
    row(
        "deformable_psroi_pool-spatial_bins-float",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, spatial_bins=1.5
            ),
        ),
        error=T,
        match=r"`spatial_bins` must be an int, got 1.5",
    ),
    row(
        "deformable_psroi_pool-offsets-rois",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((2, 2, 2, 2), np.float32), output_dim=2, group_size=2
            ),
        ),
        error=V,
        match=r"`offsets` \(shape \(2, 2, 2, 2\)\) must have shape \[R, 2 \* K, P, P\] = \[3, ",
    ),
    row(
        "deformable_psroi_pool-offsets-odd",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((3, 3, 2, 2), np.float32), output_dim=2, group_size=2
            ),
        ),
        error=V,
        match=r"`offsets` \(shape \(3, 3, 2, 2\)\)",
    ),
    row(
        "deformable_psroi_pool-offsets-rank",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((3, 2, 2), np.float32), output_dim=2, group_size=2
            ),
        ),
        error=V,
        match=r"`offsets` \(shape \(3, 2, 2\)\)",
    ),
    row(
        "deformable_psroi_pool-offsets-not-square",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((3, 2, 2, 3), np.float32), output_dim=2, group_size=2
            ),
        ),
        error=V,
        match=r"`offsets` \(shape \(3, 2, 2, 3\)\).*square grid",
    ),
    row(
        "deformable_psroi_pool-offsets-part_size",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI,
                R5,
                np.zeros((3, 2, 2, 2), np.float32),
                output_dim=2,
                group_size=2,
                part_size=3,
            ),
        ),
        error=V,
        match=r"`offsets` \(shape \(3, 2, 2, 2\)\).*`part_size`=3",
    ),
    row(
        "deformable_psroi_pool-offsets-classes",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((3, 6, 2, 2), np.float32), output_dim=2, group_size=2
            ),
        ),
        error=V,
        match=r"K = 3 classes, which must divide `output_dim` \(=2\)",
    ),
    row(
        "deformable_psroi_pool-offsets-dtype",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, np.zeros((3, 2, 2, 2), np.int32), output_dim=2, group_size=2
            ),
        ),
        error=T,
        match=r"`offsets` must have a floating dtype, got int32",
    ),
    row(
        "deformable_psroi_pool-part_size",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, part_size=0
            ),
        ),
        error=V,
        match=r"`part_size` \(=0\)",
    ),
    row(
        "deformable_psroi_pool-trans_std-type",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, trans_std="1"
            ),
        ),
        error=T,
        match=r"`trans_std` must be a float, got '1'",
    ),
    row(
        "deformable_psroi_pool-trans_std-nan",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, trans_std=float("nan")
            ),
        ),
        error=V,
        match=r"`trans_std` \(=nan\) must be finite",
    ),
    row(
        "deformable_psroi_pool-spatial_scale-type",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, spatial_scale="1"
            ),
        ),
        error=T,
        match="`spatial_scale`",
    ),
    row(
        "deformable_psroi_pool-data_format",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5, output_dim=2, group_size=2, data_format="NHWC"
            ),
        ),
        error=V,
        match="`data_format`",
    ),
    row(
        "deformable_psroi_pool-x-dtype",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI.astype(np.int32), R5, output_dim=2, group_size=2
            ),
        ),
        error=T,
        match="`x` must have a floating dtype",
    ),
    row(
        "deformable_psroi_pool-x-rank",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(X_ROI[0], R5, output_dim=2, group_size=2),
        ),
        error=V,
        match="`x` must have rank 4",
    ),
    row(
        "deformable_psroi_pool-rois-dtype",
        called(
            jaxpool.deformable_psroi_pool,
            lambda: jaxpool.deformable_psroi_pool(
                X_ROI, R5.astype(np.int32), output_dim=2, group_size=2
            ),
        ),
        error=T,
        match="`rois` must have a floating dtype",
    ),
    row(
        "onnx.node-bad-1",
        called(
            jaxpool.onnx.node, lambda: jaxpool.onnx.node(helper.make_node("Conv", ["x"], ["y"]))
        ),
        error=V,
        match="op_type 'Conv'",
    ),
    row(
        "onnx.node-bad-2",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], domain="custom")
            ),
        ),
        error=V,
        match="domain 'custom'",
    ),
    row(
        "onnx.node-bad-3",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], p=2)
            ),
        ),
        error=V,
        match="`p` is not an attribute of MaxPool",
    ),
    row(
        "onnx.node-bad-4",
        called(
            jaxpool.onnx.node, lambda: jaxpool.onnx.node(helper.make_node("LpPool", ["x"], ["y"]))
        ),
        error=V,
        match="`kernel_shape` is a required",
    ),
    row(
        "onnx.node-bad-5",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], pads=[1])
            ),
        ),
        error=V,
        match=r"`pads` \(=\[1\]\)",
    ),
    row(
        "onnx.node-bad-6",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], auto_pad="SAME")
            ),
        ),
        error=V,
        match=r"`auto_pad` \(='SAME'\)",
    ),
    row(
        "onnx.node-bad-7",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], ceil_mode=2)
            ),
        ),
        error=V,
        match=r"`ceil_mode` \(=2\)",
    ),
    row(
        "onnx.node-bad-8",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(
                helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], storage_order=3)
            ),
        ),
        error=V,
        match=r"`storage_order` \(=3\)",
    ),
    row(
        "onnx.node-bad-9",
        called(
            jaxpool.onnx.node,
            lambda: jaxpool.onnx.node(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=2.0)),
        ),
        error=V,
        match="`kernel_shape` of MaxPool must be ints",
    ),
    row(
        "nn.eqx-bad-1",
        lambda: peqx.MaxPool(2, num_spatial_dims=4),
        error=V,
        match=r"`num_spatial_dims` \(=4\)",
    ),
    row(
        "nn.eqx-bad-2",
        lambda: peqx.MaxPool((2, 2, 2), num_spatial_dims=2),
        error=V,
        match=r"`kernel`",
    ),
    row(
        "nn.eqx-bad-3",
        lambda: peqx.AvgPool(2, -1, num_spatial_dims=1),
        error=V,
        match=r"`strides` \(=-1\)",
    ),
    row(
        "nn.eqx-bad-4",
        lambda: peqx.MaxPool(2, num_spatial_dims=1, rounding_type="up"),
        error=V,
        match=r"`rounding_type` \(='up'\)",
    ),
    row(
        "nn.eqx-bad-5",
        lambda: peqx.AdaptiveAvgPool(0, num_spatial_dims=2),
        error=V,
        match=r"`output_size`",
    ),
    row(
        "nn.eqx-bad-6",
        lambda: peqx.MaxPool(2, num_spatial_dims=2)(X_EQX),
        error=V,
        match=r"`x` must be unbatched",
    ),
    row("nn.eqx-bad-7", lambda: peqx.MaxPool(2), error=T, match=r"num_spatial_dims"),
    row(
        "max_unpool-axis-missing",
        jaxpool.max_unpool,
        Y,
        IDX,
        X.shape,
        error=T,
        match="required keyword-only argument: 'axis'",
    ),
    row(
        "max_unpool-axis-None",
        jaxpool.max_unpool,
        Y,
        IDX,
        X.shape,
        axis=None,
        error=T,
        match=names("axis", "None"),
    ),
    row(
        "max_unpool-combine-min",
        jaxpool.max_unpool,
        Y,
        IDX,
        X.shape,
        axis=0,
        combine="min",
        error=V,
        match=names("combine", "'min'"),
    ),
    row(
        "max_unpool-indices-outside-output_shape",
        jaxpool.max_unpool,
        Y8,
        I8,
        (2, 3, 5, 5),
        axis=2,
        error=V,
        match=LOST % "2, 3, 5, 5" + r".*the indices need at least 64",
    ),
    row(
        "max_unpool-indices-negative",
        jaxpool.max_unpool,
        Y1,
        np.array([[[0, -1, 2], [0, 1, 2]]]),
        (1, 2, 6),
        axis=2,
        error=V,
        match=r"1 of 6 values would be lost",
    ),
    row(
        "nn.MaxUnpool-indices-outside-output_shape",
        module_called,
        pnn.MaxUnpool(axis=2, data_format="NCX"),
        Y8,
        I8,
        (2, 3, 5, 5),
        error=V,
        match=LOST % "2, 3, 5, 5",
    ),
    row(
        "nn.linen.MaxUnpool-indices-outside-output_shape",
        module_called,
        pnn.linen.MaxUnpool(axis=2, data_format="NCX"),
        Y8,
        I8,
        (2, 3, 5, 5),
        error=V,
        match=LOST % "2, 3, 5, 5",
    ),
    row(
        "nn.eqx.MaxUnpool-indices-outside-output_shape",
        lambda: peqx.MaxUnpool(num_spatial_dims=2)(Y8[0], I8[0], (3, 5, 5)),
        error=V,
        match=r"(?s)`indices` \(taken with `axis`=2\).*\(=\(1, 3, 5, 5\)\): 36 of 48 values",
    ),
    row(
        "max_unpool-combine-type",
        jaxpool.max_unpool,
        Y,
        IDX,
        X.shape,
        axis=0,
        combine=max,
        error=T,
        match="`combine` must be a string",
    ),
]


@pytest.mark.parametrize(("fn", "args", "kwargs", "error", "match"), ROWS)
def test_bad_input(fn, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        fn(*args, **kwargs)


def _public(fn):
    """The function a row calls, unwrapped to the op's definition (the public ops are wrapped
    by ``exporting.exportable``)."""
    if isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.unwrap(fn)


def test_table_is_unique_and_covers_every_public_function():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    covered = {_public(r.values[0]) for r in ROWS}
    public = {
        _public(getattr(jaxpool, name))
        for name in jaxpool.__all__
        if inspect.isfunction(getattr(jaxpool, name))
    }
    assert {
        _public(jaxpool.max_pool),
        _public(jaxpool.avg_pool),
        _public(jaxpool.adaptive_max_pool),
        _public(jaxpool.adaptive_avg_pool),
        _public(jaxpool.max_unpool),
    } <= public
    missing = {fn.__name__ for fn in public | {_public(jov.layer)} if fn not in covered}
    assert not missing, f"public functions without a row: {sorted(missing)}"
    for r in ROWS:
        assert r.values[3] in (ValueError, TypeError), r.id
        re.compile(r.values[4])


# ------------------------------------------------------------------- fractional max pooling
import jaxpool.torch as jtorch  # noqa: E402

S8 = np.zeros((2, 3, 2), np.float32)  # the samples of X's planes
X7 = np.zeros((2, 3, 7, 8), np.float32)
X37 = np.zeros((2, 3, 6, 7, 8), np.float32)
S3 = np.zeros((2, 3, 3), np.float32)
FMP2, FMP3 = jtorch.fractional_max_pool2d, jtorch.fractional_max_pool3d

# fmt: off
ROWS += [
    row("fractional_max_pool-rank2", jaxpool.fractional_max_pool, np.zeros((8, 8), np.float32),
        2, 3, S8, error=V, match="`x` must have rank"),
    row("fractional_max_pool-kernel-zero", jaxpool.fractional_max_pool, X, 0, 3, S8, error=V,
        match=names("kernel", r"0\) must be positive")),
    row("fractional_max_pool-kernel-len3", jaxpool.fractional_max_pool, X, (2, 2, 2), 3, S8,
        error=V, match=names("kernel", r"\(2, 2, 2\)")),
    row("fractional_max_pool-output_size-zero", jaxpool.fractional_max_pool, X, 2, (0, 3), S8,
        error=V, match=names("output_size", r"\(0, 3\)")),
    row("fractional_max_pool-output_size-float", jaxpool.fractional_max_pool, X, 2, 2.5, S8,
        error=T, match=names("output_size", "2.5")),
    row("fractional_max_pool-output_size-traced",
        traced(jaxpool.fractional_max_pool, "output_size", X, 2, samples=S8), 3, error=T,
        match=names("output_size", TRACED)),
    row("fractional_max_pool-too-large", jaxpool.fractional_max_pool, X, 4, 6, S8, error=V,
        match=r"(?s)`output_size` \(=6\) and `kernel` \(=4\).*<= 8.*got 6 \+ 4 - 1"),
    row("fractional_max_pool-samples-shape", jaxpool.fractional_max_pool, X, 2, 3, S3, error=V,
        match=names("samples", r"\(2, 3, 2\).*\(2, 3, 3\)")),
    row("fractional_max_pool-samples-NXC-shape", jaxpool.fractional_max_pool,
        np.zeros((2, 8, 8, 3), np.float32), 2, 3, np.zeros((2, 8, 2), np.float32),
        data_format="NXC", error=V, match=names("samples", r"\(2, 8, 2\)")),
    row("fractional_max_pool-samples-int", jaxpool.fractional_max_pool, X, 2, 3,
        np.zeros((2, 3, 2), np.int32), error=T, match=names("samples", "int32")),
    row("fractional_max_pool-data_format", jaxpool.fractional_max_pool, X, 2, 3, S8,
        data_format="NHWC", error=V, match=names("data_format", "'NHWC'")),
    row("fractional_max_pool-return_indices", jaxpool.fractional_max_pool, X, 2, 3, S8,
        return_indices="yes", error=T, match=names("return_indices", "'yes'")),
    row("fractional_max_pool-i64-without-x64", jaxpool.fractional_max_pool, X, 2, 3, S8,
        return_indices=True, index_element_type="i64", error=V,
        match=names("index_element_type", "'i64'")),
    row("torch.fractional_max_pool2d-neither", FMP2, X7, 2, _random_samples=S8, error=V,
        match="requires specifying either an `output_size` or an `output_ratio`"),
    row("torch.fractional_max_pool3d-neither", FMP3, X37, 2, _random_samples=S3, error=V,
        match="fractional_max_pool3d requires specifying either an `output_size`"),
    row("torch.fractional_max_pool2d-both", FMP2, X7, 2, 3, 0.5, _random_samples=S8, error=V,
        match=r"only one of `output_size` \(=3\) and `output_ratio` \(=0.5\) may be specified"),
    row("torch.fractional_max_pool2d-ratio-one", FMP2, X7, 1, output_ratio=(1.0, 0.5),
        _random_samples=S8, error=V,
        match=r"`output_ratio` must be between 0 and 1 \(got \(1.0, 0.5\)\)"),
    row("torch.fractional_max_pool2d-ratio-zero", FMP2, X7, 1, output_ratio=0.0,
        _random_samples=S8, error=V, match=r"`output_ratio` must be between 0 and 1 \(got 0.0\)"),
    row("torch.fractional_max_pool2d-ratio-len3", FMP2, X7, 1, output_ratio=(0.5,) * 3,
        _random_samples=S8, error=V, match=names("output_ratio", r"\(0.5, 0.5, 0.5\)")),
    row("torch.fractional_max_pool2d-ratio-string", FMP2, X7, 1, output_ratio="half",
        _random_samples=S8, error=T, match=names("output_ratio", "'half'")),
    row("torch.fractional_max_pool2d-ratio-empty-output", FMP2, X7, 1, output_ratio=0.1,
        _random_samples=S8, error=V, match=names("output_ratio", r"0.1.*empty output \(0, 0\)")),
    row("torch.fractional_max_pool2d-too-large-height", FMP2, X7, 3, (6, 4), _random_samples=S8,
        error=V, match="pool height 3 too large relative to input height 7"),
    row("torch.fractional_max_pool2d-too-large-width", FMP2, X7, 3, (4, 7), _random_samples=S8,
        error=V, match=r"(?s)pool width 3 too large relative to input width 8.*`kernel_size`"),
    row("torch.fractional_max_pool3d-exact-fit-refused", FMP3, X37, 2, (5, 6, 7),
        _random_samples=S3, error=V, match="pool time 2 too large relative to input time 6"),
    row("torch.fractional_max_pool2d-rank2", FMP2, np.zeros((7, 8), np.float32), 2, 3,
        _random_samples=S8, error=V, match=names("input", r"3D or 4D.*\(7, 8\)")),
    row("torch.fractional_max_pool2d-rank5", FMP2, X37, 2, 3, _random_samples=S8, error=V,
        match=names("input", r"\(2, 3, 6, 7, 8\)")),
    row("torch.fractional_max_pool3d-rank3", FMP3, np.zeros((6, 7, 8), np.float32), 2, 2,
        _random_samples=S3, error=V, match=names("input", r"4D or 5D.*\(6, 7, 8\)")),
    row("torch.fractional_max_pool2d-empty-channels", FMP2, np.zeros((2, 0, 7, 8), np.float32),
        2, 3, _random_samples=S8[:, :0], error=V, match=names("input", r"\(2, 0, 7, 8\)")),
    row("torch.fractional_max_pool2d-int-input", FMP2, X7.astype(np.int32), 2, 3,
        _random_samples=S8, error=T, match=names("input", "int32")),
    row("torch.fractional_max_pool2d-no-key", FMP2, X7, 2, 3, error=T,
        match=r"`key`.*`_random_samples` is None, got key=None"),
    row("torch.fractional_max_pool2d-samples-dtype", FMP2, X7, 2, 3,
        _random_samples=S8.astype(np.float16), error=T,
        match=names("_random_samples", "float16")),
    row("torch.fractional_max_pool2d-samples-batch", FMP2, X7, 2, 3, _random_samples=S8[:1],
        error=V, match=names("_random_samples", r"N' >= 2.*\(1, 3, 2\)")),
    row("torch.fractional_max_pool2d-samples-channels", FMP2, X7, 2, 3,
        _random_samples=np.zeros((2, 4, 2), np.float32), error=V,
        match=names("_random_samples", r"\(2, 4, 2\)")),
    row("torch.fractional_max_pool3d-samples-axes", FMP3, X37, 2, 2, _random_samples=S8,
        error=V, match=names("_random_samples", r"\[N', 3, 3\].*\(2, 3, 2\)")),
    row("torch.fractional_max_pool2d-kernel_size-zero", FMP2, X7, 0, 3, _random_samples=S8,
        error=V, match=names("kernel_size", r"0\) must be positive")),
    row("torch.fractional_max_pool2d-kernel_size-len3", FMP2, X7, (2, 2, 2), 3,
        _random_samples=S8, error=V, match=names("kernel_size", r"\(2, 2, 2\)")),
    row("torch.fractional_max_pool2d-output_size-len3", FMP2, X7, 2, (3, 3, 3),
        _random_samples=S8, error=V, match=names("output_size", r"\(3, 3, 3\)")),
    row("torch.fractional_max_pool2d-output_size-float", FMP2, X7, 2, 3.0, _random_samples=S8,
        error=T, match=names("output_size", "3.0")),
]
# fmt: on


# ------------------------------------------------------- jaxpool.torch: torch.nn.functional's
# pooling functions, refusing what PyTorch refuses (PyTorch's wording where it is clear).

XT = np.zeros((1, 2, 6, 6), np.float32)
YT = np.zeros((1, 2, 3, 3), np.float32)
IT = np.zeros((1, 2, 3, 3), np.int32)

# fmt: off
ROWS += [
    row("torch.max_pool2d-rank2", jtorch.max_pool2d, np.zeros((4, 4), np.float32), 2, error=V,
        match=names("input", r"max_pool2d must have 3 \(unbatched\) or 4.*\(4, 4\)")),
    row("torch.max_pool1d-rank4", jtorch.max_pool1d, XT, 2, error=V,
        match=names("input", r"\(1, 2, 6, 6\)")),
    row("torch.max_pool3d-rank3", jtorch.max_pool3d, XT[0], 2, error=V,
        match=names("input", r"\(2, 6, 6\)")),
    row("torch.max_pool2d-padding-over-half", jtorch.max_pool2d, XT, 2, 1, 2, error=V,
        match=names("padding", r"=2\).*at most half of `kernel_size` \(=2\)")),
    row("torch.max_pool2d-padding-over-half-dilated", jtorch.max_pool2d, XT, 2, 1, 2,
        dilation=3, error=V, match="at most half of `kernel_size`"),
    row("torch.avg_pool3d-padding-over-half", jtorch.avg_pool3d, np.zeros((1, 1, 6, 6, 6),
        np.float32), (2, 2, 4), 1, (1, 1, 3), error=V, match=names("padding", r"\(1, 1, 3\)")),
    row("torch.max_pool2d-no-channels", jtorch.max_pool2d, np.zeros((1, 0, 4, 4), np.float32),
        2, error=V, match=names("input", r"non-empty channel.*\(1, 0, 4, 4\)")),
    row("torch.max_pool2d-kernel_size-zero", jtorch.max_pool2d, XT, 0, error=V,
        match=names("kernel_size", "0")),
    row("torch.max_pool2d-kernel_size-len3", jtorch.max_pool2d, XT, (2, 2, 2), error=V,
        match=names("kernel_size", r"\(2, 2, 2\)")),
    row("torch.max_pool2d-stride-zero", jtorch.max_pool2d, XT, 2, 0, error=V,
        match=names("stride", "0")),
    row("torch.max_pool2d-padding-negative", jtorch.max_pool2d, XT, 2, 1, -1, error=V,
        match=names("padding", "-1")),
    row("torch.max_pool2d-dilation-zero", jtorch.max_pool2d, XT, 2, 1, 0, 0, error=V,
        match=names("dilation", "0")),
    row("torch.max_pool2d-ceil_mode-type", jtorch.max_pool2d, XT, 2, ceil_mode="yes", error=T,
        match=names("ceil_mode", "'yes'")),
    row("torch.max_pool2d-return_indices-type", jtorch.max_pool2d, XT, 2, return_indices=1,
        error=T, match="`return_indices` must be a bool"),
    row("torch.max_pool1d-kernel-beyond-input", jtorch.max_pool1d, np.zeros((1, 1, 2),
        np.float32), 3, error=V, match=names("kernel_size", "3") + "(?=.*too small)"),
    row("torch.max_pool2d-kernel_size-float", jtorch.max_pool2d, XT, 2.0, error=T,
        match=names("kernel_size", r"2\.0")),
    row("torch.avg_pool2d-divisor_override-zero", jtorch.avg_pool2d, XT, 2,
        divisor_override=0, error=V, match=names("divisor_override", "0")),
    row("torch.avg_pool2d-divisor_override-negative", jtorch.avg_pool2d, XT, 2,
        divisor_override=-2, error=V, match=names("divisor_override", "-2")),
    row("torch.avg_pool2d-integer-input", jtorch.avg_pool2d, XT.astype(np.int32), 2, error=T,
        match=names("input", "int32")),
    row("torch.avg_pool1d-count_include_pad-type", jtorch.avg_pool1d, XT[0], 2,
        count_include_pad=None, error=T, match=names("count_include_pad", "None")),
    row("torch.lp_pool2d-norm_type-zero", jtorch.lp_pool2d, XT, 0, 2, error=V,
        match=names("norm_type", "0")),
    row("torch.lp_pool2d-norm_type-string", jtorch.lp_pool2d, XT, "2", 2, error=T,
        match=names("norm_type", "'2'")),
    row("torch.lp_pool1d-rank2", jtorch.lp_pool1d, np.zeros((4,), np.float32), 2, 2, error=V,
        match=names("input", r"\(4,\)")),
    row("torch.lp_pool3d-integer-input", jtorch.lp_pool3d, np.zeros((1, 2, 2, 2), np.int32),
        2, 2, error=T, match=names("input", "int32")),
    row("torch.adaptive_max_pool2d-output_size-zero", jtorch.adaptive_max_pool2d, XT, (0, 2),
        error=V, match=names("output_size", r"\(0, 2\)")),
    row("torch.adaptive_max_pool2d-output_size-len3", jtorch.adaptive_max_pool2d, XT,
        (2, 2, 2), error=V, match=names("output_size", r"\(2, 2, 2\)")),
    row("torch.adaptive_max_pool3d-rank6", jtorch.adaptive_max_pool3d,
        np.zeros((1,) * 6, np.float32), 2, error=V, match=names("input", r"\(1, 1, 1, 1, 1, 1\)")),
    row("torch.adaptive_max_pool1d-empty-spatial", jtorch.adaptive_max_pool1d,
        np.zeros((1, 2, 0), np.float32), 2, error=V, match=names("input", r"\(1, 2, 0\)")),
    row("torch.adaptive_avg_pool1d-rank4", jtorch.adaptive_avg_pool1d, XT, 2, error=V,
        match=names("input", r"\(1, 2, 6, 6\)")),
    row("torch.adaptive_avg_pool2d-output_size-float", jtorch.adaptive_avg_pool2d, XT,
        (2.5, 2), error=T, match=names("output_size", r"2\.5")),
    row("torch.adaptive_avg_pool3d-integer-input", jtorch.adaptive_avg_pool3d,
        np.zeros((1, 2, 2, 2), np.int32), 1, error=T, match=names("input", "int32")),
    row("torch.max_unpool2d-output_size-too-large", jtorch.max_unpool2d, YT, IT, 2,
        output_size=(8, 6), error=V, match=names("output_size", r"\(8, 6\)") +
        "(?=.*dim 0 must be between 4 and 8)"),
    row("torch.max_unpool2d-output_size-too-small", jtorch.max_unpool2d, YT, IT, 2,
        output_size=(1, 2, 6, 4), error=V, match="dim 1 must be between 4 and 8"),
    row("torch.max_unpool2d-output_size-length", jtorch.max_unpool2d, YT, IT, 2,
        output_size=(6, 6, 6), error=V,
        match=names("output_size", r"\(6, 6, 6\)") + "(?=.*containing 2 or 4 elements)"),
    row("torch.max_unpool1d-output_size-int", jtorch.max_unpool1d, YT[0], IT[0], 2,
        output_size=6, error=T, match=names("output_size", "6")),
    row("torch.max_unpool2d-indices-shape", jtorch.max_unpool2d, YT, IT[0], 2, error=V,
        match=names("indices", r"\(2, 3, 3\)")),
    row("torch.max_unpool2d-rank5", jtorch.max_unpool2d, YT[None], IT[None], 2, error=V,
        match=names("input", r"max_unpool2d.*\(1, 1, 2, 3, 3\)")),
    row("torch.max_unpool3d-kernel_size-len2", jtorch.max_unpool3d, YT, IT, (2, 2), error=V,
        match=names("kernel_size", r"\(2, 2\)")),
    row("torch.max_unpool2d-index-outside", jtorch.max_unpool2d, YT, IT + 40, 2, error=V,
        match=r"`indices`.*18 of 18 values would be lost"),
    row("avg_pool-divisor_rule", jaxpool.avg_pool, X, 2, divisor_rule="torch", error=V,
        match=names("divisor_rule", "'torch'")),
    row("avg_pool-divisor_override-zero", jaxpool.avg_pool, X, 2, divisor_override=0, error=V,
        match=names("divisor_override", "0")),
    row("avg_pool-divisor_override-float", jaxpool.avg_pool, X, 2, divisor_override=2.0,
        error=T, match=names("divisor_override", r"2\.0")),
    row("avg_pool-integer_division", jaxpool.avg_pool, X, 2, integer_division="floor",
        error=V, match=names("integer_division", "'floor'")),
    row("max_unpool-combine-unknown", jaxpool.max_unpool, Y, IDX, X.shape, axis=0,
        combine="last", error=V, match=names("combine", "'last'")),
    row("torch.max_unpool2d-indices-float", jtorch.max_unpool2d, YT, IT.astype(np.float32), 2,
        error=T, match="`indices` must have an integer dtype"),
]
# fmt: on


# torchvision's region ops (jaxpool.torch: roi_align, roi_pool, ps_roi_align, ps_roi_pool,
# multi_scale_roi_align), and the core psroi_pool's rounding they bind.
ROWS += [
    row(
        "torch.roi_align-boxes-width",
        jaxpool.torch.roi_align,
        X_ROI,
        R4,
        2,
        error=V,
        match=names("boxes", r"\(3, 4\)"),
    ),
    row(
        "torch.roi_align-boxes-list-width",
        jaxpool.torch.roi_align,
        X_ROI,
        [R4, R5],
        2,
        error=V,
        match=names("boxes[1]", r"\(3, 5\)"),
    ),
    row(
        "torch.roi_align-boxes-list-rank",
        jaxpool.torch.roi_align,
        X_ROI,
        [np.zeros(4, np.float32)],
        2,
        error=V,
        match=names("boxes[0]", r"\(4,\)"),
    ),
    row(
        "torch.roi_align-boxes-empty-list",
        jaxpool.torch.roi_align,
        X_ROI,
        [],
        2,
        error=V,
        match=names("boxes", "empty list"),
    ),
    row(
        "torch.roi_align-boxes-type",
        jaxpool.torch.roi_align,
        X_ROI,
        "boxes",
        2,
        error=T,
        match=names("boxes", "str"),
    ),
    row(
        "torch.roi_align-boxes-integer",
        jaxpool.torch.roi_align,
        X_ROI,
        np.zeros((3, 5), np.int32),
        2,
        error=T,
        match=names("boxes", "int32"),
    ),
    row(
        "torch.roi_align-input-rank",
        jaxpool.torch.roi_align,
        np.zeros((8, 6, 6), np.float32),
        R5,
        2,
        error=V,
        match=names("input", r"\(8, 6, 6\)"),
    ),
    row(
        "torch.roi_align-sampling_ratio-float",
        jaxpool.torch.roi_align,
        X_ROI,
        R5,
        2,
        sampling_ratio=1.5,
        error=T,
        match=names("sampling_ratio", "1.5"),
    ),
    row(
        "torch.roi_align-aligned-type",
        jaxpool.torch.roi_align,
        X_ROI,
        R5,
        2,
        aligned="yes",
        error=T,
        match=names("aligned", "yes"),
    ),
    row(
        "torch.roi_align-output_size-zero",
        jaxpool.torch.roi_align,
        X_ROI,
        R5,
        (2, 0),
        error=V,
        match=names("output_size", r"\(2, 0\)"),
    ),
    row(
        "torch.roi_pool-boxes-width",
        jaxpool.torch.roi_pool,
        X_ROI,
        np.zeros((3, 6), np.float32),
        2,
        error=V,
        match=names("boxes", r"\(3, 6\)"),
    ),
    row(
        "torch.roi_pool-spatial_scale-type",
        jaxpool.torch.roi_pool,
        X_ROI,
        R5,
        2,
        spatial_scale="half",
        error=T,
        match=names("spatial_scale", "half"),
    ),
    row(
        "torch.ps_roi_align-channels",
        jaxpool.torch.ps_roi_align,
        X_ROI,
        R5,
        3,
        error=V,
        match=names("output_size", "8 channels"),
    ),
    row(
        "torch.ps_roi_align-boxes-list-width",
        jaxpool.torch.ps_roi_align,
        X_ROI,
        [R5],
        2,
        error=V,
        match=names("boxes[0]", r"\(3, 5\)"),
    ),
    row(
        "torch.ps_roi_pool-channels",
        jaxpool.torch.ps_roi_pool,
        X_ROI,
        R5,
        (1, 3),
        error=V,
        match=names("output_size", r"8 channels.*\(1, 3\)"),
    ),
    row(
        "torch.ps_roi_pool-boxes-width",
        jaxpool.torch.ps_roi_pool,
        X_ROI,
        R4,
        2,
        error=V,
        match=names("boxes", r"\(3, 4\)"),
    ),
    row(
        "torch.ps_roi_pool-input-dtype",
        jaxpool.torch.ps_roi_pool,
        np.zeros((2, 8, 6, 6), np.int32),
        R5,
        2,
        error=T,
        match=names("input", "int32"),
    ),
    row(
        "torch.multi_scale_roi_align-image_shapes-length",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R4],
        [(32, 32)],
        2,
        2,
        error=V,
        match=names("image_shapes", r"\[\(32, 32\)\]"),
    ),
    row(
        "torch.multi_scale_roi_align-image_shapes-pair",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R4],
        [(32, 32), (32, 32, 3)],
        2,
        2,
        error=V,
        match=names("image_shapes", r"\(32, 32, 3\)"),
    ),
    row(
        "torch.multi_scale_roi_align-image_shapes-type",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R4],
        "32x32",
        2,
        2,
        error=T,
        match=names("image_shapes", "32x32"),
    ),
    row(
        "torch.multi_scale_roi_align-boxes-array",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        R5,
        [(32, 32), (32, 32)],
        2,
        2,
        error=T,
        match=names("boxes", "ndarray"),
    ),
    row(
        "torch.multi_scale_roi_align-boxes-count",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4],
        [(32, 32)],
        2,
        2,
        error=V,
        match=names("boxes", "1 arrays"),
    ),
    row(
        "torch.multi_scale_roi_align-boxes-width",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R5],
        [(32, 32), (32, 32)],
        2,
        2,
        error=V,
        match=names("boxes[1]", r"\(3, 5\)"),
    ),
    row(
        "torch.multi_scale_roi_align-features-empty",
        jaxpool.torch.multi_scale_roi_align,
        [],
        [R4, R4],
        [(32, 32), (32, 32)],
        2,
        2,
        error=V,
        match=names("features", "empty"),
    ),
    row(
        "torch.multi_scale_roi_align-features-rank",
        jaxpool.torch.multi_scale_roi_align,
        [np.zeros((2, 8, 8), np.float32)],
        [R4, R4],
        [(32, 32), (32, 32)],
        2,
        2,
        error=V,
        match=names("features[0]", r"\(2, 8, 8\)"),
    ),
    row(
        "torch.multi_scale_roi_align-scales-increasing",
        jaxpool.torch.multi_scale_roi_align,
        [PYRAMID[1], PYRAMID[0]],
        [R4, R4],
        [(32, 32), (32, 32)],
        2,
        2,
        error=V,
        match=names("features", r"\[0.125, 0.25\].*must decrease"),
    ),
    row(
        "torch.multi_scale_roi_align-canonical_scale",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R4],
        [(32, 32), (32, 32)],
        2,
        2,
        canonical_scale=0,
        error=V,
        match=names("canonical_scale", "0"),
    ),
    row(
        "torch.multi_scale_roi_align-sampling_ratio",
        jaxpool.torch.multi_scale_roi_align,
        PYRAMID,
        [R4, R4],
        [(32, 32), (32, 32)],
        2,
        None,
        error=T,
        match=names("sampling_ratio", "None"),
    ),
    row(
        "psroi_pool-rounding",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 2, 2, rounding="torch")),
        error=V,
        match=names("rounding", "'torch'"),
    ),
    row(
        "psroi_pool-rounding-bilinear",
        called(
            jaxpool.psroi_pool,
            lambda: jaxpool.psroi_pool(X_ROI, R5, 2, 2, mode="bilinear", rounding="torchvision"),
        ),
        error=V,
        match=names("rounding", "'torchvision'.*bilinear"),
    ),
    row(
        "psroi_pool-group_size-pair",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 2, (2, 1, 1))),
        error=V,
        match=names("group_size", r"\(2, 1, 1\)"),
    ),
    row(
        "psroi_pool-group_size-channels",
        called(jaxpool.psroi_pool, lambda: jaxpool.psroi_pool(X_ROI, R5, 2, (2, 3))),
        error=V,
        match=names("group_size", r"8 channels.*\(2, 3\)"),
    ),
]


# ---------------------------------------------------- arrays that hold no numbers, and hints
def non_numeric(argument):
    """A regex for jaxpool's error for an array of strings or objects passed as `argument`."""
    return rf"`{re.escape(argument)}` must be an array of numbers or booleans, got .*dtype (<U|obj)"


S_X, S_ROI, S_R4, S_B = X.astype(str), X_ROI.astype(str), R4.astype(str), B.astype(str)
ONNX_MAX = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])
OFFSETS = np.zeros((3, 2, 2, 2), np.float32)
# Accepted spellings of `index_element_type`, strings and dtypes, as its errors list them.
INDEX_TYPES = r"'i32', 'i64', 'int32', 'int64'.*jnp\.int32, jnp\.int64.*None"

# fmt: off
ROWS += [
    row("max_pool-x-strings", jaxpool.max_pool, S_X, 2, error=T, match=non_numeric("x")),
    row("avg_pool-x-strings", jaxpool.avg_pool, S_X, 2, error=T, match=non_numeric("x")),
    row("lp_pool-x-strings", jaxpool.lp_pool, S_X, 2, error=T, match=non_numeric("x")),
    row("adaptive_max_pool-x-strings", jaxpool.adaptive_max_pool, S_X, 2, error=T,
        match=non_numeric("x")),
    row("adaptive_avg_pool-x-objects", jaxpool.adaptive_avg_pool, X.astype(object), 2, error=T,
        match=non_numeric("x")),
    row("max_unpool-indices-strings", jaxpool.max_unpool, Y, IDX.astype(str), X.shape, axis=0,
        error=T, match=non_numeric("indices")),
    row("fractional_max_pool-samples-strings", jaxpool.fractional_max_pool, X, 2, 3,
        S8.astype(str), error=T, match=non_numeric("samples")),
    row("roi_pool-rois-strings", jaxpool.roi_pool, X_ROI, R5.astype(str), 2, error=T,
        match=non_numeric("rois")),
    row("roi_align-x-strings", jaxpool.roi_align, S_ROI, R4, B, 2, error=T,
        match=non_numeric("x")),
    row("roi_align-rois-strings", jaxpool.roi_align, X_ROI, S_R4, B, 2, error=T,
        match=non_numeric("rois")),
    row("roi_align-batch_indices-strings", jaxpool.roi_align, X_ROI, R4, S_B, 2, error=T,
        match=non_numeric("batch_indices")),
    row("roi_align_rotated-rois-strings", jaxpool.roi_align_rotated, X_ROI, R5.astype(str), B, 2,
        error=T, match=non_numeric("rois")),
    row("psroi_pool-x-strings", jaxpool.psroi_pool, S_ROI, R5, 2, 2, error=T,
        match=non_numeric("x")),
    row("psroi_align-batch_indices-strings", jaxpool.psroi_align, X_ROI, R4, S_B, 2, error=T,
        match=non_numeric("batch_indices")),
    row("deformable_psroi_pool-offsets-strings", jaxpool.deformable_psroi_pool, X_ROI, R5,
        OFFSETS.astype(str), output_dim=2, group_size=2, error=T, match=non_numeric("offsets")),
    row("multilevel_roi_align-features-strings", jaxpool.multilevel_roi_align,
        [PYRAMID[0], PYRAMID[1].astype(str)], R4, B, 2, spatial_scales=FPN2, error=T,
        match=non_numeric("features[1]")),
    row("multilevel_roi_align-rois-strings", jaxpool.multilevel_roi_align, PYRAMID, S_R4, B, 2,
        spatial_scales=FPN2, error=T, match=non_numeric("rois")),
    row("openvino.layer-x-strings", layer_call, ("MaxPool", K), S_X, error=T,
        match=non_numeric("x")),
    row("onnx.node-x-strings", called(jaxpool.onnx.node, lambda: jaxpool.onnx.node(ONNX_MAX)(S_X)),
        error=T, match=non_numeric("x")),
    row("torch.max_pool2d-input-strings", jtorch.max_pool2d, S_X, 2, error=T,
        match=non_numeric("input")),
    row("torch.max_unpool2d-indices-strings", jtorch.max_unpool2d, Y, IDX.astype(str), 2,
        error=T, match=non_numeric("indices")),
    row("torch.fractional_max_pool2d-input-strings", FMP2, S_X, 2, output_size=3,
        _random_samples=S8, error=T, match=non_numeric("input")),
    row("torch.roi_align-boxes-strings", jtorch.roi_align, X_ROI, R5.astype(str), 2, error=T,
        match=non_numeric("boxes")),
    row("torch.roi_align-boxes-list-strings", jtorch.roi_align, X_ROI, [R4, S_R4], 2, error=T,
        match=non_numeric("boxes[1]")),
    row("torch.multi_scale_roi_align-features-strings", jtorch.multi_scale_roi_align,
        [PYRAMID[0].astype(str)], [R4, R4], [(32, 32), (32, 32)], 2, 2, error=T,
        match=non_numeric("features[0]")),
    row("nn.MaxPool-x-strings", module_called, pnn.MaxPool((2, 2)), S_X, error=T,
        match=non_numeric("x")),
    row("nn.eqx.MaxPool-x-strings", module_called, peqx.MaxPool(2, num_spatial_dims=2),
        S_X[0], error=T, match=non_numeric("x")),
    # sampling_ratio=-1 is torchvision's adaptive sampling: the native ops point to theirs.
    row("roi_align-sampling_ratio-torchvision", jaxpool.roi_align, X_ROI, R4, B, 2,
        sampling_ratio=-1, error=V,
        match=r"`sampling_ratio` \(=-1\).*0 samples adaptively.*jaxpool\.torch"),
    row("psroi_align-sampling_ratio-torchvision", jaxpool.psroi_align, X_ROI, R4, B, 2,
        sampling_ratio=-1, error=V, match=r"`sampling_ratio` \(=-1\).*0 samples adaptively"),
    row("roi_align_rotated-sampling_ratio-torchvision", jaxpool.roi_align_rotated, X_ROI, R5, B,
        2, sampling_ratio=-1, error=V, match=r"`sampling_ratio` \(=-1\).*jaxpool\.torch"),
    row("multilevel_roi_align-sampling_ratio-torchvision", jaxpool.multilevel_roi_align, PYRAMID,
        R4, B, 2, spatial_scales=FPN2, sampling_ratio=-1, error=V,
        match=r"`sampling_ratio` \(=-1\).*0 samples adaptively.*jaxpool\.torch"),
    # index_element_type: every error lists the strings and the dtypes it takes.
    row("max_pool-index_element_type-u8-lists", jaxpool.max_pool, X, 2, return_indices=True,
        index_element_type="u8", error=V, match=r"`index_element_type` \(='u8'\).*" + INDEX_TYPES),
    row("max_pool-index_element_type-int16-dtype-lists", jaxpool.max_pool, X, 2,
        return_indices=True, index_element_type=jnp.int16, error=V,
        match=r"`index_element_type` \(=.*int16.*\).*" + INDEX_TYPES),
    row("adaptive_max_pool-index_element_type-object-lists", jaxpool.adaptive_max_pool, X, 2,
        return_indices=True, index_element_type=object(), error=T,
        match=r"`index_element_type` must be one of .*" + INDEX_TYPES + ".*got <object"),
    row("fractional_max_pool-index_element_type-lists", jaxpool.fractional_max_pool, X, 2, 3, S8,
        return_indices=True, index_element_type="int8", error=V, match=INDEX_TYPES),
    # Maps that skip levels: only MultiScaleRoIAlign's rule takes them.
    row("multilevel_roi_align-detectron2-skipped-level", jaxpool.multilevel_roi_align,
        [PYRAMID[0], np.zeros((2, 8, 2, 2), np.float32)], R4, B, 2,
        spatial_scales=(1 / 4, 1 / 16), level_rule="detectron2", error=V,
        match=r"`spatial_scales` \(=\(0.25, 0.0625\)\) must halve.*level_rule='torchvision'"),
    row("multilevel_roi_align-openvino-skipped-level", jaxpool.multilevel_roi_align,
        [PYRAMID[0], np.zeros((2, 8, 2, 2), np.float32)], R4, B, 2,
        spatial_scales=(1 / 4, 1 / 16), level_rule="openvino", error=V,
        match=names("spatial_scales", "must halve")),
    row("multilevel_roi_align-torchvision-increasing", jaxpool.multilevel_roi_align,
        PYRAMID, R4, B, 2, spatial_scales=(1 / 16, 1 / 4), error=V,
        match=r"`spatial_scales` \(=\(0.0625, 0.25\)\) must decrease"),
]
# fmt: on
