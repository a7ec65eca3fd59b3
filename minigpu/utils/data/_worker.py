"""DataLoader worker processes (``num_workers > 0``): the pool, the loop each worker runs, and
``get_worker_info`` for the code running in a worker."""
from __future__ import annotations

import numpy as np

from ...random import manual_seed
from ...tensor import Tensor
from .pinning import map_tensors, pin_memory


class WorkerInfo:
    """What :func:`get_worker_info` tells the code running in a worker process: its ``id`` (0 ..
    ``num_workers`` - 1), ``num_workers``, the ``seed`` its generators were seeded with, and its
    copy of the ``dataset``."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process, its :class:`WorkerInfo`; in the main process, None."""
    return _worker_info


class _WorkerFailure:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, worker_id, exc):
        import traceback
        self.worker_id, self.type = worker_id, type(exc)
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        message = (f"Caught {self.type.__name__} in DataLoader worker process "
                   f"{self.worker_id}.\nOriginal {self.text}")
        try:
            error = self.type(message)
        except Exception:  # an exception class whose constructor takes other arguments
            error = RuntimeError(message)
        raise error


def _ship(batch):
    """The batch with its tensors as NumPy arrays, to cross the process boundary (and back)."""
    return map_tensors(lambda t: _Shipped(t.detach().numpy()), batch)


class _Shipped:
    def __init__(self, array):
        self.array = array


def _unship(batch):
    if isinstance(batch, _Shipped):
        return Tensor._from_array(batch.array, "cpu")
    if isinstance(batch, dict):
        return {k: _unship(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_unship(v) for v in batch)
    return batch


def _worker_loop(loader, worker_id, seed, tasks, results, parent):
    """One worker process: seed its generators, run ``worker_init_fn``, then turn batches of
    indices from ``tasks`` into collated batches on ``results`` until told to stop (None) or
    until the main process is gone."""
    global _worker_info
    import os
    import queue
    import random

    try:
        random.seed(seed)
        manual_seed(seed)
        np.random.seed(np.random.SeedSequence([seed % 2 ** 63, worker_id]).generate_state(1))
        _worker_info = WorkerInfo(worker_id, loader.num_workers, seed, loader.dataset)
        failure = None
        if loader.worker_init_fn is not None:
            try:
                loader.worker_init_fn(worker_id)
            except Exception as exc:  # reported with the first batch asked of this worker
                failure = _WorkerFailure(worker_id, exc)
        while True:
            try:
                task = tasks.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the main process died: nobody will ask again
                    return
                continue
            if task is None:
                return
            epoch, index, chunk = task
            if failure is not None:
                results.put((epoch, index, failure))
                continue
            try:
                batch = _ship(loader._fetch(chunk))
            except Exception as exc:
                batch = _WorkerFailure(worker_id, exc)
            results.put((epoch, index, batch))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the main process
        pass                   # handles it and shuts the workers down


class _WorkerPool:
    """``num_workers`` processes loading batches for one DataLoader.

    The main process keeps up to ``prefetch_factor`` batches per worker in flight, handing
    batch i to worker ``i % num_workers``; results come back on one queue in any order and
    are handed out in order. Each worker seeds Python's ``random`` and minigpu's generator
    with ``base_seed + worker_id`` (``base_seed`` drawn from the loader's generator by the
    iterator that starts the pool) and NumPy's from the pair. Workers are daemon processes started with
    ``multiprocessing_context`` (default: the platform's, ``fork`` on Linux); they are
    stopped (asked, then terminated if they do not exit) when an epoch ends without
    ``persistent_workers``, when a worker's error is raised, when the iteration is abandoned
    (``break``, Ctrl-C: the iterator's ``close`` / garbage collection) and at interpreter exit.
    """

    def __init__(self, loader, base_seed):
        import multiprocessing
        import os
        self.loader, self.epoch_count = loader, 0
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.results = context.Queue()
        self.tasks, self.processes = [], []
        for worker_id in range(loader.num_workers):
            tasks = context.Queue()
            process = context.Process(
                target=_worker_loop, daemon=True,
                args=(loader, worker_id, base_seed + worker_id, tasks, self.results,
                      os.getpid()))
            process.start()
            self.tasks.append(tasks)
            self.processes.append(process)

    def alive(self):
        return all(p.is_alive() for p in self.processes)

    def epoch(self, chunks, last=False):
        """A generator over one epoch's batches (``last``: shut down when it is over)."""
        self.epoch_count += 1
        try:
            yield from self._run(self.epoch_count, enumerate(chunks))
        except GeneratorExit:  # abandoned (break): persistent workers stay for the next epoch
            raise
        except BaseException:  # a worker's error, a dead worker, Ctrl-C in the main process
            self.shutdown()
            raise
        finally:
            if last:
                self.shutdown()

    def _run(self, epoch, chunks):
        loader, pending, sent, received = self.loader, {}, 0, 0
        in_flight = loader.prefetch_factor * loader.num_workers
        exhausted = False
        while True:
            while not exhausted and sent - received < in_flight:
                item = next(chunks, None)
                if item is None:
                    exhausted = True
                    break
                index, chunk = item
                self.tasks[index % loader.num_workers].put((epoch, index, chunk))
                sent += 1
            if received == sent:
                return
            while received not in pending:
                got_epoch, index, batch = self._get()
                if got_epoch == epoch:  # (results of an abandoned epoch are dropped)
                    pending[index] = batch
            batch = pending.pop(received)
            received += 1
            if isinstance(batch, _WorkerFailure):
                batch.reraise()
            batch = _unship(batch)
            yield pin_memory(batch) if loader.pin_memory else batch

    def _get(self):
        import queue
        import time
        deadline = time.monotonic() + self.loader.timeout if self.loader.timeout else None
        while True:
            try:
                return self.results.get(timeout=0.1)
            except queue.Empty:
                dead = [p.pid for p in self.processes if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"DataLoader worker (pid(s) "
                                       f"{', '.join(map(str, dead))}) exited unexpectedly")
                if deadline is not None and time.monotonic() > deadline:
                    raise RuntimeError(f"DataLoader timed out after {self.loader.timeout} "
                                       f"seconds")

    def shutdown(self):
        """Ask every worker to stop, wait a little, terminate the ones still running."""
        if not self.processes:
            return
        for tasks, process in zip(self.tasks, self.processes):
            if process.is_alive():
                tasks.put(None)
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()
        self.processes, self.tasks = [], []
        if self.loader._workers is self:
            self.loader._workers = None

    def __del__(self):
        if self.processes:
            self.shutdown()


