"""The small pieces below everything: errors, files, flags, paths, processes, signals, running statistics."""
