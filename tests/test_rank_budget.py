"""One budget of rank processes for the whole server: runs of several sessions at once never hold more ranks
than it allows, wait their turn first come first served, are told how many runs are ahead, leave the queue
when their session ends, and give their ranks back when their run ends. Real DDP runs on real processes."""
from __future__ import annotations

import os
import threading
import time

import pytest

from dpviz.config import RunConfig
from dpviz.engines.ddp.launch import forkserver_pid, launch
from dpviz.host_memory import cgroup_limit_bytes, host_limit_bytes, pss_bytes, tree
from dpviz.page.rank_budget import FORKSERVER_BYTES, RANK_BYTES, TRACKER_BYTES, HEADROOM_BYTES, RankBudget, host_room

from budget import limit


def ranks_alive() -> int:
    """Rank processes running now: the forkserver's children."""
    server = forkserver_pid()
    return 0 if server is None else len(tree(server)) - 1


def test_runs_of_many_sessions_never_hold_more_ranks_than_the_budget():
    budget = RankBudget(room=lambda: 4)
    most, stop, heard = [0], threading.Event(), []
    finished: list[int] = []

    def watch() -> None:
        while not stop.is_set():
            most[0] = max(most[0], ranks_alive())
            time.sleep(0.01)

    def session(number: int) -> None:
        def waiting(ahead: int, held: int) -> None:
            heard.append((number, ahead, held))

        with budget.ranks(2 + number % 2, waiting):  # 2 or 3 ranks: two runs of 2 fit together, 3 + 2 do not
            launched = launch(RunConfig(engine="ddp", gpus=2 + number % 2, train=True, data_size=48, batch_size=8))
            assert launched["exit_codes"] == [0] * (2 + number % 2)
        finished.append(number)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    sessions = [threading.Thread(target=session, args=(n,)) for n in range(5)]
    for thread in sessions:
        thread.start()
    for thread in sessions:
        thread.join(timeout=limit(starts=5, then_s=5 * RunConfig().timeout_s))
    stop.set()
    watcher.join()
    assert sorted(finished) == list(range(5))  # every session ran
    assert 2 <= most[0] <= 4  # ranks alive at once: never past the budget
    assert budget.held == 0 and ranks_alive() == 0  # every rank given back, every process ended
    assert any(ahead >= 1 for _, ahead, _ in heard)  # someone waited, and was told how many runs were ahead


def test_a_session_that_ends_while_waiting_leaves_the_queue_and_the_next_one_runs():
    budget = RankBudget(room=lambda: 2)
    order: list[str] = []
    release = threading.Event()

    class Gone(Exception):
        """What a closed tab raises in the waiting callback."""

    def holder() -> None:
        with budget.ranks(2):
            order.append("first runs")
            release.wait(timeout=30)

    def quitter() -> None:
        def waiting(ahead: int, held: int) -> None:
            raise Gone

        with pytest.raises(Gone), budget.ranks(2, waiting):
            order.append("quitter ran")  # never: it left before its turn

    def patient() -> None:
        with budget.ranks(2, lambda ahead, held: None, poll_s=0.01):
            order.append("patient runs")

    first = threading.Thread(target=holder)
    first.start()
    while budget.held != 2:
        time.sleep(0.01)
    quitting, waiting = threading.Thread(target=quitter), threading.Thread(target=patient)
    quitting.start()
    quitting.join(timeout=10)
    waiting.start()
    time.sleep(0.2)
    assert order == ["first runs"]  # the patient one waits while the first holds the room
    release.set()
    first.join(timeout=10)
    waiting.join(timeout=10)
    assert order == ["first runs", "patient runs"] and budget.held == 0


def test_a_run_alone_on_a_small_server_still_starts():
    budget = RankBudget(room=lambda: 1)
    with budget.ranks(4):
        assert budget.held == 4  # alone: it runs, slower, rather than never


def test_the_room_is_the_hosts_memory_less_what_the_server_holds_over_a_ranks_cost():
    limit_690 = 690 * 10**6
    base = TRACKER_BYTES + HEADROOM_BYTES
    assert host_room(limit_690, 300 * 10**6, forkserver_running=True) == (limit_690 - 300 * 10**6 - base) // RANK_BYTES
    assert host_room(limit_690, 300 * 10**6, forkserver_running=False) == \
        (limit_690 - 300 * 10**6 - base - FORKSERVER_BYTES) // RANK_BYTES
    assert host_room(100 * 10**6, 300 * 10**6, True) == 0


def test_the_hosts_limit_is_its_cgroups_where_it_has_one_else_its_memory():
    with open("/proc/meminfo") as meminfo:
        total = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    cgroup = cgroup_limit_bytes()
    assert host_limit_bytes() == (min(total, cgroup) if cgroup is not None else total)
    assert pss_bytes(os.getpid()) > 10**6 and pss_bytes(2**22 + 12345) == 0  # a pid no process has
    assert tree(os.getpid())[0] == os.getpid()


def test_a_server_in_a_limited_cgroup_reads_that_limit_and_its_charge(tmp_path):
    # The page's budget is sized from the cgroup a hosted server runs in: a child cgroup of 690 MB here,
    # the process moved into it before Python starts (as bench/bench_budget.py --limit-mb starts the server).
    import subprocess
    import sys
    from pathlib import Path

    hierarchy = Path("/sys/fs/cgroup/memory")
    if not os.access(hierarchy, os.W_OK):
        pytest.skip("no writable cgroup v1 memory hierarchy here to make a limited cgroup in")
    group = hierarchy / f"dpviz-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(690 * 10**6))
        code = ("from dpviz.host_memory import cgroup_limit_bytes, cgroup_usage_bytes, host_limit_bytes; "
                "print(cgroup_limit_bytes(), host_limit_bytes(), cgroup_usage_bytes())")
        out = subprocess.run(["sh", "-c", f'echo $$ > "{group}/cgroup.procs" && exec "$@"', "sh", sys.executable, "-c", code],
                             capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=limit(starts=1))
        limit_bytes, host, charged = map(int, out.stdout.split())
        assert limit_bytes == host == int((group / "memory.limit_in_bytes").read_text())  # 690 MB, page-aligned
        assert 0 < charged < limit_bytes
    finally:
        group.rmdir()
