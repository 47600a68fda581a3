"""The worker threads SimulatedDataParallel's replicas borrow (dpviz.engines.dp.workers): every job of a
call on a thread of its own, all at once, when the pool allows that many (by default one per core; more
jobs take turns on them), none shared with another call; reused between calls, and bounded: idle ones
end, and a job's objects are not kept."""
from __future__ import annotations

import gc
import os
import threading
import weakref

import torch
from torch import nn

from dpviz.engines.dp.simulated import SimulatedDataParallel
from dpviz.engines.dp.workers import POOL, Pool

WAIT = 10  # seconds a test waits for a thread before it fails (never reached when the code is right)


def meeting_jobs(count: int, seen: list) -> list:
    """`count` jobs that each note their thread and wait until all `count` run at once."""
    barrier = threading.Barrier(count, timeout=WAIT)
    lock = threading.Lock()

    def job() -> None:
        with lock:
            seen.append(threading.current_thread())
        barrier.wait()  # broken (and the call fails) unless every job of the call is running

    return [job] * count


def test_each_job_runs_on_its_own_thread_all_at_once():
    seen: list = []
    Pool(threads=5).run_each(meeting_jobs(5, seen))
    assert len(seen) == 5 and len(set(seen)) == 5
    assert threading.current_thread() not in seen


def test_more_jobs_than_threads_take_turns_on_them_in_order():
    """Job i runs on thread i mod `threads`, after the jobs before it on that thread; the threads meet."""
    pool, ran, lock = Pool(threads=3), [], threading.Lock()
    meet = threading.Barrier(3, timeout=WAIT)  # the first job of each thread: all three threads run at once

    def job(i: int) -> None:
        if i < 3:
            meet.wait()
        with lock:
            ran.append((i, threading.current_thread()))

    pool.run_each([lambda i=i: job(i) for i in range(8)])
    assert sorted(i for i, _ in ran) == list(range(8))
    thread_of = dict(ran)
    assert len(set(thread_of.values())) == 3 and threading.current_thread() not in thread_of.values()
    assert all(thread_of[i] is thread_of[i % 3] for i in range(8))
    for first in range(3):  # each thread's jobs in their order
        mine = [i for i, thread in ran if thread is thread_of[first]]
        assert mine == sorted(mine)


def test_the_default_is_one_thread_per_core():
    assert Pool().threads == len(os.sched_getaffinity(0))
    assert POOL.at_once(16) == min(16, POOL.threads) and POOL.at_once(1) == 1


def test_a_job_ending_its_shared_thread_lets_the_others_run_first(monkeypatch):
    """SystemExit in a job that shares its thread: the thread's later jobs still run, then it ends."""
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # its report is expected
    pool, ran = Pool(threads=2), []

    def exits() -> None:
        ran.append("exits")
        raise SystemExit

    pool.run_each([exits, lambda: ran.append(1), lambda: ran.append(2), lambda: ran.append(3)])
    assert sorted(map(str, ran)) == ["1", "2", "3", "exits"]


def test_threads_are_reused_between_calls():
    """What the trace's facts say: the next call's replicas run on the threads the last call used."""
    pool, first, second = Pool(threads=4), [], []
    pool.run_each(meeting_jobs(4, first))
    pool.run_each(meeting_jobs(4, second))
    assert set(first) == set(second)


def test_calls_at_once_never_share_a_thread():
    """Sessions call at the same time: each call gets threads no other call holds."""
    pool, seen, errors = Pool(threads=4), {}, []
    both = threading.Barrier(3, timeout=WAIT)  # the two callers' jobs and this test meet once

    def call(name: str) -> None:
        try:
            seen[name] = []
            pool.run_each([lambda: (seen[name].append(threading.current_thread()), both.wait())] * 1
                          + meeting_jobs(3, seen[name]))
        except Exception as error:  # reported below: a thread's failure would otherwise go unseen
            errors.append(error)

    callers = [threading.Thread(target=call, args=(name,)) for name in "ab"]
    for caller in callers:
        caller.start()
    both.wait()  # both calls hold their threads now
    for caller in callers:
        caller.join(WAIT)
    assert not errors
    assert len(set(seen["a"])) == len(set(seen["b"])) == 4
    assert not set(seen["a"]) & set(seen["b"])


def test_a_job_may_make_a_call_of_its_own():
    """A replica that itself calls DataParallel takes other threads, so the two never wait on each other."""
    pool, inner = Pool(threads=3), []
    pool.run_each([lambda: pool.run_each(meeting_jobs(3, inner))] + [lambda: None])
    assert len(set(inner)) == 3


def test_idle_workers_end():
    pool, seen = Pool(idle_seconds=0.05, threads=3), []
    pool.run_each(meeting_jobs(3, seen))
    for thread in seen:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in seen)
    assert pool.idle() == 0


def test_at_most_max_idle_workers_wait():
    pool, seen = Pool(max_idle=2, threads=5), []
    pool.run_each(meeting_jobs(5, seen))
    assert pool.idle() == 2
    kept = {worker.thread for worker in pool._idle}
    for thread in set(seen) - kept:
        thread.join(WAIT)  # the three handed back over the bound end
    assert [thread.is_alive() for thread in seen] == [thread in kept for thread in seen]


def test_a_job_ending_its_thread_is_not_handed_out_again(monkeypatch):
    """SystemExit in a job ends its thread (as in a thread torch started); the call still returns."""
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # its report is expected
    pool, seen = Pool(threads=2), []

    def exits() -> None:
        seen.append(threading.current_thread())
        raise SystemExit

    pool.run_each([exits, lambda: None])
    seen[0].join(WAIT)
    assert not seen[0].is_alive()
    after: list = []
    pool.run_each(meeting_jobs(2, after))
    assert seen[0] not in after


def test_a_finished_call_keeps_none_of_its_objects():
    """A reused thread holds nothing of the call it ran: the replicas, inputs and outputs go with the
    call, without the garbage collector, as they do when torch's threads end."""
    gc.disable()
    try:
        module, x = nn.Linear(5, 2), torch.randn(8, 5)
        parallel = SimulatedDataParallel(module, device_ids=[0, 1, 2, 3])
        out = parallel(x)
        refs = [weakref.ref(t) for t in (x, out)]
        del x, out
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_calls_one_after_another_reuse_one_calls_worth():
    """The shared pool: calls of 16 replicas one after another need one call's threads, not that many per call."""
    parallel = SimulatedDataParallel(nn.Linear(5, 2), device_ids=list(range(16)))
    before = threading.active_count()
    for _ in range(5):
        parallel(torch.randn(32, 5))
    assert threading.active_count() - before <= POOL.at_once(16)
    assert POOL.at_once(16) <= POOL.idle() <= POOL.max_idle
