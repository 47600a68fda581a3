"""collecting(): each run's warnings, every occurrence, while other threads warn and collect beside it."""
import threading
import warnings

from dpviz.engines.workload.warning_capture import collecting


def _state():
    return list(warnings.filters), warnings.showwarning


def test_every_occurrence_is_collected_and_the_process_state_is_restored():
    before = _state()
    got = []
    with collecting(lambda c, m: got.append((c, m))):
        for _ in range(3):
            warnings.warn("same place, every time")
        warnings.warn("deprecated", DeprecationWarning)  # ignored by the default filters, collected here
    assert got == [("UserWarning", "same place, every time")] * 3 + [("DeprecationWarning", "deprecated")]
    assert _state() == before


def test_a_named_thread_is_collected_and_a_stranger_is_passed_on():
    got, passed_on = [], []
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, *rest: passed_on.append(str(message))
        named = set()
        with collecting(lambda c, m: got.append(m), named):
            def replica():
                named.add(threading.current_thread())
                warnings.warn("from a replica")

            stranger = threading.Thread(target=lambda: warnings.warn("from another session"))
            for thread in (threading.Thread(target=replica), stranger):
                thread.start()
                thread.join()
    assert got == ["from a replica"]
    assert passed_on == ["from another session"]


def test_concurrent_collectors_each_get_exactly_their_own():
    before = _state()
    results: dict[int, list[str]] = {}

    def run(n: int) -> None:
        mine = []
        for round_ in range(40):
            with collecting(lambda c, m: mine.append(m)):
                for _ in range(n):
                    warnings.warn(f"thread {n}")
        results[n] = mine

    threads = [threading.Thread(target=run, args=(n,)) for n in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {n: len(m) for n, m in results.items()} == {n: 40 * n for n in range(1, 7)}
    assert all(set(m) == {f"thread {n}"} for n, m in results.items())
    assert _state() == before
