"""``make report``: ``dvc repro`` without the advice that does not apply to someone who wants the
report.

``dvc repro`` ends a run by advising ``git add dvc.lock ...`` (and ``dvc config
core.autostage true``) and ``Use `dvc push` to send your updates to remote storage``, even in a
checkout with no DVC remote. This runs the same reproduction through DVC's Python API
(``dvc.repo.Repo.reproduce``, the function the CLI calls) with DVC's stage messages kept
("Running stage ...") and without the git reminder (``dvc.lock`` changes whenever a stage
reruns: committing it is the user's choice, not a step of making the report); the push hint is
printed only where a DVC remote is configured. A failing stage stops it with DVC's message and exit
status 1, as the CLI does.
"""

from __future__ import annotations

import logging
import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Reproduce the pipeline (targets in ``argv``, default all); the exit status."""
    from dvc.exceptions import DvcException
    from dvc.logger import setup
    from dvc.repo import Repo

    if not logging.getLogger("dvc").handlers:
        setup(logging.INFO)
    try:
        with Repo() as repo:
            # The SCM context collects the files to remind about; quiet drops the reminder.
            repo.scm_context.quiet = True
            stages = repo.reproduce(targets=list(argv or []) or None)
            remotes = list((repo.config.get("remote") or {}).keys())
    except DvcException as exc:
        logging.getLogger("dvc").error("%s", exc)
        return 1
    if not stages:
        print("Data and pipelines are up to date.")
        return 0
    if remotes:
        print(f"`dvc push` sends the outputs to the remote ({', '.join(remotes)}).")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
