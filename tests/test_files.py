"""The one output writer (``tracetochain._files.write_output``) and the input-file check.

Attack report findings F3 (``new/../input``), F4 (output = input), F5 (symbolic links), F6 (non-atomic writes),
F20 (FIFO inputs), F23 (unhandled path errors) and F24 (race and temp-file litter) at the library level; the
command-line reproductions are in ``tests/cli/test_attack_report.py``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tracetochain import _files
from tracetochain._files import check_input_file, check_output_path, write_output
from tracetochain.exceptions import OutputFileError, TraceToChainError, TraceValidationError


def litter(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture(params=["anonymous", "named"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test with the Linux O_TMPFILE path and with the portable named-temp-file path."""
    if request.param == "named":
        monkeypatch.setattr(_files, "_anonymous_file", lambda folder: None)
    return str(request.param)


def test_writes_new_file_and_creates_folders(tmp_path: Path, mode: str) -> None:
    out = write_output(tmp_path / "a" / "b" / "r.html", "<p>é</p>")
    assert out.read_text(encoding="utf-8") == "<p>é</p>"
    assert litter(out.parent) == []
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_existing_file_needs_overwrite(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(OutputFileError, match="already exists; pass --force"):
        write_output(out, "new")
    assert out.read_text() == "old"
    write_output(out, "new", overwrite=True)
    assert out.read_text() == "new" and litter(tmp_path) == []


def test_error_is_a_library_error_and_an_os_error(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(OutputFileError) as info:
        write_output(out, "new")
    assert isinstance(info.value, TraceToChainError) and isinstance(info.value, OSError)
    assert str(info.value) == f"{out} already exists; pass --force to replace it"


@pytest.mark.parametrize("spelling", ["same", "dotdot", "hardlink", "symlink"])
def test_an_input_is_never_replaced(tmp_path: Path, spelling: str, mode: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("traces")
    target = {"same": source, "dotdot": tmp_path / "newdir" / ".." / "in.jsonl",
              "hardlink": tmp_path / "hard.jsonl", "symlink": tmp_path / "link.jsonl"}[spelling]
    if spelling == "hardlink":
        os.link(source, target)
    if spelling == "symlink":
        target.symlink_to(source)
    for overwrite in (False, True):
        with pytest.raises(OutputFileError, match="is the input file"):
            check_output_path(target, overwrite=overwrite, inputs=[source])
        with pytest.raises(OutputFileError, match="is the input file"):
            write_output(target, "<html>", overwrite=overwrite, inputs=[source])
    assert source.read_text() == "traces"
    assert not (tmp_path / "newdir").exists()  # refused before any folder was made


def test_existing_file_inside_an_input_folder_is_not_replaced(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.traj.json").write_text("{}")
    with pytest.raises(OutputFileError, match="inside the input folder"):
        write_output(run / "a.traj.json", "x", overwrite=True, inputs=[run])
    write_output(run / "new.jsonl", "x", inputs=[run])  # a new file beside the inputs is fine
    assert (run / "a.traj.json").read_text() == "{}"


def test_symbolic_link_is_refused_then_replaced_never_followed(tmp_path: Path, mode: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    with pytest.raises(OutputFileError, match="symbolic link"):
        write_output(link, "<html>")
    assert victim.read_text() == "precious" and link.is_symlink()
    write_output(link, "<html>", overwrite=True)
    assert victim.read_text() == "precious" and not link.is_symlink() and link.read_text() == "<html>"


def test_dangling_link_does_not_create_its_target(tmp_path: Path, mode: str) -> None:
    link = tmp_path / "dangling.html"
    link.symlink_to(tmp_path / "created.txt")
    with pytest.raises(OutputFileError, match="symbolic link"):
        write_output(link, "<html>")
    write_output(link, "<html>", overwrite=True)
    assert not (tmp_path / "created.txt").exists() and link.read_text() == "<html>"


def test_folder_and_bad_names(tmp_path: Path) -> None:
    with pytest.raises(OutputFileError, match="is a folder"):
        write_output(tmp_path, "x", overwrite=True)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputFileError, match=r"cannot write .*cannot create its folder"):
        write_output(blocker / "sub" / "r.html", "x")
    with pytest.raises(OutputFileError, match="not a file name"):
        write_output(str(tmp_path / "newdir") + "/", "x")
    with pytest.raises(OutputFileError, match="not a file name"):
        write_output(tmp_path / "..", "x")


def test_failed_producer_keeps_the_old_file_and_leaves_no_litter(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "t.parquet"
    out.write_text("old and good")

    def producer(fh: object) -> None:
        fh.write(b"half a ")  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputFileError, match=r"cannot write .*No space left on device"):
        write_output(out, producer, overwrite=True)
    assert out.read_text() == "old and good" and litter(tmp_path) == []

    def crash(fh: object) -> None:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        write_output(out, crash, overwrite=True)
    assert out.read_text() == "old and good" and litter(tmp_path) == []


def test_file_size_limit_in_a_real_process(tmp_path: Path) -> None:
    """F6: RLIMIT_FSIZE makes the write fail with EFBIG; the old file stays whole, one error line."""
    out = tmp_path / "good.html"
    out.write_text("x" * 100_000)
    code = ("import sys; from tracetochain._files import write_output\n"
            "from tracetochain.exceptions import OutputFileError\n"
            "try:\n    write_output(sys.argv[1], 'y' * 200_000, overwrite=True)\n"
            "except OutputFileError as e:\n    print(e); sys.exit(2)\n")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, preexec_fn=cap,
                       timeout=120)
    assert r.returncode == 2 and "File too large" in r.stdout, (r.stdout, r.stderr)
    assert out.read_text() == "x" * 100_000 and litter(tmp_path) == []


def test_race_for_a_new_name_has_one_winner(tmp_path: Path, mode: str) -> None:
    """F24: the existence check and the final link are one step; a file that appears meanwhile is not replaced."""
    out = tmp_path / "o.jsonl"

    def producer(fh: object) -> None:
        out.write_text("the other run")  # another process finishes first
        fh.write(b"ours")  # type: ignore[attr-defined]

    with pytest.raises(OutputFileError, match="appeared while it was being written"):
        write_output(out, producer)
    assert out.read_text() == "the other run" and litter(tmp_path) == []


def test_streams_are_written_in_place(tmp_path: Path) -> None:
    write_output("/dev/null", "discarded")
    write_output("/dev/null", "discarded", overwrite=True)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    write_output(fifo, "through the pipe")
    assert reader.communicate(timeout=30)[0] == b"through the pipe"


def test_lone_surrogates_are_written_not_crashed(tmp_path: Path) -> None:
    out = write_output(tmp_path / "a.md", "state \ud800 name")
    assert out.read_text(encoding="utf-8") == "state ? name"


def test_input_check_refuses_fifos_devices_and_folders(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TraceValidationError, match=r"pipe.jsonl: is a FIFO"):
        check_input_file(fifo)
    with pytest.raises(TraceValidationError, match="/dev/zero: is a device"):
        check_input_file("/dev/zero")
    with pytest.raises(TraceValidationError, match="is a folder"):
        check_input_file(tmp_path)
    assert check_input_file(tmp_path, allow_folder=True) == tmp_path
    with pytest.raises(TraceValidationError, match=r"missing.jsonl: no such file"):
        check_input_file(tmp_path / "missing.jsonl")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes everything")
def test_permission_errors_are_located(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OutputFileError, match=r"cannot write .*Permission denied"):
            write_output(locked / "r.html", "x")
    finally:
        locked.chmod(0o700)


def test_no_named_file_exists_while_writing_on_linux(tmp_path: Path) -> None:
    """F24: with O_TMPFILE the content has no name until it is complete, so even kill -9 leaves no litter."""
    if _files._anonymous_file(tmp_path) is None:
        pytest.skip("this file system has no O_TMPFILE")
    seen: list[list[str]] = []

    def producer(fh: object) -> None:
        fh.write(b"x" * 1000)  # type: ignore[attr-defined]
        seen.append(sorted(p.name for p in tmp_path.iterdir()))

    write_output(tmp_path / "out.jsonl", producer)
    assert seen == [[]] and sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
