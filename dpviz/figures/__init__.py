"""Every view of a trace, each a pure function `trace -> plotly Figure`, plus the offline HTML report.

    from dpviz import RunConfig, record
    from dpviz import figures
    trace = record(RunConfig(gpus=8))
    figures.flow_figure(trace, batch=3)        # a lane per GPU: scatter, replicate, forwards, gather (and back, training)
    figures.split_figure(trace)                # stacked rows per GPU per batch, idle GPUs in grey
    figures.timeline_figure(trace, first_batch=0)
    figures.inputs_figure(trace, batch=0)      # what each GPU received of each argument: split or whole
    figures.memory_figure(trace, batch=0)      # bytes per GPU after each phase, stacked by kind of tensor
    figures.sample_map_figure(trace)           # dataset row -> batch -> GPU
    figures.step_figure(trace, batch=3)        # animation, one frame per DataParallel step of one batch
    figures.html_report(trace)                 # one offline HTML string with all of the above
    figures.bounded_log(trace)                 # the tutorial log, cut to its first and last lines past 2,000

Each engine names the function that draws each view of its traces (its spec's "view.*" parts, see
dpviz.engines.spec): a DistributedDataParallel trace draws the split, timeline, sample map and flow with
its own layouts (in dpviz.engines.ddp.read: ranks, steps, padding rows, bucket all-reduces) and has no
inputs view. The names here draw any engine's trace.

Each view has a `prepare_*` function (trace -> pandas DataFrame), so its data can be tested or tabulated
without plotting; the figure functions draw from them, except DataParallel's flow, which draws from
flow_links' plain rows (a run's first chart, drawn without importing pandas). An engine's own views keep
theirs beside them (DataParallel's Flow, Inputs and Step through in dpviz.engines.dp.read). No figure draws
more than MAX_MARKS marks.
"""
from importlib import import_module

# name -> the module that defines it, imported when the name is first used: the page's first chart
# (a run's Flow) then loads only the modules it draws with, not every view's (nor pandas, which
# most tables use and the flow does not).
_NAMES = {
    "MAX_FRAMES": "bounds", "MAX_MARKS": "bounds", "count_marks": "bounds",
    "IDLE_GREY": "colors", "device_color": "colors", "device_colors": "colors",
    "flow_figure": "views", "argument_batches": "views", "inputs_figure": "views", "step_figure": "views",
    "memory_figure": "memory", "prepare_memory": "memory",
    "bounded_log": "log",
    "html_report": "report",
    "VIEWS": "views", "View": "views",
    "prepare_sample_map": "sample_map", "sample_map_figure": "views",
    "prepare_split": "split", "split_figure": "views",
    "device_name": "trace_words",
    "prepare_timeline": "timeline", "timeline_figure": "views", "flow_any": "views",
}
_RENAMED = {"timeline_window": ("views", "window_size"), "flow_figure": ("views", "flow_any")}

__all__ = sorted([*_NAMES, *_RENAMED])


def __getattr__(name: str):
    if name in _RENAMED:
        module, attribute = _RENAMED[name]
        return getattr(import_module(f"{__name__}.{module}"), attribute)
    if name in _NAMES:
        return getattr(import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
