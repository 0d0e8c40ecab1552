"""The bounds of every size that can grow with what a user asks for: one table, the Python side's only copy.

Each bound is checked before any game starts or any run folder is made, where the flags, the game's env_info or the
checkpoint tell the size; the game checks the same values on its side (the constant named in ``gdscript``, which
contract.py generates into the addon's contract.gd), and tests/test_bounds.py holds the two sides and docs/training.md's
table to this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Bound:
    """The largest value of one size, what it bounds and why there, and the GDScript constant that is the same bound
    in the addon (``"contract.gd:NAME"``, generated from this table), if the game checks it too."""

    value: int
    what: str
    why: str
    gdscript: Optional[str] = None


# The wire: one message either way (godot-rl's length-prefixed JSON, or our packed replies).
MESSAGE_BYTES = Bound(
    64 * 1024 * 1024, "bytes in one message between the game and the trainer",
    "a reply this large is a bug or far too many agents or pixels for one instance; above it a corrupt length",
    "contract.gd:MAX_MESSAGE_BYTES")
# A camera sensor's side in pixels, and frames stacked on its channels.
CAMERA_SIDE = Bound(
    512, "pixels on a camera sensor's side", "the engine's camera sensor and CNN refuse larger images",
    "contract.gd:MAX_CAMERA_SIDE")
FRAME_STACK = Bound(
    64, "frames stacked by --frame-stack", "the engine's policy file takes no more (conv_network.gd)",
    "contract.gd:MAX_FRAME_STACK")
# A policy file's sizes: a layer's width and the inputs of its first dense layer (a camera's CNN features).
LAYER_SIZE = Bound(
    65536, "inputs or outputs of one layer of a policy (a camera's CNN features included)",
    "the engine refuses a policy file with a wider layer", "contract.gd:MAX_LAYER_SIZE")
POLICY_WEIGHTS = Bound(
    16 * 1024 * 1024, "weights in one policy (what the engine plays and the trainer writes to policy.json)",
    "the engine loads about 0.3 million weights a second; 16 Mi is a minute's load and a policy file of ~200 MB",
    "contract.gd:MAX_POLICY_WEIGHTS")
# The agents of one game instance: its scene's agents times --copies.
AGENTS_PER_INSTANCE = Bound(
    2048, "agents in one game instance (--agents-per-instance x --copies)",
    "ball_chase builds 2048 in a second or two; at 4096 Godot's message queue overflows while the scene is built, and "
    "the instance never connects", "contract.gd:MAX_AGENTS_PER_INSTANCE")
# TensorBoard: the histograms of one action key's values.
ACTION_HISTOGRAMS = Bound(
    32, "action histograms a policy writes per update (every key's actions/<key>, then the first dimensions' "
    "actions/<key>/<i>)", "one histogram per dimension of a wide key wrote 21 MB of events in 10 updates")
# --async and Ray: rollouts asked for ahead of the learner.
POLICY_LAG = Bound(
    8, "rollouts asked for ahead by --async (--max-policy-lag)",
    "each is a whole rollout held in memory and collected before the run can end or evaluate")
# --editor: connections from strangers while the trainer waits for the editor's game.
EDITOR_CONNECTIONS = Bound(
    8, "connections --editor holds open at once while it waits for the game's handshake",
    "each may buffer a message; more are refused until one closes")
HANDSHAKE_BYTES = Bound(
    4 * 1024 * 1024, "bytes a connection may send before its handshake is done (its hello and env_info)",
    "an env_info takes about 120 bytes an agent (ball_chase's: 234 kB for 2048): a stranger buffers no more")

ALL = {name: value for name, value in globals().items() if isinstance(value, Bound)}


def markdown_table() -> str:
    """docs/training.md's table of the bounds (tests/test_bounds.py holds the page to it)."""
    rows = ["| bound | largest | why there | the game's twin |", "| --- | --- | --- | --- |"]
    for bound in ALL.values():
        twin = f"`{bound.gdscript}`" if bound.gdscript else "(the trainer's alone)"
        rows.append(f"| {bound.what} | {bound.value:,} | {bound.why} | {twin} |")
    return "\n".join(rows)
