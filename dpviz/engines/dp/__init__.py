"""DataParallel: the real torch.nn.DataParallel on CUDA devices, or SimulatedDataParallel on CPU threads.

    spec.py         DataParallel as the rest of dpviz sees it: its words, its parts, its rules for a config (no torch)
    vocabulary.py   its phases and memory kinds (no torch: readers of a trace use it)
    options.py      its own settings: the optimizer a training run steps
    facts.py        what a trace's facts hold, read back from a file and checked (no torch)
    plan.py         its plan: what each GPU holds and sends in one training step, from the model's shapes (no torch)
    chunking.py     torch.chunk's split in plain integers (no torch)
    split_rules.py  the rows each replica gets, by scatter_kwargs's rules in plain integers (no torch)
    engine.py       the engine: resolve the device kind, record a run, check a loaded trace
    devices.py      which kind of device a run uses: real CUDA GPUs or simulated ones
    recorder.py     the recording loop: forward, loss, backward, step, batch by batch
    observer.py     hooks and timers that watch DataParallel without changing it
    ledger.py       memory per device: a ledger of tensor sizes, or CUDA's own figure
    scatter.py      DataParallel's scatter and gather rules on CPU tensors
    simulated.py    SimulatedDataParallel, replicate, parallel_apply (replicas on threads of their own)
    workers.py      the threads replicas run on: one per core at most, borrowed from a bounded pool
    check.py        the split a loaded trace must show, by DataParallel's own rules (no torch)
    read/           its readers: key figures, explanations, the log, the Chrome trace and its own views (no torch)

Importing this package imports no torch; the modules that need it import it themselves.
"""
