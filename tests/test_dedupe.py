"""Dedupe by content (TestPipeline + assert_that): one copy written, others recorded, conflicts quarantined."""
import random

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.transforms.dedupe import Dedupe
from imgrec.transforms.elements import Duplicate, RecordRef


def _image(source, label, content, split='train'):
    return RecordRef(source=source, label_text=label, split=split, label=ord(label) - ord('a'),
                     path=f'/in/{source}', sha256=content * 64, source_size=100 + len(source), mtime_ns=None,
                     generation=None, decisions=('format=JPEG',), payload_file=f'spill/{source}', payload_offset=0,
                     payload_length=40)


IMAGES = [
    _image('a/only.jpg', 'a', '0'),
    # Same bytes, same label: the smallest source name is written, whatever the split.
    _image('a/z.jpg', 'a', '1', 'validation'),
    _image('a/m.jpg', 'a', '1'),
    _image('a/deeper/b.jpg', 'a', '1'),
    # Same bytes, two labels: every copy is quarantined, even the two that agree.
    _image('a/x.png', 'a', '2'),
    _image('a/y.png', 'a', '2', 'validation'),
    _image('b/x.png', 'b', '2'),
]


def test_copies_are_resolved_by_content_and_name_only():
    with TestPipeline() as p:
        for seed in (0, 1, 2):  # neither the input order nor how the records are batched must matter
            images = list(IMAGES)
            random.Random(seed).shuffle(images)
            batches = [images[start:start + seed + 1] for start in range(0, len(images), seed + 1)]
            result = p | f'Images{seed}' >> beam.Create(batches) | f'Dedupe{seed}' >> Dedupe()
            assert_that(result['images'] | f'Kept{seed}' >> beam.Map(lambda record: record.source),
                        equal_to(['a/only.jpg', 'a/deeper/b.jpg']), label=f'Written{seed}')
            assert_that(result['duplicates'], equal_to([
                Duplicate('a/m.jpg', 'a/deeper/b.jpg', 'a', '1' * 64, 107, 'train'),
                Duplicate('a/z.jpg', 'a/deeper/b.jpg', 'a', '1' * 64, 107, 'validation'),
            ]), label=f'Duplicates{seed}')
            assert_that(result['rejected'] | f'Why{seed}' >> beam.Map(
                lambda r: (r.source, r.reason, r.message, r.bytes, r.split)), equal_to([
                    ('a/x.png', 'label_conflict', 'same bytes as a/y.png (a), b/x.png (b)', 107, 'train'),
                    ('a/y.png', 'label_conflict', 'same bytes as a/x.png (a), b/x.png (b)', 107, 'validation'),
                    ('b/x.png', 'label_conflict', 'same bytes as a/x.png (a), a/y.png (a)', 107, 'train'),
                ]), label=f'Conflicts{seed}')


def test_a_path_listed_twice_is_written_once():
    twice = [_image('a/same.jpg', 'a', '3'), _image('a/same.jpg', 'a', '3')]
    with TestPipeline() as p:
        result = p | beam.Create([twice[:1], twice[1:]]) | Dedupe()
        assert_that(result['images'] | 'Kept' >> beam.Map(lambda record: record.source), equal_to(['a/same.jpg']),
                    label='Written')
        assert_that(result['duplicates'] | 'Of' >> beam.Map(lambda d: (d.source, d.duplicate_of)),
                    equal_to([('a/same.jpg', 'a/same.jpg')]), label='Duplicates')


def test_many_conflicting_copies_are_named_in_a_short_message():
    copies = [_image(f'{label}/{i}.jpg', label, '4') for label in 'ab' for i in range(5)]
    with TestPipeline() as p:
        result = p | beam.Create([copies]) | Dedupe()
        assert_that(result['rejected'] | beam.Map(lambda r: (r.source, r.message)) | beam.Filter(
            lambda pair: pair[0] == 'a/0.jpg'), equal_to([
                ('a/0.jpg', 'same bytes as a/1.jpg (a), a/2.jpg (a), a/3.jpg (a), a/4.jpg (a), b/0.jpg (b) and 4 more')]))


def test_contents_that_only_share_a_content_key_are_not_copies():
    one = _image('a/one.jpg', 'a', '5')
    other = _image('b/other.jpg', 'b', '5')._replace(sha256='5' * 15 + '6' * 49)
    with TestPipeline() as p:
        result = p | beam.Create([[one], [other]]) | Dedupe()
        assert_that(result['images'] | 'Kept' >> beam.Map(lambda record: record.source),
                    equal_to(['a/one.jpg', 'b/other.jpg']), label='Written')
        assert_that(result['rejected'], equal_to([]), label='NoConflicts')
