"""Reading and writing files: training data (and, after the package move, EPD, PGN, Parquet, outputs)."""
