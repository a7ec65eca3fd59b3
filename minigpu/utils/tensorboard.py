"""``minigpu.utils.tensorboard.SummaryWriter`` ~ ``torch.utils.tensorboard.SummaryWriter``.

As in torch, it needs the ``tensorboard`` package (``pip install tensorboard``): the events are
written by that package's ``EventFileWriter`` into ``log_dir`` (default
``runs/<date>_<host><comment>``), where ``tensorboard --logdir runs`` shows them. minigpu
tensors are converted to Python numbers first. Without the package, importing this module
raises an ImportError that names it, as ``import torch.utils.tensorboard`` does.

Written: ``add_scalar`` (the call training loops make), ``add_scalars`` (several curves on one
chart: as torch, one event file per curve, in ``<log_dir>/<main_tag>_<tag>``), ``flush``,
``close``, ``with``.
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np

from ..tensor import Tensor

try:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError as e:
    raise ImportError("minigpu.utils.tensorboard needs the `tensorboard` package, as "
                      "torch.utils.tensorboard does: pip install tensorboard") from e


class SummaryWriter:
    """Write scalars for TensorBoard into an event file in ``log_dir``."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self._options = (max_queue, flush_secs, filename_suffix)
        self._writers = {self.log_dir: EventFileWriter(self.log_dir, *self._options)}

    def get_logdir(self):
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None,
                   new_style=False, double_precision=False):
        """Record ``scalar_value`` (a number, a one-element tensor or array) under ``tag``."""
        self._write(self.log_dir, tag, scalar_value, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Record each ``{tag: value}`` under ``main_tag``, in the event file of its own
        directory ``<log_dir>/<main_tag>_<tag>`` (``/`` in ``main_tag`` becomes ``_``), as torch:
        TensorBoard draws them as curves of one chart."""
        walltime = time.time() if walltime is None else walltime
        for tag, scalar_value in tag_scalar_dict.items():
            directory = self.log_dir + "/" + main_tag.replace("/", "_") + "_" + tag
            self._write(directory, main_tag, scalar_value, global_step, walltime)

    def _write(self, directory, tag, scalar_value, global_step, walltime):
        if isinstance(scalar_value, Tensor):
            scalar_value = scalar_value.item()
        value = float(np.asarray(scalar_value).item())
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
        if global_step is not None:
            event.step = int(global_step)
        if directory not in self._writers:
            self._writers[directory] = EventFileWriter(directory, *self._options)
        self._writers[directory].add_event(event)

    def flush(self):
        for writer in self._writers.values():
            writer.flush()

    def close(self):
        for writer in self._writers.values():
            writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
