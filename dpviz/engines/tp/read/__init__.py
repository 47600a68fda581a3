"""Tensor parallelism's readers: its key figures, explanations, log, traffic and One step (no torch)."""
