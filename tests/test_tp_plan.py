"""Tensor parallelism's plan, and FSDP's over it, against torch: what the ranks of live tensor-parallel runs held
(facts["held"]) and handed each all-reduce (facts["moved"]) for the catalogue's ffn and transformer at 2 and 4 ranks;
FSDP over TP on a (2, 2) mesh against the DTensor shards, gradients, Adam state and collectives torch itself makes
in its fake process group (tests/tp_mesh_rank.py); the 7B transformer against the textbook's arithmetic; refusals and
the command line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpviz.catalogue import MODEL_SPECS
from dpviz.engines.plan import measure_catalogue, plan
from dpviz.engines.plan_rules import ring_share
from dpviz.engines.tp.plan import BACKWARD, FORWARD, GATHER, SCATTER, plan as tp_plan
from dpviz.engines.tp.read.traffic import ring

from budget import limit
from plan_runs import held, live

ROOT = Path(__file__).resolve().parents[1]
HELD = ("parameters", "gradients", "optimizer state")
NAMES = {"all-reduce (forward)": FORWARD, "all-reduce (backward)": BACKWARD}


@pytest.mark.parametrize("name", ["ffn", "transformer"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_the_plan_is_what_every_rank_of_a_live_tensor_parallel_run_held_and_sent(name, ranks):
    trace = live("tp", name, ranks)  # Adam, one step of 2 x ranks rows, every rank all of them
    shape = measure_catalogue(name, rows=2 * ranks)
    planned = tp_plan(shape, ranks, "adam")
    for kind in HELD:
        assert held(trace, kind) == [device[kind] for device in planned], kind
    # Per step and collective, a ring's share of what each rank handed the all-reduce
    for step in range(len(trace.batches)):
        handed: dict[str, dict[int, int]] = {}
        for rank, rows in enumerate(trace.facts["moved"]):
            for at, collective, _, size in rows:
                if at == step:
                    handed.setdefault(NAMES[collective], {})[rank] = size
        for rank, device in enumerate(planned):
            sent = {collective: ring(ranks, by_rank[rank]) for collective, by_rank in handed.items()}
            assert {k: v for k, v in device["collectives"].items() if v} == sent, (step, rank)
            assert device["sent"] == sum(sent.values())
    # ffn's input is the data, which needs no gradient: no all-reduce in its backward (Megatron's f is idle)
    assert (BACKWARD in {NAMES[c] for rows in trace.facts["moved"] for _, c, _, _ in rows}) == (name == "transformer")
    # What lies between a column-wise cut and its row-wise one is 1/T on each rank: less than a whole copy's
    assert 0 < planned[0]["activations"] < shape.activations(shape.rows)


def mesh_rank(name: str, dp: int, tp: int, rank: int, rows: int) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "tp_mesh_rank.py"), name, str(dp), str(tp), str(rank),
                           str(rows)], cwd=ROOT, capture_output=True, text=True, timeout=limit(starts=1, then_s=60))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["ffn", "transformer"])
def test_fsdp_over_tp_is_what_torchs_dtensor_shards_hold_and_hand_each_collective(name):
    """FSDP2 on mesh["dp"] over parallelize_module on mesh["tp"], dp_shard 2 x tp 2: each rank's padded shard of its
    tensor-parallel slices, their gradients and Adam's moments (real rows only), as torch allocates them; and what it
    handed the all-reduces (TP's, its dp group's rows), the all-gathers and the reduce-scatter (FSDP's)."""
    dp, tp, rows = 2, 2, 8
    planned = tp_plan(measure_catalogue(name, rows=rows), dp * tp, "adam", tp=tp)
    for rank, device in enumerate(planned):
        torch_says = mesh_rank(name, dp, tp, rank, rows)
        assert device["mesh"] == {"dp_shard": rank // tp, "tp": rank % tp}
        for kind in HELD:
            assert device[kind] == torch_says[kind], (rank, kind)
        handed, sent = torch_says["handed"], device["collectives"]
        assert sent[FORWARD] + sent[BACKWARD] == ring(tp, handed["all_reduce"]), rank
        assert sent[GATHER] == round(ring_share(dp) * handed["_allgather_base_"]), rank
        assert sent[SCATTER] == round(ring_share(dp) * handed["_reduce_scatter_base_"]), rank


def test_the_7b_transformer_at_tp_8_is_the_textbooks_arithmetic():
    """Each rank: 1/8 of every cut Linear's weight (and a column-wise one's bias), the rest whole; Adam's two moments
    of what it holds; two all-reduces a block forward and two backward of one row's activations (1,024 tokens x the
    width x 4 bytes), 2 x 7/8 of each on a ring."""
    real = MODEL_SPECS["transformer"].sizes["7b"]
    width, vocabulary, blocks = real.options["width"], real.input_size, real.options["blocks"]
    found = plan("transformer", size="7b", gpus=8, optimizer="adam", rows=1, tp=8)
    planned = found["engines"]["tp"]
    assert planned["label"] == "Tensor parallel" and planned["options"] == {"dp_shard": 1, "tp": 8}
    cut = 12 * width * width // 8 + 4 * width // 8  # wq, wk, wv, out and the MLP's two; the MLP's first bias
    whole = 4 * width + 2 * width  # two LayerNorms; out's and the MLP's second bias (row-wise: whole)
    elements = (blocks * (cut + whole) + vocabulary * width + real.options["sequence"] * width + 2 * width
                + width * vocabulary + vocabulary)
    activation = 1024 * width * 4
    for device in planned["devices"]:
        assert (device["parameters"], device["gradients"], device["optimizer state"]) == (
            4 * elements, 4 * elements, 8 * elements)
        assert device["collectives"] == {FORWARD: ring(8, 2 * blocks * activation),
                                         BACKWARD: ring(8, 2 * blocks * activation)}
    # dp_shard 2 x tp 4: FSDP halves each rank's tp-4 slices again (the vocabulary's rows even over 2: no padding)
    two = plan("transformer", size="7b", gpus=8, optimizer="adam", rows=2, tp=4)["engines"]["tp"]
    four = plan("transformer", size="7b", gpus=4, optimizer="adam", rows=1, tp=4)["engines"]["tp"]
    assert two["label"] == "FSDP × TP" and two["options"] == {"dp_shard": 2, "tp": 4}
    for rank, device in enumerate(two["devices"]):
        alone = four["devices"][rank % 4]
        assert 2 * device["parameters"] == alone["parameters"] and 2 * device["optimizer state"] == alone["optimizer state"]
        assert device["collectives"][FORWARD] == alone["collectives"][FORWARD]  # a dp group's row, as tp 4 alone
        assert device["collectives"][GATHER] == alone["parameters"]  # (2-1)/2 of twice the slices


def test_a_degree_that_does_not_divide_the_gpus_or_the_heads_is_one_sentence():
    with pytest.raises(ValueError, match="does not divide the 4 GPUs"):
        plan("transformer", gpus=4, optimizer="adam", tp=3)
    with pytest.raises(ValueError, match="attention heads"):
        plan("transformer", size="7b", gpus=64, optimizer="adam", tp=64)  # 32 heads
    # Unasked (every GPU), a degree the heads refuse is the engine's row, the others planned
    found = plan("transformer", size="7b", gpus=64, optimizer="adam")
    assert "attention heads" in found["engines"]["tp"]["refused"] and "devices" in found["engines"]["fsdp"]
    assert "tensor-parallel plan" in plan("mlp", gpus=2, optimizer="adam")["engines"]["tp"]["refused"]


def test_the_command_line_plans_tp_and_refuses_a_bad_degree_in_one_line(tmp_path):
    out = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "4", "--tp", "2",
                           "--optimizer", "adam", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=limit(starts=1, then_s=30))
    assert done.returncode == 0, done.stderr
    planned = json.loads(out.read_text())["engines"]["tp"]
    assert planned["options"] == {"dp_shard": 2, "tp": 2} and len(planned["devices"]) == 4
    assert "FSDP × TP: dp_shard 2, tp 2" in done.stdout and "FSDP × TP sends per step" in done.stdout
    for args, words in ((["--tp", "3"], "does not divide the 4 GPUs"), (["--tp", "x"], "whole number"),
                        (["--tp", "-1"], "from 0 to 1,024")):
        bad = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "4", *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=limit(starts=1, then_s=30))
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_the_docs_7b_figures_are_the_plans_own():
    """docs/tp.md's table at real size, row by row, is what `dpviz plan` prints for the commands above it."""
    from dpviz.analysis.wording import human_bytes

    text = (ROOT / "docs" / "tp.md").read_text()
    for tp, row in ((8, "| tp 8 |"), (4, "| dp_shard 2 × tp 4 |")):
        planned = plan("transformer", size="7b", gpus=8, optimizer="adam", rows=8, tp=tp)["engines"]["tp"]
        line = next(line for line in text.splitlines() if line.startswith(row))
        cells = [cell.strip() for cell in line.strip("|").split("|")][1:]
        most = planned["most"]
        assert cells[:4] == [human_bytes(most[kind]) for kind in ("parameters", "gradients", "optimizer state",
                                                                 "activations")], row
        assert cells[4].startswith(human_bytes(most["sent"]) + ":"), row
        busiest = max(planned["devices"], key=lambda d: d["sent"])["collectives"]
        assert all(human_bytes(size) in cells[4] for size in busiest.values()), row
