"""What a figure's notes leave out, carried in its layout.meta for the page's expander under the chart."""
from __future__ import annotations

import plotly.graph_objects as go

DETAILS = "details"  # the key in a figure's layout.meta of what its notes leave out


def chart_details(fig: go.Figure) -> str | None:
    """What a figure's notes leave out, as markdown for an expander under the chart (dpviz's own sentences and
    figures, never text from a trace); None when it has none."""
    meta = fig.layout.meta
    text = meta.get(DETAILS) if isinstance(meta, dict) else None
    return text or None
