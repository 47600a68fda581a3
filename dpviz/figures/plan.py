"""A plan at real size, drawn: per engine the fullest device's bytes by kind, stacked, against a line at the
device's memory, each bar saying whether it fits (dpviz.engines.plan's document)."""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.engines import ENGINES
from dpviz.figures.byte_unit import byte_unit
from dpviz.figures.colors import GUIDE, OUTLINE
from dpviz.figures.memory_compare import FAMILY_COLORS
from dpviz.figures.layout import styled

HELD = ("parameters", "gradients", "optimizer state", "activations")
LABEL_WIDTH = 14  # characters of an engine's name under its bar: five bars share a 440-pixel chart
GIB = 2**30


def fullest(devices: list[dict]) -> dict:
    """The device that holds the most (what must fit), by its kinds."""
    return max(devices, key=lambda d: sum(d[kind] for kind in HELD))


def fits(found: dict, memory_gb: int) -> dict[str, bool]:
    """Per engine that planned, whether its fullest device holds no more than `memory_gb` GB (GiB, as GPU makers
    count); an engine that refused the model is not among them."""
    return {name: sum(fullest(planned["devices"])[kind] for kind in HELD) <= memory_gb * GIB
            for name, planned in found["engines"].items() if "refused" not in planned}


def axis_name(name: str, label: str) -> str:
    """An engine's name under its bar: its short one where the label would crowd its neighbours' ("DDP")."""
    return label if len(label) <= LABEL_WIDTH else ENGINES[name].short


def plan_figure(found: dict, memory_gb: int, title_model: str) -> go.Figure:
    planned_ones = {name: planned for name, planned in found["engines"].items() if "refused" not in planned}
    engines = list(planned_ones.values())
    labels = [axis_name(name, planned["label"]) for name, planned in planned_ones.items()]
    rows = [fullest(planned["devices"]) for planned in engines]
    totals = [sum(row[kind] for kind in HELD) for row in rows]
    # GiB, the device's memory's unit (its line): every amount on the figure in it, the bars' totals too
    unit = byte_unit(max([*totals, memory_gb * GIB]))
    fig = go.Figure()
    for kind in HELD:
        values = [row[kind] / unit.size for row in rows]
        fig.add_trace(go.Bar(x=labels, y=values, name=kind, marker=dict(color=FAMILY_COLORS[kind],
                                                                        line=dict(color=OUTLINE, width=0.6)),
                             customdata=[unit.amount(row[kind]) for row in rows],
                             hovertemplate=f"%{{x}}<br>{kind}: %{{customdata}} on the fullest device<extra></extra>"))
    fig.add_hline(y=memory_gb * GIB / unit.size, line=dict(color=GUIDE, dash="dash", width=2),
                  annotation_text=f"{memory_gb} GiB per device", annotation_position="top left")
    ok = fits(found, memory_gb)
    for label, total, name in zip(labels, totals, planned_ones):
        fig.add_annotation(x=label, y=total / unit.size, yanchor="bottom", showarrow=False,
                           text=f"<b>{'fits' if ok[name] else 'does not fit'}</b><br>{unit.amount(total)}")
    refused = [axis_name(name, planned["label"]) for name, planned in found["engines"].items() if "refused" in planned]
    for label in refused:  # in its place, no bar: its sentence is said under the figure
        fig.add_trace(go.Bar(x=[label], y=[0], showlegend=False, hoverinfo="skip", marker=dict(color=GUIDE)))
        fig.add_annotation(x=label, y=0, yanchor="bottom", showarrow=False, text="<b>not planned</b><br>see below")
    top = max(max(totals, default=0) / unit.size, memory_gb * GIB / unit.size)
    fig.update_yaxes(range=[0, top * 1.25], rangemode="tozero", **unit.axis("on the fullest device"))
    fig.update_layout(barmode="stack")
    count = sum(1 for value in ok.values() if value)
    optimizer = {"sgd": "SGD", "adam": "Adam"}.get(found["optimizer"], found["optimizer"])
    mixed = found["model"].get("precision") == "mixed"
    unplanned = f" ({', '.join(refused)} not planned)" if refused else ""
    title = (f"{title_model} on {found['gpus']:,} devices of {memory_gb} GiB, training with {optimizer}"
             f"{' in mixed precision' if mixed else ''}: {count} of {len(ok)} engines fit{unplanned}")
    per = -(-found["model"]["rows"] // found["gpus"])
    notes = [f"planned from the model's shapes on the meta device ({found['model']['parameters']:,} parameters, "
             f"{found['model']['dtype']}{', computing in bfloat16' if mixed else ''}), not run; activations of "
             f"{per:,} row{'s' if per != 1 else ''} per device"]
    notes += [f"{planned['label']}: " + ", ".join(f"{key} {value}" for key, value in planned["options"].items())
              for planned in engines if planned.get("options")]  # a pipeline's stage: its schedule's microbatches
    return styled(fig, title, notes, height=420)
