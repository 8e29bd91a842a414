"""The summary a finished build prints, read back from the dataset.json it published: one formatter for the
command line and for ``build()``'s result.
"""

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    StandardOptions,
)

from imgrec.contract import counters, layout, metadata, version_ref
from imgrec.pipelines.build_result import NothingChanged
from imgrec.pipelines.refresh import carried_line
from imgrec.storage import retries
from imgrec.transforms.labels import listed_names
from imgrec.transforms.publish import earlier_run, ranked_reasons, retention

# Dataflow workers install the project from this file (with requirements/worker.txt only: no TensorFlow).
TOP_REASONS = 3  # quarantine reasons the summary names
TOP_IGNORED = 5  # extensions of ignored files the summary names


def report(config, facts, result, options):
    """The summary of a finished build, or one line about a Dataflow job or template that was not waited for."""
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.template_location:
        return f'build-dataset: wrote the Dataflow job as a template to {cloud.template_location}'
    if getattr(result, 'has_job', False) and options.view_as(StandardOptions).no_wait_until_finish:
        return (f'build-dataset: submitted Dataflow job {result.job_id()}: https://console.cloud.google.com/'
                f'dataflow/jobs/{cloud.region}/{result.job_id()}?project={cloud.project}')
    if unchanged(result):
        lines = [f'build-dataset: nothing changed since version {facts.refresh.previous}: no new version '
                 f'published, LATEST stays (--force publishes anyway)']
        kept_settings = carried_line(config, facts.refresh.previous)
        if kept_settings:
            lines.append(kept_settings)
    else:
        lines = [summary(config, facts.destination)]
    built = not isinstance(result, NothingChanged)
    if built and earlier_run(result):
        lines.append(f'  version {config.version} stands as an earlier run of this build published it: this run '
                     f'published nothing new')
    kept = retention(result) if built else result.retention
    if kept:
        lines.append(f'  pruned to {kept.describe()}')
    untrusted = counter(result, counters.FACTS_DAMAGED) if built and not unchanged(result) else 0
    if untrusted:
        lines.append(f'  {_count(untrusted, "index row")} of version {facts.refresh.previous} did not check (their '
                     f'facts were damaged or copied from another row): decoded again')
    retried = retries.summary_line(result) if built else None
    if retried:
        lines.append(f'  {retried}')
    return '\n'.join(lines)


def unchanged(result):
    """Whether the build found nothing changed and published nothing: before the job ran, or in it."""
    return isinstance(result, NothingChanged) or bool(counter(result, counters.UNCHANGED))


def counter(result, name):
    """The value of the job's counter ``name`` (``imgrec.contract.counters``' rule), summed over steps.

    ``name`` is a ``imgrec.contract.counters.Counter``, or a bare name, summed over the namespaces that use it.
    """
    values = counters.read(result)
    return values[name] if isinstance(name, counters.Counter) else counters.by_name(values, name)


def _count(n, noun):
    return f'{n} {noun}' if n == 1 else f'{n} {noun}s'


def _split_line(name, split):
    """'train: 1986 examples (89.9%, asked 90.0%) in 16 shard(s)': the share got next to the share asked."""
    shares = (f" ({split['share']:.1%}, asked {split['requested_share']:.1%})"
              if split.get('share') is not None and split.get('requested_share') is not None else '')
    return f"  {name}: {split['num_examples']} examples{shares} in {split['num_shards']} shard(s)"


def _near_duplicates_lines(near):
    """What the near-duplicate step found and did, from dataset.json's ``near_duplicates``: a line, then the
    pairs kept under two labels and the earlier conflicts written again, when there are any."""
    if not near or near.get('mode') in (None, 'off'):
        yield '  near-duplicates: not looked for (--near_duplicates off)'
        return
    head, groups = f"  near-duplicates ({near['mode']})", near.get('groups') or 0
    if not groups:
        yield f'{head}: none found'
    else:
        found = f"{head}: {_count(groups, 'group')} (largest {_count(near.get('largest_group') or 0, 'image')})"
        across = f"{_count(near.get('pairs_across_labels') or 0, 'pair')} across classes"
        cut = near.get('links_cut') or 0
        cut = f", {_count(cut, 'link')} cut to bound group size" if cut else ''
        if near['mode'] == 'group':
            quarantined = (f", {_count(near.get('label_conflicts') or 0, 'image')} quarantined as label conflicts"
                           if near.get('conflicts') == 'quarantine' else f', {across} (kept)')
            yield (f"{found}, {_count(near.get('images_moved') or 0, 'image')} moved to keep groups together, "
                   f"{_count(near.get('pairs_across_splits') or 0, 'pair')} in two splits{cut}{quarantined}")
        else:
            yield f"{found}, {_count(near.get('pairs_across_splits') or 0, 'pair')} in two splits, {across}{cut}"
        pairs = near.get('label_conflict_pairs') or []
        if pairs and near.get('conflicts') != 'quarantine':
            shown = '; '.join(f"{p['source']} ({p['label']}) ~ {p['other']} ({p['other_label']})" for p in pairs[:3])
            more = (near.get('pairs_across_labels') or len(pairs)) - min(3, len(pairs))
            yield (f"  near-duplicates under two labels, both written: {shown}"
                   + (f" and {more} more" if more > 0 else '')
                   + ' (all in near_duplicates.jsonl and the report; --near_duplicate_conflicts quarantine removes them)')
    again = near.get('conflicts_written_again') or 0
    if again:
        yield (f"  {_count(again, 'image')} the previous version quarantined as near-duplicate label conflicts "
               f"{'was' if again == 1 else 'were'} decided again and written (--near_duplicate_conflicts keep)")


def _class_lines(document):
    """The empty classes and those with fewer images than splits (dataset.json's ``classes``), if any."""
    classes, lines = document.get('classes') or {}, []
    if single_class(document):
        lines.append(f"  warning: one class only ({document['labels'][0]!r}): a classifier learns nothing from it; "
                     f'give each class its own folder')
    if classes.get('empty'):
        lines.append(f"  empty classes (no image written): {listed_names(classes['empty'])}")
    if classes.get('fewer_than_splits'):
        written = {label: sum(split['class_counts'].get(label, 0) for split in document['splits'].values())
                   for label in classes['fewer_than_splits']}
        splits = metadata.num_splits(document)
        lines.append(f'  classes with fewer images than the {splits} splits: '
                     + listed_names(classes['fewer_than_splits'], lambda label: f'{label!r} ({written[label]})'))
    return lines


def _ignored_lines(ignored_files):
    """'  ignored, not images by name or bytes: 412 .heic (e.g. cats/IMG_1.heic), 3 .txt (...)', the most
    frequent first: what a build left out, named, so missing photos show."""
    if not ignored_files:
        return []
    ranked = sorted(ignored_files.items(), key=lambda item: (-item[1]['count'], item[0]))
    named = ', '.join(f"{table['count']} {key} (e.g. {table['example']})" for key, table in ranked[:TOP_IGNORED])
    more = len(ranked) - TOP_IGNORED
    return [f'  ignored, not images by name or bytes: {named}'
            + (f" and {sum(table['count'] for _, table in ranked[TOP_IGNORED:])} more under "
               f"{_count(more, 'other extension')}" if more > 0 else '')]


def resumed_lines(resumed, inputs):
    """'  resumed: 14000 of 20000 images from the build stopped at <time>; 3 spilled records refused (2 cut_short,
    1 source_changed)' of dataset.json's ``refresh.resumed`` (imgrec.transforms.resumed), when the build took up
    a stopped run of itself."""
    if not resumed:
        return []
    refused = resumed.get('refused') or {}
    line = (f"  resumed: {resumed.get('images', 0)} of {inputs} images from the build stopped at "
            f"{resumed.get('stopped_at')}")
    if refused:
        line += (f"; {_count(sum(refused.values()), 'spilled record')} refused ("
                 + ', '.join(f'{count} {reason}' for reason, count in sorted(refused.items())) + ')')
    return [line]


def single_class(document):
    """Whether the version holds one class only (dataset.json's labels): every image gets the same label."""
    return len(document.get('labels') or ()) == 1


def summary(config, output):
    """The build's outcome, read back from the published dataset.json (through ``output``'s storage, the
    job's): the counts, each split's share next to the share asked, the near-duplicates, the top
    quarantine reasons, the class problems, and where the quarantine list and the report are."""
    path = layout.join(config.version_dir, layout.DATASET_JSON)
    document = version_ref.parse_document(output.storage.read(path), path)
    counts, refreshed = document['counts'], document['refresh']
    lines = [f"build-dataset: wrote {counts['written']} of {counts['inputs']} images to {config.version_dir} "
             f"({counts['quarantined']} quarantined, {counts['duplicates']} duplicates, "
             f"{counts['ignored']} non-image files ignored)"]
    if refreshed['mode'] == 'incremental':
        damaged = refreshed.get('reuse_damaged')
        lines.append(f"  refresh of {refreshed['previous']}: {refreshed['reused']} reused, {refreshed['decoded']} "
                     f"decoded ({refreshed['new']} new, {refreshed['changed']} changed"
                     + (f", {damaged} damaged in {refreshed['previous']}" if damaged else '') +
                     f"), {refreshed['removed']} removed")
    lines.extend(resumed_lines(refreshed.get('resumed'), counts['inputs']))
    kept_settings = carried_line(config, refreshed.get('previous'))
    if kept_settings:
        lines.append(kept_settings)
    lines += [_split_line(name, split) for name, split in document['splits'].items()]
    lines += _near_duplicates_lines(document.get('near_duplicates'))
    quarantine = document.get('quarantine') or {}
    if quarantine.get('by_reason'):
        more = len(quarantine['by_reason']) - TOP_REASONS
        lines.append(f"  quarantined: {ranked_reasons(quarantine['by_reason'], TOP_REASONS)}"
                     + (f" and {_count(more, 'more reason')}" if more > 0 else '')
                     + f"; every input and why: {layout.join(config.version_dir, quarantine['file'])}")
    lines += _ignored_lines(document.get('ignored_files'))
    lines += _class_lines(document)
    lines.append(f'  report: {layout.join(config.version_dir, layout.REPORT_HTML)}')
    return '\n'.join(lines)
