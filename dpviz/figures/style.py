"""Names and looks shared by every view: "GPU 3", the simulated/real note, fonts for a projector."""
from __future__ import annotations

import plotly.graph_objects as go

from ..echo import plotly_text
from ..trace import Trace
from ..wording import plural  # noqa: F401  re-exported: the views' wording lives in one place
from .colors import TEXT

FONT_SIZE = 16  # readable from the back of a classroom
FONT_FAMILY = "Inter, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
NAME_LIMIT = 40  # characters of a name from a trace file (a device, an argument) in a label or a title


def device_name(i: int) -> str:
    """How every view names device `i` of device_ids."""
    return f"GPU {i}"


def rows_text(first: int, rows: int) -> str:
    """'rows 12-15 (4 rows)': the slice of a batch starting at row `first`."""
    if rows == 0:
        return "no rows"
    span = f"row {first}" if rows == 1 else f"rows {first}-{first + rows - 1}"
    return f"{span} ({plural(rows, 'row')})"


def backend_note(trace: Trace) -> str:
    """Says once per figure whether the GPUs were real or simulated, or that the lanes are DDP's processes
    (HTML-escaped: plotly and the report read HTML)."""
    count = len(trace.lanes)
    if trace.engine == "ddp":
        return ddp_note(trace)
    if trace.simulated:
        return f"simulated GPUs: CPU threads stand in for {plural(count, 'device')}"
    model = trace.lanes[0].name.split(" ", 1)[-1] if trace.lanes else "CUDA"
    return f"real GPUs: {count} × {plotly_text(model, NAME_LIMIT)}"  # a trace file's own text


def ddp_note(trace: Trace) -> str:
    """'real processes: 4 ranks on the CPU (gloo)': DDP's lanes are processes, never called GPUs on a CPU."""
    ranks = plural(len(trace.lanes), trace.vocabulary.lane_noun)
    if trace.backend == "cuda":
        return f"real processes: {ranks}, one GPU each (NCCL)"
    return f"real processes: {ranks} on the CPU (gloo), no GPU"


def check_batch(trace: Trace, batch: int) -> None:
    """Raise ValueError naming the batch and the valid range if `batch` is not in the trace."""
    count = len(trace.batches)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch < count:
        raise ValueError(f"batch must be between 0 and {count - 1}, got {batch!r}")


def styled(fig: go.Figure, title: str, notes: list[str], height: int = 520) -> go.Figure:
    """Apply the house look; `notes` become the subtitle (the simulated note, what was aggregated)."""
    fig.update_layout(
        template="plotly_white",
        height=height,
        font=dict(family=FONT_FAMILY, size=FONT_SIZE, color=TEXT),
        title=dict(
            text=title,
            x=0.01,
            xanchor="left",
            font=dict(size=FONT_SIZE + 4),
            subtitle=dict(text=" · ".join(n for n in notes if n), font=dict(size=FONT_SIZE - 2, color="#555555")),
        ),
        margin=dict(l=80, r=30, t=100, b=60),
        hoverlabel=dict(font_size=FONT_SIZE - 1),
        legend=dict(font=dict(size=FONT_SIZE - 2)),
    )
    return fig
