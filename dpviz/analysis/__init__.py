"""What a trace says, in tables and words: the readers between the trace and the page. No torch.

    batch_facts.py      what each batch did, in plain Python (a DataParallel run's first screen needs no pandas)
    tables.py, tables_ddp.py         per-batch and per-step tables (pandas)
    summary.py, summary_ddp.py       key figures
    explain.py, explain_ddp.py, explain_pitfalls.py   findings in plain words, from the run's own numbers
    compare.py, traffic_model.py, step_times.py       two engines against each other: bytes moved, memory, time
    wording.py          the words the views share (plurals, bytes, devices)

Each engine's spec names its own summary and explanations; summary.key_figures and explain.explain look
them up for any trace.
"""
