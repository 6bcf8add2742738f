"""jaxpool.torch's torch.nn.functional pooling functions against PyTorch (CPU) itself.

Random cases per function: shapes, kernels, strides, paddings, dilations, both kinds of
``ceil_mode`` window, ``count_include_pad``, ``divisor_override``, ties, ``-inf`` and a NaN,
batched and unbatched inputs; values, indices and gradients (a vjp with a random cotangent
against ``backward``) must equal PyTorch's.  The max functions also meet windows of several
NaNs, ``inf`` and ``-inf`` (PyTorch's last NaN), through both programs.  Expected values
come from PyTorch only.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import jaxpool
from jaxpool import torch as jtorch

torch.set_num_threads(1)

FAMILIES = ("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool")
NAMES = [f"{family}{nd}d" for family in (*FAMILIES, "max_unpool") for nd in (1, 2, 3)]
CASES = 6  # random cases per function
MAX_NAMES = [n for n in NAMES if "max_pool" in n and "unpool" not in n]
NAN_CASES = 2  # random cases of several NaNs per window, per max function and program


def _torch(name, *args, **kwargs):
    return getattr(F, name)(*args, **kwargs)


def _ours(name):
    return getattr(jtorch, name)


def _input(rng, shape, dtype, special, nans=False):
    """Small integers (so that windows tie) or normal values; ``special`` adds ``-inf`` runs
    and one NaN (so that no window holds two), ``nans`` a third of NaNs and some ``inf``
    (windows of several NaNs, and of ``inf`` ties)."""
    if rng.random() < 0.5:
        x = rng.integers(-3, 4, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    if special and x.size:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, max(1, x.size // 5))] = -np.inf
        if nans:
            flat[rng.random(x.size) < 0.1] = np.inf
            flat[rng.random(x.size) < 0.3] = np.nan
        elif rng.random() < 0.5:
            flat[rng.integers(0, x.size)] = np.nan
    return x


def _shape(rng, nd, least):
    """A batched or unbatched NCX shape whose spatial sizes are at least ``least``."""
    spatial = [int(rng.integers(lo, lo + 4)) for lo in least]
    channels = [int(rng.integers(1, 3))]
    batch = [int(rng.integers(1, 3))] if rng.random() < 0.6 else []
    return tuple(batch + channels + spatial)


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _per_dim(rng, nd, lo, hi):
    """An int, or a tuple of one int per spatial axis."""
    if rng.random() < 0.5:
        return int(rng.integers(lo, hi + 1))
    return tuple(int(v) for v in rng.integers(lo, hi + 1, nd))


def _axes(value, nd):
    return value if isinstance(value, tuple) else (value,) * nd


def case(name, seed, nans=False):
    """``(x, kwargs)`` for the ``seed``-th random case of ``name`` (with ``nans``, of
    several NaNs per window, see :func:`_input`)."""
    rng = np.random.default_rng([NAMES.index(name), seed, *([1] if nans else [])])
    nd = int(name[-2])
    family = name[:-2]
    kwargs: dict = {}
    if family in ("max_pool", "avg_pool", "lp_pool", "max_unpool"):
        # PyTorch's lp_pool1d multiplies by its kernel_size: an int.
        kernel = _per_dim(rng, nd, 1 + nans, 3) if name != "lp_pool1d" else int(rng.integers(1, 4))
        kwargs["kernel_size"] = kernel
        kwargs["stride"] = _pick(rng, [None, _per_dim(rng, nd, 1, 3)])
        if family != "lp_pool":
            kwargs["padding"] = tuple(int(rng.integers(0, k // 2 + 1)) for k in _axes(kernel, nd))
        if family != "max_unpool":
            kwargs["ceil_mode"] = bool(rng.random() < 0.5)
        dilation = 1
        if family == "max_pool":
            dilation = kwargs["dilation"] = _per_dim(rng, nd, 1, 2)
            kwargs["return_indices"] = bool(rng.random() < 0.7)
        least = [(k - 1) * d + 1 for k, d in zip(_axes(kernel, nd), _axes(dilation, nd))]
    else:
        least = [3 if nans else 1] * nd
        # PyTorch's 1d functions take no None.
        size = [_pick(rng, [None, int(rng.integers(1, 6))]) if nd > 1 else 3 for _ in range(nd)]
        kwargs["output_size"] = _pick(rng, [int(rng.integers(1, 5)), tuple(size)])
        if family == "adaptive_max_pool":
            kwargs["return_indices"] = bool(rng.random() < 0.7)
    if family == "avg_pool":
        kwargs["count_include_pad"] = bool(rng.random() < 0.5)
        if nd > 1:
            kwargs["divisor_override"] = _pick(rng, [None, int(rng.integers(1, 6))])
    if family == "lp_pool":
        kwargs = {"norm_type": _pick(rng, [1, 2, 3, 1.5, 2.0]), **kwargs}
    shape = _shape(rng, nd, [lo + 2 * nans for lo in least])
    special = family in ("max_pool", "adaptive_max_pool")
    x = _input(rng, shape, np.float64, special, nans)
    if family == "lp_pool" and rng.random() < 0.5:
        x = np.abs(x)
    if family == "lp_pool" and rng.random() < 0.3:
        x[..., :2] = 0  # windows whose sum is 0: PyTorch's gradient is NaN there
    return x, kwargs


def _unpool_inputs(name, x, kwargs, rng):
    """The pooled values and indices of ``x`` (by PyTorch's ``max_pool``), and an
    ``output_size`` that PyTorch accepts; a third of the cases unpool random indices, which
    repeat."""
    nd = int(name[-2])
    pool = {k: kwargs[k] for k in ("kernel_size", "stride", "padding")}
    y, i = _torch(f"max_pool{nd}d", torch.tensor(x), **pool, return_indices=True)
    default = [
        (o - 1) * s - 2 * p + k
        for o, s, p, k in zip(
            y.shape[-nd:],
            _axes(pool["stride"] or pool["kernel_size"], nd),
            _axes(pool["padding"], nd),
            _axes(pool["kernel_size"], nd),
        )
    ]
    # The default size may drop the input's last elements, and the indices that name them.
    choice = rng.integers(3) if default == list(x.shape[-nd:]) else rng.integers(1, 3)
    if choice == 1:
        kwargs = {**kwargs, "output_size": x.shape[-nd:]}
    elif choice == 2:
        kwargs = {**kwargs, "output_size": (1, 1, *x.shape[-nd:])}
    if rng.random() < 0.3:
        size = _torch(name, y, i, **kwargs).shape[-nd:]
        i = torch.tensor(rng.integers(0, int(np.prod(size)), tuple(i.shape)))
    return y.numpy(), i.numpy(), kwargs


def compare(name, seed, nans=False):
    """Case ``seed`` of ``name``: its values, indices and gradient equal PyTorch's."""
    x, kwargs = case(name, seed, nans)
    rng = np.random.default_rng([99, seed])
    if name.startswith("max_unpool"):
        x, i, kwargs = _unpool_inputs(name, x, kwargs, rng)
        xt = torch.tensor(x, requires_grad=True)
        expected = _torch(name, xt, torch.tensor(i), **kwargs)

        def ours(v):
            return _ours(name)(v, jnp.asarray(i), **kwargs), None

    else:
        xt = torch.tensor(x, requires_grad=True)
        expected = _torch(name, xt, **kwargs)

        def ours(v):
            out = _ours(name)(v, **kwargs)
            return out if isinstance(out, tuple) else (out, None)

    expected, expected_i = expected if isinstance(expected, tuple) else (expected, None)
    e = expected.detach().numpy()
    g = rng.standard_normal(e.shape)

    def run(v, g):  # one compilation per case: the values, the indices and the gradient
        got, vjp, got_i = jax.vjp(ours, v, has_aux=True)
        return got, got_i, vjp(g)[0]

    got, got_i, grad = jax.jit(run)(jnp.asarray(x), jnp.asarray(g))
    assert got.shape == e.shape and got.dtype == jnp.float64, (name, seed, kwargs)
    np.testing.assert_allclose(got, e, rtol=1e-12, atol=1e-12, err_msg=f"{name} {kwargs}")
    if expected_i is not None:
        assert got_i.dtype == jnp.int64
        np.testing.assert_array_equal(got_i, expected_i.numpy(), err_msg=f"{name} {kwargs}")
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(
        grad, xt.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=f"{name} gradient {kwargs}"
    )


@pytest.mark.parametrize("name", NAMES)
def test_random_cases_match_torch(name, x64):
    for seed in range(CASES):
        compare(name, seed)


HALF = [
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 4))),
    ("lp_pool2d", dict(norm_type=2, kernel_size=2, ceil_mode=True)),
]
# (function, input dtype, keyword arguments on a fixed input; None: its first 4 random cases).
DTYPE_CASES = [
    # Without x64: float32 values within rounding, int32 indices equal to PyTorch's.
    *((name, "float32", None) for name in ("max_pool2d", "adaptive_max_pool3d", "max_pool1d")),
    *(("max_pool2d", t, HALF[0][1]) for t in ("int8", "uint8", "int32")),
    # PyTorch's CPU average takes int64 (only) and divides its sums toward zero.
    *((f"avg_pool{nd}d", "int64", None) for nd in (1, 2, 3)),
    *((name, t, kwargs) for t in ("float16", "bfloat16") for name, kwargs in HALF),
]


@pytest.mark.parametrize("name,dtype,kwargs", DTYPE_CASES)
def test_dtypes_match_torch(name, dtype, kwargs):
    """The input's dtype kept, the values (16-bit: within their rounding) and indices equal."""
    indices = {"return_indices": True} if "max" in name else {}
    with jax.enable_x64(dtype == "int64"):
        for seed in range(1 if kwargs else 4):
            x, random_kwargs = case(name, seed)
            rng = np.random.default_rng(seed)
            x = rng.standard_normal((2, 3, 7, 6)) if kwargs else x
            if "int" in dtype:
                x = rng.integers(0 if dtype == "uint8" else -50, 50, x.shape)
            x = x.astype(jnp.dtype(dtype))
            given = {**(kwargs or random_kwargs), **indices}
            got = jax.tree.leaves(_ours(name)(jnp.asarray(x), **given))
            xt = torch.tensor(x.astype(np.float32)).to(getattr(torch, dtype))
            expected = [e.float().numpy() for e in jax.tree.leaves(_torch(name, xt, **given))]
            assert [a.dtype for a in got] == [dtype, *(["int32"] if indices else [])]
            if "16" in dtype:
                np.testing.assert_allclose(
                    got[0].astype(np.float32), expected[0], rtol=2e-2, atol=2e-2
                )
            else:
                for a, b in zip(got, expected):
                    np.testing.assert_array_equal(a, b)


def _call(name, x, kwargs):
    if name.startswith("max_unpool"):
        i = jnp.zeros(x.shape, jnp.int32)
        return _ours(name)(x, i, **kwargs)
    return _ours(name)(x, **kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_jit_equals_eager_and_empty_batch(name):
    x, kwargs = case(name, 0)
    x = x.astype(np.float32)
    eager = _call(name, jnp.asarray(x), kwargs)
    jitted = jax.jit(lambda v: _call(name, v, kwargs))(jnp.asarray(x))
    for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted)):
        np.testing.assert_array_equal(a, b)
    nd = int(name[-2])
    empty = np.zeros((0, *x.shape[-nd - 1 :]), np.float32)
    got = _call(name, jnp.asarray(empty), kwargs)
    indices = [torch.zeros(empty.shape, dtype=torch.long)] if name.startswith("max_unpool") else []
    expected = _torch(name, torch.tensor(empty), *indices, **kwargs)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert a.shape == tuple(b.shape)


@pytest.mark.parametrize("name", MAX_NAMES)
def test_several_nans_per_window_match_torch(name, program, x64):
    """Windows of several NaNs, ``inf`` and ``-inf``: the values, PyTorch's last NaN as the
    index, and the gradient there, through both programs."""
    for seed in range(NAN_CASES):
        x, kwargs = case(name, seed, nans=True)
        assert np.isnan(x).sum() > 1
        compare(name, seed, nans=True)


@pytest.mark.parametrize(
    "name,args,first",
    [("max_pool1d", (4, 2, 1), [1, 1, 3, 5]), ("adaptive_max_pool1d", (3,), [1, 3, 5])],
)
def test_nan_index_is_the_last_nan_and_the_native_the_first(name, args, first, program):
    """Windows of several NaNs: the values are NaN, and the index and the gradient are the
    last NaN's, PyTorch's; jaxpool's own ops keep the first NaN's."""
    nan = np.nan
    x = np.asarray([[[1.0, nan, 3.0, nan, 2.0, nan, nan, 0.0]]], np.float32)
    ey, ei = _torch(name, torch.tensor(x), *args, return_indices=True)
    (y, i), vjp = jax.vjp(lambda v: _ours(name)(v, *args, return_indices=True), jnp.asarray(x))
    np.testing.assert_array_equal(y, ey.numpy())
    np.testing.assert_array_equal(i, ei.numpy())
    g = jnp.arange(1.0, 1.0 + y.size, dtype=y.dtype).reshape(y.shape)
    grad = vjp((g, np.zeros(i.shape, jax.dtypes.float0)))[0]
    expected = np.zeros(x.size, np.float32)
    np.add.at(expected, ei.numpy().reshape(-1), np.asarray(g).reshape(-1))
    np.testing.assert_array_equal(grad, expected.reshape(x.shape))
    if name == "max_pool1d":
        native = jaxpool.max_pool(x, *args, args[-1], return_indices=True, axis=2)
    else:
        native = jaxpool.adaptive_max_pool(x, *args, return_indices=True)
    assert native[1].tolist() == [[first]] != i.tolist()


def test_max_unpool_repeated_indices_keep_the_last_and_share_the_gradient():
    y = np.array([[[5.0, 7.0, 6.0]]], np.float32)
    i = np.array([[[1, 1, 2]]])
    unpool = functools.partial(jtorch.max_unpool1d, kernel_size=2, stride=1, output_size=(4,))
    g = np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 1, 4)
    got, vjp = jax.vjp(lambda v: unpool(v, jnp.asarray(i)), jnp.asarray(y))
    yt = torch.tensor(y, requires_grad=True)
    expected = F.max_unpool1d(yt, torch.tensor(i), 2, 1, output_size=(4,))
    expected.backward(torch.tensor(g))
    np.testing.assert_array_equal(got, expected.detach().numpy())
    np.testing.assert_array_equal(vjp(jnp.asarray(g))[0], yt.grad.numpy())


def test_binders_table_lists_every_function():
    assert sorted(jtorch.__all__[:18]) == sorted(NAMES)
    from jaxpool._src.interop import torch_nn

    assert set(torch_nn.BINDERS) == set(NAMES)
    for name in NAMES:
        assert torch_nn.BINDERS[name] is getattr(jtorch, name)


def _parameters(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", NAMES)
def test_signature_is_torchs(name):
    """PyTorch's parameter names, order and defaults: read from PyTorch's Python functions
    (``*_with_indices`` behind the dispatch on ``return_indices``); PyTorch's C++ averages
    have none to read, and are compared with their documented signatures."""
    documented = {
        "avg_pool1d": ["stride", "padding", "ceil_mode", "count_include_pad"],
        "avg_pool2d": ["stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"],
    }
    documented["avg_pool3d"] = documented["avg_pool2d"]
    defaults = {"stride": None, "padding": 0, "ceil_mode": False, "count_include_pad": True}
    ours = _parameters(_ours(name))
    if name in documented:
        expected = [("input", _EMPTY), ("kernel_size", _EMPTY)] + [
            (p, defaults.get(p)) for p in documented[name]
        ]
    elif name == "adaptive_avg_pool1d":
        expected = [("input", _EMPTY), ("output_size", _EMPTY)]
    else:
        with_indices = getattr(F, f"{name}_with_indices", None)
        expected = _parameters(with_indices or getattr(F, name))
    assert ours == expected


_EMPTY = inspect.Parameter.empty


@pytest.mark.parametrize("name", ["max_pool1d", "avg_pool1d"])
def test_ceil_mode_drops_a_window_starting_in_the_padding(name):
    """Length 5, kernel 2, stride 2, padding 1: ceil gives 4 windows, the last would start in
    the end padding and PyTorch drops it."""
    x = np.arange(5.0, dtype=np.float32).reshape(1, 1, 5)
    got = _ours(name)(jnp.asarray(x), 2, 2, 1, ceil_mode=True)
    expected = _torch(name, torch.tensor(x), 2, 2, 1, ceil_mode=True)
    assert got.shape == tuple(expected.shape) == (1, 1, 3)
    np.testing.assert_array_equal(got, expected.numpy())
