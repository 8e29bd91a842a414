"""The report's sections, each a list of HTML strings made from dataset.json and ``facts``: counts, warnings,
split shares, classes, splits with their charts (SVG, ``charts``), image sizes, near-duplicates, changes,
pruning, the quarantine and the duplicates. Everything the user's data puts on the page is escaped here.
"""
import collections
import html
import json


from imgrec.contract import index as index_lib, layout, metadata
from imgrec.contract.reasons import REASONS
from imgrec.versions import charts, version as version_lib
from imgrec.versions.report.facts import (CONFLICT_THUMBNAIL, IMBALANCE_RATIO, NEAR_DUPLICATE_PAIRS, class_changes,
                                          conflict_pairs, data_url, record_thumbnail, source_thumbnail)


MAX_BARS = 40  # past this many classes or shards, a chart shows their distribution instead of one bar each


EXTREMES = 10  # past MAX_BARS, tables show this many of the smallest and the largest


QUARANTINE_EXAMPLES = 5  # first sources shown per reason


DUPLICATES_SHOWN = 20


def _svg(text):
    """An SVG chart (``charts``) as a data URL."""
    return data_url(text.encode(), 'image/svg+xml')


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


def table(headers, rows, numeric=()):
    head = ''.join(f'<th>{html.escape(h)}</th>' for h in headers)
    body = ''.join('<tr>' + ''.join(
        f'<td class="n">{cell}</td>' if i in numeric else f'<td>{cell}</td>' for i, cell in enumerate(row)) + '</tr>'
        for row in rows)
    return f'<table><tr>{head}</tr>{body}</table>'


def escape(value):
    return html.escape(str(value))


def img(url, alt, css=''):
    return f'<img src="{url}" alt="{escape(alt)}" title="{escape(alt)}"{f" class={chr(34)}{css}{chr(34)}" if css else ""}>'


def inputs_section(document):
    """The formats of the written images (their decisions 'format=...') and the files left out, by extension,
    with an example each (dataset.json's 'ignored_files'): photos a build did not take show here."""
    decisions = (document.get('decoding') or {}).get('decisions') or {}
    formats = sorted(((key.split('=', 1)[1], n) for key, n in decisions.items() if key.startswith('format=')),
                     key=lambda item: (-item[1], item[0]))
    parts = ['<h2 id="inputs">Inputs</h2><p class="muted">The formats of the written images, and the files '
             'ignored as no image by their name or their first bytes.</p>']
    if formats:
        parts.append(table(['format', 'images written'], [[escape(name), n] for name, n in formats], numeric=(1,)))
    ignored = sorted((document.get('ignored_files') or {}).items(), key=lambda item: (-item[1]['count'], item[0]))
    if ignored:
        parts.append(table(['ignored files', 'count', 'example'], [
            [f'<code>{escape(key)}</code>', entry['count'], f'<code>{escape(entry["example"])}</code>']
            for key, entry in ignored], numeric=(1,)))
    return parts


def quarantine_section(version_dir, options, max_pixels, storage=None):
    """The quarantine by reason, with the first sources of each; reads quarantine.jsonl as a stream."""
    counts: collections.Counter[str] = collections.Counter()
    first: dict[str, list] = collections.defaultdict(list)
    for item in version_lib.iter_jsonl(version_dir, layout.QUARANTINE_JSONL, storage):
        counts[item['reason']] += 1
        if len(first[item['reason']]) < QUARANTINE_EXAMPLES:
            first[item['reason']].append(item)
    parts = [f'<h2 id="quarantine">Quarantine</h2><p>{sum(counts.values())} inputs not written; the full list is '
             f'<code>{layout.QUARANTINE_JSONL}</code>.</p>']
    rows: list[list] = []
    for reason, count in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])):
        examples = []
        for item in first[reason]:
            url = source_thumbnail(options, item['source'], max_pixels, storage)
            examples.append((img(url, item['source'], 'quarantined') + ' ' if url else '') +
                            f'<code>{escape(item["source"])}</code>: {escape(item["message"])}')
        if count > len(first[reason]):
            examples.append(f'<span class="muted">and {count - len(first[reason])} more</span>')
        rows.append([f'<code>{escape(reason)}</code><br><span class="muted">{escape(REASONS.get(reason, ""))}</span>',
                     count, '<br>'.join(examples)])
    if rows:
        parts.append(table(['reason', 'inputs', 'first sources'], rows, numeric=(1,)))
    return parts


def duplicates_section(version_dir, storage=None):
    """The number of duplicates and the first few; reads duplicates.jsonl as a stream."""
    count = 0
    shown: list = []
    for item in version_lib.iter_jsonl(version_dir, layout.DUPLICATES_JSONL, storage):
        count += 1
        if len(shown) < DUPLICATES_SHOWN:
            shown.append([f'<code>{escape(item["source"])}</code>', f'<code>{escape(item["duplicate_of"])}</code>',
                          escape(item['label'])])
    parts = [f'<h2 id="duplicates">Duplicates</h2><p>{count} inputs not written because the same bytes under the '
             f'same label were (full list: <code>{layout.DUPLICATES_JSONL}</code>).</p>']
    if shown:
        parts.append(table(['source', 'same bytes as (written)', 'label'], shown))
    return parts


def _link(name):
    """A relative link to a file of the version: it works where the page is opened from its folder."""
    return f'<a href="{escape(name)}"><code>{escape(name)}</code></a>'


def _what_was_done(mode, first, second):
    if first['split'] != second['split']:
        if mode == 'group':
            return f'kept apart: published in {escape(first["split"])} and {escape(second["split"])} before they met'
        return f'<strong>reported only: {escape(first["split"])} / {escape(second["split"])}</strong>'
    moved = [f'{escape(row["source"])} moved from {escape(row["moved_from"])}' for row in (first, second)
             if row.get('moved_from')]
    done = f'one group, in {escape(first["split"])}' if mode == 'group' else f'reported only; both in {escape(first["split"])}'
    return done + (f'<br><span class="muted">{"; ".join(moved)}</span>' if moved else '')


def _near_duplicate_check(summary):
    """How the near-duplicates were found, in words: the same picture written, or each image's nearest by hash
    confirmed by the pixel check (a version built before the neighbours were recorded: every pair within the
    threshold)."""
    if summary.get('hash') is None or summary.get('threshold') == 0:  # 0: an exact check that compared hashes too
        return 'the same picture written (the same JPEG bytes)'
    nearest = f'each image\'s {escape(summary["neighbours"])} nearest' if summary.get('neighbours') else 'pairs'
    return (f'{nearest} by {escape(summary.get("hash"))} hash within {escape(summary.get("threshold"))} of 64 bits, '
            'confirmed by their pixels')


def near_duplicates_section(version, facts, near, storage=None):
    """Near-duplicates: what the build counted, and thumbnail pairs of the extremes (``near``, as
    ``near_duplicate_pairs`` gives them)."""
    summary = version.document.get('near_duplicates') or {}
    parts = ['<h2 id="near-duplicates">Near-duplicates</h2>']
    if not summary or summary.get('mode') == 'off':
        return parts + ['<p class="muted">Not looked for: built with <code>--near_duplicates off</code> '
                        '(or before near-duplicates were looked for).</p>']
    listed, shown = near
    parts.append(
        f'<p>Mode <code>{escape(summary.get("mode"))}</code>, {_near_duplicate_check(summary)}: '
        f'<span id="near-groups">{escape(summary.get("groups", 0))}</span> groups of '
        f'{escape(summary.get("images", 0))} written images, {escape(summary.get("pairs", 0))} pairs found '
        f'(largest group {escape(summary.get("largest_group", 0))}); {escape(summary.get("pairs_across_splits", 0))} '
        f'pairs in two splits, {escape(summary.get("pairs_across_labels", 0))} across classes; '
        f'{escape(summary.get("images_moved", 0))} images moved to their group\'s split. '
        f'Every image with its nearest: {_link(layout.NEAR_DUPLICATES_JSONL)}.</p>')
    if not shown:
        return parts
    rows = []
    for distance, a, b, first, second in shown:
        cells = []
        for row in (first, second):
            url = (record_thumbnail(version.path, facts.where[row['source']], storage=storage)
                   if row['source'] in facts.where else None)
            cells.append((img(url, row['source'], 'pair') + '<br>' if url else '') + f'<code>{escape(row["source"])}</code>')
        rows.append([*cells, distance, escape(first['label']) if first['label'] == second['label'] else
                     f'{escape(first["label"])} / {escape(second["label"])}', _what_was_done(summary.get('mode'), first, second)])
    parts.append(f'<p class="muted">{len(shown)} of {listed} pairs (each image with its nearest): those in two '
                 f'splits, then the farthest apart and the nearest, up to {NEAR_DUPLICATE_PAIRS} of each.</p>')
    parts.append(table(['image', 'nearest', 'distance (bits)', 'class', 'what the build did'], rows, numeric=(2,)))
    return parts


def sizes_section(document, facts):
    """The distributions of the written images' source sizes and aspect ratios, and the upscaled count."""
    import numpy as np

    upscaled = (document.get('decoding') or {}).get('upscaled', facts.upscaled)
    height, width, _ = metadata.image_shape(document)
    parts = ['<h2 id="input-sizes">Input sizes</h2>',
             f'<p><span id="upscaled">{escape(upscaled)}</span> of {document["counts"]["written"]} written images were '
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
    parts.append(table(['', 'smallest', 'median', 'largest'], rows, numeric=(1, 2, 3)))
    parts.append(f'<figure>{img(size_chart, "shorter side of the inputs", "chart")}</figure>'
                 f'<figure>{img(aspect_chart, "aspect ratios of the inputs", "chart")}</figure>')
    return parts


def _extremes(items, key):
    """All ``items`` when few; else the EXTREMES smallest and largest by ``key``, with None between."""
    if len(items) <= MAX_BARS:
        return list(items)
    ranked = sorted(items, key=key)
    return ranked[:EXTREMES] + [None] + ranked[-EXTREMES:]


def share(info):
    """' (89.9%, asked 90.0%)': a split's share of the records next to the share its weight asked for."""
    if info.get('share') is None or info.get('requested_share') is None:
        return ''  # a version written before shares were recorded
    return f' ({info["share"]:.1%}, asked {info["requested_share"]:.1%})'


def shares_table(images, weights):
    """The table of each split's share of ``images`` ({split: images}) next to the share its weight in
    ``weights`` ({split: weight}, --splits) asked for, as ``imgrec.contract.metadata.split_shares`` reckons both:
    every split asked for, one that got no image too."""
    splits = list(dict.fromkeys([*weights, *images]))
    images = {split: images.get(split, 0) for split in splits}
    shares = metadata.split_shares(images, weights)
    asked = bool(weights)  # a version that recorded no --splits: nothing to set the shares against
    rows = [[escape(split), escape(weights.get(split, 0)) if asked else '—',
             f'{shares[split]["requested_share"]:.1%}' if asked else '—', f'{shares[split]["share"]:.1%}',
             f'{100 * (shares[split]["share"] - shares[split]["requested_share"]):+.1f}' if asked else '—',
             images[split]] for split in splits]
    return '<div id="shares-table">' + table(['split', 'weight', 'asked', 'got', 'difference (points)', 'images'],
                                              rows, numeric=range(1, 6)) + '</div>'


def shares_section(document):
    """Each split's share of the written images against the share asked, and the class farthest off."""
    weights = (document.get('options') or {}).get('splits') or {}
    images = {split: info['num_examples'] for split, info in document['splits'].items()}
    parts = ['<h2 id="shares">Split shares</h2>',
             f'<p>Each split\'s share of the {sum(images.values())} written images next to the share its weight '
             '(<code>--splits</code>) asked for. A build whose shares miss by more than <code>--split_tolerance</code> '
             'points (1 unless given) and more than one image fails before it publishes.</p>',
             shares_table(images, weights)]
    farthest = farthest_class(document, weights) if weights else None
    if farthest:
        parts.append(f'<p id="farthest-class">Per class, the share farthest from the one asked: {farthest}'
                     + ('' if (document.get('options') or {}).get('stratify') else
                        '; <code>--stratify</code> gives each split its share of every class') + '.</p>')
    return parts


def class_totals(document):
    return {label: sum(info['class_counts'].get(label, 0) for info in document['splits'].values())
            for label in document['labels']}


def farthest_class(document, weights):
    """'cat (validation 0.0%, asked 20.0%)': the class whose share in a split strays farthest from the share
    asked, among the classes with an image for every split; None when there is none, or none strays."""
    totals, farthest = class_totals(document), None
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
    return f'<code>{escape(label)}</code> ({escape(split)} {got:.1%}, asked {asked:.1%})'


def class_warnings(document):
    """[(id, HTML)] of what the written classes warn of: imbalance (the largest class over IMBALANCE_RATIO
    times the smallest written one), empty classes, classes with fewer images than splits
    (dataset.json's ``classes``) and classes written but absent from a split."""
    classes, totals, found = document.get('classes') or {}, class_totals(document), []
    written = {label: n for label, n in totals.items() if n}
    if written:
        largest = max(written, key=lambda label: (written[label], label))
        smallest = min(written, key=lambda label: (written[label], label))
        if written[largest] > IMBALANCE_RATIO * written[smallest]:
            small = sorted((label for label in written if IMBALANCE_RATIO * written[label] < written[largest]),
                           key=lambda label: (written[label], label))
            found.append(('imbalance', (
                f'Imbalanced classes: the largest, <code>{escape(largest)}</code> ({written[largest]} images), holds '
                f'{written[largest] / written[smallest]:.1f} times the smallest, <code>{escape(smallest)}</code> '
                f'({written[smallest]}): over {IMBALANCE_RATIO} times. Classes with under 1/{IMBALANCE_RATIO} of '
                f'the largest\'s images: {_names(small, written)}. A model sees them rarely: weight the classes '
                'in training or gather more of their images.')))
    if len(document.get('labels') or ()) == 1:
        found.append(('single-class', f'One class only, <code>{escape(document["labels"][0])}</code>: every image has '
                      'the same label, so a classifier learns nothing. Give each class its own folder.'))
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
            found.append((f'missing-{split}', f'Classes with no image in {escape(split)}: {_names(missing, totals)}.'))
    return found


def _conflicts_warning(document, version, facts, storage=None):
    """The near-duplicate pairs under two labels, both thumbnails of each side by side: for the user to decide."""
    pairs = conflict_pairs(document)
    if not pairs:
        return []
    total = (document.get('near_duplicates') or {}).get('pairs_across_labels') or len(pairs)
    rows = []
    for pair in pairs:
        cells = []
        for source, label in ((pair['source'], pair['label']), (pair['other'], pair['other_label'])):
            url = (record_thumbnail(version.path, facts.where[source], side=CONFLICT_THUMBNAIL, storage=storage)
                   if source in facts.where else None)
            cells.append(f'<figure class="conflict">{img(url, source, "pair") if url else ""}'
                         f'<figcaption><code>{escape(source)}</code><br>{escape(label)}</figcaption></figure>')
        split = pair['split'] if pair['split'] == pair['other_split'] else f"{pair['split']} / {pair['other_split']}"
        rows.append(f'<div class="conflict-pair">{"".join(cells)}<span class="muted">in {escape(split)}</span></div>')
    return [('near-duplicate-conflicts', (
        f'<span id="conflict-count">{escape(total)}</span> near-duplicate pairs are filed under two labels. Both images '
        f'of each are written, in one split; decide which label is right (or that they differ), or build with '
        f'<code>--near_duplicate_conflicts quarantine</code> to leave both out. '
        f'{"The first " + str(len(pairs)) + ": " if total > len(pairs) else ""}'
        f'every pair in {_link(layout.NEAR_DUPLICATES_JSONL)}.'
        f'<div id="conflict-pairs">{"".join(rows)}</div>'))]


def warnings_section(document, version=None, facts=None, storage=None):
    """The ``class_warnings`` and the near-duplicate pairs under two labels as a list, or a line saying there
    are none (and what was checked)."""
    warnings = class_warnings(document)
    if version is not None and facts is not None:
        warnings += _conflicts_warning(document, version, facts, storage)
    parts = ['<h2 id="warnings">Warnings</h2>']
    if not warnings:
        return parts + [f'<p id="no-warnings">None: no class is empty, every class is in every split, the '
                        f'largest class holds at most {IMBALANCE_RATIO} times the images of the smallest, and no '
                        f'near-duplicate pair was written under two labels.</p>']
    return parts + ['<ul id="class-problems">' + ''.join(f'<li id="{escape(key)}">{text}</li>' for key, text in warnings)
                    + '</ul>']


def _names(labels, counts=None):
    """The first EXTREMES of ``labels`` as code, with their image counts from ``counts`` when given."""
    shown = ', '.join(f'<code>{escape(label)}</code>' + (f' ({counts[label]})' if counts else '')
                      for label in labels[:EXTREMES])
    return shown + (f' and {len(labels) - EXTREMES} more' if len(labels) > EXTREMES else '')


def class_table_section(document, labels):
    """Records per split and class, with totals: every class up to MAX_BARS, else the extremes."""
    splits = list(document['splits'])
    totals = {label: sum(document['splits'][s]['class_counts'].get(label, 0) for s in splits) for label in labels}
    rows = []
    for label in _extremes(labels, key=lambda l: (totals[l], l)):
        if label is None:
            rows.append([f'<span class="muted">… {len(labels) - 2 * EXTREMES} classes between</span>',
                         *[''] * (len(splits) + 1)])
            continue
        rows.append([escape(label), *[document['splits'][s]['class_counts'].get(label, 0) for s in splits], totals[label]])
    rows.append(['<strong>all classes</strong>', *[document['splits'][s]['num_examples'] for s in splits],
                 sum(totals.values())])
    note = (f'<p class="muted">{len(labels)} classes: the {EXTREMES} smallest and the {EXTREMES} largest by '
            f'records; every class is in {_link(layout.DATASET_JSON)} (<code>class_counts</code>).</p>'
            if len(labels) > MAX_BARS else '')
    return ['<h2 id="split-class">Records per split and class</h2>' + note,
            '<div id="split-class-table">' + table(['class', *splits, 'total'], rows,
                                                   numeric=range(1, len(splits) + 2)) + '</div>']


_CHANGE_KINDS = ('new', 'changed', 'removed')


def _resumed_note(document):
    """'Resumed: N of M images taken up from the build stopped at T' (refresh.resumed), when the build took up a
    stopped run of itself (docs/build.md), with the spilled records it refused and why."""
    resumed = (document.get('refresh') or {}).get('resumed')
    if not resumed:
        return []
    refused = resumed.get('refused') or {}
    why = ', '.join(f'{count} {reason}' for reason, count in sorted(refused.items()))
    return [f'<p>Resumed: {resumed.get("images", 0)} of {(document.get("counts") or {}).get("inputs")} images taken '
            f'up from the build stopped at {escape(str(resumed.get("stopped_at")))}'
            + (f'; spilled records refused: {escape(why)}' if why else '') + '.</p>']


def changes_section(version, storage=None):
    """Changes since the previous version: new, changed and removed per class, of the written images, beside
    the build's own counts of the input files it listed.

    The two count different things and can differ: an input that is listed but not written (quarantined,
    or dropped as a duplicate) counts as new or removed in the listing and not in the records, or the other
    way round. So both sit in one table, each row named for what it counts, with a line that says why
    they differ when they do (they once stood apart, both called new and removed, and disagreed).
    """
    document = version.document
    refresh = document.get('refresh') or {}
    parts = ['<h2 id="changes">Changes since the previous version</h2>', *_resumed_note(document)]
    previous = refresh.get('previous')
    if not previous:
        return parts + ['<p class="muted">The first version: no previous version to compare with.</p>']
    listed = [refresh.get(key) for key in _CHANGE_KINDS]
    work = ', '.join(f'{key} {refresh[key]}' for key in ('reused', 'decoded') if refresh.get(key) is not None)
    head = (f'<p>Previous version <code>{escape(previous)}</code>; build: {escape(refresh.get("mode"))}'
            + (f' ({escape(refresh["full_reason"])})' if refresh.get('full_reason') else ''))
    output = (document.get('options') or {}).get('output')
    try:
        before = version_lib.load(layout.join(output, previous), storage) if output else None
    except version_lib.InspectionError:
        before = None
    if before is None or not before.document.get('index') or not document.get('index'):
        counts = ', '.join(f'{key} {value}' for key, value in zip(_CHANGE_KINDS, listed) if value is not None)
        return parts + [head + (f'. Input files listed: {escape(", ".join(filter(None, [counts, work])))}.'
                                if counts or work else '.') + '</p>',
                        f'<p class="muted">Version <code>{escape(previous)}</code> or its record index is no longer '
                        'there (pruned?): no per-class changes.</p>']
    parts.append(head + (f'. Inputs {escape(work)}.' if work else '.') + '</p>')
    try:
        changes = class_changes(version.path, document, before.path, before.document, storage)
    except Exception as error:  # pylint: disable=broad-except  # a damaged previous index (the build did not trust it)
        cause = ' '.join(str(error).split())[:160]
        return parts + [f'<p class="muted">Version <code>{escape(previous)}</code>\'s record index cannot be read '
                        f'({escape(type(error).__name__)}: {escape(cause)}): no per-class changes.</p>']
    labels = [label for label in [*document['labels'], *before.document['labels']] if label in changes]
    labels = list(dict.fromkeys(labels))
    rows = []
    for label in _extremes(labels, key=lambda l: (-sum(changes[l]), l))[:EXTREMES if len(labels) > MAX_BARS else None]:
        rows.append([escape(label), *changes[label]])
    totals = [sum(change[i] for change in changes.values()) for i in range(3)]
    rows.append(['<strong>all classes</strong>', *totals])
    if any(value is not None for value in listed):
        rows.append(['input files listed by the build', *['' if value is None else value for value in listed]])
    parts.append(f'<p class="muted">Written images against version <code>{escape(previous)}</code>\'s record index: '
                 'new (not written there), changed (other bytes or class) and removed (written there, not here)'
                 + (f'; the {EXTREMES} classes of the {len(labels)} with the most changes' if len(labels) > MAX_BARS
                    else '') + '. The last row counts the input files the build listed instead.</p>')
    parts.append('<div id="changes-table">' + table(['class', 'new', 'changed', 'removed'], rows,
                                                    numeric=(1, 2, 3)) + '</div>')
    if any(value is not None and value != total for value, total in zip(listed, totals)):
        parts.append('<p id="changes-differ">Listed and written counts differ: an input listed but not written '
                     '(quarantined, or dropped as a duplicate) in one of the two versions counts in the listing '
                     'and not in the records; the Quarantine and Duplicates sections name them.</p>')
    return parts


def pruning_section(pruning):
    parts = ['<h2 id="pruning">Older versions</h2>']
    if pruning is None:
        return parts + ['<p class="muted">Not recorded: <code>--keep_versions</code> is a run option, which '
                        'dataset.json does not hold, and this report was rendered without it.</p>']
    if not pruning.keep_versions:
        return parts + ['<p>Built without <code>--keep_versions</code>: no version deleted.</p>']
    deleted = ', '.join(f'<code>{escape(name)}</code>' for name in pruning.versions) or 'none'
    return parts + [f'<p>Built with <code>--keep_versions {escape(pruning.keep_versions)}</code>; versions deleted '
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
        rows.append([escape(shard['file']), shard['records'], shard['bytes']]
                    + ([escape(array['file']), array['records'], array['bytes']] if arrays else []))
    return rows


def split_section(name, info, labels):
    """One split: its records, share and shards, its two charts and its shard table (TFRecord, and ArrayRecord
    beside it with --formats tfrecord,array_record)."""
    classes, sizes = split_charts(name, info, labels)
    arrays = metadata.ARRAY_RECORD_SHARDS in info
    headers = ['shard', 'records', 'bytes'] + (['ArrayRecord shard', 'records', 'bytes'] if arrays else [])
    return [f'<h3>{escape(name)}: {info["num_examples"]} records{share(info)} in {info["num_shards"]} '
            + ('TFRecord and ArrayRecord ' if arrays else '') +
            f'shards ({info["inputs"]} inputs, {info["quarantined"]} quarantined, {info["duplicates"]} duplicates)</h3>'
            f'<figure>{img(classes, f"{name} records per class", "chart")}</figure>'
            f'<figure>{img(sizes, f"{name} shard sizes", "chart")}</figure>',
            f'<div id="shards-{escape(name)}">' + table(headers, _shard_rows(info),
                                                    numeric=(1, 2, 4, 5) if arrays else (1, 2)) + '</div>']


def options_section(options, record_options=None):
    """The build's options, those that shape the records (``record_options``: image_size, resize,
    jpeg_quality...) included: dataset.json keeps the two apart, a reader asks for both."""
    return ['<h2 id="options">Options</h2>' + table(['option', 'value'], [
        [escape(key), f'<code>{escape(json.dumps(value, ensure_ascii=False))}</code>']
        for key, value in sorted({**options, **(record_options or {})}.items())])]
