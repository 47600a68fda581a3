"""What DataParallel moves between devices: its copies of the model, the batch and the outputs, recorded and by formula."""
from __future__ import annotations

from dpviz.analysis.traffic import Move, ledger
from dpviz.analysis.traffic_model import StepSizes, model_bytes, row_bytes
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.trace import Trace


def dp_model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    return ledger(trace, 0, "parameters"), ledger(trace, 0, "gradients")


def dp_traffic(trace: Trace) -> list[Move]:
    sizes = model_bytes(trace)
    return [move for batch in trace.batches for move in dp_step_traffic(trace, batch.index, sizes)]


def dp_step_traffic(trace: Trace, step: int, sizes: tuple[int | None, int | None] | None = None) -> list[Move]:
    """dp_traffic's moves of one batch (a view of one batch need not count a long run's every batch)."""
    params, grads = sizes if sizes is not None else model_bytes(trace)
    out = trace.output_device
    moves = []
    for batch in trace.batches[step:step + 1]:
        in_row, out_row = row_bytes(batch.input_shape, batch.rows), row_bytes(batch.output_shape, batch.rows)
        for replica in trace.replicas(batch.index):
            lane = replica.lane
            if lane == trace.lanes[0].id:
                continue  # chunk 0 stays where the batch is; device 0's replica shares the module's parameters
            moves.append(Move(batch.index, lane, "input chunk", 0, replica.rows * in_row, "scatter"))
            moves.append(Move(batch.index, out, "input chunk", replica.rows * in_row, 0, "scatter"))
            if params:
                moves.append(Move(batch.index, lane, "parameter copy", 0, params, "broadcast"))
                moves.append(Move(batch.index, out, "parameter copy", params, 0, "broadcast"))
            moves.append(Move(batch.index, lane, "output gathered", replica.rows * out_row, 0, "gather"))
            moves.append(Move(batch.index, out, "output gathered", 0, replica.rows * out_row, "gather"))
            if trace.config.train and trace.spans_of(batch.index, "backward"):
                moves.append(Move(batch.index, lane, "output gradient", 0, replica.rows * out_row, "scatter", True))
                moves.append(Move(batch.index, out, "output gradient", replica.rows * out_row, 0, "scatter", True))
                if grads:
                    moves.append(Move(batch.index, lane, "gradient sum", grads, 0, "reduce", True))
                    moves.append(Move(batch.index, out, "gradient sum", 0, grads, "reduce", True))
    return moves


def moves_at(sizes: StepSizes, devices: int) -> list[tuple[int, int]]:
    """(sent, received) bytes per GPU in one step of a full batch; GPUs torch.chunk leaves idle move nothing."""
    chunks = chunk_sizes(sizes.rows, devices)
    moves = [(0, 0)] * devices
    sent0 = received0 = 0
    for device, rows in enumerate(chunks[1:], start=1):  # chunk 0 stays on GPU 0, beside the module itself
        down = rows * sizes.in_row + sizes.parameters + (rows * sizes.out_row if sizes.train else 0)
        up = rows * sizes.out_row + (sizes.gradients if sizes.train else 0)
        moves[device] = (up, down)
        sent0, received0 = sent0 + down, received0 + up
    moves[0] = (sent0, received0)
    return moves
