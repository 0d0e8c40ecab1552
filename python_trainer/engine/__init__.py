"""Policies the engine plays by itself: the policy file, ONNX both ways, evaluation, matches, recording, --watch."""
