"""What a DataParallel trace says: its key figures, explanations, log, Chrome-trace events, outcome line and the views it draws its own way (Flow, Step through, Inputs, the pitfalls). No torch."""
