"""``python -m minigpu.sanitizer`` and ``pytest -p minigpu.sanitizer`` on programs and test suites
written without minigpu (docs/simulator.md, "Sanitize your own code"): each run is a fresh
process without ``NUMBA_ENABLE_CUDASIM`` in its environment, as a user's shell would start it."""
import os
import subprocess
import sys
import textwrap

import pytest

BUGGY = textwrap.dedent('''
    import sys
    import numpy as np
    from numba import cuda, float32

    @cuda.jit
    def total(out, x):                          # racecheck: should be an atomic add
        out[0] += x[cuda.grid(1)]

    @cuda.jit
    def past_the_end(out):                      # memcheck: thread 3 writes out[4]
        out[cuda.grid(1) + 1] = 1.0

    @cuda.jit
    def unwritten(out):                         # initcheck: s[1] is never written
        s = cuda.shared.array(2, float32)
        s[0] = 1.0
        cuda.syncthreads()
        out[0] = s[1]

    @cuda.jit
    def split_barrier(out):                     # synccheck: two halves wait at two barriers
        if cuda.threadIdx.x < 16:
            cuda.syncthreads()
        else:
            cuda.syncthreads()
        out[cuda.threadIdx.x] = 1.0

    bugs = {
        "race": lambda: total[2, 32](np.zeros(1, np.float32), np.ones(64, np.float32)),
        "oob": lambda: past_the_end[1, 4](np.zeros(4, np.float32)),
        "uninit": lambda: unwritten[1, 1](np.zeros(1, np.float32)),
        "sync": lambda: split_barrier[1, 32](np.zeros(32, np.float32)),
    }
    for name in sys.argv[1:]:
        bugs[name]()
    print("the program ran to its end")
''')

CLEAN = textwrap.dedent('''
    import sys
    import numpy as np
    from numba import cuda

    @cuda.jit
    def add_one(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i] + 1

    out = np.zeros(100, np.float32)
    add_one[2, 64](out, np.arange(100, dtype=np.float32))
    assert (out == np.arange(1, 101)).all()
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
''')


def run(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def programs(tmp_path):
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_every_launch_error_is_reported_and_the_program_goes_on(programs):
    r = run(["-m", "minigpu.sanitizer", "buggy.py", "race", "oob", "uninit", "sync", "race"],
            programs)
    assert r.returncode == 1, r.stderr
    assert "the program ran to its end" in r.stdout       # its own argv, run to its end
    err = r.stderr
    assert "read-after-write race on global array 'out'" in err
    assert "indexed global array 'out' at index 4" in err
    assert "shared array 's' at index 1" in err
    assert "kernel 'split_barrier'" in err
    assert "4 kernels, 5 launches" in err
    for line in ("racecheck  RaceError                     2 errors",
                 "memcheck   OutOfBoundsError              1 error",
                 "initcheck  UninitializedReadError        1 error",
                 "synccheck  SyncError                     1 error",
                 "ERROR SUMMARY: 5 errors"):
        assert line in err, err


def test_tool_selects_which_errors_report(programs):
    r = run(["-m", "minigpu.sanitizer", "--tool", "racecheck", "buggy.py", "race", "oob"],
            programs)
    assert r.returncode == 1
    assert "racecheck  RaceError                     1 error" in r.stderr
    assert "memcheck   OutOfBoundsError              1 ignored (tool not selected)" in r.stderr
    assert "index 4" not in r.stderr                        # not printed: not selected
    r = run(["-m", "minigpu.sanitizer", "--tool", "memcheck", "buggy.py", "race"], programs)
    assert r.returncode == 0, r.stderr
    assert "ERROR SUMMARY: 0 errors" in r.stderr


def test_a_clean_program_exits_with_its_own_status(programs):
    r = run(["-m", "minigpu.sanitizer", "clean.py"], programs)
    assert r.returncode == 0, r.stderr
    assert "1 kernel, 1 launch" in r.stderr and "ERROR SUMMARY: 0 errors" in r.stderr
    assert run(["-m", "minigpu.sanitizer", "clean.py", "3"], programs).returncode == 3


SUITE = textwrap.dedent('''
    import numpy as np
    import pytest
    from numba import cuda

    @cuda.jit
    def total(out, x):
        out[0] += x[cuda.grid(1)]

    @cuda.jit
    def add_one(out, x):
        i = cuda.grid(1)
        out[i] = x[i] + 1

    def test_clean():
        out = np.zeros(64, np.float32)
        add_one[2, 32](out, np.ones(64, np.float32))
        assert (out == 2).all()

    def test_race():
        total[2, 32](np.zeros(1, np.float32), np.ones(64, np.float32))

    def test_expects_an_index_error():          # passes, and the sanitizer still counts it
        with pytest.raises(IndexError):
            add_one[1, 4](np.zeros(2, np.float32), np.ones(4, np.float32))
''')


def test_the_pytest_plugin_reports_and_fails_the_session(tmp_path):
    (tmp_path / "test_kernels.py").write_text(SUITE)
    args = ["-m", "pytest", "-p", "minigpu.sanitizer", "-p", "no:cacheprovider",
            "-p", "no:randomly", "-q", "-c", os.devnull, "--rootdir", str(tmp_path)]
    r = run(args + ["test_kernels.py"], tmp_path)
    assert r.returncode == 1, r.stdout
    out = r.stdout
    assert "1 failed, 2 passed" in out
    assert "2 kernels, 3 launches" in out
    assert "test_kernels.py::test_race (1)" in out
    assert "test_kernels.py::test_expects_an_index_error (1)" in out
    assert "ERROR SUMMARY: 2 errors" in out
    r = run(args + ["test_kernels.py::test_clean"], tmp_path)
    assert r.returncode == 0, r.stdout
    assert "ERROR SUMMARY: 0 errors" in r.stdout
