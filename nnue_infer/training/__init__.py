"""Training: the reference trainer's companions (the fast trainer, its Numba kernels)."""
