"""Exception classes of nnue-infer.

They subclass builtins, so ``except ValueError`` keeps working for callers who
do not care about the details.
"""


#: Characters of user input (a FEN, a move, a line) quoted in an error message at most.
QUOTE_LIMIT = 200


def quote(text: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(text)``, cut to ``limit`` characters of the text with the number left out: a 4 MB
    bad line gives a short message, not an 8 MB one."""
    s = text if isinstance(text, str) else repr(text)
    if len(s) <= limit:
        return repr(s) if isinstance(text, str) else s
    return f"{s[:limit]!r}... ({len(s) - limit} more characters)"


def clip(message: str, limit: int = 2 * QUOTE_LIMIT) -> str:
    """A message from elsewhere (python-chess quotes the whole FEN) cut to ``limit`` characters."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message) - limit} more characters)"


class NnueError(Exception):
    """Base class of every error raised by nnue-infer."""


class NetworkFormatError(NnueError, ValueError):
    """A network file is malformed: bad magic, version, hash, size, tensor or trailing bytes.

    The message names the file, the section and the byte offset, with expected
    and found values.
    """


class NetworkNotFoundError(NnueError, FileNotFoundError):
    """No network file was given and none could be found or extracted; the message says how to get one."""


class InputError(NnueError, OSError):
    """An input file cannot be read to the end: corrupt or truncated gzip / Zstandard data.

    The message names the source (``<stdin>`` for ``-``) and the compression.
    """


class InputKindError(NnueError, ValueError):
    """An input file holds another kind of data than the one asked for (PGN games given as FEN/EPD
    lines, or FENs given as PGN); the message names the file and line."""


class StreamClosedError(NnueError, OSError):
    """Standard input or output is needed but the process was started with it closed
    (``<&-`` / ``>&-``: ``sys.stdin`` / ``sys.stdout`` is None); the message names the stream."""


class PositionError(NnueError, ValueError):
    """A position cannot be represented by the network's features (kings, piece count, pawn ranks)."""


class QuantisationRangeError(NnueError, ValueError):
    """Quantised parameters or activations would overflow their integer type."""


class FenError(NnueError, ValueError):
    """A FEN string is malformed (placement, side to move, castling, en passant or counters).

    For a batch, the message names the row index, the field and the character offset.
    """


class IllegalMoveError(NnueError, ValueError):
    """A move is illegal (or malformed) in the evaluator's current position; the message names
    the move, the position and, for a whole game, the move's index."""


class ConcurrentUseError(NnueError, RuntimeError):
    """An :class:`~nnue_infer.Evaluator` was called while another call on it (from another
    thread) was running; an evaluator is not thread-safe, give each thread its own."""


class NetworkChangedError(NnueError, RuntimeError):
    """The network file of a :func:`nnue_infer.io.distributed.score_files` job holds another network
    than the one the job started with (replaced or rewritten while it ran); the message names the file
    and both SHA-256 digests.  The parts written before are the job's network's."""


class SimdPathError(NnueError, ValueError):
    """``NNUE_INFER_SIMD`` names no instruction-set path, or one whose instructions this CPU
    lacks; the message lists the valid values and the missing features
    (:mod:`nnue_infer.kernels.simd`)."""


class QuantisationWarning(UserWarning):
    """:func:`nnue_infer.quantise` saturated parameters that did not fit their integer type
    (the message names each tensor, the count and the worst value)."""


class TrainingDataError(NnueError, ValueError):
    """A training-data file (``.binpack``, ``.bin``, ``.plain``) is damaged or a row cannot be
    written in its format; the message names the file and the byte offset (or the row)."""


class DatasetFormatError(NnueError, ValueError):
    """A positions file (:mod:`nnue_infer.training.datagen`, ``.npz``) is malformed: missing key, wrong dtype
    or shape, unknown format."""


class KindError(NnueError, ValueError):
    """The training-data kind cannot be told from a file name (or standard output's), or is not
    one of :data:`KINDS`; the message says which and how to name the kind."""


class TrainingError(NnueError, ValueError):
    """Training cannot proceed: bad configuration, unusable data or a diverged loss
    (:mod:`nnue_infer.training`).

    ``field``, when set, names the :class:`~nnue_infer.training.train.TrainConfig` field at fault
    (``nnue-infer train`` turns it into a usage error naming the option)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class MatchError(NnueError, ValueError):
    """A match between engines cannot start: a bad engine command, engine option, opening book, limit or setting;
    the message names the engine, file and line, or option."""
