"""A node that prints without end over SSH costs no memory (issue 28 item 5).

``ssh`` here is a stand-in script on PATH (no network, no sshd): it answers ``true`` at once and
floods on anything else. What is asserted is the size of what the tool kept, never a time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioner.capped import MAX_LINE_BYTES, MAX_OUTPUT_BYTES, capped_lines
from provisioner.realize.bootstrap_ssh import BootstrapError, SshBootstrapper, SshTarget
from provisioner.realize.remote import SshRemote

FLOOD_BYTES = 48 * 1024 * 1024  # over both caps, and more than six times the output cap
TARGET = SshTarget(host="127.0.0.1", node_name="n0")


def _fake_ssh(folder: Path, flood: str) -> Path:
    """An ``ssh`` whose last argument (the remote command) ``true`` exits 0; any other prints ``flood``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ssh"
    script.write_text(
        f'#!/bin/sh\nfor last; do :; done\n[ "$last" = true ] && exit 0\n{flood}\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _remote(tmp_path: Path, flood: str, monkeypatch: pytest.MonkeyPatch) -> SshRemote:
    bin_dir = tmp_path / "bin"
    _fake_ssh(bin_dir, flood)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return SshRemote(tmp_path / "key", tmp_path / "known_hosts")  # the default ``ssh``: the one on PATH


def test_a_stream_line_without_end_is_cut_at_the_line_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 48 MiB with no newline, then a last line: the job's log is followed whole, but the endless line
    # is kept only up to MAX_LINE_BYTES (before: a 48 MiB string, and an endless one grew without bound).
    flood = f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x; printf '\\nlast line\\n'; exit 3"
    remote = _remote(tmp_path, flood, monkeypatch)
    lines: list[str] = []
    code = remote.stream(TARGET, ["train.sh"], lines.append, timeout_s=60)
    assert code == 3
    assert [len(line) for line in lines] == [MAX_LINE_BYTES, len(lines[1]), len("last line")]
    assert lines[0] == "x" * MAX_LINE_BYTES
    assert lines[1] == f"ssh n0: a line over 64 KiB was cut ({FLOOD_BYTES - MAX_LINE_BYTES} bytes dropped)"
    assert lines[2] == "last line"


def test_the_bootstrap_of_a_flooding_node_stops_at_the_output_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``yes`` never ends: the capture stops at MAX_OUTPUT_BYTES and the bootstrap fails in one line
    # (before: subprocess.run kept all of it until the hour's timeout).
    remote = _remote(tmp_path, "exec yes flooding-output", monkeypatch)
    with pytest.raises(BootstrapError) as caught:
        remote.bootstrap(TARGET, "#!/bin/sh\necho hi\n", timeout_s=600)
    assert str(caught.value) == (
        f"n0: ssh to 127.0.0.1 printed more than {MAX_OUTPUT_BYTES // 1024} KiB; stopped (run the bootstrap again "
        "to resume)"
    )
    assert "\n" not in str(caught.value)


def test_the_bootstrap_keeps_at_most_the_cap_of_a_flood_that_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A flood that ends on its own but passes the cap: what the runner keeps is at most the cap.
    bin_dir = tmp_path / "bin"
    ssh = _fake_ssh(bin_dir, f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' y; exit 0")
    runner = SshBootstrapper(tmp_path / "key", tmp_path / "known_hosts", ssh=str(ssh))
    done = runner._ssh(TARGET, "true", timeout_s=60)  # the stand-in answers ``true`` without output
    assert done.returncode == 0 and done.stdout == ""
    with pytest.raises(BootstrapError, match=r"printed more than 8192 KiB"):
        runner.run(TARGET, "echo hi\n", timeout_s=600)


def test_capped_lines_keeps_short_lines_whole_and_counts_what_it_drops(tmp_path: Path) -> None:
    data = tmp_path / "log"
    data.write_bytes(b"a\n" + b"b" * 10 + b"\n\nc" * 3 + b"d" * 7)
    with data.open("rb") as pipe:
        got = list(capped_lines(pipe, max_line_bytes=4))
    assert got == [("a", 0), ("bbbb", 6), ("", 0), ("c", 0), ("", 0), ("c", 0), ("", 0), ("cddd", 4)]
