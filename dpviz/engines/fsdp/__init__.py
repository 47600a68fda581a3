"""FSDP: torch's FSDP2 (fully_shard), each rank holding a shard of every parameter, gradient and optimizer state."""
