"""What ended a run, on one line that ends with torch's own cause: the command line's last line and the page's banners.

    failure_parts(trace)    # ("Caught ValueError in replica 2 on device 2.", " The replica's own error: ",
                            #  "ValueError: Expected more than 1 value per channel when training, got ...")
    failure_text(trace)     # the three joined: the line a reader searches the web for ends it

DataParallel's own line names the replica, not the error ("Caught ValueError in replica 2 on device 2."), and a
rank's timeout is dpviz's sentence: the cause is what a reader needs, so it comes last and is cut last.
"""
from __future__ import annotations

from dpviz.echo import LIMIT, MESSAGE_LIMIT, one_line
from dpviz.trace import Trace


def failure_parts(trace: Trace, limit: int = MESSAGE_LIMIT) -> tuple[str, str, str]:
    """The failure's lead (what dpviz saw), the words that join it to the cause, and torch's cause (the original
    exception's line as Python's traceback ends with it), each on one line, escaped and cut; the lead gives up its
    room first. The lead is only who raised ("rank 0") where its first line is the cause itself."""
    failure = trace.failure
    assert failure is not None, "a run that failed"
    first = (failure.message.splitlines() or [""])[0]
    said = failure.original.split(": ", 1)[-1]  # the cause's words, after its type
    # "rank 0: <the cause>", or a message that is the cause alone: the lead keeps who said it, or nothing.
    lead = first[: first.index(said)].rstrip(" :") if said.strip() and said in first else first
    cause = one_line(failure.original, limit)
    lead = one_line(lead, max(LIMIT, limit - len(cause)))
    if not lead:
        return "", "", cause
    joint = f" {trace.vocabulary.word('own_error')}: " if lead.endswith((".", "…")) else ": "
    return lead, joint, cause


def failure_text(trace: Trace, limit: int = MESSAGE_LIMIT) -> str:
    """The failure on one line, ending with torch's cause: "Caught ValueError in replica 2 on device 2. The replica's
    own error: ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 16])"."""
    return "".join(failure_parts(trace, limit))
