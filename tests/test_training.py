"""Training mode: DataParallel's backward, recorded, and a step equal to one on the whole batch."""
import copy

import pytest
import torch
import torch.nn.functional as F

from dpviz import RunConfig, SimulatedDataParallel, record
from dpviz.engines.workload import tutorial_data as tutorial


@pytest.mark.parametrize("rows,gpus", [(30, 3), (10, 8), (5, 4), (7, 1)])
def test_a_step_through_dataparallel_equals_a_plain_step(rows, gpus):
    config = RunConfig(gpus=gpus, data_size=rows, batch_size=rows, train=True)
    model, loader = tutorial.build(config)
    teacher, optimizer = tutorial.training_parts(config, model)
    plain = copy.deepcopy(model)
    plain_optimizer = torch.optim.SGD(plain.parameters(), lr=tutorial.LEARNING_RATE, momentum=tutorial.MOMENTUM)
    parallel = SimulatedDataParallel(model, device_ids=list(range(gpus)))
    for _ in range(2):  # two steps, so the momentum buffers count too
        for data, indices in loader:
            for net, opt in ((parallel, optimizer), (plain, plain_optimizer)):
                opt.zero_grad()
                F.mse_loss(net(data), teacher(data)).backward()
                if net is parallel:
                    grads = [p.grad.clone() for p in model.parameters()]
                opt.step()
            for grad, p in zip(grads, plain.parameters()):
                torch.testing.assert_close(grad, p.grad)
    for p, q in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p, q)


def test_backward_is_recorded_as_dataparallel_does_it():
    trace = record(RunConfig(gpus=3, train=True))
    for batch in trace.batches:
        spans = [s for s in trace.spans if s.batch == batch.index]
        forwards = {s.replica: s for s in spans if s.phase == "forward"}
        backwards = {s.replica: s for s in spans if s.phase == "backward"}
        # The gather's backward hands each replica a gradient with its forward chunk's rows.
        assert {r: (s.lane, s.rows, s.row_offset) for r, s in backwards.items()} == \
            {r: (s.lane, s.rows, s.row_offset) for r, s in forwards.items()}
        assert all(s.input_shape == [s.rows, 2] for s in backwards.values())
        (loss,) = [s for s in spans if s.phase == "loss"]
        (reduce,) = [s for s in spans if s.phase == "reduce"]
        (step,) = [s for s in spans if s.phase == "step"]
        assert loss.lane == trace.output_device and reduce.lane == step.lane == 0
        gather = trace.host_spans(batch.index)["gather"]
        assert gather.end <= loss.start <= loss.end <= min(s.start for s in backwards.values())
        assert max(s.end for s in backwards.values()) <= reduce.start <= reduce.end <= step.start


def test_one_device_has_no_reduce_and_forward_only_runs_have_no_backward():
    trace = record(RunConfig(gpus=1, train=True))
    phases = [s.phase for s in trace.spans if s.batch == 0]
    assert phases == ["scatter", "forward", "loss", "backward", "step"]
    assert {s.phase for s in record(RunConfig(gpus=3)).spans} == {"scatter", "replicate", "apply", "forward", "gather"}
