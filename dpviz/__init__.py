"""dpviz: see how torch.nn.DataParallel scatters a batch over devices and gathers it back.

    from dpviz import RunConfig, record
    trace = record(RunConfig(batch_size=30, data_size=100, gpus=8))

The recording side (torch) is imported on first use of `record` or `SimulatedDataParallel`, so reading
and drawing a trace (dpviz.trace.json_io, dpviz.figures) never pays for it.
"""
from importlib import import_module

__version__ = "0.1.0"  # pyproject.toml reads it from here

from dpviz.config import ConfigError, RunConfig
from dpviz.trace.own_model import Args
from dpviz.trace import Batch, Lane, Span, Trace
from dpviz.trace.json_io import TraceError

_RECORDING = {  # name -> the module that defines it, imported when the name is first used
    "record": "dpviz.engines.run",
    "plan": "dpviz.engines.plan",  # a model's memory per device under every engine, from its shapes
    "resolve_backend": "dpviz.engines.dp.devices",
    "SimulatedDataParallel": "dpviz.engines.dp.simulated",
}

__all__ = ["Args", "Batch", "ConfigError", "Lane", "RunConfig", "Span", "Trace", "TraceError", *_RECORDING]


def __getattr__(name: str):
    if name in _RECORDING:
        return getattr(import_module(_RECORDING[name]), name)
    raise AttributeError(f"module 'dpviz' has no attribute {name!r}")
