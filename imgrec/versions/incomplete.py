"""The staging folders (``<version>.incomplete-<build id>``) that failed or killed builds left in an output,
as a build names them before it runs: what its cleanup removed, what is left with its report, and what
``--clean`` would remove. Only a folder no live lease holds is ever offered: a running build's is not
(docs/publication.md)."""
import collections

from imgrec.contract import layout
from imgrec.storage import leases

NAMED = 5  # folders a line names; past them, how many more

Left = collections.namedtuple('Left', 'name held report')  # held: a live build lease names it; report: its path


def staging_names(output):
    """The names of the staging folders in ``output`` (an ``Output``) now."""
    return [path.rstrip('/').rsplit('/', 1)[-1] for _, path in output.staging_folders()]


def left_folders(output):
    """[Left] of the staging folders in ``output`` (an ``Output``): listed before the leases, as the cleanup
    does (a build takes its lease before it writes, so a folder listed has its lease listed after)."""
    folders = output.staging_folders()
    live = leases.live(leases.read_all(output.storage, output.root)).staging
    found = []
    for _, path in folders:
        name = path.rstrip('/').rsplit('/', 1)[-1]
        report = layout.join(path, layout.REPORT_HTML)
        found.append(Left(name, name in live, report if output.storage.exists(report) else None))
    return found


def _names(items):
    shown = ', '.join(items[:NAMED])
    return shown + (f' and {len(items) - NAMED} more' if len(items) > NAMED else '')


def lines(output, before):
    """The lines a build prints after its cleanup (``Output.tidy``), given the staging folder names
    found ``before`` it: those it removed, those failed or killed builds left (with their reports), which
    ``--clean`` removes, and those running builds hold, which it never does."""
    left = left_folders(output)
    said, names = [], {folder.name for folder in left}
    removed = [name for name in before if name not in names]
    if removed:
        said.append(f'build-dataset: removed {len(removed)} staging folder(s) of failed or killed builds'
                    f': {_names(removed)}')
    stale = [folder for folder in left if not folder.held]
    if stale:
        described = [folder.name + (f' (report: {folder.report})' if folder.report else '') for folder in stale]
        said.append(f'build-dataset: {len(stale)} staging folder(s) of failed or killed builds in {output.root}: '
                    f'{_names(described)}; --clean removes {"it" if len(stale) == 1 else "them"}')
    held = [folder.name for folder in left if folder.held]
    if held:
        said.append(f'build-dataset: {len(held)} staging folder(s) of running builds (a live lease holds '
                    f'{"it" if len(held) == 1 else "them"}; --clean never removes one): {_names(held)}')
    return said
