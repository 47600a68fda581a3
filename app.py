"""dpviz's page: pick the DataParallel tutorial's settings, run it live, see the scatter and the gather.

    streamlit run app.py

Layout and widgets only; running, checking and drawing live in the dpviz package.
"""
from __future__ import annotations

import streamlit as st

from dpviz import chrome_trace, trace_json
from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS
from dpviz.config import INPUTS, LIMITS, MODELS, RNN_MODELS, RunConfig
from dpviz.echo import LIMIT, MESSAGE_LIMIT, code_span, markdown_text
from dpviz.explain import explain
from dpviz.engines import ENGINES
from dpviz.figures import VIEWS, View, html_report
from dpviz.figures.views import BATCH, SAMPLED, TEXT, WHOLE, WINDOW
from dpviz.presets import PRESETS, preset_of
from dpviz.engines.run import runnable
from dpviz.session import Runs, Views
from dpviz.summary import key_figures
from dpviz.trace import Trace
from dpviz.trace_json import MAX_TRACE_BYTES, TraceError
from dpviz.wording import describe_devices
from dpviz.url_state import from_query, settle, to_query

CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}
TAB = "tab"  # the views' tabs: the shown one's label, in the session's state


def apply_link_once() -> None:
    """On a session's first run, the URL's settings become the widgets' values."""
    if "link_applied" in st.session_state:
        return
    config, warnings = from_query(st.query_params.to_dict())
    for name, value in config.to_dict().items():
        st.session_state[name] = value
    st.session_state.link_applied = True
    st.session_state.link_config = config
    st.session_state.link_warnings = warnings


def use_preset(name: str) -> None:
    """A pitfall button's callback: the preset's settings become the widgets' values."""
    for setting, value in PRESETS[name].config.to_dict().items():
        st.session_state[setting] = value


def pitfall_buttons() -> None:
    st.sidebar.header("Pitfalls")
    st.sidebar.caption("One click each: a run that shows a way DataParallel surprises people.")
    for name, preset in PRESETS.items():
        st.sidebar.button(preset.title, key=f"preset_{name}", on_click=use_preset, args=(name,),
                          help=preset.look_for, width="stretch")


def controls() -> RunConfig:
    """The sidebar's widgets, as a RunConfig that fits every limit."""
    st.sidebar.header("Settings")
    number = lambda label, name, help: st.sidebar.number_input(
        label, min_value=LIMITS[name][0], max_value=LIMITS[name][1], step=1, key=name, help=help
    )
    values = {
        "model": st.sidebar.selectbox(
            "Model", MODELS, key="model", format_func=lambda name: MODEL_SPECS[name].label,
            help="What each replica runs. The tutorial's is one nn.Linear; the others show BatchNorm, images, "
            "a GRU with its batch on dim 0 or dim 1, a loss returned from forward, and state changed in forward.",
        ),
        "inputs": st.sidebar.selectbox(
            "Inputs", INPUTS, key="inputs", format_func=lambda name: INPUT_SPECS[name].label,
            help="How each batch is passed to the model: tensors in tuples and dicts are split, everything else "
            f"is handed whole to every replica. model(x, h0) needs a GRU ({', '.join(RNN_MODELS)}).",
        ),
        "batch_size": number("Batch size", "batch_size", "Rows per batch from the DataLoader (tutorial: 30)."),
        "data_size": number("Data size", "data_size", "Rows of random data (tutorial: 100)."),
        "gpus": st.sidebar.slider("Number of GPUs", *LIMITS["gpus"], key="gpus",
                                  help="Devices DataParallel spreads each batch over."),
        "input_size": number("Input size", "input_size", "Features per row: nn.Linear's in_features (tutorial: 5); "
                             "the CNN's image side, the GRU's features per step."),
        "output_size": number("Output size", "output_size", "nn.Linear's out_features (tutorial: 2)."),
        "shuffle": st.sidebar.toggle("Shuffle", key="shuffle", help="DataLoader(shuffle=...) (tutorial: on)."),
        "train": st.sidebar.toggle(
            "Train: loss, backward, step", key="train",
            help="The tutorial runs forward only. On: an MSE loss on GPU 0, backward through DataParallel "
            "(gradients split back to the replicas and summed onto GPU 0) and an SGD step.",
        ),
        "seed": number("Seed", "seed", "Seeds the data, the weights and the shuffle: same seed, same run."),
        "backend": st.sidebar.radio(
            "Backend", ["auto", "cuda", "simulated"], key="backend", horizontal=True,
            help="cuda: the real nn.DataParallel on this machine's GPUs. simulated: CPU threads that follow "
            "DataParallel's rules. auto: cuda when there are enough GPUs.",
        ),
    }
    config, warnings = settle(values)
    for warning in warnings:
        say(warning)
    return config


def say(sentence: str) -> None:
    """A warning sentence, shown as text: it may name a value from the link or a file."""
    st.warning(markdown_text(sentence))


def uploaded_trace() -> Trace | None:
    """A trace file the visitor uploaded, checked; None (with a sentence shown) if there is none or it is bad."""
    upload = st.sidebar.file_uploader(
        "Explore a recorded trace (JSON)", type=["json"], max_upload_size=MAX_TRACE_BYTES // 2**20,
        help="For example one written by `python -m dpviz --trace run.json` on a multi-GPU machine.",
    )
    if upload is None:
        return None
    # Parse and check a file once, not on every rerun: the same Trace object keeps its figures cached.
    if st.session_state.get("upload_id") != upload.file_id:
        try:
            st.session_state.upload = trace_json.loads(upload.getvalue())
            st.session_state.upload_error = None
        except TraceError as error:
            st.session_state.upload, st.session_state.upload_error = None, str(error)
        st.session_state.upload_id = upload.file_id
    if st.session_state.upload_error:
        # The file's name and the loader's sentence (which quotes the file) are the visitor's text.
        st.warning(f"{markdown_text(upload.name, LIMIT)} could not be used: "
                   f"{markdown_text(st.session_state.upload_error, MESSAGE_LIMIT)} Showing the live run instead.")
    return st.session_state.upload


def run(config: RunConfig) -> Trace | None:
    config, reason = runnable(config)
    if reason:
        say(reason)
    runs: Runs = st.session_state.setdefault("runs", Runs())
    if config in runs:
        return runs.get(config)
    bar = st.progress(0.0, text=f"Running {config.num_batches:,} batches ...")
    try:
        trace = runs.get(config, lambda done, total: bar.progress(done / total, text=f"Batch {done:,} of {total:,}"))
    except Exception as error:  # e.g. CUDA out of memory on a real GPU: say so, keep the page alive
        bar.empty()
        st.error(f"The run failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        return None
    bar.empty()
    return trace


def show_outcome(trace: Trace) -> None:
    """The preset being shown, the error that ended the run and the warnings, above the views."""
    preset = preset_of(trace.config)
    if preset is not None:
        st.info(f"**Pitfall: {preset.title}.** {preset.look_for} [Link to this preset](?preset={preset.name})")
    failure = trace.failure
    if failure is not None:
        st.error(f"**Batch {failure.batch:,} failed**, as it would in your training loop: "
                 f"{code_span(failure.headline, MESSAGE_LIMIT)}  \n"
                 f"The replica's own error: {code_span(failure.original, MESSAGE_LIMIT)}")
        with st.expander("The whole error, as Python prints it"):
            st.code(f"{failure.type}: {failure.message}", language=None)
    for note in trace.warnings:
        st.warning(f"{code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)} "
                   f"({note.count:,} time{'s' if note.count != 1 else ''}, "
                   f"first in batch {note.batch:,})")


def sampled_batch(trace: Trace, sampled: list[int], key: str) -> int:
    """A radio over the sampled batches (first, last, failing), kept valid when a new run samples others."""
    if len(sampled) == 1:
        return sampled[0]
    if st.session_state.get(key) not in sampled:
        st.session_state[key] = sampled[0]
    last = len(trace.batches) - 1
    failed = trace.failure.batch if trace.failure else None

    def name(b: int) -> str:
        what = "the first" if b == 0 else "failed" if b == failed else "the last" if b == last else ""
        return f"batch {b:,}" + (f" ({what})" if what else "")

    return st.radio("Batch", sampled, horizontal=True, key=key, format_func=name)


def sampled_chart(trace: Trace, sampled: list[int], build, name: str, missing: str) -> None:
    """A view drawn for one of the batches the trace sampled, picked with a radio; `missing` when none was."""
    if not sampled:
        st.info(missing)
    else:
        chart(trace, build, sampled_batch(trace, sampled, f"{name}_batch"), key=f"{name}_chart")


def chart(trace: Trace, build, *args, key: str) -> None:
    """Draw `build(trace, *args)`, built once per trace and arguments in this session."""
    views: Views = st.session_state.setdefault("views", Views())
    st.plotly_chart(views.get(trace, build, *args), width="stretch", config=CHART_CONFIG, key=key)


def batch_view(trace: Trace, view: View) -> None:
    """A slider over every batch (the last one first)."""
    last, key = len(trace.batches) - 1, f"{view.key}_batch"
    if st.session_state.get(key, last) > last:  # a new run may have fewer batches
        st.session_state[key] = last
    st.session_state.setdefault(key, last)
    batch = st.slider("Batch", 0, last, key=key) if last > 0 else 0
    chart(trace, view.build, batch, key=view.key)


def window_view(trace: Trace, view: View) -> None:
    """A slider over windows of consecutive batches, when the trace has more than one window fits."""
    window, first, key = view.window(trace), 0, f"{view.key}_first"
    if len(trace.batches) > window:
        st.session_state.setdefault(key, 0)
        if st.session_state[key] > len(trace.batches) - 1:
            st.session_state[key] = 0
        first = st.slider(f"First batch of the window ({window:,} batches)", 0, len(trace.batches) - 1,
                          step=window, key=key)
    chart(trace, view.build, first, key=view.key)


def text_view(trace: Trace, view: View) -> None:
    views: Views = st.session_state.setdefault("views", Views())
    st.code(views.get(trace, view.build), language=None)


CONTROLS = {
    WHOLE: lambda trace, view: chart(trace, view.build, key=view.key),
    BATCH: batch_view,
    WINDOW: window_view,
    SAMPLED: lambda trace, view: sampled_chart(trace, view.sampled(trace), view.build, view.key, view.missing),
    TEXT: text_view,
}


def show(trace: Trace) -> None:
    (st.success if trace.backend == "cuda" else st.info)(describe_devices(trace))
    show_outcome(trace)
    views: Views = st.session_state.setdefault("views", Views())
    figures = views.get(trace, key_figures)
    items = list(figures.items())
    for start in range(0, len(items), 4):  # four to a row: values stay readable, never cut off
        for column, (label, value) in zip(st.columns(4), items[start:start + 4]):
            column.metric(label, value)

    # Only the shown tab's view is built and sent (a click on another reruns the page, from the session's
    # runs and figures): the others' figures are work the first screen does not need.
    for view, tab in zip(VIEWS, st.tabs([view.tab for view in VIEWS], key=TAB, on_change="rerun")):
        with tab:
            if not tab.open:
                continue
            if trace.engine not in view.engines:
                st.info(f"{view.tab} draws {' and '.join(ENGINES[e] for e in view.engines)} runs only; "
                        f"this run is {ENGINES[trace.engine]}.")
            else:
                CONTROLS[view.control](trace, view)

    st.subheader("What happened")
    paragraphs = views.get(trace, explain)
    half = (len(paragraphs) + 1) // 2
    for column, part in zip(st.columns(2, gap="large"), (paragraphs[:half], paragraphs[half:])):
        for paragraph in part:
            column.markdown(paragraph)

    st.sidebar.header("Files")
    name = f"dpviz-{trace.backend}-{trace.config.gpus}gpus"
    st.sidebar.download_button("Trace (JSON)", lambda: trace_json.dumps(trace), f"{name}.json", "application/json", on_click="ignore")
    st.sidebar.download_button("Chrome trace (Perfetto)", lambda: chrome_trace.dumps(trace), f"{name}.perfetto.json", "application/json", on_click="ignore")
    st.sidebar.download_button("HTML report", lambda: html_report(trace), f"{name}.html", "text/html", on_click="ignore")


def main() -> None:
    st.set_page_config(page_title="dpviz: DataParallel, visualised", layout="wide")
    st.title("How nn.DataParallel splits a batch")
    st.caption(
        "PyTorch's DataParallel tutorial, live: nn.Linear (or another model) wrapped in nn.DataParallel, random "
        "data, and every row followed from the DataLoader to a device and back. Pitfalls in the sidebar."
    )
    apply_link_once()
    config = controls()
    pitfall_buttons()
    if config == st.session_state.link_config:
        for warning in st.session_state.link_warnings:
            say(warning)
    st.query_params.from_dict(to_query(config))
    trace = uploaded_trace()
    if trace is not None:
        st.caption(f"Showing an uploaded trace, recorded with torch {markdown_text(trace.torch_version, 40)}; "
                   "remove the file to run live.")
    else:
        trace = run(config)
    if trace is not None:
        show(trace)


if __name__ == "__main__":
    main()
