"""The publication protocol's test hooks: ``IMGREC_CRASH_AT`` and ``IMGREC_PAUSE_AT``, read in ``crash_point`` only,
at the points ``CRASH_POINTS`` names (docs/publication.md, "What a crash leaves")."""
import os
import signal

# Test hooks: the named point ends the process at once, as a SIGKILL would (IMGREC_CRASH_AT, exit status
# 137), or stops it until a SIGCONT (IMGREC_PAUSE_AT). Nothing else reads them.
CRASH_AT = 'IMGREC_CRASH_AT'
PAUSE_AT = 'IMGREC_PAUSE_AT'
CRASH_POINTS = (
    'metadata:after_files',        # the metadata files are in the staging folder, the report is not
    'publish:before_promote',      # the staging folder is complete (dataset.json in it); nothing moved
    'promote:after_rename',        # local: the version is published, LATEST not moved
    'promote:after_copy',          # gs://: every object but dataset.json copied to the version folder
    'promote:after_dataset_json',  # gs://: the version is published; the staging objects are all still there
    'promote:mid_cleanup',         # gs://: half the staging objects deleted
    'publish:after_latest',        # LATEST names the new version; the build lease is not yet released
    'prune:after_unpublish',       # a pruned version's dataset.json is gone, every other file still there
    'prune:mid_delete',            # half a pruned version's files deleted
)
LOCAL_ONLY = ('promote:after_rename',)
GCS_ONLY = ('promote:after_copy', 'promote:after_dataset_json', 'promote:mid_cleanup')


def crash_point(name: str) -> None:
    """Where the test hooks act (CRASH_POINTS names every call)."""
    if os.environ.get(CRASH_AT) == name:
        os._exit(137)  # pylint: disable=protected-access  # no cleanup, no finally: as a SIGKILL
    if os.environ.get(PAUSE_AT) == name:
        os.kill(os.getpid(), signal.SIGSTOP)
