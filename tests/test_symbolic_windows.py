"""The window ops, their gradients and the Flax/Equinox layers exported with a symbolic batch N.

Each row is one program: an op's variants spread over both layouts, float32, bfloat16 and
int32 (where the op takes integers), with the gradient of the floating ones, or a small model
of jaxpool's layers (Flax NNX, Linen, Equinox under ``jax.vmap``).  It is exported with the
batch of its inputs symbolic (``jax.export.symbolic_args_specs(args, "n, ...")``),
serialized, deserialized and called at two batch sizes; the results equal the direct call's,
bit for bit.
Every row runs by default, where both programs are traced (``lax.platform_dependent``) and
the artifact is exported for ``("cpu", "cuda", "tpu")`` at once, and under ``dispatch.force``
of the program the backend does not run by default (the portable one on a CPU).  Dimensions
other than N must stay static, and indices counted over N (``axis=0``) must provably fit their
dtype: the errors name the dimension.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen, nnx
from jax import export

import jaxpool
from jaxpool import nn as pnn
from jaxpool._src import dispatch
from jaxpool.nn import eqx as peqx
from jaxpool.nn import linen as plinen

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

PLATFORMS = ("cpu", "cuda", "tpu")
# The program the backend runs (``lax.platform_dependent``, exported for every platform) and the
# one it does not run unless forced: between them, both programs run on every backend.
CHOICES = ("default", "portable" if jax.default_backend() == "cpu" else "cpu")
LAYOUTS = ("NCX", "NXC")
SHAPE = (3, 10, 12)  # C, H, W of an example (NCX)
SIZES = (1, 3)  # the batch sizes the exported program is called at


def _values(n: int, shape: tuple[int, ...] = SHAPE, seed: int = 0) -> jax.Array:
    """Tie-free float32 values in [-0.5, 0.5) of shape ``(n, *shape)``."""
    rng = np.random.default_rng(seed)
    size = n * int(np.prod(shape))
    return jnp.asarray(rng.permutation(size).reshape(n, *shape) / size - 0.5, jnp.float32)


def _as(x: jax.Array, layout: str, dtype: str) -> jax.Array:
    """The NCX float32 map ``x`` in ``layout`` and ``dtype`` (integers: steps of 1/64)."""
    x = x if layout == "NCX" else jnp.moveaxis(x, 1, -1)
    if dtype == "int32":
        return jnp.round(x * 64).astype(jnp.int32)
    return x.astype(dtype)


def _gradient(op: Callable[[jax.Array, str], Any], a: jax.Array, layout: str) -> jax.Array:
    """The gradient of a scalar of the op's floating values (the first output where it returns
    indices)."""

    def loss(a):
        y = op(a, layout)
        y = y[0] if isinstance(y, tuple) else y
        return jnp.sum(jnp.cos(y.astype(jnp.float32) * 3))

    return jax.grad(loss)(a)


def _cases(*cases: tuple[str, str, Callable[[jax.Array, str], Any]], x64=False, constraints=()):
    """A row of ``cases`` ``(layout, dtype, op)``: ``fn(x)`` gives each ``op(a, layout)`` of
    ``x`` in that layout and dtype and, for a floating dtype, the gradient of its values.
    Each row spreads the op's variants over both layouts, both floating dtypes and int32."""

    def fn(x):
        out = {}
        for i, (layout, dtype, op) in enumerate(cases):
            a = _as(x, layout, dtype)
            out[f"{i} {layout} {dtype}"] = op(a, layout)
            if dtype != "int32":
                out[f"{i} grad"] = _gradient(op, a, layout)
        return out

    return fn, lambda n: (_values(n),), x64, constraints


def _op(fn):
    """``fn``'s variant builder: ``_op(fn)(*args, **kwargs)(x, layout)``."""
    return lambda *args, **kwargs: lambda x, f: fn(x, *args, data_format=f, **kwargs)


_max_pool, _avg_pool, _lp_pool = map(_op, (jaxpool.max_pool, jaxpool.avg_pool, jaxpool.lp_pool))
_adaptive_max_pool, _adaptive_avg_pool = map(
    _op, (jaxpool.adaptive_max_pool, jaxpool.adaptive_avg_pool)
)


def _indices(index_element_type, axis, *args, **kwargs):
    return _max_pool(
        *args, return_indices=True, index_element_type=index_element_type, axis=axis, **kwargs
    )


# Windows that reach into the padding (a CPU splits NCX outputs into interior and borders),
# and windows that tile one axis (a CPU's variadic reduction of values and indices).
PADDED = dict(kernel=3, strides=2, pads_begin=1, pads_end=1, rounding_type="ceil")
TILED = dict(kernel=(1, 3), strides=(1, 3))


def _fractional():
    def fn(x, u):
        def pool(**kwargs):
            return lambda a, f: jaxpool.fractional_max_pool(
                a, 2, (4, 5), u, data_format=f, **kwargs
            )

        cases = (
            ("NCX", "float32", pool(return_indices=True)),
            ("NXC", "bfloat16", pool()),
            ("NCX", "int32", pool(return_indices=True)),
        )
        return _cases(*cases)[0](x)

    def args(n):
        u = np.random.default_rng(1).uniform(size=(n, SHAPE[0], 2))
        return _values(n), jnp.asarray(u, jnp.float32)

    return fn, args, False, ()


class _NnxNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.conv = nnx.Conv(3, 4, (3, 3), rngs=rngs)
        self.max = pnn.MaxPool(2, return_indices=True, axis=2)
        self.avg = pnn.AvgPool(3, 1, 1, 1, exclude_pad=True)
        self.lp = pnn.LpPool(2, 1, p=2)
        self.adaptive_max = pnn.AdaptiveMaxPool((2, 3))
        self.adaptive_avg = pnn.AdaptiveAvgPool(1)
        self.head = nnx.Linear(4 * 2 * 3 + 4, 2, rngs=rngs)

    def __call__(self, x):
        y, indices = self.max(jax.nn.relu(self.conv(x)))
        y = self.lp(self.avg(y))
        features = [self.adaptive_max(y).reshape(y.shape[0], -1)]
        features.append(self.adaptive_avg(y).reshape(y.shape[0], -1))
        return self.head(jnp.concatenate(features, axis=1)), indices


class _LinenNet(linen.Module):
    @linen.compact
    def __call__(self, x):
        y, indices = plinen.MaxPool(2, return_indices=True, axis=1)(linen.Conv(4, (3, 3))(x))
        y = plinen.LpPool(2, 1, p=3)(plinen.AvgPool(3, 1, 1, 1)(y))
        y = plinen.AdaptiveMaxPool((2, 3))(y) + plinen.AdaptiveAvgPool((2, 3))(y)
        return linen.Dense(2)(y.reshape(y.shape[0], -1)), indices


class _EqxNet(eqx.Module):
    conv: eqx.nn.Conv2d
    pools: tuple[Any, ...]

    def __init__(self, key):
        self.conv = eqx.nn.Conv2d(3, 4, 3, key=key)
        self.pools = (
            peqx.AvgPool(3, 1, 1, 1, num_spatial_dims=2, exclude_pad=True),
            peqx.AdaptiveMaxPool((3, 2), num_spatial_dims=2),
        )

    def __call__(self, x):
        y, indices = peqx.MaxPool(2, num_spatial_dims=2, return_indices=True)(self.conv(x))
        for pool in self.pools:
            y = pool(y)
        return jnp.sum(y), indices


def _nnx():
    graphdef, state = nnx.split(_NnxNet(nnx.Rngs(0)))

    # An artifact's arguments are plain containers: the state's leaves.
    leaves, treedef = jax.tree.flatten(state)

    def model(leaves, x):
        return nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))(x)

    return model, lambda n: (leaves, _as(_values(n), "NXC", "float32"))


def _linen():
    module = _LinenNet()
    variables = module.init(jax.random.key(0), _as(_values(1), "NXC", "float32"))
    return module.apply, lambda n: (variables, _as(_values(n), "NXC", "float32"))


def _eqx():
    """The outputs and the gradient of the first one's sum in the input: the layers'
    derivatives under ``jax.vmap``, where the mapped axis is the symbolic batch."""
    model = jax.vmap(_EqxNet(jax.random.key(0)))

    def fn(x):
        return model(x), jax.grad(lambda x: jnp.sum(model(x)[0]))(x)

    return fn, lambda n: (_values(n),)


# name -> (fn, args(n), x64, constraints): the batch N of ``args(n)``'s leading axes is
# symbolic, ``n`` under ``constraints``; ``x64`` runs the row with 64-bit types.
ROWS: dict[str, tuple[Callable[..., Any], Callable[[int], tuple[Any, ...]], bool, tuple]] = {
    "max_pool": _cases(
        ("NCX", "float32", _max_pool(**PADDED)),
        ("NXC", "bfloat16", _max_pool((2, 3), (1, 2), dilations=2, auto_pad="same_upper")),
        ("NCX", "int32", _max_pool(2)),
    ),
    # int32 indices counted over the batch fit only where N is bounded: 3 * 10 * 12 * 1024
    # < 2**31.
    "max_pool indices i32": _cases(
        ("NCX", "float32", _indices("i32", 0, **PADDED)),
        ("NXC", "bfloat16", _indices("i32", 1, 2)),
        ("NCX", "int32", _indices("i32", 2, 2, 1)),
        ("NXC", "int32", _indices("i32", -1, 2)),
        ("NCX", "int32", _indices("i32", 0, **TILED)),
        constraints=("n <= 1024",),
    ),
    "max_pool indices i64": _cases(
        ("NXC", "float32", _indices("i64", 0, **PADDED)),
        ("NCX", "int32", _indices("i64", 0, **TILED)),
        x64=True,
    ),
    "avg_pool": _cases(
        ("NCX", "float32", _avg_pool(3, 2, 1, 1, rounding_type="ceil")),
        ("NXC", "bfloat16", _avg_pool(3, 2, 1, 1, exclude_pad=True, dilations=2)),
        ("NCX", "int32", _avg_pool(3, 2, 1, 1, divisor_rule="padded_input")),
        ("NXC", "int32", _avg_pool(2, divisor_override=3, integer_division="truncate")),
    ),
    "lp_pool": _cases(
        ("NCX", "float32", _lp_pool(2)),
        ("NXC", "bfloat16", _lp_pool(3, 2, 1, 1, p=1.5, rounding_type="ceil")),
    ),
    # Small irregular bins (one chain over the taps of all axes), bins too wide for one chain
    # (one axis at a time), global pooling, and one pooled axis (a CPU's chains by periods).
    "adaptive_max_pool": _cases(
        ("NCX", "float32", _adaptive_max_pool((4, 5), return_indices=True)),
        ("NXC", "bfloat16", _adaptive_max_pool((2, 2), return_indices=True)),
        ("NXC", "float32", _adaptive_max_pool(1, return_indices=True)),
        ("NCX", "int32", _adaptive_max_pool((4, None))),
    ),
    "adaptive_avg_pool": _cases(
        ("NCX", "float32", _adaptive_avg_pool((4, 5))),
        ("NXC", "bfloat16", _adaptive_avg_pool((4, None))),
        ("NCX", "int32", _adaptive_avg_pool(1)),
        ("NXC", "int32", _adaptive_avg_pool((2, 2))),
    ),
    "fractional_max_pool": _fractional(),
}
# The models, built when their rows run rather than when the module is collected.
MODELS = {
    "nnx": lambda: (*_nnx(), False, ()),
    "linen": lambda: (*_linen(), False, ()),
    "eqx": lambda: (*_eqx(), False, ()),
}


def _choice(choice: str):
    return contextlib.nullcontext() if choice == "default" else dispatch.force(choice)


def _specs(args: tuple[Any, ...], constraints: tuple[str, ...]) -> tuple[Any, ...]:
    """The arguments' specs, the leading axis of each map symbolic (``n``); a model's
    variables (a dict or an NNX state) keep their shapes."""
    scope = export.SymbolicScope(constraints)
    return tuple(
        jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), a)
        if not isinstance(a, jax.Array)
        else export.symbolic_args_specs(a, "n, ...", scope=scope)
        for a in args
    )


def _assert_same_bits(got: Any, expected: Any) -> None:
    got_leaves, got_tree = jax.tree.flatten(got)
    expected_leaves, expected_tree = jax.tree.flatten(expected)
    assert got_tree == expected_tree
    for g, e in zip(got_leaves, expected_leaves):
        assert g.dtype == e.dtype and g.shape == e.shape
        g, e = np.asarray(g), np.asarray(e)
        bits = f"u{g.dtype.itemsize}"
        np.testing.assert_array_equal(g.view(bits), e.view(bits))


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("name", sorted([*ROWS, *MODELS]))
def test_exports_with_a_symbolic_batch(name, choice):
    fn, make_args, x64, constraints = ROWS[name] if name in ROWS else MODELS[name]()
    with _choice(choice), jax.enable_x64(x64):
        platforms = PLATFORMS if choice == "default" else None
        exported = export.export(jax.jit(fn), platforms=platforms)(
            *_specs(make_args(SIZES[-1]), constraints)
        )
        restored = export.deserialize(exported.serialize())
        for n in SIZES:
            args = make_args(n)
            _assert_same_bits(restored.call(*args), jax.jit(fn)(*args))


# (op of x, the symbolic shape of x, its layout): only the batch may be symbolic, and the
# error names the dimension, its axis and the layout.
ERRORS = [
    (lambda x: jaxpool.max_pool(x, 2), "n, c, 10, 12", "NCX"),
    (lambda x: jaxpool.avg_pool(x, 2, data_format="NXC"), "n, 10, 12, c", "NXC"),
    (lambda x: jaxpool.lp_pool(x, 2), "n, 3, h, 12", "NCX"),
    (lambda x: jaxpool.adaptive_max_pool(x, 2, data_format="NXC"), "n, 10, w, 3", "NXC"),
    (lambda x: jaxpool.adaptive_avg_pool(x, 2), "n, 3, 10, w", "NCX"),
    (
        lambda x: jaxpool.fractional_max_pool(x, 2, 3, jnp.zeros((x.shape[0], 3, 2))),
        "n, 3, h, 12",
        "NCX",
    ),
    (lambda x: pnn.MaxPool(2)(x), "n, h, 12, 3", "NXC"),
]


@pytest.mark.parametrize("op,shape,layout", ERRORS)
def test_only_the_batch_is_symbolic(op, shape, layout):
    dims = shape.split(", ")
    axis, name = next((k, d) for k, d in enumerate(dims[1:], 1) if not d.isdigit())
    channel = 1 if layout == "NCX" else len(dims) - 1
    where = "channel axis" if axis == channel else f"spatial axis {axis - 1 - (channel == 1)}"
    message = (
        rf"\({layout}\) has the symbolic dimension {name} on its {where} \(axis {axis}\): only"
    )
    spec = jax.ShapeDtypeStruct(export.symbolic_shape(shape), jnp.float32)
    with pytest.raises(ValueError, match=message + " the batch N may be symbolic"):
        export.export(jax.jit(op))(spec)


def test_the_kernel_is_static():
    with pytest.raises(TypeError, match="`kernel` must be a static Python int, got the symbolic"):
        _export_bounded(lambda x: jaxpool.max_pool(x, (2, x.shape[0])), "n <= 10")


def _export_bounded(op, bound):
    shape = export.symbolic_shape("n, 3, 10, 12", constraints=(bound,))
    return export.export(jax.jit(op))(jax.ShapeDtypeStruct(shape, jnp.float32))


def test_the_bound_the_error_names_exports():
    """int32 indices counted over a symbolic N must provably fit: the error proposes a bound
    under which the export proves the fit, and the artifact gives the direct call's indices; a
    batch past an artifact's bound is refused when it is called, and a bound too large is
    refused when exported."""

    def op(x):
        return jaxpool.max_pool(x, 2, return_indices=True, index_element_type="i32")

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("n, 3, 10, 12"), jnp.float32)
    message = r"symbolic batch N = n .* holds them only for n <= 5965232.*`axis` 1 or 2.*int64"
    with pytest.raises(ValueError, match=message) as error:
        export.export(jax.jit(op))(spec)
    bound = re.search(r'constraints=\("(.*)",\)', str(error.value)).group(1)
    x = _values(2)
    _assert_same_bits(_export_bounded(op, bound).call(x), jax.jit(op)(x))
    with pytest.raises(ValueError, match="n <= 1"):
        _export_bounded(op, "n <= 1").call(x)
    with pytest.raises(ValueError, match=r'constraints=\("n <= 5965232",\)'):
        _export_bounded(
            lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=-4), "n <= 6000000"
        )
