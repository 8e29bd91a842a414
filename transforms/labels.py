"""Decides the class list: the class names found, or a pinned list (--labels), checked against them.

A class name is plain text: ``labels.txt`` holds one a line, and line number is label. A name that
holds a line break (LF, CR, or any other character ``str.splitlines`` breaks at) or a NUL cannot
round-trip through it, so the images of such a class are quarantined as ``bad_label`` (counted as
errors), and the rest of the build goes on.

A pinned list must match the classes found: a class with no images, or images of a class not in
the list (e.g. ``Circle`` pinned, folder ``circle``), fail the build in one line naming them, unless
unknown labels are allowed; then images of unlisted classes are quarantined as ``unknown_label``.
"""
import codecs
import functools

import apache_beam as beam

from contract.reasons import BAD_LABEL, UNKNOWN_LABEL
from imgrec_console.errors import BuildFailed
from transforms.elements import Rejected

REJECTED = 'rejected'
_BYTE_ORDER_MARKS = ((codecs.BOM_UTF8, 'utf-8-sig'), (codecs.BOM_UTF16_LE, 'utf-16'),
                     (codecs.BOM_UTF16_BE, 'utf-16'))
_LISTED = 10  # class names a message lists before '... and N more'


def parse_labels_file(data):
    """The class names in the bytes of a --labels file, one a line, in order.

    Reads the file as editors and Excel save it: UTF-8 with or without a byte-order mark, or UTF-16
    with one ('Unicode Text'); LF, CRLF or CR line ends; blank lines and spaces around names ignored.
    Raises ValueError, with a message that follows '--labels file PATH ', when it cannot be a class list.
    """
    encoding = next((name for mark, name in _BYTE_ORDER_MARKS if data.startswith(mark)), 'utf-8')
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        raise ValueError('is not UTF-8 (or UTF-16) text') from None
    if '\0' in text:
        raise ValueError('holds a NUL character: it is not a text file of class names')
    labels = [line.strip() for line in text.splitlines() if line.strip()]
    if not labels:
        raise ValueError('names no class')
    seen = set()
    for label in labels:
        if label in seen:
            raise ValueError(f'names the class {label!r} twice')
        seen.add(label)
    return tuple(labels)


def is_plain_label(label):
    """Whether ``label`` fits on one line of labels.txt: no line break, no NUL."""
    return label.splitlines() == [label] and '\0' not in label


def _names(labels):
    shown = ', '.join(repr(label) for label in labels[:_LISTED])
    return shown + (f' and {len(labels) - _LISTED} more' if len(labels) > _LISTED else '')


def unmatched_labels_message(pinned, found):
    """One line naming the pinned classes with no images and the classes found but not pinned; None if they match.

    A name that differs only in case from one on the other side says so.
    """
    found = sorted(set(found))
    folded = {}
    for label in found:
        folded.setdefault(label.casefold(), label)
    missing = [label for label in pinned if label not in set(found)]
    unknown = [label for label in found if label not in set(pinned)]
    if not missing and not unknown:
        return None
    parts = []
    if missing:
        hints = [f'{label!r} (found {folded[label.casefold()]!r}: names are case-sensitive)'
                 if label.casefold() in folded else repr(label) for label in missing]
        shown = ', '.join(hints[:_LISTED]) + (f' and {len(hints) - _LISTED} more' if len(hints) > _LISTED else '')
        parts.append(f'no images of {shown}')
    if unknown:
        parts.append(f'images of classes not in --labels: {_names(unknown)}')
    return (f"--labels does not match the images: {'; '.join(parts)}; "
            f'give --allow_unknown_labels to drop the classes not listed')


def _nothing(_):
    return None


def _checked_names(ref):
    if is_plain_label(ref.label):
        yield ref
    else:
        yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
            ref.source, BAD_LABEL, f'class name {ref.label!r} holds a line break or NUL: labels.txt cannot hold it'))


def _pinned_if_matching(found, pinned, allow_unknown_labels):
    message = unmatched_labels_message(pinned, found)
    if message and not allow_unknown_labels:
        raise BuildFailed(message)
    return list(pinned)


def _known_or_rejected(ref, known):
    if ref.label in known:
        yield ref
    else:
        yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
            ref.source, UNKNOWN_LABEL, f'class {ref.label!r} is not in the --labels file'))


class ResolveLabels(beam.PTransform):
    """ImageRef -> {'images', 'labels', 'rejected'}.

    ``labels`` is a one-element PCollection holding the ordered class list: ``pinned`` when given
    (a --labels file), else ``keep`` (the previous version's classes, so no label is renumbered)
    followed by the other class names found, sorted. Images of a class whose name is not plain text are
    rejected as ``bad_label``. A pinned list that does not match the classes found fails the build
    (BuildFailed, before anything is published) unless ``allow_unknown_labels``; then images of other
    classes are rejected as ``unknown_label``.
    """

    def __init__(self, pinned=None, allow_unknown_labels=False, keep=()):
        super().__init__()
        self._pinned = list(pinned) if pinned is not None else None
        self._allow_unknown_labels = allow_unknown_labels
        self._keep = list(keep or ())

    def expand(self, refs):
        named = refs | 'CheckNames' >> beam.FlatMap(_checked_names).with_outputs(REJECTED, main='images')
        # The distinct names, the keys of a side input read by one element (a ToList would cost nine steps;
        # beam.Distinct two more than this combine).
        found = beam.pvalue.AsDict(named.images
                                   | 'ClassNames' >> beam.Map(lambda ref: (ref.label, None))
                                   | 'Distinct' >> beam.CombinePerKey(_nothing))
        once = refs.pipeline | 'Once' >> beam.Impulse()
        if self._pinned is None:
            keep = self._keep
            labels = once | 'Order' >> beam.Map(lambda _, names: keep + sorted(set(names) - set(keep)), found)
            return {'images': named.images, 'labels': labels, REJECTED: named[REJECTED]}
        match = functools.partial(_pinned_if_matching, pinned=self._pinned,
                                  allow_unknown_labels=self._allow_unknown_labels)
        labels = once | 'MatchPinned' >> beam.Map(lambda _, names: match(names), found)
        checked = named.images | 'CheckLabels' >> beam.FlatMap(
            _known_or_rejected, known=frozenset(self._pinned)).with_outputs(REJECTED, main='images')
        rejected = (named[REJECTED], checked[REJECTED]) | 'AllRejected' >> beam.Flatten()
        return {'images': checked.images, 'labels': labels, REJECTED: rejected}
