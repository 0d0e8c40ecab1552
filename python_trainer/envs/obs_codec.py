"""The observation codec: a game's per-agent observations (godot-rl's JSON dicts, our packed float32, an image's hex or
raw bytes) as one policy's flat float32 rows, and the one-line error naming the agent whose observation does not fit
what the game declared."""

from __future__ import annotations

import base64
import binascii
from typing import Optional

import numpy as np

from python_trainer.envs.game import GameBugError
from python_trainer.envs.images import ImageLayout


def packed_floats(text, label: str) -> np.ndarray:
    """The float32 values of a packed observation field ("obs_f32": base64 of little-endian floats)."""
    try:
        return np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4")
    except (binascii.Error, TypeError, ValueError) as e:
        raise ValueError(f"{label}: malformed packed observations from the game ({e!r})") from None


class ObsCodec:
    """One policy's observations: godot-rl's per-agent obs dicts (or a packed reply) -> (agents, dim) float32, and the
    one-line GameBugError naming the agent whose observation does not fit what the game declared. With an image
    (``image``, its key last in ``layout``) the row ends with the image's H*W*C bytes as 0..255 floats; the game sends
    them as hex in JSON (godot-rl's form)."""

    def __init__(self, layout: list[tuple[str, int]], image: Optional[ImageLayout] = None):
        self.layout, self.image = layout, image
        self.dim = sum(size for _, size in layout)
        self.vector_layout = [(k, size) for k, size in layout if image is None or k != image.key]
        self.vector_dim = sum(size for _, size in self.vector_layout)  # = image.start with an image
        keys = [k for k, _ in self.vector_layout]
        self.single_key = keys == ["obs"] or len(keys) == 1

    def flat(self, obs_list, inst_label="") -> np.ndarray:
        """(agents, dim) float32 from godot-rl's list of per-agent obs dicts."""
        if self.image is None:
            return self._vectors(obs_list, inst_label)
        out = np.empty((len(obs_list), self.dim), np.float32)
        if self.vector_layout:
            out[:, : self.vector_dim] = self._vectors(obs_list, inst_label)
        out[:, self.vector_dim :] = self.frames(obs_list, inst_label)
        return out

    def _vectors(self, obs_list, inst_label) -> np.ndarray:
        """(agents, vector_dim) float32: the vector keys' values, in the row's order."""
        try:
            if self.single_key:
                key = self.vector_layout[0][0]
                arr = np.asarray([o[key] for o in obs_list], dtype=np.float32)
                arr = arr.reshape(len(obs_list), -1)
            else:
                arr = np.asarray(
                    [np.concatenate([np.asarray(o[k], dtype=np.float32).ravel() for k, _ in self.vector_layout])
                     for o in obs_list],
                    dtype=np.float32,
                )
        except (KeyError, TypeError, ValueError) as e:
            raise self.problem(obs_list, inst_label) or ValueError(
                f"{inst_label}: malformed observations from the game ({e!r})") from None
        if arr.shape[1] != self.vector_dim:
            raise self.problem(obs_list, inst_label) or GameBugError(
                f"{inst_label}: observation of size {arr.shape[1]}, expected {self.vector_dim}")
        return arr

    def frames(self, obs_list, inst_label="") -> np.ndarray:
        """(agents, H*W*C) uint8: each agent's image, decoded from its hex string (one fromhex for all of them)."""
        key, size = self.image.key, self.image.frame_size
        texts = [o.get(key) if isinstance(o, dict) else None for o in obs_list]
        try:
            data = bytes.fromhex("".join(texts))
        except (TypeError, ValueError):
            data = b""
        if len(data) == size * len(texts):
            return np.frombuffer(data, np.uint8).reshape(len(texts), size)
        for j, text in enumerate(texts):
            try:
                got = len(bytes.fromhex(text))
            except (TypeError, ValueError):
                what = "is missing" if text is None else f"is {str(text)[:40]!r}, not a hex string of bytes"
                raise GameBugError(f"{inst_label}: agent {j}'s image {key!r} {what}: the game declared it "
                                   f"{self.image_shape()} (get_obs_space()), sent as the hex of its bytes "
                                   "(the camera sensor's get_frame())") from None
            if got != size:
                raise GameBugError(self.size_problem(inst_label, j, got))
        raise GameBugError(f"{inst_label}: the images {key!r} do not fit {len(texts)} agents of {size} bytes")

    def image_shape(self) -> str:
        img = self.image
        return f"{img.height} x {img.width} x {img.channels} ({img.frame_size} bytes)"

    def size_problem(self, inst_label: str, agent, got: int) -> str:
        """One line: an agent's image of another size than the game declared."""
        return (f"{inst_label}: agent {agent}'s image {self.image.key!r} holds {got} bytes, expected "
                f"{self.image_shape()} as the game declared in its env_info (get_obs_space()): a camera must keep the "
                "size it declared (a size that changes mid-run, or a Viewport of another size than the sensor's)")

    def problem(self, obs_list, inst_label: str) -> Optional[GameBugError]:
        """The first agent whose observation does not fit what the game declared, in one line (the error path)."""
        declared = ", ".join(f"{key!r}: {size}" for key, size in self.layout)
        for j, o in enumerate(obs_list):
            for key, size in self.vector_layout:
                value = o.get(key) if isinstance(o, dict) else None
                try:
                    n = np.asarray(value, dtype=np.float32).size if value is not None else None
                except (TypeError, ValueError):
                    n = None
                if n is None:
                    what = f"is {str(value)[:60]!r}, not a list of numbers" if value is not None else "is missing"
                elif n != size:
                    what = f"has {n} values"
                else:
                    continue
                return GameBugError(f"{inst_label}: agent {j}'s observation {key!r} {what}, but the game declared "
                                    f"{{{declared}}} in its env_info (get_obs_space()); an agent's observation must "
                                    "keep the size and kind it declared")
        return None

    def from_reply(self, msg: dict, agents: int, inst_label="") -> np.ndarray:
        """(agents, obs_dim) float32 from a step reply: packed ("obs_f32", asked for in our handshake) or JSON. Packed
        observations hold the vector keys only: an image then comes in the reply's "obs" list, as hex."""
        if "obs_f32" not in msg:
            return self.flat(msg["obs"], inst_label)
        arr = packed_floats(msg["obs_f32"], inst_label)
        if arr.size != agents * self.vector_dim:
            raise GameBugError(f"{inst_label}: {arr.size} packed observation values, expected {agents} agents x "
                               f"{self.vector_dim} as the game declared (get_obs_space()); an agent's observation must "
                               "keep the size it declared")
        if self.image is None:
            return arr.reshape(agents, self.dim)
        images = msg.get("obs")
        if not isinstance(images, list) or len(images) != agents:
            raise GameBugError(f"{inst_label}: a reply with packed observations (obs_f32) but without the agents' "
                               f"images {self.image.key!r} in its \"obs\" list: the game declared them "
                               f"{self.image_shape()} (get_obs_space())")
        out = np.empty((agents, self.dim), np.float32)
        out[:, : self.vector_dim] = arr.reshape(agents, self.vector_dim)
        out[:, self.vector_dim :] = self.frames(images, inst_label)
        return out

    def one(self, obs: dict) -> np.ndarray:
        return self.flat([obs])[0]
