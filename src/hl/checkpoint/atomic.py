"""Atomic file replacement: every file hl writes goes through ``atomic_output``.

The data is written to a temporary file in the target's own folder (so the final rename never
crosses file systems), flushed and fsynced, then renamed over the target, and the folder is
fsynced so the rename itself survives a power cut. A process killed at any point leaves the
previous file untouched: either the old file or the complete new one is there, never a mix.

A killed process cannot remove its temporary file. Each temporary file is named after its
target and its writer's process id (``.model.zip.4242.1a2b3c.hl-tmp``), so the next save of
the same target removes those whose writer is no longer running, and leaves alone those of a
writer that still is.

Replacing a large file spends milliseconds freeing the old file's blocks inside the rename.
The old file is therefore linked to a temporary name of the same kind first, and one
background thread, shared by all saves, unlinks it after the rename: it is started on first
use, takes paths from a queue and is drained at exit (a process killed before it leaves a
temporary file that the next save removes). Nothing accumulates per save.
"""
import atexit
import contextlib
import os
import queue
import re
import secrets
import threading

from .. import errors

_SUFFIX = ".hl-tmp"


def _temp_name(target):
    folder, base = os.path.split(target)
    return os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(3)}{_SUFFIX}")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_temporaries(target):
    """Deletes the temporary files of earlier saves of `target` whose process has died."""
    folder, base = os.path.split(os.path.abspath(target))
    pattern = re.compile(r"\." + re.escape(base) + r"\.(\d+)\.[0-9a-f]+" + re.escape(_SUFFIX) + "$")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder):
    with contextlib.suppress(OSError):  # not every file system lets a folder be fsynced
        fsync_path(folder or ".")


def _replace(tmp, target):
    """os.replace(tmp, target), leaving the freeing of the old file's blocks (milliseconds
    for a large file, inside the rename when it drops the last link) to a background thread:
    the old file gets a second, temporary name first and is unlinked from there."""
    doomed = _temp_name(os.path.abspath(target))
    try:
        os.link(target, doomed)
    except OSError:  # no old file, or a file system without hard links
        doomed = None
    os.replace(tmp, target)
    if doomed is not None:
        _unlinker.put(doomed)


class _Unlinker:
    """One daemon thread unlinking old files from a queue, started on first use (a thread per
    save would keep a finished Thread object per save until exit)."""

    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread = None

    def put(self, path):
        self._queue.put(path)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="hl-unlink",
                                                 daemon=True)
                self._thread.start()

    def _run(self):
        while True:
            path = self._queue.get()
            if path is None:
                return
            with contextlib.suppress(OSError):
                os.unlink(path)

    def drain(self):
        """Waits until every queued file is unlinked (at exit; and for tests)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join()


_unlinker = _Unlinker()
atexit.register(_unlinker.drain)


@contextlib.contextmanager
def atomic_output(target, overwrite=True, what="save"):
    """Yields a temporary path beside `target`; write the whole file there (closing it). On a
    normal exit the file is fsynced and renamed over `target`; on an exception it is removed
    and `target` is left as it was. ``overwrite=False`` refuses an existing target, and never
    replaces one created meanwhile by someone else."""
    target = os.fspath(target)
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise errors.CheckpointIOError(f"{what}: {target}: the folder {folder} does not exist")
    if os.path.isdir(target):
        raise errors.CheckpointError(f"{what}: {target} is a folder; give a file path")
    if not overwrite and os.path.exists(target):
        raise errors.CheckpointError(f"{what}: {target} already exists (overwrite=False)")
    remove_stale_temporaries(target)
    tmp = _temp_name(os.path.abspath(target))
    try:
        try:
            yield tmp
            fsync_path(tmp)
            if overwrite:
                _replace(tmp, target)
            else:
                try:
                    os.link(tmp, target)  # fails if the target appeared since the check above
                except FileExistsError:
                    raise errors.CheckpointError(
                        f"{what}: {target} already exists (overwrite=False)") from None
                os.unlink(tmp)
        except errors.HLError:
            raise
        except OSError as e:  # named after the target: the temporary file means nothing
            raise errors.CheckpointIOError(
                f"{what}: {target}: cannot write it "
                f"({(e.strerror or str(e)).replace(tmp, target)})") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)
