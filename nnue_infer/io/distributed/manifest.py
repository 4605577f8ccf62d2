"""The dataset directory's own files: the manifest (``_nnue_infer.json``: the network and each input's
plan), the lock held while a run checks and plans (:func:`planning`), the names of the parts and the
removal of a dead writer's temporary files.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import threading
from collections.abc import Iterator

from .task import ERRORS_DIR
from .workers import network_identity

log = logging.getLogger("nnue_infer.io")


MANIFEST = "_nnue_infer.json"


def _check_manifest(out_dir: str, network: str, identity: dict | None = None) -> None:
    """Create ``out_dir`` and its manifest (written atomically), or check that an existing one names the same
    network.  The network is read first (``identity``: :func:`network_identity`, computed when not given):
    a network that cannot be read creates nothing."""
    if identity is None:
        identity = network_identity(network)
    os.makedirs(out_dir, exist_ok=True)
    if not _refuse_by_manifest(out_dir, network, identity):
        _write_manifest(os.path.join(out_dir, MANIFEST), identity | {"schema": "nnue_infer.parquet.schema"})


def _refuse_by_manifest(out_dir: str, network: str, identity: dict) -> bool:
    """``ValueError`` when the dataset directory ``out_dir`` cannot take results of ``network`` (``identity``: its
    :func:`network_identity`): its manifest names another network or version, is damaged, or is missing beside
    parts.  Reads only; returns whether the manifest exists (``False`` also for no directory)."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.exists(path) and os.path.isdir(out_dir):
        parts = sorted(n for n in os.listdir(out_dir) if _PART.fullmatch(n))
        if parts:  # their network and plans are unknown: new plans would score rows again under other names
            raise ValueError(f"{out_dir} holds parts ({', '.join(parts[:2])}{', ...' if len(parts) > 2 else ''}) "
                             f"but no manifest ({MANIFEST}, deleted?): the network and the task plans they were "
                             "scored with are unknown, so a run could write their rows again; use another output "
                             "directory, or delete the parts to score again")
    if os.path.exists(path):
        old = _read_manifest(path)
        if old.get("network") != network:
            raise ValueError(f"{out_dir} holds results of network {old.get('network')!r}, not {network!r}: "
                             "use another output directory")
        if old.get("network_sha256") != identity["network_sha256"]:
            was = ("an unrecorded version of it (a manifest of an older nnue-infer)" if "network_sha256" not in old
                   else f"other parameters (SHA-256 {old['network_sha256'][:12]}..., now "
                        f"{identity['network_sha256'][:12]}...: the file was replaced, or the package updated)")
            raise ValueError(f"{out_dir} holds results of {network!r} with {was}: use another output directory")
        return True
    return False


def _read_manifest(path: str) -> dict:
    """The manifest ``path`` (:func:`_check_manifest`, :func:`plan_tasks`); ``ValueError`` naming it and what is
    wrong when it is not one nnue-infer wrote (cut short, edited, another program's file): a run neither guesses
    the plans of a damaged manifest nor writes over it."""
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
        problem = _manifest_problem(manifest)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"not JSON ({exc})"
    if problem:
        raise ValueError(f"{path}: {problem}: not a manifest as nnue-infer writes it (damaged or edited), so the "
                         "plans of the parts beside it are unknown: use another output directory, or delete "
                         f"{os.path.dirname(path) or '.'} to score again")
    return manifest


def _manifest_problem(manifest) -> str | None:
    """What makes the JSON value ``manifest`` no manifest (its shape: :func:`plan_tasks`), or ``None``."""
    def integer(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, not an object"
    for key in ("network", "network_repr", "network_sha256", "schema"):
        if key in manifest and not isinstance(manifest[key], str):
            return f"{key!r} is not a string"
    for key in ("ranges", "sizes", "mtimes"):
        if not isinstance(manifest.get(key, {}), dict):
            return f"{key!r} is not an object"
    for key in ("sizes", "mtimes"):
        for name, value in manifest.get(key, {}).items():
            if not integer(value):
                return f"{key!r} of {name!r} is not an integer"
    for name, plan in manifest.get("ranges", {}).items():
        ranges = plan.get("ranges") if isinstance(plan, dict) else None
        if not (isinstance(ranges, list) and ranges and integer(plan.get("size"))
                and all(isinstance(r, list) and 2 <= len(r) <= 4 and all(map(integer, r)) for r in ranges)):
            return f"the plan of {name!r} is not a size and a list of ranges of integers"
    return None


def _write_manifest(path: str, manifest: dict) -> None:
    """Write the manifest ``path`` atomically (a temporary file of this process, then a rename)."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(manifest))  # one write (json.dump writes each token on its own)
    os.replace(tmp, path)


#: The lock file of an output directory: held while a run checks and plans (:func:`planning`).
LOCK = "_nnue_infer.lock"

#: Names of the parts :func:`score_files` writes (:func:`part_name`).
_PART = re.compile(r"part-.*-[0-9a-f]{12}(-b\d+)?\.parquet", re.S)

#: Names of the files :func:`score_files` writes into a dataset directory (:func:`expand_inputs` passes over them):
#: parts, the manifest (and its temporary names) and the lock.
_OWN_FILE = re.compile(rf"{_PART.pattern}|{re.escape(MANIFEST)}(\.tmp-.*)?|{re.escape(LOCK)}", re.S)

#: Temporary files of parts (:func:`nnue_infer.inputs.replacing`) and of the manifest (:func:`_write_manifest`).
_TEMPORARY = re.compile(rf"\.{_PART.pattern}\.tmp-\d+-\d+|{re.escape(MANIFEST)}\.tmp-\d+-\d+", re.S)

#: Seconds after which a temporary file of a dataset directory is a dead writer's (a worker killed while it wrote a
#: part) and a run into the directory removes it (:func:`_remove_stale_temporaries`): a live writer's exists for the
#: one call that writes a part put together in memory.
STALE_SECONDS = 600


def _remove_stale_temporaries(out_dir: str) -> list[str]:
    """Remove the temporary files (:data:`_TEMPORARY`) of ``out_dir`` and its errors directory last written more than
    :data:`STALE_SECONDS` ago: those of writers that died (readers skip them, being hidden, but they took the disk
    space of a part each).  Returns the paths removed (a warning names how many and the first)."""
    import time

    removed = []
    now = time.time()
    for directory in (out_dir, os.path.join(out_dir, ERRORS_DIR)):
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):  # removed by another run first, or not ours to remove: left
                if _TEMPORARY.fullmatch(name) and os.path.isfile(path) and not os.path.islink(path) \
                        and now - os.stat(path).st_mtime > STALE_SECONDS:
                    os.remove(path)
                    removed.append(path)
    if removed:
        log.warning("removed %d temporary file(s) of writers that died (killed workers), e.g. %s", len(removed),
                    removed[0])
    return removed


@contextlib.contextmanager
def planning(out_dir: str) -> Iterator[None]:
    """Hold ``out_dir``'s lock (:data:`LOCK`, created with the directory) while the block reads and writes the
    manifest: runs into one output plan one after another, so a second run follows the first one's plan
    (ranges and whole inputs recorded in the manifest) instead of planning other tasks for the same rows.
    ``flock`` where there is one (every open of the lock file excludes the others, threads too), else
    ``msvcrt.locking``; on a file system that cannot lock (``ENOLCK``, ``EOPNOTSUPP``: some network file
    systems) runs go unlocked, as before there was a lock."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, LOCK), "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
            return
        try:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("waiting for another run planning into %s (it holds %s)", out_dir, LOCK)
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
