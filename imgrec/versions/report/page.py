"""The report as one self-contained page (``render``), the failed build's page (``render_failed``), and
writing them with their state: the build time and pruning a re-render shows again live in a JSON sidecar
beside ``report.html`` (``layout.REPORT_STATE_JSON``), not in the page.
"""
import datetime
import json
import re


from imgrec.contract import layout, metadata
from imgrec.storage import storage as storage_lib
from imgrec.versions import version as version_lib
from imgrec.versions.units import human_bytes
from imgrec.versions.report.facts import (MAX_CLASSES_SHOWN, Pruning, conflict_pairs, image_facts, near_duplicate_pairs,
                                          published_path, sample_thumbnails, samples_per_class)
from imgrec.versions.report.sections import (changes_section, class_table_section, duplicates_section, escape, img,
                                             inputs_section, near_duplicates_section, options_section, pruning_section,
                                             quarantine_section, shares_section, shares_table, sizes_section,
                                             split_section, table, warnings_section)

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;
vertical-align:top;font-size:.9em}th{background:#f4f4f4}td.n{text-align:right}
.grid{display:flex;flex-wrap:wrap;gap:4px;margin:.2em 0 .8em}.grid img{height:64px;border:1px solid #ccc}
figure{display:inline-block;margin:0 1em 1em 0}img.chart{max-width:100%}.muted{color:#777}
nav ol{columns:3;margin:.3em 0}#class-problems li,#failure{color:#9a3b00}
.conflict-pair{display:flex;align-items:flex-end;gap:.5em;margin:.4em 0;color:#222}
figure.conflict{margin:0}figure.conflict img{height:96px;border:1px solid #ccc}
"""


_HEADING = re.compile(r'<h2 id="([^"]+)">([^<]+)</h2>')


def contents(parts):
    """The table of contents of a page's ``parts``: a link to each h2 that has an id, in order."""
    links = ''.join(f'<li><a href="#{anchor}">{title}</a></li>' for anchor, title in _HEADING.findall(''.join(parts)))
    return f'<nav id="contents"><strong>Contents</strong><ol>{links}</ol></nav>'


def render(version, build_seconds=None, pruning=None, storage=None):
    """The report of ``version`` (an imgrec.versions.version.Version) as HTML text; ``pruning`` (a
    Pruning) when known. Read through ``storage`` (the job's: on a worker, its options' credentials)
    when given."""
    document, options = version.document, version.document.get('options') or {}
    build_seconds = round(build_seconds, 3) if build_seconds else None  # as recorded, so a re-render matches
    labels = document['labels']
    counts = document['counts']
    total_bytes = sum(s['bytes'] for info in document['splits'].values() for s in info['shards'])
    head = [f'<h1>{escape(document["name"])} · version {escape(document["version"])}</h1>',
            f'<p>Built {escape(document["created"])} into <code>{escape(published_path(version))}</code>. '
            f'Images {"×".join(map(str, metadata.image_shape(document)[:2]))} {escape(document["image"]["format"])}; '
            f'{len(labels)} classes.</p>']
    if build_seconds:
        head.append(f'<p id="build-time">Build time {build_seconds:.1f} s: {counts["inputs"] / build_seconds:.1f} '
                    f'input images/s, {counts["written"] / build_seconds:.1f} records/s, '
                    f'{human_bytes(total_bytes / build_seconds)}/s written.</p>')
    else:
        head.append('<p id="build-time" class="muted">Build time not recorded.</p>')
    parts = ['<h2 id="counts">Counts</h2>' + table(
        ['inputs', 'written', 'quarantined', 'duplicates', 'non-image files ignored', 'bytes written'],
        [[counts['inputs'], counts['written'], counts['quarantined'], counts['duplicates'], counts['ignored'],
          human_bytes(total_bytes)]], numeric=range(6))]
    parts += inputs_section(document)
    near = near_duplicate_pairs(version.path, storage=storage)
    conflicting = {source for pair in conflict_pairs(document) for source in (pair['source'], pair['other'])}
    facts = image_facts(version.path, document, {row['source'] for pair in near[1] for row in pair[3:]} | conflicting,
                        storage)
    parts += warnings_section(document, version, facts, storage)
    parts += shares_section(document)
    parts += options_section(options, document.get('record_options'))
    parts += class_table_section(document, labels)
    parts.append('<h2 id="splits">Splits</h2>')
    for name, info in document['splits'].items():
        parts += split_section(name, info, labels)
    parts += sizes_section(document, facts)
    parts += near_duplicates_section(version, facts, near, storage)
    parts += changes_section(version, storage)
    parts += pruning_section(pruning)

    per_class = samples_per_class(len(labels))
    samples = sample_thumbnails(version, per_class, storage=storage)
    parts.append(f'<h2 id="samples">Samples</h2><p class="muted">The first records of each class as written (up to '
                 f'{per_class} a class), as training reads them.</p>')
    for label in labels[:MAX_CLASSES_SHOWN]:
        images = ''.join(img(url, source, 'sample') for source, url in samples.get(label, []))
        parts.append(f'<h3>{escape(label)}</h3><div class="grid">{images or "<span class=muted>no record read</span>"}</div>')
    if len(labels) > MAX_CLASSES_SHOWN:
        parts.append(f'<p class="muted">{len(labels) - MAX_CLASSES_SHOWN} more classes not shown.</p>')

    parts += quarantine_section(version.path, options, document['record_options'].get('max_pixels'), storage)
    parts += duplicates_section(version.path, storage)
    decoding = document.get('decoding') or {}
    parts.append('<h2 id="decoding">Decoding decisions</h2><p class="muted">What decoding did, counted over the '
                 f'written images; transparency composited on {escape(decoding.get("background"))}.</p>')
    parts.append(table(['decision', 'images'], [
        [f'<code>{escape(key)}</code>', n] for key, n in sorted((decoding.get('decisions') or {}).items())], numeric=(1,)))

    return _page(f'{document["name"]} {document["version"]}: build report', head, parts)


def _page(title, head, parts):
    """The page: ``head`` (title and summary lines), a table of contents, then the sections ``parts``."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{escape(title)}</title><style>{_STYLE}</style></head><body>\n'
            + '\n'.join([*head, contents(parts), *parts]) + '\n</body></html>\n')


FAILED_COUNTS = ('inputs', 'written', 'quarantined', 'duplicates', 'ignored')


def render_failed(staging_dir, failure, storage=None):
    """The report of a build that failed, as HTML text: why, and what it knew (``imgrec.versions.failed_build``).

    ``failure``: name, version, created, options, previous (the version LATEST named, or None), reason (the
    failure line's message) and known (what the failing step counted: ``counts`` and ``splits`` from the
    publish step, ``dealt`` {split: images} from the split check; {} from elsewhere). The quarantine shows
    when the build got as far as listing it. Read through ``storage`` (the job's) when given.
    """
    options, known = failure.get('options') or {}, failure.get('known') or {}
    previous = failure.get('previous')
    head = [f'<h1>{escape(failure["name"])} · version {escape(failure["version"])} · build failed</h1>',
            f'<p id="failure"><strong>The build failed and published nothing</strong>: {escape(failure["reason"])}</p>',
            f'<p>Started {escape(failure["created"])}; <code>{layout.LATEST}</code> '
            + (f'still names version <code>{escape(previous)}</code>' if previous else 'names no version yet')
            + f'. This page is in the build\'s staging folder, <code>{escape(staging_dir)}</code>.</p>']
    parts = ['<h2 id="counts">Counts</h2>']
    counts, splits = known.get('counts'), known.get('splits') or {}
    if counts:
        parts.append(table(['inputs', 'written', 'quarantined', 'duplicates', 'non-image files ignored'],
                            [[counts.get(key, '') for key in FAILED_COUNTS]], numeric=range(5)))
        per_split = [[escape(split), *(row.get(key, '') for key in FAILED_COUNTS[:4])] for split, row in sorted(splits.items())]
        parts.append(table(['split', *FAILED_COUNTS[:4]], per_split, numeric=range(1, 5)))
    else:
        dealt = sum((known.get('dealt') or {}).values())
        parts.append('<p class="muted">Inputs, quarantine and duplicates not counted: the build stopped before '
                     'its publish step counted them' + (f'; {dealt} images were dealt to the splits.' if dealt else '.')
                     + '</p>')
    dealt = known.get('dealt') or {split: row.get('written', 0) for split, row in splits.items()}
    if dealt:
        parts += ['<h2 id="shares">Split shares</h2>',
                  '<p>Each split\'s share of the images ' + ('as they were dealt, before any shard was written'
                                                             if known.get('dealt') else 'written to shards')
                  + ', next to the share its weight (<code>--splits</code>) asked for.</p>',
                  shares_table(dealt, options.get('splits') or {})]
    quarantine = layout.join(staging_dir, layout.QUARANTINE_JSONL)
    if storage_lib.given_or_default(quarantine, storage).exists(quarantine):
        parts += quarantine_section(staging_dir, options, options.get('max_pixels'), storage)
    else:
        parts.append('<h2 id="quarantine">Quarantine</h2><p class="muted">Not listed: the build stopped before '
                     'its publish step wrote the quarantine.</p>')
    parts += options_section(options)
    parts.append('<h2 id="left">What it left</h2><p>This staging folder, kept for diagnosis. A later build into '
                 'the same output removes it once a newer version is published there, and one run with '
                 '<code>--clean</code> removes it at once; neither while a running build holds a lease on it.</p>')
    return _page(f'{failure["name"]} {failure["version"]}: failed build', head, parts)


def seconds_since(created):
    """Seconds from dataset.json's ``created`` (when the build was launched) to now: the build's time at publish."""
    start = datetime.datetime.strptime(created, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    return max((datetime.datetime.now(datetime.timezone.utc) - start).total_seconds(), 0.001)


def _recorded_state(version_dir, storage=None):
    """The report's sidecar of ``version_dir`` as a dict ({} when there is none, or it cannot be read)."""
    path = layout.join(version_dir, layout.REPORT_STATE_JSON)
    storage = storage_lib.given_or_default(path, storage)
    try:
        state = json.loads(storage.read(path)) if storage.exists(path) else {}
    except ValueError:  # a damaged sidecar costs a re-render its build time, nothing more
        return {}
    return state if isinstance(state, dict) else {}


def recorded_build_seconds(version_dir, storage=None):
    """The build time the report's sidecar recorded, or None (``storage``: the folder's, when given)."""
    seconds = _recorded_state(version_dir, storage).get('build_seconds')
    return float(seconds) if isinstance(seconds, (int, float)) else None


def recorded_pruning(version_dir, storage=None):
    """The Pruning the report's sidecar recorded, or None."""
    pruning = _recorded_state(version_dir, storage).get('pruning')
    if not isinstance(pruning, dict):
        return None
    return Pruning(pruning.get('keep_versions'), tuple(pruning.get('versions') or ()))


def write_report(version_dir, build_seconds=None, version=None, storage=None, pruning=None):
    """Renders and writes ``report.html``, and its sidecar of what a re-render shows again, into ``version_dir``
    (local or gs://) through ``storage`` (its own when None); returns the page's path.

    ``version`` (an imgrec.versions.version.Version) spares reading back what the caller just wrote.
    """
    version = version or version_lib.load(version_dir, storage)
    build_seconds = round(build_seconds, 3) if build_seconds else None  # as render shows it, so a re-render matches
    state = {'build_seconds': build_seconds,
             'pruning': None if pruning is None else {'keep_versions': pruning.keep_versions,
                                                      'versions': list(pruning.versions)}}
    path = layout.join(version.path, layout.REPORT_HTML)
    storage = storage_lib.given_or_default(path, storage)
    storage.write(layout.join(version.path, layout.REPORT_STATE_JSON),
                json.dumps(state, ensure_ascii=False, sort_keys=True).encode('utf-8'))
    storage.write(path, render(version, build_seconds, pruning, storage).encode('utf-8'))
    return path
