"""Replica threads for SimulatedDataParallel, kept between calls and no more at once than there are cores.

torch's parallel_apply starts a `threading.Thread` per replica on every call and joins it. On CPU,
starting and joining a thread costs more than a small model's forward (it was about three quarters
of a recorded run at 16 devices), so simulated calls borrow idle worker threads instead. And where
real GPUs run their replicas at once, CPU threads only take turns on the cores and on Python's
interpreter lock, which torch hands back and forth at every operation: 16 replica threads on 2 cores
spent most of a call passing it around. So a call runs its replicas on at most as many threads as
the process has cores (`Pool.threads`), replica i on thread i mod that number, in order. What holds:
each replica runs whole on one thread that is not the caller's, the threads of a call run at once,
the call returns when every replica has ended, and no other call's work runs on its threads until
then. What differs from torch when replicas outnumber cores: replicas that share a thread run one
after another (a replica that waits for all the others to be running at once would wait forever), and
the trace says how many threads they shared (facts["threads_at_once"]).

One pool serves the whole process (every session of a hosted page). A call takes workers no other
call holds, so calls from several sessions, or a replica that itself calls DataParallel, never wait
for each other's threads. The pool is bounded: a worker idle for IDLE_SECONDS ends, and at most
MAX_IDLE wait at once (the rest end when they are handed back).

What a reused thread does not reset: thread-local state that a replica's own code leaves behind
(a `threading.local` of its own) is still there on the worker's next job, where torch's fresh thread
would start empty. What parallel_apply itself sets per thread (grad mode, autocast, the current
device) is set again for every replica.
"""
from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue

IDLE_SECONDS = 30.0  # a worker with nothing to do for this long ends
MAX_IDLE = 64  # idle workers kept at most: four sessions at 16 devices


def cores() -> int:
    """The cores this process may run on (its affinity, which a container's CPU set narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)

_names = itertools.count(1)


class _Worker:
    """One thread that runs jobs handed to it, one at a time, until it is retired."""

    def __init__(self, pool: "Pool"):
        self.pool = pool
        self.jobs: SimpleQueue = SimpleQueue()
        self.dead = False  # a job raised a BaseException, which ended the thread
        self.thread = threading.Thread(target=self._loop, name=f"replica worker {next(_names)}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=self.pool.idle_seconds)
            except Empty:
                if self.pool.retire(self):
                    return
                continue  # taken by a call just as it timed out: that call's job is on its way
            if job is None:
                return
            run, done = job
            try:
                run()
            except BaseException:
                # SystemExit or KeyboardInterrupt in a replica ends its thread, as it would end torch's
                # (threading.excepthook reports it); this worker is never handed out again.
                self.dead = True
                raise
            finally:
                # An idle thread keeps nothing of the call (its replicas, inputs and outputs), from
                # before the caller is told, so the call's objects go with the call as they would in torch.
                job = run = None
                done.put(None)
                done = None


class _Countdown:
    """Woken once, by the last of a call's jobs to end (not once per job: each wake is a thread switch)."""

    def __init__(self, jobs: int):
        self.left = jobs
        self._lock = threading.Lock()
        self._ended = threading.Lock()
        self._ended.acquire()

    def put(self, _: object) -> None:
        with self._lock:
            self.left -= 1
            last = self.left == 0
        if last:
            self._ended.release()

    def wait(self) -> None:
        self._ended.acquire()


def _in_turn(jobs: Sequence[Callable[[], None]]) -> Callable[[], None]:
    """One thread's share of a call: its jobs one after another. A job that ends its thread (SystemExit)
    does so after the others have run, as it would have ended only its own thread in torch."""

    def run() -> None:
        ending = None
        for job in jobs:
            try:
                job()
            except BaseException as error:  # noqa: B036 - re-raised below, once the thread's other jobs ran
                ending = ending or error
        if ending is not None:
            raise ending

    return run


class Pool:
    """Idle workers, handed out a whole call's worth at a time; a call gets at most `threads` of them."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, max_idle: int = MAX_IDLE, threads: int | None = None):
        self.idle_seconds, self.max_idle = idle_seconds, max_idle
        self.threads = threads if threads is not None else cores()
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def at_once(self, jobs: int) -> int:
        """Threads a call of `jobs` jobs runs on."""
        return max(1, min(jobs, self.threads))

    def run_each(self, jobs: Sequence[Callable[[], None]]) -> None:
        """Run every job on a thread that is not the caller's, at most `threads` at once (job i on thread
        i mod that number, in order); return when every one has ended."""
        count = self.at_once(len(jobs))
        if count < len(jobs):
            jobs = [_in_turn(jobs[i::count]) for i in range(count)]
        with self._lock:
            first = max(0, len(self._idle) - len(jobs))  # the most recently idle: the least likely to retire
            workers = self._idle[first:]
            del self._idle[first:]
        try:
            while len(workers) < len(jobs):
                workers.append(_Worker(self))
        except BaseException:  # no thread to be had (RuntimeError: can't start new thread): none ran a job
            self._give_back(workers)
            raise
        done = _Countdown(len(jobs))
        try:
            for worker, job in zip(workers, jobs):
                worker.jobs.put((job, done))
            done.wait()
        finally:
            if done.left == 0:
                self._give_back(workers)
            else:  # interrupted while replicas still run: let each end after its job, never reuse it
                for worker in workers:
                    worker.jobs.put(None)

    def _give_back(self, workers: list[_Worker]) -> None:
        with self._lock:
            self._idle.extend(w for w in workers if not w.dead)
            extra = self._idle[: max(0, len(self._idle) - self.max_idle)]
            del self._idle[: len(extra)]
        for worker in extra:  # the longest idle go
            worker.jobs.put(None)

    def retire(self, worker: _Worker) -> bool:
        """Called by a worker that waited IDLE_SECONDS: True (and it is gone) unless a call holds it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False

    def idle(self) -> int:
        """How many workers wait for a call now."""
        with self._lock:
            return len(self._idle)


POOL = Pool()
