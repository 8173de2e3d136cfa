"""The simulation harness itself: scoreboard messages, build directories, seeds, waves,
the stream driver and sink (through a FIFO loopback), and failure reporting."""

import os
from pathlib import Path

import numpy as np
import pytest

from pentegg.sim import harness
from pentegg.sim.loopback import StreamLoopback
from pentegg.sim.scoreboard import Mismatch, Scoreboard, compare


def test_compare_reports_first_mismatch_with_both_values():
    ref = np.arange(100_000) % 5 - 2
    got = ref.copy()
    got[40961] = 2 if ref[40961] != 2 else -2
    got[70000] = 0 if ref[70000] != 0 else 1
    with pytest.raises(Mismatch) as e:
        compare("digits", ref, got)
    assert e.value.index == 40961
    assert str(e.value) == (
        f"digits: first mismatch at index 40961 of 100000: expected {ref[40961]}, got {got[40961]}"
    )


def test_compare_lengths_and_shapes():
    assert compare("x", [1, 2, 3], (1, 2, 3)) == 3
    with pytest.raises(Mismatch, match="index 2 of 3: expected 3, got nothing"):
        compare("short", [1, 2, 3], [1, 2])
    with pytest.raises(Mismatch, match=r"index 3 of 3: expected nothing .*, got 4"):
        compare("long", [1, 2, 3], [1, 2, 3, 4])
    with pytest.raises(Mismatch, match=r"index \(1, 0\) of 4: expected 3, got 9"):
        compare("matrix", [[1, 2], [3, 4]], [[1, 2], [9, 4]])


def test_scoreboard_counts():
    board = Scoreboard("unit")
    board.check("a", [1, 2], [1, 2], "digits")
    board.check("b", [3], [3], "digits")
    assert board.checked == {"digits": 3}
    assert board.summary() == "unit: all equal to golden (3 digits)"


def test_build_dirs_are_unique(tmp_path, monkeypatch):
    monkeypatch.setenv("PENTEGG_SIM_BUILD", str(tmp_path))
    dirs = {
        harness.build_dir("lrgen", {"rank": 4}, "icarus", False),
        harness.build_dir("lrgen", {"rank": 16}, "icarus", False),
        harness.build_dir("lrgen", {"rank": 4}, "verilator", False),
        harness.build_dir("lrgen", {"rank": 4}, "icarus", True),
        harness.build_dir("prng", {"rank": 4}, "icarus", False),
        harness.build_dir("lrgen", {"rank": 4}, "icarus", False, "ice40"),
    }
    assert len(dirs) == 6
    assert all(str(d).startswith(str(tmp_path)) for d in dirs)
    # the same configuration maps to the same directory (rebuilds are skipped)
    assert harness.build_dir("lrgen", {"rank": 4}, "icarus", False) in dirs


def test_a_catalog_module_elaborated_for_the_ice40_runs_in_its_own_build(monkeypatch):
    """``family="ice40"`` through the catalog (no factory): the module is elaborated for
    the iCE40 into a build directory of its own, and its cocotb tests run there."""
    params = {"rank": 4, "max_fan": 21, "max_out": 9}
    seen = []
    convert = harness.catalog.verilog_text

    def spy(component, name, platform=None):
        seen.append(getattr(platform, "family", None))
        return convert(component, name, platform=platform)

    monkeypatch.setattr(harness.catalog, "verilog_text", spy)
    res = harness.run("lrgen", params, "cocotb_lrgen", env={"cases": 2}, family="ice40")
    assert seen == ["ice40"]  # elaborated for the iCE40
    work = Path(res["build_dir"])
    assert work.name == "ice40-icarus"
    plain = harness.catalog.resolved_params("lrgen", params)
    assert work != harness.build_dir("lrgen", plain, "icarus", False)
    assert (work / "results.xml").exists()


def test_a_family_other_than_the_ice40_is_refused_in_one_line():
    with pytest.raises(ValueError, match="family='ecp5' is not None or 'ice40'"):
        harness.run("lrgen", {"rank": 4}, "cocotb_lrgen", family="ecp5")


def test_each_xdist_worker_builds_simulations_in_its_own_tree(monkeypatch):
    """`./run test` runs pytest-xdist workers: two of them compiling the same module and
    parameters into one directory would read each other's results. tests/conftest.py
    gives each worker its own tree (and leaves a PENTEGG_SIM_BUILD the user set)."""
    import conftest

    monkeypatch.delenv("PENTEGG_SIM_BUILD", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    conftest.pytest_configure(None)
    d = harness.build_dir("lrgen", {"rank": 4}, "icarus", False)
    assert "gw7" in d.parts, d
    monkeypatch.setenv("PENTEGG_SIM_BUILD", "/elsewhere")
    conftest.pytest_configure(None)
    assert os.environ["PENTEGG_SIM_BUILD"] == "/elsewhere"


def test_seed_from_environment(monkeypatch, capsys):
    monkeypatch.setenv("PENTEGG_SEED", "1234")
    assert harness.pick_seed("x") == 1234
    assert "seed=1234" in capsys.readouterr().out
    monkeypatch.delenv("PENTEGG_SEED")
    monkeypatch.setenv("COCOTB_RANDOM_SEED", "99")
    assert harness.pick_seed("x") == 99


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_stream_driver_and_sink_through_loopback(simulator):
    harness.run(
        "loopback",
        {"width": 8, "depth": 4},
        "cocotb_selftest",
        simulator=simulator,
        factory=lambda: StreamLoopback(8, 4),
    )


def test_wait_low_and_which_signals_a_build_shows(monkeypatch):
    """``wait_low`` times out naming its wait, and ends on the falling edge after the
    signal falls; Icarus and a Verilator build with ``internals`` show the tests the
    FIFO's inner ``level``, a default Verilator build (only the top's ports public, the
    fast model) does not; the two Verilator builds have their own directories."""
    loop = lambda: StreamLoopback(8, 4)  # noqa: E731
    case = "wait_low_and_inner_signals"
    harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_selftest", testcase=case,
                env={"inner": True}, factory=loop)  # fmt: skip
    fast = harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_selftest",
                       simulator="verilator", testcase=case, env={"inner": False},
                       factory=loop)  # fmt: skip
    full = harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_selftest",
                       simulator="verilator", testcase=case, env={"inner": True},
                       factory=loop, internals=True)  # fmt: skip
    assert Path(fast["build_dir"]).name == "verilator"
    assert Path(full["build_dir"]).name == "verilator-internals"
    monkeypatch.setenv("PENTEGG_SIM_INTERNALS", "1")  # the same, for a user's reruns
    again = harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_selftest",
                        simulator="verilator", testcase=case, env={"inner": True},
                        factory=loop)  # fmt: skip
    assert again["build_dir"] == full["build_dir"]


def test_the_evaluators_failure_state_says_how_to_see_hidden_inner_signals():
    """A default Verilator build hides the evaluator's blocks: the state a timeout
    message gives says so and how to show them, instead of failing on the name."""
    from types import SimpleNamespace

    from pentegg.sim.cocotb_evaluator import state

    assert state(SimpleNamespace()) == (
        "inner signals hidden (Verilator: rerun with PENTEGG_SIM_INTERNALS=1)"
    )


def test_a_factory_is_elaborated_once_for_its_runs():
    """The runs of one factory in one process (a test's testcases, run one by one)
    elaborate it once; another factory object, even of the same code and parameters
    (it may close over other contents: a ROM's words, memory sizes), elaborates again."""
    made = []

    def factory_of(width):
        def build():
            made.append(width)
            return StreamLoopback(width, 4)

        return build

    eight, six, eight_again = factory_of(8), factory_of(6), factory_of(8)
    for width, factory in ((8, eight), (8, eight), (6, six), (8, eight), (8, eight_again)):
        harness.run("loopback", {"width": width, "depth": 4}, "cocotb_selftest",
                    testcase="loopback_with_stalls", factory=factory)  # fmt: skip
    assert made == [8, 6, 8]


def test_a_run_in_which_no_test_ran_fails():
    """A testbench that does not import (here: one that does not exist), or a testcase
    filter that matches nothing, leaves no result to check: a failure, not a pass (and
    the results of an earlier run in the same build directory are not read again)."""
    loop = lambda: StreamLoopback(8, 4)  # noqa: E731
    harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_selftest", factory=loop)
    with pytest.raises(harness.SimulationFailure, match=r"no results: pentegg\.sim\.cocotb_gone"):
        harness.run("loopback", {"width": 8, "depth": 4}, "cocotb_gone", factory=loop)
    none_ran = r"no test of pentegg\.sim\.cocotb_selftest ran"
    with pytest.raises(harness.SimulationFailure, match=none_ran):
        harness.run(
            "loopback",
            {"width": 8, "depth": 4},
            "cocotb_selftest",
            testcase="renamed_test",
            factory=loop,
        )


def test_failure_names_index_seed_and_waves(monkeypatch):
    monkeypatch.setenv("PENTEGG_WAVES", "fail")
    with pytest.raises(harness.SimulationFailure) as e:
        harness.run(
            "loopback",
            {"width": 8, "depth": 2},
            "cocotb_selftest",
            seed=7,
            env={"break": True},
            factory=lambda: StreamLoopback(8, 2),
        )
    text = str(e.value)
    assert "seed=7 (replay: PENTEGG_SEED=7)" in text
    assert "loopback beats: first mismatch at index 1234 of 2000" in text
    waves = [ln for ln in text.splitlines() if ln.startswith("waves: ")]
    assert waves and waves[0].endswith(".fst"), text


def test_waves_on_request(monkeypatch):
    monkeypatch.setenv("PENTEGG_WAVES", "1")
    r = harness.run(
        "loopback",
        {"width": 4, "depth": 2},
        "cocotb_selftest",
        factory=lambda: StreamLoopback(4, 2),
    )
    assert r["waves"] and r["waves"].endswith(".fst")


def _ram_with_watch():
    """A block RAM's two ports and a ``used`` flag the testbench drives, watched."""
    from amaranth import Module, Signal
    from amaranth.lib import memory

    from pentegg.rtl.bram import RWWatch

    m = Module()
    m.submodules.mem = mem = memory.Memory(shape=8, depth=16, init=[])
    rp, wp = mem.read_port(), mem.write_port()
    used = Signal()
    return m, rp, wp, used, [RWWatch("mem", rp, wp, used)]


@pytest.mark.parametrize("same_address", [True, False])
def test_the_collision_monitor_names_a_used_read_of_a_word_being_written(same_address):
    from pentegg.sim.collisions import simulate_watched

    m, rp, wp, used, watches = _ram_with_watch()

    async def bench(ctx):
        ctx.set(wp.addr, 3)
        ctx.set(wp.data, 0x5A)
        ctx.set(wp.en, 1)
        ctx.set(rp.addr, 3 if same_address else 4)
        ctx.set(used, 1)
        await ctx.tick()
        await ctx.tick()

    if same_address:
        with pytest.raises(AssertionError, match="first: cycle 0, memory mem, address 3"):
            simulate_watched(m, bench, lambda: watches)
    else:
        simulate_watched(m, bench, lambda: watches)


def test_the_collision_monitor_fails_when_it_saw_no_used_read():
    """A monitor over no ports, or over reads never used, would pass any design."""
    from pentegg.sim.collisions import simulate_watched

    m, *_, watches = _ram_with_watch()

    async def bench(ctx):
        await ctx.tick()

    with pytest.raises(AssertionError, match=r"saw no used read \(1 ports watched\)"):
        simulate_watched(m, bench, lambda: watches)
    with pytest.raises(AssertionError, match=r"saw no used read \(0 ports watched\)"):
        simulate_watched(m, bench, lambda: [])
