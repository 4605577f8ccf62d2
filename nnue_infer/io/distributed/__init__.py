"""Score datasets on a Dask cluster: EPD / PGN / Parquet / .binpack shards -> a partitioned Parquet dataset.

Needs the ``dask`` extra (``pip install 'nnue-infer[dask]'``: ``dask[distributed,dataframe]``,
``pyarrow`` and the Rust PGN parser).  Nothing else in nnue-infer imports this module.

* :func:`score_files` scores files (globs; plain, gzip or Zstandard) into a directory: one
  ``part-*.parquet`` per task (schema: :func:`nnue_infer.io.parquet.schema`) and, for a task
  with bad rows, ``_errors/part-*.parquet`` (source, line, game, message).  A task is an input
  file, or a range of a large one (:func:`plan_tasks`: uncompressed EPD by line-aligned byte
  range, uncompressed PGN by whole games, Parquet by row groups, an uncompressed ``.binpack`` by whole blocks, which decode
  independently), so a cluster balances and a dead worker loses little.  A bad
  row never stops the job.  Each part is written to a temporary name and renamed, so a part
  that exists is complete: a re-run skips the tasks whose part exists (ranges are recorded in
  the manifest and reused), and a task re-run after a worker died rewrites the same name (no
  duplicated or missing rows; the temporary file of a part a killed worker was writing is removed by a later run,
  :data:`STALE_SECONDS` after it was last written).  ``_nnue_infer.json`` records the network and each input's plan; a re-run
  with another network is refused, and runs into one output plan one at a time (``_nnue_infer.lock``),
  so a concurrent run with other task sizes follows the first run's plan.
* :func:`evaluate_dataframe` adds ``value``, ``cp`` and ``cp_white`` columns to a Dask
  DataFrame of FENs.

Workers get the network *by name* (a path every worker can read, ``default`` or
``stockfish``) and load it once per process (:func:`worker_evaluator`); arrays never travel
with the tasks, and only a small summary returns from each (the client never holds the data).
Each worker is warmed up once (:func:`warm_up`: the network and the compiled kernels,
from the Numba cache that the worker processes of a machine share).  Dask retries the tasks of a worker that died (``distributed.scheduler.allowed-failures``,
3 by default).

The package's modules, one concept each (this module re-exports their public names, the import path
of every one of them): :mod:`.plan` (inputs found, checked and cut into tasks), :mod:`.manifest` (the
dataset directory's manifest, lock and file names), :mod:`.workers` (a worker's network and
threads), :mod:`.task` (one task scored into a part; a worker's warm-up), :mod:`.job` (the job
driver) and :mod:`.dataframe` (a Dask DataFrame scored in place).
"""

from .workers import QUIET_WORKERS, network_identity, usable_cpus, worker_evaluator
from .task import CODECS, ERRORS_DIR, ROW_GROUP_ROWS, Task, part_name, score_batch, score_task, warm_up
from .manifest import LOCK, MANIFEST, STALE_SECONDS, planning
from .plan import (BINPACK_TASK_BYTES, INPUT_KIND_BY_SUFFIX, SPLIT_BYTES, SPLIT_ROWS, TASKS_PER_THREAD, batches,
                   expand_inputs, input_kind, plan_tasks, tasks_of)
from .job import ScoreReport, check_job, run_job, score_files
from .dataframe import evaluate_dataframe

__all__ = ["BINPACK_TASK_BYTES", "CODECS", "ERRORS_DIR", "INPUT_KIND_BY_SUFFIX", "LOCK", "MANIFEST", "QUIET_WORKERS",
           "ROW_GROUP_ROWS", "SPLIT_BYTES", "SPLIT_ROWS", "STALE_SECONDS", "ScoreReport", "TASKS_PER_THREAD", "Task",
           "batches", "check_job", "evaluate_dataframe", "expand_inputs", "input_kind", "network_identity", "part_name",
           "plan_tasks", "planning", "run_job", "score_batch", "score_files", "score_task", "tasks_of", "usable_cpus",
           "warm_up", "worker_evaluator"]
