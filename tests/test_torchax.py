"""torchax runs a PyTorch module's pooling through jaxpool.torch after `register_torchax()`.

The module pools as a ported network would, with the layers torchax has no lowering for
(adaptive max pooling with indices, fractional max pooling, Lp pooling) beside unpooling and
`divisor_override`; on the CPU its values, indices and input gradient under torchax equal
eager PyTorch's.
"""

import sys
import types
import unittest.mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import torch

import jaxpool.torch
from jaxpool._src.interop import torch as front_end


class Net(torch.nn.Module):
    def __init__(self, random_samples):
        super().__init__()
        self.adaptive = torch.nn.AdaptiveMaxPool2d((5, 4), return_indices=True)
        self.lp = torch.nn.LPPool2d(2, 3, stride=2, ceil_mode=True)
        self.fractional = torch.nn.FractionalMaxPool2d(3, output_size=(7, 6), return_indices=True)
        # Fixed samples, as a buffer so that torchax moves them with the module.
        del self.fractional._random_samples
        self.fractional.register_buffer("_random_samples", random_samples)
        self.pool = torch.nn.MaxPool2d(2, stride=2, return_indices=True)
        self.unpool = torch.nn.MaxUnpool2d(2, stride=2)
        self.avg = torch.nn.AvgPool2d(3, stride=2, padding=1, divisor_override=5)

    def forward(self, x):
        unpooled = self.unpool(*self.pool(x), output_size=x.shape[-2:])
        return (*self.adaptive(x), self.lp(x), *self.fractional(x), unpooled, self.avg(unpooled))


# The front end's functions the module reaches.
REACHED = [
    f"{family}2d"
    for family in ("adaptive_max_pool", "lp_pool", "fractional_max_pool", "max_pool", "max_unpool")
] + ["avg_pool2d"]


@pytest.fixture(scope="module")
def torchax():
    jaxpool.torch.register_torchax()
    import torchax

    return torchax


@pytest.fixture
def net():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 13, 11, generator=gen)
    samples = torch.rand(2, 3, 2, generator=gen)
    return Net(samples), x, samples


def _numpy(value):
    return np.asarray(jax.device_get(value.jax() if hasattr(value, "jax") else value))


def _assert_equal(got, expected):
    if isinstance(expected, torch.Tensor):
        got, expected = (got,), (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):  # indices: exactly, as integers differ by 1 or more
        g, e = _numpy(g), e.detach().numpy()
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_module_equals_eager_pytorch(torchax, net):
    """Its input gradient through ``torchax.extract_jax``, and its values and indices under
    torchax, through the front end's binders (which moves the module)."""
    module, x, _ = net
    x = x.requires_grad_()
    expected = module(x)
    floating = [0, 2, 3, 5, 6]
    sum(expected[i].sum() for i in floating).backward()
    params, fn = torchax.extract_jax(module)

    def loss(inputs):
        outputs = fn(params, (inputs,))
        return sum(outputs[i].sum() for i in floating)

    got = jax.grad(loss)(jnp.asarray(x.detach().numpy()))
    np.testing.assert_allclose(np.asarray(got), x.grad.numpy(), rtol=1e-6, atol=1e-6)

    spies = {n: unittest.mock.Mock(wraps=getattr(jaxpool.torch, n)) for n in REACHED}
    with unittest.mock.patch.dict(front_end.BINDERS, spies), torchax.default_env():
        got = module.to("jax")(x.detach().to("jax"))
    assert [n for n, spy in spies.items() if not spy.called] == []
    _assert_equal(got, expected)


def _samples(*shape):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(2))


# aten operators called directly (as a `torch.export`-ed program calls them), with their
# schemas' conventions: lists, `stride=[]` for the kernel's, trailing defaults left out.
ATEN_CASES = [
    ("max_pool2d_with_indices", (2, 3, 9, 8), ([3, 2], [], [1, 0], [1, 2], True)),
    ("max_pool3d_with_indices", (2, 5, 6, 7), ([2, 3, 2], [2, 1, 2])),
    ("avg_pool2d", (2, 3, 9, 8), ([3, 2], [2, 2], [1, 1], True, False, 4)),
    ("avg_pool2d", (3, 9, 8), ([3, 3],)),
    ("avg_pool3d", (2, 2, 5, 6, 7), ([2, 3, 2], [], 1, False, True)),
    ("adaptive_max_pool2d", (2, 3, 9, 8), ([4, 3],)),
    ("adaptive_max_pool3d", (2, 2, 5, 6, 7), ([2, 4, 3],)),
    ("_adaptive_avg_pool2d", (2, 3, 9, 8), ([4, 3],)),
    ("_adaptive_avg_pool3d", (2, 5, 6, 7), ([2, 4, 3],)),
    ("fractional_max_pool2d", (2, 3, 11, 9), ([3, 2], [5, 4], _samples(2, 3, 2))),
    ("fractional_max_pool3d", (2, 3, 11, 9, 8), ([3, 2, 2], [5, 4, 3], _samples(2, 3, 3))),
]


@pytest.mark.parametrize(("name", "shape", "args"), ATEN_CASES)
def test_aten_operator_equals_pytorch(torchax, name, shape, args):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    inputs = [x]
    if name.startswith(("max_pool", "adaptive_max")):
        # A third NaN, and inf and -inf: windows of several NaNs, whose index is PyTorch's last
        # NaN, and of infinite ties.
        u = torch.rand(*shape, generator=torch.Generator().manual_seed(3))
        x = torch.where(u < 0.3, float("nan"), torch.where(u < 0.4, float("inf"), x))
        inputs.append(torch.where((u >= 0.4) & (u < 0.5), float("-inf"), x))
    operator = getattr(torch.ops.aten, name).default
    for x in inputs:
        expected = operator(x, *args)
        with torchax.default_env():
            jax_args = [a.to("jax") if isinstance(a, torch.Tensor) else a for a in args]
            got = operator(x.to("jax"), *jax_args)
        _assert_equal(got, expected)


@pytest.mark.parametrize("n", [2, 3])
def test_aten_max_unpool_equals_pytorch(torchax, n):
    """The operator carries only ``output_size``: the indices are checked against it."""
    x = torch.randn(2, 3, *(9, 8, 6)[:n], generator=torch.Generator().manual_seed(3))
    values, indices = getattr(torch.nn.functional, f"max_pool{n}d")(x, 2, return_indices=True)
    operator = getattr(torch.ops.aten, f"max_unpool{n}d").default
    size = list(x.shape[2:])
    extra = ([2] * n, [0] * n) if n == 3 else ()
    expected = operator(values, indices, size, *extra)
    with torchax.default_env():
        got = operator(values.to("jax"), indices.to("jax"), size, *extra)
        _assert_equal(got, expected)
        with pytest.raises(ValueError, match="outside `output_shape`"):
            operator(values.to("jax"), indices.to("jax"), [s - 2 for s in size], *extra)


# torchvision's operator schemas (its csrc/ops), which `register_torchax` binds where torchvision
# imports.
_REGION = (
    "(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width"
)
TORCHVISION_SCHEMAS = [
    f"roi_align{_REGION}, int sampling_ratio, bool aligned) -> Tensor",
    f"roi_pool{_REGION}) -> (Tensor, Tensor)",
    f"ps_roi_align{_REGION}, int sampling_ratio) -> (Tensor, Tensor)",
    f"ps_roi_pool{_REGION}) -> (Tensor, Tensor)",
]


@pytest.fixture(scope="module")
def torchvision_ops(torchax):
    """``torch.ops.torchvision`` with jaxpool's bindings under torchax: torchvision's own
    operators where it is installed, else their schemas alone (no kernel of their own)."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        library = torch.library.Library("torchvision", "DEF")
        for schema in TORCHVISION_SCHEMAS:
            library.define(schema)
        stub = types.ModuleType("torchvision")
        with unittest.mock.patch.dict(sys.modules, {"torchvision": stub}):
            jaxpool.torch.register_torchax()
        yield torch.ops.torchvision
        del library  # its schemas go with it
        return
    yield torch.ops.torchvision


# (batch_index, x_1, y_1, x_2, y_2) rows at spatial_scale 0.5: inside the map, across its
# border, inverted, larger than the map, on a plane of NaN and -inf, outside the batch.
ROI_POOL_ROWS = [
    [0.0, 1.0, 2.0, 12.0, 14.0],
    [1.0, -6.0, -3.0, 9.0, 7.0],
    [0.0, 10.0, 9.0, 2.0, 3.0],
    [1.0, -20.0, -15.0, 40.0, 35.0],
    [1.0, 0.0, 0.0, 7.0, 17.0],
    [2.0, 0.0, 0.0, 4.0, 4.0],
]


class RoiPool(torch.nn.Module):
    def __init__(self, rois):
        super().__init__()
        self.register_buffer("rois", rois)

    def forward(self, x):
        return torch.ops.torchvision.roi_pool(x, self.rois, 0.5, 3, 2)


def test_torchvision_roi_pool_returns_its_argmax(torchax, torchvision_ops):
    """The values and torchvision's argmax; the gradient flows through the values, to each
    output's argmax (torchvision's backward)."""
    x = torch.randn(2, 3, 9, 8, generator=torch.Generator().manual_seed(4))
    x[0, 1, 1:4, 0:3] = float("nan")  # never torchvision's maximum
    x[1, 0, :, :4] = float("-inf")  # nothing above -FLT_MAX: argmax -1
    x[1, 2, 5:, 2:5] = x[1, 2, 5, 2]  # ties: the first in row-major order
    rois = torch.tensor(ROI_POOL_ROWS)
    want, argmax = reference.torchvision_roi_pool(x.numpy(), rois.numpy(), (3, 2), 0.5)
    with torchax.default_env():
        y, got = torchvision_ops.roi_pool.default(x.to("jax"), rois.to("jax"), 0.5, 3, 2)
    assert _numpy(got).dtype == np.int32  # as torchvision's kernels make it
    np.testing.assert_array_equal(_numpy(y), want)
    np.testing.assert_array_equal(_numpy(got), argmax)

    ct = np.random.default_rng(5).standard_normal(want.shape).astype(np.float32)
    params, fn = torchax.extract_jax(RoiPool(rois))

    def loss(inputs):
        values, _ = fn(params, (inputs,))
        return (values * ct).sum()

    got = jax.grad(loss)(jnp.asarray(x.numpy()))
    expected = reference.torchvision_roi_pool_backward(ct, rois.numpy(), argmax, x.shape)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-6)


def test_torchax_alone_has_no_fractional_max_pool(torchax, net):
    # A fresh environment holds torchax's own lowerings only: this is jaxpool's.
    _, x, samples = net
    fresh = torchax.tensor.Environment()
    with fresh, pytest.raises(torchax.tensor.OperatorNotFound):
        torch.ops.aten.fractional_max_pool2d(x.to("jax"), [3, 3], [7, 6], samples.to("jax"))
    operator = torchax.default_env()._ops[torch.ops.aten.fractional_max_pool2d.default]
    assert operator.is_user_defined


def test_missing_torchax_is_an_import_error():
    with unittest.mock.patch.dict(sys.modules, {"torchax": None}):
        with pytest.raises(ImportError, match="needs torchax"):
            jaxpool.torch.register_torchax()
