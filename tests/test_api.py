"""The public API, as the README's API table specifies it (like dm-pix's api_test.py).

Every name in the public modules' ``__all__`` exists and is documented; the functions take
their first arguments by position and their options by keyword only, with the specified
defaults; the Flax modules take the functions' options, channels-last by default, and the
Equinox modules those options without a layout, after their number of spatial axes.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import re

import pytest

import jaxpool
import jaxpool.nn
import jaxpool.nn.eqx
import jaxpool.nn.linen
import jaxpool.nn.nnx
import jaxpool.onnx

K = inspect.Parameter.KEYWORD_ONLY
REQUIRED = inspect.Parameter.empty

# Public function -> its signature in the README's API table, written as Python's, from the
# parts that several share.
WINDOW = "x, kernel, strides=None, pads_begin=None, pads_end=None, *,"
RULES = "rounding_type='floor', auto_pad='explicit'"
NCX = "data_format='NCX'"
INDICES = "return_indices=False, index_element_type=None"
BOXES = "x, rois, batch_indices, output_size, *, spatial_scale=1.0, sampling_ratio=0,"
SIGNATURES = {
    "max_pool": f"{WINDOW} dilations=None, {RULES}, {NCX}, {INDICES}, axis=0",
    "avg_pool": f"{WINDOW} exclude_pad=False, dilations=None, {RULES}, {NCX}, "
    "divisor_rule='kernel', divisor_override=None, integer_division='round'",
    "lp_pool": f"{WINDOW} p=2, dilations=None, {RULES}, {NCX}",
    "adaptive_max_pool": f"x, output_size, *, {NCX}, {INDICES}",
    "adaptive_avg_pool": f"x, output_size, *, {NCX}",
    "fractional_max_pool": f"x, kernel, output_size, samples, *, {NCX}, {INDICES}",
    "max_unpool": f"y, indices, output_shape, *, axis, combine='sum', {NCX}, kernel=None, "
    f"strides=None, pads_begin=None, pads_end=None, dilations=None, {RULES}",
    "roi_pool": f"x, rois, output_size, *, spatial_scale=1.0, method='max', {NCX}",
    "roi_align": f"{BOXES} mode='avg', aligned_mode='asymmetric', {NCX}",
    "roi_align_rotated": f"{BOXES} clockwise=False, {NCX}",
    "psroi_align": f"{BOXES} aligned_mode='half_pixel_for_nn', {NCX}",
    "psroi_pool": "x, rois, output_dim, group_size, *, spatial_scale=1.0, mode='average', "
    f"spatial_bins=1, rounding='openvino', {NCX}",
    "deformable_psroi_pool": "x, rois, offsets=None, *, output_dim, group_size=1, "
    f"spatial_scale=1.0, spatial_bins=1, trans_std=1.0, part_size=None, {NCX}",
    "multilevel_roi_align": "features, rois, batch_indices, output_size, *, spatial_scales, "
    "sampling_ratio=0, mode='avg', aligned_mode=None, level_rule='torchvision', "
    f"canonical_size=224, canonical_level=4, {NCX}",
}
SIGNATURES["min_pool"] = SIGNATURES["max_pool"]
# The model importers, by their path under `jaxpool`.
IMPORTERS = {
    "openvino.layer": "xml_or_type, attrs=None, *, index_element_type=None",
    "onnx.node": "node, *, index_element_type=None, opset=None",
}
# Module -> its function's array arguments, which the module's call takes (the function of
# `MaxPool` is `max_pool`).
MODULES = dict.fromkeys(
    ["MaxPool", "MinPool", "AvgPool", "AdaptiveMaxPool", "AdaptiveAvgPool"], ("x",)
)
MODULES.update(MaxUnpool=("y", "indices", "output_shape"), LpPool=("x",))
PUBLIC_MODULES = [
    jaxpool,
    jaxpool.openvino,
    jaxpool.onnx,
    jaxpool.nn,
    jaxpool.nn.nnx,
    jaxpool.nn.linen,
    jaxpool.nn.eqx,
]


def _described(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _specified(signature):
    """``[(parameter, kind, default)]`` of a signature written as Python's."""
    return _described(eval(f"lambda {signature}: None"))  # the table's text, no other input


def _documented(obj):
    return bool(inspect.getdoc(obj) and inspect.getdoc(obj).strip())


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_public_name_is_documented_and_the_namespace_is_its_all(module):
    """What a user sees (``dir``, tab completion) is the module's ``__all__``: no imported
    helpers such as ``Any`` or ``jax``; submodules of a package may be loaded beside it."""
    assert module.__all__, f"{module.__name__}.__all__ is empty"
    assert len(set(module.__all__)) == len(module.__all__)
    assert _documented(module)
    for name in module.__all__:
        assert _documented(getattr(module, name)), f"{module.__name__}.{name} has no docstring"
    shown = {name for name in dir(module) if not name.startswith("_")}
    submodules = {
        name
        for name in shown
        if getattr(getattr(module, name), "__name__", "").startswith(module.__name__ + ".")
        and inspect.ismodule(getattr(module, name))
    }
    assert shown - submodules == set(module.__all__) - submodules, module.__name__


def test_the_specified_names_are_public():
    assert set(SIGNATURES) | {"openvino"} == set(jaxpool.__all__)  # every function specified
    assert {"layer", "Layer"} <= set(jaxpool.openvino.__all__)
    assert set(MODULES) | {"linen"} <= set(jaxpool.nn.__all__)
    assert set(MODULES) <= set(jaxpool.nn.linen.__all__)


@pytest.mark.parametrize("name", [*SIGNATURES, *IMPORTERS])
def test_function_signatures(name):
    """The first arguments by position, the options by keyword only, with their defaults."""
    signature = _specified(SIGNATURES.get(name) or IMPORTERS[name])
    assert _described(operator.attrgetter(name)(jaxpool)) == signature
    kinds = [kind for _, kind, _ in signature]
    assert K in kinds and all(kind == K for kind in kinds[kinds.index(K) :]), name


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_take_the_functions_options(name):
    """Flax NNX and Linen: the options channels-last by default, called on the arrays.
    Equinox: a keyword-only `num_spatial_dims` ahead of the keyword-only options, and neither
    `data_format` nor `axis` (NCX, indices in each channel's plane); its `MaxUnpool` keeps
    `combine` only."""
    arrays, function = MODULES[name], re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    options = [p for p in _specified(SIGNATURES[function]) if p[0] not in arrays]
    flax = [(n, kind, "NXC" if n == "data_format" else d) for n, kind, d in options]
    nnx = getattr(jaxpool.nn, name)
    assert [p for p in _described(nnx.__init__) if p[0] != "self"] == flax
    assert _described(nnx) == flax  # help() and the API pages, past NNX's metaclass
    linen = getattr(jaxpool.nn.linen, name)
    fields = [
        (f.name, REQUIRED if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(linen)
        if f.name not in ("parent", "name")
    ]
    assert fields == [(n, d) for n, _, d in flax]
    for cls in (nnx, linen):
        assert [p[0] for p in _described(cls.__call__) if p[0] != "self"] == list(arrays)
    keep = "combine" if name == "MaxUnpool" else None
    eqx = [p for p in options if p[0] not in ("data_format", "axis") and keep in (None, p[0])]
    first = next((i for i, p in enumerate(eqx) if p[1] == K), len(eqx))
    eqx.insert(first, ("num_spatial_dims", K, REQUIRED))
    assert _described(getattr(jaxpool.nn.eqx, name)) == eqx
