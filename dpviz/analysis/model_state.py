"""Model state per parameter (a device's parameters, gradients and optimizer state over the model's parameters)
under each engine of a plan, beside the ZeRO paper's figures for mixed-precision Adam (Rajbhandari et al., 2020,
Figure 1: 2 + 2 + K bytes a parameter, K = 12, for Ψ parameters on N_d devices). Exact fractions, no torch.

    per_parameter(found)          # {engine: Fraction(bytes a parameter per device)}: 16 for DDP, 1/4 for FSDP at 64
    paper(64)                     # {"baseline": 16, "P_os": 4 + 12/64, "P_os+g": 2 + 14/64, "P_os+g+p": 16/64}
"""
from __future__ import annotations

from fractions import Fraction

from dpviz.engines import ENGINES

HELD = ("parameters", "gradients", "optimizer state")
PAPER_K = 12  # mixed-precision Adam's float32 master parameters, momentum and variance: 4 + 4 + 4 bytes


def paper(devices: int) -> dict[str, Fraction]:
    """The paper's bytes a parameter per device on `devices` devices: the baseline and its three stages."""
    k, n = Fraction(PAPER_K), devices
    return {"baseline": 4 + k, "P_os": 4 + k / n, "P_os+g": 2 + (2 + k) / n, "P_os+g+p": (4 + k) / n}


def per_parameter(found: dict, fullest: bool = False) -> dict[str, Fraction]:
    """Each engine's model state a parameter: over every device on average, or on its fullest device."""
    count = found["model"]["parameters"]
    out = {}
    for name, planned in found["engines"].items():
        if "refused" in planned:  # an engine that cannot run the model so has no devices to count
            continue
        held = [sum(device[kind] for kind in HELD) for device in planned["devices"]]
        out[name] = Fraction(max(held), count) if fullest else Fraction(sum(held), len(held) * count)
    return out


def lines(found: dict) -> list[str]:
    """What a mixed-precision Adam plan says beside the paper: each engine's bytes a parameter, the paper's at the
    same devices, and what an engine says of itself beside them (its paper_note); nothing for another plan (the paper's figures are for that one)."""
    if found["model"].get("precision") != "mixed" or found["optimizer"] != "adam":
        return []
    devices, ours, fullest = found["gpus"], per_parameter(found), per_parameter(found, fullest=True)
    theirs = paper(devices)
    said = [f"{found['engines'][name]['label']} {_number(ours[name])}"
            + (f" ({_number(fullest[name])} on the fullest device)" if fullest[name] != ours[name] else "")
            for name in ours]
    return [f"Model state, bytes a parameter per device (parameters, gradients, optimizer state): {'; '.join(said)}.",
            f"The ZeRO paper's on {devices:,} devices: baseline {_number(theirs['baseline'])}, P_os "
            f"{_number(theirs['P_os'])}, P_os+g {_number(theirs['P_os+g'])}, P_os+g+p {_number(theirs['P_os+g+p'])} "
            f"(at 7.5B parameters: {', '.join(f'{float(v) * 7.5:,.1f} GB' for v in theirs.values())}).",
            *(ENGINES[name].part("paper_note") for name in ours if ENGINES[name].has("paper_note"))]


def _number(value: Fraction) -> str:
    return f"{float(value):,.3f}".rstrip("0").rstrip(".")
