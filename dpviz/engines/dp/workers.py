"""Replica threads for SimulatedDataParallel, kept between calls instead of started for each one.

torch's parallel_apply starts a `threading.Thread` per replica on every call and joins it. On CPU,
starting and joining a thread costs more than a small model's forward (it was about three quarters
of a recorded run at 16 devices), so simulated calls borrow idle worker threads instead. What
DataParallel promises still holds: every replica of a call runs on a thread of its own, all of them
at once, and the call returns when all have ended; no other work runs on a call's threads until then.

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
import threading
from collections.abc import Callable, Sequence
from queue import Empty, SimpleQueue

IDLE_SECONDS = 30.0  # a worker with nothing to do for this long ends
MAX_IDLE = 64  # idle workers kept at most: four sessions at 16 devices

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


class Pool:
    """Idle workers, handed out a whole call's worth at a time."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, max_idle: int = MAX_IDLE):
        self.idle_seconds, self.max_idle = idle_seconds, max_idle
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def run_each(self, jobs: Sequence[Callable[[], None]]) -> None:
        """Run every job on a thread of its own, all at once; return when every one has ended."""
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
