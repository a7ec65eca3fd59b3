"""The simulator's switches, read from the environment once at import.

- ``MINIGPU_SIM_CHECKS=0`` turns the sanitizer off (memcheck, initcheck, racecheck: the
  array proxies that observe every load and store; and the argument-type check of
  specialized launches, ``backends/cuda/blocks.py``). Warp intrinsics, blocking barriers,
  synccheck, launch checks, poisoned memory, IEEE math and the shuffled block order stay.
  Default: on.
- ``MINIGPU_SIM_SEED=<int>`` seeds the order in which the blocks of each launch run
  (default 0; the order is a fresh permutation per launch drawn from that seed).
- ``MINIGPU_SIM_FAST=auto|always|0`` chooses how a kernel runs (:mod:`.fast`): ``auto``
  (default) compiles a kernel to machine code once its checked runs have cost about as much as
  compiling it, ``always`` compiles every eligible kernel at its first launch, ``0`` keeps every
  launch on the checked interpreter. Read at each launch (``config.FAST``), so a benchmark may
  switch it in-process.
- ``MINIGPU_STOCK_SIMULATOR=1`` leaves Numba's simulator stock (to compare with it); read by
  ``install()`` when it runs.
"""
import os

CHECKS = os.environ.get("MINIGPU_SIM_CHECKS", "1") != "0"
FAST = os.environ.get("MINIGPU_SIM_FAST", "auto")
SEED = int(os.environ.get("MINIGPU_SIM_SEED", "0"))
