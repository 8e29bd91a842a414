"""The ``build-dataset`` command: what it answers before Beam is loaded, then the build.

    build-dataset --input DIR_OR_GS_PREFIX --output DIR_OR_GS_PREFIX [options]
    python -m imgrec.pipelines.build_dataset ...   (the same command)

``--help``, and a mistake in the options (an unknown or misspelt option, a bad value of the build's own
options, a runner Beam does not know), are answered from ``imgrec.pipelines.options`` alone, in a fraction of a
second; only then is the job loaded (``imgrec.pipelines.launcher``: Beam and the graph, a second or two of
imports), which parses the same command line again (a millisecond) and runs it. From Python, ``build``
(``imgrec.pipelines.python_api``) runs the same build.
"""
import sys
import typing

from imgrec.console.command import Command, run_command
from imgrec.console.supervisor import supervise
from imgrec.pipelines.local.malloc import tune_malloc
from imgrec.pipelines.options import parse_args

PROG = 'build-dataset'


def main(argv: typing.Sequence[str] | None = None) -> int:
    """Returns the exit status: 2 for a mistake in the options, found before Beam is imported; else the
    build's (``imgrec.pipelines.launcher.main``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    with Command(PROG) as command:
        parse_args(argv)  # --help exits here, and a mistake is one line
    if command.status:
        return command.status
    with Command(PROG) as loading:  # Beam's imports can fail too (a memory limit): one line, not a traceback
        from imgrec.pipelines import launcher  # pylint: disable=import-outside-toplevel  # Beam, once it is needed
    if loading.status:
        return loading.status
    return launcher.main(argv)


def cli() -> None:
    """The console entry point: run in a child process, so that even its death by a signal (out of memory)
    ends in one line (``imgrec.console.supervisor``)."""
    tune_malloc()
    supervise(PROG)
    run_command(main)


if __name__ == '__main__':
    cli()
