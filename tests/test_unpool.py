"""max_unpool against PyTorch's max_unpool and NumPy's unbuffered np.add.at."""

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
import torch
from jax.test_util import check_grads

import jaxpool

torch.set_num_threads(1)


def _scatter_reference(y, full_index, ncx_shape):
    """NumPy: ``out.flat[index] += y`` with repeated indices summed."""
    out = np.zeros(int(np.prod(ncx_shape)), y.dtype)
    np.add.at(out, np.asarray(full_index).ravel(), np.asarray(y).ravel())
    return out.reshape(ncx_shape)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("axis,data_format", [(0, "NCX"), (1, "NXC"), (2, "NCX"), (-3, "NXC")])
def test_matches_torch_non_overlapping(nd, axis, data_format):
    """Non-overlapping windows: PyTorch's max_unpool (spatial indices) for every index axis,
    values and the gradient in ``y``."""
    rng = np.random.default_rng(nd)
    shape = (2, 3, *[8, 6, 4][:nd])
    x = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(x)
    pooled, torch_i = getattr(torch.nn.functional, f"max_pool{nd}d")(xt, 2, return_indices=True)
    yt = pooled.clone().requires_grad_(True)
    expected = getattr(torch.nn.functional, f"max_unpool{nd}d")(yt, torch_i, 2,
                                                                output_size=shape[2:])
    g = rng.standard_normal(shape).astype(np.float32)
    expected.backward(torch.tensor(g))

    x_in = x if data_format == "NCX" else oracle.to_nxc(x)
    y, i = jaxpool.max_pool(x_in, 2, return_indices=True, axis=axis, data_format=data_format)
    out, vjp = jax.vjp(lambda v: jaxpool.max_unpool(v, i, x_in.shape, axis=axis,
                                                    data_format=data_format), y)
    (grad,) = vjp(jnp.asarray(g if data_format == "NCX" else oracle.to_nxc(g)))
    if data_format == "NXC":
        out, grad = oracle.to_ncx(np.asarray(out)), oracle.to_ncx(np.asarray(grad))
    np.testing.assert_array_equal(out, expected.detach().numpy())
    np.testing.assert_array_equal(grad, yt.grad.numpy())


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_overlapping_windows_sum(axis, jit_mode):
    """Overlapping windows name some positions several times: they receive the sum."""
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 6)).astype(np.float32)
    y, i = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True, axis=axis)
    _, i0 = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True)
    assert len(np.unique(np.asarray(i0))) < i0.size  # repeated positions
    out = jit_mode(lambda a, b: jaxpool.max_unpool(a, b, x.shape, axis=axis), y, i)
    np.testing.assert_allclose(out, _scatter_reference(y, i0, x.shape), rtol=1e-6)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_adaptive_indices(data_format):
    """adaptive_max_pool's spatial indices (axis=2), also for output larger than input."""
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 4)).astype(np.float32)
    x_in = x if data_format == "NCX" else oracle.to_nxc(x)
    for output_size in ((2, 3), (7, 9)):
        y, i = jaxpool.adaptive_max_pool(x_in, output_size, return_indices=True,
                                         data_format=data_format)
        out = jaxpool.max_unpool(y, i, x_in.shape, axis=2, data_format=data_format)
        y, i = (oracle.to_ncx(np.asarray(a)) if data_format == "NXC" else np.asarray(a)
                for a in (y, i))
        full = (np.arange(6).reshape(2, 3, 1, 1) * 20) + i
        expected = _scatter_reference(y, full, x.shape)
        if data_format == "NXC":
            out = oracle.to_ncx(np.asarray(out))
        np.testing.assert_allclose(out, expected, rtol=1e-6)


@hypothesis.settings(max_examples=6, deadline=None, derandomize=True, database=None)
@hypothesis.given(nd=st.integers(1, 3), kernel=st.integers(1, 3), axis=st.integers(0, 2),
                  nxc=st.booleans(), seed=st.integers(0, 1000))
def test_pool_of_unpool_is_identity(nd, kernel, axis, nxc, seed):
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


def test_integer_values_and_indices_out_of_range():
    y = np.array([[[5, 6, 7]]], np.int32)
    out = jaxpool.max_unpool(y, np.array([[[4, -1, 4]]], np.int8), (1, 1, 5), axis=2)
    assert out.dtype == jnp.int32
    np.testing.assert_array_equal(out, _scatter_reference(y[..., ::2], [4, 4], (1, 1, 5)))
    # axis=2 index 5 of a 5-element plane would land in the next plane: it is dropped.
    out = jaxpool.max_unpool(np.ones((1, 2, 1), np.float32), np.array([[[5], [0]]]),
                             (1, 2, 5), axis=2)
    np.testing.assert_array_equal(out, _scatter_reference(np.ones(1, np.float32), [5],
                                                          (1, 2, 5)))


def test_grads(x64):
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 5))
    y, i = jaxpool.max_pool(x, 2, 1, return_indices=True, axis=2)
    check_grads(lambda v: jaxpool.max_unpool(v, i, x.shape, axis=2), (np.asarray(y),),
                order=2, modes=("fwd", "rev"))


def test_transforms():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 2, 6, 4)), jnp.float32)
    y, i = jax.vmap(lambda v: jaxpool.max_pool(v, 2, return_indices=True, axis=2))(x)
    out = jax.jit(jax.vmap(lambda a, b: jaxpool.max_unpool(a, b, (2, 2, 6, 4), axis=2)))(y, i)
    np.testing.assert_array_equal(out[1], jaxpool.max_unpool(y[1], i[1], (2, 2, 6, 4), axis=2))


Y = np.ones((1, 2, 3), np.float32)
IDX = np.zeros((1, 2, 3), np.int32)
ERRORS = [
    (dict(indices=IDX.astype(np.float32)), TypeError, "`indices` must have an integer dtype"),
    (dict(indices=IDX[..., :2]), ValueError, r"`indices` of shape \(1, 2, 2\) must have the shape"),
    (dict(output_shape=(1, 2)), ValueError, r"`output_shape` \(=\(1, 2\)\) must have the rank"),
    (dict(output_shape=(1, 3, 6)), ValueError, "must keep the batch and channel sizes"),
    (dict(output_shape=(2, 2, 6)), ValueError, "must keep the batch and channel sizes"),
    (dict(output_shape=(1, 2, 0)), ValueError, "must have positive sizes"),
    (dict(output_shape=6), TypeError, "`output_shape` must be a sequence of ints"),
    (dict(output_shape=(1, 2, 6.0)), TypeError, "`output_shape` must be an int"),
    (dict(axis=3), ValueError, r"`axis` \(=3\) must be in \[-3, 3\)"),
    (dict(axis=-4), ValueError, r"`axis` \(=-4\) must be in"),
    (dict(y=np.ones((1, 2, 3, 4, 5, 6)), indices=np.zeros((1, 2, 3, 4, 5, 6), np.int32),
          output_shape=(1, 2, 3, 4, 5, 6)), ValueError, "`y` must have rank"),
    (dict(data_format="NWC"), ValueError, r"`data_format` \(='NWC'\)"),
]


@pytest.mark.parametrize("kwargs,error,match", ERRORS)
def test_errors(kwargs, error, match):
    args = dict(y=Y, indices=IDX, output_shape=(1, 2, 6))
    args.update(kwargs)
    with pytest.raises(error, match=match):
        jaxpool.max_unpool(args.pop("y"), args.pop("indices"), args.pop("output_shape"), **args)


def test_lost_coordinates():
    y = np.ones((1, 2, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"`axis` \(=3\) must be 0, 1 or 2"):
        jaxpool.max_unpool(y, np.zeros(y.shape, np.int32), (1, 2, 6, 6), axis=3)
    with pytest.raises(ValueError, match=r"`axis` \(=-1\) must be 0, 1 or 2"):
        jaxpool.max_unpool(y, np.zeros(y.shape, np.int32), (1, 2, 6, 6), axis=-1)
