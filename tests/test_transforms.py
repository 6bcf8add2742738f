"""Every JAX transformation composes with every op, and the ops' hypothesis properties.

Each op is checked against itself without the transformation (vmap against a loop, checkpoint,
scan and export against the plain call, forward against reverse mode), so these tests hold for
any correct op.  The properties: layout invariance, jit equals eager, vmap equals a loop, the
gradient is the adjoint of the forward derivative (``<J v, w> = <v, J^T w>``) and max pooling's
the scatter of the cotangents to the indices.  (No retracing: test_retrace.py.)
"""

from __future__ import annotations

import cases
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
import reference

import jaxpool

OPS = {
    "max_pool": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True),
    "max_pool-ceil-dilated": lambda x: jaxpool.max_pool(
        x, 2, 2, 0, 1, dilations=2, rounding_type="ceil", return_indices=True, axis=2
    ),
    "avg_pool": lambda x: (jaxpool.avg_pool(x, 3, 2, 1, 1),),
    "avg_pool-exclude": lambda x: (
        jaxpool.avg_pool(x, 3, 2, 1, 2, exclude_pad=True, rounding_type="ceil"),
    ),
    "adaptive_max_pool": lambda x: jaxpool.adaptive_max_pool(x, (2, 3), return_indices=True),
    "adaptive_avg_pool": lambda x: (jaxpool.adaptive_avg_pool(x, (2, 3)),),
    # max_unpool is linear in its first argument; its indices come from a fixed max pool.
    "max_unpool": None,
}
SHAPE = (2, 3, 5, 6)


def _op(op, shape=SHAPE):
    """``(fn, x)``: ``fn(x)`` returns a tuple whose first entry is differentiable in ``x``."""
    if op != "max_unpool":
        return OPS[op], cases.tie_free(shape)
    _, indices = jaxpool.max_pool(cases.tie_free(shape), 3, 2, 1, 1, return_indices=True, axis=2)
    indices = np.asarray(indices)

    def unpool(y):
        return (jaxpool.max_unpool(y, indices, shape, axis=2),)

    return unpool, cases.tie_free(indices.shape)


def _first(fn):
    return lambda x: fn(x)[0]


@pytest.mark.parametrize("op", list(OPS))
def test_vmap_checkpoint_scan_donation_and_export_equal_the_plain_call(op):
    fn, x = _op(op)
    plain = fn(x)

    def loss(x):
        return jnp.sum(jnp.sin(_first(fn)(x)))

    # vmap over axis 1, nested vmap, and the vmap of the gradient, against a loop.
    stacked = np.stack([x, x[::-1] * 2, -x], axis=1)
    out = jax.vmap(fn, in_axes=1)(stacked)
    for j in range(3):
        cases.assert_trees_equal(tuple(o[j] for o in out), fn(stacked[:, j]))
    nested = jax.vmap(jax.vmap(fn, in_axes=1), in_axes=2, out_axes=1)(stacked[:, :, None])
    cases.assert_trees_equal(tuple(o[:, 0] for o in nested), out)
    xs = np.stack([x, x * 3 - 1])
    grad = jax.grad(lambda x: jnp.sum(_first(fn)(x) ** 2))
    np.testing.assert_allclose(jax.vmap(grad)(xs), np.stack([grad(v) for v in xs]), rtol=1e-6)

    # jit with the input donated: its buffer is reused for x * 2.
    donated = jnp.array(x)
    doubled, out = jax.jit(lambda x: (x * 2, fn(x)), donate_argnums=0)(donated)
    assert donated.is_deleted()
    np.testing.assert_array_equal(np.asarray(doubled), x * 2)
    cases.assert_trees_equal(out, plain)

    cases.assert_trees_equal(jax.checkpoint(fn)(x), plain)
    np.testing.assert_allclose(jax.grad(jax.checkpoint(loss))(x), jax.grad(loss)(x), rtol=1e-6)

    # A scan body, its carry and its gradient.
    xs = np.stack([x, -x, x / 2])

    def body(carry, x):
        out = fn(x)
        return carry + jnp.sum(out[0]), out

    total, outs = jax.lax.scan(body, jnp.float32(0), xs)
    for j in range(3):
        cases.assert_trees_equal(tuple(o[j] for o in outs), fn(xs[j]))
    np.testing.assert_allclose(float(total), sum(float(jnp.sum(fn(v)[0])) for v in xs), rtol=1e-6)
    grad = jax.grad(lambda xs: jax.lax.scan(body, jnp.float32(0), xs)[0])(xs)
    sum_grad = jax.grad(lambda v: jnp.sum(fn(v)[0]))
    np.testing.assert_allclose(grad, np.stack([sum_grad(v) for v in xs]), rtol=1e-6)

    exported = jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct(x.shape, x.dtype))
    restored = jax.export.deserialize(exported.serialize())
    cases.assert_trees_equal(restored.call(x), plain)
    assert restored.in_avals == exported.in_avals
    assert restored.out_avals == exported.out_avals


@pytest.mark.parametrize("op", list(OPS))
def test_eval_shape_allocates_nothing(op):
    """4 GiB inputs: only shapes and dtypes are computed, no array is created."""
    before = len(jax.live_arrays())
    if op == "max_unpool":
        big = (16, 16, 2048, 2048)
        y, i = (jax.ShapeDtypeStruct((16, 16, 1024, 1024), t) for t in (jnp.float32, jnp.int32))
        abstract = jax.eval_shape(lambda y, i: (jaxpool.max_unpool(y, i, big, axis=0),), y, i)
        assert abstract[0].shape == big and abstract[0].dtype == jnp.float32
    else:
        fn, _ = _op(op)
        big = jax.ShapeDtypeStruct((16, 16, 2048, 2048), jnp.float32)
        abstract = jax.eval_shape(fn, big)
        small = fn(np.zeros((2, 2, 2048 // 64, 2048 // 64), np.float32))
        for a, c in zip(abstract, small, strict=False):
            assert a.dtype == c.dtype and a.ndim == c.ndim == 4
            assert a.shape[:2] == big.shape[:2]
    assert len(jax.live_arrays()) <= before + (0 if op == "max_unpool" else 2)
    for a in abstract:
        assert isinstance(a, jax.ShapeDtypeStruct)


@pytest.mark.parametrize("op", list(OPS))
def test_forward_and_reverse_mode_agree(op, x64):
    fn, x = _op(op, shape=(1, 2, 5, 6))
    x = x.astype(np.float64)
    f = _first(fn)
    tangent = np.random.default_rng(1).standard_normal(x.shape)
    y, y_dot = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(x, tangent)
    y_lin, f_lin = jax.linearize(f, x)
    cases.assert_trees_equal(y, f(x))
    cases.assert_trees_equal(y_lin, y)
    np.testing.assert_allclose(f_lin(tangent), y_dot, rtol=1e-12)
    jac_fwd, jac_rev = jax.jit(lambda x: (jax.jacfwd(f)(x), jax.jacrev(f)(x)))(x)
    np.testing.assert_allclose(jac_fwd, jac_rev, rtol=1e-12)
    flat_jac = np.asarray(jac_fwd).reshape(y.size, x.size)
    np.testing.assert_allclose(flat_jac @ tangent.ravel(), y_dot.ravel(), rtol=1e-12, atol=1e-12)
    # Every op is piecewise linear, so the hessian of 0.5 * |f|^2 is J^T J.
    hessian = jax.jit(jax.hessian(lambda x: 0.5 * jnp.sum(f(x) ** 2)))(x).reshape(x.size, -1)
    np.testing.assert_allclose(hessian, flat_jac.T @ flat_jac, rtol=1e-12, atol=1e-12)
    jax.test_util.check_grads(jax.jit(f), (x,), order=1, modes=("fwd", "rev"), eps=1e-3)


def test_max_unpool_of_vmapped_indices():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 2, 6, 4)), jnp.float32)
    y, i = jax.vmap(lambda v: jaxpool.max_pool(v, 2, return_indices=True, axis=2))(x)
    out = jax.jit(jax.vmap(lambda a, b: jaxpool.max_unpool(a, b, (2, 2, 6, 4), axis=2)))(y, i)
    np.testing.assert_array_equal(out[1], jaxpool.max_unpool(y[1], i[1], (2, 2, 6, 4), axis=2))


# ----------------------------------------------------------------------------------------------
# Properties of every op (hypothesis).
# ----------------------------------------------------------------------------------------------

PROPERTY = cases.fuzz(3)


@pytest.mark.parametrize("op", list(OPS))
@PROPERTY
@hypothesis.given(
    n=st.integers(1, 2),
    c=st.integers(1, 3),
    h=st.integers(3, 7),
    w=st.integers(4, 8),
    seed=st.integers(0, 2**16),
)
def test_gradient_is_the_adjoint_of_the_forward_derivative(op, n, c, h, w, seed):
    """``<J v, w> = <v, J^T w>`` in float64 on a tie-free input, for random ``v`` and ``w``."""
    with jax.enable_x64(True):
        fn, x = _op(op, shape=(n, c, h, w))
        f = _first(fn)
        x = x.astype(np.float64)
        rng = np.random.default_rng(seed)
        v = rng.standard_normal(x.shape)
        w_ = rng.standard_normal(jax.eval_shape(f, x).shape)
        j_v, jt_w = jax.jit(lambda x, v, w: (jax.jvp(f, (x,), (v,))[1], jax.vjp(f, x)[1](w)[0]))(
            x, v, w_
        )
        np.testing.assert_allclose(
            float(jnp.vdot(j_v, w_)), float(jnp.vdot(v, jt_w)), rtol=1e-12, atol=1e-12
        )


@st.composite
def pool_cases(draw):
    nd = draw(st.integers(1, 3))

    def per_axis(low, high):
        return draw(st.lists(st.integers(low, high), min_size=nd, max_size=nd))

    spatial = per_axis(1, 7)
    attrs = dict(
        kernel=per_axis(1, 3),
        strides=per_axis(1, 3),
        dilations=per_axis(1, 2),
        pads_begin=per_axis(0, 2),
        pads_end=per_axis(0, 2),
        rounding_type=draw(st.sampled_from(["floor", "ceil", "ceil_torch"])),
        auto_pad=draw(st.sampled_from(["explicit", "valid", "same_upper", "same_lower"])),
    )
    pads = zip(attrs["pads_begin"], attrs["pads_end"])
    hypothesis.assume(
        all(
            (k - 1) * d + 1 <= s + (b + e if attrs["auto_pad"] == "explicit" else 0)
            for k, d, s, (b, e) in zip(attrs["kernel"], attrs["dilations"], spatial, pads)
        )
    )
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial)
    seed = draw(st.integers(0, 2**31))
    x = np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)
    return x, attrs


# Each example compiles its own programs: a few suffice beside test_max_pool.py's fuzz against
# the reference (80 examples, both layouts, every axis of the indices, which is also where
# max pooling's NXC is checked against NCX).
MAX_POOL = cases.fuzz(15)


@MAX_POOL
@hypothesis.given(pool_cases(), st.sampled_from(["NCX", "NXC"]))
def test_max_pool_jit_eager_vmap_loop_and_gradient_scatter(case, data_format):
    """jit equals eager, vmap equals a loop, and the gradient is the scatter of the cotangents
    to the indices."""
    x, attrs = case
    x = cases.to_layout(x, data_format)

    def pool(x, **kwargs):
        return jaxpool.max_pool(x, data_format=data_format, **attrs, **kwargs)

    ct = np.random.default_rng(0).standard_normal(jax.eval_shape(pool, x).shape)
    ct = ct.astype(np.float32)
    y, i, grad = jax.jit(
        lambda x, ct: (*pool(x, return_indices=True), jax.grad(lambda x: jnp.vdot(pool(x), ct))(x))
    )(x, ct)
    cases.assert_trees_equal(pool(x, return_indices=True), (y, i))
    stacked = jnp.stack([x, -x, x * 2])
    batched = jax.vmap(lambda v: pool(v, return_indices=True))(stacked)
    for k in range(3):
        cases.assert_trees_equal(
            pool(stacked[k], return_indices=True), tuple(b[k] for b in batched)
        )
    # Windows without input elements pass no gradient; they hold the padding value.
    y, i, ct, x = (cases.from_layout(a, data_format) for a in (y, i, ct, x))
    live = y != -np.inf
    expected = reference.max_unpool(np.where(live, ct, 0), np.where(live, i, 0), x.shape)
    np.testing.assert_allclose(grad, cases.to_layout(expected, data_format), rtol=1e-5, atol=1e-5)


@cases.fuzz(6)
@hypothesis.given(seed=st.integers(0, 10_000))
def test_avg_pool_nxc_equals_ncx(seed):
    cfg = cases.avg_config(seed)
    x = cases.avg_sample(np.random.default_rng(seed), "float32", cfg["shape"])
    attrs = {
        k: cfg[k]
        for k in ("strides", "pads_begin", "pads_end", "exclude_pad", "rounding_type", "auto_pad")
    }
    ncx = jaxpool.avg_pool(x, cfg["kernel"], **attrs)
    nxc = jaxpool.avg_pool(oracle.to_nxc(x), cfg["kernel"], data_format="NXC", **attrs)
    np.testing.assert_array_equal(oracle.to_ncx(np.asarray(nxc)), ncx)


@cases.fuzz(6)
@hypothesis.given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_adaptive_properties(shape, data):
    """Output size = input size is the identity; NXC equals NCX; max indices name y in x."""
    x = np.random.default_rng(len(shape)).standard_normal((2, 2, *shape)).astype(np.float32)
    output_size = data.draw(st.lists(st.integers(1, 7), min_size=len(shape), max_size=len(shape)))
    for fn in (jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool):
        np.testing.assert_array_equal(fn(x, shape), x)
        ncx = fn(x, output_size)
        nxc = fn(oracle.to_nxc(x), output_size, data_format="NXC")
        np.testing.assert_array_equal(oracle.to_ncx(np.asarray(nxc)), ncx)
    y, i = jaxpool.adaptive_max_pool(x, output_size, return_indices=True)
    flat = x.reshape(2, 2, -1)
    np.testing.assert_array_equal(
        np.take_along_axis(flat, np.asarray(i).reshape(2, 2, -1), 2),
        np.asarray(y).reshape(2, 2, -1),
    )


@cases.fuzz(6)
@hypothesis.given(
    nd=st.integers(1, 3),
    kernel=st.integers(1, 3),
    axis=st.integers(0, 2),
    nxc=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_max_pool_of_max_unpool_is_identity(nd, kernel, axis, nxc, seed):
    """For non-overlapping windows and positive values, max_pool(max_unpool(y)) == y with the
    same indices; unpooling NXC equals unpooling NCX."""
    rng = np.random.default_rng(seed)
    shape = (2, 2, *rng.integers(kernel, 3 * kernel + 1, nd))
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32) + 1
    fmt = "NXC" if nxc else "NCX"
    x_in = oracle.to_nxc(x) if nxc else x
    y, i = jaxpool.max_pool(x_in, kernel, return_indices=True, axis=axis, data_format=fmt)
    out = jaxpool.max_unpool(y, i, x_in.shape, axis=axis, data_format=fmt)
    y2, i2 = jaxpool.max_pool(out, kernel, return_indices=True, axis=axis, data_format=fmt)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(i2, i)
    y_ncx, i_ncx = jaxpool.max_pool(x, kernel, return_indices=True, axis=axis)
    out_ncx = jaxpool.max_unpool(y_ncx, i_ncx, x.shape, axis=axis)
    np.testing.assert_array_equal(oracle.to_ncx(np.asarray(out)) if nxc else out, out_ncx)
