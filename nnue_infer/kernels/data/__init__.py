"""Data-format kernels: training-data containers (binpack, .bin, .plain), EPD, CSV/JSON text, LEB128.
"""
