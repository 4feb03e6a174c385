"""Writing outputs so that a failure never leaves half a file and a user's files are never lost.

Two helpers, used by every command that writes:

- :func:`write_text` and :func:`open_atomic`: one file, written to a temporary sibling and
  renamed into place.
- :func:`write_folder` (with :func:`check_folder`): a folder of files that *we* own, such as a
  results folder, built in a temporary sibling and moved into place only when complete.

The folder rules, in order (``owned`` is the set of file names the folder's writer produces):

1. ``out`` does not exist, or is an empty directory: the complete folder appears at once.
2. ``out`` is a directory whose entries are all in ``owned`` (an earlier folder of the same
   kind): it is replaced atomically (renamed aside, the new one renamed in, the old one deleted).
3. ``out`` holds anything else (``notes.txt``, the input files, a subfolder): refused with a
   :class:`~judge_eval.errors.ConfigError` (exit 2), unless ``force=True``, which writes the
   owned files into it one by one and leaves every other entry alone. Nothing is ever deleted
   that is not in ``owned``.
4. ``out`` is a file, or its location cannot be written (a parent that is a file, ``/proc``, a
   read-only directory): refused with a ConfigError.

New files and folders get the usual permissions (``0666``/``0777`` minus the umask), not the
``0600``/``0700`` that :mod:`tempfile` uses.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from judge_eval.errors import ConfigError

__all__ = ["check_file", "check_folder", "open_atomic", "write_folder", "write_text"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_location(path: Path, option: str) -> None:
    """``path``'s parent can hold a new entry: the nearest existing ancestor is a writable
    directory (probed by creating and removing a directory there)."""
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise ConfigError(f"cannot write {path}: {ancestor} is not a directory", option=option)
    probe = ancestor / f".judge-eval-probe-{uuid.uuid4().hex}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {ancestor} is not writable ({exc.strerror or exc})",
                          option=option) from None


def check_file(path: str | os.PathLike[str], *, option: str = "--out") -> Path:
    """Check that ``path`` can be written as a file (before any work is done); returns it."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{p} is a directory; give a file name", option=option)
    _check_location(p, option)
    return p


@contextmanager
def open_atomic(path: str | os.PathLike[str], *, option: str = "--out") -> Iterator[IO[str]]:
    """Open ``path`` for writing UTF-8 text (``\\n`` line ends) so that it appears only when
    complete: the text goes to a temporary sibling renamed over ``path`` on success; on an error
    the sibling is removed and ``path`` is untouched. Parents are created; a new file gets the
    usual permissions (an existing one keeps its own)."""
    p = check_file(path, option=option)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
        if p.exists():
            os.chmod(tmp, p.stat().st_mode & 0o7777)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str, *, option: str = "--out") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`open_atomic`)."""
    with open_atomic(path, option=option) as fh:
        fh.write(text)
    return Path(path).expanduser()


def _foreign_entries(out: Path, owned: Collection[str]) -> list[str]:
    return sorted(e.name for e in out.iterdir() if e.name not in owned or not e.is_file())


def check_folder(out: str | os.PathLike[str], owned: Collection[str], *, force: bool = False,
                 option: str = "--out") -> Path:
    """Check, before any work is paid for, that :func:`write_folder` may write ``out``.
    Raises :class:`ConfigError` (rules 3 and 4 of the module docstring); returns the path."""
    p = Path(out).expanduser()
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise ConfigError(f"{p} exists and is not a directory", option=option)
        foreign = _foreign_entries(p, owned)
        if foreign and not force:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise ConfigError(
                f"{p} exists and holds files judge-eval did not write ({shown}); choose a new or empty "
                "folder, or add --force to write the result files into it (its other files are kept)",
                option=option,
            )
        if not os.access(p, os.W_OK | os.X_OK):
            raise ConfigError(f"cannot write {p}: permission denied", option=option)
    _check_location(p.absolute(), option)
    return p


def _is_cwd_or_ancestor(p: Path) -> bool:
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        return False
    target = p.resolve()
    return cwd == target or target in cwd.parents


def write_folder(out: str | os.PathLike[str], owned: Collection[str], fill: Callable[[Path], None], *,
                 force: bool = False, option: str = "--out") -> Path:
    """Build a folder with ``fill(tmp_dir)`` in a temporary sibling of ``out``, then move it
    into place following the module's rules. ``fill`` must write only names in ``owned``."""
    p = check_folder(out, owned, force=force, option=option).absolute()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir()  # mode 0777 minus the umask
    try:
        fill(tmp)
        written = sorted(e.name for e in tmp.iterdir())
        stray = [n for n in written if n not in owned]
        if stray:  # a programming error: never let an unowned name into a user's folder
            raise RuntimeError(f"write_folder: {stray} not in the owned names")
        mode = 0o666 & ~_umask()
        for name in written:
            os.chmod(tmp / name, mode)
        if not p.exists():
            os.replace(tmp, p)
        elif not any(p.iterdir()) or force or _is_cwd_or_ancestor(p) or p.is_symlink():
            # write into the existing folder, file by file; nothing else in it is touched
            for name in written:
                os.replace(tmp / name, p / name)
            tmp.rmdir()
        else:
            # an earlier folder of ours: swap it atomically
            old = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.old")
            os.replace(p, old)
            os.replace(tmp, p)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return p
