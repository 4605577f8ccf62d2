"""Search and play: the match runner and its statistics (:mod:`.match`, :mod:`.statistics`)."""
