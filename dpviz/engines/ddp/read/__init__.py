"""What a DistributedDataParallel trace says: its tables, key figures, explanations, log, Chrome-trace events, outcome line and the views it draws its own way. No torch."""
