"""What an FSDP trace says: its key figures, explanations, log, the bytes it sends and its Step through a sharded module. No torch."""
