"""``benchmarks/program_steps.py`` runs end to end on two programs of the corpus (a few steps):
each side really runs its own library (a child whose program's tensors come from the other
library reports an error instead of a row), every column of the table is filled, and the
captured side's first losses equal eager minigpu's bit for bit."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "program_steps.py"
ROW = re.compile(r"^(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+)\s+([\d.]+)x"
                 r"\s+([\d.]+)\s+([\d.]+)\s+(\S+)x$")


@pytest.mark.slow
def test_the_table_has_a_row_per_program_with_every_library_timed():
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "regression",
                           "time_sequence_prediction", "--steps", "2", "--warmup", "1",
                           "--repeat", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = {m.group(1): m.groups()[1:] for line in done.stdout.splitlines()
            if (m := ROW.match(line))}
    assert set(rows) == {"regression", "time_sequence_prediction"}, done.stdout
    for torch_ms, minigpu_ms, ratio, captured_ms, captured_ratio, _, minigpu_mib, _ in \
            rows.values():
        assert float(torch_ms) > 0 and float(minigpu_ms) > 0 and float(captured_ms) > 0
        assert float(ratio) == pytest.approx(float(minigpu_ms) / float(torch_ms), rel=0.1)  # ms rounded
        assert float(captured_ratio) == pytest.approx(float(captured_ms) / float(torch_ms),
                                                      rel=0.1)
        assert float(minigpu_mib) > 0
    assert "geometric mean of the time ratios" in done.stdout
    assert "MISMATCH" not in done.stdout
    for name in rows:  # at least one loss compared, and a guard key captured
        assert re.search(rf"^{name}: [1-9]\d* losses equal; [1-9]\d* guard keys captured",
                         done.stdout, re.M), done.stdout

