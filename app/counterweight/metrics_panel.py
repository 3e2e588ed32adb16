"""The metrics panel of the G1 scene: a counterweight run's report (the task's diagnostics, the claim's verdict,
one table per test split, success by sector) and its figures."""

from __future__ import annotations

from pathlib import Path

import viser

from app.shell.report_files import read_figure, read_report
from app.shell.supervision import Supervisor
from kinematics.errors import ProjectError
from learning.counterweight.report import SECTOR_METRICS, distribution_table, sector_table, split_table, verdict_text


class CounterweightMetricsPanel:
    """The report of ``run`` (None: a hint how to load one); an unreadable figure is shown as a failure under
    ``PART``."""

    PART = "metrics"

    def __init__(self, server: viser.ViserServer, run: Path | None, supervisor: Supervisor) -> None:
        self.figures: list[viser.GuiImageHandle] = []
        with server.gui.add_folder("Metrics", expand_by_default=False):
            self.report = server.gui.add_markdown("")
            if run is None:
                self.report.content = (
                    "No run loaded: start with `--robot g1 --run RUN` to see a counterweight run's report."
                )
                return
            try:
                report = read_report(run)
                tables = [split_table(report, split) for split in report["results"]]
                if any(SECTOR_METRICS[0] in stats for stats in report["results"]["test_iid"].values()):
                    tables.append(sector_table(report))  # reports written before the by-sector metrics have none
                check = distribution_table(report["distribution"])
                verdict = verdict_text(report)
            except (ProjectError, KeyError) as exc:
                self.report.content = f"⚠ report of `{run}` unavailable: {exc}"
                return
            self.report.content = (
                f"**Report of `{run}`** (preset `{report.get('preset')}`)\n\nBefore training:\n\n{check}\n\n{verdict}\n\n"
                + "\n\n".join(tables)
            )
            for name in report.get("figures", []):  # relative to the run: "figures/<name>.png"
                path = run / name
                try:
                    self.figures.append(server.gui.add_image(read_figure(path), label=Path(name).name, format="png"))
                except (OSError, ValueError) as exc:
                    supervisor.failed(self.PART, f"reading figure {path}", exc)
