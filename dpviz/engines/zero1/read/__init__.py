"""What a ZeRO-1 trace says where DDP's words are not enough: the bytes each rank sends. No torch."""
