"""The graphs lesson's own report (``python -m minigpu.lessons.graphs``), small: the cpu
device's host times and backend calls per step, and the generated kernel it prints. Its
counters (launches and bytes per step on the simulator) are asserted in
``test_lessons_measured.py::test_graphs_fused_step_launches_and_moves_less``."""
from minigpu.lessons import graphs


def test_cpu_steps_are_timed_and_fusion_makes_fewer_calls():
    times = graphs.host_times(repeats=2)
    assert set(times) == set(graphs.MODES)
    assert all(us > 0 for us, _ in times.values())
    calls = {mode: n for mode, (_, n) in times.items()}
    assert calls["fused"] < calls["captured"]


def test_the_printed_fused_kernel_is_the_steps_bias_add_and_tanh():
    fused, hand = graphs.fused_example()
    assert fused.ops == ("add", "tanh") and fused.bytes_saved > 0
    assert "@cuda.jit" in fused.source and "unary_tanh" in fused.source
    assert "def binary_strided(" in hand and "def unary_dense(" in hand
    assert "def fused_add_tanh(" in fused.source
