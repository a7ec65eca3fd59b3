"""Harness file (not upstream): data/mnist/mnist.pkl.gz as nn_tutorial.py reads it (the pickled
((x_train, y_train), (x_valid, y_valid), (x_test, y_test)) NumPy arrays of deeplearning.net's
MNIST, rows of 784 floats in [0, 1) and int64 labels), small and synthetic, so that the
program finds the file and downloads nothing."""
import gzip
import os
import pickle

import numpy as np

rng = np.random.default_rng(0)


def split(n):
    return rng.random((n, 784), dtype=np.float32), rng.integers(0, 10, n).astype(np.int64)


os.makedirs(os.path.join("data", "mnist"), exist_ok=True)
with gzip.open(os.path.join("data", "mnist", "mnist.pkl.gz"), "wb") as f:
    pickle.dump((split(64), split(32), split(16)), f)
