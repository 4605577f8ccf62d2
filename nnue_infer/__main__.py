"""``python -m nnue_infer``: the command line."""

import sys

from .cli import main

sys.exit(main())
