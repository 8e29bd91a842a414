"""The accounting invariant and the error-rate check that guard LATEST (plain functions of publish)."""
import pytest

from imgrec.console.errors import BuildFailed, UserError
from imgrec.pipelines.options import parse_args
from imgrec.transforms.elements import Duplicate, Rejected
from imgrec.transforms.publish import account, check_error_rate, top_reasons

STATS = [{'split': 'train', 'records': 5}, {'split': 'train', 'records': 3}, {'split': 'validation', 'records': 2}]
REJECTED = [Rejected('a/1.jpg', 'truncated', 'm', 10, 'train'), Rejected('a/2.jpg', 'empty', 'm', 0, 'validation'),
            Rejected('c/3.jpg', 'unknown_label', 'm', -1, '')]
DUPLICATES = [Duplicate('a/4.jpg', 'a/0.jpg', 'a', 'f' * 64, 10, 'train')]


def test_listed_equals_written_plus_quarantined_plus_duplicates_per_split_and_in_total():
    per_split, totals = account(STATS, {'train': 10, 'validation': 3}, REJECTED, DUPLICATES)
    assert per_split == {'train': {'inputs': 10, 'written': 8, 'quarantined': 1, 'duplicates': 1},
                         'validation': {'inputs': 3, 'written': 2, 'quarantined': 1, 'duplicates': 0}}
    assert totals == {'inputs': 14, 'written': 10, 'quarantined': 3, 'duplicates': 1}


@pytest.mark.parametrize('listed', [{'train': 11, 'validation': 3}, {'train': 10, 'validation': 2}, {'train': 10}])
def test_an_input_lost_or_counted_twice_fails_the_build_naming_the_split(listed):
    with pytest.raises(BuildFailed, match=r"accounting error in split '(train|validation)'"):
        account(STATS, listed, REJECTED, DUPLICATES)


def test_the_error_rate_counts_bad_inputs_not_excluded_classes():
    totals = {'inputs': 40}
    check_error_rate(totals, REJECTED, 0.05, 'q.jsonl')  # 2 of 40 = 5%: at the limit, not over it
    with pytest.raises(BuildFailed) as failed:
        check_error_rate(totals, REJECTED + [Rejected('a/5.jpg', 'truncated', 'm', 1, 'train')], 0.05, 'q.jsonl')
    assert str(failed.value) == ('3 of 40 input images quarantined (7.5%), over --max_error_rate 5.0%; '
                                 'top reasons: truncated (2), empty (1); LATEST not updated; see q.jsonl')


def test_top_reasons_rank_by_count_then_name():
    rejected = [Rejected(str(i), reason, '') for i, reason in enumerate('b a c c a d'.split())]
    assert top_reasons(rejected) == 'a (2), c (2), b (1)'


@pytest.mark.parametrize('value', ['1.5', '-0.1', '5%'])
def test_max_error_rate_must_be_a_fraction(value):
    with pytest.raises(UserError, match='max_error_rate'):
        parse_args(['--input', 'in', '--output', 'out', '--max_error_rate', value])
