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


def max_pool(model, size, kernel, stride, padding, ceil_mode):
    rounding_type = "ceil_torch" if ceil_mode else "floor"
    return pytest.param(
        size,
        lambda v: F.max_pool2d(
            v, kernel, stride, padding, ceil_mode=ceil_mode, return_indices=True
        ),
        lambda v: jaxpool.max_pool(
            v,
            kernel,
            stride,
            padding,
            padding,
            rounding_type=rounding_type,
            return_indices=True,
            axis=2,
        ),
        None,
        id=f"max_pool-{model}-{size}",
    )


def adaptive(model, size, output_size):
    """AdaptiveAvgPool2d, and AdaptiveMaxPool2d of the same bins (the same options)."""
    return [
        pytest.param(
            size,
            lambda v: F.adaptive_avg_pool2d(v, output_size),
            lambda v: jaxpool.adaptive_avg_pool(v, output_size),
            1e-7,
            id=f"adaptive_avg_pool-{model}-{size}",
        ),
        pytest.param(
            size,
            lambda v: F.adaptive_max_pool2d(v, output_size, return_indices=True),
            lambda v: jaxpool.adaptive_max_pool(v, output_size, return_indices=True),
            None,
            id=f"adaptive_max_pool-{model}-{size}",
        ),
    ]


def avg_pool(model, size, kernel, stride, padding):
    """F.avg_pool2d in Inception v3's blocks."""
    return pytest.param(
        size,
        lambda v: F.avg_pool2d(v, kernel, stride, padding),
        lambda v: jaxpool.avg_pool(v, kernel, stride, padding, padding),
        1e-6,
        id=f"avg_pool-{model}-{size}",
    )


LAYERS = [
    *(max_pool("alexnet", size, 3, 2, 0, False) for size in (55, 27, 13)),
    *(max_pool("squeezenet", size, 3, 2, 0, True) for size in (111, 55, 27)),
    *(max_pool("googlenet", size, 3, 2, 0, True) for size in (112, 56, 28)),
    max_pool("googlenet", 14, 2, 2, 0, True),
    *(max_pool("googlenet-branch", size, 3, 1, 1, True) for size in (28, 14, 7)),
    max_pool("resnet", 112, 3, 2, 1, False),
    *(max_pool("inception3", size, 3, 2, 0, False) for size in (147, 71, 35, 17)),
    *(max_pool("vgg", size, 2, 2, 0, False) for size in (224, 28, 14)),
    *adaptive("alexnet", 6, (6, 6)),
    *adaptive("alexnet", 13, (6, 6)),
    *adaptive("resnet", 7, 1),
    *adaptive("inception3", 8, 1),
    *adaptive("googlenet", 7, 1),
    *adaptive("vgg", 7, 7),
    *adaptive("vgg-small-input", 3, 7),
    *(avg_pool("inception3", size, 3, 1, 1) for size in (35, 17, 8)),
]


@pytest.mark.parametrize("size,torch_layer,layer,grad_atol", LAYERS)
def test_layer_equals_torch(size, torch_layer, layer, grad_atol):
    """Values, indices and the input gradient of a random cotangent, on tie-free values (so
    argmax positions and gradients are unambiguous)."""
    rng = np.random.default_rng(size)
    n = 2 * 2 * size * size
    x = (rng.permutation(n).reshape(2, 2, size, size) / n).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    expected = torch_layer(xt)
    expected = expected if isinstance(expected, tuple) else (expected,)
    g = rng.standard_normal(tuple(expected[0].shape)).astype(np.float32)
    expected[0].backward(torch.tensor(g))
    got, vjp = jax.vjp(layer, x)
    if len(expected) == 2:  # the maxima: equal bits
        y, i = got
        np.testing.assert_array_equal(y, expected[0].detach().numpy())
        np.testing.assert_array_equal(i, expected[1].numpy())
        (grad,) = vjp((jnp.asarray(g), np.zeros(i.shape, jax.dtypes.float0)))
        reference.assert_sums_equal(grad, xt.grad.numpy())
    else:  # the averages: float32 rounding (avg_pool's gradient sums up to 9 cotangents)
        np.testing.assert_allclose(got, expected[0].detach().numpy(), rtol=1e-6, atol=1e-7)
        grad = vjp(jnp.asarray(g))[0]
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-6, atol=grad_atol)
