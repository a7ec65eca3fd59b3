"""The simulator's switches, read from the environment once at import.

- ``MINIGPU_SIM_CHECKS=0`` turns the sanitizer off (memcheck, initcheck, racecheck: the
  array proxies that observe every load and store; and the argument-type check of
  specialized launches, ``backends/cuda/blocks.py``). Warp intrinsics, blocking barriers,
  synccheck, launch checks, poisoned memory, IEEE math and the shuffled block order stay.
  Default: on.
- ``MINIGPU_SIM_SEED=<int>`` seeds the order in which the blocks of each launch run
  (default 0; the order is a fresh permutation per launch drawn from that seed).
- ``MINIGPU_SIM_FAST=0|auto|always`` chooses how a kernel runs (:mod:`.compiled`):
  ``auto`` (default) compiles a kernel once its checked launches have cost about what a
  compile costs, or at its first launch when the disk cache (:mod:`.compiled_cache`,
  ``MINIGPU_SIM_CACHE``) holds it; ``always`` compiles every eligible kernel at its first
  launch; ``0`` keeps every launch on the checked interpreter. A compiled launch that
  suspects anything runs again on the checked path, which gives the verdict. Read at each
  launch (``config.FAST``), so a benchmark may switch it in-process.
- ``MINIGPU_SIM_STRICT=1`` (strict mode, for learners and graders) also reports what the CUDA
  programming guide calls undefined but Volta and later GPUs complete: a block barrier that
  threads which have exited never reached (an early ``return`` before ``syncthreads()``, or a
  barrier inside a branch or loop whose condition differs between threads). Default: off.
  Read at each barrier (``config.STRICT``), so a program may switch it in-process:
  ``minigpu.simulator.config.STRICT = True``.
- ``MINIGPU_SIM_BACKGROUND=<seconds>|0``: under ``auto``, a kernel whose checked launches
  cost this much (default 2 s; the running launch's predicted whole counts) starts compiling in
  a forked process that fills the disk cache while the checked path serves, and switches when
  it is done; ``0`` turns that off (the test suite does, to keep its kernels on the checked
  path and its CPUs its own).
- ``MINIGPU_STOCK_SIMULATOR=1`` leaves Numba's simulator stock (to compare with it); read by
  ``install()`` when it runs.
"""
import os

CHECKS = os.environ.get("MINIGPU_SIM_CHECKS", "1") != "0"
FAST = os.environ.get("MINIGPU_SIM_FAST", "auto")
BACKGROUND = float(os.environ.get("MINIGPU_SIM_BACKGROUND", "2"))
SEED = int(os.environ.get("MINIGPU_SIM_SEED", "0"))
STRICT = os.environ.get("MINIGPU_SIM_STRICT", "0") == "1"
