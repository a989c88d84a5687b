"""The run store's writer lock without ``fcntl`` (Windows): ``msvcrt``'s lock of the lock
file's first byte, waited for while another writer holds it; before, no lock at all, and
two writers of one store could lose each other's statuses (docs/architecture.md)."""

from __future__ import annotations

import errno
import sys
import types

from paprof.read import store


def test_without_fcntl_the_store_takes_msvcrts_lock(tmp_path, monkeypatch):
    calls = []
    held_by_another = [2]  # the first two tries find it held (each try: 10 s on Windows)

    def locking(fd, mode, nbytes):
        if mode == fake.LK_LOCK and held_by_another[0]:
            held_by_another[0] -= 1
            raise OSError(errno.EDEADLK, "Resource deadlock avoided")
        calls.append((mode, nbytes))

    fake = types.SimpleNamespace(LK_LOCK=1, LK_UNLCK=0, locking=locking)
    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl: ImportError
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    with store.locked(tmp_path / "runs"):
        assert calls == [(fake.LK_LOCK, 1)]
        with store.locked(tmp_path / "runs"):  # reentrant: no second lock
            assert len(calls) == 1
    assert calls == [(fake.LK_LOCK, 1), (fake.LK_UNLCK, 1)] and held_by_another == [0]
    assert (tmp_path / "runs" / store.LOCK_NAME).is_file()
