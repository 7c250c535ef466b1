"""MLC-LLM's image kernels that do not build on TVM 0.27, written again for the test builds
(here; not MLC's code), so that llava and phi3_v build as MLC builds them otherwise.

`ImageProcessor.crop` and `.pad` (mlc_llm/model/vision/image_processing.py) are hand-written
TIR: crop states T.writes under an `if` (TVM 0.27's TVMScript refuses it), both take the output
before their scalar offsets (TVM 0.27's call_tir passes scalars first), and crop's offsets reach
call_tir as a bare PrimExpr, which TVM 0.27's VM codegen cannot lower. Here each is one TE
compute whose offsets come from the image's own shape, computing what MLC's kernel means:

- crop: the centre crop_size window, out[n, c, i, j] = image[n, c, i + (H - h) // 2,
  j + (W - w) // 2];
- pad: the height padded up to a multiple of 336 with 255, (tar - H) // 2 rows on top.

MLC's pad kernel keeps an image row where `t <= i <= H + b`, not `t <= i < t + H`: for a height
not a multiple of 336 it reads past the image's last row (b - t + 1 rows). The port pads as the
comment of MLC's code intends, so the two builds agree where MLC's kernel reads valid rows.

phi3_v's `dyn_repeat_4d_tensor` (phi3v/phi3v_image.py) takes its output before its repeat
counts too; here it is a TE compute that tiles the tensor.

`ported_vision()` is a context manager that swaps the three methods while a model is exported.
"""

from contextlib import contextmanager
from typing import Any, Dict, Iterator


def _crop(self: Any, image: Any, crop_size: Dict[str, int]) -> Any:
    from tvm import te
    from tvm.relax.frontend.nn import op
    try:
        from tvm import tirx as tir
    except ImportError:
        from tvm import tir
    assert image.ndim == 4 and image.shape[1] == 3, "image layout should be NCHW"
    ch, cw = crop_size["height"], crop_size["width"]

    def f(img: Any) -> Any:
        n, c, h, w = img.shape
        top = tir.floordiv(h - ch, 2)
        left = tir.floordiv(w - cw, 2)
        return te.compute((n, c, ch, cw), lambda b, k, i, j: img[b, k, i + top, j + left], name="crop")

    return op.tensor_expr_op(f, "crop", [image])


def _pad(self: Any, image: Any, dtype: str = "uint8") -> Any:
    from tvm import te
    from tvm.relax.frontend.nn import op
    try:
        from tvm import tirx as tir
    except ImportError:
        from tvm import tir
    assert image.ndim == 4 and image.shape[1] == 3, "image layout should be NCHW"

    def f(img: Any) -> Any:
        n, c, h, w = img.shape
        tar = tir.truncdiv(h + 335, 336) * 336
        t = tir.floordiv(tar - h, 2)
        fill = tir.const(255, img.dtype)
        return te.compute((n, c, tar, w),
                          lambda b, k, i, j: tir.if_then_else(tir.all(i >= t, i < t + h),
                                                              img[b, k, tir.max(i - t, 0), j], fill), name="pad")

    return op.tensor_expr_op(f, "pad", [image])


def _dyn_repeat(self: Any, input_tensor: Any, r0: Any, r1: Any, r2: Any, r3: Any) -> Any:
    """phi3_v's dyn_repeat_4d_tensor: the tensor tiled r0 × r1 × r2 × r3 times."""
    from tvm import te
    from tvm.relax.frontend.nn import op
    assert input_tensor.ndim == 4, "input_tensor should be 4D data tensor"

    def f(x: Any) -> Any:
        n, c, h, w = x.shape
        return te.compute((n * r0, c * r1, h * r2, w * r3),
                          lambda a, b, i, j: x[a % n, b % c, i % h, j % w], name="dyn_repeat_4d_tensor")

    return op.tensor_expr_op(f, "dyn_repeat_4d_tensor", [input_tensor])


@contextmanager
def ported_vision() -> Iterator[None]:
    """MLC's image crop and pad (and phi3_v's dyn_repeat_4d_tensor) as TE computes (see the
    module's text) inside the `with`."""
    from mlc_llm.model.phi3v.phi3v_image import Phi3ImageEmbedding
    from mlc_llm.model.vision.image_processing import ImageProcessor
    saved = (ImageProcessor.crop, ImageProcessor.pad, Phi3ImageEmbedding.dyn_repeat_4d_tensor)
    ImageProcessor.crop, ImageProcessor.pad = _crop, _pad
    Phi3ImageEmbedding.dyn_repeat_4d_tensor = _dyn_repeat
    try:
        yield
    finally:
        ImageProcessor.crop, ImageProcessor.pad, Phi3ImageEmbedding.dyn_repeat_4d_tensor = saved
