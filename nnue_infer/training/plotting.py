"""matplotlib, imported only by the commands that draw (``crosscheck --plot``, ``train``'s ``loss.png``).

matplotlib (with pillow and fonttools) is the optional ``plot`` extra; a missing install gives
one message saying what to install.
"""

from __future__ import annotations

#: How to get matplotlib.
INSTALL_HINT = "plots need matplotlib: pip install 'nnue-infer[plot]'"


def pyplot():
    """``matplotlib.pyplot`` with the non-interactive Agg backend (PNG files).

    Raises
    ------
    ImportError
        matplotlib is not installed; the message says which extra to install.
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
