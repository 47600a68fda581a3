"""The words every reader of a trace shares: counts, sizes, lists of lanes, and the sentence on devices.

    plural(4, "row")           # '4 rows'
    human_bytes(1536)          # '1.50 KiB'
    device_list([3, 4, 5, 6])  # 'GPUs 3-6'
    numbered(3, 4, "batch")    # 'batch 4 of 4': batches and steps are counted from 1 wherever they are read
    f"batch {counted(3)}"      # 'batch 4': the number alone, where the sentence has no room for the total
    plain_label("backward (×)")  # 'backward': a phase's label without the timeline's hatch hint
"""
from __future__ import annotations

import re

from dpviz.trace import Trace


# Words ending in "ch" said as a k: their plural takes an s alone ('2 epochs', not '2 epoches').
CH_SAID_K = ("epoch", "stomach", "monarch", "patriarch")


def plural(n: int, word: str) -> str:
    """'1 row', '4 rows', '2 batches', '2 processes', '2 epochs'."""
    sibilant = word.endswith(("s", "x", "z", "sh", "ch")) and not word.endswith(CH_SAID_K)
    return f"{n:,} {word}" + ("" if n == 1 else "es" if sibilant else "s")


def all_of(n: int, word: str) -> str:
    """'all 5 steps', 'both steps', 'its one step': every one of `n`, as a person says it."""
    if n == 1:
        return f"its one {word}"
    if n == 2:
        return f"both {plural(2, word).split(' ', 1)[1]}"
    return f"all {plural(n, word)}"


def plural_possessive(n: int, word: str) -> str:
    """"1 microbatch's", "4 microbatches'": a count as the owner of what follows."""
    return plural(n, word) + ("'s" if n == 1 else "'")


def with_article(phrase: str) -> str:
    """'a DDP rank', 'an FSDP rank', 'an optimizer': the article as the first word is said (an acronym by its
    letters' names)."""
    first = phrase.split(" ", 1)[0]
    spoken_vowel = first[:1].lower() in "aeio" if not first.isupper() else first[:1] in "AEFHILMNORSX"
    return f"{'an' if spoken_vowel else 'a'} {phrase}"


def sizes_text(sizes) -> str:
    """'4, 4, 2': chunk sizes as the explanations list them."""
    return ", ".join(str(s) for s in sizes)


def human_bytes(n: float) -> str:
    """'560 B', '1.23 KiB', '45.6 MiB', '1,000 KiB': binary units, three significant digits."""
    value, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1023.5:  # what would print as "1,024" takes the next unit
            break
        value, unit = value / 1024, bigger
    if unit == "B":
        return f"{int(round(value)):,} B"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def counted(index: int) -> str:
    """'4' for index 3: a batch, step or microbatch as a reader counts it. Traces count them from 0, every text and
    figure from 1; GPUs and ranks keep torch's own numbers, from 0."""
    return f"{index + 1:,}"


def numbered(index: int, total: int, noun: str) -> str:
    """'batch 4 of 4' for index 3: traces count batches and steps from 0, readers from 1, everywhere."""
    return f"{noun} {counted(index)} of {total:,}"


def numbered_range(first: int, last: int, total: int, noun: str) -> str:
    """'batches 1-8 of 20' for indices 0..7 ('batch 3 of 20' when first == last); noun is the plural."""
    if first == last:
        return numbered(first, total, noun[:-2] if noun.endswith("ches") else noun.rstrip("s"))
    return f"{noun} {counted(first)}-{counted(last)} of {total:,}"


def device_list(devices: list[int], noun: str = "GPU") -> str:
    """'GPU 5', 'GPUs 5 and 6', 'GPUs 3-15', 'GPUs 1, 4-7 and 9': runs of four or more as ranges ('rank 1' for
    noun="rank")."""
    runs: list[list[int]] = []
    for d in sorted(devices):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    parts: list[str] = []
    for run in runs:
        parts += [f"{run[0]}-{run[-1]}"] if len(run) >= 4 else [str(d) for d in run]
    if len(devices) == 1:
        return f"{noun} {parts[0]}"
    if len(parts) == 1:
        return f"{noun}s {parts[0]}"
    return f"{noun}s {', '.join(parts[:-1])} and {parts[-1]}"


DEVICE_NAME_LIMIT = 40  # characters of one device's name: "cuda:0 NVIDIA H200" and longer fit


def describe_devices(trace: Trace, machine_gpus: int) -> str:
    """One markdown sentence: real or simulated devices, which ones, and what the viewing machine has
    (`machine_gpus`: its CUDA devices, dpviz.engines.run.cuda_device_count)."""
    here = machine_gpus
    here_text = f"this machine has {here} CUDA GPU{'s' if here != 1 else ''}"
    return trace.spec.part("devices")(trace, here_text)


def replica_threads(trace: Trace) -> int:
    """The most threads a simulated call's replicas ran on at once: one per device, or one per CPU core
    where the devices outnumber the cores (a trace recorded before that was said has one per device)."""
    return min(trace.facts.get("threads_at_once", len(trace.lanes)), len(trace.lanes))


def batch_noun(trace: Trace) -> str:
    """What one entry of trace.batches is called: a DataLoader 'batch', or under DDP a 'step' (every rank's
    loader gives one batch per step)."""
    return trace.spec.unit


def bytes_alike(*sizes: float) -> list[str]:
    """Sizes read side by side, in one unit, the largest's: ['1.18 KiB', '0.63 KiB'], not '1.18 KiB' beside '640 B'."""
    unit = human_bytes(max(sizes, key=abs, default=0)).split()[-1]
    scale = 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)
    if unit == "B":
        return [f"{int(round(s)):,} B" for s in sizes]
    largest = max(abs(s) for s in sizes) / scale
    digits = 2 if largest < 10 else 1 if largest < 100 else 0
    # A size too small to show at those digits keeps three significant ones: never a "0.00" that is not zero.
    return [f"{s / scale:,.{digits}f} {unit}" if not s or abs(s / scale) >= 10 ** -digits else f"{s / scale:.3g} {unit}"
            for s in sizes]


def bytes_range(low: float, high: float) -> str:
    """'between 512 B and 640 B', or '640 B' when both read the same: never 'between 640 B and 640 B'."""
    first, last = bytes_alike(low, high)
    return last if first == last else f"between {first} and {last}"


def plain_label(label: str) -> str:
    """A phase's label without the timeline's hatch hint: 'backward (×)' -> 'backward'."""
    return re.sub(r"\s*\([^\w\s]\)$", "", label)
