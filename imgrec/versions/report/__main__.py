"""``python -m imgrec.versions.report``: the ``dataset-report`` command."""
from imgrec.versions.report.command import cli

cli()
