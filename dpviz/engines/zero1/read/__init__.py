"""What a ZeRO-1 trace says where DDP's words are not enough: the optimizer state each rank owns and holds (its
shard), what it broadcasts after each step, and the bytes each rank sends. No torch."""
