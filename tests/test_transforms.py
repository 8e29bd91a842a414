"""Unit tests of the build's transforms with Beam's TestPipeline and assert_that."""
import os

import apache_beam as beam
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.contract import features as F
from imgrec.contract.tfrecord import frame
from imgrec.storage import storage
from imgrec.transforms.elements import EncodedImage, ImageRef
from imgrec.transforms.examples import ToExample, to_example
from imgrec.transforms.labels import ResolveLabels
from imgrec.transforms.listing import ListImages
from imgrec.transforms.splits import AssignSplit, split_for


def _tree(root):
    for path in ('cat/a.jpg', 'cat/deep/er/B.JPEG', 'dog/c.png', 'dog/notes.txt', 'stray.jpg', 'dog/.DS_Store',
                 'dog/._c.png'):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b'bytes of ' + path.encode())


def test_list_images_labels_by_first_folder_and_counts_the_rest(tmp_path):
    _tree(tmp_path)
    with TestPipeline() as p:
        listed = p | ListImages(input_root=str(tmp_path))
        assert_that(listed['images'] | beam.Map(lambda ref: (ref.source, ref.label, ref.path)), equal_to([
            ('cat/a.jpg', 'cat', str(tmp_path / 'cat/a.jpg')),
            ('cat/deep/er/B.JPEG', 'cat', str(tmp_path / 'cat/deep/er/B.JPEG')),
            ('dog/c.png', 'dog', str(tmp_path / 'dog/c.png'))]))
        assert_that(listed['ignored'], equal_to(['dog/notes.txt', 'stray.jpg', 'dog/.DS_Store', 'dog/._c.png']),
                    label='Ignored')


def test_labels_are_discovered_sorted_or_pinned():
    refs = [ImageRef('p1', 's1', 'zebra'), ImageRef('p2', 's2', 'ant'), ImageRef('p3', 's3', 'ant'),
            ImageRef('p4', 's4', 'moth')]
    with TestPipeline() as p:
        found = p | 'Found' >> beam.Create(refs) | 'Discover' >> ResolveLabels()
        assert_that(found['labels'], equal_to([['ant', 'moth', 'zebra']]), label='Discovered')
        pinned = p | 'Given' >> beam.Create(refs) | 'Pin' >> ResolveLabels(['zebra', 'ant'], allow_unknown_labels=True)
        assert_that(pinned['labels'], equal_to([['zebra', 'ant']]), label='Pinned')
        assert_that(pinned['images'] | 'Kept' >> beam.Map(lambda r: r.source), equal_to(['s1', 's2', 's3']),
                    label='KeptImages')
        assert_that(pinned['rejected'] | 'Why' >> beam.Map(lambda r: (r.source, r.reason)),
                    equal_to([('s4', 'unknown_label')]), label='Rejected')


def test_assign_split_uses_the_source_hash():
    weights = (('train', 3), ('test', 1))
    refs = [ImageRef(f'/x/{i}', f'c/{i}.jpg', 'c') for i in range(50)]
    with TestPipeline() as p:
        split = p | beam.Create(refs) | AssignSplit(weights)
        assert_that(split | beam.Map(lambda r: (r.source, r.split)),
                    equal_to([(r.source, split_for(r.source, weights)) for r in refs]))


def test_to_example_spills_every_contract_feature_and_passes_a_reference(tmp_path):
    image = EncodedImage(ImageRef('/in/dog/x.jpg', 'dog/x.jpg', 'dog', 'train', size=7, mtime_ns=5),
                         'ab' * 32, b'\xff\xd8jpeg', 24, 48, source_bytes=7)
    spill_dir = str(tmp_path / 'spill')

    def spilled(batches):
        ((ref,),) = batches
        assert (ref.split, ref.label, ref.order_key[1], ref.sha256, ref.mtime_ns) == ('train', 1, 'dog/x.jpg',
                                                                                      'ab' * 32, 5)
        with open(ref.payload_file, 'rb') as stream:
            stream.seek(ref.payload_offset)
            assert stream.read(ref.payload_length) == frame(to_example(image, 1))

    with TestPipeline() as p:
        labels = p | 'Labels' >> beam.Create([['cat', 'dog']])
        records = p | beam.Create([[image]]) | ToExample(beam.pvalue.AsSingleton(labels), spill_dir,
                                                         storage.storage_for(spill_dir))
        assert_that(records, spilled)
    assert os.listdir(spill_dir)
    feature = tf.train.Example.FromString(to_example(image, 1)).features.feature
    assert feature[F.LABEL].int64_list.value == [1]
    assert feature[F.LABEL_TEXT].bytes_list.value == [b'dog']
    assert feature[F.SOURCE].bytes_list.value == [b'dog/x.jpg']
    assert feature[F.SHA256].bytes_list.value == [b'ab' * 32]
    assert (feature[F.IMAGE_HEIGHT].int64_list.value, feature[F.IMAGE_WIDTH].int64_list.value) == ([24], [48])
    assert feature[F.IMAGE_CHANNELS].int64_list.value == [3]
    assert feature[F.IMAGE_FORMAT].bytes_list.value == [b'JPEG']
    assert feature[F.IMAGE_ENCODED].bytes_list.value == [b'\xff\xd8jpeg']
