"""The sidebar: the link applied once, the settings' widgets (each engine's own options as it declares them),
the pitfall presets, and how many ranks a page run may start."""
from __future__ import annotations

import dataclasses

import streamlit as st

from dpviz.catalogue import INPUT_SPECS, MODEL_SPECS
from dpviz.config import CHOICES as SETTINGS_CHOICES, ConfigError, FLOAT_LIMITS, INPUTS, LIMITS, MODELS, RNN_MODELS, RunConfig
from dpviz.engines import ENGINES, EngineSpec
from dpviz.presets import COMPARE_PRESETS, EVERY_ENGINE, LINK_PRESETS, presets_of
from dpviz.page.budget import BUDGET, PAGE_MOST
from dpviz.page.run_costs import price
from dpviz.page.link import (COMPARE, MEMORY, PAIR, fit_pair, from_query, settle, wanted_pair, wanted_page,
                             wanted_presenting)
from dpviz.analysis.wording import plural
from dpviz.page.state import CHOICES, ENGINE, FIRST_ENGINE, OPEN_PRESET, PRESENT, SECOND_ENGINE, engine_of, pair, say
from dpviz.page.upload import showing_upload


def apply_link_once() -> None:
    """On a session's first run, the URL's settings become the widgets' values."""
    if "link_applied" in st.session_state:
        return
    params = st.query_params.to_dict()
    config, warnings = from_query(params)
    for name, value in config.to_dict().items():
        st.session_state[name] = value
    st.session_state[ENGINE] = wanted_page(params) or config.engine
    st.session_state[FIRST_ENGINE], st.session_state[SECOND_ENGINE] = wanted_pair(params)[0]
    st.session_state[PRESENT] = wanted_presenting(params)[0]
    preset = str(params.get("preset", "")).strip().lower()
    if preset in LINK_PRESETS:
        st.session_state[OPEN_PRESET] = preset
    st.session_state.link_applied = True
    st.session_state.link_config = config
    st.session_state.link_warnings = warnings


def use_preset(name: str) -> None:
    """A preset button's callback: the preset's settings (its engine too) become the widgets' values."""
    config = LINK_PRESETS[name].config
    for setting, value in config.to_dict().items():
        st.session_state[setting] = value
    opens = LINK_PRESETS[name].opens
    st.session_state[ENGINE] = COMPARE if name in COMPARE_PRESETS else MEMORY if opens == EVERY_ENGINE else config.engine
    if name in COMPARE_PRESETS:
        st.session_state[FIRST_ENGINE], st.session_state[SECOND_ENGINE] = COMPARE_PRESETS[name].pair or PAIR
    st.session_state[OPEN_PRESET] = name


def pitfall_buttons(choice: str) -> None:
    """One button per preset: the comparisons' on the page of two engines, each engine's on its own page and where
    it is one of the two compared."""
    st.sidebar.header("Pitfalls")
    compared = pair() if choice == COMPARE else ()
    pairs = {preset.pair or PAIR: {} for preset in COMPARE_PRESETS.values()}
    for name, preset in COMPARE_PRESETS.items():
        pairs[preset.pair or PAIR][name] = preset
    groups = [(f"{ENGINES[two[0]].label} and {ENGINES[two[1]].label} side by side where the difference shows",
               presets, (COMPARE,) if compared == two else ()) for two, presets in pairs.items()]
    for name, spec in ENGINES.items():
        own = presets_of(name)
        where = ", on real processes" if spec.processes else ""
        groups.append((f"a way {spec.label} surprises people{where}", own, (name, COMPARE) if name in compared else (name,)))
    every = {name: p for name, p in LINK_PRESETS.items() if p.opens == EVERY_ENGINE}
    groups.append(("where one engine's memory goes, beside the others'", every, (MEMORY,)))
    for words, presets, shown in groups:
        if choice in shown and presets:
            st.sidebar.caption(f"One click each: a run that shows {words}.")
            for name, preset in presets.items():
                st.sidebar.button(preset.title, key=f"preset_{name}", on_click=use_preset, args=(name,),
                                  help=preset.look_for, width="stretch")


def controls() -> tuple[RunConfig, str]:
    """The sidebar's widgets, as a RunConfig that fits every limit, and the engine choice (an engine, COMPARE or
    MEMORY)."""
    st.sidebar.toggle("Presenting: larger text in the charts", key=PRESENT,
                      help="For a projector or the back of a classroom: titles, labels, legends and hover text grow.")
    st.sidebar.header("Settings")
    choice = st.sidebar.radio(
        "Engine", list(CHOICES), key=ENGINE, format_func=CHOICES.get,
        help="DataParallel: one process, a thread per replica, the batch scattered and the outputs gathered every "
        "step. The others run one real process per device (gloo on the CPU, NCCL on GPUs), each loading its own rows: "
        "DDP all-reduces the gradients, ZeRO-1 also shards the optimizer's state, FSDP the parameters too, a pipeline "
        "cuts the model's layers into stages. Two engines, compared: the same settings under the two you pick, side "
        "by side.",
    )
    if choice == COMPARE:
        pair_controls()
    number = lambda label, name, help: st.sidebar.number_input(
        label, min_value=LIMITS[name][0], max_value=LIMITS[name][1], step=1, key=name, help=help
    )
    lanes = "Number of devices (GPUs, ranks or stages)" if choice in (COMPARE, MEMORY) else ENGINES[choice].lanes_label
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
            "(gradients split back to the replicas and summed onto GPU 0) and an optimizer step (SGD or Adam).",
        ),
        "seed": number("Seed", "seed", "Seeds the data, the weights and the shuffle: same seed, same run."),
        "backend": st.sidebar.radio(
            "Backend", ["auto", "cuda", "simulated"], key="backend", horizontal=True,
            help="cuda: the real nn.DataParallel (and DDP with NCCL) on this machine's GPUs. simulated: CPU threads "
            "that follow DataParallel's rules; DDP then runs its real processes on the CPU with gloo. auto: cuda when "
            "there are enough GPUs.",
        ),
    }
    engine = ENGINES[engine_of(choice)]
    values.update(engine=engine.name, **engine_options(engine))
    if engine.processes and not showing_upload():  # an uploaded trace's settings are not run
        asked = values["gpus"]
        values["gpus"] = min(asked, PAGE_MOST)
    config, warnings = settle(values)
    for warning in warnings:
        say(warning)
    if engine.processes and not showing_upload():
        config = ranks_that_fit(config, asked, choice)
    return config, choice


def pair_controls() -> None:
    """The two engines compared, each any engine; picking the other's engine swaps the two, so they always differ."""
    names = list(ENGINES)
    first, second = pair()
    st.session_state[FIRST_ENGINE], st.session_state[SECOND_ENGINE] = first, second

    def swap(changed: str, other: str, was: str) -> None:
        if st.session_state[changed] == st.session_state[other]:
            st.session_state[other] = was

    columns = st.sidebar.columns(2)
    columns[0].selectbox("Compare", names, key=FIRST_ENGINE, format_func=lambda name: ENGINES[name].label,
                         on_change=swap, args=(FIRST_ENGINE, SECOND_ENGINE, first))
    columns[1].selectbox("with", names, key=SECOND_ENGINE, format_func=lambda name: ENGINES[name].label,
                         on_change=swap, args=(SECOND_ENGINE, FIRST_ENGINE, second),
                         help="The settings below run under both; the options shown are this engine's.")


def engine_options(engine: EngineSpec) -> dict:
    """An engine's own settings, in an expander, as it declares them (dpviz.engines.spec.Option): what its
    users tune and where they trip. Settings a run of another engine left out start at their unset values."""
    if not engine.options:
        return {}
    box = st.sidebar.expander(engine.options_title)
    values = {}
    for option in engine.options:
        st.session_state.setdefault(option.name, option.unset)
        if option.kind == "flag":
            values[option.name] = box.toggle(option.label, key=option.name, help=option.help)
        elif option.kind == "mib":
            low, high = FLOAT_LIMITS[option.name]
            values[option.name] = box.number_input(option.label, min_value=low, max_value=high, value=None,
                                                   key=option.name, format="%.4f", help=option.help)
        elif option.kind == "choice":
            values[option.name] = box.radio(option.label, SETTINGS_CHOICES[option.name], key=option.name, horizontal=True,
                                            help=option.help)
        else:
            low, high = LIMITS[option.name]
            values[option.name] = box.number_input(option.label, min_value=low, max_value=high, step=1,
                                                   key=option.name, help=option.help)
    return values


def ranks_that_fit(config: RunConfig, asked: int, choice: str) -> RunConfig:
    """The ranks a page run starts: what was asked, unless more than a chart shows well or than this host
    could hold at once, even alone (each rank is a process, priced by dpviz.page.run_costs); the page then
    says so, in a visitor's words. A run that fits waits its turn for the memory others hold (running.py)."""
    from dpviz.page.memory import compared
    from dpviz.page.running import same_settings

    # Every engine the page runs at these settings must fit: a comparison runs two, Memory every engine, one at a time.
    def runs(ranks: int) -> list[RunConfig]:
        asked_for = dataclasses.replace(config, gpus=ranks)
        if choice == COMPARE:  # each engine at the settings fitted to both
            return list(fit_pair(asked_for, pair())[0])
        return [same_settings(asked_for, name) for name in (compared() if choice == MEMORY else (config.engine,))]

    def allowed(ranks: int) -> bool:  # a model may split only over some counts (TP: whole heads on each rank)
        try:
            return bool(runs(ranks))
        except ConfigError:
            return False

    candidates = [ranks for ranks in range(min(PAGE_MOST, asked), 0, -1) if ranks == asked or allowed(ranks)]
    fits = lambda ranks: all(BUDGET.fits_alone(price(each)) for each in runs(ranks))
    # the most that fit, else the fewest the model allows (the run then says it cannot run here)
    most = next((ranks for ranks in candidates if fits(ranks)), candidates[-1] if candidates else asked)
    if most == asked:
        return config
    both = " for both engines" if choice == COMPARE else " for every engine" if choice == MEMORY else ""
    # The engine's own word for what each process is (a rank, a stage); "device" where several engines share it.
    noun = ENGINES[config.engine].part("vocabulary").lane_noun if choice not in (COMPARE, MEMORY) else "device"
    if most == PAGE_MOST:  # the page's own limit, not the server's memory
        why = f"the page shows at most {PAGE_MOST} {noun}s, each one a process of its own"
    else:
        why = f"this server has memory for {plural(most, noun)} at a time, each one a process of its own"
    say(f"Showing {most} devices{both}, not {asked}: {why}.")
    return dataclasses.replace(config, gpus=most)
