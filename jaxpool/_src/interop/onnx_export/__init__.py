"""The implementation of :func:`jaxpool.onnx.export`: jaxpool's ops as ONNX nodes, through
jax2onnx (imported here, and this package only on first use).

While jax2onnx traces a model, :mod:`jaxpool._src.exporting` sends every call of a public op to
the exporter (:mod:`.core`), which binds the op's primitive (``jaxpool_<op>``) with the call's
arrays as operands and every other argument as a parameter.  The primitive's abstract evaluation
and implementation are the op itself, so shapes, dtypes and errors are the op's.  jax2onnx then
lowers each primitive through the op's entry (:class:`.entry.Export`): its *plan*, a function
from the call (its parameters, the shapes and dtypes of its operands and results) to the writer
of the nodes that compute it, which refuses with a ``ValueError`` what ONNX cannot express
exactly.  Each call is planned once, where the model calls the op (so a refusal names it
there), and its writer is used again where jax2onnx lowers the primitive; what depends on the
opset (a node's version, an attribute it gained) is read from the graph as the nodes are
written.

Each family's module holds its entries (:mod:`.windows`, :mod:`.adaptive`, :mod:`.unpool`,
:mod:`.regions`); an entry is also its op's row of the docs' table (:data:`TABLE`: whether the
op exports as its ONNX node, as a composition of nodes, or not at all, and why) and its rule
under ``vmap``.
"""

from jaxpool._src.interop.onnx_export.core import EXPORTS, TABLE, export, register
from jaxpool._src.interop.onnx_export.entry import Export, Row

__all__ = ["EXPORTS", "TABLE", "Export", "Row", "export", "register"]
