"""Playing chess with any network: the search engine (:mod:`.engine`) and its front ends.

The inference core never imports this package; its compiled parts are in
:mod:`nnue_infer.kernels.search`.
"""

from .engine import Engine, SearchInfo, SearchResult
from .perft import perft

__all__ = ["Engine", "SearchInfo", "SearchResult", "perft"]
