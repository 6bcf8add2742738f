"""Quickstart: pool a photograph with jaxpool, keep the argmax indices, and unpool.

    python examples/quickstart.py [output.png]

Prints the shapes and a few values, and saves a figure when matplotlib is installed: to
``output.png`` if given, else into the system's temporary directory (the path is printed).
"""

from __future__ import annotations

import os
import sys
import tempfile

import jax.numpy as jnp
import numpy as np

import jaxpool


def load_image() -> np.ndarray:
    """The 'china.jpg' sample photograph shipped with scikit-learn, or a procedural one."""
    try:
        from sklearn.datasets import load_sample_image

        return load_sample_image("china.jpg")
    except ImportError:
        r, c = np.mgrid[0:240, 0:360]
        rings = 0.5 + 0.5 * np.sin(np.hypot(r - 120, c - 180) / 6.0)
        return (255 * np.stack([rings, r / 240, c / 360], -1)).astype(np.uint8)


def main(out_path: str | None = None, size: int = 96) -> dict:
    """Pools the image shrunk to ``size`` rows; returns the arrays it shows.  The figure goes
    to ``out_path``, or into the temporary directory when it is ``None``."""
    if out_path is None:
        out_path = os.path.join(tempfile.gettempdir(), "jaxpool_quickstart.png")
    image = jnp.asarray(load_image(), jnp.float32)[None] / 255.0  # [1, H, W, 3], channels-last
    width = size * image.shape[2] // image.shape[1]
    small = jaxpool.adaptive_avg_pool(image, (size, width), data_format="NXC")
    print(f"image {image.shape} -> adaptive_avg_pool {small.shape}")

    pooled = jaxpool.max_pool(small, 3, 2, auto_pad="same_upper", data_format="NXC")
    print(f"max_pool(kernel=3, strides=2, same_upper): {pooled.shape}")

    coarse, indices = jaxpool.adaptive_max_pool(
        small, (size // 8, width // 8), data_format="NXC", return_indices=True
    )
    print(
        f"adaptive_max_pool to {coarse.shape[1:3]}: values {coarse.shape}, "
        f"indices {indices.shape} {indices.dtype}"
    )
    print(
        f"  red channel, top-left bin: max {float(coarse[0, 0, 0, 0]):.3f} at spatial index "
        f"{int(indices[0, 0, 0, 0])} = row {int(indices[0, 0, 0, 0]) // width}, "
        f"column {int(indices[0, 0, 0, 0]) % width}"
    )

    sparse = jaxpool.max_unpool(coarse, indices, small.shape, axis=2, data_format="NXC")
    kept = int(jnp.count_nonzero(sparse.sum(-1)))
    print(f"max_unpool back to {sparse.shape}: {kept} of {size * width} pixels hold a maximum")

    if out_path is not None:
        try:
            import matplotlib
        except ImportError:
            out_path = None
        else:
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            panels = [
                ("input (adaptive_avg_pool)", small),
                ("max_pool 3x3 / 2", pooled),
                ("adaptive_max_pool", coarse),
                ("max_unpool of the maxima", sparse),
            ]
            fig, axes = plt.subplots(1, 4, figsize=(14, 3.4))
            for ax, (title, img) in zip(axes, panels, strict=True):
                ax.imshow(np.clip(np.asarray(img[0]), 0, 1), interpolation="nearest")
                ax.set_title(f"{title}\n{tuple(img.shape[1:3])}")
                ax.axis("off")
            fig.tight_layout()
            fig.savefig(out_path, dpi=80)
            plt.close(fig)
            print(f"figure saved to {out_path}")
    return {
        "small": small,
        "pooled": pooled,
        "coarse": coarse,
        "indices": indices,
        "unpooled": sparse,
        "figure": out_path,
    }


if __name__ == "__main__":
    main(*sys.argv[1:2])
