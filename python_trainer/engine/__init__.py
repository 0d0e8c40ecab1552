"""Policies the engine plays by itself: the policy file, ONNX both ways, the watcher of train --watch."""
