"""Whether a build takes up the records of a stopped run of itself (docs/build.md, "A stopped build"), decided
before the job runs; the claim on those runs' staging folders, held while the job reads them.

A stopped run is taken up only when it is the same build: the same ``identity()`` (record options and inputs'
options), the same output and the same previous version, no live lease on it (``imgrec.storage.resumption``), and
the build neither starts from zero on purpose (``--no_resume``, ``--full``, ``--clean``) nor runs where this
process does not wait for it (a template, ``--no_wait_until_finish``). Any other stopped run is cleaned up as
before, and one of other options is named in one line.
"""
import contextlib
import dataclasses

from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions

from imgrec.storage import resumption
from imgrec.storage.folder_io import delete_tree


def _waits(options):
    """Whether this process runs the job to its end (no template, not left to run alone)."""
    return not (options.view_as(GoogleCloudOptions).template_location
                or options.view_as(StandardOptions).no_wait_until_finish)


def _why_from_zero(config):
    return next((f'--{name}' for name, given in (('no_resume', not config.resume), ('full', config.full)) if given),
                None)


def take_up(config, facts, options):
    """(RefreshPlan with the stopped runs it takes up, their claimed leases): also cleans up every other stopped
    run the cleanup before the build left (``Output.tidy`` without ``resumable``), saying why in one line each."""
    output, plan = facts.destination, facts.refresh
    # With --clean the cleanup before the build removed every stopped run already.
    stopped = resumption.stopped_builds(output.root, output.storage) if not config.clean else []
    from_zero = _why_from_zero(config) or (None if _waits(options) else 'a job this process does not wait for')
    previous = facts.previous.version if facts.previous else None
    claims = []
    for run in stopped:
        why = from_zero or run.refusal(config.identity(), config.output, previous)
        if why is not None:
            print(f'build-dataset: not resuming the build stopped at {run.stopped_at} ({run.path}): {why}; starting '
                  f'from zero', flush=True)
            continue
        lease = resumption.claim(output.root, run, output.storage, facts.build_id)
        if lease is not None:
            claims.append((run, lease))
    output.tidy(clean=config.clean, resumable=False)
    if not claims:
        return plan, []
    runs = [run for run, _ in claims]
    stopped_at = max(runs, key=lambda run: run.last_written).stopped_at
    files = tuple(path for run in runs for path in resumption.spill_files(run.path, output.storage))
    print(f"build-dataset: resuming the build stopped at {stopped_at} ({', '.join(run.path for run in runs)}): its "
          f'records are checked and taken up, the rest decoded', flush=True)
    return dataclasses.replace(plan, stopped=tuple(run.path for run in runs), stopped_at=stopped_at,
                               resume_from=files), claims


def mark(config, facts, options):
    """Writes this build's ``resume.json`` into its staging folder (once its lease is held), so that a rerun can
    take up what it spilled should it stop; a template's job takes no lease, and gets none."""
    if options.view_as(GoogleCloudOptions).template_location:
        return
    output = facts.destination
    resumption.mark(facts.staging_dir(config), output.storage, config.identity(), config.output,
                    facts.previous.version if facts.previous else None, facts.created)


@contextlib.contextmanager
def held(claims, output):
    """The claims on the stopped runs taken up, held while the job reads them: once it ran to its end their
    folders are deleted (what it published holds what it took from them); a run that stops or fails leaves them,
    their leases released, for the next run of the same command."""
    try:
        yield
    except BaseException:
        for _, lease in claims:
            lease.release_quietly()
        raise
    for run, lease in claims:
        delete_tree(run.path, output.storage)
        lease.release_quietly()
