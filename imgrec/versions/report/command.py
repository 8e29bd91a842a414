"""``dataset-report OUT[/VERSION] [--build_seconds S]``: (re-)renders a published version's report.html.

The build's publish step writes the report (``page.write_report``); this command draws it again from the
version's files, with the build time and pruning the first drawing recorded.
"""


from imgrec.console.command import Command, run_command
from imgrec.console.errors import UserError
from imgrec.versions import command_line, version as version_lib
from imgrec.versions.report.page import recorded_build_seconds, recorded_pruning, write_report

def main(argv=None):
    """Returns the exit status: 0 written, 2 no version or a usage mistake."""
    with Command('dataset-report') as command:
        parser = command_line.parser('dataset-report', "(Re-)render a version's report.html.")
        parser.add_argument('--build_seconds', type=float,
                            help='build time to show; default: what the existing report recorded')
        args = parser.parse_args(argv)
        try:
            with version_lib.reading(args.path) as version:  # a reader lease: --keep_versions leaves it alone
                version_dir = version.path
                seconds = args.build_seconds if args.build_seconds is not None else recorded_build_seconds(version_dir)
                path = write_report(version_dir, seconds, version, pruning=recorded_pruning(version_dir))
        except version_lib.InspectionError as error:
            raise UserError(str(error)) from None
        print(f'dataset-report: wrote {path}')
        return 0
    return command.status


def cli():
    """The ``dataset-report`` command."""
    run_command(main)


if __name__ == '__main__':
    cli()
