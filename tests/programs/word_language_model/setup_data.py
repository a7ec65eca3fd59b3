"""Harness file (not upstream): a tiny corpus in data/ (train/valid/test.txt) for --data data."""
import os

import numpy as np

rng = np.random.default_rng(0)
words = "the cat dog sat on mat a ran far away and then slept".split()
os.makedirs("data", exist_ok=True)
for name, lines in (("train", 12), ("valid", 4), ("test", 4)):
    with open(os.path.join("data", f"{name}.txt"), "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(words, 7)) + "\n")
