"""dpviz: see how torch.nn.DataParallel scatters a batch over devices and gathers it back.

    from dpviz import RunConfig, record
    trace = record(RunConfig(batch_size=30, data_size=100, gpus=8))
"""
from .config import ConfigError, RunConfig
from .recorder import record, resolve_backend
from .simulated import SimulatedDataParallel
from .trace import Batch, Lane, Span, Trace
from .trace_json import TraceError

__all__ = [
    "Batch", "ConfigError", "Lane", "RunConfig", "SimulatedDataParallel", "Span", "Trace", "TraceError",
    "record", "resolve_backend",
]
