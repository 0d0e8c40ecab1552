"""A policy file as an ONNX model in godot-rl's convention, for godot_rl_agents' plugin and any ONNX runtime
(onnx_import.py maps an ONNX MLP policy, SB3's, CleanRL's or ours, back to a policy file the engine plays).

    godot-ppo export-policy runs/ball_chase__ppo__1__1700000000 --format onnx -o policy.onnx
    godot-ppo import-policy model.onnx --env-id ball_chase -o policy.json

The model is built from the policy file's content (policy_file.py), the very numbers the engine plays, so the two
agree to float rounding. godot-rl's convention (its `export_model_as_onnx`): opset 17, the batch axis dynamic,
    inputs   obs        float32 [batch, observation_size]   the game's raw observations (the normalisation is folded in)
             state_ins  float32 [batch] (MLP) | [batch, 2H] (--lstm)
    outputs  output     float32 [batch, n_out]   the actor's raw outputs, as the engine's --policy_forward prints
                                                 them: the continuous keys' unclipped Gaussian means, then each
                                                 discrete key's logits, in the policy file's action_keys order
             state_outs float32, state_ins' shape
A camera policy (version 4: "image" and "cnn") takes its observations by their keys instead of `obs`:
    inputs   <vector key>  float32 [batch, size]        each vector key (sorted, as the flat row), raw: normalised
                                                        inside; none when the agent sees its image alone
             <image key>   uint8 [batch, H, W, C*K]     the K newest frames stacked on the channels, oldest first
                                                        (zeros before an episode's first frame), as the game sends
                                                        them (0..255; the graph scales by 1/255)
             state_ins     as above
An MLP's state_ins is echoed as state_outs. An --lstm policy's state is its LSTM's h then c (H values each) after
the previous step: feed zeros where an episode starts, then each step's state_outs (godot_rl_agents' plugin always
sends a [batch] zero state, so it cannot run these). The metadata (metadata_props) names the game, the spaces, the
action layout, the state and this package's version; `policy_from_metadata` reads the policy's description back.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from python_trainer import __version__
from python_trainer.base.files import write_atomic
from python_trainer.engine.policy_file import PolicyFileError

OPSET = 17
INPUTS, OUTPUTS = ["obs", "state_ins"], ["output", "state_outs"]
PRODUCER = "godot-ppo"
# The policy file's fields the model's metadata carries (a JSON value each), besides the state's layout.
METADATA_FIELDS = ("format", "version", "env", "policy_name", "observation_size", "action_keys", "action_rule", "source",
                   "image", "vector_keys")  # the last two: a camera policy's
# What the engine's runner knows (contract.ACTIVATIONS, in its order; policy_network.gd's ACTIVATIONS).
ACTIVATIONS = {"linear": nn.Identity, "relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


class PolicyNetwork(nn.Module):
    """The engine's forward pass (policy_runner.gd) in torch, from a policy file's content: the normalisation,
    the layers, for a recurrent policy the LSTM after layer ``after_layer``, and for a camera policy its CNN, whose
    features come before the normalised vector."""

    def __init__(self, policy: dict):
        super().__init__()
        self.cnn = CnnFeatures(policy["cnn"]) if "cnn" in policy else None
        norm = policy.get("obs_normalization")
        self.normalize = norm is not None
        if self.normalize:  # x = clip((obs - mean) * scale, -clip, clip), scale = 1 / sqrt(var + epsilon)
            var = np.asarray(norm["var"], np.float64)
            self.register_buffer("mean", torch.tensor(np.asarray(norm["mean"], np.float64), dtype=torch.float32))
            self.register_buffer("scale", torch.tensor(1.0 / np.sqrt(var + float(norm.get("epsilon", 1e-8))),
                                                       dtype=torch.float32))
            self.clip = float(norm.get("clip", 10.0))
        lstm = policy.get("lstm")
        split = lstm["after_layer"] if lstm else 0
        self.encoder = _sequential(policy["layers"][:split])
        self.head = _sequential(policy["layers"][split:])
        self.lstm = None
        if lstm:
            self.hidden = int(lstm["hidden_size"])
            self.lstm = nn.LSTM(int(lstm["input_size"]), self.hidden)
            with torch.no_grad():
                self.lstm.weight_ih_l0.copy_(_tensor(lstm["weight_ih"]))
                self.lstm.weight_hh_l0.copy_(_tensor(lstm["weight_hh"]))
                self.lstm.bias_ih_l0.copy_(_tensor(lstm["bias"]))  # the file holds bias_ih + bias_hh
                self.lstm.bias_hh_l0.zero_()

    def forward(self, obs: Optional[torch.Tensor], state_ins: torch.Tensor, image: Optional[torch.Tensor] = None):
        x = obs
        if self.normalize and obs is not None:
            x = torch.clamp((obs - self.mean) * self.scale, -self.clip, self.clip)
        if self.cnn is not None:  # obs None: the agent sees its image alone
            x = self.cnn(image) if x is None else torch.cat([self.cnn(image), x], dim=1)
        if self.lstm is None:
            return self.head(x), state_ins
        h, c = state_ins[:, : self.hidden].unsqueeze(0), state_ins[:, self.hidden :].unsqueeze(0)
        out, (h, c) = self.lstm(self.encoder(x).unsqueeze(0), (h, c))  # one step of every agent
        return self.head(out[0]), torch.cat([h[0], c[0]], dim=1)

    def state_size(self) -> int:
        """state_ins' width: 0 for [batch] (an MLP), 2H for an LSTM."""
        return 0 if self.lstm is None else 2 * self.hidden


class CnnFeatures(nn.Module):
    """A policy file's "cnn" (policy_cnn.py) in torch: (B, H, W, C*K) images 0..255 (uint8 or float) -> features, in
    variants/cnn.py's order."""

    def __init__(self, cnn: dict):
        super().__init__()
        layers = []
        for conv in cnn["convs"]:
            weight = _tensor(conv["weight"])
            module = nn.Conv2d(weight.shape[1], weight.shape[0], int(conv["kernel"]), int(conv["stride"]))
            with torch.no_grad():
                module.weight.copy_(weight)
                module.bias.copy_(_tensor(conv["bias"]))
            layers += [module, nn.ReLU()]
        self.convs = nn.Sequential(*layers)
        self.dense = nn.Sequential(_sequential([cnn["dense"]])[0], nn.ReLU())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float().permute(0, 3, 1, 2) / 255.0
        return self.dense(self.convs(x).flatten(1))


class CameraInputs(nn.Module):
    """A camera policy's ONNX inputs by their observation keys: each vector key, the image, state_ins."""

    def __init__(self, net: PolicyNetwork, n_vector_keys: int):
        super().__init__()
        self.net, self.n_vector_keys = net, n_vector_keys

    def forward(self, *inputs):
        vectors, image, state_ins = inputs[: self.n_vector_keys], inputs[self.n_vector_keys], inputs[-1]
        obs = torch.cat(list(vectors), dim=1) if vectors else None
        return self.net(obs, state_ins, image)


def vector_keys(policy: dict) -> list[dict]:
    """A camera policy's vector keys [{"key", "size"}] in the flat row's (sorted) order: the file's "vector_keys", else
    (a file without them) one "obs" of observation_size values."""
    n = int(policy["observation_size"])
    return policy.get("vector_keys") or ([{"key": "obs", "size": n}] if n else [])


def _tensor(values) -> torch.Tensor:
    return torch.tensor(np.asarray(values, np.float32))


def _sequential(layers: list) -> nn.Sequential:
    modules = []
    for i, layer in enumerate(layers):
        weight = np.asarray(layer["weight"], np.float32)
        linear = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(weight))
            linear.bias.copy_(_tensor(layer["bias"]))
        activation = str(layer.get("activation", "linear"))
        if activation not in ACTIVATIONS:
            raise PolicyFileError(f"layer {i} has the activation {activation!r}, which ONNX export does not know")
        modules += [linear, ACTIVATIONS[activation]()]
    return nn.Sequential(*modules)


def state_layout(policy: dict) -> str:
    lstm = policy.get("lstm")
    if not lstm:
        return "echo: state_ins float32 [batch], returned as state_outs"
    h = int(lstm["hidden_size"])
    return (f"lstm: state_ins float32 [batch, {2 * h}] = the LSTM's h ({h}) then c ({h}) after the previous step, "
            "zeros where an episode starts; state_outs the same after this step")


def policy_to_onnx(policy: dict) -> bytes:
    """The ONNX model (bytes) of a policy file's content, with its description in the metadata."""
    import onnx

    net = PolicyNetwork(policy).eval()
    n = int(policy["observation_size"])
    state = torch.zeros((1, net.state_size()) if net.state_size() else (1,))
    inputs, names, model = (torch.zeros(1, n), state), INPUTS, net
    if net.cnn is not None:  # inputs by their observation keys
        keys, image = vector_keys(policy), policy["image"]
        h, w, c = image["size"]
        frames = torch.zeros((1, h, w, c * int(image.get("frame_stack", 1))), dtype=torch.uint8)
        inputs = tuple(torch.zeros(1, k["size"]) for k in keys) + (frames, state)
        names, model = [k["key"] for k in keys] + [image["key"], "state_ins"], CameraInputs(net, len(keys)).eval()
    buffer = io.BytesIO()
    batch = {name: {0: "batch_size"} for name in names + OUTPUTS}
    with torch.no_grad(), warnings.catch_warnings():
        # the legacy exporter's deprecation notice, and its LSTM batch-size caution (h0/c0 are inputs here)
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        # dynamo=False: the TorchScript exporter writes one self-contained model in milliseconds; torch 2.13's default
        # one (onnxscript's, which godot-rl's exporters use) takes seconds and puts the weights in a second file
        torch.onnx.export(model, inputs, buffer, dynamo=False, opset_version=OPSET,
                          input_names=names, output_names=OUTPUTS, dynamic_axes=batch)
    model = onnx.load_from_string(buffer.getvalue())
    model.producer_name = PRODUCER
    meta = {f"godot_ppo.{k}": json.dumps(policy.get(k)) for k in METADATA_FIELDS
            if k in policy or k not in ("image", "vector_keys")}
    meta["godot_ppo.state"] = state_layout(policy)
    meta["godot_ppo.package_version"] = __version__
    onnx.helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_onnx(path, policy: dict) -> Path:
    """Write ``policy`` (a policy file's content) as an ONNX model, atomically: a failure leaves no partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, policy_to_onnx(policy))


def policy_from_metadata(model) -> dict:
    """The policy's description (METADATA_FIELDS) that `policy_to_onnx` stored in an ONNX model's metadata."""
    props = {p.key: p.value for p in model.metadata_props}
    return {k: json.loads(props[f"godot_ppo.{k}"]) for k in METADATA_FIELDS if f"godot_ppo.{k}" in props}
