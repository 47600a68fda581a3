"""`python -m dpviz --engine ddp` under torch's own launcher: two torchrun "nodes" on 127.0.0.1, one rank
each, and rank 0 writes the one merged trace (lanes named by node and local rank)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from torch.utils.data import DistributedSampler

from dpviz.trace import json_io as trace_json
from dpviz.config import ConfigError, RunConfig
from dpviz.engines.ranks import torchrun

from budget import limit, torch_start_s
from processes import command_line, descendants

ROOT = Path(__file__).resolve().parents[1]
RENDEZVOUS_S = 5  # the README's --rdzv-conf timeout=60, shortened for the test of a node that never comes


def node_limit_s() -> float:
    """How long a node may take: torchrun's agent, then the rank it starts, each a Python importing torch, and
    the other node's two starting beside them on the same cores, then the run, whose collectives wait at most
    RunConfig's timeout_s."""
    return limit(starts=4, then_s=RunConfig().timeout_s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_node(node: int, port: int, *args: str, rendezvous_s: int = 60, engine: str = "ddp") -> subprocess.Popen:
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
               "--rdzv-conf", f"timeout={rendezvous_s}", "-m", "dpviz", "--engine", engine, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rank_commands(process: subprocess.Popen) -> list[list[str]]:
    """Wait for a torchrun node to end, reading its process tree meanwhile; return the argument lists of the
    processes it started that ran dpviz (its workers: `python -u -m dpviz ...`). Read from the process table,
    not from words in its output, which quotes paths that may hold any folder's name."""
    ranks: dict[tuple[int, int], list[str]] = {}
    deadline = time.monotonic() + node_limit_s()
    while process.poll() is None and time.monotonic() < deadline:
        for pid, started in descendants(process.pid):  # read again each time: a fork shows its parent's line until exec
            argv = command_line(pid).split()
            if any(a == "-m" and b == "dpviz" for a, b in zip(argv, argv[1:])):
                ranks[(pid, started)] = argv
        time.sleep(0.02)
    return list(ranks.values())


def finish_watching(processes: list[subprocess.Popen]) -> tuple[list[tuple[int, str, str]], list[list[list[str]]]]:
    """finish(), with each node's process tree read meanwhile (rank_commands): what every node printed and
    returned, and the ranks each started. The pipes are read all the while, so no node waits on a full one."""
    with ThreadPoolExecutor(len(processes)) as pool:
        watching = [pool.submit(rank_commands, process) for process in processes]
        results = finish(processes)
        return results, [watched.result() for watched in watching]


def finish(processes: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=node_limit_s())
            results.append((process.returncode, out, err))
    finally:
        for process in processes:  # whatever happened, no node outlives the test
            if process.poll() is None:
                process.kill()
                process.communicate()
    return results


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """One run on two torchrun nodes, both given the same --trace and --chrome-trace paths (as a shared
    folder would be): only rank 0 may write them."""
    folder = tmp_path_factory.mktemp("torchrun")
    trace, chrome = folder / "run.json", folder / "run.perfetto.json"
    port = free_port()
    args = ("--train", "--trace", str(trace), "--chrome-trace", str(chrome))
    results, ranks = finish_watching([torchrun_node(node, port, *args) for node in (0, 1)])
    return results, trace, chrome, ranks


@pytest.mark.parametrize("node, words", [
    (0, "DistStoreError: Timed out after {s} seconds waiting for clients. 1/2 clients joined."),
    (1, "DistNetworkError: The client socket has timed out after {ms}ms while trying to connect to (127.0.0.1, {port})."),
])
def test_a_node_whose_peer_never_comes_ends_with_torchruns_rendezvous_message(node, words, tmp_path):
    # The README's command bounds torchrun's rendezvous (--rdzv-conf timeout=60; torchrun's default waits
    # 900 s): node 0 alone, or node 1 without node 0, ends after that time with one clear last line.
    torch_start_s()  # measured before the clock starts
    port = free_port()
    began = time.monotonic()
    process = torchrun_node(node, port, "--trace", str(tmp_path / "run.json"), rendezvous_s=RENDEZVOUS_S)
    [(code, out, err)], [ranks] = finish_watching([process])
    took = time.monotonic() - began
    assert code != 0 and out == ""
    last = err.strip().splitlines()[-1]
    # node 0's store counts whole seconds and adds one; node 1's client times out in milliseconds
    assert any(words.format(s=s, ms=RENDEZVOUS_S * 1000, port=port) in last for s in (RENDEZVOUS_S, RENDEZVOUS_S + 1)), last
    assert RENDEZVOUS_S <= took <= limit(starts=1, then_s=RENDEZVOUS_S), took
    assert ranks == [] and not (tmp_path / "run.json").exists()  # no rank ever started, no file written


def test_both_nodes_exit_0_and_rank_0_alone_prints_the_log(two_nodes):
    (code0, out0, err0), (code1, out1, err1) = two_nodes[0]
    assert code0 == 0, err0[-2000:]
    assert code1 == 0, err1[-2000:]
    assert out0.startswith("Let's use 2 ranks! (2 processes on the CPU, gloo; each rank loads ceil(30 / 2) = 15 rows")
    assert "rank 1 (node 1 rank 0): input size torch.Size([15, 5]) output size torch.Size([15, 2])" in out0
    assert "dpviz: 4 steps on 2 ranks (processes on the CPU, gloo, under torchrun)" in err0
    assert out1 == "" and "dpviz:" not in err1  # the other rank is quiet


def test_each_node_started_one_rank_seen_in_its_process_tree(two_nodes):
    # The way the test of a lone node knows that no rank started: here it must see each node's one rank.
    ranks = two_nodes[3]
    assert [len(found) for found in ranks] == [1, 1], ranks


def test_the_merged_trace_has_a_lane_per_node_and_the_samplers_rows(two_nodes):
    _, path, chrome, _ = two_nodes
    trace = trace_json.loads(path.read_text())
    assert trace.engine == "ddp" and trace.failure is None and trace.backend == "cpu"
    assert [lane.name for lane in trace.lanes] == ["node 0 rank 0", "node 1 rank 0"]
    assert trace.config.gpus == 2 and trace.config.train
    for rank in range(2):
        forwards = sorted((s for s in trace.spans if s.phase == "forward" and s.lane == rank), key=lambda s: s.batch)
        rows = [row for span in forwards for row in trace.sample_ids(span)]
        sampler = DistributedSampler(range(trace.config.data_size), num_replicas=2, rank=rank, shuffle=True,
                                     seed=trace.config.seed)
        assert rows == list(sampler)
    assert {s.lane for s in trace.spans if s.phase == "allreduce"} == {0, 1}
    names = chrome.read_text()
    assert '"name":"node 0 rank 0"' in names and '"name":"node 1 rank 0"' in names


def world(monkeypatch, rank: int, size: int, local_size: int = 1) -> None:
    for name, value in {"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": local_size,
                        "GROUP_RANK": rank, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": 29500}.items():
        monkeypatch.setenv(name, str(value))


def test_gpus_given_must_agree_with_torchruns_world(monkeypatch):
    world(monkeypatch, 0, 4)
    config = RunConfig(engine="ddp")
    assert torchrun.under_torchrun()
    assert torchrun.check_world(config, gpus_given=False).gpus == 4
    assert torchrun.check_world(RunConfig(engine="ddp", gpus=4), gpus_given=True).gpus == 4
    with pytest.raises(ConfigError, match="--gpus 2 disagrees with torchrun's world size 4"):
        torchrun.check_world(config, gpus_given=True)
    world(monkeypatch, 0, 32)
    with pytest.raises(ConfigError, match="world size is 32; dpviz runs 1 to 16 ranks"):
        torchrun.check_world(config, gpus_given=False)


def test_the_backend_is_settled_by_this_nodes_gpus(monkeypatch):
    world(monkeypatch, 0, 4, local_size=2)
    assert torchrun.resolve(RunConfig(engine="ddp"), available=0).backend == "cpu"
    assert torchrun.resolve(RunConfig(engine="ddp"), available=2).backend == "cuda"
    with pytest.raises(ConfigError, match="torchrun's 2 ranks on this machine need 2 CUDA devices, but it has 1"):
        torchrun.resolve(RunConfig(engine="ddp", backend="cuda"), available=1)


@pytest.mark.parametrize("args,words", [
    (["--gpus", "3"], "--gpus 3 disagrees with torchrun's world size 2"),
    (["--engine", "dp"], "DataParallel runs in one process; use --engine ddp"),
])
def test_bad_options_under_torchrun_exit_2_before_joining(monkeypatch, capsys, args, words):
    from dpviz.cli import main

    world(monkeypatch, 1, 2)
    argv = ["--engine", "ddp", *args] if "--engine" not in args else args
    with pytest.raises(SystemExit) as exit:
        main(argv)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_process_without_torchruns_variables_is_not_a_rank():
    env = {name: value for name, value in os.environ.items() if name not in torchrun.ENVIRONMENT}
    code = "from dpviz.engines.ranks.torchrun import under_torchrun; print(under_torchrun())"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def test_tensor_parallelism_runs_under_torchrun_each_node_a_rank_holding_half_of_every_cut_linear(tmp_path):
    """`--engine tp` as torchrun starts it, as DDP does: each node's one rank takes its slice of each Linear the
    model declares cut, and the trace written by rank 0 says so, with the all-reduces torch ran."""
    port, path = free_port(), tmp_path / "tp.json"
    args = ("--model", "ffn", "--train", "--trace", str(path))
    (code0, out0, err0), (code1, out1, err1) = finish([torchrun_node(node, port, *args, engine="tp") for node in (0, 1)])
    assert code0 == 0 and code1 == 0, (err0[-2000:], err1[-2000:])
    assert "(processes on the CPU, gloo, under torchrun)" in err0 and out1 == ""
    trace = trace_json.loads(path.read_text())
    assert trace.engine == "tp" and trace.failure is None and trace.config.gpus == 2
    assert [lane.name for lane in trace.lanes] == ["node 0 rank 0", "node 1 rank 0"]
    # ffn's first Linear column-wise and its second row-wise: one all-reduce per forward, on every rank
    assert [[m["style"] for m in rank] for rank in trace.facts["cut_modules"]] == [["colwise", "rowwise"]] * 2
    for lane in range(2):
        reduces = [s for s in trace.spans if s.lane == lane and s.phase == "allreduce_forward" and s.batch == 0]
        assert len(reduces) == 1, (lane, [s.phase for s in trace.spans if s.lane == lane and s.batch == 0])
