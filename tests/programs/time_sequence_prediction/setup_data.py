"""Harness file (not upstream): the sine waves of upstream's generate_sine_wave.py, with fewer
and shorter sequences (N=6, L=40 instead of 100 x 1000), saved as .npy rather than pickled."""
import numpy as np

np.random.seed(2)
T, L, N = 20, 40, 6
x = np.empty((N, L), "int64")
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
np.save("traindata.npy", np.sin(x / 1.0 / T).astype("float64"))
