""""At real size", under the page "Memory, every engine": a catalogue model at a real size it declares
(dpviz.catalogue.ModelSpec.sizes: the transformer at GPT-2-small, 1B or 7B shapes) on up to 1,024 GPUs of 24, 40 or
80 GiB, planned per engine from its shapes (dpviz.engines.plan), with a line at the device's memory; and the same
rules applied to the toy run above, held against what its ranks held.
The options an engine's plan reads that no control above sets (a pipeline's schedule and microbatches, a
tensor-parallel degree, FSDP's over the GPUs / degree groups) have widgets here; an engine that cannot run the model
so says why in its place, and a degree that cannot be planned says why above the chart.

The server imports no torch: a model's shape is measured once per size in a process of its own (on the meta
device, nothing allocated) and kept; the plan itself is arithmetic."""
from __future__ import annotations

import functools

import streamlit as st

from dpviz.analysis.model_state import lines as model_state_lines
from dpviz.analysis.plan_sends import collective_lines
from dpviz.analysis.wording import human_bytes
from dpviz.catalogue import sized_models
from dpviz.config import RunConfig
from dpviz.echo import markdown_text
from dpviz.engines.plan import PRECISIONS, plan_settings, plan_shape, scaled
from dpviz.trace import Trace

# Each real size a catalogue model declares, as (model, size), and what the page calls it
SIZES = {(model, size): real.label for model, spec in sized_models().items() for size, real in spec.sizes.items()}
MEMORIES = (24, 40, 80)  # GiB per device (a maker's "80 GB" card): the common cards' memory
COMPUTING = {"full": "float32", "mixed": "mixed precision (bfloat16 compute, float32 parameters and state)"}
HELD = ("parameters", "gradients", "optimizer state")
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}


@functools.lru_cache(maxsize=2 * len(SIZES))
def shape_at(model: str, size: str, precision: str = "full"):
    """Catalogue model `model`'s shape at `size`, one row (of the row it declares there) long, float32 parameters
    computing in float32 or (`precision` mixed) bfloat16, measured apart."""
    from dpviz.engines.apart import call_apart
    from dpviz.engines.plan import measure_catalogue

    return call_apart(measure_catalogue, model, size, 1, 5, 2, None, precision)


@functools.lru_cache(maxsize=32)
def toy_shape(model: str, rows: int, input_size: int, output_size: int, precision: str = "full"):
    """The shape of the catalogue model a live run ran, on the run's batch, in its precision, measured apart."""
    from dpviz.engines.apart import call_apart
    from dpviz.engines.plan import measure_catalogue

    return call_apart(measure_catalogue, model, None, rows, input_size, output_size, None, precision)


def show_real_size(config: RunConfig, traces: list[Trace]) -> None:
    from dpviz.figures.plan import fits, plan_figure
    from dpviz.figures.presenting import presentation
    from dpviz.page.state import PRESENT

    st.subheader("At real size")
    left, middle, right = st.columns(3)
    model, size = left.selectbox("Model", list(SIZES), format_func=SIZES.get, index=len(SIZES) - 1, key="real_size",
                                 help="A catalogue model at the shapes it declares, built on the meta device: nothing "
                                      "is allocated, nothing runs.")
    spec = sized_models()[model]
    gpus = middle.number_input("GPUs", min_value=1, max_value=1024, value=8, step=1, key="real_gpus")
    memory = right.radio("GiB per GPU", MEMORIES, index=2, horizontal=True, key="real_memory")
    precision = left.radio("Precision", PRECISIONS, index=PRECISIONS.index(config.precision), horizontal=True,
                           key="real_precision", help="full: float32 throughout. mixed: bfloat16 compute over float32 "
                           "parameters, gradients and optimizer state (torch.autocast; FSDP2's MixedPrecisionPolicy).")
    options = plan_controls()
    optimizer = config.optimizer if config.train else "adam"
    shape = scaled(shape_at(model, size, precision), int(gpus))  # a row a GPU
    try:
        found = plan_shape(shape, int(gpus), optimizer, **options)
    except ValueError as error:  # a plan's own setting that cannot be planned (a degree that does not divide the GPUs)
        st.warning(f"{markdown_text(str(error), 300)} Planned without it.")
        unset = {name: value for name, value in options.items() if name not in plan_settings()}
        found = plan_shape(shape, int(gpus), optimizer, **unset)
    figure = plan_figure(found, int(memory), f"A {model} with {SIZES[model, size]}")  # the model's name as a noun
    st.plotly_chart(presentation(figure) if st.session_state.get(PRESENT) else figure, width="stretch",
                    config=CHART_CONFIG, key="real_size_chart")
    ok = fits(found, int(memory))
    st.markdown(" ".join(f"**{planned['label']}**: {'fits' if ok[name] else 'does not fit'}." if name in ok
                         else f"**{planned['label']}**: {markdown_text(planned['refused'], 300)}"
                         for name, planned in found["engines"].items())
                + f" Training with {optimizer} in {COMPUTING[precision]}, {spec.real_row_text(size)} per GPU (a "
                  "pipeline cuts the same batch into its microbatches, a stage per GPU; every rank of a tensor-parallel "
                  "group reads all of the group's rows), no activation checkpointing; "
                  "the plan's rules are those the toy runs are held against.")
    said = collective_lines(found) + model_state_lines(found)
    if said:
        st.markdown(" ".join(said))
    st.markdown(toy_words(config, traces))


def plan_controls() -> dict:
    """A widget for each option an engine's plan reads that the page's own controls do not set here (a pipeline's
    schedule and microbatches: the runs on this page are of the other engines), as the engine declares it."""
    from dpviz.engines.plan import plan_options

    declared = list(plan_options().values())
    chosen = {}
    for column, option in zip(st.columns(max(1, len(declared))), declared):
        key = f"real_{option.name}"
        if option.kind == "choice":
            chosen[option.name] = column.selectbox(option.label, option.choices, index=option.choices.index(option.unset),
                                                   key=key, help=option.help)
        else:
            low, high = option.limits
            chosen[option.name] = int(column.number_input(option.label, min_value=int(low), max_value=int(high),
                                                          value=option.unset, step=1, key=key, help=option.help))
    return chosen


def toy_words(config: RunConfig, traces: list[Trace]) -> str:
    """The plan of the toy run's own settings, against what its ranks held: equal, and said so."""
    if not config.train:
        return "The toy run above trains nothing: turn on **Train** to hold the plan against what its ranks held."
    held = [trace for trace in traces if trace.failure is None and trace.facts.get("held")]
    if not held:
        return ""
    shape = toy_shape(config.model, config.batch_size, config.input_size, config.output_size, config.precision)
    found = plan_shape(shape, config.gpus, config.optimizer)
    parts, unequal = [], []
    for trace in held:
        planned = found["engines"][trace.engine]["devices"]
        same = all(rank[kind]["bytes"] == planned[r][kind] for r, rank in enumerate(trace.facts["held"]) if rank
                   for kind in HELD)
        (parts if same else unequal).append(trace.spec.label)
        first = planned[0]
    if unequal:
        return (f"The plan of the toy settings differs from what the ranks of {', '.join(unequal)} held: "
                "please report it.")
    return (f"**The same rules at toy size.** Planned from the toy model's shapes, every rank of {', '.join(parts)} "
            f"holds exactly what the live runs' ranks held: parameters, gradients and optimizer state, byte for byte "
            f"(rank 0 of the last: {human_bytes(first['parameters'])}, {human_bytes(first['gradients'])} and "
            f"{human_bytes(first['optimizer state'])}).")
