"""Settings to and from a page URL's query parameters, and fitting settings into the limits.

A link must reproduce the page, and a bad link must never break it: every bad value gives one
sentence for the page to show, and a valid value is used in its place. The sentences are plain text
naming each value cut short (dpviz.echo); the page shows them with echo.markdown_text.
"""
from __future__ import annotations

from typing import Any, Mapping

from dpviz.config import (
    ENGINE_OPTIONS, MAX_BATCHES, MAX_DATASET_ELEMENTS, MAX_TRAIN_BATCHES, RNN_MODELS, ConfigError, RunConfig, check_setting, parse_bool,
    parse_setting, row_elements,
)
from dpviz.echo import echo
from dpviz.engines import ENGINES, FIRST
from dpviz.engines.spec import EngineSpec
from dpviz.presets import COMPARE_PRESETS, EVERY_ENGINE, LINK_PRESETS

DEFAULTS = RunConfig()
# Query parameter names: the RunConfig field names, so a link reads like the CLI's flags; every engine's options
# follow from the engines' specs (a new option needs no edit here).
PARAMS = ("batch_size", "data_size", "gpus", "input_size", "output_size", "shuffle", "seed", "backend", "train",
          "model", "inputs", "engine", *ENGINE_OPTIONS)


COMPARE = "compare"  # engine=compare&engines=A,B: the same settings run under two engines, side by side
BOTH = "both"  # the word older links use for the first comparison, of PAIR: they open as engines=dp,ddp
MEMORY = "memory"  # engine=memory: the same settings under every engine, their memory and bytes in one figure
PRESENTING = "presenting"  # how the page is shown, not a setting of its runs: presenting=true opens in larger type
PAGES = (COMPARE, BOTH, MEMORY)  # the link's engine words that name a page of several engines, not an engine
# The pair a comparison opens on: the one-process engine, and the first engine that runs a process per rank.
PAIR = (FIRST, next(name for name, spec in ENGINES.items() if spec.processes))


def to_query(config: RunConfig, page: str | None = None, pair: tuple[str, str] | None = None,
             presenting: bool = False) -> dict[str, str]:
    """The query parameters for `config` (booleans as true/false); engine=compare&engines=A,B when two engines run
    it (`pair`, the config's engine the second), engine=`page` for another page of several engines (MEMORY);
    presenting=true when the page is shown in Presenting's larger type."""
    values = config.to_dict()
    # An engine's own settings only in its runs' links: a DataParallel link stays as short as before.
    own = ENGINES[config.engine].unset
    names = [name for name in PARAMS if name in own or name not in ENGINE_OPTIONS]
    query = {name: str(values[name]).lower() if isinstance(values[name], bool) else str(values[name]) for name in names}
    if page in PAGES:
        query["engine"] = page
    if page in (COMPARE, BOTH):
        query["engine"] = COMPARE
        query["engines"] = ",".join(pair or PAIR)
    if presenting:  # only when on: a plain page's link stays as it was
        query[PRESENTING] = "true"
    return query


def wanted_presenting(params: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the link opens the page in Presenting (presenting=true), and a sentence for a value that is not true
    or false (Presenting stays off)."""
    if PRESENTING not in params:
        return False, []
    raw = params[PRESENTING]
    try:
        return parse_bool(PRESENTING, raw[-1] if isinstance(raw, list) else raw), []
    except ConfigError as error:
        return False, [f"The link's {error} Using presenting = false instead."]


def _last(raw: Any) -> str:
    return str(raw[-1] if isinstance(raw, list) else raw).strip().lower()


def wants_pair(params: Mapping[str, Any]) -> bool:
    """Whether the link asks for two engines side by side (engine=compare, an old link's engine=both, or a
    comparison's preset)."""
    if "engine" in params:
        return _last(params["engine"]) in (COMPARE, BOTH)
    return "preset" in params and _last(params["preset"]) in COMPARE_PRESETS


def wanted_pair(params: Mapping[str, Any]) -> tuple[tuple[str, str], list[str]]:
    """The two engines a comparison's link names (engines=A,B), and a sentence for a list that names no two
    different engines (PAIR is used instead); where the link names none, silently, its comparison preset's pair, or
    PAIR (engine=both)."""
    if "engines" not in params:
        preset = COMPARE_PRESETS.get(_last(params["preset"])) if "preset" in params else None
        return (preset.pair if preset is not None and preset.pair else PAIR), []
    text = _last(params["engines"])
    names = [name.strip() for name in text.split(",")]
    if len(names) == 2 and all(name in ENGINES for name in names) and names[0] != names[1]:
        return (names[0], names[1]), []
    return PAIR, [f"The link's engines {echo(text)} are not two different engines of {', '.join(ENGINES)}; comparing "
                  f"{ENGINES[PAIR[0]].label} and {ENGINES[PAIR[1]].label} instead."]


def wanted_page(params: Mapping[str, Any]) -> str | None:
    """The page of several engines a link asks for (COMPARE or MEMORY), if any."""
    if wants_pair(params):
        return COMPARE
    preset = params.get("preset")
    preset = str(preset[-1] if isinstance(preset, list) else preset).strip().lower() if preset is not None else None
    if preset in LINK_PRESETS and LINK_PRESETS[preset].opens == EVERY_ENGINE and "engine" not in params:
        return MEMORY  # a preset whose lesson is read beside the other engines
    engine = params.get("engine")
    engine = str(engine[-1] if isinstance(engine, list) else engine).strip().lower() if engine is not None else None
    return engine if engine in PAGES else None


def from_query(params: Mapping[str, Any]) -> tuple[RunConfig, list[str]]:
    """Settings from query parameters; bad or unknown ones are reported and replaced.

    `preset=NAME` starts from a pitfall preset's settings; other parameters in the link override it.
    """
    values: dict[str, Any] = {}
    warnings: list[str] = []
    last = lambda raw: raw[-1] if isinstance(raw, list) else raw  # a repeated parameter: the last one wins
    pair, said = wanted_pair(params) if wants_pair(params) else (PAIR, [])
    warnings += said
    if "preset" in params:
        name = str(last(params["preset"])).strip().lower()
        if name in LINK_PRESETS:
            values.update(LINK_PRESETS[name].config.to_dict())
        else:
            warnings.append(f"The link's preset {echo(name)} is not one of dpviz's {len(LINK_PRESETS)} presets "
                            f"({', '.join(LINK_PRESETS)}); it was ignored.")
    for name, raw in params.items():
        text = last(raw)
        if name in ("preset", "engines"):
            continue
        if name == PRESENTING:  # how the page is shown: the sidebar reads it (wanted_presenting)
            warnings += wanted_presenting(params)[1]
            continue
        if name == "engine" and str(text).strip().lower() in PAGES:
            text = pair[1]  # the settings are the second engine's; the page runs the first beside it (wants_pair)
        if name not in PARAMS:
            warnings.append(f"The link's parameter {echo(name)} is not a dpviz setting and was ignored.")
            continue
        if name == "engine" and str(text).strip().lower() not in ENGINES:  # every page a link may name, not only engines
            warnings.append(f"The link's engine must be one of {', '.join([*ENGINES, COMPARE, MEMORY])}, got "
                            f"{echo(str(text).strip().lower())}. Using engine = {_show(DEFAULTS.engine)} instead.")
            continue
        try:
            value = parse_setting(name, text)
            check_setting(name, value)
        except ConfigError as error:
            default = getattr(DEFAULTS, name)
            warnings.append(f"The link's {error} Using {name} = {_show(default)} instead.")
            continue
        values[name] = value
    warnings += _opening(params, values)
    config, more = settle(values)
    return config, warnings + more


def _opening(params: Mapping[str, Any], values: dict[str, Any]) -> list[str]:
    """A link naming an engine whose lesson needs settings it does not give (ZeRO-1's and FSDP's need training) opens
    with them, said once; so does a link comparing two engines, with what each needs alone and what its part of the
    comparison needs (DataParallel's hub: training on 4 GPUs). A preset's link or one that sets them itself is left
    as it is."""
    engine = values.get("engine")
    if "preset" in params or "engine" not in params or engine not in ENGINES:
        return []
    compared = wants_pair(params)
    changes: dict[str, Any] = {}
    whys: list[str] = []
    for spec in [ENGINES[name] for name in (wanted_pair(params)[0] if compared else (engine,))]:
        for wanted, why in [(spec.opens_with, spec.opens_why)] + (
                [(spec.compared_opens_with, spec.compared_opens_why)] if compared else []):
            new = {name: value for name, value in wanted if name not in params and name not in changes}
            if new:
                changes.update(new)
                whys.append(why)
    values.update(changes)
    fitted = _fitted_to_lesson(ENGINES[engine], params, values)
    if fitted and ENGINES[engine].opens_why not in whys:  # its own rules changed what the defaults gave
        whys.append(ENGINES[engine].opens_why)
    changes.update(fitted)
    values.update(changes)
    if not changes:
        return []
    said = ", ".join(f"{name} = {_show(value)}" for name, value in changes.items())
    return [f"{'. '.join(whys)}: the link opens with {said}."]  # each engine's reason a sentence of its own


def _fitted_to_lesson(spec: EngineSpec, params: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """What the engine's own rules change in settings the link did not name, where the defaults do not make one of
    its runs (the default model, one Linear, is cut into no pipeline stages and has no tensor-parallel plan): the
    link opens with them, said as its opening, not as a complaint about a model it never named."""
    # Only where the defaults are to blame: the engine, what it opens with and the link's devices alone make no run
    # (a setting the link named that breaks a rule is told, as any other).
    bare = {**DEFAULTS.to_dict(), **{name: values[name] for name in ("engine", "gpus", *dict(spec.opens_with))
                                     if name in values}}
    try:
        RunConfig(**bare)
        return {}
    except ConfigError:
        pass
    if not spec.has("fit"):
        return {}
    merged = {**DEFAULTS.to_dict(), **values}
    return {name: value for name, value in spec.part("fit")(merged).items()
            if name not in params and merged.get(name) != value}


def settle(values: Mapping[str, Any]) -> tuple[RunConfig, list[str]]:
    """A valid RunConfig from individually valid values, shrinking what breaks a joint limit."""
    merged = {**DEFAULTS.to_dict(), **values}
    warnings: list[str] = []
    if merged["inputs"] == "hidden" and merged["model"] not in RNN_MODELS:
        warnings.append(
            f"inputs hidden passes a GRU's hidden state and model {merged['model']!r} has none; using inputs = 'tensor' instead."
        )
        merged["inputs"] = "tensor"
    per_row = row_elements(merged["model"], merged["input_size"])
    if merged["data_size"] * per_row > MAX_DATASET_ELEMENTS:
        fitted = MAX_DATASET_ELEMENTS // per_row
        warnings.append(
            f"data_size {merged['data_size']:,} rows of {per_row:,} numbers exceed "
            f"{MAX_DATASET_ELEMENTS:,} numbers; using data_size = {fitted:,} instead."
        )
        merged["data_size"] = fitted
    batches = -(-merged["data_size"] // merged["batch_size"])
    most = MAX_TRAIN_BATCHES if merged["train"] else MAX_BATCHES
    if batches > most:
        fitted = -(-merged["data_size"] // most)
        warnings.append(
            f"data_size {merged['data_size']:,} in batches of {merged['batch_size']:,} makes {batches:,} batches, "
            f"more than the {most:,} a {'training ' if merged['train'] else ''}run may have; "
            f"using batch_size = {fitted:,} instead."
        )
        merged["batch_size"] = fitted
    try:
        return RunConfig(**merged), warnings
    except ConfigError as error:  # DDP's settings that do not go together (engine, inputs, shuffle, train)
        sentence = str(error)
    kept = {**merged, **_fallback(merged)}
    warnings.append(f"The link's {sentence[:-1]}; using {_changes(merged, kept)} instead.")
    try:
        return RunConfig(**kept), warnings
    except ConfigError as error:
        warnings.append(f"The link's settings do not go together ({error}); using the defaults instead.")
        return DEFAULTS, warnings


def _fallback(merged: dict[str, Any]) -> dict[str, Any]:
    """The smallest change that makes an engine's settings fit the rest: other engines' options unset, and its
    own rules' change."""
    engine = ENGINES[merged["engine"]]
    changes = {name: unset for name, unset in ENGINE_OPTIONS.items() if name not in engine.unset}
    if engine.has("fit"):
        changes.update(engine.part("fit")(merged))
    return changes


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    return ", ".join(f"{name} = {_show(after[name])}" for name in after if after[name] != before[name]) or "the defaults"


def _show(value: Any) -> str:
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else f"{value!r}" if isinstance(value, str) else f"{value:,}"


def fit_pair(config: RunConfig | Mapping[str, Any], pair: tuple[str, str]) -> tuple[tuple[RunConfig, RunConfig], str | None]:
    """`config`'s settings (a RunConfig, or settings not yet checked together, as a command line gives them) fitted
    to both engines of `pair`, each by its own rules (a pipeline needs a model it can cut, training, a batch its
    microbatches divide): the two configs, the same in every setting the two share (the second keeps the options
    `config` gives it, the first its own unset), and one sentence saying what changed (None when nothing did)."""
    first, second = pair
    values = config.to_dict() if isinstance(config, RunConfig) else {**DEFAULTS.to_dict(), **config}
    asked = dict(values)
    shared = [name for name in values if name not in ENGINE_OPTIONS and name != "engine"]
    fitted: dict[str, RunConfig] = {}
    for _ in range(3):  # each engine's change may ask another of the other's; two rounds settle every pair here
        before = {name: values[name] for name in shared}
        for name in (second, first):
            own = {option: values[option] for option in ENGINES[name].unset}
            fitted[name], _ = settle({**{k: values[k] for k in shared}, **own, "engine": name})
            values.update({k: getattr(fitted[name], k) for k in shared})
            values.update({k: getattr(fitted[name], k) for k in ENGINES[name].unset if name == second})
        if before == {name: values[name] for name in shared}:
            break
    configs = tuple(RunConfig(**{**fitted[name].to_dict(), **{k: values[k] for k in shared}}) for name in (first, second))
    changed = [(name, configs[1]) for name in [*shared, *ENGINES[second].unset] if getattr(configs[1], name) != asked[name]]
    # The first engine's own options changed too (a pipeline's microbatches fitted to the batch), each said once.
    changed += [(name, configs[0]) for name in ENGINES[first].unset
                if name not in ENGINES[second].unset and getattr(configs[0], name) != asked[name]]
    if not changed:
        return configs, None
    said = ", ".join(f"{name} = {_show(getattr(config, name))} (not {_show(asked[name])})" for name, config in changed)
    return configs, (f"To run the same settings under {ENGINES[first].label} and {ENGINES[second].label}, "
                     f"these changed: {said}.")
