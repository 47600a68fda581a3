"""What a plan says each collective moves, in words: per engine whose planned devices name their collectives (tensor
parallelism's all-reduces, FSDP's all-gathers and reduce-scatters beside them), the bytes its busiest sender sends
of each per step (dpviz.engines.plan's document; no torch)."""
from __future__ import annotations

from dpviz.analysis.wording import human_bytes


def collective_lines(found: dict) -> list[str]:
    """One line per engine whose plan breaks what it sends down by collective; nothing for the others."""
    lines = []
    for planned in found["engines"].values():
        if "refused" in planned or "collectives" not in planned["devices"][0]:
            continue
        most = max(planned["devices"], key=lambda d: d["sent"])["collectives"]
        lines.append(f"{planned['label']} sends per step, per device: "
                     + ", ".join(f"{name} {human_bytes(size)}" for name, size in most.items()) + ".")
    return lines
