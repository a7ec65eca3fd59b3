"""Run one corpus program under PyTorch, then under minigpu, and record both runs' losses.

    python tests/programs/lockstep.py OUT.json PROGRAM.py [program options...]

The program imports ``minigpu as torch``. For the PyTorch run an import hook maps ``minigpu``
and every ``minigpu.x`` to ``torch`` / ``torch.x``; for the minigpu run the real package is
imported. Both runs happen in this one process, in a fresh working directory each, so that
Python's and NumPy's global generators (which the programs seed) behave alike; Python's, NumPy's
and PyTorch's generators start from seed 0, so that a run is the same in every test run.

What the harness makes equal, so that the two runs can be compared step by step:

* **Initial weights.** Each module construction at the top level (``Net()``, ``nn.Linear(..)``)
  runs inside ``torch.random.fork_rng``, so that its initialisation leaves PyTorch's global
  generator as it was. When it ends, every module built inside it gets its parameters and
  buffers: PyTorch's run saves them (safetensors, keyed by the order the modules were built),
  minigpu's run loads them into its modules in place.
* **Random draws.** In minigpu's run every random draw is taken from PyTorch's generator with
  the call PyTorch makes for it (``randn``, ``rand``, ``randint``, ``randperm``, ``multinomial``, the in-place
  ``normal_`` / ``uniform_`` fills and ``nn.init``, the dropout and Dropout2d masks, a
  DataLoader's order: its sampler's torch twin, with PyTorch's seeding, a minigpu
  ``Generator`` mirrored by a torch one), and ``manual_seed`` seeds both generators. minigpu's own counter-based generator gives other numbers for the
  same seed; this is the one thing the harness replaces.
* **The accelerator.** Under ``NUMBA_ENABLE_CUDASIM=1`` minigpu has one (the simulated GPU) and
  PyTorch's CPU build has none; so that both runs take the program's accelerator branch,
  PyTorch's run is told it has one, which is its cpu.
* **Losses.** Every ``Tensor.backward()`` on a one-element tensor records its value and the
  device it is on (so that a test can tell a run on ``cuda`` from one that fell back to cpu).

OUT.json gets ``{"torch": [...], "minigpu": [...], "minigpu_devices": [...]}`` (or an
``"error"`` with the traceback of a run that raised).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import runpy
import sys
import tempfile
import traceback
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


class _TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import minigpu.x`` gives ``torch.x`` (the PyTorch run)."""

    def find_spec(self, name, path=None, target=None):
        if name == "minigpu" or name.startswith("minigpu."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("torch" + spec.name[len("minigpu"):])

    def exec_module(self, module):
        pass


class _Run:
    """One run of the program under engine ``name`` ("torch" or "minigpu")."""

    def __init__(self, name, weights_dir):
        self.name, self.weights_dir = name, weights_dir
        self.losses, self.devices, self.depth, self.built, self.roots = [], [], 0, [], 0
        self.undo = []

    # --- patching helpers -------------------------------------------------------------------
    def patch(self, owner, attr, value):
        had = attr in vars(owner)
        old = vars(owner).get(attr)
        setattr(owner, attr, value)
        self.undo.append(lambda: setattr(owner, attr, old) if had else delattr(owner, attr))

    def restore(self):
        for undo in reversed(self.undo):
            undo()

    # --- losses -----------------------------------------------------------------------------
    def record_losses(self, tensor_cls):
        run, backward = self, tensor_cls.backward

        def recording_backward(self, *args, **kwargs):
            if self.numel() == 1:
                run.losses.append(float(self.detach().cpu().reshape(-1)[0].item()))
                run.devices.append(self.device.type)
            return backward(self, *args, **kwargs)

        self.patch(tensor_cls, "backward", recording_backward)

    # --- module construction ----------------------------------------------------------------
    def wrap_construction(self, module_cls):
        """Every nn.Module subclass (now and later) builds under fork_rng at the top level."""
        run = self
        wrapped = set()

        def wrap(cls):
            if cls in wrapped or "__init__" not in vars(cls):
                return
            wrapped.add(cls)
            init = vars(cls)["__init__"]

            def building_init(self, *args, **kwargs):
                run.depth += 1
                try:
                    if run.depth == 1:
                        with torch.random.fork_rng(devices=[]):
                            init(self, *args, **kwargs)
                    else:
                        init(self, *args, **kwargs)
                finally:
                    run.depth -= 1
                if not any(m is self for m in run.built):
                    run.built.append(self)
                if run.depth == 0:
                    run.share_weights()

            building_init.__wrapped__ = init
            self.patch(cls, "__init__", building_init)

        def all_subclasses(cls):
            for sub in cls.__subclasses__():
                yield sub
                yield from all_subclasses(sub)

        wrap(module_cls)
        for cls in list(all_subclasses(module_cls)):
            wrap(cls)
        hook = vars(module_cls).get("__init_subclass__")

        def init_subclass(cls, **kwargs):
            if hook is not None:
                hook.__func__(cls, **kwargs)
            wrap(cls)

        self.patch(module_cls, "__init_subclass__", classmethod(init_subclass))

    def share_weights(self):
        """PyTorch's run saves the weights of the modules just built; minigpu's loads them."""
        from safetensors.numpy import load_file, save_file
        path = os.path.join(self.weights_dir, f"root{self.roots}.safetensors")
        self.roots += 1
        modules, self.built = self.built, []
        if self.name == "torch":
            arrays = {f"{i}.{name}": t.detach().cpu().numpy().copy()
                      for i, m in enumerate(modules)
                      for name, t in self._own_state(m)}
            save_file(arrays, path)
            return
        import minigpu
        arrays = load_file(path)
        with minigpu.no_grad():
            for i, m in enumerate(modules):
                for name, t in self._own_state(m):
                    t.copy_(minigpu.tensor(arrays[f"{i}.{name}"]).to(t.device))

    @staticmethod
    def _own_state(module):
        for table in ("_parameters", "_buffers"):
            for name, t in vars(module)[table].items():
                if t is not None:
                    yield name, t


def _torch_random_draws(run):
    """minigpu's random functions, drawing from PyTorch's generator as PyTorch would."""
    import minigpu
    from minigpu import creation
    from minigpu.nn import init, layers
    from minigpu.ops import normalization, sampling
    from minigpu.utils import data

    def to_mg(t, device):
        return minigpu.from_numpy(t.numpy().copy()).to(device)

    def torch_dtype(dtype):
        return getattr(torch, np.dtype(dtype).name)

    def random(kind, size, dtype, device, requires_grad, generator):
        shape = creation._shape(size)
        draw = torch.randn if kind == "randn" else torch.rand
        t = to_mg(draw(shape, dtype=torch_dtype(dtype or np.float32)),
                  creation._device(device))
        return t.requires_grad_(requires_grad) if requires_grad else t

    def randint(low, high=None, size=(), dtype=None, device=None, generator=None):
        if high is None or isinstance(high, (tuple, list)):
            low, high, size = 0, low, size if high is None else high
        return to_mg(torch.randint(low, high, tuple(size)), creation._device(device))

    def randperm(n, device=None, generator=None):
        return to_mg(torch.randperm(int(n), generator=mirror(generator)),
                     creation._device(device))

    def multinomial(input, num_samples, replacement=False, *, generator=None):
        weights = torch.from_numpy(input.detach().cpu().numpy().copy())
        return to_mg(torch.multinomial(weights, num_samples, replacement,
                                       generator=mirror(generator)), input.device)

    def fill(torch_fn):
        def in_place(tensor, *args, generator=None, **kwargs):
            t = torch.from_numpy(tensor.detach().cpu().numpy().copy())
            torch_fn(t, *args, **kwargs)
            with minigpu.no_grad():
                tensor.copy_(to_mg(t, tensor.device))
            return tensor
        return in_place

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        mask = torch.nn.functional.dropout(torch.ones(tuple(input.shape)), p, True)
        return input * to_mg(mask, input.device).to(input.dtype)

    def manual_seed(seed):
        torch.manual_seed(seed)
        return minigpu_manual_seed(seed)

    def feature_dropout(input, p, training):
        if not training or p == 0.0:
            return input
        with warnings.catch_warnings():  # (the 2-D input warning)
            warnings.simplefilter("ignore")
            mask = torch.nn.functional.dropout2d(torch.ones(tuple(input.shape)), p, True)
        return input * to_mg(mask, input.device).to(input.dtype)

    mirrors = {}  # id(minigpu Generator) -> (it, the torch.Generator standing in for it)

    def mirror(generator):
        if generator is None:
            return None
        if id(generator) not in mirrors:
            mirrors[id(generator)] = (generator,
                                      torch.Generator().manual_seed(generator.initial_seed()))
        return mirrors[id(generator)][1]

    def generator_manual_seed(generator, seed):
        seeded = generator_seed(generator, seed)
        mirror(generator).manual_seed(seed)
        return seeded

    def torch_sampler(s):
        """The torch sampler drawing what ``s`` (a minigpu sampler) stands for."""
        tud = torch.utils.data
        if isinstance(s, data.BatchSampler):
            return tud.BatchSampler(torch_sampler(s.sampler), s.batch_size, s.drop_last)
        if isinstance(s, data.SequentialSampler):
            return tud.SequentialSampler(range(len(s)))
        if isinstance(s, data.RandomSampler):
            return tud.RandomSampler(range(len(s.data_source)), s.replacement,
                                     s._num_samples, mirror(s.generator))
        if isinstance(s, data.SubsetRandomSampler):
            return tud.SubsetRandomSampler(s.indices, mirror(s.generator))
        if isinstance(s, data.WeightedRandomSampler):
            return tud.WeightedRandomSampler(s.weights.tolist(), s.num_samples, s.replacement,
                                             mirror(s.generator))
        if isinstance(s, data.DistributedSampler):
            torch_s = tud.DistributedSampler(range(len(s.dataset)), s.num_replicas, s.rank,
                                             s.shuffle, s.seed, s.drop_last)
            torch_s.set_epoch(s.epoch)
            return torch_s
        return s  # the program's own sampler: plain Python over indices

    def batches(loader):
        """The epoch's indices as PyTorch's DataLoader draws them (its workers' base seed
        first, then the sampler's order)."""
        batched = loader.batch_sampler is not None
        how = (dict(batch_sampler=torch_sampler(loader.batch_sampler)) if batched
               else dict(batch_size=None, sampler=torch_sampler(loader.sampler)))
        order = torch.utils.data.DataLoader(range(len(loader.dataset)), **how,
                                            generator=mirror(loader.generator),
                                            collate_fn=lambda batch: batch)
        for chunk in order:
            yield np.asarray(chunk) if batched else int(chunk)

    minigpu_manual_seed = minigpu.random.manual_seed
    generator_seed = minigpu.Generator.manual_seed
    run.patch(minigpu.Generator, "manual_seed", generator_manual_seed)
    swaps = [(minigpu_manual_seed, manual_seed), (creation._random, random), (creation.randint, randint),
             (creation.randperm, randperm), (sampling.multinomial, multinomial),
             (normalization.dropout, dropout),
             (layers.feature_dropout, feature_dropout),
             (creation.uniform_, fill(torch.Tensor.uniform_)),
             (creation.normal_, fill(torch.Tensor.normal_))]
    swaps += [(getattr(init, name), fill(getattr(torch.nn.init, name)))
              for name in init.__all__ if name.endswith("_") and name not in
              ("constant_", "zeros_", "ones_")]
    for old, new in swaps:  # in every minigpu module, and the Tensor methods set by the ops
        for module in [*sys.modules.values(), minigpu.Tensor]:
            if getattr(module, "__name__", "").startswith("minigpu") or module is minigpu.Tensor:
                for attr, value in list(vars(module).items()):
                    if value is old:
                        run.patch(module, attr, new)
    run.patch(data.DataLoader, "_batches", batches)


def _accelerator_is_the_cpu(run):
    """PyTorch's run takes the program's accelerator branch too, on its cpu (the minigpu run
    has one, the simulated GPU): the branch also sets DataLoader options (``shuffle``,
    ``num_workers``) that change the batches. torch's private modules (``torch._dynamo``,
    which would look for the accelerator's current stream when ``torch.compile`` traces) and
    ``torch.accelerator``'s own functions get the true answers."""

    def to_the_program(name, answer):
        real = getattr(torch.accelerator, name)

        def answering(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("torch._") or caller == "torch.accelerator":
                return real(*args, **kwargs)
            return answer

        run.patch(torch.accelerator, name, answering)

    to_the_program("is_available", True)
    to_the_program("current_accelerator", torch.device("cpu"))
    to_the_program("device_count", 1)
    loader_init = torch.utils.data.DataLoader.__init__

    def unpinned_init(self, *args, pin_memory=False, **kwargs):  # nothing to pin to
        loader_init(self, *args, **kwargs)

    run.patch(torch.utils.data.DataLoader, "__init__", unpinned_init)


def _run_program(name, program, argv, weights_dir):
    """Run ``program`` under engine ``name``; the run (its losses and their devices), or
    raises with its traceback."""
    run = _Run(name, weights_dir)
    saved_modules = {k: v for k, v in sys.modules.items()
                     if k == "minigpu" or k.startswith("minigpu.")}
    alias = _TorchAlias()
    try:
        if name == "torch":
            for k in saved_modules:
                del sys.modules[k]
            sys.meta_path.insert(0, alias)
            run.record_losses(torch.Tensor)
            run.wrap_construction(torch.nn.Module)
            if SIMULATOR:
                _accelerator_is_the_cpu(run)
        else:
            import minigpu
            run.record_losses(minigpu.Tensor)
            run.wrap_construction(minigpu.nn.Module)
            _torch_random_draws(run)
        with tempfile.TemporaryDirectory() as cwd, _program_context(program, argv, cwd):
            runpy.run_path(program, run_name="__main__")
        return run
    finally:
        run.restore()
        if alias in sys.meta_path:
            sys.meta_path.remove(alias)
        for k in [k for k in sys.modules if k == "minigpu" or k.startswith("minigpu.")]:
            del sys.modules[k]
        sys.modules.update(saved_modules)


@contextlib.contextmanager
def _program_context(program, argv, cwd):
    """sys.argv, sys.path[0] and the working directory as ``python program argv`` has them;
    the program's own modules (and fakevision) are forgotten afterwards."""
    import random
    old_argv, old_path, old_cwd = sys.argv, list(sys.path), os.getcwd()
    before = set(sys.modules)
    random.seed(0)
    np.random.seed(0)
    setup = os.path.join(os.path.dirname(program), "setup_data.py")
    try:
        os.chdir(cwd)
        if os.path.exists(setup):
            runpy.run_path(setup, run_name="__main__")
        sys.argv = [program] + list(argv)
        sys.path[:0] = [os.path.dirname(program), HERE]
        yield
    except SystemExit as exit:
        if exit.code not in (None, 0):
            raise
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        os.chdir(old_cwd)
        for k in set(sys.modules) - before:
            if not (k == "minigpu" or k.startswith(("minigpu.", "torch", "numba", "llvmlite"))):
                del sys.modules[k]


def main():
    out_path, program, *argv = sys.argv[1:]
    program = os.path.abspath(program)
    # PyTorch seeds its generator from the OS in each process: a program that never calls
    # manual_seed (regression) would draw other data in every test run
    torch.manual_seed(0)
    result, start = {}, torch.random.get_rng_state()
    with tempfile.TemporaryDirectory() as weights:
        for name in ("torch", "minigpu"):
            torch.random.set_rng_state(start)
            try:
                run = _run_program(name, program, argv, weights)
                result[name] = run.losses
                result[f"{name}_devices"] = run.devices
            except BaseException:
                result["error"] = f"{name} run: " + traceback.format_exc()
                break
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
