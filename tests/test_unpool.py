"""max_unpool against PyTorch's max_unpool and ``tests/reference.py`` (NumPy's unbuffered
``np.add.at``); with the window stated, against the same call without it (the scatter).
Unpooling fuzzed max_pool outputs: test_max_pool.py's fuzz test."""

import functools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import torch
import torch.nn.functional as F
from bad_inputs import I8, Y8, V, bad_input_test, row
from jax.test_util import check_grads

import jaxpool

torch.set_num_threads(1)


# (index axis, layout, PyTorch's kernel, stride and padding, combine): non-overlapping windows
# for every index axis and layout; overlapping ones name a position several times, and
# combine="max" keeps one value, as PyTorch does.
TORCH = [*[(a, f, (2, 2, 0), "sum") for a, f in [(0, "NCX"), (1, "NXC"), (2, "NCX"), (-3, "NXC")]],
         (2, "NCX", (3, 1, 1), "max")]  # fmt: skip


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("axis, fmt, window, combine", TORCH)
def test_matches_torch(nd, axis, fmt, window, combine):
    """PyTorch's max_unpool of its max_pool's (spatial) indices, on negative values: positions
    no index names stay 0.  The gradient in ``y`` where no position repeats (PyTorch's reads
    each value's position in full; "max" shares it among equal winners)."""
    rng = np.random.default_rng(nd)
    x = -np.abs(rng.standard_normal((2, 3, *[8, 6, 4][:nd]))).astype(np.float32)
    yt, it = getattr(F, f"max_pool{nd}d")(torch.tensor(x), *window, return_indices=True)
    expected = getattr(F, f"max_unpool{nd}d")(
        yt.requires_grad_(), it, *window, output_size=x.shape[2:]
    )
    g = rng.standard_normal(x.shape).astype(np.float32)
    expected.backward(torch.tensor(g))
    (k, s, p), x_in = window, cases.to_layout(x, fmt)
    y, i = jaxpool.max_pool(x_in, k, s, p, p, return_indices=True, axis=axis, data_format=fmt)
    unpool = functools.partial(
        jaxpool.max_unpool, indices=i, output_shape=x_in.shape, axis=axis, data_format=fmt
    )
    out, vjp = jax.vjp(lambda v: unpool(v, combine=combine), y)
    out = cases.from_layout(out, fmt)
    np.testing.assert_array_equal(out, expected.detach().numpy())
    assert np.any(out == 0) and np.all(out <= 0)
    if combine == "sum":
        (grad,) = vjp(jnp.asarray(cases.to_layout(g, fmt)))
        np.testing.assert_array_equal(cases.from_layout(grad, fmt), yt.grad.numpy())
    else:
        assert not np.array_equal(cases.from_layout(unpool(y), fmt), out)  # the windows overlap


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_overlapping_windows_sum(axis, jit_mode):
    """Overlapping windows name some positions several times: they receive the sum."""
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 6)).astype(np.float32)
    y, i = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True, axis=axis)
    _, i0 = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True)
    assert len(np.unique(np.asarray(i0))) < i0.size  # repeated positions
    out = jit_mode(lambda a, b: jaxpool.max_unpool(a, b, x.shape, axis=axis), y, i)
    np.testing.assert_allclose(out, reference.max_unpool(y, i, x.shape, axis=axis), rtol=1e-6)
    np.testing.assert_allclose(out, reference.max_unpool(y, i0, x.shape), rtol=1e-6)


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_adaptive_indices(fmt):
    """adaptive_max_pool's spatial indices (axis=2), also for output larger than input."""
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 4)).astype(np.float32)
    x_in = cases.to_layout(x, fmt)
    for output_size in ((2, 3), (7, 9)):
        y, i = jaxpool.adaptive_max_pool(x_in, output_size, return_indices=True, data_format=fmt)
        out = jaxpool.max_unpool(y, i, x_in.shape, axis=2, data_format=fmt)
        y, i, out = (cases.from_layout(a, fmt) for a in (y, i, out))
        full = (np.arange(6).reshape(2, 3, 1, 1) * 20) + i
        np.testing.assert_allclose(out, reference.max_unpool(y, full, x.shape), rtol=1e-6)
        np.testing.assert_allclose(out, reference.max_unpool(y, i, x.shape, axis=2), rtol=1e-6)


def test_integer_values_and_traced_indices_out_of_range():
    """Traced indices outside their plane are dropped, as the docstring says; concrete ones
    are refused (the table of bad inputs)."""
    unpool = jax.jit(jaxpool.max_unpool, static_argnames=("output_shape", "axis"))
    y = np.array([[[5, 6, 7]]], np.int32)
    out = unpool(y, np.array([[[4, -1, 4]]], np.int8), output_shape=(1, 1, 5), axis=2)
    assert out.dtype == jnp.int32
    np.testing.assert_array_equal(
        out, reference.max_unpool(y[..., ::2], np.array([[[4, 4]]]), (1, 1, 5))
    )
    # axis=2 index 5 of a 5-element plane would land in the next plane: it is dropped.
    ones = np.ones((1, 2, 1), np.float32)
    out = unpool(ones, np.array([[[5], [0]]]), output_shape=(1, 2, 5), axis=2)
    expected = reference.max_unpool(ones[:, :1], np.array([[[5]]]), (1, 2, 5))
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="2 of 3 values would be lost"):
        jaxpool.max_unpool(y, np.array([[[5, -1, 4]]]), (1, 1, 5), axis=2)


def test_specials():
    """NaN and infinities are scattered like any value; inf + -inf is NaN."""
    y = np.array([[[np.nan, np.inf, -np.inf, 1.0]]], np.float32)
    i = np.array([[[0, 2, 2, 5]]], np.int32)
    out = jaxpool.max_unpool(y, i, (1, 1, 6), axis=0)
    np.testing.assert_array_equal(np.asarray(out), [[[np.nan, 0, np.nan, 0, 0, 1]]])
    np.testing.assert_array_equal(np.asarray(out), reference.max_unpool(y, i, (1, 1, 6)))


def test_grads(x64):
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 5))
    y, i = jaxpool.max_pool(x, 2, 1, return_indices=True, axis=2)
    unpool = functools.partial(jaxpool.max_unpool, indices=i, output_shape=x.shape, axis=2)
    check_grads(jax.jit(unpool), (y,), order=2, modes=("fwd", "rev"))


def test_huge_output_with_x64():
    """An output of 2**32 elements is addressable with 64-bit integers only (without them it
    is an error: see test_errors_unpool.py); checked abstractly."""
    y, i = (jax.ShapeDtypeStruct((2**12, 2**10, 16, 16), t) for t in (jnp.float32, jnp.int32))
    shape = (2**12, 2**10, 2**5, 2**5)
    with jax.enable_x64(True):
        out = jax.eval_shape(
            functools.partial(jaxpool.max_unpool, output_shape=shape, axis=2), y, i
        )
    assert out.shape == shape and out.dtype == jnp.float32


def test_combine_max_is_differentiable():
    y = jnp.asarray([[[3.0, 3.0, -1.0]]])
    i = jnp.asarray([[[1, 1, 4]]])
    grad = jax.grad(lambda y: jaxpool.max_unpool(y, i, (1, 1, 5), axis=2, combine="max").sum())
    np.testing.assert_array_equal(grad(y), [[[0.5, 0.5, 1.0]]])  # equal winners share


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_combine_torch_is_torchs_max_unpool_with_repeated_indices(data_format):
    """``combine="torch"``: PyTorch's CPU max_unpool for arbitrary repeated indices (the last
    value in each plane's row-major order is kept), and its gradient: every value receives
    the output gradient at its index, in full."""
    rng = np.random.default_rng(7)
    y = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    i = rng.integers(0, 12, y.shape)  # repeats within each plane
    g = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    yt = torch.tensor(y, requires_grad=True)
    expected = F.max_unpool2d(yt, torch.tensor(i), 1, output_size=(3, 4))
    expected.backward(torch.tensor(g))

    def unpool(v, fmt=data_format):
        v, index = cases.to_layout(v, fmt), cases.to_layout(i, fmt)
        out = jaxpool.max_unpool(v, index, v.shape, axis=2, combine="torch", data_format=fmt)
        return out if fmt == "NCX" else jnp.moveaxis(out, -1, 1)

    for fn in (unpool, jax.jit(unpool)):
        got, vjp = jax.vjp(fn, jnp.asarray(y))
        np.testing.assert_array_equal(got, expected.detach().numpy())
        np.testing.assert_array_equal(vjp(jnp.asarray(g))[0], yt.grad.numpy())
    # Forward mode: the tangent of "sum", whose transpose is that gradient.
    t = rng.standard_normal(y.shape).astype(np.float32)
    _, tangent = jax.jvp(unpool, (jnp.asarray(y),), (jnp.asarray(t),))
    summed = jaxpool.max_unpool(t, i, (2, 3, 3, 4), axis=2)
    np.testing.assert_allclose(tangent, summed, rtol=1e-6)


def test_empty_batch_unpools_to_an_empty_output():
    y = np.zeros((0, 2, 3), np.float32)
    out = jaxpool.max_unpool(y, np.zeros(y.shape, np.int32), (0, 2, 6), axis=2)
    assert out.shape == (0, 2, 6)


# --------------------------------------------------------------------------------------------
# The window stated: the dense placement, against the scatter (the same call without it).
# --------------------------------------------------------------------------------------------

# (layout, NCX shape, max_pool's window attributes, (axis, combine) pairs): overlapping and
# dilated windows, ceil rounding, windows with no input element (their index is their plane's
# first element) at either end; each combine over those.
WINDOWS = {
    "1d-dilated-empty": ("NCX", (2, 3, 9), dict(kernel=3, strides=2, dilations=3, pads_begin=2,
                                                 pads_end=2, rounding_type="ceil"),
                         [(0, "sum"), (1, "max")]),
    "1d-empty-both-ends": ("NXC", (1, 2, 4), dict(kernel=2, strides=1, pads_begin=2,
                                                   pads_end=2), [(2, "torch"), (0, "max")]),
    "2d-tiles": ("NXC", (2, 3, 8, 6), dict(kernel=2), [(0, "sum"), (1, "torch")]),
    "2d-overlap": ("NCX", (2, 3, 7, 6), dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
                   [(1, "max"), (2, "torch")]),
    "2d-same-ceil": ("NXC", (2, 3, 9, 7), dict(kernel=3, strides=2, auto_pad="same_upper",
                                               rounding_type="ceil"), [(2, "sum"), (0, "max")]),
    "2d-mixed-empty": ("NCX", (1, 2, 7, 6), dict(kernel=(2, 3), strides=(3, 2),
                                                 dilations=(2, 1), pads_begin=(1, 0),
                                                 pads_end=(2, 2), rounding_type="ceil"),
                       [(1, "torch"), (2, "sum")]),
    "3d-empty": ("NXC", (1, 2, 5, 4, 6), dict(kernel=2, strides=(1, 2, 3), pads_begin=(1, 1, 0),
                                              pads_end=(1, 1, 1), rounding_type="ceil"),
                 [(0, "max"), (1, "sum")]),
}  # fmt: skip


def _derivatives(fn, v, ct):
    """``fn(v)``, its vector-Jacobian product with ``ct`` and its derivative along ``3 v``."""
    out, vjp = jax.vjp(fn, v)
    return out, vjp(ct)[0], jax.jvp(fn, (v,), (v * 3,))[1]


@pytest.mark.parametrize("name", list(WINDOWS))
def test_window_places_as_the_scatter(name):
    """On values with ties, the values, the gradient and the forward derivative equal the
    scatter's (the derivatives to rounding: they add in another order)."""
    fmt, ncx, attrs, pairs = WINDOWS[name]
    rng = np.random.default_rng(len(name))
    x = cases.to_layout(rng.standard_normal(ncx).astype(np.float32), fmt)
    ct = rng.standard_normal(x.shape).astype(np.float32)
    for axis, combine in pairs:
        y, i = jaxpool.max_pool(x, **attrs, return_indices=True, axis=axis, data_format=fmt)
        ties = np.round(rng.standard_normal(y.shape)).astype(np.float32)
        results = []
        for window in ({}, attrs):
            unpool = functools.partial(
                jaxpool.max_unpool, indices=i, output_shape=x.shape, axis=axis, combine=combine,
                data_format=fmt, **window,
            )  # fmt: skip
            results.append(jax.jit(_derivatives, static_argnums=0)(unpool, ties, ct))
        (want, want_grad, want_tangent), (out, grad, tangent) = results
        np.testing.assert_array_equal(out, want)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(tangent, want_tangent, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------------
# A symbolic batch (jax.export), and what must stay static.
# --------------------------------------------------------------------------------------------

# (layout, axis, combine, window or None): both layouts, each axis, each combine, both
# placements; the windows hold windows with no input element (their plane's first element).
SYMBOLIC = [
    ("NCX", 0, "sum", dict(kernel=3, strides=2, pads_begin=1, pads_end=2, rounding_type="ceil")),
    ("NXC", 1, "max", dict(kernel=2, strides=2, pads_begin=2)),
    ("NCX", 2, "torch", dict(kernel=3, strides=1, pads_begin=1, pads_end=1)),
    ("NXC", 2, "max", None),
]


@pytest.mark.serving
@pytest.mark.parametrize("fmt,axis,combine,window", SYMBOLIC)
def test_exports_with_a_symbolic_batch(fmt, axis, combine, window):
    """Exported for cpu, cuda and tpu with the batch symbolic (``output_shape`` holds it),
    with its gradient in the values, serialized and deserialized: at two batch sizes the
    bits of the direct call."""
    window = window or {}
    x = cases.to_layout(np.random.default_rng(axis).standard_normal((3, 2, 7, 6)), fmt)
    x = x.astype(np.float32)

    def pool(x):
        return jaxpool.max_pool(x, **window or {"kernel": 2}, return_indices=True, axis=axis,
                                data_format=fmt)  # fmt: skip

    def unpool(y, i, ct):
        fn = functools.partial(
            jaxpool.max_unpool, indices=i, output_shape=(y.shape[0], *x.shape[1:]), axis=axis,
            combine=combine, data_format=fmt, **window,
        )  # fmt: skip
        out, vjp = jax.vjp(fn, y)
        return out, vjp(ct)[0]

    y, i = pool(x)
    ct = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    specs = jax.export.symbolic_args_specs((y, i, ct), "n, ...")
    exported = jax.export.export(jax.jit(unpool), platforms=("cpu", "cuda", "tpu"))(*specs)
    exported = jax.export.deserialize(exported.serialize())
    for n in (1, 3):
        args = (*pool(x[:n]), ct[:n])  # axis=0 indices count the batch
        for got, want in zip(exported.call(*args), jax.jit(unpool)(*args), strict=True):
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _exported(shape_spec, output_shape, **kwargs):
    """``max_unpool`` of a (2, 3, 4, 4) pooled map exported with ``shape_spec`` symbolic."""
    y = np.zeros((2, 3, 4, 4), np.float32)
    specs = jax.export.symbolic_args_specs((y, y.astype(np.int32)), shape_spec)

    def unpool(y, i):
        return jaxpool.max_unpool(y, i, output_shape(y), axis=2, **kwargs)

    return jax.export.export(jax.jit(unpool))(*specs)


# What must stay static, and the window stated wrongly (of Y4 unpooled from 2x2 windows).
Y4, I4 = Y8[:1, :1], I8[:1, :1]
FIRST = np.arange(16).reshape(1, 1, 4, 4) == 0
WRONG = np.where(FIRST, 63, I4)  # the first window's index names the last element
UNPOOL4 = functools.partial(jaxpool.max_unpool, Y4, output_shape=(1, 1, 8, 8), axis=2)
ERRORS = [
    row("symbolic-spatial-y", _exported, "n, 3, h, 4", lambda y: (y.shape[0], 3, 8, 8), error=V,
        match=r"`y` has the symbolic dimension h on its spatial axis 2"),
    row("symbolic-channel-y", _exported, "n, c, 4, 4", lambda y: y.shape, error=V,
        match=r"`y` has the symbolic dimension c on its channel axis 1"),
    row("symbolic-spatial-y-nxc", _exported, "n, h, ...", lambda y: y.shape, kernel=1,
        data_format="NXC", error=V,
        match=r"`y` has the symbolic dimension h on its spatial axis 1"),
    row("symbolic-spatial-output_shape", _exported, "n, ...",
        lambda y: (y.shape[0], 3, 8, y.shape[0] * 8), error=V,
        match=r"`output_shape` has the symbolic dimension 8\*n on its spatial axis 3"),
    row("symbolic-batch-not-y's", _exported, "n, ...", lambda y: (2, 3, 8, 8), error=V,
        match=r"must keep the batch and channel sizes of `y` of shape \(n, 3, 4, 4\)"),
    row("window-without-kernel", UNPOOL4, I4, strides=2, error=V,
        match=r"`strides` \(=2\) describes the window .* which `kernel` must state too"),
    row("window-pools-another-size", UNPOOL4, I4, kernel=3, rounding_type="ceil", error=V,
        match=r"`kernel` \(=3\), `rounding_type`='ceil' pools the spatial size \(8, 8\) "
              r"of `output_shape` to \(3, 3\), but `y` has the spatial size \(4, 4\)"),
    row("window-bad-kernel", UNPOOL4, I4, kernel=0, error=V,
        match=r"`kernel` \(=0\) must be positive"),
    row("index-outside-its-window", UNPOOL4, WRONG, kernel=2, error=V,
        match=r"`indices` name positions outside the windows .*: 1 of 16 values"),
]  # fmt: skip
test_errors = bad_input_test(ERRORS)


def test_traced_indices_outside_their_window_are_dropped():
    """As the docstring says: under ``jit`` the value of an index outside its window reaches
    no element, and its gradient is zero; the others are placed."""

    unpool = jax.jit(lambda y, i: jaxpool.max_unpool(y, i, (1, 1, 8, 8), axis=2, kernel=2))
    out, vjp = jax.vjp(lambda y: unpool(y, WRONG), Y4)
    expected = jaxpool.max_unpool(np.where(FIRST, 0, Y4), I4, (1, 1, 8, 8), axis=2)
    np.testing.assert_array_equal(out, expected)
    (grad,) = vjp(jnp.ones(out.shape))
    np.testing.assert_array_equal(grad, np.where(FIRST, 0, 1))
