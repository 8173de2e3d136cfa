"""benchmarks/timing.py: interleaved rounds, per-round ratios, summaries, machine record.

Every timing here comes from a fake clock, so no assertion depends on the machine's speed.
"""

import pytest

from pentegg.benchmarks import timing


class FakeMachine:
    """A clock and sides whose calls advance it by ``cost[side] * load``, where ``load``
    is ``load_of(number of calls so far)``: a machine whose load changes over time."""

    def __init__(self, cost, load_of=lambda calls: 1.0):
        self.now, self.calls, self.cost, self.load_of = 0.0, [], cost, load_of

    def clock(self):
        return self.now

    def side(self, name):
        def call():
            self.now += self.cost[name] * self.load_of(len(self.calls))
            self.calls.append(name)

        return call

    def sides(self):
        return {name: self.side(name) for name in self.cost}


def test_rounds_alternate_the_order_after_the_warmup_calls():
    m = FakeMachine({"a": 1.0, "b": 2.0, "c": 3.0})
    timing.interleave(m.sides(), 4, warmup=1, clock=m.clock)
    assert m.calls == ["a", "b", "c"] + ["a", "b", "c", "c", "b", "a"] * 2
    m = FakeMachine({"a": 1.0, "b": 2.0})
    timing.interleave(m.sides(), 3, warmup=0, alternate=False, clock=m.clock)
    assert m.calls == ["a", "b"] * 3


def test_times_are_per_call_and_ratios_are_per_round_quotients():
    m = FakeMachine({"a": 1.0, "b": 4.0})
    r = timing.interleave(m.sides(), 3, number=5, ratios={"b_over_a": ("b", "a")}, clock=m.clock)
    assert r.times == {"a": [1.0] * 3, "b": [4.0] * 3}
    assert r.ratios == {"b_over_a": [4.0] * 3}
    assert r.ratio("a", "b") == [0.25] * 3
    assert r.median("b") == 4.0 and r.rounds == 3 and r.number == 5
    assert len(m.calls) == 2 * 1 + 2 * 3 * 5
    d = r.to_dict()
    assert d["times"] == {"a": [1e3] * 3, "b": [4e3] * 3} and d["ratios"]["b_over_a"] == [4.0] * 3


def test_a_load_change_between_rounds_leaves_every_per_round_ratio_unchanged():
    # the machine slows down threefold from its seventh call on
    def load(calls):
        return 1.0 if calls < 6 else 3.0

    m = FakeMachine({"fast": 1.0, "slow": 2.0}, load_of=load)
    r = timing.interleave(m.sides(), 6, ratios={"r": ("slow", "fast")}, clock=m.clock)
    assert r.times["fast"] == [1.0, 1.0, 3.0, 3.0, 3.0, 3.0]
    assert r.ratios["r"] == [2.0] * 6  # every round sees one load: the true ratio
    # timed one side after the other, the load change lands between the sides
    m = FakeMachine({"fast": 1.0, "slow": 2.0}, load_of=load)
    fast = timing.interleave({"fast": m.side("fast")}, 3, clock=m.clock).median("fast")
    slow = timing.interleave({"slow": m.side("slow")}, 3, clock=m.clock).median("slow")
    assert slow / fast == 6.0


def test_bad_arguments_are_refused():
    m = FakeMachine({"a": 1.0})
    with pytest.raises(ValueError, match="no sides"):
        timing.interleave({}, 3)
    with pytest.raises(ValueError, match="rounds=0"):
        timing.interleave(m.sides(), 0, clock=m.clock)
    with pytest.raises(ValueError, match="number=0"):
        timing.interleave(m.sides(), 3, number=0, clock=m.clock)
    with pytest.raises(ValueError, match="ratio 'r'"):
        timing.interleave(m.sides(), 3, ratios={"r": ("a", "b")}, clock=m.clock)


def test_interleave_restores_the_garbage_collector():
    import gc

    m = FakeMachine({"a": 1.0})
    assert gc.isenabled()
    timing.interleave(m.sides(), 2, clock=m.clock)
    assert gc.isenabled()


def test_summary_gives_median_quartiles_and_range():
    s = timing.summary([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s == {"median": 3.0, "q1": 2.0, "q3": 4.0, "min": 1.0, "max": 5.0, "n": 5}
    assert timing.summary([7]) == {"median": 7, "q1": 7, "q3": 7, "min": 7, "max": 7, "n": 1}
    assert timing.format_summary(s) == "3.00 (IQR 2.00-4.00, range 1.00-5.00)"
    with pytest.raises(ValueError):
        timing.summary([])


def test_load_average_is_three_numbers_where_the_platform_has_one():
    import os

    load = timing.load_average()
    if hasattr(os, "getloadavg"):  # Linux, macOS: the benchmarks' records carry it
        assert load is not None and len(load) == 3 and all(x >= 0 for x in load), load
    else:
        assert load is None or (len(load) == 3 and all(x >= 0 for x in load))


def test_blas_threads_from_the_environment_without_threadpoolctl():
    b = timing.blas_threads(environ={"OMP_NUM_THREADS": "3"}, use_threadpoolctl=False)
    assert b["threads"] == 3 and b["source"] == "environment OMP_NUM_THREADS"
    b = timing.blas_threads(environ={"OMP_NUM_THREADS": "junk"}, use_threadpoolctl=False)
    assert b["source"] != "environment OMP_NUM_THREADS"
    b = timing.blas_threads(environ={}, use_threadpoolctl=False)
    assert b["source"] == "unknown" or b["source"].startswith("assumed: ")
    assert (b["threads"] is None) == (b["source"] == "unknown")


def test_blas_threads_from_threadpoolctl_when_installed():
    pytest.importorskip("threadpoolctl")
    b = timing.blas_threads()
    assert b["source"] == "threadpoolctl" and b["threads"] >= 1 and b["library"]


def test_machine_record_carries_load_at_start_and_end_and_blas():
    rec = timing.machine_record([1.0, 2.0, 3.0])
    assert rec["load_avg_start"] == [1.0, 2.0, 3.0]
    assert rec["load_avg_end"] is None or len(rec["load_avg_end"]) == 3
    for key in ("cpus", "cpus_available", "python", "numpy", "platform", "blas"):
        assert rec[key] is not None
    assert {"library", "version", "threads", "source"} <= set(rec["blas"])
    assert timing.describe_machine(rec).startswith(f"machine: {rec['cpus']} CPUs, load average")


def test_blas_limit_sets_and_restores_the_thread_count():
    pytest.importorskip("threadpoolctl")
    before = timing.blas_threads()["threads"]
    with timing.blas_limit(1):
        assert timing.blas_threads()["threads"] == 1
    assert timing.blas_threads()["threads"] == before
    with timing.blas_limit(None):
        assert timing.blas_threads()["threads"] == before


def test_blas_limit_without_threadpoolctl_says_what_is_missing(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    with pytest.raises(RuntimeError, match="needs threadpoolctl"), timing.blas_limit(1):
        pass
    with timing.blas_limit(None):  # no limit asked: nothing needed
        pass


def test_contention_note_only_when_load_and_blas_threads_exceed_the_cpus():
    def rec(load, threads, cpus=2):
        return {"load_avg_start": load, "cpus_available": cpus, "blas": {"threads": threads}}

    assert "--blas-threads 1" in timing.contention_note(rec([1.0, 0, 0], 2))
    assert timing.contention_note(rec([0.0, 0, 0], 2)) is None  # idle: fits
    assert timing.contention_note(rec([3.0, 0, 0], 1)) is None  # one thread: no BLAS waits
    assert timing.contention_note(rec(None, 2)) is None  # no load average: no claim
