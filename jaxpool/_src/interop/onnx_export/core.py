"""The core of :func:`jaxpool.onnx.export`: the table of entries, the primitive each exported op
binds and its rule under ``vmap``, the exporter that binds it, jax2onnx's plugins that lower it,
and the one place that works around jax2onnx's patches of JAX."""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import batching
from jax2onnx.plugins._patching import AssignSpec, MonkeyPatchSpec
from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

from jaxpool._src import exporting
from jaxpool._src.interop.onnx_export import adaptive, regions, unpool, windows
from jaxpool._src.interop.onnx_export.entry import Export, Row
from jaxpool._src.interop.onnx_export.graph import Call, Emit, Graph

# Every op's entry, in the order of the docs' table (the refused window op last).
ENTRIES: tuple[Export, ...] = (
    *windows.ENTRIES,
    *adaptive.ENTRIES,
    *unpool.ENTRIES,
    *regions.ENTRIES,
    *windows.REFUSED,
)
EXPORTS: dict[str, Export] = {entry.op: entry for entry in ENTRIES}
# The per-op table: generated into the docs.
TABLE: tuple[Row, ...] = tuple(entry.row for entry in ENTRIES if entry.listed)


# --------------------------------------------------------------------------------------------
# jax2onnx's patches: while it converts, it replaces functions of these modules so that
# tracing a model binds its primitives, and its replacements refuse arguments that the ops
# pass (such as ``jnp.max``'s ``initial``).  The ops compute their shapes with the originals.
# --------------------------------------------------------------------------------------------

_PATCHED_MODULES = (
    "jax.numpy",
    "jax.numpy.linalg",
    "jax.lax",
    "jax.nn",
    "jax.random",
    "jax.scipy.special",
    "jax.image",
)
_ORIGINALS: dict[Any, dict[str, Any]] = {}


def _snapshot() -> None:
    """Keeps the patched modules' own functions (before any conversion patches them)."""
    for module_name in _PATCHED_MODULES:
        module = importlib.import_module(module_name)
        _ORIGINALS[module] = dict(vars(module))


@contextlib.contextmanager
def _unpatched() -> Iterator[None]:
    """JAX's own functions, for the duration."""
    replaced = []
    for module, originals in _ORIGINALS.items():
        current = vars(module)
        for name, value in originals.items():
            if current.get(name, value) is not value:
                replaced.append((module, name, current[name]))
                setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in reversed(replaced):
            setattr(module, name, value)


# --------------------------------------------------------------------------------------------
# The op as a primitive: its shapes, its implementation, its rule under `vmap`.
# --------------------------------------------------------------------------------------------


def _original(fn: Callable[..., Any]) -> Callable[..., Any]:
    return getattr(fn, "__wrapped__", fn)


def _static(value: Any) -> Any:
    """A hashable parameter: sequences become tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(_static(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_static(v) for v in value.tolist())
    return value


def _evaluate(export: Export, operands: Sequence[Any], params: dict[str, Any]) -> Any:
    assert export.fn is not None  # only exported ops have primitives
    with exporting.suspended():
        return _original(export.fn)(**dict(zip(export.operands, operands)), **params)


_SHAPES: dict[Any, Any] = {}


def _eval_shape(export: Export, structs: Sequence[Any], params: dict[str, Any]) -> Any:
    """The op's results' shapes and dtypes, from the op itself.  Its jitted programs are
    inlined (``disable_jit``) rather than traced into jit's caches, where programs traced
    during an export would outlive it."""
    key = (export.fn, tuple(structs), tuple(sorted(params.items())))
    if key not in _SHAPES:  # the exporter and the primitive's abstract evaluation ask alike
        with _unpatched(), jax.disable_jit():
            _SHAPES[key] = jax.eval_shape(lambda *o: _evaluate(export, o, params), *structs)
    return _SHAPES[key]


def _shapes(tree: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
    return tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in jax.tree.leaves(tree))


def _make_primitive(export: Export) -> Any:
    primitive = Primitive(f"jaxpool_{export.op}")
    primitive.multiple_results = True

    def impl(*operands: Any, **params: Any) -> list[Any]:
        return list(jax.tree.leaves(_evaluate(export, operands, params)))

    def abstract_eval(*avals: Any, **params: Any) -> list[Any]:
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        out = _eval_shape(export, structs, params)
        return [jax.core.ShapedArray(s.shape, s.dtype) for s in jax.tree.leaves(out)]

    def batch(operands: Sequence[Any], dims: Sequence[Any], **params: Any) -> Any:
        # Under `jax.vmap` (Equinox models map their unbatched layers over the batch) an op
        # with a merge rule is one call over the merged batch, one node for the whole batch;
        # the others, and calls their rule declines, bind every example on its own.
        size = next(o.shape[d] for o, d in zip(operands, dims) if d is not None)
        mapped = all(d is not None for d in dims)
        operands = [batching.bdim_at_front(o, d, size) for o, d in zip(operands, dims)]
        if mapped and export.merge is not None:
            outs = export.merge(primitive.bind, operands, params)
            if outs is not None:
                return outs, [0] * len(outs)
        rows = [primitive.bind(*(o[b] for o in operands), **params) for b in range(size)]
        return [jnp.stack(r) for r in zip(*rows)], [0] * len(rows[0])

    primitive.def_impl(impl)
    primitive.def_abstract_eval(abstract_eval)
    batching.primitive_batchers[primitive] = batch
    return primitive


_PRIMITIVES: dict[str, Any] = {}


# --------------------------------------------------------------------------------------------
# The plan of a call, made once: where the model calls the op (so that a refusal names the
# call) and used again where jax2onnx writes its nodes.
# --------------------------------------------------------------------------------------------

_PLANS: dict[Any, Emit] = {}


def _planned(export: Export, structs: Sequence[Any], params: dict[str, Any]) -> Emit:
    """The plan of a call of ``export``'s op on operands of the shapes and dtypes ``structs``
    with ``params``: its window, its types and its refusals worked out once per such call.  A
    call merged under ``vmap`` has shapes of its own, and a plan of its own."""
    assert export.plan is not None  # only exported ops are bound and lowered
    key = (export.op, tuple(structs), tuple(sorted(params.items())))
    if key not in _PLANS:
        outputs = _shapes(_eval_shape(export, structs, params))
        _PLANS[key] = export.plan(Call(export.op, params, tuple(structs), outputs))
    return _PLANS[key]


# --------------------------------------------------------------------------------------------
# The exporter that binds the primitives, and jax2onnx's plugins that lower them.
# --------------------------------------------------------------------------------------------


def _bind(op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The exporter: a call of a public op, bound as the op's primitive."""
    name = op.__name__
    export = EXPORTS[name]
    if export.plan is None:
        raise ValueError(f"jaxpool.{name} cannot be exported to ONNX: {export.notes}.")
    arguments = inspect.signature(op).bind(*args, **kwargs)
    arguments.apply_defaults()
    values = dict(arguments.arguments)
    operands = [jnp.asarray(values.pop(n)) for n in export.operands]
    params = {k: _static(v) for k, v in values.items()}
    structs = _shapes(operands)
    out = _eval_shape(export, structs, params)
    _planned(export, structs, params)  # its refusals, where the model calls the op
    flat = _PRIMITIVES[name].bind(*operands, **params)
    return jax.tree.unflatten(jax.tree.structure(out), flat)


class _Plugin(PrimitiveLeafPlugin):
    """Lowers one jaxpool primitive through its op's plan."""

    _PRIM: Any = None
    _EXPORT: Export
    _ABSTRACT_EVAL_BOUND = True  # bound where the primitive is made

    @classmethod
    def binding_specs(cls) -> list[AssignSpec | MonkeyPatchSpec]:
        return [AssignSpec(exporting, "EXPORTER", _bind, delete_if_missing=False)]

    def lower(self, ctx: Any, eqn: Any) -> None:
        structs = tuple(jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars)
        emit = _planned(self._EXPORT, structs, dict(eqn.params))
        operands = [ctx.get_value_for_var(v, name_hint=ctx.fresh_name("in")) for v in eqn.invars]
        results = emit(Graph(ctx), operands)
        for var, value in zip(eqn.outvars, results):
            ctx.bind_value_for_var(var, value)


_REGISTERED = False


def register() -> None:
    """Registers jaxpool's plugins with jax2onnx (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    _snapshot()
    for export in ENTRIES:
        if export.plan is None:
            continue
        primitive = _make_primitive(export)
        _PRIMITIVES[export.op] = primitive
        attributes = {"_PRIM": primitive, "_EXPORT": export}
        plugin = type(f"_{export.op}_plugin", (_Plugin,), attributes)
        register_primitive(
            jaxpr_primitive=primitive.name,
            jax_doc=f"jaxpool.{export.op}",
            onnx=[{"component": export.onnx}] if export.listed else [],
            since="0.1.0",
            context="primitives.jaxpool",
            component=export.op,
        )(plugin)
    _REGISTERED = True


def _array_like(a: Any) -> Any:
    return a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)


def export(
    fn: Callable[..., Any],
    *example_args: Any,
    opset: int = 21,
    path: Any = None,
    **jax2onnx_kwargs: Any,
) -> Any:
    """See :func:`jaxpool.onnx.export`."""
    import jax2onnx
    import onnx

    register()
    inputs = [
        a if isinstance(a, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(np.shape(a), a.dtype)
        for a in map(_array_like, example_args)
    ]
    model = jax2onnx.to_onnx(fn, inputs, opset=opset, **jax2onnx_kwargs)
    if path is not None:
        onnx.save_model(model, path)
    return model
