"""adaptive_avg_pool against the OpenVINO runtime (AdaptiveAvgPool-8) and
``tests/reference.py``; against PyTorch, check_grads and float64 with adaptive_max_pool in
test_adaptive_max_pool.py.

The runtime checks are a class whose tests run through the ``class_program`` fixture: once on
the portable program (what GPUs and TPUs run) and once on the CPU program.
"""

import cases
import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
import reference
import torch

import jaxpool

torch.set_num_threads(1)


SEEDS = range(100, 148)


def test_random_configurations_cover_every_dtype_and_layout():
    configs = [cases.adaptive_config(seed) for seed in SEEDS]
    assert {c["dtype"] for c in configs} == set(cases.ADAPTIVE_DTYPES)
    assert {len(c["shape"]) for c in configs} == {3, 4, 5}
    assert {(c["data_format"], c["ties"]) for c in configs} == {
        (f, t) for f in ("NCX", "NXC") for t in (False, True)
    }
    assert any(set(cases.runtime_size(c)) == {1} for c in configs if c["dtype"] == "int8")


@pytest.mark.usefixtures("class_program")
class TestRuntime:
    """The runtime's averages and special values, on both programs."""

    @pytest.mark.parametrize("seed", SEEDS)
    def test_matches_runtime(self, seed):
        cfg = cases.adaptive_config(seed)
        x = cases.adaptive_sample(
            np.random.default_rng(seed), cfg["dtype"], cfg["shape"], cfg["ties"]
        )
        x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
        if cfg["dtype"] in ("int8", "uint8", "int32") and set(cases.runtime_size(cfg)) == {1}:
            # The runtime's global integer average truncates (see below); its AvgPool rounds.
            expected = oracle.avg_pool(x_ov, list(x.shape[2:]))
        else:
            expected = oracle.adaptive_avg_pool(x_ov, cases.runtime_size(cfg))
        y = cases.call_in_layout(jaxpool.adaptive_avg_pool, x, cfg)
        assert y.dtype == x.dtype
        if cfg["dtype"] in ("int8", "uint8", "int32"):
            np.testing.assert_array_equal(y, expected)
        else:
            tol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 2e-6}[cfg["dtype"]]
            np.testing.assert_allclose(
                y.astype(np.float32), expected.astype(np.float32), rtol=tol, atol=tol
            )

    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    @pytest.mark.parametrize("form", range(len(cases.ADAPTIVE_FORMS)))
    def test_every_form_matches_runtime(self, form, data_format):
        """Each form the programs take (global, small bins in one chain, large bins one axis
        at a time), with and without ties, and its gradient: the transpose of the runtime's
        linear map."""
        cfg = cases.form_config(form, data_format)
        size = cases.runtime_size(cfg)
        rng = np.random.default_rng(form)
        for ties in (False, True):
            x = cases.adaptive_sample(rng, "float32", cfg["shape"], ties)
            y = cases.call_in_layout(jaxpool.adaptive_avg_pool, x, cfg)
            np.testing.assert_allclose(y, oracle.adaptive_avg_pool(x, size), rtol=2e-6, atol=1e-6)
        # The map is linear: check <f(v), w> = <v, grad> for a random v and w.
        w = rng.standard_normal(y.shape).astype(np.float32)
        grad = jax.jit(
            jax.grad(lambda a: jnp.sum(jaxpool.adaptive_avg_pool(a, cfg["output_size"]) * w))
        )(x)
        v = rng.standard_normal(x.shape).astype(np.float32)
        lhs = float(np.sum(oracle.adaptive_avg_pool(v, size) * w))
        assert abs(lhs - float(np.sum(v * np.asarray(grad)))) < 1e-4 * (1 + abs(lhs))

    @pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
    def test_integer_global_average_rounds(self, dtype):
        """To output size 1 the CPU runtime's integer AdaptiveAvgPool truncates toward zero and
        sums 8-bit inputs in their own type, saturating; ours rounds half to even like every other
        output size of the runtime and its AvgPool."""
        x = np.array([[[2, 3, 3, 3, 100, 100, 100, 100]]]).astype(dtype)
        for size in ([1], [2]):
            expected = oracle.avg_pool(x, 8 // size[0])
            np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x, size), expected)
        np.testing.assert_array_equal(
            jaxpool.adaptive_avg_pool(x[..., :4], 1),
            oracle.adaptive_avg_pool(x[..., :4], [2])[..., 1:],
        )
        assert oracle.adaptive_avg_pool(x[..., :4], [1])[0, 0, 0] == 2  # 2.75 truncated

    def test_output_size_none_and_identity(self, jit_mode):
        x = np.random.default_rng(2).standard_normal((2, 3, 4, 1, 5)).astype(np.float32)
        np.testing.assert_array_equal(
            jit_mode(lambda v: jaxpool.adaptive_avg_pool(v, (4, 1, 5)), x), x
        )
        np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x, (None, None, 5)), x)
        np.testing.assert_allclose(
            jaxpool.adaptive_avg_pool(x, (None, 1, 2)),
            oracle.adaptive_avg_pool(x, (4, 1, 2)),
            rtol=2e-6,
            atol=1e-6,
        )

    def test_specials(self):
        """NaN and infinities against tests/reference.py (NaN where NaN)."""
        x = np.concatenate([cases.special(seed) for seed in range(2)])  # along the batch axis
        for size in [(4, 4), (3, 5), (6, 2)]:
            np.testing.assert_allclose(
                np.asarray(jaxpool.adaptive_avg_pool(x, size)),
                reference.adaptive_avg_pool(x, size),
                rtol=1e-6,
            )


@cases.fuzz(40)
@hypothesis.given(cases.adaptive_cases())
def test_fuzz_against_reference(config):
    """Random output sizes, valid and invalid, against tests/reference.py."""
    x, size, fmt = config
    if not cases.valid_adaptive(x, size, fmt):
        with pytest.raises((ValueError, TypeError)):
            jaxpool.adaptive_avg_pool(cases.to_layout(x, fmt), size, data_format=fmt)
        return
    expected = reference.adaptive_avg_pool(x, size)
    y = cases.from_layout(
        jaxpool.adaptive_avg_pool(cases.to_layout(x, fmt), size, data_format=fmt), fmt
    )
    assert y.dtype == x.dtype
    if x.dtype.kind == "i":
        assert np.max(np.abs(y.astype(np.int64) - expected.astype(np.int64))) <= 1
    else:
        tol = 1e-3 if x.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(
            y.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol
        )
