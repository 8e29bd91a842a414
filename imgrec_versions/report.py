"""The build report: ``report.html`` in a version folder, one self-contained page that opens offline.

Made from the version's files alone (dataset.json, labels.txt, quarantine.jsonl, duplicates.jsonl and
the shards), so the build's publish step writes it and ``dataset-report OUT[/VERSION]`` re-renders it.
Sample thumbnails come from the written records (what training sees), decoded with the contract's own
Example reader: no TensorFlow. Charts are matplotlib SVG; images are inline data URLs; no script.

    dataset-report OUT[/VERSION] [--build_seconds S]
"""
import base64
import collections
import datetime
import html
import io
import json
import os
import re
import sys

from apache_beam.io.filesystems import FileSystems
from PIL import Image

from contract import features as F, layout
from contract.example import decode_example
from contract.reasons import REASONS
from imgrec_imaging import image_ops
from imgrec_storage import fileio, gcs
from imgrec_versions import cli, shard_reader, version as version_lib
from imgrec_versions.units import human_bytes

SAMPLES_PER_CLASS = 8
MAX_CLASSES_SHOWN = 100
MAX_RECORDS_SCANNED = 5000  # stop looking for samples of rare classes after this many records
QUARANTINE_EXAMPLES = 5  # first sources shown per reason
MAX_SOURCE_BYTES = 20_000_000  # quarantined inputs larger than this get no thumbnail
DUPLICATES_SHOWN = 20
THUMBNAIL = 64  # longest side, pixels
_BUILD_SECONDS = re.compile(r'<meta name="build-seconds" content="([0-9.]+)">')

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;
vertical-align:top;font-size:.9em}th{background:#f4f4f4}td.n{text-align:right}
.grid{display:flex;flex-wrap:wrap;gap:4px;margin:.2em 0 .8em}.grid img{height:64px;border:1px solid #ccc}
figure{display:inline-block;margin:0 1em 1em 0}img.chart{max-width:100%}.muted{color:#777}
"""


def _data_url(data, mime):
    return f'data:{mime};base64,{base64.b64encode(data).decode()}'


def thumbnail(image):
    """A small JPEG data URL of a Pillow image."""
    image = image.convert('RGB')
    image.thumbnail((THUMBNAIL, THUMBNAIL))
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=75)
    return _data_url(out.getvalue(), 'image/jpeg')


def _svg(figure):
    """A matplotlib figure as an SVG data URL, with stable ids and no date so equal data give equal bytes."""
    import matplotlib

    with matplotlib.rc_context({'svg.hashsalt': 'report', 'svg.fonttype': 'none'}):
        out = io.StringIO()
        figure.savefig(out, format='svg', metadata={'Date': None}, bbox_inches='tight')
    return _data_url(out.getvalue().encode(), 'image/svg+xml')


def split_charts(name, info, labels):
    """(class histogram, shard sizes) of one split as SVG data URLs."""
    from matplotlib.figure import Figure

    counts = [info['class_counts'].get(label, 0) for label in labels]
    classes = Figure(figsize=(max(4, 0.35 * len(labels) + 1.5), 2.8))
    axes = classes.subplots()
    axes.bar(range(len(labels)), counts, color='#4c78a8')
    axes.set_xticks(range(len(labels)), labels, rotation=60 if len(labels) > 6 else 0, ha='right' if len(labels) > 6 else 'center',
                    fontsize=8)
    axes.set_ylabel('records')
    axes.set_title(f'{name}: records per class', fontsize=10)

    shards = info['shards']
    sizes = Figure(figsize=(max(4, 0.35 * len(shards) + 1.5), 2.8))
    axes = sizes.subplots()
    positions = range(len(shards))
    axes.bar(positions, [s['records'] for s in shards], color='#72b7b2', label='records')
    axes.set_ylabel('records')
    axes.set_xlabel('shard')
    axes.set_xticks(positions, [str(i) for i in positions], fontsize=8)
    megabytes = axes.twinx()
    megabytes.plot(positions, [s['bytes'] / 1e6 for s in shards], 'o-', color='#e45756', label='MB')
    megabytes.set_ylabel('MB')
    megabytes.set_ylim(bottom=0)
    axes.set_title(f'{name}: shard sizes (bars: records, dots: MB)', fontsize=10)
    return _svg(classes), _svg(sizes)


def sample_thumbnails(version, per_class=SAMPLES_PER_CLASS, max_records=MAX_RECORDS_SCANNED):
    """{label: [(source, thumbnail data URL)]} of the first records of each class shown, in split and shard
    order."""
    samples = collections.defaultdict(list)
    shown = set(version.document['labels'][:MAX_CLASSES_SHOWN])
    wanted, found, scanned = len(shown) * per_class, 0, 0
    for _, _, path in version_lib.shard_paths(version):
        if not FileSystems.exists(path):
            continue
        try:
            for serialized in shard_reader.read_shard(path):
                scanned += 1
                values = decode_example(serialized)
                label = values[F.LABEL_TEXT].decode('utf-8', 'replace')
                if label in shown and len(samples[label]) < per_class:
                    samples[label].append((values[F.SOURCE].decode('utf-8', 'replace'),
                                           thumbnail(Image.open(io.BytesIO(values[F.IMAGE_ENCODED])))))
                    found += 1
                if found >= wanted or scanned >= max_records:
                    return samples
        except ValueError:  # a damaged shard: verify-dataset names it; the report shows what it can
            continue
    return samples


def source_path(options, source):
    """Where the quarantined input ``source`` (relative to --input or as the manifest wrote it) is read."""
    if FileSystems.get_scheme(source) is not None or os.path.isabs(source):
        return source
    if options.get('input'):
        return layout.join(options['input'], source)
    if options.get('manifest'):
        return layout.join(options['manifest'].rsplit('/', 1)[0] if '/' in options['manifest'] else '.', source)
    return None


def source_thumbnail(options, source):
    """A thumbnail of a quarantined input when it can still be read and decoded at all, else None."""
    path = source_path(options, source)
    try:
        if path is None or not FileSystems.exists(path):
            return None
        if FileSystems.match([path])[0].metadata_list[0].size_in_bytes > MAX_SOURCE_BYTES:
            return None
        image, _ = image_ops.decode(fileio.read_bytes(path), (THUMBNAIL, THUMBNAIL), 'pad',
                                    max_pixels=options.get('max_pixels') or image_ops.DEFAULT_MAX_PIXELS)
        return thumbnail(image)
    except Exception:  # pylint: disable=broad-except  (unreadable or undecodable: that is why it is here)
        return None


def _table(headers, rows, numeric=()):
    head = ''.join(f'<th>{html.escape(h)}</th>' for h in headers)
    body = ''.join('<tr>' + ''.join(
        f'<td class="n">{cell}</td>' if i in numeric else f'<td>{cell}</td>' for i, cell in enumerate(row)) + '</tr>'
        for row in rows)
    return f'<table><tr>{head}</tr>{body}</table>'


def _e(value):
    return html.escape(str(value))


def _img(url, alt, css=''):
    return f'<img src="{url}" alt="{_e(alt)}" title="{_e(alt)}"{f" class={chr(34)}{css}{chr(34)}" if css else ""}>'


def published_path(version):
    """Where the version is published: the report may be written while it is still in a staging folder."""
    output = (version.document.get('options') or {}).get('output')
    return layout.join(output, version.document['version']) if output else version.path


def _quarantine_section(version_dir, options):
    """The quarantine by reason, with the first sources of each; reads quarantine.jsonl as a stream."""
    counts, first = collections.Counter(), collections.defaultdict(list)
    for item in version_lib.iter_jsonl(version_dir, layout.QUARANTINE_JSONL):
        counts[item['reason']] += 1
        if len(first[item['reason']]) < QUARANTINE_EXAMPLES:
            first[item['reason']].append(item)
    parts = [f'<h2>Quarantine</h2><p>{sum(counts.values())} inputs not written; the full list is '
             f'<code>{layout.QUARANTINE_JSONL}</code>.</p>']
    rows = []
    for reason, count in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])):
        examples = []
        for item in first[reason]:
            url = source_thumbnail(options, item['source'])
            examples.append((_img(url, item['source'], 'quarantined') + ' ' if url else '') +
                            f'<code>{_e(item["source"])}</code>: {_e(item["message"])}')
        if count > len(first[reason]):
            examples.append(f'<span class="muted">and {count - len(first[reason])} more</span>')
        rows.append([f'<code>{_e(reason)}</code><br><span class="muted">{_e(REASONS.get(reason, ""))}</span>',
                     count, '<br>'.join(examples)])
    if rows:
        parts.append(_table(['reason', 'inputs', 'first sources'], rows, numeric=(1,)))
    return parts


def _duplicates_section(version_dir):
    """The number of duplicates and the first few; reads duplicates.jsonl as a stream."""
    count, shown = 0, []
    for item in version_lib.iter_jsonl(version_dir, layout.DUPLICATES_JSONL):
        count += 1
        if len(shown) < DUPLICATES_SHOWN:
            shown.append([f'<code>{_e(item["source"])}</code>', f'<code>{_e(item["duplicate_of"])}</code>',
                          _e(item['label'])])
    parts = [f'<h2>Duplicates</h2><p>{count} inputs not written because the same bytes under the same label were '
             f'(full list: <code>{layout.DUPLICATES_JSONL}</code>).</p>']
    if shown:
        parts.append(_table(['source', 'same bytes as (written)', 'label'], shown))
    return parts


def render(version, build_seconds=None):
    """The report of ``version`` (an imgrec_versions.version.Version) as HTML text."""
    document, options = version.document, version.document.get('options') or {}
    build_seconds = round(build_seconds, 3) if build_seconds else None  # as recorded, so a re-render matches
    labels = document['labels']
    counts = document['counts']
    total_bytes = sum(s['bytes'] for info in document['splits'].values() for s in info['shards'])
    parts = [f'<h1>{_e(document["name"])} · version {_e(document["version"])}</h1>',
             f'<p>Built {_e(document["created"])} into <code>{_e(published_path(version))}</code>. '
             f'Images {document["image"]["height"]}×{document["image"]["width"]} {_e(document["image"]["format"])}; '
             f'{len(labels)} classes.</p>']
    if build_seconds:
        parts.append(f'<p id="build-time">Build time {build_seconds:.1f} s: {counts["inputs"] / build_seconds:.1f} '
                     f'input images/s, {counts["written"] / build_seconds:.1f} records/s, '
                     f'{human_bytes(total_bytes / build_seconds)}/s written.</p>')
    else:
        parts.append('<p id="build-time" class="muted">Build time not recorded.</p>')
    parts.append('<h2>Counts</h2>' + _table(
        ['inputs', 'written', 'quarantined', 'duplicates', 'non-image files ignored', 'bytes written'],
        [[counts['inputs'], counts['written'], counts['quarantined'], counts['duplicates'], counts['ignored'],
          human_bytes(total_bytes)]], numeric=range(6)))
    parts.append('<h2>Options</h2>' + _table(['option', 'value'], [
        [_e(key), f'<code>{_e(json.dumps(value, ensure_ascii=False))}</code>'] for key, value in sorted(options.items())]))

    parts.append('<h2>Splits</h2>')
    for name, info in document['splits'].items():
        classes, sizes = split_charts(name, info, labels)
        parts.append(f'<h3>{_e(name)}: {info["num_examples"]} records in {info["num_shards"]} shards '
                     f'({info["inputs"]} inputs, {info["quarantined"]} quarantined, {info["duplicates"]} duplicates)</h3>'
                     f'<figure>{_img(classes, f"{name} records per class", "chart")}</figure>'
                     f'<figure>{_img(sizes, f"{name} shard sizes", "chart")}</figure>')
        parts.append(_table(['shard', 'records', 'bytes'], [
            [_e(s['file']), s['records'], s['bytes']] for s in info['shards']], numeric=(1, 2)))

    samples = sample_thumbnails(version)
    parts.append(f'<h2>Samples</h2><p class="muted">The first records of each class as written (up to '
                 f'{SAMPLES_PER_CLASS} a class), as training reads them.</p>')
    for label in labels[:MAX_CLASSES_SHOWN]:
        images = ''.join(_img(url, source, 'sample') for source, url in samples.get(label, []))
        parts.append(f'<h3>{_e(label)}</h3><div class="grid">{images or "<span class=muted>no record read</span>"}</div>')
    if len(labels) > MAX_CLASSES_SHOWN:
        parts.append(f'<p class="muted">{len(labels) - MAX_CLASSES_SHOWN} more classes not shown.</p>')

    parts += _quarantine_section(version.path, options)
    parts += _duplicates_section(version.path)
    decoding = document.get('decoding') or {}
    parts.append('<h2>Decoding decisions</h2><p class="muted">What decoding did, counted over the written images; '
                 f'transparency composited on {_e(decoding.get("background"))}.</p>')
    parts.append(_table(['decision', 'images'], [
        [f'<code>{_e(key)}</code>', n] for key, n in sorted((decoding.get('decisions') or {}).items())], numeric=(1,)))

    meta = f'<meta name="build-seconds" content="{build_seconds:.3f}">' if build_seconds else ''
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">{meta}'
            f'<title>{_e(document["name"])} {_e(document["version"])}: build report</title>'
            f'<style>{_STYLE}</style></head><body>\n' + '\n'.join(parts) + '\n</body></html>\n')


def seconds_since(created):
    """Seconds from dataset.json's ``created`` (when the build was launched) to now: the build's time at publish."""
    start = datetime.datetime.strptime(created, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    return max((datetime.datetime.now(datetime.timezone.utc) - start).total_seconds(), 0.001)


def recorded_build_seconds(version_dir):
    """The build time an existing report.html recorded, or None."""
    path = layout.join(version_dir, layout.REPORT_HTML)
    if not FileSystems.exists(path):
        return None
    match = _BUILD_SECONDS.search(fileio.read_bytes(path).decode('utf-8', 'replace'))
    return float(match.group(1)) if match else None


def write_report(version_dir, build_seconds=None, version=None, policy=None):
    """Renders and writes ``report.html`` into ``version_dir`` (local or gs://); returns its path.

    ``version`` (an imgrec_versions.version.Version) spares reading back what the caller just wrote.
    """
    version = version or version_lib.load(version_dir)
    path = layout.join(version.path, layout.REPORT_HTML)
    fileio.write_bytes(path, render(version, build_seconds).encode('utf-8'), policy)
    return path


def main(argv=None):
    parser = cli.parser('dataset-report', "(Re-)render a version's report.html.")
    parser.add_argument('--build_seconds', type=float,
                        help='build time to show; default: what the existing report recorded')
    args = parser.parse_args(argv)
    gcs.connect_anonymously_to_emulator()
    try:
        version_dir = version_lib.resolve(args.path)
        seconds = args.build_seconds if args.build_seconds is not None else recorded_build_seconds(version_dir)
        path = write_report(version_dir, seconds)
    except version_lib.InspectionError as error:
        print(f'dataset-report: error: {error}', file=sys.stderr)
        return 2
    print(f'dataset-report: wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
