"""Where dr-scale keeps generated data and spilled parts: ``$DR_SCALE_CACHE``, else ``~/.cache/dr-scale``.

Spill folders (:func:`spill_workspace`) follow the pattern of Dask's own worker scratch folders
(``distributed.diskutils.WorkSpace``): each ``dr-scale-spill-<id>`` folder has a lock file beside it,
``dr-scale-spill-<id>.lock``, locked (``flock``) by the run that owns the folder for as long as it runs
and holding its host and process id. The run removes its folder on every exit it survives (an error,
Ctrl-C, SIGTERM — which the command turns into an interrupt); a run killed outright (SIGKILL, the
machine's OOM killer) leaves it, and the next run that spills into the same place removes every folder
whose lock is free and whose owner is gone (another host, or a process id no longer alive here).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import time
import uuid

CACHE_ENV = "DR_SCALE_CACHE"
SPILL_PREFIX, LOCK_EXT = "dr-scale-spill-", ".lock"
_GLOBAL_LOCK = "dr-scale-spill.global.lock"
REMOVE_ATTEMPTS = 20  # about 10 s of retries in all


def cache_root(configured: str = "") -> str:
    """The cache folder: ``configured``, else $DR_SCALE_CACHE, else ~/.cache/dr-scale."""
    return configured or os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "dr-scale")


def spill_root(configured_cache: str = "") -> str:
    """Where ``spill = "disk"`` puts its temporary folders: ``<cache>/spill`` (the system's temporary
    directory may be a RAM-backed tmpfs)."""
    return os.path.join(cache_root(configured_cache), "spill")


def _flock(fd: int, blocking: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


@contextlib.contextmanager
def _global_lock(root: str, blocking: bool = True):
    """The folder-wide lock under which lock files are created, and listed for purging (as Dask's
    ``global.lock``): a purge never sees a lock file that its owner has not locked yet. Yields
    whether it was taken."""
    fd = os.open(os.path.join(root, _GLOBAL_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield _flock(fd, blocking)
    finally:
        os.close(fd)  # releases the lock


def owner_record() -> dict:
    """This process as the owner of a folder it writes: ``{"host": …, "pid": …}`` (a spill folder's lock file, an
    import's staging folder)."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (another user's live process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def purge_stale_spill(root: str) -> list[str]:
    """Remove the spill folders in ``root`` whose owner is gone; return their paths.

    A folder is stale when its lock file can be locked (its owner holds it while alive) and the
    owner recorded in it is another host or a process id no longer alive on this one. Folders
    without a lock file are left alone: they are not this scheme's to judge.
    """
    if not os.path.isdir(root):
        return []
    with _global_lock(root, blocking=False) as taken:
        if not taken:
            return []  # another run is creating or purging: it will do
        candidates = [n for n in os.listdir(root) if n.startswith(SPILL_PREFIX) and n.endswith(LOCK_EXT)]
        purged = []
        for name in candidates:
            lock_path = os.path.join(root, name)
            try:
                fd = os.open(lock_path, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if not _flock(fd, blocking=False):
                    continue  # its owner is running
                try:
                    owner = json.loads(os.read(fd, 4096) or b"{}")
                except ValueError:
                    owner = {}
                if owner.get("host") == socket.gethostname() and process_alive(int(owner.get("pid", -1))):
                    continue  # unlocked but its process lives (a lock on a filesystem without flock): keep
                folder = lock_path[: -len(LOCK_EXT)]
                shutil.rmtree(folder, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock_path)
                purged.append(folder)
            finally:
                os.close(fd)
    return purged


@contextlib.contextmanager
def spill_workspace(root: str):
    """A fresh ``dr-scale-spill-<id>`` folder in ``root``, owned (locked) by this run, removed on exit.

    Stale folders of dead runs are purged first (:func:`purge_stale_spill`).
    """
    os.makedirs(root, exist_ok=True)
    purge_stale_spill(root)
    folder = os.path.join(root, f"{SPILL_PREFIX}{uuid.uuid4().hex[:16]}")
    lock_path = folder + LOCK_EXT
    with _global_lock(root):
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
        _flock(fd, blocking=True)
        os.write(fd, json.dumps(owner_record()).encode())
        os.mkdir(folder)
    try:
        yield folder
    finally:
        # After an interrupt, tasks still running on the local scheduler's threads may write a file or two
        # while the folder is removed: retry a moment. Should the folder outlive that, its lock file stays:
        # unlocked when this process exits, the next run purges it.
        for attempt in range(REMOVE_ATTEMPTS):
            shutil.rmtree(folder, ignore_errors=True)
            if not os.path.exists(folder):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock_path)
                break
            time.sleep(0.05 * (attempt + 1))
        os.close(fd)
