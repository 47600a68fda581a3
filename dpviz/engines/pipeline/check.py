"""The rules of a pipeline trace: its steps' rows, and every stage's microbatches, as torch's schedules run them.
Plain Python: loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what a pipeline run records
"""
from __future__ import annotations

from collections import Counter

from dpviz.trace import Trace
from dpviz.trace.values import TraceError


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what torch's PipelineStage and schedule could have recorded."""
    config = trace.config
    if config.batch_size % config.microbatches:
        raise TraceError(f"batch_size {config.batch_size:,} does not divide into {config.microbatches} equal "
                         "microbatches, and a pipeline runs only equal ones.")
    for key in ("held", "layers", "sent", "flight"):  # what each stage reported: one entry per stage
        if key in trace.facts and len(trace.facts[key]) != config.gpus:
            raise TraceError(f"facts {key} name {len(trace.facts[key])} stages, but the run has {config.gpus}.")
    for batch in trace.batches:
        if batch.rows != config.batch_size:
            raise TraceError(f"step {batch.index + 1:,} holds {batch.rows:,} rows; every step of a pipeline holds a whole "
                             f"batch of {config.batch_size:,}.")
    per_micro = config.batch_size // config.microbatches
    computed: Counter = Counter()
    began: dict[tuple, float] = {}
    for span in trace.spans:
        if span.microbatch is not None and span.microbatch >= config.microbatches:
            raise TraceError(f"a {span.phase} span of step {span.batch + 1:,} names microbatch {span.microbatch + 1}, but "
                             f"each step has {config.microbatches}.")
        if span.phase in ("forward", "backward"):
            if span.rows != per_micro or span.row_offset != span.microbatch * per_micro:
                raise TraceError(f"microbatch {span.microbatch + 1} of step {span.batch + 1:,} holds rows {span.row_offset:,}.."
                                 f"{span.row_offset + span.rows:,}; each microbatch holds its {per_micro:,} rows in order.")
            computed[span.batch, span.phase, span.lane] += 1
            began[span.batch, span.phase, span.lane, span.microbatch] = span.start
    for (step, phase, stage, micro), start in began.items():  # a stage runs a microbatch's backward after its forward
        if phase == "backward" and start < began.get((step, "forward", stage, micro), float("inf")):
            raise TraceError(f"stage {stage + 1} ran microbatch {micro + 1}'s backward in step {step + 1:,} before its "
                             "forward; a backward follows its forward.")
    ended = len(trace.batches) - (trace.failure is not None)
    for step in range(ended):  # a step that ran to its end ran every microbatch through every stage, both ways
        for stage in range(config.gpus):
            for phase in ("forward", "backward"):
                if computed[step, phase, stage] != config.microbatches:
                    raise TraceError(f"stage {stage + 1} ran {computed[step, phase, stage]} {phase} passes in step "
                                     f"{step + 1:,}; a step runs one per microbatch, {config.microbatches}.")
