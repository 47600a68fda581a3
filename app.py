"""dpviz's page: pick the DataParallel tutorial's settings, run it live, see the scatter and the gather.

    streamlit run app.py

Layout and widgets only; running, checking and drawing live in the dpviz package.
"""
from __future__ import annotations

import contextlib
import dataclasses

import streamlit as st

from dpviz import chrome_trace, trace_json
from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS
from dpviz.config import DDP_ONLY, FLOAT_LIMITS, INPUTS, LIMITS, MODELS, RNN_MODELS, RunConfig
from dpviz.echo import LIMIT, MESSAGE_LIMIT, code_span, markdown_text
from dpviz.engines import ENGINES
from dpviz.explain import explain
from dpviz.figures.style import presentation
from dpviz.figures.views import BATCH, SAMPLED, TEXT, WHOLE, WINDOW, VIEWS, View
from dpviz.rank_budget import BUDGET, PAGE_MOST
from dpviz.presets import COMPARE_PRESETS, DDP_PRESETS, LINK_PRESETS, PRESETS, preset_of
from dpviz.engines.run import runnable
from dpviz.session import Runs, Views, drawing
from dpviz.summary import key_figures
from dpviz.trace import Trace
from dpviz.trace_json import MAX_TRACE_BYTES, TraceError
from dpviz.wording import describe_devices, plural
from dpviz.url_state import BOTH, from_query, settle, to_query, wants_both

CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"scale": 2}}
PRESENT = "presenting"  # the presentation toggle: larger type in every chart
SHOWN_TAB = "shown_tab"  # the label of the tab shown last, kept apart from the tabs' own state
TAB = "tab"  # the views' tabs: the shown one's label, in the session's state
ENGINE = "engine_choice"  # the engine control: dp, ddp or both (the config's engine is dp or ddp)
ENGINE_LABELS = {"dp": "DataParallel", "ddp": "DistributedDataParallel", BOTH: "Both, compared"}
LEFT_QUEUE = "left_queue"  # the settings whose wait for room the visitor gave up


def apply_link_once() -> None:
    """On a session's first run, the URL's settings become the widgets' values."""
    if "link_applied" in st.session_state:
        return
    params = st.query_params.to_dict()
    config, warnings = from_query(params)
    for name, value in config.to_dict().items():
        st.session_state[name] = value
    st.session_state[ENGINE] = BOTH if wants_both(params) else config.engine
    st.session_state.link_applied = True
    st.session_state.link_config = config
    st.session_state.link_warnings = warnings


def use_preset(name: str) -> None:
    """A preset button's callback: the preset's settings (its engine too) become the widgets' values."""
    config = LINK_PRESETS[name].config
    for setting, value in config.to_dict().items():
        st.session_state[setting] = value
    st.session_state[ENGINE] = BOTH if name in COMPARE_PRESETS else config.engine


def pitfall_buttons(choice: str) -> None:
    st.sidebar.header("Pitfalls")
    groups = [("the two engines side by side where the difference shows", COMPARE_PRESETS, (BOTH,)),
              ("a way DataParallel surprises people", PRESETS, ("dp", BOTH)),
              ("a way DistributedDataParallel surprises people, on real processes", DDP_PRESETS, ("ddp", BOTH))]
    for words, presets, shown in groups:
        if choice in shown:
            st.sidebar.caption(f"One click each: a run that shows {words}.")
            for name, preset in presets.items():
                st.sidebar.button(preset.title, key=f"preset_{name}", on_click=use_preset, args=(name,),
                                  help=preset.look_for, width="stretch")


def controls() -> tuple[RunConfig, str]:
    """The sidebar's widgets, as a RunConfig that fits every limit, and the engine choice (dp, ddp or both)."""
    st.sidebar.toggle("Presenting: larger text in the charts", key=PRESENT,
                      help="For a projector or the back of a classroom: titles, labels, legends and hover text grow.")
    st.sidebar.header("Settings")
    choice = st.sidebar.radio(
        "Engine", list(ENGINE_LABELS), key=ENGINE, format_func=ENGINE_LABELS.get,
        help="DataParallel: one process, a thread per replica, the batch scattered and the outputs gathered every "
        "step. DistributedDataParallel: one real process per rank (gloo on the CPU, NCCL on GPUs), each loading "
        "its own rows, only the gradients all-reduced. Both: the same settings under each, side by side.",
    )
    number = lambda label, name, help: st.sidebar.number_input(
        label, min_value=LIMITS[name][0], max_value=LIMITS[name][1], step=1, key=name, help=help
    )
    lanes = {"dp": "Number of GPUs", "ddp": "Number of ranks (processes)", BOTH: "Number of GPUs and of ranks"}[choice]
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
        "gpus": st.sidebar.slider(lanes, *LIMITS["gpus"], key="gpus",
                                  help="Devices DataParallel spreads each batch over; processes DDP runs, one per rank."),
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
            help="cuda: the real nn.DataParallel (and DDP with NCCL) on this machine's GPUs. simulated: CPU threads "
            "that follow DataParallel's rules; DDP then runs its real processes on the CPU with gloo. auto: cuda when "
            "there are enough GPUs.",
        ),
    }
    if choice != "dp":
        values.update(engine="ddp", **ddp_controls())
        if not showing_upload():  # an uploaded trace's settings are not run
            values["gpus"] = ranks_that_fit(values["gpus"], choice)
    config, warnings = settle(values)
    for warning in warnings:
        say(warning)
    return config, choice


def ddp_controls() -> dict:
    """DistributedDataParallel's own settings, in an expander: what DDP users tune and where they trip."""
    box = st.sidebar.expander("DistributedDataParallel options")
    whole = lambda label, name, help: box.number_input(
        label, min_value=LIMITS[name][0], max_value=LIMITS[name][1], step=1, key=name, help=help)
    flag = lambda label, name, help: box.toggle(label, key=name, help=help)
    low, high = FLOAT_LIMITS["bucket_cap_mb"]
    for name, unset in DDP_ONLY.items():  # settings a DataParallel run left out start at DDP's defaults
        st.session_state.setdefault(name, unset)
    return {
        "bucket_cap_mb": box.number_input(
            "bucket_cap_mb (MiB; empty: DDP's default)", min_value=low, max_value=high, value=None, key="bucket_cap_mb",
            format="%.4f", help="DDP's gradient bucket cap. Left empty, 25 MiB with a first bucket of 1 MiB; a tiny cap "
            "such as 0.0002 splits even these small models into several buckets."),
        "accumulate": whole("Accumulate gradients over N steps", "accumulate",
                            "N-1 steps under no_sync() (no all-reduce), then one that all-reduces and steps. Needs Train."),
        "epochs": whole("Epochs", "epochs", "Passes over the data."),
        "set_epoch": flag("sampler.set_epoch(epoch)", "set_epoch", "Off: every epoch loads the same rows in the same order."),
        "batch_per_process": flag("batch_size per process", "batch_per_process",
                                  "On: every rank's DataLoader loads batch_size rows, as DDP code does; the global batch "
                                  "grows with the ranks. Off: batch_size is the global batch, as in the tutorial."),
        "drop_last": flag("DistributedSampler(drop_last=True)", "drop_last", "Drop the rows that do not divide evenly."),
        "find_unused": flag("find_unused_parameters=True", "find_unused", "Needed when forward leaves a parameter unused."),
        "uneven": flag("Split the rows by hand (uneven shards)", "uneven",
                       "No DistributedSampler: contiguous shards, so ranks may get different numbers of batches."),
        "join": flag("ddp.join() around the loop", "join", "Ranks that run out of batches keep answering the others."),
        "timeout_s": whole("Collective timeout (s)", "timeout_s", "How long a rank waits in a collective before the run ends."),
    }


def ranks_that_fit(asked: int, choice: str) -> int:
    """The ranks a page run starts: what was asked, unless more than a chart shows well or than this
    server has memory for (each rank is a process); the page then says so, in a visitor's words."""
    room = BUDGET.room()
    most = min(PAGE_MOST, max(1, room))
    if asked <= most:
        return asked
    both = " for both engines" if choice == BOTH else ""
    if room >= PAGE_MOST:  # the page's own limit, not the server's memory
        why = f"the page shows at most {PAGE_MOST} ranks, each one a process of its own"
    else:
        why = f"this server has memory for {plural(most, 'rank')} at a time, each one a process of its own"
    say(f"Showing {most} devices{both}, not {asked}: {why}.")
    return most


def waiting_for_room(config: RunConfig, page: RunConfig):
    """Hold the server-wide budget for a run, saying while it waits how many runs are ahead; the visitor can
    leave the queue (for the page's settings `page`: both engines' runs, on the Both page), and one who
    closes the tab leaves it too. A DDP run holds its ranks (each a process); a DataParallel run holds one
    share, as it runs in the server itself: ten visitors arriving at once would otherwise grow the server by
    ten runs at the moment a forkserver starts beside it."""
    box = st.empty()
    message = []
    processes = config.engine == "ddp"
    what = f"This run of {plural(config.gpus, 'rank')}" if processes else "This run"

    def waiting(ahead: int, held: int) -> None:
        still_here()
        if not message:  # once: a widget made again at every look would clash with itself
            with box.container():
                message.append(st.empty())
                st.button("Leave the queue", key=f"leave_queue_{config.engine}", on_click=leave_queue, args=(page,))
        message[0].info(f"Waiting for room: {plural(ahead, 'run')} {'is' if ahead == 1 else 'are'} ahead of this one, "
                        f"running or waiting. {what} starts as soon as this server has the memory for it.")

    @contextlib.contextmanager
    def held():
        with BUDGET.ranks(config.gpus if processes else 1, waiting):
            box.empty()  # the message and its button go: the run has started
            yield

    return held()


def leave_queue(page: RunConfig) -> None:
    st.session_state[LEFT_QUEUE] = page


class Left(Exception):
    """The visitor's tab has closed: the run stops and gives back its processes and its place."""


def still_here() -> None:
    """Raise Left when this session's browser has gone (a closed tab): its script would run on otherwise."""
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    context = get_script_run_ctx()
    if Runtime.exists() and context is not None and not Runtime.instance().is_active_session(context.session_id):
        raise Left


def say(sentence: str) -> None:
    """A warning sentence, shown as text: it may name a value from the link or a file."""
    st.warning(markdown_text(sentence))


UPLOAD = "upload_file"  # the trace uploader's key


def take_upload() -> None:
    """The uploader's callback: check a new file once (the same Trace object then keeps its figures
    cached), and set the controls to the settings it was recorded with, so the sidebar describes it."""
    upload = st.session_state.get(UPLOAD)
    if upload is None:
        st.session_state.upload, st.session_state.upload_error = None, None
        return
    try:
        st.session_state.upload, st.session_state.upload_error = trace_json.loads(upload.getvalue()), None
    except TraceError as error:
        st.session_state.upload, st.session_state.upload_error = None, str(error)
        return
    config = st.session_state.upload.config
    for name, value in config.to_dict().items():
        st.session_state[name] = value  # a loaded trace's settings passed the same checks as the widgets'
    st.session_state[ENGINE] = config.engine


def showing_upload() -> bool:
    """Whether the page shows an uploaded trace (set by the uploader's callback, before this run)."""
    return st.session_state.get(UPLOAD) is not None and st.session_state.get("upload") is not None


def uploaded_trace() -> Trace | None:
    """A trace file the visitor uploaded, checked; None (with a sentence shown) if there is none or it is bad."""
    upload = st.sidebar.file_uploader(
        "Explore a recorded trace (JSON)", type=["json"], max_upload_size=MAX_TRACE_BYTES // 2**20, key=UPLOAD,
        on_change=take_upload,
        help="For example one written by `python -m dpviz --trace run.json` on a multi-GPU machine. The settings "
        "above change to the ones it was recorded with.",
    )
    if upload is None:
        return None
    if st.session_state.get("upload_error"):
        # The file's name and the loader's sentence (which quotes the file) are the visitor's text.
        st.warning(f"{markdown_text(upload.name, LIMIT)} could not be used: "
                   f"{markdown_text(st.session_state.upload_error, MESSAGE_LIMIT)} Showing the live run instead.")
    return st.session_state.get("upload")


def run(config: RunConfig, page: RunConfig | None = None) -> Trace | None:
    """The trace of `config`, from this session's recent runs or recorded now (waiting for room first);
    `page` is the page's own settings, which leaving the queue applies to (both runs on the Both page)."""
    config, reason = runnable(config)
    if reason:
        say(reason)
    runs: Runs = st.session_state.setdefault("runs", Runs())
    if config in runs:
        return runs.get(config)
    processes = config.engine == "ddp"
    unit = "step" if processes else "batch"
    where = f" on {config.gpus} processes" if processes else ""

    def progress(done: int, total: int) -> None:
        still_here()  # a closed tab ends the run here, and its processes with it
        bar.progress(done / total, text=f"{unit.title()} {done:,} of {total:,}")

    bar = st.empty()
    try:
        with waiting_for_room(config, page or config):
            bar.progress(0.0, text=f"Running {config.num_batches:,} {unit}{'s' if unit == 'step' else 'es'}{where} ...")
            trace = runs.get(config, progress)
    except Left:  # nobody is there to read what happened
        return None
    except Exception as error:  # e.g. CUDA out of memory on a real GPU: say so, keep the page alive
        bar.empty()
        st.error(f"The run failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        return None
    bar.empty()
    return trace


def left_queue(page: RunConfig) -> bool:
    """Whether the visitor left the queue for the page's settings, offering to join again (once a page)."""
    if st.session_state.get(LEFT_QUEUE) != page:
        return False
    st.info("You left the queue: this run has not started. Change a setting, or join the queue again.")
    st.button("Join the queue again", key="join_queue", on_click=lambda: st.session_state.pop(LEFT_QUEUE, None))
    return True


def show_outcome(trace: Trace) -> None:
    """The preset being shown, the error that ended the run and the warnings, above the views."""
    # Few boxes above the tabs, so a projector's first screen still reaches the chart: the devices' sentence
    # shares the pitfall's box, and the run's own error is said once.
    devices = describe_devices(trace)
    preset = preset_of(trace.config)
    if preset is not None:
        st.info(f"**Pitfall: {preset.title}.** {preset.look_for} [Link to this preset](?preset={preset.name})  \n"
                f"{devices}")
    else:
        (st.success if trace.backend == "cuda" else st.info)(devices)
    failure = trace.failure
    unit = unit_of(trace)
    if failure is not None:
        whose = "The rank's own error" if trace.engine == "ddp" else "The replica's own error"
        own = "" if failure.original.strip() in failure.headline else \
            f"  \n{whose}: {code_span(failure.original, MESSAGE_LIMIT)}"
        st.error(f"**{unit.title()} {failure.batch:,} failed**, as it would in your training loop: "
                 f"{code_span(failure.headline, MESSAGE_LIMIT)}{own}")
        with st.expander("The whole error, as Python prints it"):
            st.code(f"{failure.type}: {failure.message}", language=None)
    for note in trace.warnings:
        st.warning(f"{code_span(f'{note.category}: {note.message}', MESSAGE_LIMIT)} "
                   f"({note.count:,} time{'s' if note.count != 1 else ''}, "
                   f"first in {unit} {note.batch:,})")


def unit_of(trace: Trace) -> str:
    """What one entry of trace.batches is to a reader: a DataParallel batch, or a DDP step (every rank's batch)."""
    return "step" if trace.engine == "ddp" else "batch"


def sampled_batch(trace: Trace, sampled: list[int], key: str) -> int:
    """A radio over the sampled batches (first, last, failing), kept valid when a new run samples others."""
    if len(sampled) == 1:
        return sampled[0]
    last = len(trace.batches) - 1
    failed = trace.failure.batch if trace.failure else None
    if st.session_state.get(key) not in sampled:  # a failed run opens on the batch that failed
        st.session_state[key] = failed if failed in sampled else sampled[0]

    def name(b: int) -> str:
        what = "the first" if b == 0 else "failed" if b == failed else "the last" if b == last else ""
        return f"{unit_of(trace)} {b:,}" + (f" ({what})" if what else "")

    return st.radio(unit_of(trace).title(), sampled, horizontal=True, key=key, format_func=name)


def sampled_chart(trace: Trace, sampled: list[int], build, name: str, missing: str) -> None:
    """A view drawn for one of the batches the trace sampled, picked with a radio; `missing` when none was."""
    if not sampled:
        st.info(missing)
    else:
        chart(trace, build, sampled_batch(trace, sampled, side_key(trace, f"{name}_batch")), key=f"{name}_chart")


def chart(trace: Trace, build, *args, key: str) -> None:
    """Draw `build(trace, *args)`, built once per trace and arguments in this session (and once more in
    larger type, for presenting)."""
    views: Views = st.session_state.setdefault("views", Views())
    fig = views.get(trace, presented, build, *args) if st.session_state.get(PRESENT) else views.get(trace, build, *args)
    st.plotly_chart(fig, width="stretch", config=CHART_CONFIG, key=side_key(trace, key))


def presented(trace: Trace, build, *args):
    """`build`'s figure in larger type, for a projector: a copy, the plain one stays as it is."""
    views: Views = st.session_state.setdefault("views", Views())
    return presentation(views.get(trace, build, *args))


def side_key(trace: Trace, key: str) -> str:
    """A widget's key, the side's engine in front when both engines are shown."""
    return f"{trace.engine}_{key}" if st.session_state.get(ENGINE) == BOTH else key


def batch_view(trace: Trace, view: View) -> None:
    """A slider over every batch (the last one first)."""
    last, key = len(trace.batches) - 1, side_key(trace, f"{view.key}_batch")
    if st.session_state.get(key, last) > last:  # a new run may have fewer batches
        st.session_state[key] = last
    st.session_state.setdefault(key, last)
    batch = st.slider(unit_of(trace).title(), 0, last, key=key) if last > 0 else 0
    chart(trace, view.build, batch, key=view.key)


def window_view(trace: Trace, view: View) -> None:
    """A slider over windows of consecutive batches, when the trace has more than one window fits; where the
    view can, a switch to draw a few batches one by one instead of the window's summary."""
    window, build, first, key = view.window(trace), view.build, 0, side_key(trace, f"{view.key}_first")
    if view.detail is not None and trace.engine == "dp" and len(trace.batches) > view.detail_window:
        if st.toggle(f"Batch by batch ({view.detail_window} at a time)", key=side_key(trace, f"{view.key}_detail"),
                     help="Off: a window of many batches, drawn as one typical batch. On: a few batches, each drawn."):
            window, build = view.detail_window, view.detail
    if len(trace.batches) > window:
        st.session_state.setdefault(key, 0)
        if st.session_state[key] > len(trace.batches) - 1:
            st.session_state[key] = 0
        unit = unit_of(trace)
        first = st.slider(f"First {unit} of the window ({window:,} {unit}{'es' if unit == 'batch' else 's'})", 0,
                          len(trace.batches) - 1,
                          step=window, key=key)
    chart(trace, build, first, key=view.key)


def text_view(trace: Trace, view: View) -> None:
    """A block of text (the tutorial log), its lines wrapped so a narrow window still shows each line's end
    (the output size), and scrolled within a screen's height so What happened stays near."""
    views: Views = st.session_state.setdefault("views", Views())
    text = views.get(trace, view.build)
    st.code(text, language=None, wrap_lines=True, height=520 if text.count("\n") > 24 else "content")


CONTROLS = {
    WHOLE: lambda trace, view: chart(trace, view.build, key=view.key),
    BATCH: batch_view,
    WINDOW: window_view,
    SAMPLED: lambda trace, view: sampled_chart(trace, view.sampled(trace), view.build, view.key, view.missing),
    TEXT: text_view,
}


def key_metrics(trace: Trace) -> None:
    """The key figures as metrics in a row that wraps: each as wide as its words, so none is cut off on a
    narrow window or a projector's 1024 pixels."""
    views: Views = st.session_state.setdefault("views", Views())
    with st.container(horizontal=True, gap="medium"):
        for label, value in views.get(trace, key_figures).items():
            st.metric(label, value, width="content", border=True)


def view_of(trace: Trace, view: View) -> None:
    if trace.engine not in view.engines:
        st.info(f"{view.tab} draws {' and '.join(ENGINES[e] for e in view.engines)} runs only; "
                f"this run is {ENGINES[trace.engine]}.")
    else:
        CONTROLS[view.control](trace, view)


def headline(paragraph: str, limit: int = 220) -> str:
    """A paragraph's bold opening ("**Why GPU 0 carries more.**") and its first sentence, whole or not at all:
    a line that says what was found, not only what it is about."""
    if not (paragraph.startswith("**") and "**" in paragraph[2:]):
        return paragraph.split(". ")[0][:limit]
    end = paragraph.index("**", 2) + 2
    bold, rest = paragraph[:end], paragraph[end:]
    stop = rest.find(". ")
    sentence = rest[: stop + 1] if stop >= 0 else rest
    if len(sentence) > limit:  # its first clause, the rest in the details
        cut = max(sentence.rfind(mark, 0, limit) for mark in (", ", "; ", ": "))
        sentence = sentence[:cut] + " …" if cut > 0 else ""
    return bold + ("" if sentence.count("`") % 2 else sentence)  # never a code span cut in two


def what_happened(trace: Trace, columns: int = 2, heading: bool = True) -> None:
    """The key figures and one line per finding first; the explanations themselves on request."""
    if heading:
        st.subheader("What happened")
    key_metrics(trace)
    views: Views = st.session_state.setdefault("views", Views())
    paragraphs = views.get(trace, explain)
    st.markdown("\n".join(f"- {headline(p)}" for p in paragraphs))
    with st.expander("Why, finding by finding"):
        if columns == 1:  # beside the other engine: already in a column of its own
            for paragraph in paragraphs:
                st.markdown(paragraph)
            return
        size = (len(paragraphs) + columns - 1) // columns
        for column, start in zip(st.columns(columns, gap="large"), range(0, len(paragraphs), size or 1)):
            for paragraph in paragraphs[start:start + size]:
                column.markdown(paragraph)


def downloads(trace: Trace) -> None:
    name = f"dpviz-{trace.engine}-{trace.backend}-{trace.config.gpus}{'ranks' if trace.engine == 'ddp' else 'gpus'}"
    what = ENGINES[trace.engine] if st.session_state.get(ENGINE) == BOTH else ""
    key = side_key(trace, "download")
    st.sidebar.download_button(f"Trace (JSON) {what}".strip(), lambda: trace_json.dumps(trace), f"{name}.json",
                               "application/json", on_click="ignore", key=f"{key}_json")
    st.sidebar.download_button(f"Chrome trace (Perfetto) {what}".strip(), lambda: chrome_trace.dumps(trace),
                               f"{name}.perfetto.json", "application/json", on_click="ignore", key=f"{key}_chrome")
    st.sidebar.download_button(f"HTML report {what}".strip(), lambda: report(trace), f"{name}.html", "text/html",
                               on_click="ignore", key=f"{key}_html")


def report(trace: Trace) -> str:
    """The HTML report, built when the button is pressed (it draws every view)."""
    from dpviz.figures.report import html_report

    return html_report(trace)


def view_tabs(labels: list[str]):
    """The views' tabs, the one shown before selected again when a run adds a tab (Pitfall) or renames one.

    Streamlit makes tabs with other labels, or another default, a new widget, which opens on its default:
    so the default is chosen when the labels change (the tab shown last) and kept while they stay, and
    a click decides in between."""
    state = st.session_state.setdefault(SHOWN_TAB, {"labels": None, "default": None, "shown": None})
    if state["labels"] != labels:
        state["labels"], state["default"] = labels, state["shown"] if state["shown"] in labels else None
    tabs = st.tabs(labels, key=TAB, on_change="rerun", default=state["default"])
    state["shown"] = st.session_state.get(TAB)
    return tabs


def present(views, *traces: Trace) -> list[View]:
    """The views with something to draw for one of `traces` (the Pitfall view only for a run that has one)."""
    cache: Views = st.session_state.setdefault("views", Views())
    return [v for v in views if v.shown is None or any(cache.get(t, v.shown) for t in traces)]


def show(trace: Trace) -> None:
    show_outcome(trace)
    # Only the shown tab's view is built and sent (a click on another reruns the page, from the session's
    # runs and figures): the others' figures are work the first screen does not need.
    # The views that draw this run's engine first: the first screen shows a chart, not a "DataParallel only".
    views = sorted(present(VIEWS, trace), key=lambda view: trace.engine not in view.engines)
    labels = [view.tab.replace("per batch", f"per {unit_of(trace)}") for view in views]
    for view, tab in zip(views, view_tabs(labels)):
        with tab:
            if tab.open:
                view_of(trace, view)
    # Below the chart: on a projector's 1024 × 768 the first screen is the chart, and the key figures (a
    # pass over the run's tables) come a moment after it.
    what_happened(trace)
    st.sidebar.header("Files")
    downloads(trace)


COMPARE = "Compare"  # the side-by-side page's first tab
SIDE_BY_SIDE = "side_by_side"  # both engines' charts in two columns rather than one above the other


def show_both(dp: Trace, ddp: Trace) -> None:
    """The same settings under DataParallel and DDP: what moves, then every view for each, one above the other
    (or side by side, on request)."""
    from dpviz.compare import comparison  # here: pandas, which a page of one engine never needs
    from dpviz.figures.compare import comparison_figure

    shown = next((p for p in COMPARE_PRESETS.values() if p.config == dataclasses.replace(ddp.config, backend="auto")), None)
    if shown is not None:  # dpviz's own words: what the comparison's preset is there to show
        st.info(f"**{shown.title}.** {shown.look_for}")
    left, right = st.columns(2, gap="large")
    for column, trace in ((left, dp), (right, ddp)):
        with column:
            st.markdown(f"#### {ENGINES[trace.engine]}")
            show_outcome(trace)
    tabs = [COMPARE] + [view.tab for view in present(VIEWS, dp, ddp)]
    for label, tab in zip(tabs, view_tabs(tabs)):
        with tab:
            if not tab.open:
                continue
            if label == COMPARE:
                figure = comparison_figure(dp, ddp)
                st.plotly_chart(presentation(figure) if st.session_state.get(PRESENT) else figure, width="stretch",
                                config=CHART_CONFIG, key="compare_chart")
                for sentence in comparison(dp, ddp):
                    st.markdown(markdown_text(sentence, 2_000))  # dpviz's own sentence, naming lanes: escaped, not cut
                continue
            view = next(v for v in VIEWS if v.tab == label)
            # Half a 1024-pixel window is too narrow for a chart's title, legend and lanes: one above the
            # other unless the visitor has the room and asks for columns.
            if st.toggle("Side by side (wide screens)", key=SIDE_BY_SIDE,
                         help="DataParallel's chart beside DDP's, each half as wide; off, one above the other."):
                for column, trace in zip(st.columns(2, gap="medium"), (dp, ddp)):
                    with column:
                        view_of(trace, view)
            else:
                for trace in (dp, ddp):
                    st.markdown(f"##### {ENGINES[trace.engine]}")
                    view_of(trace, view)
    st.subheader("What happened")
    for column, trace in zip(st.columns(2, gap="large"), (dp, ddp)):
        with column:
            st.markdown(f"#### {ENGINES[trace.engine]}")
            what_happened(trace, columns=1, heading=False)
    st.sidebar.header("Files")
    downloads(dp)
    downloads(ddp)


def dataparallel_side(config: RunConfig) -> RunConfig:
    """The same settings for DataParallel, DDP's own options left out."""
    values = {**config.to_dict(), **DDP_ONLY, "engine": "dp"}
    return RunConfig(**values)


ABOUT = ("PyTorch's DataParallel tutorial, live: nn.Linear (or another model) wrapped in nn.DataParallel, or run by "
         "DistributedDataParallel on real processes, random data, and every row followed from the DataLoader to a device "
         "and back. Settings and pitfalls in the sidebar.")
COMPACT_TOP = ".stMainBlockContainer { padding-top: 3rem; }"  # Streamlit's default is 6rem
TITLES = {"dp": "How nn.DataParallel splits a batch", "ddp": "How DistributedDataParallel shares the work",
          BOTH: "DataParallel and DistributedDataParallel, side by side"}


def main() -> None:
    st.set_page_config(page_title="dpviz: DataParallel, visualised", layout="wide")
    apply_link_once()
    # A projector's 1024 × 768 must show a chart on the first screen: less room above the page's own
    # heading than Streamlit leaves by default (its toolbar keeps its place), a heading that fits one line.
    st.html(f"<style>{COMPACT_TOP}</style>")
    st.header(TITLES[st.session_state.get(ENGINE, "dp")], anchor=False, help=ABOUT)
    config, choice = controls()
    pitfall_buttons(choice)
    if config == st.session_state.link_config:
        for warning in st.session_state.link_warnings:
            say(warning)
    st.query_params.from_dict(to_query(config, both=choice == BOTH))
    trace = uploaded_trace()
    if trace is not None:
        st.caption(f"Showing an uploaded trace, recorded with torch {markdown_text(trace.torch_version, 40)}; the "
                   "settings in the sidebar are the ones it was recorded with, and do not run while it is shown: "
                   "remove the file to run live.")
        with drawing():
            show(trace)
    elif left_queue(config):
        return
    elif choice == BOTH:
        dp, ddp = run(dataparallel_side(config), page=config), run(config)
        if dp is not None and ddp is not None:
            with drawing():
                show_both(dp, ddp)
    else:
        trace = run(config)
        if trace is not None:
            with drawing():
                show(trace)


if __name__ == "__main__":
    main()
