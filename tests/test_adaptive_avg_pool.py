"""adaptive_avg_pool's integer averages against the OpenVINO runtime, on both programs (the
``class_program`` fixture).  Its other checks share their inputs with adaptive_max_pool's in
test_adaptive_max_pool.py: the runtime's averages, every form of the programs, NaN and
infinities, float64, PyTorch, gradients and the fuzzed output sizes."""

import numpy as np
import oracle
import pytest

import jaxpool


@pytest.mark.usefixtures("class_program")
class TestRuntime:
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
