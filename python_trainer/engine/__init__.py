"""Policies the engine plays by itself: the policy file, ONNX both ways, the policy watcher of `train --watch`."""
