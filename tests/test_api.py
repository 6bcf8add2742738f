"""The public API, as the README's API table specifies it (like dm-pix's api_test.py).

Every name in ``jaxpool.__all__``, ``jaxpool.openvino.__all__``, ``jaxpool.nn.__all__`` and
``jaxpool.nn.linen.__all__`` exists and is documented; the functions take their first
arguments by position and their options by keyword only, with the specified defaults; the
Flax modules take the functions' options, channels-last by default.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import jaxpool
import jaxpool.nn
import jaxpool.nn.eqx
import jaxpool.nn.linen
import jaxpool.nn.nnx
import jaxpool.onnx

P, K = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
REQUIRED = inspect.Parameter.empty

# name -> [(parameter, kind, default)], from the README's API table.
SIGNATURES = {
    "max_pool": [
        ("x", P, REQUIRED),
        ("kernel", P, REQUIRED),
        ("strides", P, None),
        ("pads_begin", P, None),
        ("pads_end", P, None),
        ("dilations", K, None),
        ("rounding_type", K, "floor"),
        ("auto_pad", K, "explicit"),
        ("data_format", K, "NCX"),
        ("return_indices", K, False),
        ("index_element_type", K, None),
        ("axis", K, 0),
    ],
    "min_pool": [
        ("x", P, REQUIRED),
        ("kernel", P, REQUIRED),
        ("strides", P, None),
        ("pads_begin", P, None),
        ("pads_end", P, None),
        ("dilations", K, None),
        ("rounding_type", K, "floor"),
        ("auto_pad", K, "explicit"),
        ("data_format", K, "NCX"),
        ("return_indices", K, False),
        ("index_element_type", K, None),
        ("axis", K, 0),
    ],
    "avg_pool": [
        ("x", P, REQUIRED),
        ("kernel", P, REQUIRED),
        ("strides", P, None),
        ("pads_begin", P, None),
        ("pads_end", P, None),
        ("exclude_pad", K, False),
        ("dilations", K, None),
        ("rounding_type", K, "floor"),
        ("auto_pad", K, "explicit"),
        ("data_format", K, "NCX"),
        ("divisor_rule", K, "kernel"),
        ("divisor_override", K, None),
        ("integer_division", K, "round"),
    ],
    "lp_pool": [
        ("x", P, REQUIRED),
        ("kernel", P, REQUIRED),
        ("strides", P, None),
        ("pads_begin", P, None),
        ("pads_end", P, None),
        ("p", K, 2),
        ("dilations", K, None),
        ("rounding_type", K, "floor"),
        ("auto_pad", K, "explicit"),
        ("data_format", K, "NCX"),
    ],
    "adaptive_max_pool": [
        ("x", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("data_format", K, "NCX"),
        ("return_indices", K, False),
        ("index_element_type", K, None),
    ],
    "adaptive_avg_pool": [
        ("x", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("data_format", K, "NCX"),
    ],
    "fractional_max_pool": [
        ("x", P, REQUIRED),
        ("kernel", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("samples", P, REQUIRED),
        ("data_format", K, "NCX"),
        ("return_indices", K, False),
        ("index_element_type", K, None),
    ],
    "max_unpool": [
        ("y", P, REQUIRED),
        ("indices", P, REQUIRED),
        ("output_shape", P, REQUIRED),
        ("axis", K, REQUIRED),
        ("combine", K, "sum"),
        ("data_format", K, "NCX"),
        ("kernel", K, None),
        ("strides", K, None),
        ("pads_begin", K, None),
        ("pads_end", K, None),
        ("dilations", K, None),
        ("rounding_type", K, "floor"),
        ("auto_pad", K, "explicit"),
    ],
    "roi_pool": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("spatial_scale", K, 1.0),
        ("method", K, "max"),
        ("data_format", K, "NCX"),
    ],
    "roi_align": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("batch_indices", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("spatial_scale", K, 1.0),
        ("sampling_ratio", K, 0),
        ("mode", K, "avg"),
        ("aligned_mode", K, "asymmetric"),
        ("data_format", K, "NCX"),
    ],
    "roi_align_rotated": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("batch_indices", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("spatial_scale", K, 1.0),
        ("sampling_ratio", K, 0),
        ("clockwise", K, False),
        ("data_format", K, "NCX"),
    ],
    "psroi_align": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("batch_indices", P, REQUIRED),
        ("output_size", P, REQUIRED),
        ("spatial_scale", K, 1.0),
        ("sampling_ratio", K, 0),
        ("aligned_mode", K, "half_pixel_for_nn"),
        ("data_format", K, "NCX"),
    ],
    "psroi_pool": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("output_dim", P, REQUIRED),
        ("group_size", P, REQUIRED),
        ("spatial_scale", K, 1.0),
        ("mode", K, "average"),
        ("spatial_bins", K, 1),
        ("rounding", K, "openvino"),
        ("data_format", K, "NCX"),
    ],
    "deformable_psroi_pool": [
        ("x", P, REQUIRED),
        ("rois", P, REQUIRED),
        ("offsets", P, None),
        ("output_dim", K, REQUIRED),
        ("group_size", K, 1),
        ("spatial_scale", K, 1.0),
        ("spatial_bins", K, 1),
        ("trans_std", K, 1.0),
        ("part_size", K, None),
        ("data_format", K, "NCX"),
    ],
}
LAYER_SIGNATURE = [
    ("xml_or_type", P, REQUIRED),
    ("attrs", P, None),
    ("index_element_type", K, None),
]
NODE_SIGNATURE = [("node", P, REQUIRED), ("index_element_type", K, None), ("opset", K, None)]
# Module -> (function, the function's array arguments, which the module's call takes).
MODULES = {
    "MaxPool": ("max_pool", ("x",)),
    "MinPool": ("min_pool", ("x",)),
    "AvgPool": ("avg_pool", ("x",)),
    "AdaptiveMaxPool": ("adaptive_max_pool", ("x",)),
    "AdaptiveAvgPool": ("adaptive_avg_pool", ("x",)),
    "MaxUnpool": ("max_unpool", ("y", "indices", "output_shape")),
    "LpPool": ("lp_pool", ("x",)),
}


def _public(module):
    return [(name, getattr(module, name)) for name in module.__all__]


def _documented(obj):
    return bool(inspect.getdoc(obj) and inspect.getdoc(obj).strip())


def _described(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


PUBLIC_MODULES = [
    jaxpool,
    jaxpool.openvino,
    jaxpool.onnx,
    jaxpool.nn,
    jaxpool.nn.nnx,
    jaxpool.nn.linen,
    jaxpool.nn.eqx,
]


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_public_name_exists_and_is_documented(module):
    assert module.__all__, f"{module.__name__}.__all__ is empty"
    assert len(set(module.__all__)) == len(module.__all__)
    assert _documented(module)
    for name, obj in _public(module):
        assert _documented(obj), f"{module.__name__}.{name} has no docstring"


def test_the_specified_names_are_public():
    assert set(SIGNATURES) | {"openvino"} <= set(jaxpool.__all__)
    assert {"layer", "Layer"} <= set(jaxpool.openvino.__all__)
    assert set(MODULES) <= set(jaxpool.nn.__all__)
    assert {"linen"} <= set(jaxpool.nn.__all__)
    assert set(MODULES) <= set(jaxpool.nn.linen.__all__)


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_function_signatures(name):
    """The first arguments by position, the options by keyword only, with their defaults."""
    assert _described(getattr(jaxpool, name)) == SIGNATURES[name]


def test_public_functions_take_options_by_keyword_only():
    for name, obj in _public(jaxpool):
        if not inspect.isfunction(obj):
            continue
        kinds = [p.kind for p in inspect.signature(obj).parameters.values()]
        assert K in kinds, f"jaxpool.{name} takes every option by position"
        first = kinds.index(K)
        assert all(kind == K for kind in kinds[first:]), name


def test_openvino_layer_signature():
    assert _described(jaxpool.openvino.layer) == LAYER_SIGNATURE


def test_onnx_node_signature():
    assert _described(jaxpool.onnx.node) == NODE_SIGNATURE


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_public_namespace_is_its_all(module):
    """What a user sees (``dir``, tab completion) is the module's ``__all__``: no imported
    helpers such as ``Any`` or ``jax``; submodules of a package may be loaded beside it."""
    shown = {name for name in dir(module) if not name.startswith("_")}
    submodules = {
        name
        for name in shown
        if getattr(getattr(module, name), "__name__", "").startswith(module.__name__ + ".")
        and inspect.ismodule(getattr(module, name))
    }
    assert shown - submodules == set(module.__all__) - submodules, module.__name__


def _options(function, arrays):
    """The function's options as a module takes them: channels-last by default."""
    return [
        (name, kind, "NXC" if name == "data_format" else default)
        for name, kind, default in SIGNATURES[function]
        if name not in arrays
    ]


@pytest.mark.parametrize("name", list(MODULES))
def test_nnx_modules_take_the_functions_options(name):
    function, arrays = MODULES[name]
    cls = getattr(jaxpool.nn, name)
    init = [p for p in _described(cls.__init__) if p[0] != "self"]
    assert init == _options(function, arrays)
    call = [p[0] for p in _described(cls.__call__) if p[0] != "self"]
    assert call == list(arrays)


@pytest.mark.parametrize("name", list(MODULES))
def test_linen_modules_take_the_functions_options(name):
    function, arrays = MODULES[name]
    cls = getattr(jaxpool.nn.linen, name)
    fields = [
        (f.name, REQUIRED if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(cls)
        if f.name not in ("parent", "name")
    ]
    assert fields == [(n, d) for n, _, d in _options(function, arrays)]
    call = [p[0] for p in _described(cls.__call__) if p[0] != "self"]
    assert call == list(arrays)
