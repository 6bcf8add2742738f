"""``tile_sum``: a sum over a number of tiles known only at run time, linear in some of its
inputs, with its own transpose.

Adaptive sampling reads a number of samples per bin that the boxes decide, so its programs
loop over tiles of samples until the largest bin is covered: a ``while_loop``, which JAX can
evaluate and differentiate forward but not transpose.  ``tile_sum`` is that loop as a
primitive with the rules of a linear map::

    tile_sum(fun, fun_t, trips, res, lin, acc) = fold over t < trips of acc -> fun(t, res, lin, acc)

where ``fun(t, res, lin, acc) = acc + g(t, res, lin)`` with ``g`` linear in ``lin``.  Its
transpose in ``lin`` is another ``tile_sum``, of ``fun_t(t, res, ct, acc_lin) = acc_lin +
g(t, res, .)^T(ct)``: given by the caller (a tile's reads transpose into scatters added in
place to one accumulator), or, where ``fun_t`` is None, derived from ``fun`` by ``jax.vjp``.
Its derivative in ``res`` is a ``tile_sum`` of the tangent of ``g``, transposed by
``jax.vjp``; in ``lin`` and ``acc`` it is itself.  Under ``vmap`` the members of the batch are
summed one after another, each over its own number of tiles, so that an input the batch
shares (the feature map) is read where it lies and its transpose accumulated in one buffer.
The lowering is a ``while_loop``: ``jax.export`` serializes it for every platform and with
symbolic shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import ClosedJaxpr, Primitive, jaxpr_as_fun
from jax.interpreters import ad, batching, mlir

tile_sum_p = Primitive("jaxpool_tile_sum")
tile_sum_p.multiple_results = True

Fun = Callable[[jax.Array, Any, Any, Any], Any]


def tile_sum(fun: Fun, fun_t: Fun | None, trips: Any, res: Any, lin: Any, acc: Any) -> Any:
    """``acc`` plus the contributions of the tiles ``t < trips`` (the module docstring).

    ``res``, ``lin`` and ``acc`` are pytrees of arrays; ``fun`` takes ``(t, res, lin, acc)`` and
    ``fun_t`` ``(t, res, ct, acc_lin)`` as those pytrees (``ct`` like ``acc``, ``acc_lin`` like
    ``lin``), and neither may close over a traced value.  Returns a pytree like ``acc``.
    """
    leaves, trees = zip(*(jax.tree_util.tree_flatten(p) for p in (res, lin, acc)))
    res_l, lin_l, acc_l = (list(x) for x in leaves)
    closed = _jaxpr(_flat(fun, trees), [*res_l, *lin_l, *acc_l])
    closed_t = None
    if fun_t is not None:
        trees_t = (trees[0], trees[2], trees[1])
        closed_t = _jaxpr(_flat(fun_t, trees_t), [*res_l, *acc_l, *lin_l])
    out = _bind(trips, res_l, lin_l, acc_l, closed, closed_t)
    return jax.tree_util.tree_unflatten(trees[2], out)


def _flat(fun: Fun, trees: Sequence[Any]) -> Callable:
    """``fun`` on flat arguments ``(t, *res, *lin, *acc)``."""
    sizes = [tree.num_leaves for tree in trees]

    def flat(t, *leaves):
        split = sizes[0] + sizes[1]
        parts = (leaves[: sizes[0]], leaves[sizes[0] : split], leaves[split:])
        args = [jax.tree_util.tree_unflatten(tree, p) for tree, p in zip(trees, parts)]
        return jax.tree_util.tree_leaves(fun(t, *args))

    return flat


def _jaxpr(flat: Callable, leaves: Sequence[Any]) -> ClosedJaxpr:
    """``flat(t, *leaves)`` as a closed jaxpr, for a scalar int32 ``t``."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in leaves]
    closed = jax.make_jaxpr(flat)(jax.ShapeDtypeStruct((), np.int32), *specs)
    # A traced value closed over would leak out of the trace that made it.
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        raise TypeError("tile_sum's functions must take every traced value as an argument.")
    return closed


def _bind(trips, res, lin, acc, fun, fun_t) -> list:
    trips = jnp.asarray(trips, np.int32)
    return tile_sum_p.bind(
        trips, *res, *lin, *acc, fun=fun, fun_t=fun_t, num_res=len(res), num_lin=len(lin)
    )


def _split(args: Sequence[Any], num_res: int, num_lin: int) -> tuple[list, list, list]:
    lin_end = num_res + num_lin
    return list(args[:num_res]), list(args[num_res:lin_end]), list(args[lin_end:])


def _loop(trips, *args, fun, fun_t, num_res, num_lin):
    del fun_t, num_res, num_lin
    step = jaxpr_as_fun(fun)
    fixed = args[: len(args) - len(fun.out_avals)]

    def body(carry):
        t, *acc = carry
        return (t + 1, *step(t, *fixed, *acc))

    init = (jnp.zeros((), np.int32), *args[len(fixed) :])
    return list(lax.while_loop(lambda carry: carry[0] < trips, body, init)[1:])


def _contribution(fun: ClosedJaxpr) -> Callable:
    """``g(t, res, lin)`` of ``fun = acc + g``, on flat lists."""
    step = jaxpr_as_fun(fun)

    def g(t, res, lin):
        zeros = [jnp.zeros(a.shape, a.dtype) for a in fun.out_avals]
        return step(t, *res, *lin, *zeros)

    return g


def _jvp(primals, tangents, *, fun, fun_t, num_res, num_lin):
    trips, *args = primals
    res, lin, acc = _split(args, num_res, num_lin)
    res_dot, lin_dot, acc_dot = _split(tangents[1:], num_res, num_lin)
    out = _bind(trips, res, lin, acc, fun, fun_t)
    out_dot = [ad.instantiate_zeros(d) for d in acc_dot]
    if any(type(d) is not ad.Zero for d in lin_dot):
        lin_dot = [ad.instantiate_zeros(d) for d in lin_dot]
        out_dot = _bind(trips, res, lin_dot, out_dot, fun, fun_t)
    moved = [
        i
        for i, d in enumerate(res_dot)
        if type(d) is not ad.Zero and jnp.issubdtype(d.dtype, np.inexact)
    ]
    if moved:
        dots = [res_dot[i] for i in moved]
        closed = _jaxpr(_res_tangent(fun, num_res, moved), [*res, *lin, *dots, *out])
        moving = _bind(trips, [*res, *lin], dots, [jnp.zeros_like(o) for o in out], closed, None)
        out_dot = [a + b for a, b in zip(out_dot, moving)]
    return out, out_dot


def _res_tangent(fun: ClosedJaxpr, num_res: int, moved: list[int]) -> Callable:
    """The contributions' tangent in the residuals ``moved``: flat arguments ``(t, *res, *lin,
    *res_dot, *acc)``, linear in ``res_dot`` and ``acc``."""
    g = _contribution(fun)
    num_args = len(fun.in_avals) - 1 - len(fun.out_avals)

    def tangent(t, *leaves):
        res, lin = list(leaves[:num_res]), list(leaves[num_res:num_args])
        dots = leaves[num_args : num_args + len(moved)]
        acc = leaves[num_args + len(moved) :]

        def at(*values):
            full = list(res)
            for i, v in zip(moved, values):
                full[i] = v
            return g(t, full, lin)

        _, dg = jax.jvp(at, tuple(res[i] for i in moved), tuple(dots))
        return [a + d for a, d in zip(acc, dg)]

    return tangent


def _transpose(cts, trips, *args, fun, fun_t, num_res, num_lin):
    res, lin, acc = _split(args, num_res, num_lin)
    if ad.is_undefined_primal(trips) or any(ad.is_undefined_primal(r) for r in res):
        raise NotImplementedError("tile_sum is linear in `lin` and `acc` only.")
    cts = [ad.instantiate_zeros(c) for c in cts]
    lin_cts: list = [None] * num_lin
    if any(ad.is_undefined_primal(x) for x in lin):
        avals = [x.aval if ad.is_undefined_primal(x) else jax.typeof(x) for x in lin]
        if fun_t is None:
            fun_t = _jaxpr(_vjp_transpose(fun, num_res), [*res, *cts, *avals])
        zeros = [jnp.zeros(a.shape, a.dtype) for a in avals]
        found = _bind(trips, res, cts, zeros, fun_t, fun)
        lin_cts = [c if ad.is_undefined_primal(x) else None for c, x in zip(found, lin)]
    acc_cts = [c if ad.is_undefined_primal(a) else None for c, a in zip(cts, acc)]
    return [None] * (1 + num_res) + lin_cts + acc_cts


def _vjp_transpose(fun: ClosedJaxpr, num_res: int) -> Callable:
    """``fun_t`` of ``fun`` by ``jax.vjp`` of its contribution, taken at 0 (it is linear):
    flat arguments ``(t, *res, *ct, *acc_lin)``."""
    g = _contribution(fun)
    num_cts = len(fun.out_avals)

    def transposed(t, *leaves):
        res, cts = list(leaves[:num_res]), list(leaves[num_res : num_res + num_cts])
        acc = leaves[num_res + num_cts :]
        zeros = [jnp.zeros_like(a) for a in acc]
        _, pullback = jax.vjp(lambda *lin: g(t, res, list(lin)), *zeros)
        return [a + c for a, c in zip(acc, pullback(cts))]

    return transposed


def _batch(args, dims, *, fun, fun_t, num_res, num_lin):
    """Tile ``t`` of every member of the batch at once, for as many tiles as the member that
    needs most (one past its own tiles adds nothing).  Where an input the batch shares (the
    feature map) takes the transpose, the members add to it one after another in each tile,
    in place."""
    mapped = [d is not None for d in dims]
    size = next(a.shape[d] for a, d, m in zip(args, dims, mapped) if m)
    moved = [jnp.moveaxis(a, d, 0) if m else a for a, d, m in zip(args, dims, mapped)]
    trips = moved[0] if mapped[0] else jnp.broadcast_to(moved[0], (size,))
    res, lin, acc = _split(moved[1:], num_res, num_lin)
    res_b, lin_b, acc_b = _split(mapped[1:], num_res, num_lin)
    acc = [a if b else jnp.broadcast_to(a, (size, *a.shape)) for a, b in zip(acc, acc_b)]
    fun_b = _vectorized(fun, size, res_b, lin_b, num_res)
    fun_t_b = None
    if fun_t is not None and all(lin_b):
        fun_t_b = _vectorized(fun_t, size, res_b, [True] * len(acc), num_res)
    elif fun_t is not None:
        fun_t_b = _members(fun_t, size, res_b, lin_b, num_res)
    out = _bind(trips.max(), [trips, *res], lin, acc, fun_b, fun_t_b)
    return out, [0] * len(out)


def _specs(fun: ClosedJaxpr, size: int, batched: list) -> list:
    """The arguments of a batched ``fun`` after ``t``: ``trips`` per member, then ``fun``'s,
    the batched ones with a leading axis of ``size``."""
    specs = [
        jax.ShapeDtypeStruct((size, *a.shape) if b else a.shape, a.dtype)
        for a, b in zip(fun.in_avals[1:], batched)
    ]
    return [jax.ShapeDtypeStruct((size,), np.int32), *specs]


def _vectorized(fun: ClosedJaxpr, size: int, res_b: list, lin_b: list, num_res: int):
    """``fun`` over a batch (its accumulators batched): ``vmap``, and the members past their
    own tiles keep their accumulators."""
    step = jaxpr_as_fun(fun)
    batched = [*res_b, *lin_b] + [True] * len(fun.out_avals)
    axes = [0 if b else None for b in batched]

    def over_batch(t, trips, *leaves):
        new = jax.vmap(lambda *own: step(t, *own), in_axes=axes)(*leaves)
        acc = leaves[len(leaves) - len(new) :]
        live = [(t < trips).reshape((size,) + (1,) * (a.ndim - 1)) for a in acc]
        return [jnp.where(w, n, a) for w, n, a in zip(live, new, acc)]

    return _jaxpr(over_batch, _specs(fun, size, batched))


def _members(fun_t: ClosedJaxpr, size: int, res_b: list, acc_b: list, num_res: int):
    """``fun_t`` over a batch (its cotangents batched) whose accumulators may be shared: the
    members one after another, each adding its cotangent (0 past its own tiles)."""
    step = jaxpr_as_fun(fun_t)
    num_cts = len(fun_t.in_avals) - 1 - num_res - len(acc_b)
    batched = [*res_b] + [True] * num_cts + [*acc_b]

    def over_batch(t, trips, *leaves):
        res, cts = leaves[:num_res], leaves[num_res : num_res + num_cts]
        acc = list(leaves[num_res + num_cts :])

        def member(m, acc):
            def own(a, b):
                return lax.dynamic_index_in_dim(a, m, 0, False) if b else a

            live = t < lax.dynamic_index_in_dim(trips, m, 0, False)
            mine = [own(c, True) for c in cts]
            mine = [jnp.where(live, c, jnp.zeros_like(c)) for c in mine]
            new = step(t, *(own(a, b) for a, b in zip(res, res_b)), *mine, *map(own, acc, acc_b))
            return [
                lax.dynamic_update_index_in_dim(a, n, m, 0) if b else n
                for a, n, b in zip(acc, new, acc_b)
            ]

        return lax.fori_loop(0, size, member, acc)

    return _jaxpr(over_batch, _specs(fun_t, size, batched))


tile_sum_p.def_impl(_loop)
tile_sum_p.def_abstract_eval(lambda trips, *args, fun, **params: fun.out_avals)
mlir.register_lowering(tile_sum_p, mlir.lower_fun(_loop, multiple_results=True))
ad.primitive_jvps[tile_sum_p] = _jvp
ad.primitive_transposes[tile_sum_p] = _transpose
batching.primitive_batchers[tile_sum_p] = _batch
