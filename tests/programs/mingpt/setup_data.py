"""Harness file (not upstream): chargpt.py's input.txt, a small text in place of tiny
Shakespeare, with every character of its sampling prompt "O God, O God!" (the adder does not
read it)."""
import numpy as np

rng = np.random.default_rng(0)
words = "O God, God! my lord the king is dead long live and to be or not that question".split()
with open("input.txt", "w") as f:
    for _ in range(40):
        f.write(" ".join(rng.choice(words, 8)) + ".\n")
