"""A failed build's report: ``report.html`` in its staging folder, named in the failure line.

A build that fails on purpose (``BuildFailed``: the split shares missed, too many inputs quarantined)
publishes nothing, and that is when a report is needed most. The step that fails leaves what it knew
(``known``: counts, the split dealing) in ``layout.BUILD_FAILURE_JSON`` of the staging folder, beside the
``quarantine.jsonl`` the publish step writes first; the launcher, which holds the build's lease until
then, renders the page from them (``report.page.render_failed``) and adds its path to the line:
``build-dataset: failed: ... (report: OUT/<version>.incomplete-<build id>/report.html)``.
"""
import contextlib
import json

from imgrec.contract import layout
from imgrec.console.command import was_interrupted
from imgrec.console.errors import BuildFailed, build_failure_message
from imgrec.storage import storage as storage_lib

# Seconds the report's writes are retried for: the storage may be why the build failed, and the line that
# says so must not wait the build's whole --retry_deadline again.
WRITE_DEADLINE_S = 30.0


def record(staging_dir, facts, storage=None):
    """Writes ``facts`` (a JSON-able dict of what a failing step counted) into the staging folder, through
    ``storage`` (its own when None), for the failed build's report; nothing without a staging folder (a step
    run on its own, in a test)."""
    if staging_dir:
        path = layout.join(staging_dir, layout.BUILD_FAILURE_JSON)
        storage_lib.given_or_default(path, storage).write(path, json.dumps(facts, sort_keys=True, ensure_ascii=False).encode())


@contextlib.contextmanager
def known(staging_dir, facts, storage=None):
    """Around a step's checks: when one fails the build, ``record``s ``facts``, then lets the failure go on."""
    try:
        yield
    except BuildFailed:
        record(staging_dir, facts, storage)
        raise


def read_known(staging_dir, storage=None):
    """What the failing step left (``known``), or {} when it left nothing (a failure elsewhere)."""
    path = layout.join(staging_dir, layout.BUILD_FAILURE_JSON)
    found = storage_lib.given_or_default(staging_dir, storage).read_versioned(path)
    return {} if found is None else json.loads(found.data)


def write_report(staging_dir, failure, storage=None):
    """Renders the failed build's report into ``staging_dir``; returns its path. ``failure``: the
    ``report.page.render_failed`` fields but ``known``. Leaves ``layout.BUILD_FAILURE_JSON`` there too (empty
    when the failing step left nothing): the mark by which a later cleanup knows the folder's build ended
    (``tidying.tidy``), as a version's own report.html, written before promotion, cannot say."""
    from imgrec.versions.report import page  # pylint: disable=import-outside-toplevel  (its imports, only on a failure)

    path = layout.join(staging_dir, layout.REPORT_HTML)
    storage = storage_lib.given_or_default(staging_dir, storage)
    known = read_known(staging_dir, storage)
    text = page.render_failed(staging_dir, dict(failure, known=known), storage)
    if not known:
        storage.write(layout.join(staging_dir, layout.BUILD_FAILURE_JSON), b'{}')
    storage.write(path, text.encode('utf-8'))
    return path


@contextlib.contextmanager
def reporting(staging_dir, failure, storage=None):
    """Around a build's run: a BuildFailed (however the runner wrapped it) gets its report written into
    ``staging_dir`` and comes out as a BuildFailed whose line ends ``(report: PATH)``. ``failure``: the
    build's name, version, created, options and previous (what LATEST named). A report that cannot be
    written leaves the line as it was; other errors and Ctrl-C pass untouched."""
    try:
        yield
    except Exception as error:  # pylint: disable=broad-except  (a runner wraps our BuildFailed in its own types)
        message = None if was_interrupted(error) else build_failure_message(error)
        if message is None:
            raise
        try:
            storage = storage_lib.given_or_default(staging_dir, storage)
            path = write_report(staging_dir, dict(failure, reason=message),
                                storage.with_retry(storage.retry._replace(
                                    deadline_s=min(WRITE_DEADLINE_S, storage.retry.deadline_s))))
        except Exception:  # pylint: disable=broad-except  (the failure's own line matters more than its report)
            raise BuildFailed(message) from error
        raise BuildFailed(f'{message} (report: {path})') from error
