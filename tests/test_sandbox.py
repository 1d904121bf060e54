"""The sandbox a check runs in: no writes outside its scratch directory, no network, a scrubbed environment."""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import pytest

from numbook.run.runner import CheckResult, Runner

WHY = "a check writes only in its scratch directory (its working directory and TMPDIR), which the runner deletes " \
      "afterwards"


def run(tmp_path: Path, source: str) -> tuple[Path, CheckResult]:
    root = tmp_path / "book"
    (root / "checks").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs/keep.md").write_text("keep\n", encoding="utf-8")
    (root / "checks/x.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return root, Runner(root, cache_dir=None).result("x.py")


def last_line(res: CheckResult) -> str:
    assert res.status == "error", res.stderr
    return res.stderr.strip().splitlines()[-1]


def test_a_check_cannot_write_into_the_project(tmp_path: Path) -> None:
    root, res = run(tmp_path, """
        from pathlib import Path
        (Path(__file__).parent.parent / "docs" / "INJECTED.md").write_text("pwned")
    """)
    assert last_line(res) == f"PermissionError: numbook: check 'checks/x.py' may not write docs/INJECTED.md: {WHY}"
    assert not (root / "docs/INJECTED.md").exists()


def test_a_check_cannot_write_outside_its_scratch_directory(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    _, res = run(tmp_path, f"""
        open({str(outside)!r}, "a").write("x")
    """)
    assert last_line(res) == f"PermissionError: numbook: check 'checks/x.py' may not write {outside}: {WHY}"
    assert not outside.exists()


@pytest.mark.parametrize(
    ("code", "verb", "path"),
    [("os.remove(docs / 'keep.md')", "remove", "docs/keep.md"),
     ("os.rename(docs / 'keep.md', docs / 'moved.md')", "rename", "docs/keep.md"),
     ("os.replace(docs / 'keep.md', 'here.md')", "rename", "docs/keep.md"),
     ("os.mkdir(docs / 'new')", "create the directory", "docs/new"),
     ("shutil.rmtree(docs)", "remove", "docs"),
     ("shutil.copyfile(docs / 'keep.md', docs / 'copy.md')", "write", "docs/copy.md"),
     ("os.chmod(docs / 'keep.md', 0o777)", "change the mode of", "docs/keep.md")],
    ids=["remove", "rename", "replace", "mkdir", "rmtree", "copyfile", "chmod"],
)
def test_a_check_cannot_remove_move_or_change_project_files(tmp_path: Path, code: str, verb: str, path: str) -> None:
    root, res = run(tmp_path, f"""
        import os, shutil
        from pathlib import Path
        docs = Path(__file__).parent.parent / "docs"
        {code}
    """)
    assert last_line(res) == f"PermissionError: numbook: check 'checks/x.py' may not {verb} {path}: {WHY}"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["keep.md"]


def test_a_check_may_write_in_its_working_directory_and_tmpdir(tmp_path: Path) -> None:
    _, res = run(tmp_path, """
        import os, shutil, tempfile
        from pathlib import Path
        from numbook.check import value
        Path("out.txt").write_text("a")
        os.mkdir("sub"); os.rename("out.txt", "sub/out.txt"); shutil.rmtree("sub")
        with tempfile.NamedTemporaryFile("w") as fh:
            fh.write("b")
            value("in_tmp", fh.name.startswith(os.environ["TMPDIR"]))
        open(os.devnull, "w").write("c")
        value("cwd_is_scratch", os.getcwd().startswith(os.environ["NUMBOOK_SCRATCH"]))
    """)
    assert res.status == "ok", res.stderr
    assert res.values == {"in_tmp": True, "cwd_is_scratch": True}


def test_a_check_may_not_use_the_network(tmp_path: Path) -> None:
    with socket.socket() as s:       # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _, res = run(tmp_path, f"""
        import socket
        socket.socket().connect(("127.0.0.1", {port}))
    """)
    assert last_line(res) == (
        f"PermissionError: numbook: checks may not use the network (socket.connect ('127.0.0.1', {port})): a check "
        "computes from files in the project, so that its result can be cached and reproduced")
    _, res = run(tmp_path / "again", """
        import urllib.request
        urllib.request.urlopen("http://example.org/")
    """)
    assert last_line(res) == (
        "PermissionError: numbook: checks may not use the network (urllib.Request 'http://example.org/'): a check "
        "computes from files in the project, so that its result can be cached and reproduced")


def test_the_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NB_SECRET_TOKEN", "hunter2")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    _, res = run(tmp_path, """
        import os
        from numbook.check import value
        value("secret", os.environ.get("NB_SECRET_TOKEN", "unset"))
        value("omp", os.environ.get("OMP_NUM_THREADS", "unset"))
        value("path", "PATH" in os.environ)
        value("mpl", os.environ["MPLCONFIGDIR"].startswith(os.environ["NUMBOOK_SCRATCH"]))
    """)
    assert res.values == {"secret": "unset", "omp": "2", "path": True, "mpl": True}


def test_reads_outside_the_project_are_not_recorded_and_bytecode_is_not_written(tmp_path: Path) -> None:
    root, res = run(tmp_path, """
        import json, numbook.check
        from _helper import K
        numbook.check.value("k", K)
    """)
    assert res.status == "error"       # no _helper yet: the failed import is a read of nothing
    (root / "checks/_helper.py").write_text("K = 1\n", encoding="utf-8")
    res = Runner(root, cache_dir=None).result("x.py")
    assert res.values == {"k": 1}
    assert set(res.reads) == {"checks/x.py", "checks/_helper.py"}
    assert not (root / "checks/__pycache__").exists()
    assert os.environ.get("NUMBOOK_SCRATCH") is None


def test_a_write_through_a_dir_fd_lands_where_the_folder_is_not_where_the_name_looks(tmp_path: Path) -> None:
    """os.open's audit event carries no dir_fd: a relative name looked as if it were in the working directory."""
    root, res = run(tmp_path, """
        import os
        from pathlib import Path
        docs = os.open(Path(__file__).parent.parent / "docs", os.O_RDONLY)
        os.open("INJECTED.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=docs)
    """)
    assert last_line(res) == f"PermissionError: numbook: check 'checks/x.py' may not write docs/INJECTED.md: {WHY}"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["keep.md"]


def test_os_open_with_and_without_a_dir_fd_writes_in_scratch_and_reads_are_recorded_where_they_are(
        tmp_path: Path) -> None:
    root, res = run(tmp_path, """
        import os
        from pathlib import Path
        from numbook.check import value
        os.mkdir("sub")
        here = os.open("sub", os.O_RDONLY)
        os.close(os.open("plain.txt", os.O_WRONLY | os.O_CREAT, 0o644))
        os.close(os.open("inside.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here))
        docs = os.open(Path(__file__).parent.parent / "docs", os.O_RDONLY)
        os.close(os.open("keep.md", os.O_RDONLY, dir_fd=docs))
        value("made", sorted(os.listdir("sub")) + sorted(p for p in os.listdir(".") if p.endswith(".txt")))
    """)
    assert res.status == "ok", res.stderr
    assert res.values == {"made": ["inside.txt", "plain.txt"]}
    assert "docs/keep.md" in res.reads   # read through the folder's descriptor: recorded as the project file


@pytest.mark.parametrize(
    ("code", "verb", "path"),
    [("os.symlink(docs, 'out'); open('out/INJECTED.md', 'w')", "write", "docs/INJECTED.md"),
     ("os.symlink(docs / 'keep.md', 'k'); open('k', 'a')", "write", "docs/keep.md"),
     ("os.symlink(docs / 'new.md', 'n'); open('n', 'w')", "write", "docs/new.md"),   # a link to nothing yet
     ("os.symlink(docs, 'out'); os.mkdir('out/new')", "create the directory", "docs/new"),
     ("os.symlink(docs, 'out'); os.rename('out/keep.md', 'here.md')", "rename", "docs/keep.md"),
     ("os.link(docs / 'keep.md', 'hard')", "link to", "docs/keep.md"),
     ("open('mine.md', 'w').close(); os.link('mine.md', docs / 'hard.md')", "link to", "docs/hard.md"),
     ("open('mine.md', 'w').close(); os.rename('mine.md', docs / 'moved.md')", "rename", "docs/moved.md"),
     ("open('mine.md', 'w').close(); d = os.open(docs, os.O_RDONLY); os.rename('mine.md', 'moved.md', "
      "dst_dir_fd=d)", "rename", "docs/moved.md")],
    ids=["symlink-folder", "symlink-file", "symlink-dangling", "symlink-mkdir", "symlink-rename", "hardlink-in",
         "hardlink-out", "rename-out", "rename-dst-dir-fd"],
)
def test_links_and_renames_cannot_carry_a_write_out_of_scratch(tmp_path: Path, code: str, verb: str,
                                                                path: str) -> None:
    root, res = run(tmp_path, f"""
        import os
        from pathlib import Path
        docs = Path(__file__).parent.parent / "docs"
        {code}
    """)
    assert last_line(res) == f"PermissionError: numbook: check 'checks/x.py' may not {verb} {path}: {WHY}"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["keep.md"]
    assert (root / "docs/keep.md").read_text(encoding="utf-8") == "keep\n"


def test_a_link_in_scratch_may_point_out_and_be_removed_and_links_inside_scratch_are_free(tmp_path: Path) -> None:
    _, res = run(tmp_path, """
        import os
        from pathlib import Path
        from numbook.check import value
        docs = Path(__file__).parent.parent / "docs"
        os.symlink(docs, "out")
        value("seen", os.listdir("out"))   # reading through it is a read
        os.remove("out")                   # removing the link removes the link, not docs
        open("a.txt", "w").close()
        os.link("a.txt", "b.txt"); os.symlink("a.txt", "c.txt"); os.rename("c.txt", "d.txt")
        value("here", sorted(p for p in os.listdir(".") if p.endswith(".txt")))
    """)
    assert res.status == "ok", res.stderr
    assert res.values == {"seen": ["keep.md"], "here": ["a.txt", "b.txt", "d.txt"]}
