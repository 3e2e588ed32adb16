"""What a results file says produced it: the commit, where git can tell it or a copied checkout states it."""

from __future__ import annotations

import subprocess

import pytest

from learning.common import provenance


@pytest.fixture
def outside_git(tmp_path, monkeypatch):
    """The project's files copied without ``.git``: git finds no checkout above them."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    return tmp_path


def test_a_checkout_without_git_takes_the_commit_it_states_and_only_a_commit(outside_git, monkeypatch):
    """A copy of a checkout's files without its ``.git`` (what a lent machine runs) has no commit to read: it takes
    ``PROVENANCE_COMMIT`` where that is 40 hex digits, and says so; a malformed one is warned about and unknown, as
    is none."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("PROVENANCE_COMMIT", sha)
    assert provenance.git_commit() == sha
    record = provenance.provenance("python -m learning.benchmark --suite device")
    assert record["commit"] == sha and record["commit_stated_by"] == "PROVENANCE_COMMIT"
    assert "PROVENANCE_COMMIT" not in record["command"] and "PROVENANCE_COMMIT" not in record["settings"]
    assert len(record["source_fingerprint"]) == 16
    assert f"at commit `{sha}` (stated by PROVENANCE_COMMIT: no git checkout there) on " in (
        provenance.provenance_line(record)
    )
    for stated in ("HEAD", sha[:12], sha + "+changes"):
        monkeypatch.setenv("PROVENANCE_COMMIT", stated)
        with pytest.warns(UserWarning, match="is not a commit"):
            assert provenance.git_commit() == "unknown"
    monkeypatch.delenv("PROVENANCE_COMMIT")
    assert provenance.git_commit() == "unknown" and "commit_stated_by" not in provenance.provenance("x")


def test_in_a_checkout_git_answers_whatever_is_stated(monkeypatch):
    monkeypatch.setenv("PROVENANCE_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=provenance.REPO, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    record = provenance.provenance("x")
    assert record["commit"].startswith(head.stdout.strip()) and "commit_stated_by" not in record


def test_the_results_a_run_is_writing_do_not_change_the_commit_it_ran(outside_git):
    """A run that writes its results as it goes, into a tracked folder, still ran the commit: changes under that
    folder are not changes to the code. Changes anywhere else are; a folder outside the checkout does not matter."""
    root = outside_git
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    (root / "code.py").write_text("x = 1\n")
    (root / "results").mkdir()
    (root / "results" / "device-cpu.json").write_text("{}\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run([*git, *command], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (root / "results" / "device-cpu.json").write_text('{"results": []}\n')
    assert provenance.git_commit(root / "results") == head
    assert provenance.git_commit() == head + "+changes"
    (root / "code.py").write_text("x = 2\n")
    assert provenance.git_commit(root / "results") == head + "+changes"
    assert provenance.git_commit(root.parent / "elsewhere") == head + "+changes"


def test_a_commits_fingerprint_is_what_a_clean_copy_of_it_records(outside_git):
    """``fingerprint_at(commit)``, read from git, equals ``source_fingerprint`` of a clean checkout of the commit (in
    the same order, ``a-b.py`` before or after ``a/``, as ``sorted`` paths go), and differs once a file changes."""
    root = outside_git
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    files = {"assets/robot.py": "G1 = 1\n", "kinematics/a-b.py": "x = 1\n", "kinematics/a/x.c": "int x;\n",
             "kinematics/a/notes.txt": "not code\n", "learning/run.py": "y = 2\n"}  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run([*git, *command], check=True)
    provenance.source_fingerprint.cache_clear()
    try:
        assert provenance.fingerprint_at("HEAD") == provenance.source_fingerprint()
        (root / "notes.txt").write_text("outside the packages\n")
        (root / "kinematics/a/notes.txt").write_text("not code either\n")
        provenance.source_fingerprint.cache_clear()
        assert provenance.fingerprint_at("HEAD") == provenance.source_fingerprint()
        (root / "kinematics/a/x.c").write_text("int x = 1;\n")
        provenance.source_fingerprint.cache_clear()
        assert provenance.fingerprint_at("HEAD") != provenance.source_fingerprint()
    finally:
        provenance.source_fingerprint.cache_clear()


def test_a_record_carries_the_machines_load_and_its_line_shows_it(monkeypatch) -> None:
    monkeypatch.setattr(provenance.os, "getloadavg", lambda: (0.314, 1.0, 2.25))
    record = provenance.provenance("python -m learning x")
    assert record["machine"]["load_average"] == [0.31, 1.0, 2.25]
    assert "load average 0.31 / 1.0 / 2.25 (1 / 5 / 15 min) when written" in provenance.provenance_line(record)

    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(provenance.os, "getloadavg", no_load)
    record = provenance.provenance("python -m learning x")
    assert record["machine"]["load_average"] is None and "load average" not in provenance.provenance_line(record)
    # a record written before the load was recorded renders as it did
    del record["machine"]["load_average"]
    assert provenance.provenance_line(record).endswith(f"threads, {record['timestamp']}.")
