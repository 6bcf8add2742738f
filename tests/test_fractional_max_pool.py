"""fractional_max_pool and jaxpool.torch.fractional_max_pool2d/3d against PyTorch's
``fractional_max_pool2d/3d`` with the same ``_random_samples``: values, indices and gradients.

The 1-D core op is PyTorch's 2-D op on a height of 1 (one window start there, 0).
"""

import functools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import jaxpool
import jaxpool.torch as jtorch

torch.set_num_threads(1)

DTYPES = ("float32", "float64", "float32", "float16", "float32", "bfloat16")  # by seed % 6
KINDS = ("normal", "ties", "-inf", "nan")


def _sample(rng, shape, dtype, kind):
    """An input with distinct values, many ties (small integers), ``-inf``s (whole windows of
    them now and then) or NaNs (several per window now and then)."""
    if kind == "normal":
        x = rng.permutation(np.prod(shape)).reshape(shape) / 7.0 - 3.0
        if dtype in ("float16", "bfloat16"):
            x = rng.standard_normal(shape)  # distinct enough; ties keep the first anyway
    else:
        x = rng.integers(-2, 3, shape).astype(np.float64)
        if kind != "ties":
            special = -np.inf if kind == "-inf" else np.nan
            x[rng.random(shape) < (0.6 if kind == "-inf" else 0.3)] = special
    return x.astype(np.float32 if dtype == "bfloat16" else dtype)


def _case(seed):
    """A random call of PyTorch's 2-D or 3-D op: batched or not, ``output_size`` (per axis or
    one int with one kernel size) or ``output_ratio``, every kind of input, four dtypes (the
    16-bit ones values and indices only)."""
    rng = np.random.default_rng(seed)
    nd = 2 + seed % 2
    slack = 1 if nd == 2 else 0  # PyTorch's 3-D size check is strict
    batched = bool(seed % 3)
    dtype = DTYPES[seed % 6]
    kind = KINDS[(seed // 2) % 4]
    spatial = tuple(int(v) for v in rng.integers(3, 13 if nd == 2 else 8, nd))
    if seed % 5 == 0:
        k = int(rng.integers(1, min(4, min(spatial) - 1 + slack) + 1))
        o = int(rng.integers(1, min(spatial) - k + slack + 1))
        return nd, batched, dtype, kind, spatial, k, {"output_size": o}, rng
    kernel = tuple(int(rng.integers(1, min(4, length - 1 + slack) + 1)) for length in spatial)
    top = [min(length - k + slack, length - 1) for length, k in zip(spatial, kernel)]
    out = tuple(int(rng.integers(1, t + 1)) for t in top)
    if seed % 7 in (2, 3):  # the ratio that gives `out`: int(length * ratio) == out
        ratio = tuple((o + 0.5) / length for o, length in zip(out, spatial))
        return nd, batched, dtype, kind, spatial, kernel, {"output_ratio": ratio}, rng
    return nd, batched, dtype, kind, spatial, kernel, {"output_size": out}, rng


SEEDS = range(30)


def _torch_call(nd, x, kernel, size, samples, cotangent, bf16=False):
    """PyTorch's values, indices and, with a cotangent, the gradient; ``bf16``: of ``x`` and
    ``samples`` rounded to bfloat16, the values as float32."""
    op = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    xt, st = torch.tensor(x, requires_grad=cotangent is not None), torch.tensor(samples)
    xb, sb = (xt.bfloat16(), st.bfloat16()) if bf16 else (xt, st)
    y, i = op(xb, kernel, return_indices=True, _random_samples=sb, **size)
    grad = None
    if cotangent is not None:
        y.backward(torch.tensor(cotangent))
        grad = xt.grad.numpy()
    return (y.detach().float() if bf16 else y.detach()), i.numpy(), grad


def _np(a):
    return np.asarray(jnp.asarray(a).astype(jnp.float32) if a.dtype == jnp.bfloat16 else a)


@pytest.mark.parametrize("seed", SEEDS)
def test_matches_pytorch(seed, x64):
    """Values (bits, NaN included), indices and gradients (``jax.vjp`` with a random
    cotangent) of the front end equal PyTorch's for the same ``_random_samples``."""
    nd, batched, dtype, kind, spatial, kernel, size, rng = _case(seed)
    shape = (2, 3, *spatial) if batched else (3, *spatial)
    x = _sample(rng, shape, dtype, kind)
    samples = rng.random((2, 3, nd)).astype(np.float32 if dtype == "bfloat16" else dtype)
    if seed % 7 == 0:  # PyTorch takes more samples than planes, and reads the first ones
        samples = rng.random((4, 3, nd)).astype(samples.dtype)
    fn = jtorch.fractional_max_pool2d if nd == 2 else jtorch.fractional_max_pool3d
    call = functools.partial(fn, kernel_size=kernel, return_indices=True, **size)
    xj, sj = jnp.asarray(x).astype(dtype), jnp.asarray(samples).astype(dtype)
    out_shape = jax.eval_shape(lambda a, s: call(a, _random_samples=s), xj, sj)[0].shape
    cotangent = rng.standard_normal(out_shape).astype(np.float32 if dtype == "bfloat16" else dtype)

    @jax.jit
    def pooled(a, s, ct):
        (y, i), vjp = jax.vjp(lambda a: call(a, _random_samples=s), a)
        return y, i, vjp((ct.astype(y.dtype), np.zeros(i.shape, jax.dtypes.float0)))[0]

    y, i, g = pooled(xj, sj, jnp.asarray(cotangent))
    low = dtype in ("float16", "bfloat16")  # values and indices only
    expected, expected_i, grad = _torch_call(
        nd, x, kernel, size, samples, None if low else cotangent, bf16=dtype == "bfloat16"
    )
    assert y.dtype == xj.dtype and i.dtype == jnp.int64 and y.shape == tuple(expected.shape)
    np.testing.assert_array_equal(_np(y), expected.numpy())
    np.testing.assert_array_equal(np.asarray(i), expected_i)
    if not low:
        np.testing.assert_allclose(np.asarray(g), grad, rtol=1e-6, atol=1e-6)


def test_random_cases_cover_what_they_claim():
    rows = [_case(seed) for seed in SEEDS]
    assert {c[0] for c in rows} == {2, 3}
    assert {c[1] for c in rows} == {True, False}
    assert {c[2] for c in rows} == set(DTYPES)
    assert {c[3] for c in rows} == set(KINDS)
    for nd in (2, 3):
        assert any("output_ratio" in c[6] for c in rows if c[0] == nd)
        assert any(isinstance(c[6].get("output_size"), int) for c in rows if c[0] == nd)
    sizes = [np.atleast_1d(c[6].get("output_size", 2)) for c in rows]
    assert any(1 in s for s in sizes)


def test_nan_and_ties_follow_pytorch():
    """PyTorch's kernels keep the first of equal maxima and the last NaN of a window."""
    x = np.array([[[[np.nan, 1.0, np.nan, 2.0, 2.0, 0.0, 2.0, 2.0]]]], np.float32)
    samples = np.full((1, 1, 2), 0.25, np.float32)
    expected_y, expected_i, _ = _torch_call(2, x, (1, 4), {"output_size": (1, 2)}, samples, None)
    y, i = jtorch.fractional_max_pool2d(x, (1, 4), (1, 2), None, True, samples)
    assert expected_i.tolist() == [[[[2, 4]]]]
    np.testing.assert_array_equal(np.asarray(y), expected_y.numpy())
    np.testing.assert_array_equal(np.asarray(i), expected_i)
    g = jax.grad(
        lambda a: jnp.sum(jtorch.fractional_max_pool2d(a, (1, 4), (1, 2), None, False, samples))
    )(jnp.asarray(x))
    assert np.asarray(g).tolist() == [[[[0, 0, 1, 0, 1, 0, 0, 0]]]]


def _core_case(seed):
    rng = np.random.default_rng(1000 + seed)
    nd = 1 + seed % 3
    slack = 0 if nd == 3 else 1  # PyTorch's 3-D size check is strict
    spatial = tuple(int(v) for v in rng.integers(3, 10, nd))
    kernel = tuple(int(rng.integers(1, min(3, length - 1) + 1)) for length in spatial)
    out = tuple(int(rng.integers(1, length - k + slack + 1)) for length, k in zip(spatial, kernel))
    x = _sample(rng, (2, 3, *spatial), "float32", KINDS[seed % 4])
    samples = rng.random((2, 3, nd)).astype(np.float32)
    return nd, x, kernel, out, samples, rng


@functools.partial(jax.jit, static_argnums=(0, 1))
def _vjp(pool, data_format, x, samples, cotangent):
    (y, i), vjp = jax.vjp(
        lambda a: pool(a, samples=samples, data_format=data_format, return_indices=True), x
    )
    return y, i, vjp((cotangent, np.zeros(i.shape, jax.dtypes.float0)))[0]


@pytest.mark.parametrize("seed", range(12))
def test_core_op_in_both_layouts_matches_pytorch(seed):
    """The core op, 1-3 spatial axes, its samples in the order of the axes: NCX gives
    PyTorch's values, indices and gradients, and NXC the same."""
    nd, x, kernel, out, samples, rng = _core_case(seed)
    # PyTorch's form: 1-D as 2-D of height 1; 2-D samples hold (w, h).
    if nd == 1:
        xt, kt, ot = x[:, :, None], (1, *kernel), (1, *out)
        st = np.stack([samples[..., 0], samples[..., 0]], -1)
    else:
        xt, kt, ot, st = x, kernel, out, (samples[..., ::-1] if nd == 2 else samples)
    cotangent = rng.standard_normal((2, 3, *out)).astype(np.float32)
    ct = cotangent[:, :, None] if nd == 1 else cotangent
    y_t, i_t, g_t = _torch_call(max(nd, 2), xt, kt, {"output_size": ot}, st.copy(), ct)
    shape = (2, 3, *out)
    pool = functools.partial(jaxpool.fractional_max_pool, kernel=kernel, output_size=out)
    for fmt in ("NCX", "NXC"):
        got = _vjp(pool, fmt, cases.to_layout(x, fmt), samples, cases.to_layout(cotangent, fmt))
        y, i, g = (cases.from_layout(a, fmt) for a in got)
        np.testing.assert_array_equal(np.asarray(y), y_t.numpy().reshape(shape))
        np.testing.assert_array_equal(np.asarray(i), i_t.reshape(shape))
        np.testing.assert_allclose(np.asarray(g), g_t.reshape(x.shape), rtol=1e-6, atol=1e-6)


def test_jit_vmap_and_jvp():
    """jit equals eager; vmap over inputs and samples equals a loop; the tangent is the input
    tangent at the indices; the samples get a zero gradient."""
    nd, x, kernel, out, samples, _ = _core_case(4)
    pool = functools.partial(jaxpool.fractional_max_pool, kernel=kernel, output_size=out)
    with_indices = functools.partial(pool, return_indices=True)
    y, i = with_indices(x, samples=samples)
    y_jit, i_jit = jax.jit(lambda a, s: with_indices(a, samples=s))(x, samples)
    np.testing.assert_array_equal(np.asarray(y_jit), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(i_jit), np.asarray(i))
    xs = np.stack([x, x[::-1] * 2.0, -x])
    ss = np.stack([samples, samples[::-1], 1.0 - samples - 1e-3]).astype(np.float32)
    y_v, i_v = jax.vmap(lambda a, s: with_indices(a, samples=s))(xs, ss)
    for k in range(3):
        y_k, i_k = with_indices(xs[k], samples=ss[k])
        np.testing.assert_array_equal(np.asarray(y_v[k]), np.asarray(y_k))
        np.testing.assert_array_equal(np.asarray(i_v[k]), np.asarray(i_k))
    x_dot = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    _, y_dot = jax.jvp(lambda a: pool(a, samples=samples), (x,), (x_dot,))
    planes = x_dot.reshape(2, 3, -1)
    expected = np.take_along_axis(planes, np.asarray(i).reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(np.asarray(y_dot).reshape(2, 3, -1), expected)
    g_s = jax.grad(lambda s: jnp.sum(pool(x, samples=s)))(jnp.asarray(samples))
    assert not np.any(np.asarray(g_s))


@pytest.mark.parametrize("nd", [2, 3])
def test_key_draws_samples_as_pytorch_reads_them(nd):
    """Without ``_random_samples`` the samples are ``jax.random.uniform(key, (N, C, nd))``,
    read as PyTorch reads ``_random_samples``; other keys give other windows."""
    rng = np.random.default_rng(nd)
    spatial = (11, 12) if nd == 2 else (9, 10, 11)
    x = rng.permutation(2 * 3 * int(np.prod(spatial))).reshape(2, 3, *spatial).astype(np.float32)
    fn = jtorch.fractional_max_pool2d if nd == 2 else jtorch.fractional_max_pool3d
    op = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    key = jax.random.key(7)
    y, i = fn(x, 2, output_ratio=0.5, return_indices=True, key=key)
    out = tuple(length // 2 for length in spatial)
    assert y.shape == i.shape == (2, 3, *out)
    samples = np.asarray(jax.random.uniform(key, (2, 3, nd), jnp.float32))
    expected, expected_i = op(
        torch.tensor(x), 2, output_ratio=(0.5,) * nd, return_indices=True,
        _random_samples=torch.tensor(samples),
    )  # fmt: skip
    np.testing.assert_array_equal(np.asarray(y), expected.numpy())
    np.testing.assert_array_equal(np.asarray(i), expected_i.numpy())
    others = [fn(x, 2, out, return_indices=True, key=jax.random.key(k))[1] for k in (8, 9)]
    assert all(np.any(np.asarray(o) != np.asarray(i)) for o in others)
    unbatched = fn(x[0], 2, out, key=key)
    samples_1 = np.asarray(jax.random.uniform(key, (1, 3, nd), jnp.float32))
    expected_1 = op(torch.tensor(x[0]), 2, out, _random_samples=torch.tensor(samples_1))
    np.testing.assert_array_equal(np.asarray(unbatched), expected_1.numpy())
    under_jit = jax.jit(lambda a, k: fn(a, 2, out, key=k))(x, key)
    np.testing.assert_array_equal(np.asarray(under_jit), np.asarray(y))


@pytest.mark.parametrize("lead", [(), (2, 3)], ids=["no batch axis", "two batch axes"])
def test_batch_axes_are_the_merged_batch(lead):
    """In NXC with a tuple kernel, no batch axis or several: PyTorch's op on the input with
    its batch axes merged into one (channels first), values and indices."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((*lead, 9, 10, 4)).astype(np.float32)
    samples = rng.uniform(size=(*lead, 4, 2)).astype(np.float32)
    y, i = jaxpool.fractional_max_pool(
        x, (2, 3), (4, 5), samples, data_format="NXC", return_indices=True
    )
    merged = torch.tensor(np.moveaxis(x.reshape(-1, 9, 10, 4), -1, 1))
    torch_samples = torch.tensor(samples.reshape(-1, 4, 2)[..., ::-1].copy())  # (w, h)
    expected, expected_i = F.fractional_max_pool2d(
        merged, (2, 3), output_size=(4, 5), return_indices=True, _random_samples=torch_samples
    )
    assert y.shape == i.shape == (*lead, 4, 5, 4)
    for got, want in ((y, expected), (i, expected_i)):
        got = np.moveaxis(np.asarray(got), -1, -3).reshape(want.shape)
        np.testing.assert_array_equal(got, want.numpy())
