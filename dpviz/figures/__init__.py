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

A DistributedDataParallel trace (trace.engine == "ddp") draws in the split, timeline, sample map and
memory views with its own layouts (split_ddp, timeline_ddp, sample_map_ddp: ranks, steps, padding rows,
bucket all-reduces) and the flow (flow_ddp); step-through and inputs are DataParallel's only (VIEWS says which engines).

Each view has a `prepare_*` function (trace -> pandas DataFrame) used by its figure function, so the
data can be tested or tabulated without plotting. No figure draws more than MAX_MARKS marks.
"""
from .bounds import MAX_FRAMES, MAX_MARKS, count_marks
from .colors import IDLE_GREY, device_color, device_colors
from .flow import flow_figure, prepare_backward_flow, prepare_flow
from .inputs import argument_batches, inputs_figure, prepare_inputs
from .memory import memory_figure, prepare_memory
from .log import bounded_log
from .report import html_report
from .views import VIEWS, View
from .sample_map import prepare_sample_map, sample_map_figure
from .split import prepare_split, split_figure
from .step import prepare_steps, step_figure
from .style import device_name
from .timeline import prepare_timeline, timeline_figure
from .timeline import window_size as timeline_window

__all__ = [
    "IDLE_GREY", "MAX_FRAMES", "argument_batches", "inputs_figure", "prepare_inputs", "MAX_MARKS", "bounded_log", "count_marks", "device_color", "device_colors", "device_name",
    "flow_figure", "html_report", "memory_figure", "prepare_backward_flow", "prepare_flow", "prepare_memory",
    "prepare_sample_map", "prepare_split", "prepare_steps",
    "prepare_timeline", "sample_map_figure", "split_figure", "step_figure", "timeline_figure", "timeline_window",
]
