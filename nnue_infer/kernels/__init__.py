"""Numba kernels: array functions with no knowledge of chess or file formats.

Every kernel is a module-level ``@njit(cache=True)`` function over arrays and
integers, writing into buffers the caller provides.
"""
