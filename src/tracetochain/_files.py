"""The one way tracetochain writes a file, and the checks every reader applies before opening one.

**Writing** (:func:`write_output`) — used by every command and library function that writes a file (``fit -o``,
``report -o``, ``export -o``, ``monitor --html``, ``convert``, :meth:`AbsorbingChain.to_json`,
:meth:`TraceTable.write`):

* an input of the command is never replaced, however the output is spelled (``new/../in.jsonl``, a hard link,
  a symbolic link to it): the real path of the directory entry is compared with the real path of every input;
* a symbolic link at the target is not followed: without ``overwrite`` it is refused, with it the *link* is
  replaced by the new file and whatever it pointed to is left alone (a committed ``report.html -> ~/.bashrc``
  cannot make a CI run clobber the runner's files);
* an existing file is replaced only with ``overwrite`` (``--force`` on the command line, the same for every
  command); the check and the final link are one atomic step, so two runs racing for a new name cannot both win;
* the content goes to an anonymous temporary file in the target's directory (Linux ``O_TMPFILE``; elsewhere a
  hidden ``.NAME.*.tt-partial`` file removed on failure) and appears under its name only when complete: a failed
  write (disk full, file-size limit) or a killed process leaves the old file intact and no litter;
* every OS error becomes one :class:`~tracetochain.exceptions.OutputFileError` naming the path and the reason,
  which the CLI prints as one ``error:`` line with exit code 2.

Streams are the exception: a path under ``/dev/`` or ``/proc/self/fd/`` that is not a regular file
(``-o /dev/stdout``, ``-o /dev/null``), or a FIFO the user created, is written in place — there is nothing there
to clobber or to make atomic.

**Opening for reading** (:func:`check_input_file`): a trace or chain file must be a regular file (or a folder
where the reader reads folders). A FIFO would block until someone writes to it, and ``/dev/zero`` or
``/dev/urandom`` would be read without end, so both are refused before any byte is read.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from tracetochain.exceptions import OutputFileError, TraceValidationError

#: What a writer may be given: text (written as UTF-8), bytes, or a function that writes into a binary file.
Content = str | bytes | Callable[[BinaryIO], None]

_STREAM_PREFIXES = ("/dev/", "/proc/self/fd/")
_PARTIAL_SUFFIX = ".tt-partial"


def write_output(path: str | os.PathLike[str], content: Content, *, overwrite: bool = False,
                 inputs: Iterable[str | os.PathLike[str] | None] = (), what: str = "output") -> Path:
    """Write ``content`` to ``path`` safely (see the module docstring) and return the path.

    ``overwrite`` allows replacing an existing file or symbolic link (never an input, never a folder); ``inputs``
    are the files and folders the command read — none of them, and no existing file inside an input folder, is
    ever replaced; ``what`` names the output in messages ("report", "chain" …).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_output(folder / "a.txt", "hello\\n").read_text()
    'hello\\n'
    >>> write_output(folder / "a.txt", "again")
    Traceback (most recent call last):
    ...
    tracetochain.exceptions.OutputFileError: .../a.txt already exists; pass --force to replace it
    >>> write_output(folder / "new" / ".." / "a.txt", "x", overwrite=True, inputs=[folder / "a.txt"])
    Traceback (most recent call last):
    ...
    tracetochain.exceptions.OutputFileError: .../a.txt is the input file .../a.txt; write the output elsewhere
    """
    target = _target(path, what)
    input_list = [Path(os.fspath(p)) for p in inputs if p is not None]
    if _check(target, overwrite, input_list, what):
        return _write_stream(target, content)
    try:
        _entry_path(target).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(f"cannot write {target}: cannot create its folder ({_reason(exc)})") from None
    entry = _entry_path(target)  # again, now that the folder exists: `new/../x` and racing links resolve for real
    _refuse_inputs(target, entry, input_list, what)
    try:
        _publish(entry, content, overwrite=overwrite)
    except FileExistsError:
        raise OutputFileError(f"{target} appeared while it was being written (another run?); pass --force to "
                              "replace it") from None
    except IsADirectoryError:
        raise OutputFileError(f"{target} is a folder; name the {what} file to write") from None
    except OSError as exc:
        raise OutputFileError(f"cannot write {target}: {_reason(exc)}") from None
    return target


def check_output_path(path: str | os.PathLike[str], *, overwrite: bool = False,
                      inputs: Iterable[str | os.PathLike[str] | None] = (), what: str = "output") -> None:
    """The checks of :func:`write_output` without writing anything: commands call it before hours of work, so a
    refused output is reported at once (the writer checks again when it writes)."""
    _check(_target(path, what), overwrite, [Path(os.fspath(p)) for p in inputs if p is not None], what)


def check_input_file(path: str | os.PathLike[str], *, allow_folder: bool = False) -> Path:
    """``path`` if it is a regular file (or a folder, when ``allow_folder``); else a located
    :class:`~tracetochain.exceptions.TraceValidationError`.

    Refused before any byte is read: a missing path, a FIFO or socket (reading one blocks until a writer comes), a
    device such as ``/dev/zero`` (read without end), and a folder where a file is needed.
    """
    problem = input_problem(path, allow_folder=allow_folder)
    if problem is not None:
        message, hint = problem
        raise TraceValidationError(message, source=os.fspath(path), hint=hint)
    return Path(os.fspath(path))


def input_problem(path: str | os.PathLike[str], *, allow_folder: bool = False) -> tuple[str, str | None] | None:
    """Why ``path`` cannot be read as an input file — ``(message, hint)`` — or None when it can (see
    :func:`check_input_file`); for callers that raise their own error class."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "no such file", None
    except OSError as exc:
        return f"cannot read it ({_reason(exc)})", None
    if stat.S_ISREG(st.st_mode) or (allow_folder and stat.S_ISDIR(st.st_mode)):
        return None
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file", "name the file to read"
    kind = "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else \
        "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
    return (f"is {kind}, not a regular file",
            "save the data to a file first (tracetochain reads files it can size and seek)")


def input_error(path: str | os.PathLike[str], exc: OSError) -> TraceValidationError:
    """A located, one-line input error for an ``OSError`` raised while reading ``path``."""
    return TraceValidationError(f"cannot read it ({_reason(exc)})", source=os.fspath(path))


# ---------------------------------------------------------------------------------------------------- internals
def _target(path: str | os.PathLike[str], what: str) -> Path:
    spelled = os.fspath(path)
    target = Path(spelled)
    if target.name in ("", ".", "..") or (spelled.endswith(os.sep) and not target.is_dir()):
        raise OutputFileError(f"{spelled} is not a file name; name the {what} file to write")
    return target


def _check(target: Path, overwrite: bool, inputs: list[Path], what: str) -> bool:
    """Refuse what must not be written; True when ``target`` is a stream to write in place."""
    entry = _entry_path(target)  # the directory entry, its parent resolved, the final component not followed
    _refuse_inputs(target, entry, inputs, what)
    existing = _lstat(entry)
    if existing is None:
        return False
    if _is_stream(target, existing):
        return True
    if stat.S_ISLNK(existing.st_mode):
        if not overwrite:
            raise OutputFileError(
                f"{target} is a symbolic link; tracetochain does not write through links — remove it, or pass "
                "--force to replace the link itself (its target is left alone)")
    elif stat.S_ISDIR(existing.st_mode):
        raise OutputFileError(f"{target} is a folder; name the {what} file to write")
    elif not stat.S_ISREG(existing.st_mode):
        raise OutputFileError(f"{target} is not a regular file; name a file to write")
    elif not overwrite:
        raise OutputFileError(f"{target} already exists; pass --force to replace it")
    return False


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _lstat(p: Path) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise OutputFileError(f"cannot write {p}: {_reason(exc)}") from None


def _entry_path(target: Path) -> Path:
    """The real path of the folder holding ``target`` joined with its name: where the new directory entry goes.

    The final component is not followed (a symbolic link there is the entry itself); components that do not
    exist yet are kept, and a later ``..`` cancels them, as the kernel will once they exist.
    """
    return Path(os.path.realpath(target.parent)) / target.name


def _refuse_inputs(target: Path, entry: Path, inputs: list[Path], what: str) -> None:
    if not inputs:
        return
    entry_stat = _lstat(entry)
    entry_real = Path(os.path.realpath(entry))  # through a final link too: replacing the link is harmless, but a
    for source in inputs:                       # message naming the input is clearer than the symlink refusal
        source_real = Path(os.path.realpath(source))
        same = entry == source_real or entry_real == source_real
        if not same and entry_stat is not None and stat.S_ISREG(entry_stat.st_mode):
            try:
                src_stat = os.stat(source)
            except OSError:
                src_stat = None
            if src_stat is not None:
                same = (src_stat.st_dev, src_stat.st_ino) == (entry_stat.st_dev, entry_stat.st_ino)
                if not same and stat.S_ISDIR(src_stat.st_mode) and entry.is_relative_to(source_real):
                    raise OutputFileError(
                        f"{target} already exists inside the input folder {source}, where it may be read as input; "
                        f"write the {what} outside that folder")
        if same:
            spelled = "" if os.fspath(source) == os.fspath(target) else f" {source}"
            raise OutputFileError(f"{target} is the input file{spelled}; write the {what} elsewhere")


def _is_stream(target: Path, st: os.stat_result) -> bool:
    """A FIFO or character device the user named (or a /dev, /proc/self/fd path): written in place."""
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return True
    spelled = os.path.abspath(target)
    if stat.S_ISLNK(st.st_mode) and spelled.startswith(_STREAM_PREFIXES):
        try:
            followed = os.stat(target)
        except OSError:
            return False
        return not stat.S_ISDIR(followed.st_mode) and not stat.S_ISBLK(followed.st_mode)
    return False


def _write_stream(target: Path, content: Content) -> Path:
    try:
        with open(target, "wb") as fh:
            _produce(fh, content, sync=False)
    except OSError as exc:
        raise OutputFileError(f"cannot write {target}: {_reason(exc)}") from None
    return target


def _produce(fh: BinaryIO, content: Content, *, sync: bool = True) -> None:
    if isinstance(content, str):
        # Lone surrogates (from "\ud800" escapes in a JSON source) have no UTF-8 form; they become "?".
        fh.write(content.encode("utf-8", errors="replace"))
    elif isinstance(content, bytes):
        fh.write(content)
    else:
        content(fh)
    fh.flush()
    if sync:  # the data is on disk before the name points at it (a crash leaves the old file, not an empty one)
        os.fsync(fh.fileno())


def _publish(entry: Path, content: Content, *, overwrite: bool) -> None:
    """Write into an unnamed (or hidden) file beside ``entry`` and give it the name at the end."""
    folder = entry.parent
    fd = _anonymous_file(folder)
    if fd is not None:
        with os.fdopen(fd, "w+b") as fh:
            _produce(fh, content)
            try:
                _link_in(fh.fileno(), entry, overwrite=overwrite)
                return
            except FileExistsError:
                raise
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.EACCES):
                    raise
                # /proc is not mounted, or this file system cannot link an open file: fall back to a named file.
                fh.seek(0)
                _publish_named(entry, lambda out: _copy(fh, out), overwrite=overwrite)
                return
    _publish_named(entry, content, overwrite=overwrite)


def _anonymous_file(folder: Path) -> int | None:
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(folder, flag | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None  # kernel or file system without O_TMPFILE
        raise


def _link_in(fd: int, entry: Path, *, overwrite: bool) -> None:
    """Give the unnamed file open as ``fd`` the name ``entry``: exclusively (EEXIST if something is there) or, with
    ``overwrite``, through a hidden name and an atomic rename over the old entry."""
    folder = os.open(entry.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        # linkat(…, AT_SYMLINK_FOLLOW) through /proc: a directory fd makes os.link use linkat rather than link(2),
        # which would try to link the /proc entry itself.
        name = entry.name if not overwrite else _hidden_name(entry).name
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=folder, follow_symlinks=True)
        if overwrite:
            try:
                os.replace(name, entry.name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                _unlink_quietly(entry.with_name(name))
                raise
    finally:
        os.close(folder)


def _publish_named(entry: Path, content: Content, *, overwrite: bool) -> None:
    hidden = _hidden_name(entry)
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            _produce(fh, content)
        if overwrite:
            os.replace(hidden, entry)
            return
        try:
            os.link(hidden, entry)  # exclusive: fails if the name was taken meanwhile
        except FileExistsError:
            raise
        except OSError:
            if os.path.lexists(entry):  # no hard links on this file system: a check, then the rename
                raise FileExistsError(errno.EEXIST, "File exists", str(entry)) from None
            os.replace(hidden, entry)
    finally:
        _unlink_quietly(hidden)


def _hidden_name(entry: Path) -> Path:
    return entry.with_name(f".{entry.name}.{os.getpid()}-{secrets.token_hex(4)}{_PARTIAL_SUFFIX}")


def _copy(src: BinaryIO, dst: BinaryIO) -> None:
    while chunk := src.read(1 << 20):
        dst.write(chunk)


def _unlink_quietly(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


__all__ = ["Content", "check_input_file", "check_output_path", "input_error", "input_problem", "write_output"]
