"""adaptive_max_pool and adaptive_avg_pool against the OpenVINO runtime (AdaptiveMaxPool-8,
AdaptiveAvgPool-8), PyTorch and a NumPy loop reference for NaN and -inf."""

import functools
import itertools

import chex
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import oracle
import pytest
import torch
from jax.test_util import check_grads

import jaxpool
from jaxpool._src import window as window_lib

torch.set_num_threads(1)

DTYPES = ("float16", "bfloat16", "float32", "int8", "uint8", "int32")


def _sample(rng, dtype, shape, ties=False):
    if ties:  # few distinct values: many ties
        return rng.integers(0, 3, shape).astype(ml_dtypes.bfloat16 if dtype == "bfloat16"
                                                else dtype)
    if dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dtype == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if dtype == "int32":
        return rng.integers(-10_000, 10_000, shape).astype(np.int32)
    values = rng.standard_normal(shape).astype(np.float32)
    return values.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _config(seed):
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    top = (24, 11, 6)[nd - 1]
    spatial = [int(v) for v in rng.integers(1, top + 1, nd)]
    output_size = []
    for length in spatial:
        kind = int(rng.integers(6))
        if kind == 0:
            output_size.append(None)
        elif kind == 1:
            output_size.append(1)
        elif kind == 2:  # larger than the input
            output_size.append(length + int(rng.integers(1, 4)))
        else:
            output_size.append(int(rng.integers(1, length + 1)))
    return dict(
        shape=(int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial),
        output_size=output_size,
        dtype=DTYPES[seed % len(DTYPES)],
        data_format=("NCX", "NXC")[int(rng.integers(2))],
        ties=bool(rng.integers(4) == 0),
    )


def _runtime_size(cfg):
    sizes = zip(cfg["shape"][2:], cfg["output_size"], strict=True)
    return [s if o is None else o for s, o in sizes]


def _call(fn, x, cfg, **kwargs):
    """Runs ``fn`` on NCX ``x`` in the config's layout and returns NCX NumPy outputs."""
    nxc = cfg["data_format"] == "NXC"
    out = fn(oracle.to_nxc(x) if nxc else x, cfg["output_size"],
             data_format=cfg["data_format"], **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    outs = tuple(oracle.to_ncx(np.asarray(o)) if nxc else np.asarray(o) for o in outs)
    return outs if isinstance(out, tuple) else outs[0]


@pytest.mark.parametrize("seed", range(100))
def test_max_matches_runtime(seed):
    cfg = _config(seed)
    x = _sample(np.random.default_rng(seed), cfg["dtype"], cfg["shape"], cfg["ties"])
    x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
    expected, expected_i = oracle.adaptive_max_pool(x_ov, _runtime_size(cfg))
    y, i = _call(jaxpool.adaptive_max_pool, x, cfg, return_indices=True)
    assert y.dtype == x.dtype and i.dtype == np.int32
    np.testing.assert_array_equal(y.astype(expected.dtype), expected)
    np.testing.assert_array_equal(i, expected_i)
    if seed % 4 == 0:  # the values-only program
        np.testing.assert_array_equal(_call(jaxpool.adaptive_max_pool, x, cfg), y)


@pytest.mark.parametrize("seed", range(100, 200))
def test_avg_matches_runtime(seed):
    cfg = _config(seed)
    x = _sample(np.random.default_rng(seed), cfg["dtype"], cfg["shape"], cfg["ties"])
    x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
    if cfg["dtype"] in ("int8", "uint8", "int32") and set(_runtime_size(cfg)) == {1}:
        # The runtime's global integer average truncates (see below); its AvgPool rounds.
        expected = oracle.avg_pool(x_ov, list(x.shape[2:]))
    else:
        expected = oracle.adaptive_avg_pool(x_ov, _runtime_size(cfg))
    y = _call(jaxpool.adaptive_avg_pool, x, cfg)
    assert y.dtype == x.dtype
    if cfg["dtype"] in ("int8", "uint8", "int32"):
        np.testing.assert_array_equal(y, expected)
    else:
        tol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 2e-6}[cfg["dtype"]]
        np.testing.assert_allclose(y.astype(np.float32), expected.astype(np.float32),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_integer_global_average_rounds(dtype):
    """To output size 1 the CPU runtime's integer AdaptiveAvgPool truncates toward zero and
    sums 8-bit inputs in their own type, saturating; ours rounds half to even like every other
    output size of the runtime and its AvgPool."""
    x = np.array([[[2, 3, 3, 3, 100, 100, 100, 100]]]).astype(dtype)
    for size in ([1], [2]):
        expected = oracle.avg_pool(x, 8 // size[0])
        np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x, size), expected)
    np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x[..., :4], 1),
                                  oracle.adaptive_avg_pool(x[..., :4], [2])[..., 1:])
    assert oracle.adaptive_avg_pool(x[..., :4], [1])[0, 0, 0] == 2  # 2.75 truncated


@pytest.mark.parametrize(
    "shape,output_size",
    [((2, 3, 50), [3]), ((1, 2, 40, 7), [1, 3]), ((1, 1, 9, 30, 4), [2, 2, 4]),
     ((2, 2, 21, 22), [2, 3])],
)
def test_wide_bins(shape, output_size):
    """Bins wider than the fused tap chain handles reduce a gathered window axis."""
    rng = np.random.default_rng(len(shape))
    for ties in (False, True):
        x = _sample(rng, "float32", shape, ties)
        expected, expected_i = oracle.adaptive_max_pool(x, output_size)
        y, i = jaxpool.adaptive_max_pool(x, output_size, return_indices=True)
        np.testing.assert_array_equal(y, expected)
        np.testing.assert_array_equal(i, expected_i)
        np.testing.assert_allclose(jaxpool.adaptive_avg_pool(x, output_size),
                                   oracle.adaptive_avg_pool(x, output_size), rtol=2e-6,
                                   atol=1e-6)


def test_float64_and_int64_indices(x64):
    rng = np.random.default_rng(11)
    for seed in (2, 8, 14, 20):  # float32 configurations
        cfg = _config(seed)
        x = rng.standard_normal(cfg["shape"])
        expected, expected_i = oracle.adaptive_max_pool(x.astype(np.float32), _runtime_size(cfg))
        for index_element_type in (None, "i64", jnp.int64):
            y, i = jaxpool.adaptive_max_pool(x, cfg["output_size"], return_indices=True,
                                             index_element_type=index_element_type)
            assert y.dtype == jnp.float64 and i.dtype == jnp.int64
            np.testing.assert_array_equal(i, expected_i)
        np.testing.assert_array_equal(y.astype(np.float32), expected)
        y = jaxpool.adaptive_avg_pool(x, cfg["output_size"])
        assert y.dtype == jnp.float64
        np.testing.assert_allclose(y, oracle.adaptive_avg_pool(x.astype(np.float32),
                                                               _runtime_size(cfg)),
                                   rtol=1e-5, atol=1e-6)


def _reference_max(x, output_size):
    """NumPy loop: the first NaN of a bin, else its first maximum in row-major order."""
    spatial = x.shape[2:]
    bins = [window_lib.adaptive_bins(length, out)
            for length, out in zip(spatial, output_size, strict=True)]
    y = np.empty(x.shape[:2] + tuple(output_size), x.dtype)
    index = np.empty(y.shape, np.int64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(s) for s in output_size)):
            box = tuple(slice(b[0][j], b[1][j]) for b, j in zip(bins, o, strict=True))
            grid = np.arange(np.prod(spatial)).reshape(spatial)[box].ravel()
            values = x[n, c][box].ravel()
            k = int(np.argmax(np.isnan(values))) if np.isnan(values).any() else int(
                np.argmax(values))
            y[(n, c, *o)], index[(n, c, *o)] = values[k], grid[k]
    return y, index


def test_nan_and_inf():
    """NaN is the maximum with the first NaN's index (the runtime skips NaN); a bin of -inf
    gives -inf and its first element."""
    rng = np.random.default_rng(4)
    for shape, output_size in (((2, 2, 9, 7), (4, 3)), ((1, 2, 30), (2,)),
                               ((1, 2, 50, 50), (16, 16))):
        x = rng.standard_normal(shape).astype(np.float32)
        x[rng.random(shape) < 0.1] = np.nan
        x[..., :3] = -np.inf
        expected, expected_i = _reference_max(x, output_size)
        y, i = jaxpool.adaptive_max_pool(x, output_size, return_indices=True)
        np.testing.assert_array_equal(y, expected)
        np.testing.assert_array_equal(i, expected_i)
        np.testing.assert_array_equal(jaxpool.adaptive_max_pool(x, output_size), expected)
        _, vjp = jax.vjp(lambda v, s=output_size: jaxpool.adaptive_max_pool(v, s), x)
        (grad,) = vjp(jnp.ones(expected.shape, jnp.float32))
        counts = np.zeros((*shape[:2], np.prod(shape[2:])), np.float32)
        for n, c in np.ndindex(*shape[:2]):
            np.add.at(counts[n, c], expected_i[n, c].ravel(), 1.0)
        np.testing.assert_array_equal(grad, counts.reshape(shape))


BIT_CASES = [
    ((2, 3, 8, 12), (4, 3)),  # one regular run per axis
    ((2, 3, 7, 7), (1, 1)),  # global
    ((2, 3, 50), (16,)),  # several runs along one axis
    ((2, 3, 11, 10), (4, 3)),  # several runs along two axes
    ((1, 2, 50, 50), (16, 16)),  # two periods of one run of 8 bins per axis: one region
    ((1, 2, 17, 17, 17), (8, 8, 8)),  # one run of 8 bins per axis, in 3-D
    ((1, 2, 4, 6, 5), (2, 3, 2)),
]


@pytest.mark.parametrize("shape, output_size", BIT_CASES)
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_keeps_the_first_maximum_bit_for_bit(shape, output_size, data_format):
    """Of tied signed zeros the first is the maximum, with its sign; NaNs keep their payloads."""
    rng = np.random.default_rng(7)
    bits = np.where(rng.random(shape) < 0.5, 0x80000000, 0).astype(np.uint32)  # -0.0 or 0.0
    nan = rng.random(shape) < 0.05
    bits[nan] = 0x7FC00000 + rng.integers(1, 1 << 20, int(nan.sum())).astype(np.uint32)
    x = bits.view(np.float32)
    x[rng.random(shape) < 0.1] = -1.0
    expected, expected_i = _reference_max(x, output_size)
    cfg = dict(data_format=data_format, output_size=output_size)
    y, i = _call(lambda *a, **k: jaxpool.adaptive_max_pool(*a, return_indices=True, **k), x, cfg)
    np.testing.assert_array_equal(y.view(np.uint32), expected.view(np.uint32))
    np.testing.assert_array_equal(i, expected_i)
    y_only = _call(jaxpool.adaptive_max_pool, x, cfg)
    np.testing.assert_array_equal(np.isnan(y_only), np.isnan(expected))
    np.testing.assert_array_equal(y_only[y_only == 0], expected[y_only == 0])


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_matches_torch_with_grads(nd):
    rng = np.random.default_rng(nd)
    shape = (2, 3, *[13, 9, 5][:nd])
    output_size = [5, 4, 3][:nd]
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64) / 7  # tie-free
    fmax = getattr(torch.nn.functional, f"adaptive_max_pool{nd}d")
    favg = getattr(torch.nn.functional, f"adaptive_avg_pool{nd}d")
    for torch_fn, ours in ((fmax, jaxpool.adaptive_max_pool), (favg, jaxpool.adaptive_avg_pool)):
        xt = torch.tensor(x, requires_grad=True)
        out = torch_fn(xt, output_size) if torch_fn is favg else torch_fn(
            xt, output_size, return_indices=True)
        yt = out if torch_fn is favg else out[0]
        g = rng.standard_normal(tuple(yt.shape))
        yt.backward(torch.tensor(g))
        y, vjp = jax.vjp(lambda v, f=ours: f(v, output_size), x.astype(np.float32))
        np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(vjp(jnp.asarray(g, jnp.float32))[0], xt.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)
        if torch_fn is fmax:
            _, i = jaxpool.adaptive_max_pool(x.astype(np.float32), output_size,
                                             return_indices=True)
            np.testing.assert_array_equal(i, out[1].numpy())


def test_grads(x64):
    """Order 2 in both modes: a narrow-bin axis, a wide-bin axis (11 -> 1) and output larger
    than input."""
    rng = np.random.default_rng(0)
    x = rng.permutation(2 * 3 * 5 * 11).reshape(2, 3, 5, 11) / 13.0  # tie-free
    check_grads(lambda v: jaxpool.adaptive_max_pool(v, (7, 1))
                + jaxpool.adaptive_avg_pool(v, (7, 1)), (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("shape, data_format", [
    ((2, 3, 4, 5), "NCX"), ((2, 4, 5, 3), "NXC"), ((3, 2, 7), "NCX"), ((2, 3, 2, 3, 4), "NXC")])
def test_global_max_derivatives_read_the_argmax(shape, data_format, x64):
    """One bin per plane: the gradient places each cotangent at the argmax (a NaN, or the
    first of tied maxima, included) and the tangent reads ``x_dot`` there only."""
    rng = np.random.default_rng(len(shape))
    x = rng.integers(-3, 3, shape).astype(np.float32)  # many ties
    x.reshape(-1)[rng.choice(x.size, 3, replace=False)] = np.nan
    output_size = (1,) * (len(shape) - 2)
    f = functools.partial(jaxpool.adaptive_max_pool, output_size=output_size,
                          data_format=data_format)
    y, i = f(x, return_indices=True)
    planes, positions = _planes(x, data_format), _planes(np.asarray(i), data_format)[..., 0]
    ct = rng.standard_normal(y.shape).astype(np.float32)
    expected = np.zeros_like(planes)
    np.put_along_axis(expected, positions[..., None], _planes(ct, data_format), axis=2)
    grad = jax.grad(lambda v: jnp.sum(f(v) * ct))(x)
    np.testing.assert_array_equal(_planes(np.asarray(grad), data_format), expected)

    x_dot = rng.standard_normal(shape).astype(np.float32)
    x_dot.reshape(-1)[rng.choice(x.size, 4, replace=False)] = np.inf
    _, y_dot = jax.jvp(f, (x,), (x_dot,))
    read = np.take_along_axis(_planes(x_dot, data_format), positions[..., None], axis=2)
    np.testing.assert_array_equal(_planes(np.asarray(y_dot), data_format), read)

    tie_free = rng.permutation(x.size).reshape(shape) / 7.0
    check_grads(f, (tie_free,), order=2, modes=("fwd", "rev"))


def _planes(a, data_format):
    """``a`` as ``(N, C, spatial elements)`` planes."""
    a = np.asarray(a)
    if data_format == "NXC":
        a = np.moveaxis(a, -1, 1)
    return a.reshape(a.shape[0], a.shape[1], -1)


def test_output_size_none_and_identity(jit_mode):
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 1, 5)).astype(np.float32)
    y, i = jit_mode(lambda v: jaxpool.adaptive_max_pool(v, (None, None, 5),
                                                        return_indices=True), x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(i, np.broadcast_to(np.arange(20).reshape(4, 1, 5), x.shape))
    np.testing.assert_array_equal(jit_mode(lambda v: jaxpool.adaptive_avg_pool(v, (4, 1, 5)), x),
                                  x)
    y, i = jaxpool.adaptive_max_pool(x, (None, 1, 2), return_indices=True)
    expected, expected_i = oracle.adaptive_max_pool(x, (4, 1, 2))
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(i, expected_i)


@hypothesis.settings(max_examples=6, deadline=None, derandomize=True, database=None)
@hypothesis.given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
                  data=st.data())
def test_properties(shape, data):
    """Output size = input size is the identity; NXC equals NCX; max indices name y in x."""
    x = np.random.default_rng(len(shape)).standard_normal((2, 2, *shape)).astype(np.float32)
    output_size = data.draw(st.lists(st.integers(1, 7), min_size=len(shape),
                                     max_size=len(shape)))
    for fn in (jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool):
        np.testing.assert_array_equal(fn(x, shape), x)
        ncx = fn(x, output_size)
        nxc = fn(oracle.to_nxc(x), output_size, data_format="NXC")
        np.testing.assert_array_equal(oracle.to_ncx(np.asarray(nxc)), ncx)
    y, i = jaxpool.adaptive_max_pool(x, output_size, return_indices=True)
    flat = x.reshape(2, 2, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, np.asarray(i).reshape(2, 2, -1), 2),
                                  np.asarray(y).reshape(2, 2, -1))


def test_transforms_and_no_retrace():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 2, 9, 7)), jnp.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(v):
        return jaxpool.adaptive_max_pool(v, (4, 3)), jaxpool.adaptive_avg_pool(v, (4, 3))

    batched = jax.vmap(f)(x)
    for b, single in zip(batched, f(x[1]), strict=True):
        np.testing.assert_allclose(b[1], single, rtol=1e-6)
    f(x[0] + 1.0)
    (_, avg), (_, avg_dot) = jax.jvp(f, (x[0],), (jnp.ones_like(x[0]),))
    np.testing.assert_allclose(avg_dot, jnp.ones_like(avg), rtol=1e-6)


ERRORS = [
    (dict(x=np.ones((2, 3), np.float32)), ValueError, "`x` must have rank"),
    (dict(x=np.ones((1, 1, 4), bool)), TypeError, "`x` must have a floating"),
    (dict(output_size=0), ValueError, r"`output_size` \(=0\) entries must be at least 1"),
    (dict(output_size=[2, 2]), ValueError, r"`output_size` \(=\[2, 2\]\) must have one entry"),
    (dict(output_size="2"), TypeError, "`output_size` must be an int or a sequence"),
    (dict(output_size=2.5), TypeError, "`output_size` must be an int"),
    (dict(data_format="NWC"), ValueError, r"`data_format` \(='NWC'\)"),
]


@pytest.mark.parametrize("kwargs,error,match", ERRORS)
@pytest.mark.parametrize("fn", [jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool])
def test_errors(fn, kwargs, error, match):
    kwargs = dict(kwargs)
    x = kwargs.pop("x", np.ones((1, 1, 4), np.float32))
    output_size = kwargs.pop("output_size", 2)
    with pytest.raises(error, match=match):
        fn(x, output_size, **kwargs)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [(dict(return_indices=1), TypeError, "`return_indices` must be a bool, got 1"),
     (dict(return_indices=True, index_element_type="i16"), ValueError,
      r"`index_element_type` \(='i16'\)"),
     (dict(return_indices=True, index_element_type="i64"), ValueError, "needs 64-bit")],
)
def test_max_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        jaxpool.adaptive_max_pool(np.ones((1, 1, 4), np.float32), 2, **kwargs)


def test_traced_output_size():
    with pytest.raises(TypeError, match="`output_size` must be static"):
        jax.jit(lambda v, s: jaxpool.adaptive_avg_pool(v, s))(jnp.ones((1, 1, 4)), 2)
