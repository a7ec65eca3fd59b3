"""Python subprocesses a test starts (``subprocess.run([sys.executable, "-c", code])``, as
numba-cuda's print tests do) import minigpu too in the ``minigpu`` runs: ``tools/outside`` is
on their ``PYTHONPATH``, and Python imports this module at startup."""
import os

if os.environ.get("MINIGPU_OUTSIDE") == "minigpu":
    import minigpu  # noqa: F401  (installs the simulator upgrade)
