"""Decides the class list and drops images whose class is not in it."""
import apache_beam as beam

from transforms.records import UNKNOWN_LABEL, Rejected

REJECTED = 'rejected'


class ResolveLabels(beam.PTransform):
    """ImageRef -> {'images', 'labels', 'rejected'}.

    ``labels`` is a one-element PCollection holding the ordered class list: ``pinned`` when given
    (a --labels file), else ``keep`` (the previous version's classes, so no label is renumbered)
    followed by the other class names found, sorted. With a pinned list, images of other classes are
    rejected as ``unknown_label``.
    """

    def __init__(self, pinned=None, keep=()):
        super().__init__()
        self._pinned = list(pinned) if pinned is not None else None
        self._keep = list(keep or ())

    def expand(self, refs):
        if self._pinned is None:
            keep = self._keep
            labels = (refs
                      | 'ClassNames' >> beam.Map(lambda ref: ref.label)
                      | 'Distinct' >> beam.Distinct()
                      | 'Gather' >> beam.combiners.ToList()
                      | 'Order' >> beam.Map(lambda found: keep + sorted(set(found) - set(keep))))
            empty = refs.pipeline | 'NoUnknownLabels' >> beam.Create([])
            return {'images': refs, 'labels': labels, REJECTED: empty}
        known = frozenset(self._pinned)

        def check(ref):
            if ref.label in known:
                yield ref
            else:
                yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
                    ref.source, UNKNOWN_LABEL, f'class {ref.label!r} is not in the --labels file'))

        checked = refs | 'CheckLabels' >> beam.FlatMap(check).with_outputs(REJECTED, main='images')
        labels = refs.pipeline | 'PinnedLabels' >> beam.Create([self._pinned])
        return {'images': checked.images, 'labels': labels, REJECTED: checked[REJECTED]}
