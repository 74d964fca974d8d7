"""`read_regular`: a file named by a user is read only when it is a regular file, at most a stated size, without
ever blocking (a FIFO with no writer would wait for ever) or following a link where links are refused."""

import os
import threading

import pytest

from firmware_bridge.protocol import Hello
from firmware_bridge.recorder import Recorder
from firmware_bridge.safe_read import FileTooLarge, NotRegularFile, plain_name, read_regular, read_regular_text
from firmware_bridge.session_format import SessionFormatError


def _unblock_on_hang(path):
    """If the reader opened the FIFO and waits for a writer, this writer lets it go: the test then fails on its
    result instead of hanging the suite."""
    def write():
        try:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, b"{}")
            os.close(fd)
        except OSError:
            pass
    timer = threading.Timer(30.0, write)
    timer.daemon = True
    timer.start()
    return timer


def test_a_fifo_is_refused_without_being_opened_to_block(tmp_path):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    timer = _unblock_on_hang(fifo)
    try:
        with pytest.raises(NotRegularFile, match=r"a named pipe \(FIFO\), not a regular file"):
            read_regular(fifo, 1 << 20, "plan file")
    finally:
        timer.cancel()


def test_device_files_folders_and_sockets_are_refused(tmp_path):
    with pytest.raises(NotRegularFile, match="a device file"):
        read_regular("/dev/zero", 1 << 20)
    with pytest.raises(IsADirectoryError, match="a folder, not a file"):
        read_regular(tmp_path, 1 << 20)
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(NotRegularFile, match="a socket"):
            read_regular(tmp_path / "sock", 1 << 20)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "nothing", 10)


def test_the_size_cap_is_stated_and_nothing_bigger_is_read(tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "wb") as handle:
        handle.truncate(5 << 20)  # sparse: stat says 5 MiB
    with pytest.raises(FileTooLarge, match="larger than 1 MiB, the most a config file may be"):
        read_regular(big, 1 << 20, "config file")
    small = tmp_path / "small.toml"
    small.write_text("a = 1\n")
    assert read_regular_text(small, 6, "config file") == "a = 1\n"
    with pytest.raises(FileTooLarge):
        read_regular(small, 5, "config file")


def test_links_are_followed_only_where_allowed(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "card.json"
    link.symlink_to(real)
    assert read_regular(link, 100) == b"{}"
    with pytest.raises(NotRegularFile, match="a symbolic link, which is not followed here"):
        read_regular(link, 100, follow_links=False)
    dangling = tmp_path / "gone.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(NotRegularFile):
        read_regular(dangling, 100, follow_links=False)


@pytest.mark.parametrize("name, plain", [
    ("model_compiled.c", True), ("card.json", True), ("../x", False), ("/etc/passwd", False), ("a/b", False),
    ("..", False), (".", False), ("", False), (".hidden", False), ("a\\b", False), ("a\0b", False), (None, False),
    (3, False), ("x" * 256, False),
])
def test_plain_names(name, plain):
    assert plain_name(name) is plain


def test_a_recorder_refuses_a_manifest_that_is_a_fifo_without_blocking(tmp_path):
    folder = tmp_path / "session"
    folder.mkdir()
    os.mkfifo(folder / "manifest.json")
    timer = _unblock_on_hang(folder / "manifest.json")
    try:
        with pytest.raises(SessionFormatError, match="a named pipe"):
            Recorder(folder, Hello("sim", "1", 1, 100.0, "int16"))
    finally:
        timer.cancel()
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json"]  # nothing written beside it
