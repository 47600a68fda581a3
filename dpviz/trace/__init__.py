"""The trace: what one run did, as plain data, and everything that makes a file of it trustworthy. No torch.

    model.py       Trace and its parts (lanes, batches, spans, memory samples, failure, warnings)
    vocabulary.py  Phase, MemoryKind, Vocabulary: an engine's words, which every reader reads
    json_io.py     JSON out and in (dumps, loads): a file is size-bounded, parsed, checked, rebuilt
    cost.py        the parse cost of a file, bounded before it is parsed
    values.py      each value within what a real run produces, one sentence per refusal
    check.py       a loaded trace consistent with itself and with its engine's rules

Everything that records imports this package, and everything that reads a trace imports only this (and
the engines' plain-data specs), never the recording side.
"""
from dpviz.trace.model import (  # noqa: F401  the trace's parts, named here for readers
    SCHEMA_VERSION, ArgumentSample, Batch, Failure, Lane, MemorySample, Span, Trace, WarningNote,
)
