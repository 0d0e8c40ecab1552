"""The policy file's camera encoder (version 4): a CnnEncoder (variants/cnn.py) and its image as the file's "image"
and "cnn" entries, and the check that their shapes chain.

    "image": {"key": "camera_2d", "size": [H, W, C], "frame_stack": K},      # C = 3 (RGB) or 1 (grayscale)
    "vector_keys": [{"key": "obs", "size": V}],                             # the ONNX inputs' names
    "cnn":   {"kind": "simple",
              "convs": [{"weight": out x in x k x k, "bias": out, "kernel": k, "stride": s}, ...],   # in order
              "dense": {"weight": out x in, "bias": out, "activation": "relu"}}

The order is variants/cnn.py's: the K newest frames on the channels (oldest first, zeros before an episode's first),
the H x W x C*K bytes scaled by 1/255 and read as torch's (C*K, H, W); each convolution unpadded, then a ReLU; the
last one's output flattened in (C, H, W) order; the dense layer and its ReLU. The file's "layers" then take
cat([those features, the normalised vector keys]): "observation_size" counts the vector keys' values only (the flat
row's first columns), and "obs_normalization" covers them alone. No torch here: reading a file needs none.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from python_trainer.base import bounds
from python_trainer.base.contract import IMAGE_KEY_MARK, is_image_key

MAX_SIDE = bounds.CAMERA_SIDE.value  # a camera's side, as the game declares it (conv_network.gd's is the same)
MAX_FRAME_STACK = bounds.FRAME_STACK.value
CHANNELS = (1, 3)  # grayscale or RGB (the engine reads the frame as Godot's L8 or RGB8 image)


def cnn_entries(encoder, image, vector_keys: Optional[list], number: Callable[[float], float], where: str) -> dict:
    """{"image", "vector_keys", "cnn"} for a CnnEncoder and its ImageLayout (envs/images.py); ``vector_keys``
    [(key, size)] name the row's vector columns (for the ONNX inputs; None: one "obs" key); ``number`` writes one
    float32 (policy_file.f32). ValueError (naming ``where``) on NaN/inf weights or keys that do not fit."""
    keys = [(str(k), int(n)) for k, n in vector_keys] if vector_keys is not None else \
        ([("obs", image.start)] if image.start else [])
    if sum(n for _, n in keys) != image.start:
        raise ValueError(f"{where}: the vector keys {keys} do not make the row's {image.start} vector columns")
    convs = []
    for i, (conv, stride) in enumerate(encoder.conv_layers()):
        weight, bias = _finite(conv.weight, f"{where}: the CNN's convolution {i}"), _finite(conv.bias, "")
        convs.append({"weight": _nested(weight, number), "bias": _nested(bias, number),
                      "kernel": int(weight.shape[2]), "stride": int(stride)})
    dense = encoder.dense[0]
    return {
        "image": {"key": image.key, "size": [image.height, image.width, image.channels],
                  "frame_stack": int(image.frame_stack)},
        "vector_keys": [{"key": k, "size": n} for k, n in keys],
        "cnn": {"kind": getattr(encoder, "kind", None), "convs": convs,
                "dense": {"weight": _nested(_finite(dense.weight, f"{where}: the CNN's dense layer"), number),
                          "bias": _nested(_finite(dense.bias, f"{where}: the CNN's dense layer"), number),
                          "activation": "relu"}},
    }


def vector_statistics(stats: Optional[dict], image) -> Optional[dict]:
    """The normaliser's statistics of a camera policy's vector columns: the row's first ``image.start`` (a normaliser
    with a vector mask gives just those; a whole row's are cut to them)."""
    if stats is None:
        return None
    return {**stats, "mean": np.asarray(stats["mean"])[: image.start], "var": np.asarray(stats["var"])[: image.start]}


def _finite(parameter, what: str) -> np.ndarray:
    values = parameter.detach().cpu().numpy().astype(np.float32)
    if not np.isfinite(values).all():
        raise ValueError(f"{what or 'the CNN'} holds {int((~np.isfinite(values)).sum())} NaN/inf values; this model "
                         "cannot be played (training diverged: use an earlier checkpoint)")
    return values


def _nested(values: np.ndarray, number) -> list:
    if values.ndim == 1:
        return [number(x) for x in values.tolist()]
    return [_nested(row, number) for row in values]


def _whole(value, low: int, high: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high}, got {str(value)[:40]}")
    return int(value)


def _shape(values, shape: tuple, name: str) -> None:
    """``values`` is a nested list of exactly ``shape`` (checked level by level, numbers at the bottom)."""
    if not shape:
        if isinstance(values, bool) or not isinstance(values, (int, float)):
            raise ValueError(f"{name} holds {str(values)[:40]}, not a number")
        return
    if not isinstance(values, list) or len(values) != shape[0]:
        got = len(values) if isinstance(values, list) else "no list"
        raise ValueError(f"{name} must be {' x '.join(map(str, shape))} values, got {got} at its first level")
    if len(shape) == 1:
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
            raise ValueError(f"{name} holds something that is not a number")
        return
    for row in values:
        _shape(row, shape[1:], name)


def image_shape(image) -> tuple:
    """(H, W, C, K) of a file's "image" entry, or ValueError naming what is wrong."""
    if not isinstance(image, dict) or not isinstance(image.get("key"), str) or not is_image_key(image["key"]):
        raise ValueError(f'"image" must be {{"key": a key containing "{IMAGE_KEY_MARK}", "size": [H, W, C], '
                         '"frame_stack": K}')
    size = image.get("size")
    if not isinstance(size, list) or len(size) != 3:
        raise ValueError(f'the image\'s "size" must be [H, W, C], got {str(size)[:40]}')
    h, w = (_whole(s, 1, MAX_SIDE, f"the image's {n}") for s, n in zip(size[:2], ("height", "width")))
    if size[2] not in CHANNELS:
        raise ValueError(f"the image's channels must be 1 (grayscale) or 3 (RGB), got {str(size[2])[:40]}")
    return h, w, int(size[2]), _whole(image.get("frame_stack", 1), 1, MAX_FRAME_STACK, "the image's frame_stack")


def cnn_features(policy: dict) -> int:
    """How many features a file's "cnn" gives its "layers" (the dense layer's outputs; 0 without a camera), after
    checking that its shapes chain from the image through every convolution to the dense layer; ValueError names the
    first that does not."""
    if ("cnn" in policy) != ("image" in policy):
        raise ValueError('a camera policy needs both "image" and "cnn" (a file without a camera has neither)')
    if "cnn" not in policy:
        return 0
    h, w, c, k = image_shape(policy.get("image"))
    keys = policy.get("vector_keys", [])
    sizes = [x.get("size") for x in keys if isinstance(x, dict)] if isinstance(keys, list) else []
    if keys and (len(sizes) != len(keys) or not all(isinstance(n, int) and n > 0 for n in sizes)
                 or sum(sizes) != policy.get("observation_size")):
        raise ValueError('"vector_keys" must be [{"key", "size"}] whose sizes make observation_size')
    cnn = policy.get("cnn")
    if not isinstance(cnn, dict) or not isinstance(cnn.get("convs"), list) or not cnn["convs"]:
        raise ValueError('"cnn" must hold "convs" (a non-empty list of convolutions) and "dense"')
    channels = c * k
    for i, conv in enumerate(cnn["convs"]):
        if not isinstance(conv, dict):
            raise ValueError(f"the CNN's convolution {i} is not {{\"weight\", \"bias\", \"kernel\", \"stride\"}}")
        kernel = _whole(conv.get("kernel"), 1, MAX_SIDE, f"convolution {i}'s kernel")
        stride = _whole(conv.get("stride"), 1, MAX_SIDE, f"convolution {i}'s stride")
        weight = conv.get("weight")
        out = len(weight) if isinstance(weight, list) else 0
        if not 1 <= out <= 4096:
            raise ValueError(f"convolution {i}'s weight must list 1 to 4096 filters")
        first = weight[0] if isinstance(weight[0], list) else []
        if len(first) != channels:
            given = "the image's frames" if i == 0 else f"convolution {i - 1}"
            raise ValueError(f"the CNN's shapes do not chain: convolution {i} takes {len(first)} input channels, but "
                             f"{given} give{'s' if i else ''} {channels}")
        if kernel > min(h, w):
            raise ValueError(f"the CNN's shapes do not chain: convolution {i}'s {kernel} x {kernel} kernel does not fit "
                             f"the {h} x {w} it is given")
        _shape(weight, (out, channels, kernel, kernel), f"convolution {i}'s weight")
        _shape(conv.get("bias"), (out,), f"convolution {i}'s bias")
        channels, h, w = out, (h - kernel) // stride + 1, (w - kernel) // stride + 1
    dense = cnn.get("dense")
    weight = dense.get("weight") if isinstance(dense, dict) else None
    rows = len(weight) if isinstance(weight, list) else 0
    if not 1 <= rows <= 65536 or dense.get("activation", "relu") != "relu":
        raise ValueError('the CNN\'s "dense" must be {"weight": 1 to 65536 rows, "bias", "activation": "relu"}')
    n_in = channels * h * w
    if not isinstance(weight[0], list) or len(weight[0]) != n_in:
        got = len(weight[0]) if isinstance(weight[0], list) else "no list"
        raise ValueError(f"the CNN's shapes do not chain: its dense layer takes {got} inputs, but the last convolution "
                         f"gives {channels} x {h} x {w} = {n_in}")
    _shape(weight, (rows, n_in), "the CNN's dense weight")
    _shape(dense.get("bias"), (rows,), "the CNN's dense bias")
    return rows
