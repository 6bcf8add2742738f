"""jaxpool.torch's torch.nn.functional pooling functions against PyTorch (CPU) itself.

Random cases per function: shapes, kernels, strides, paddings, dilations, both kinds of
``ceil_mode`` window, ``count_include_pad``, ``divisor_override``, ties, ``-inf`` and a NaN,
batched and unbatched inputs; values, indices and gradients (a vjp with a random cotangent
against ``backward``) must equal PyTorch's.  The max functions also meet windows of several
NaNs, ``inf`` and ``-inf`` (PyTorch's last NaN), through both programs.  Expected values
come from PyTorch only.
"""

from __future__ import annotations

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
    draw = rng.integers(-3, 4, shape) if rng.random() < 0.5 else rng.standard_normal(shape)
    x = draw.astype(dtype)
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
    # The default size may drop the input's last elements, and the indices that name them.
    default = _torch(name, y, torch.zeros_like(i), **kwargs).shape[-nd:]
    choice = rng.integers(3) if default == x.shape[-nd:] else rng.integers(1, 3)
    if choice == 1:
        kwargs = {**kwargs, "output_size": x.shape[-nd:]}
    elif choice == 2:
        kwargs = {**kwargs, "output_size": (1, 1, *x.shape[-nd:])}
    if rng.random() < 0.3:
        size = _torch(name, y, i, **kwargs).shape[-nd:]
        i = torch.tensor(rng.integers(0, int(np.prod(size)), tuple(i.shape)))
    return y.numpy(), i.numpy(), kwargs


def compare(name, seed, nans=False):
    """Case ``seed`` of ``name``: see :func:`check`."""
    x, kwargs = case(name, seed, nans)
    assert not nans or np.isnan(x).sum() > 1
    rng = np.random.default_rng([99, seed])
    indices = None
    if name.startswith("max_unpool"):
        x, indices, kwargs = _unpool_inputs(name, x, kwargs, rng)
    check(name, x, kwargs, indices, rng)


def check(name, x, kwargs, indices=None, rng=None):
    """``name`` of ``x`` (and of ``indices``, unpooling): its values, indices and gradient
    (of a random cotangent) equal PyTorch's."""
    rng = rng or np.random.default_rng(0)
    unpool = [] if indices is None else [torch.tensor(indices)]
    xt = torch.tensor(x, requires_grad=True)
    expected = _torch(name, xt, *unpool, **kwargs)
    expected, expected_i = expected if isinstance(expected, tuple) else (expected, None)
    e = expected.detach().numpy()
    g = rng.standard_normal(e.shape).astype(x.dtype)

    def ours(v):
        out = _ours(name)(v, *[jnp.asarray(i) for i in unpool], **kwargs)
        return out if isinstance(out, tuple) else (out, None)

    def run(v, g):  # one compilation per case: the values, the indices and the gradient
        got, vjp, got_i = jax.vjp(ours, v, has_aux=True)
        return got, got_i, vjp(g)[0]

    got, got_i, grad = jax.jit(run)(jnp.asarray(x), jnp.asarray(g))
    assert got.shape == e.shape and got.dtype == x.dtype, (name, kwargs)
    np.testing.assert_allclose(got, e, rtol=1e-12, atol=1e-12, err_msg=f"{name} {kwargs}")
    if expected_i is not None:
        assert got_i.dtype == jnp.int64
        np.testing.assert_array_equal(got_i, expected_i.numpy(), err_msg=f"{name} {kwargs}")
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(
        grad, xt.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=f"{name} gradient {kwargs}"
    )
    return got, got_i


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
            tol = 2e-2 if "16" in dtype else 0  # 16-bit: rounding; else equal
            for a, b in zip(got, expected):
                np.testing.assert_allclose(np.asarray(a, np.float32), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", NAMES)
def test_jit_equals_eager_and_empty_batch(name):
    x, kwargs = case(name, 0)
    x = jnp.asarray(x, np.float32)
    unpool = name.startswith("max_unpool")  # of indices 0

    def ours(v):
        return _ours(name)(v, *[jnp.zeros(v.shape, jnp.int32)] * unpool, **kwargs)

    for a, b in zip(jax.tree.leaves(ours(x)), jax.tree.leaves(jax.jit(ours)(x))):
        np.testing.assert_array_equal(a, b)
    empty = np.zeros((0, *x.shape[-int(name[-2]) - 1 :]), np.float32)
    got = ours(jnp.asarray(empty))
    indices = [torch.zeros(empty.shape, dtype=torch.long)] * unpool
    expected = _torch(name, torch.tensor(empty), *indices, **kwargs)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert a.shape == tuple(b.shape)


@pytest.mark.parametrize("name", MAX_NAMES)
def test_several_nans_per_window_match_torch(name, program, x64):
    """Windows of several NaNs, ``inf`` and ``-inf``: the values, PyTorch's last NaN as the
    index, and the gradient there, through both programs."""
    for seed in range(NAN_CASES):
        compare(name, seed, nans=True)


def fixed(name, x, indices=None, first=None, **kwargs):
    """A row of a fixed float32 input; ``first``: the index jaxpool's own op gives."""
    return name, np.asarray(x, np.float32), kwargs, indices, first


NANS = [[[1.0, np.nan, 3.0, np.nan, 2.0, np.nan, np.nan, 0.0]]]
FIXED = [
    # Windows of several NaNs: the values are NaN, and the index and the gradient are the last
    # NaN's, PyTorch's; jaxpool's own ops keep the first NaN's.
    fixed("max_pool1d", NANS, kernel_size=4, stride=2, padding=1, first=[1, 1, 3, 5]),
    fixed("adaptive_max_pool1d", NANS, output_size=3, first=[1, 3, 5]),
    # Repeated indices: the last value is kept, and they share the gradient.
    fixed("max_unpool1d", [[[5, 7, 6]]], [[[1, 1, 2]]], kernel_size=2, stride=1, output_size=(4,)),
    # Length 5, kernel 2, stride 2, padding 1: ceil gives 4 windows, the last would start in
    # the end padding and PyTorch drops it.
    fixed("max_pool1d", [[range(5)]], kernel_size=2, stride=2, padding=1, ceil_mode=True),
    fixed("avg_pool1d", [[range(5)]], kernel_size=2, stride=2, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("name,x,kwargs,indices,first", FIXED)
def test_fixed_cases_match_torch(name, x, kwargs, indices, first, program, x64):
    if "max_pool" in name:
        kwargs = {**kwargs, "return_indices": True}
    got, got_i = check(name, x, kwargs, indices)
    assert got.shape[-1] == 3 or "ceil_mode" not in kwargs
    if first is not None:
        if name == "max_pool1d":
            native = jaxpool.max_pool(x, 4, 2, 1, 1, return_indices=True, axis=2)
        else:
            native = jaxpool.adaptive_max_pool(x, 3, return_indices=True)
        assert native[1].tolist() == [[first]] != got_i.tolist()


def test_binders_table_lists_every_function():
    assert sorted(jtorch.__all__[:18]) == sorted(NAMES)
    from jaxpool._src.interop import torch_nn

    assert torch_nn.BINDERS == {name: getattr(jtorch, name) for name in NAMES}


_EMPTY = inspect.Parameter.empty


def _parameters(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", NAMES)
def test_signature_is_torchs(name):
    """PyTorch's parameter names, order and defaults: read from PyTorch's Python functions
    (``*_with_indices`` behind the dispatch on ``return_indices``); PyTorch's C++ averages
    have none to read, and are compared with their documented signatures."""
    # The averages' documented options and defaults; avg_pool1d has no divisor_override.
    documented = dict(stride=None, padding=0, ceil_mode=False, count_include_pad=True)
    documented.update({} if name == "avg_pool1d" else dict(divisor_override=None))
    if name.startswith("avg_pool"):
        expected = [("input", _EMPTY), ("kernel_size", _EMPTY), *documented.items()]
    elif name == "adaptive_avg_pool1d":
        expected = [("input", _EMPTY), ("output_size", _EMPTY)]
    else:
        with_indices = getattr(F, f"{name}_with_indices", None)
        expected = _parameters(with_indices or getattr(F, name))
    assert _parameters(_ours(name)) == expected
