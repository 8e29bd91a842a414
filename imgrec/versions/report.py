"""The build report: ``report.html`` in a version folder, one self-contained page that opens offline.

Made from the version's files alone (dataset.json, labels.txt, quarantine.jsonl, duplicates.jsonl and
the shards), so the build's publish step writes it and ``dataset-report OUT[/VERSION]`` re-renders it.
Sample thumbnails come from the written records (what training sees), decoded with the contract's own
Example reader: no TensorFlow. Charts are SVG (``charts``); images are inline data URLs; no script.
A build that fails gets a page of its own, of what it knew (``render_failed``, ``failed_build``).

    dataset-report OUT[/VERSION] [--build_seconds S]
"""
import base64
import collections
import datetime
import html
import io
import json
import re

from PIL import Image

from imgrec.contract import features as F, index as index_lib, layout, metadata, tfrecord
from imgrec.contract.example import decode_example
from imgrec.contract.reasons import REASONS
from imgrec.console.command import Command, run_command
from imgrec.console.errors import UserError
from imgrec.imaging import image_ops
from imgrec.storage import publication, storage
from imgrec.versions import charts, command_line, shard_reader, version as version_lib
from imgrec.versions.units import human_bytes

SAMPLES_PER_CLASS = 8
MAX_SAMPLES = 160  # thumbnails in all: past 20 classes, fewer a class (at least 4), over the first 40 classes
MAX_CLASSES_SHOWN = 40
MAX_BARS = 40  # past this many classes or shards, a chart shows their distribution instead of one bar each
EXTREMES = 10  # past MAX_BARS, tables show this many of the smallest and the largest
NEAR_DUPLICATE_PAIRS = 8  # pairs shown of each kind: across splits, the farthest and the nearest
PAIR_THUMBNAIL = 48
CONFLICT_THUMBNAIL = 96  # a near-duplicate pair under two labels, side by side in the Warnings
MAX_RECORDS_SCANNED = 5000  # stop looking for samples of rare classes after this many records
QUARANTINE_EXAMPLES = 5  # first sources shown per reason
MAX_SOURCE_BYTES = 20_000_000  # quarantined inputs larger than this get no thumbnail
DUPLICATES_SHOWN = 20
THUMBNAIL = 64  # longest side, pixels
# A warning when the largest class holds more than this many times the written images of the smallest: past
# it a model sees the smallest classes too rarely to learn them without class weights or more images.
IMBALANCE_RATIO = 10
_BUILD_SECONDS = re.compile(r'<meta name="build-seconds" content="([0-9.]+)">')
_PRUNING = re.compile(r'<meta name="pruning" content="([^"]*)">')

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


def _data_url(data, mime):
    return f'data:{mime};base64,{base64.b64encode(data).decode()}'


def thumbnail(image, side=THUMBNAIL):
    """A small JPEG data URL of a Pillow image."""
    image = image.convert('RGB')
    image.thumbnail((side, side))
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=75)
    return _data_url(out.getvalue(), 'image/jpeg')


def _svg(text):
    """An SVG chart (``charts``) as a data URL."""
    return _data_url(text.encode(), 'image/svg+xml')


def split_charts(name, info, labels):
    """(records per class, shard sizes) of one split as SVG data URLs: one bar a class or shard up to
    MAX_BARS of them, else their distribution, so the chart's size does not grow with them."""
    counts = [info['class_counts'].get(label, 0) for label in labels]
    if len(labels) <= MAX_BARS:
        classes = charts.bar_chart(f'{name}: records per class', labels, counts, ylabel='records', color='#4c78a8')
    else:
        classes = _histogram(f'{name}: records per class, {len(labels)} classes', counts, 'records in a class')
    shards = info['shards']
    if len(shards) <= MAX_BARS:
        sizes = charts.bar_chart(f'{name}: shard sizes (bars: records, dots: MB)', [str(i) for i in range(len(shards))],
                                 [s['records'] for s in shards], ylabel='records', xlabel='shard', color='#72b7b2',
                                 line=([s['bytes'] / 1e6 for s in shards], 'MB', '#e45756'), rotate=False)
    else:
        sizes = _histogram(f'{name}: shard sizes, {len(shards)} shards', [s['bytes'] / 1e6 for s in shards],
                           'MB in a shard', color='#72b7b2')
    return _svg(classes), _svg(sizes)


def _histogram(title, values, xlabel, *, bins=12, log=False, color='#4c78a8'):
    """A histogram chart (SVG text) of ``values`` with the count on each bar: an aggregate of any size."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    log = log and values.size and values.min() > 0
    if log:
        edges = np.geomspace(values.min(), max(values.max(), values.min() * 1.01), bins + 1)
    else:
        edges = np.histogram_bin_edges(values, bins=bins) if values.size else np.linspace(0, 1, bins + 1)
    counts, edges = np.histogram(values, bins=edges)
    return charts.bar_chart(title, None, [int(n) for n in counts], ylabel='count', xlabel=xlabel, color=color,
                            edges=[float(edge) for edge in edges], log=bool(log))


def samples_per_class(num_classes):
    """Thumbnails a class: SAMPLES_PER_CLASS, fewer (at least 4) when many classes share MAX_SAMPLES."""
    return max(4, min(SAMPLES_PER_CLASS, MAX_SAMPLES // max(1, min(num_classes, MAX_CLASSES_SHOWN))))


def sample_thumbnails(version, per_class=None, max_records=MAX_RECORDS_SCANNED, files=None):
    """{label: [(source, thumbnail data URL)]} of the first records of each class shown, in split and shard
    order (read through ``files``, the job's storage, when given)."""
    per_class = per_class or samples_per_class(len(version.document['labels']))
    samples = collections.defaultdict(list)
    shown = set(version.document['labels'][:MAX_CLASSES_SHOWN])
    wanted, found, scanned = len(shown) * per_class, 0, 0
    for _, _, path in version_lib.shard_paths(version):
        if not storage.given_or_default(path, files).exists(path):
            continue
        try:
            for serialized in shard_reader.read_shard(path, files):
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
    if not storage.is_relative(source):
        return source
    if options.get('input'):
        return layout.join(options['input'], source)
    if options.get('manifest'):
        return layout.join(options['manifest'].rsplit('/', 1)[0] if '/' in options['manifest'] else '.', source)
    return None


def source_thumbnail(options, source, max_pixels, files=None):
    """A thumbnail of a quarantined input when it can still be read and decoded at all, else None; read
    through ``files`` (the job's storage, handed on to the input's path) when given."""
    path = source_path(options, source)
    try:
        files = storage.given_or_default(path, files) if path is not None else None
        found = files.stat(path) if files is not None else None
        if found is None or found.size > MAX_SOURCE_BYTES:
            return None
        image, _ = image_ops.decode(files.read(path), (THUMBNAIL, THUMBNAIL), 'pad',
                                    max_pixels=max_pixels or image_ops.DEFAULT_MAX_PIXELS)
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


def _quarantine_section(version_dir, options, max_pixels, files=None):
    """The quarantine by reason, with the first sources of each; reads quarantine.jsonl as a stream."""
    counts, first = collections.Counter(), collections.defaultdict(list)
    for item in version_lib.iter_jsonl(version_dir, layout.QUARANTINE_JSONL, files):
        counts[item['reason']] += 1
        if len(first[item['reason']]) < QUARANTINE_EXAMPLES:
            first[item['reason']].append(item)
    parts = [f'<h2 id="quarantine">Quarantine</h2><p>{sum(counts.values())} inputs not written; the full list is '
             f'<code>{layout.QUARANTINE_JSONL}</code>.</p>']
    rows = []
    for reason, count in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])):
        examples = []
        for item in first[reason]:
            url = source_thumbnail(options, item['source'], max_pixels, files)
            examples.append((_img(url, item['source'], 'quarantined') + ' ' if url else '') +
                            f'<code>{_e(item["source"])}</code>: {_e(item["message"])}')
        if count > len(first[reason]):
            examples.append(f'<span class="muted">and {count - len(first[reason])} more</span>')
        rows.append([f'<code>{_e(reason)}</code><br><span class="muted">{_e(REASONS.get(reason, ""))}</span>',
                     count, '<br>'.join(examples)])
    if rows:
        parts.append(_table(['reason', 'inputs', 'first sources'], rows, numeric=(1,)))
    return parts


def _duplicates_section(version_dir, files=None):
    """The number of duplicates and the first few; reads duplicates.jsonl as a stream."""
    count, shown = 0, []
    for item in version_lib.iter_jsonl(version_dir, layout.DUPLICATES_JSONL, files):
        count += 1
        if len(shown) < DUPLICATES_SHOWN:
            shown.append([f'<code>{_e(item["source"])}</code>', f'<code>{_e(item["duplicate_of"])}</code>',
                          _e(item['label'])])
    parts = [f'<h2 id="duplicates">Duplicates</h2><p>{count} inputs not written because the same bytes under the '
             f'same label were (full list: <code>{layout.DUPLICATES_JSONL}</code>).</p>']
    if shown:
        parts.append(_table(['source', 'same bytes as (written)', 'label'], shown))
    return parts


def _link(name):
    """A relative link to a file of the version: it works where the page is opened from its folder."""
    return f'<a href="{_e(name)}"><code>{_e(name)}</code></a>'


def index_parts(version_dir, document, columns, names=None, files=None):
    """Yields each part of the record index (those ``names``, when given) as a pyarrow Table of the ``columns``
    it has: one small part in memory at a time. Nothing for a version without an index."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    described = document.get('index') or {}
    present = [column for column in columns if column in (described.get('columns') or {})]
    for name in described.get('files') or () if names is None else names:
        path = layout.join(version_dir, name)
        store = storage.given_or_default(path, files)
        if not store.exists(path):
            continue
        data = store.read(path)
        # ParquetFile, not read_table: the latter imports pyarrow.dataset and pyarrow.compute, 0.3 s of a build.
        yield pq.ParquetFile(io.BytesIO(data)).read(columns=present)


class ImageFacts(collections.namedtuple('ImageFacts', 'widths heights upscaled where')):
    """The written images' source sizes (numpy arrays) and upscaled count, and where the records of some
    sources are."""


def image_facts(version_dir, document, wanted=(), files=None):
    """ImageFacts from one pass over the index; ``where`` = {source: (shard, offset, length)} of ``wanted``.
    The sizes are held as numpy arrays: 16 bytes an image. Plain numpy and lists, not pyarrow.compute,
    whose import costs a build 0.25 s."""
    import numpy as np

    wanted, widths, heights, upscaled, where = set(wanted), [], [], 0, {}
    columns = (index_lib.SOURCE, index_lib.SOURCE_WIDTH, index_lib.SOURCE_HEIGHT, index_lib.UPSCALED,
               index_lib.SHARD, index_lib.OFFSET, index_lib.LENGTH)
    for part in index_parts(version_dir, document, columns, files=files):
        names = set(part.column_names)
        if {index_lib.SOURCE_WIDTH, index_lib.SOURCE_HEIGHT} <= names:
            # Sizes not recorded are nulls, NaN as floats: kept only where both are known.
            part_widths = np.asarray(part[index_lib.SOURCE_WIDTH].to_numpy(), dtype=float)
            part_heights = np.asarray(part[index_lib.SOURCE_HEIGHT].to_numpy(), dtype=float)
            known = ~(np.isnan(part_widths) | np.isnan(part_heights))
            widths.append(part_widths[known].astype(np.int64))
            heights.append(part_heights[known].astype(np.int64))
        if index_lib.UPSCALED in names:
            upscaled += sum(1 for value in part[index_lib.UPSCALED].to_pylist() if value)
        if wanted and index_lib.SOURCE in names:
            sources = part[index_lib.SOURCE].to_pylist()
            rows = [i for i, source in enumerate(sources) if source in wanted]
            if rows:
                shard, offset, length = (part[name].to_pylist() for name in
                                         (index_lib.SHARD, index_lib.OFFSET, index_lib.LENGTH))
                for i in rows:
                    where[sources[i]] = (shard[i], offset[i], length[i])
    join = lambda arrays: np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)  # noqa: E731
    return ImageFacts(join(widths), join(heights), upscaled, where)



def record_thumbnail(version_dir, location, side=PAIR_THUMBNAIL, files=None):
    """A thumbnail of the written record at ``location`` (shard, offset, length): one ranged read."""
    shard, offset, length = location
    try:
        path = layout.join(version_dir, shard)
        frame = storage.given_or_default(path, files).read_range(path, offset, offset + length)
        values = decode_example(tfrecord.unframe(frame))
        return thumbnail(Image.open(io.BytesIO(values[F.IMAGE_ENCODED])), side)
    except Exception:  # pylint: disable=broad-except  (a damaged shard: verify-dataset names it)
        return None


def _groups(version_dir, files=None):
    """The rows of near_duplicates.jsonl a group at a time: the file is sorted by group."""
    rows = []
    for row in version_lib.iter_jsonl(version_dir, layout.NEAR_DUPLICATES_JSONL, files):
        if rows and row['group'] != rows[0]['group']:
            yield rows
            rows = []
        rows.append(row)
    if rows:
        yield rows


def _keep(kept, item, limit, largest=False):
    """Adds ``item`` to ``kept`` and trims it now and then to the ``limit`` smallest (or largest)."""
    kept.append(item)
    if len(kept) > 4 * limit:
        kept.sort(key=lambda pair: pair[:3], reverse=largest)
        del kept[limit:]


def near_duplicate_pairs(version_dir, limit=NEAR_DUPLICATE_PAIRS, files=None):
    """(pairs listed, [pair shown]) of near_duplicates.jsonl, read as a stream a group at a time.

    A pair is an image and its nearest (each pair once): (distance, source, source, row, row). Shown: up
    to ``limit`` pairs in two splits (the nearest first), then the ``limit`` farthest apart (where a false
    group would show) and the ``limit`` nearest, each pair once.
    """
    across, farthest, nearest, listed = [], [], [], 0
    for rows in _groups(version_dir, files):
        by_source = {row['source']: row for row in rows}
        pairs = {}
        for row in rows:
            other = by_source.get(row['nearest'])
            if other is not None:
                first, second = sorted((row, other), key=lambda r: r['source'])
                pairs[(first['source'], second['source'])] = (row['distance'], first['source'], second['source'],
                                                              first, second)
        for pair in pairs.values():
            listed += 1
            if pair[3]['split'] != pair[4]['split']:
                _keep(across, pair, limit)
            _keep(farthest, pair, limit, largest=True)
            _keep(nearest, pair, limit)
    shown, seen = [], set()
    for kept, largest in ((across, False), (farthest, True), (nearest, False)):
        for pair in sorted(kept, key=lambda p: p[:3], reverse=largest)[:limit]:
            if pair[1:3] not in seen:
                seen.add(pair[1:3])
                shown.append(pair)
    return listed, shown


def _what_was_done(mode, first, second):
    if first['split'] != second['split']:
        if mode == 'group':
            return f'kept apart: published in {_e(first["split"])} and {_e(second["split"])} before they met'
        return f'<strong>reported only: {_e(first["split"])} / {_e(second["split"])}</strong>'
    moved = [f'{_e(row["source"])} moved from {_e(row["moved_from"])}' for row in (first, second)
             if row.get('moved_from')]
    done = f'one group, in {_e(first["split"])}' if mode == 'group' else f'reported only; both in {_e(first["split"])}'
    return done + (f'<br><span class="muted">{"; ".join(moved)}</span>' if moved else '')


def _near_duplicates_section(version, facts, near, files=None):
    """Near-duplicates: what the build counted, and thumbnail pairs of the extremes (``near``, as
    ``near_duplicate_pairs`` gives them)."""
    summary = version.document.get('near_duplicates') or {}
    parts = ['<h2 id="near-duplicates">Near-duplicates</h2>']
    if not summary or summary.get('mode') == 'off':
        return parts + ['<p class="muted">Not looked for: built with <code>--near_duplicates off</code> '
                        '(or before near-duplicates were looked for).</p>']
    listed, shown = near
    parts.append(
        f'<p>Mode <code>{_e(summary.get("mode"))}</code>, {_e(summary.get("hash"))} hash, within '
        f'{_e(summary.get("threshold"))} of 64 bits ({_e(summary.get("bands"))} bands): '
        f'<span id="near-groups">{_e(summary.get("groups", 0))}</span> groups of '
        f'{_e(summary.get("images", 0))} written images, {_e(summary.get("pairs", 0))} pairs found '
        f'(largest group {_e(summary.get("largest_group", 0))}); {_e(summary.get("pairs_across_splits", 0))} '
        f'pairs in two splits, {_e(summary.get("pairs_across_labels", 0))} across classes; '
        f'{_e(summary.get("images_moved", 0))} images moved to their group\'s split. '
        f'Every image with its nearest: {_link(layout.NEAR_DUPLICATES_JSONL)}.</p>')
    if not shown:
        return parts
    rows = []
    for distance, a, b, first, second in shown:
        cells = []
        for row in (first, second):
            url = (record_thumbnail(version.path, facts.where[row['source']], files=files)
                   if row['source'] in facts.where else None)
            cells.append((_img(url, row['source'], 'pair') + '<br>' if url else '') + f'<code>{_e(row["source"])}</code>')
        rows.append([*cells, distance, _e(first['label']) if first['label'] == second['label'] else
                     f'{_e(first["label"])} / {_e(second["label"])}', _what_was_done(summary.get('mode'), first, second)])
    parts.append(f'<p class="muted">{len(shown)} of {listed} pairs (each image with its nearest): those in two '
                 f'splits, then the farthest apart and the nearest, up to {NEAR_DUPLICATE_PAIRS} of each.</p>')
    parts.append(_table(['image', 'nearest', 'distance (bits)', 'class', 'what the build did'], rows, numeric=(2,)))
    return parts


def _sizes_section(document, facts):
    """The distributions of the written images' source sizes and aspect ratios, and the upscaled count."""
    import numpy as np

    upscaled = (document.get('decoding') or {}).get('upscaled', facts.upscaled)
    height, width, _ = metadata.image_shape(document)
    parts = ['<h2 id="input-sizes">Input sizes</h2>',
             f'<p><span id="upscaled">{_e(upscaled)}</span> of {document["counts"]["written"]} written images were '
             f'upscaled: smaller than the target {height}×{width} on the side the resize '
             'keeps.</p>']
    if not facts.widths.size:
        return parts + ['<p class="muted">No source sizes in the record index (a version built before they were '
                        'recorded).</p>']
    widths, heights = np.asarray(facts.widths), np.asarray(facts.heights)
    shorter, aspect = np.minimum(widths, heights), widths / heights
    rows = [[name, int(values.min()) if i < 3 else f'{values.min():.2f}',
             f'{np.median(values):.0f}' if i < 3 else f'{np.median(values):.2f}',
             int(values.max()) if i < 3 else f'{values.max():.2f}']
            for i, (name, values) in enumerate((('width', widths), ('height', heights), ('shorter side', shorter),
                                                 ('aspect ratio (width / height)', aspect)))]
    size_chart = _svg(_histogram(f'shorter side of {len(widths)} inputs', shorter, 'pixels', log=True))
    aspect_chart = _svg(_histogram('aspect ratio (width / height)', aspect, 'width / height', log=True,
                                   color='#f58518'))
    parts.append(f'<p class="muted">Sizes of the written images before resizing (upright), from the record index '
                 f'(<code>{index_lib.SOURCE_WIDTH}</code>, <code>{index_lib.SOURCE_HEIGHT}</code>).</p>')
    parts.append(_table(['', 'smallest', 'median', 'largest'], rows, numeric=(1, 2, 3)))
    parts.append(f'<figure>{_img(size_chart, "shorter side of the inputs", "chart")}</figure>'
                 f'<figure>{_img(aspect_chart, "aspect ratios of the inputs", "chart")}</figure>')
    return parts


def _extremes(items, key):
    """All ``items`` when few; else the EXTREMES smallest and largest by ``key``, with None between."""
    if len(items) <= MAX_BARS:
        return list(items)
    ranked = sorted(items, key=key)
    return ranked[:EXTREMES] + [None] + ranked[-EXTREMES:]


def _share(info):
    """' (89.9%, asked 90.0%)': a split's share of the records next to the share its weight asked for."""
    if info.get('share') is None or info.get('requested_share') is None:
        return ''  # a version written before shares were recorded
    return f' ({info["share"]:.1%}, asked {info["requested_share"]:.1%})'


def _shares_table(images, weights):
    """The table of each split's share of ``images`` ({split: images}) next to the share its weight in
    ``weights`` ({split: weight}, --splits) asked for, as ``imgrec.contract.metadata.split_shares`` reckons both:
    every split asked for, one that got no image too."""
    splits = list(dict.fromkeys([*weights, *images]))
    images = {split: images.get(split, 0) for split in splits}
    shares = metadata.split_shares(images, weights)
    asked = bool(weights)  # a version that recorded no --splits: nothing to set the shares against
    rows = [[_e(split), _e(weights.get(split, 0)) if asked else '—',
             f'{shares[split]["requested_share"]:.1%}' if asked else '—', f'{shares[split]["share"]:.1%}',
             f'{100 * (shares[split]["share"] - shares[split]["requested_share"]):+.1f}' if asked else '—',
             images[split]] for split in splits]
    return '<div id="shares-table">' + _table(['split', 'weight', 'asked', 'got', 'difference (points)', 'images'],
                                              rows, numeric=range(1, 6)) + '</div>'


def _class_totals(document):
    return {label: sum(info['class_counts'].get(label, 0) for info in document['splits'].values())
            for label in document['labels']}


def _farthest_class(document, weights):
    """'cat (validation 0.0%, asked 20.0%)': the class whose share in a split strays farthest from the share
    asked, among the classes with an image for every split; None when there is none, or none strays."""
    totals, farthest = _class_totals(document), None
    whole = sum(weights.values())
    for label, total in totals.items():
        if not whole or total < len(weights):
            continue
        for split, weight in weights.items():
            got = (document['splits'].get(split) or {}).get('class_counts', {}).get(label, 0) / total
            miss = abs(got - weight / whole)
            if farthest is None or miss > farthest[0]:
                farthest = (miss, label, split, got, weight / whole)
    if farthest is None or round(farthest[0], 3) == 0:
        return None  # none to show, or every class split as asked (to the tenth of a point shown)
    _, label, split, got, asked = farthest
    return f'<code>{_e(label)}</code> ({_e(split)} {got:.1%}, asked {asked:.1%})'


def _shares_section(document):
    """Each split's share of the written images against the share asked, and the class farthest off."""
    weights = (document.get('options') or {}).get('splits') or {}
    images = {split: info['num_examples'] for split, info in document['splits'].items()}
    parts = ['<h2 id="shares">Split shares</h2>',
             f'<p>Each split\'s share of the {sum(images.values())} written images next to the share its weight '
             '(<code>--splits</code>) asked for. A build whose shares miss by more than <code>--split_tolerance</code> '
             'points (1 unless given) and more than one image fails before it publishes.</p>',
             _shares_table(images, weights)]
    farthest = _farthest_class(document, weights) if weights else None
    if farthest:
        parts.append(f'<p id="farthest-class">Per class, the share farthest from the one asked: {farthest}'
                     + ('' if (document.get('options') or {}).get('stratify') else
                        '; <code>--stratify</code> gives each split its share of every class') + '.</p>')
    return parts


def class_warnings(document):
    """[(id, HTML)] of what the written classes warn of: imbalance (the largest class over IMBALANCE_RATIO
    times the smallest written one), empty classes, classes with fewer images than splits
    (dataset.json's ``classes``) and classes written but absent from a split."""
    classes, totals, found = document.get('classes') or {}, _class_totals(document), []
    written = {label: n for label, n in totals.items() if n}
    if written:
        largest = max(written, key=lambda label: (written[label], label))
        smallest = min(written, key=lambda label: (written[label], label))
        if written[largest] > IMBALANCE_RATIO * written[smallest]:
            small = sorted((label for label in written if IMBALANCE_RATIO * written[label] < written[largest]),
                           key=lambda label: (written[label], label))
            found.append(('imbalance', (
                f'Imbalanced classes: the largest, <code>{_e(largest)}</code> ({written[largest]} images), holds '
                f'{written[largest] / written[smallest]:.1f} times the smallest, <code>{_e(smallest)}</code> '
                f'({written[smallest]}): over {IMBALANCE_RATIO} times. Classes with under 1/{IMBALANCE_RATIO} of '
                f'the largest\'s images: {_names(small, written)}. A model sees them rarely: weight the classes '
                'in training or gather more of their images.')))
    if classes.get('empty'):
        found.append(('empty-classes', f'Empty classes (no image written): {_names(classes["empty"])}.'))
    if classes.get('fewer_than_splits'):
        splits = metadata.num_splits(document)
        found.append(('tiny-classes', f'Classes with fewer images than the {splits} splits, so missing from '
                      f'some: {_names(classes["fewer_than_splits"], totals)}.'))
    tiny = set(classes.get('fewer_than_splits') or ())
    for split, info in document['splits'].items():
        missing = [label for label in written if not info['class_counts'].get(label) and label not in tiny]
        if missing:
            found.append((f'missing-{split}', f'Classes with no image in {_e(split)}: {_names(missing, totals)}.'))
    return found


# Near-duplicate pairs under two labels shown side by side in the Warnings (dataset.json lists more).
CONFLICT_PAIRS_SHOWN = 12


def conflict_pairs(document):
    """dataset.json's near-duplicate pairs under two labels that were kept (written), the first
    CONFLICT_PAIRS_SHOWN: [{'source', 'label', 'split', 'other', 'other_label', 'other_split'}]."""
    near = document.get('near_duplicates') or {}
    if near.get('conflicts', 'quarantine') == 'quarantine':  # before the rule, or asked: quarantined, not written
        return []
    return list(near.get('label_conflict_pairs') or [])[:CONFLICT_PAIRS_SHOWN]


def _conflicts_warning(document, version, facts, files=None):
    """The near-duplicate pairs under two labels, both thumbnails of each side by side: for the user to decide."""
    pairs = conflict_pairs(document)
    if not pairs:
        return []
    total = (document.get('near_duplicates') or {}).get('pairs_across_labels') or len(pairs)
    rows = []
    for pair in pairs:
        cells = []
        for source, label in ((pair['source'], pair['label']), (pair['other'], pair['other_label'])):
            url = (record_thumbnail(version.path, facts.where[source], side=CONFLICT_THUMBNAIL, files=files)
                   if source in facts.where else None)
            cells.append(f'<figure class="conflict">{_img(url, source, "pair") if url else ""}'
                         f'<figcaption><code>{_e(source)}</code><br>{_e(label)}</figcaption></figure>')
        split = pair['split'] if pair['split'] == pair['other_split'] else f"{pair['split']} / {pair['other_split']}"
        rows.append(f'<div class="conflict-pair">{"".join(cells)}<span class="muted">in {_e(split)}</span></div>')
    return [('near-duplicate-conflicts', (
        f'<span id="conflict-count">{_e(total)}</span> near-duplicate pairs are filed under two labels. Both images '
        f'of each are written, in one split; decide which label is right (or that they differ), or build with '
        f'<code>--near_duplicate_conflicts quarantine</code> to leave both out. '
        f'{"The first " + str(len(pairs)) + ": " if total > len(pairs) else ""}'
        f'every pair in {_link(layout.NEAR_DUPLICATES_JSONL)}.'
        f'<div id="conflict-pairs">{"".join(rows)}</div>'))]


def _warnings_section(document, version=None, facts=None, files=None):
    """The ``class_warnings`` and the near-duplicate pairs under two labels as a list, or a line saying there
    are none (and what was checked)."""
    warnings = class_warnings(document)
    if version is not None and facts is not None:
        warnings += _conflicts_warning(document, version, facts, files)
    parts = ['<h2 id="warnings">Warnings</h2>']
    if not warnings:
        return parts + [f'<p id="no-warnings">None: no class is empty, every class is in every split, the '
                        f'largest class holds at most {IMBALANCE_RATIO} times the images of the smallest, and no '
                        f'near-duplicate pair was written under two labels.</p>']
    return parts + ['<ul id="class-problems">' + ''.join(f'<li id="{_e(key)}">{text}</li>' for key, text in warnings)
                    + '</ul>']


def _names(labels, counts=None):
    """The first EXTREMES of ``labels`` as code, with their image counts from ``counts`` when given."""
    shown = ', '.join(f'<code>{_e(label)}</code>' + (f' ({counts[label]})' if counts else '')
                      for label in labels[:EXTREMES])
    return shown + (f' and {len(labels) - EXTREMES} more' if len(labels) > EXTREMES else '')


def _class_table_section(document, labels):
    """Records per split and class, with totals: every class up to MAX_BARS, else the extremes."""
    splits = list(document['splits'])
    totals = {label: sum(document['splits'][s]['class_counts'].get(label, 0) for s in splits) for label in labels}
    rows = []
    for label in _extremes(labels, key=lambda l: (totals[l], l)):
        if label is None:
            rows.append([f'<span class="muted">… {len(labels) - 2 * EXTREMES} classes between</span>',
                         *[''] * (len(splits) + 1)])
            continue
        rows.append([_e(label), *[document['splits'][s]['class_counts'].get(label, 0) for s in splits], totals[label]])
    rows.append(['<strong>all classes</strong>', *[document['splits'][s]['num_examples'] for s in splits],
                 sum(totals.values())])
    note = (f'<p class="muted">{len(labels)} classes: the {EXTREMES} smallest and the {EXTREMES} largest by '
            f'records; every class is in {_link(layout.DATASET_JSON)} (<code>class_counts</code>).</p>'
            if len(labels) > MAX_BARS else '')
    return ['<h2 id="split-class">Records per split and class</h2>' + note,
            '<div id="split-class-table">' + _table(['class', *splits, 'total'], rows,
                                                   numeric=range(1, len(splits) + 2)) + '</div>']


def class_changes(version_dir, document, previous_dir, previous_document, files=None):
    """{label: [new, changed, removed]} of the written images against the previous version, by their index
    rows: new (a source not in it), changed (other bytes or class), removed (written there, not here).
    Index parts are compared pairwise when both have as many (a source's part is a hash of its name);
    else all rows of both are held."""
    names, before_names = document['index']['files'], previous_document['index']['files']
    batches = (zip(([f] for f in names), ([f] for f in before_names)) if len(names) == len(before_names)
               else [(names, before_names)])
    columns = (index_lib.SOURCE, index_lib.SHA256, index_lib.LABEL)
    changes = collections.defaultdict(lambda: [0, 0, 0])

    def rows(folder, doc, part_names):
        found = {}
        for part in index_parts(folder, doc, columns, part_names, files):
            part = part.to_pydict()
            for source, digest, label in zip(part[index_lib.SOURCE], part[index_lib.SHA256], part[index_lib.LABEL]):
                found[source] = (digest, doc['labels'][label])
        return found

    for now_files, then_files in batches:
        now, then = rows(version_dir, document, now_files), rows(previous_dir, previous_document, then_files)
        for source, (digest, label) in now.items():
            old = then.get(source)
            if old is None:
                changes[label][0] += 1
            elif old != (digest, label):
                changes[label][1] += 1
        for source, (_, label) in then.items():
            if source not in now:
                changes[label][2] += 1
    return dict(changes)


def _changes_section(version, files=None):
    """Changes since the previous version: the build's counts, and new, changed and removed per class."""
    document = version.document
    refresh = document.get('refresh') or {}
    parts = ['<h2 id="changes">Changes since the previous version</h2>']
    previous = refresh.get('previous')
    if not previous:
        return parts + ['<p class="muted">The first version: no previous version to compare with.</p>']
    counts = ', '.join(f'{key} {refresh[key]}' for key in ('new', 'changed', 'removed', 'reused', 'decoded')
                       if refresh.get(key) is not None)
    parts.append(f'<p>Previous version <code>{_e(previous)}</code>; build: {_e(refresh.get("mode"))}'
                 + (f' ({_e(refresh["full_reason"])})' if refresh.get('full_reason') else '')
                 + (f'. Inputs listed: {_e(counts)}.' if counts else '.') + '</p>')
    output = (document.get('options') or {}).get('output')
    try:
        before = version_lib.load(layout.join(output, previous), files) if output else None
    except version_lib.InspectionError:
        before = None
    if before is None or not before.document.get('index') or not document.get('index'):
        return parts + [f'<p class="muted">Version <code>{_e(previous)}</code> or its record index is no longer '
                        'there (pruned?): no per-class changes.</p>']
    changes = class_changes(version.path, document, before.path, before.document, files)
    labels = [label for label in [*document['labels'], *before.document['labels']] if label in changes]
    labels = list(dict.fromkeys(labels))
    rows = []
    for label in _extremes(labels, key=lambda l: (-sum(changes[l]), l))[:EXTREMES if len(labels) > MAX_BARS else None]:
        rows.append([_e(label), *changes[label]])
    totals = [sum(change[i] for change in changes.values()) for i in range(3)]
    rows.append(['<strong>all classes</strong>', *totals])
    parts.append(f'<p class="muted">Written images against version <code>{_e(previous)}</code>\'s record index: '
                 'new (not written there), changed (other bytes or class) and removed (written there, not here)'
                 + (f'; the {EXTREMES} classes of the {len(labels)} with the most changes' if len(labels) > MAX_BARS
                    else '') + '.</p>')
    parts.append('<div id="changes-table">' + _table(['class', 'new', 'changed', 'removed'], rows,
                                                    numeric=(1, 2, 3)) + '</div>')
    return parts


class Pruning(collections.namedtuple('Pruning', 'keep_versions versions')):
    """--keep_versions (a run option, not in dataset.json) and the versions its pruning is to delete."""


def pruning_plan(output, version, keep_versions, files=None):
    """Pruning of the build about to publish ``version``: the versions
    ``imgrec.storage.publication.pruning_plan`` picks (through ``files``, the output's storage when given); one a
    live lease then holds is kept."""
    if not keep_versions:
        return Pruning(None, ())
    return Pruning(keep_versions, publication.pruning_plan(output, version, keep_versions, files))


def _pruning_section(pruning):
    parts = ['<h2 id="pruning">Older versions</h2>']
    if pruning is None:
        return parts + ['<p class="muted">Not recorded: <code>--keep_versions</code> is a run option, which '
                        'dataset.json does not hold, and this report was rendered without it.</p>']
    if not pruning.keep_versions:
        return parts + ['<p>Built without <code>--keep_versions</code>: no version deleted.</p>']
    deleted = ', '.join(f'<code>{_e(name)}</code>' for name in pruning.versions) or 'none'
    return parts + [f'<p>Built with <code>--keep_versions {_e(pruning.keep_versions)}</code>; versions deleted '
                    f'once this one was published: <span id="pruned">{deleted}</span>. A version a reader holds a '
                    'lease on is kept instead, and the build\'s summary names it.</p>']


def _shard_rows(info):
    """The shard table's rows of a split: each TFRecord shard beside the ArrayRecord shard that holds the same
    records, when the version has them; every shard up to MAX_BARS, else the extremes by bytes."""
    arrays = info.get(metadata.ARRAY_RECORD_SHARDS)
    pairs = list(zip(info['shards'], arrays or [None] * len(info['shards'])))
    rows = []
    for pair in _extremes(pairs, key=lambda p: (p[0]['bytes'], p[0]['file'])):
        if pair is None:
            rows.append([f'<span class="muted">… {len(pairs) - 2 * EXTREMES} shards between</span>',
                         *[''] * (5 if arrays else 2)])
            continue
        shard, array = pair
        rows.append([_e(shard['file']), shard['records'], shard['bytes']]
                    + ([_e(array['file']), array['records'], array['bytes']] if arrays else []))
    return rows


def _split_section(name, info, labels):
    """One split: its records, share and shards, its two charts and its shard table (TFRecord, and ArrayRecord
    beside it with --formats tfrecord,array_record)."""
    classes, sizes = split_charts(name, info, labels)
    arrays = metadata.ARRAY_RECORD_SHARDS in info
    headers = ['shard', 'records', 'bytes'] + (['ArrayRecord shard', 'records', 'bytes'] if arrays else [])
    return [f'<h3>{_e(name)}: {info["num_examples"]} records{_share(info)} in {info["num_shards"]} '
            + ('TFRecord and ArrayRecord ' if arrays else '') +
            f'shards ({info["inputs"]} inputs, {info["quarantined"]} quarantined, {info["duplicates"]} duplicates)</h3>'
            f'<figure>{_img(classes, f"{name} records per class", "chart")}</figure>'
            f'<figure>{_img(sizes, f"{name} shard sizes", "chart")}</figure>',
            f'<div id="shards-{_e(name)}">' + _table(headers, _shard_rows(info),
                                                    numeric=(1, 2, 4, 5) if arrays else (1, 2)) + '</div>']


_HEADING = re.compile(r'<h2 id="([^"]+)">([^<]+)</h2>')


def contents(parts):
    """The table of contents of a page's ``parts``: a link to each h2 that has an id, in order."""
    links = ''.join(f'<li><a href="#{anchor}">{title}</a></li>' for anchor, title in _HEADING.findall(''.join(parts)))
    return f'<nav id="contents"><strong>Contents</strong><ol>{links}</ol></nav>'


def render(version, build_seconds=None, pruning=None, files=None):
    """The report of ``version`` (an imgrec.versions.version.Version) as HTML text; ``pruning`` (a
    Pruning) when known. Read through ``files`` (the job's storage: on a worker, its options' credentials)
    when given."""
    document, options = version.document, version.document.get('options') or {}
    build_seconds = round(build_seconds, 3) if build_seconds else None  # as recorded, so a re-render matches
    labels = document['labels']
    counts = document['counts']
    total_bytes = sum(s['bytes'] for info in document['splits'].values() for s in info['shards'])
    head = [f'<h1>{_e(document["name"])} · version {_e(document["version"])}</h1>',
            f'<p>Built {_e(document["created"])} into <code>{_e(published_path(version))}</code>. '
            f'Images {"×".join(map(str, metadata.image_shape(document)[:2]))} {_e(document["image"]["format"])}; '
            f'{len(labels)} classes.</p>']
    if build_seconds:
        head.append(f'<p id="build-time">Build time {build_seconds:.1f} s: {counts["inputs"] / build_seconds:.1f} '
                    f'input images/s, {counts["written"] / build_seconds:.1f} records/s, '
                    f'{human_bytes(total_bytes / build_seconds)}/s written.</p>')
    else:
        head.append('<p id="build-time" class="muted">Build time not recorded.</p>')
    parts = ['<h2 id="counts">Counts</h2>' + _table(
        ['inputs', 'written', 'quarantined', 'duplicates', 'non-image files ignored', 'bytes written'],
        [[counts['inputs'], counts['written'], counts['quarantined'], counts['duplicates'], counts['ignored'],
          human_bytes(total_bytes)]], numeric=range(6))]
    near = near_duplicate_pairs(version.path, files=files)
    conflicting = {source for pair in conflict_pairs(document) for source in (pair['source'], pair['other'])}
    facts = image_facts(version.path, document, {row['source'] for pair in near[1] for row in pair[3:]} | conflicting,
                        files)
    parts += _warnings_section(document, version, facts, files)
    parts += _shares_section(document)
    parts += _options_section(options)
    parts += _class_table_section(document, labels)
    parts.append('<h2 id="splits">Splits</h2>')
    for name, info in document['splits'].items():
        parts += _split_section(name, info, labels)
    parts += _sizes_section(document, facts)
    parts += _near_duplicates_section(version, facts, near, files)
    parts += _changes_section(version, files)
    parts += _pruning_section(pruning)

    per_class = samples_per_class(len(labels))
    samples = sample_thumbnails(version, per_class, files=files)
    parts.append(f'<h2 id="samples">Samples</h2><p class="muted">The first records of each class as written (up to '
                 f'{per_class} a class), as training reads them.</p>')
    for label in labels[:MAX_CLASSES_SHOWN]:
        images = ''.join(_img(url, source, 'sample') for source, url in samples.get(label, []))
        parts.append(f'<h3>{_e(label)}</h3><div class="grid">{images or "<span class=muted>no record read</span>"}</div>')
    if len(labels) > MAX_CLASSES_SHOWN:
        parts.append(f'<p class="muted">{len(labels) - MAX_CLASSES_SHOWN} more classes not shown.</p>')

    parts += _quarantine_section(version.path, options, document['record_options'].get('max_pixels'), files)
    parts += _duplicates_section(version.path, files)
    decoding = document.get('decoding') or {}
    parts.append('<h2 id="decoding">Decoding decisions</h2><p class="muted">What decoding did, counted over the '
                 f'written images; transparency composited on {_e(decoding.get("background"))}.</p>')
    parts.append(_table(['decision', 'images'], [
        [f'<code>{_e(key)}</code>', n] for key, n in sorted((decoding.get('decisions') or {}).items())], numeric=(1,)))

    meta = f'<meta name="build-seconds" content="{build_seconds:.3f}">' if build_seconds else ''
    if pruning is not None:
        meta += f'<meta name="pruning" content="{_e(json.dumps(list(pruning), ensure_ascii=False))}">'
    return _page(f'{document["name"]} {document["version"]}: build report', meta, head, parts)


def _page(title, meta, head, parts):
    """The page: ``head`` (title and summary lines), a table of contents, then the sections ``parts``."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">{meta}'
            f'<title>{_e(title)}</title><style>{_STYLE}</style></head><body>\n'
            + '\n'.join([*head, contents(parts), *parts]) + '\n</body></html>\n')


def _options_section(options):
    return ['<h2 id="options">Options</h2>' + _table(['option', 'value'], [
        [_e(key), f'<code>{_e(json.dumps(value, ensure_ascii=False))}</code>']
        for key, value in sorted(options.items())])]


FAILED_COUNTS = ('inputs', 'written', 'quarantined', 'duplicates', 'ignored')


def render_failed(staging_dir, failure, files=None):
    """The report of a build that failed, as HTML text: why, and what it knew (``imgrec.versions.failed_build``).

    ``failure``: name, version, created, options, previous (the version LATEST named, or None), reason (the
    failure line's message) and known (what the failing step counted: ``counts`` and ``splits`` from the
    publish step, ``dealt`` {split: images} from the split check; {} from elsewhere). The quarantine shows
    when the build got as far as listing it. Read through ``files`` (the job's storage) when given.
    """
    options, known = failure.get('options') or {}, failure.get('known') or {}
    previous = failure.get('previous')
    head = [f'<h1>{_e(failure["name"])} · version {_e(failure["version"])} · build failed</h1>',
            f'<p id="failure"><strong>The build failed and published nothing</strong>: {_e(failure["reason"])}</p>',
            f'<p>Started {_e(failure["created"])}; <code>{layout.LATEST}</code> '
            + (f'still names version <code>{_e(previous)}</code>' if previous else 'names no version yet')
            + f'. This page is in the build\'s staging folder, <code>{_e(staging_dir)}</code>.</p>']
    parts = ['<h2 id="counts">Counts</h2>']
    counts, splits = known.get('counts'), known.get('splits') or {}
    if counts:
        parts.append(_table(['inputs', 'written', 'quarantined', 'duplicates', 'non-image files ignored'],
                            [[counts.get(key, '') for key in FAILED_COUNTS]], numeric=range(5)))
        per_split = [[_e(split), *(row.get(key, '') for key in FAILED_COUNTS[:4])] for split, row in sorted(splits.items())]
        parts.append(_table(['split', *FAILED_COUNTS[:4]], per_split, numeric=range(1, 5)))
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
                  _shares_table(dealt, options.get('splits') or {})]
    quarantine = layout.join(staging_dir, layout.QUARANTINE_JSONL)
    if storage.given_or_default(quarantine, files).exists(quarantine):
        parts += _quarantine_section(staging_dir, options, options.get('max_pixels'), files)
    else:
        parts.append('<h2 id="quarantine">Quarantine</h2><p class="muted">Not listed: the build stopped before '
                     'its publish step wrote the quarantine.</p>')
    parts += _options_section(options)
    parts.append('<h2 id="left">What it left</h2><p>This staging folder, kept for diagnosis. A later build into '
                 'the same output removes it once a newer version is published there, and one run with '
                 '<code>--clean</code> removes it at once; neither while a running build holds a lease on it.</p>')
    return _page(f'{failure["name"]} {failure["version"]}: failed build', '', head, parts)


def seconds_since(created):
    """Seconds from dataset.json's ``created`` (when the build was launched) to now: the build's time at publish."""
    start = datetime.datetime.strptime(created, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    return max((datetime.datetime.now(datetime.timezone.utc) - start).total_seconds(), 0.001)


def _recorded(version_dir, files=None):
    path = layout.join(version_dir, layout.REPORT_HTML)
    files = storage.given_or_default(path, files)
    return files.read(path).decode('utf-8', 'replace') if files.exists(path) else ''


def recorded_build_seconds(version_dir, files=None):
    """The build time an existing report.html recorded, or None (``files``: the folder's storage, when given)."""
    match = _BUILD_SECONDS.search(_recorded(version_dir, files))
    return float(match.group(1)) if match else None


def recorded_pruning(version_dir):
    """The Pruning an existing report.html recorded, or None."""
    match = _PRUNING.search(_recorded(version_dir))
    if not match:
        return None
    keep_versions, versions = json.loads(html.unescape(match.group(1)))
    return Pruning(keep_versions, tuple(versions))


def write_report(version_dir, build_seconds=None, version=None, files=None, pruning=None):
    """Renders and writes ``report.html`` into ``version_dir`` (local or gs://) through ``files`` (its storage,
    when given); returns its path.

    ``version`` (an imgrec.versions.version.Version) spares reading back what the caller just wrote.
    """
    version = version or version_lib.load(version_dir, files)
    path = layout.join(version.path, layout.REPORT_HTML)
    storage.given_or_default(path, files).write(path, render(version, build_seconds, pruning, files).encode('utf-8'))
    return path


def main(argv=None):
    """Returns the exit status: 0 written, 2 no version or a usage mistake."""
    with Command('dataset-report') as command:
        parser = command_line.parser('dataset-report', "(Re-)render a version's report.html.")
        parser.add_argument('--build_seconds', type=float,
                            help='build time to show; default: what the existing report recorded')
        args = parser.parse_args(argv)
        try:
            version_dir = version_lib.resolve(args.path)
            seconds = args.build_seconds if args.build_seconds is not None else recorded_build_seconds(version_dir)
            path = write_report(version_dir, seconds, pruning=recorded_pruning(version_dir))
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
