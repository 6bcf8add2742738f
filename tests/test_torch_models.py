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

# (layer, model, sizes, arguments): max_pool's kernel, stride, padding and ceil_mode; avg_pool's
# (F.avg_pool2d in Inception v3's blocks) kernel, stride and padding; adaptive's output size,
# for AdaptiveAvgPool2d and AdaptiveMaxPool2d of the same bins.
MODELS = [
    ("max_pool", "alexnet", (55, 27, 13), (3, 2, 0, False)),
    ("max_pool", "squeezenet", (111, 55, 27), (3, 2, 0, True)),
    ("max_pool", "googlenet", (112, 56, 28), (3, 2, 0, True)),
    ("max_pool", "googlenet", (14,), (2, 2, 0, True)),
    ("max_pool", "googlenet-branch", (28, 14, 7), (3, 1, 1, True)),
    ("max_pool", "resnet", (112,), (3, 2, 1, False)),
    ("max_pool", "inception3", (147, 71, 35, 17), (3, 2, 0, False)),
    ("max_pool", "vgg", (224, 28, 14), (2, 2, 0, False)),
    ("adaptive", "alexnet", (6, 13), ((6, 6),)),
    ("adaptive", "resnet", (7,), (1,)),
    ("adaptive", "inception3", (8,), (1,)),
    ("adaptive", "googlenet", (7,), (1,)),
    ("adaptive", "vgg", (7,), (7,)),
    ("adaptive", "vgg-small-input", (3,), (7,)),
    ("avg_pool", "inception3", (35, 17, 8), (3, 1, 1)),
]
LAYERS = [
    pytest.param(layer, size, args, id=f"{layer}-{model}-{size}")
    for kind, model, sizes, args in MODELS
    for layer in (("adaptive_avg_pool", "adaptive_max_pool") if kind == "adaptive" else (kind,))
    for size in sizes
]


def layers(name, args):
    """The torch.nn.functional layer and jaxpool's, with PyTorch's options."""
    if name == "max_pool":
        k, s, p, ceil_mode = args
        rounding_type = "ceil_torch" if ceil_mode else "floor"
        return (
            lambda v: F.max_pool2d(v, k, s, p, ceil_mode=ceil_mode, return_indices=True),
            lambda v: jaxpool.max_pool(
                v, k, s, p, p, rounding_type=rounding_type, return_indices=True, axis=2
            ),
        )
    if name == "avg_pool":
        k, s, p = args
        return lambda v: F.avg_pool2d(v, k, s, p), lambda v: jaxpool.avg_pool(v, k, s, p, p)
    indices = dict(return_indices=True) if name == "adaptive_max_pool" else {}
    return (
        lambda v: getattr(F, f"{name}2d")(v, *args, **indices),
        lambda v: getattr(jaxpool, name)(v, *args, **indices),
    )


@pytest.mark.parametrize("name,size,args", LAYERS)
def test_layer_equals_torch(name, size, args):
    """Values, indices and the input gradient of a random cotangent, on tie-free values (so
    argmax positions and gradients are unambiguous)."""
    torch_layer, layer = layers(name, args)
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
        grad_atol = 1e-6 if name == "avg_pool" else 1e-7
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-6, atol=grad_atol)
