"""What a results file says produced it: the commit, where git can tell it or a copied checkout states it."""

from __future__ import annotations

import subprocess

from learning.common import provenance


def test_a_checkout_without_git_takes_the_commit_it_states_and_only_a_commit(tmp_path, monkeypatch):
    """A copy of a checkout's files without its ``.git`` (what a lent machine runs) has no commit to read: it takes
    ``PROVENANCE_COMMIT`` where that is 40 hex digits, is ``unknown`` otherwise, and the command shows the setting.
    In a checkout, git's answer wins over the setting."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("PROVENANCE_COMMIT", sha)
    in_checkout = provenance.git_commit()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=provenance.REPO, capture_output=True, text=True)
    if head.returncode == 0:
        assert in_checkout.startswith(head.stdout.strip())
    monkeypatch.setattr(provenance, "REPO", tmp_path)  # not a git checkout
    assert provenance.git_commit() == sha
    record = provenance.provenance("python -m learning.benchmark --suite device")
    assert record["commit"] == sha and f"PROVENANCE_COMMIT={sha} python -m" in record["command"]
    assert len(record["source_fingerprint"]) == 16
    for stated in ("HEAD", sha[:12], sha + "+changes"):
        monkeypatch.setenv("PROVENANCE_COMMIT", stated)
        assert provenance.git_commit() == "unknown"
    monkeypatch.delenv("PROVENANCE_COMMIT")
    assert provenance.git_commit() == "unknown"


def test_the_results_a_run_is_writing_do_not_change_the_commit_it_ran(tmp_path, monkeypatch):
    """A run that writes its results as it goes, into a tracked folder, still ran the commit: changes under that
    folder are not changes to the code. Changes anywhere else are."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "device-cpu.json").write_text("{}\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run([*git, *command], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    (tmp_path / "results" / "device-cpu.json").write_text('{"results": []}\n')
    assert provenance.git_commit(tmp_path / "results") == head
    assert provenance.git_commit() == head + "+changes"
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.git_commit(tmp_path / "results") == head + "+changes"
    assert provenance.git_commit(tmp_path.parent / "elsewhere") == head + "+changes"  # outside the checkout: no matter
