"""Every pooling layer of the torchvision classification models, against torch.nn.functional.

The layer configurations (and the spatial sizes they see on a 224x224 image, 299x299 for
Inception v3) are those of torchvision's model definitions; the channels are reduced.
PyTorch's ceil_mode is rounding_type="ceil_torch", its return_indices our axis=2 indices, and
its avg_pool2d with padding (count_include_pad=True) OpenVINO's exclude_pad=False.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import torch

import jaxpool

torch.set_num_threads(1)

F = torch.nn.functional

# (model, input spatial size, kernel, stride, padding, ceil_mode)
MAX_POOLS = [
    ("alexnet", 55, 3, 2, 0, False),
    ("alexnet", 27, 3, 2, 0, False),
    ("alexnet", 13, 3, 2, 0, False),
    ("squeezenet", 111, 3, 2, 0, True),
    ("squeezenet", 55, 3, 2, 0, True),
    ("squeezenet", 27, 3, 2, 0, True),
    ("googlenet", 112, 3, 2, 0, True),
    ("googlenet", 56, 3, 2, 0, True),
    ("googlenet", 28, 3, 2, 0, True),
    ("googlenet", 14, 2, 2, 0, True),
    ("googlenet-branch", 28, 3, 1, 1, True),
    ("googlenet-branch", 14, 3, 1, 1, True),
    ("googlenet-branch", 7, 3, 1, 1, True),
    ("resnet", 112, 3, 2, 1, False),
    ("inception3", 147, 3, 2, 0, False),
    ("inception3", 71, 3, 2, 0, False),
    ("inception3", 35, 3, 2, 0, False),
    ("inception3", 17, 3, 2, 0, False),
    ("vgg", 224, 2, 2, 0, False),
    ("vgg", 28, 2, 2, 0, False),
    ("vgg", 14, 2, 2, 0, False),
]

# (model, input spatial size, output size)
ADAPTIVE_AVG = [
    ("alexnet", 6, (6, 6)),
    ("alexnet", 13, (6, 6)),
    ("resnet", 7, 1),
    ("inception3", 8, 1),
    ("googlenet", 7, 1),
    ("vgg", 7, 7),
    ("vgg-small-input", 3, 7),
]

# (model, input spatial size, kernel, stride, padding): F.avg_pool2d in Inception v3 blocks.
AVG_POOLS = [("inception3", 35, 3, 1, 1), ("inception3", 17, 3, 1, 1), ("inception3", 8, 3, 1, 1)]


def _input(size, seed, channels=2):
    """Tie-free values (so argmax positions and gradients are unambiguous)."""
    rng = np.random.default_rng(seed)
    n = 2 * channels * size * size
    return (rng.permutation(n).reshape(2, channels, size, size) / n).astype(np.float32)


def _torch_vjp(fn, x, rng):
    xt = torch.tensor(x, requires_grad=True)
    out = fn(xt)
    y = out[0] if isinstance(out, tuple) else out
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(torch.tensor(g))
    rest = tuple(o.numpy() for o in out[1:]) if isinstance(out, tuple) else ()
    return (y.detach().numpy(), *rest), g, xt.grad.numpy()


@pytest.mark.parametrize("model,size,kernel,stride,padding,ceil_mode", MAX_POOLS)
def test_max_pool(model, size, kernel, stride, padding, ceil_mode):
    x = _input(size, size)
    rng = np.random.default_rng(0)
    (expected, expected_i), g, expected_grad = _torch_vjp(
        lambda v: F.max_pool2d(
            v, kernel, stride, padding, ceil_mode=ceil_mode, return_indices=True
        ),
        x,
        rng,
    )
    rounding_type = "ceil_torch" if ceil_mode else "floor"

    def pool(v):
        return jaxpool.max_pool(
            v,
            kernel,
            stride,
            padding,
            padding,
            rounding_type=rounding_type,
            return_indices=True,
            axis=2,
        )

    (y, i), vjp = jax.vjp(pool, x)
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(i, expected_i)
    (grad,) = vjp((jnp.asarray(g), np.zeros(i.shape, jax.dtypes.float0)))
    reference.assert_sums_equal(grad, expected_grad)


@pytest.mark.parametrize("model,size,output_size", ADAPTIVE_AVG)
def test_adaptive_avg_pool(model, size, output_size):
    x = _input(size, size + 1)
    (expected,), g, expected_grad = _torch_vjp(
        lambda v: F.adaptive_avg_pool2d(v, output_size), x, np.random.default_rng(1)
    )
    y, vjp = jax.vjp(lambda v: jaxpool.adaptive_avg_pool(v, output_size), x)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(vjp(jnp.asarray(g))[0], expected_grad, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("model,size,output_size", ADAPTIVE_AVG)
def test_adaptive_max_pool(model, size, output_size):
    """The same bins, for the max (AdaptiveMaxPool2d has the same configuration options)."""
    x = _input(size, size + 2)
    (expected, expected_i), g, expected_grad = _torch_vjp(
        lambda v: F.adaptive_max_pool2d(v, output_size, return_indices=True),
        x,
        np.random.default_rng(2),
    )
    (y, i), vjp = jax.vjp(
        lambda v: jaxpool.adaptive_max_pool(v, output_size, return_indices=True), x
    )
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(i, expected_i)
    (grad,) = vjp((jnp.asarray(g), np.zeros(i.shape, jax.dtypes.float0)))
    reference.assert_sums_equal(grad, expected_grad)


@pytest.mark.parametrize("model,size,kernel,stride,padding", AVG_POOLS)
def test_avg_pool(model, size, kernel, stride, padding):
    x = _input(size, size + 3)
    (expected,), g, expected_grad = _torch_vjp(
        lambda v: F.avg_pool2d(v, kernel, stride, padding), x, np.random.default_rng(3)
    )
    y, vjp = jax.vjp(lambda v: jaxpool.avg_pool(v, kernel, stride, padding, padding), x)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(vjp(jnp.asarray(g))[0], expected_grad, rtol=1e-6, atol=1e-6)
