"""The output folder's guards: one compile at a time (a lock file), and SIGINT/SIGTERM held while
files move in, so the folder is never left half switched."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

LOCK = ".sparkc.lock"
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def same_file(fd: int, path: Path) -> bool:
    try:
        named = path.lstat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


class Lock:
    """The exclusive lock on OUT/.sparkc.lock, deleted by its holder before it is let go."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / LOCK
        self.fd: int | None = None
        while self.fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # waits for a compile into the same folder
                if same_file(fd, self.path):
                    self.fd = fd
                    return
            except BaseException:
                # Interrupted while waiting: delete the file only if nobody else holds it.
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if same_file(fd, self.path):
                        self.path.unlink()
                os.close(fd)
                raise
            os.close(fd)  # the holder deleted it meanwhile: lock the new one

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            os.close(self.fd)
            self.fd = None


@contextlib.contextmanager
def shared_lock(out_dir: Path) -> Iterator[None]:
    """For reading: wait for a compile that holds the lock; never creates the lock file."""
    path = out_dir / LOCK
    fd: int | None = None
    while fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            break  # no compile is writing
        fcntl.flock(fd, fcntl.LOCK_SH)
        if not same_file(fd, path) and path.exists():
            os.close(fd)  # the holder deleted it and another compile made a new one: wait for that
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While emit runs, SIGTERM raises KeyboardInterrupt as SIGINT does, so that the cleanup runs for it too.

    Left alone where SIGTERM already has a handler or is ignored, and off the main thread (which gets signals).
    """
    install = (
        threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )
    if install:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Block SIGINT and SIGTERM for the block; one that arrives meanwhile is delivered when it ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
