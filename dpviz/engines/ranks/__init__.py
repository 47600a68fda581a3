"""What every engine whose lanes are processes shares: one program per rank, filled by each engine's hooks
(program.py), the processes that run it (launch.py), and torchrun's way of starting them (torchrun.py).

DDP, ZeRO-1 and FSDP fill the program's hooks in their own packages (dpviz.engines.ddp.rank and the specs'
`rank_program`); nothing here names an engine: the engine of a run is looked up in the registry.
"""
