"""Decides the class list: the class names found, or a pinned list (--labels), checked against them.

A class name is plain text: ``labels.txt`` holds one a line, and line number is label. A name that
holds a line break (LF, CR, or any other character ``str.splitlines`` breaks at) or a NUL cannot
round-trip through it, so the images of such a class are quarantined as ``bad_label`` (counted as
errors), and the rest of the build goes on.

A class folder with no image (a ``ClassFolder`` from the listing) is a class all the same, as Keras's
``image_dataset_from_directory`` keeps it: an empty class, named in dataset.json (``classes.empty``)
and in the summary.

A pinned list must match the classes found: a pinned class with neither images nor a folder, or images
of a class not in the list (e.g. ``Circle`` pinned, folder ``circle``), fail the build in one line
naming them, unless unknown labels are allowed; then images of unlisted classes are quarantined as
``unknown_label``. An empty folder the list does not name is no class: it has no image to lose.
"""
import codecs
import functools

import apache_beam as beam

from imgrec.contract.reasons import BAD_LABEL, UNKNOWN_LABEL
from imgrec.console.errors import BuildFailed
from imgrec.transforms.elements import ClassFolder, Rejected

REJECTED = 'rejected'
NAMES = 'names'  # (class name, whether it has images): one an image, one an empty class folder
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


def listed_names(labels, describe=repr):
    """The first class names of a message ("'a', 'b' and 3 more"), each as ``describe`` shows it."""
    shown = ', '.join(describe(label) for label in labels[:_LISTED])
    return shown + (f' and {len(labels) - _LISTED} more' if len(labels) > _LISTED else '')


def unmatched_labels_message(pinned, found, empty=()):
    """One line naming the pinned classes with no images and the classes found but not pinned; None if they match.

    ``found``: the classes of the images; ``empty``: the class folders with no image, which satisfy a
    pinned class and are no unknown class. A name that differs only in case from one on the other side
    says so.
    """
    found = sorted(set(found))
    folded: dict[str, str] = {}
    for label in found:
        folded.setdefault(label.casefold(), label)
    missing = [label for label in pinned if label not in set(found) | set(empty)]
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
        parts.append(f'images of classes not in --labels: {listed_names(unknown)}')
    return (f"--labels does not match the images: {'; '.join(parts)}; "
            f'give --allow_unknown_labels to drop the classes not listed')


def _checked_names(ref):
    if isinstance(ref, ClassFolder):  # no image to quarantine: a name labels.txt cannot hold is no class
        if is_plain_label(ref.label):
            yield beam.pvalue.TaggedOutput(NAMES, (ref.label, False))
        return
    if is_plain_label(ref.label):
        yield beam.pvalue.TaggedOutput(NAMES, (ref.label, True))
        yield ref
    else:
        yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
            ref.source, BAD_LABEL, f'class name {ref.label!r} holds a line break or NUL: labels.txt cannot hold it'))


def _pinned_if_matching(found, pinned, allow_unknown_labels):
    """``pinned``, if ``found`` ({class: whether it has images}) matches it; else fails the build."""
    message = unmatched_labels_message(pinned, [label for label, has_images in found.items() if has_images],
                                       [label for label, has_images in found.items() if not has_images])
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
    """ImageRef (and ClassFolder) -> {'images', 'labels', 'rejected'}.

    ``labels`` is a one-element PCollection holding the ordered class list: ``pinned`` when given
    (a --labels file), else ``keep`` (the previous version's classes, so no label is renumbered)
    followed by the other class names found, sorted, those of empty class folders (ClassFolder) among
    them; ``images`` holds no ClassFolder. Images of a class whose name is not plain text are
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
        named = refs | 'CheckNames' >> beam.FlatMap(_checked_names).with_outputs(
            REJECTED, NAMES, main='images')
        # The distinct names, the keys of a side input read by one element (a ToList would cost nine steps;
        # beam.Distinct two more than this combine), each with whether it has images; told by the step
        # that checks them, where a step of their own would cost its set-up again.
        found = beam.pvalue.AsDict(named[NAMES] | 'Distinct' >> beam.CombinePerKey(any))
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
