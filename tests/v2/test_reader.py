"""hl.v2.reader (decorators and creators) and hl.v2.minibatch.batch."""
import random
import threading
import time

import numpy as np
import pytest

from hl import errors
from hl.v2 import reader as rd
from hl.v2.minibatch import batch


def from_list(items):
    return lambda: iter(items)


def counting(n, log):
    """A reader of 0..n-1 that appends each value it reads to log."""
    def reader():
        for i in range(n):
            log.append(i)
            yield i
    return reader


def failing_after(n, exc):
    def reader():
        yield from range(n)
        raise exc
    return reader


def wait_for_threads_to_end(prefix="hl.v2.reader", timeout=2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith(prefix)]:
            return True
        time.sleep(0.01)
    return False


# --- shuffle ------------------------------------------------------------------------------

def test_shuffle_yields_a_permutation_within_each_buffer():
    out = list(rd.shuffle(from_list(list(range(10))), buf_size=4)())
    assert sorted(out) == list(range(10))
    # Buffers of 4, 4, then the partial one of 2: nothing crosses a buffer's edge.
    assert sorted(out[:4]) == [0, 1, 2, 3]
    assert sorted(out[4:8]) == [4, 5, 6, 7]
    assert sorted(out[8:]) == [8, 9]


def test_shuffle_keeps_duplicates_and_is_reproducible_with_random_seed():
    items = [(i % 3, str(i % 2)) for i in range(50)]
    shuffled = rd.shuffle(from_list(items), buf_size=100)
    random.seed(7)
    first = list(shuffled())
    random.seed(7)
    assert list(shuffled()) == first
    assert sorted(first) == sorted(items)
    assert first != items


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8", None, True, float("nan")])
def test_shuffle_rejects_a_buffer_size_that_is_not_a_positive_int(bad):
    with pytest.raises(errors.ValueError, match="buf_size"):
        rd.shuffle(from_list([1]), bad)


# --- buffered -----------------------------------------------------------------------------

def test_buffered_preserves_order_and_numpy_samples():
    rows = [np.full(3, i, np.float32) for i in range(20)]
    out = list(rd.buffered(from_list(rows), size=3)())
    assert len(out) == 20
    for i, row in enumerate(out):
        assert row is rows[i]


def test_buffered_reraises_the_readers_exception_after_the_samples_before_it():
    out = []
    with pytest.raises(KeyError, match="broken record"):
        for sample in rd.buffered(failing_after(5, KeyError("broken record")), size=2)():
            out.append(sample)
    assert out == [0, 1, 2, 3, 4]


def test_buffered_reader_can_be_read_again():
    buffered = rd.buffered(from_list([1, 2, 3]), 1)
    assert list(buffered()) == [1, 2, 3]
    assert list(buffered()) == [1, 2, 3]


def test_buffered_thread_ends_when_the_consumer_stops_early():
    samples = rd.buffered(counting(10_000, []), size=2)()
    assert next(samples) == 0
    samples.close()
    assert wait_for_threads_to_end()


# --- compose, chain, map_readers, firstn, cache ---------------------------------------------

def test_compose_flattens_tuples_but_not_lists():
    a = from_list([(1, 2), (10, 20)])
    b = from_list([3, 30])
    c = from_list([[4, 5], [40, 50]])
    assert list(rd.compose(a, b, c)()) == [(1, 2, 3, [4, 5]), (10, 20, 30, [40, 50])]


def test_compose_raises_when_readers_are_not_aligned():
    composed = rd.compose(from_list([1, 2, 3]), from_list([1, 2]))
    out = []
    with pytest.raises(rd.ComposeNotAligned, match=r"reader\(s\) \[1\] ended after 2"):
        for sample in composed():
            out.append(sample)
    assert out == [(1, 1), (2, 2)]
    assert issubclass(rd.ComposeNotAligned, errors.ValueError)
    assert issubclass(rd.ComposeNotAligned, ValueError)


def test_compose_without_alignment_check_stops_at_the_shortest():
    composed = rd.compose(from_list([1, 2, 3]), from_list([5]), check_alignment=False)
    assert list(composed()) == [(1, 5)]


def test_compose_accepts_none_samples():
    # v2 took None for "this reader ended"; a None sample is a sample.
    assert list(rd.compose(from_list([None]), from_list([1]))()) == [(None, 1)]


def test_chain_and_map_readers():
    assert list(rd.chain(from_list([1, 2]), from_list([]), from_list([3]))()) == [1, 2, 3]
    added = rd.map_readers(lambda x, y: x + y, from_list([1, 2, 3]), from_list([10, 20]))
    assert list(added()) == [11, 22]


def test_firstn_reads_exactly_n_samples():
    log = []
    assert list(rd.firstn(counting(10, log), 3)()) == [0, 1, 2]
    assert log == [0, 1, 2]
    assert list(rd.firstn(counting(2, []), 5)()) == [0, 1]
    assert list(rd.firstn(counting(2, []), 0)()) == []
    with pytest.raises(errors.ValueError, match="n must be"):
        rd.firstn(counting(2, []), -1)


def test_cache_reads_the_reader_once():
    log = []
    cached = rd.cache(counting(4, log))
    assert log == []
    assert list(cached()) == [0, 1, 2, 3]
    assert list(cached()) == [0, 1, 2, 3]
    assert log == [0, 1, 2, 3]


# --- xmap_readers -------------------------------------------------------------------------

def slow_square(x):
    time.sleep(random.random() * 0.002)  # finish out of order
    return x * x


def test_xmap_with_order_keeps_the_readers_order():
    mapped = rd.xmap_readers(slow_square, from_list(list(range(60))), 4, 3, order=True)
    assert list(mapped()) == [i * i for i in range(60)]


def test_xmap_without_order_yields_the_same_multiset():
    items = [i % 7 for i in range(60)]
    mapped = rd.xmap_readers(slow_square, from_list(items), 4, 3)
    assert sorted(mapped()) == sorted(x * x for x in items)


@pytest.mark.parametrize("order", [False, True])
def test_xmap_reraises_the_mappers_exception(order):
    def mapper(x):
        if x == 7:
            raise ZeroDivisionError("bad sample 7")
        return x

    mapped = rd.xmap_readers(mapper, from_list(list(range(20))), 3, 2, order=order)
    with pytest.raises(ZeroDivisionError, match="bad sample 7"):
        list(mapped())
    assert wait_for_threads_to_end()


def test_xmap_in_order_raises_the_readers_exception_after_its_samples():
    mapped = rd.xmap_readers(slow_square, failing_after(10, OSError("disk gone")), 3, 2,
                             order=True)
    out = []
    with pytest.raises(OSError, match="disk gone"):
        for sample in mapped():
            out.append(sample)
    assert out == [i * i for i in range(10)]


@pytest.mark.parametrize("order", [False, True])
def test_xmap_threads_end_when_the_consumer_stops_early(order):
    samples = rd.xmap_readers(slow_square, counting(10_000, []), 4, 2, order=order)()
    assert len([next(samples) for _ in range(5)]) == 5
    samples.close()
    assert wait_for_threads_to_end()


def test_xmap_rejects_bad_thread_and_buffer_counts():
    with pytest.raises(errors.ValueError, match="process_num"):
        rd.xmap_readers(abs, from_list([1]), 0, 4)
    with pytest.raises(errors.ValueError, match="buffer_size"):
        rd.xmap_readers(abs, from_list([1]), 2, -1)


# --- creators -----------------------------------------------------------------------------

def test_np_array_yields_rows_along_the_first_axis():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    rows = list(rd.creator.np_array(x)())
    assert len(rows) == 4
    np.testing.assert_array_equal(np.stack(rows), x)
    assert list(rd.creator.np_array(np.array([5, 6]))()) == [5, 6]
    assert [r.tolist() for r in rd.creator.np_array([[1, 2], [3, 4]])()] == [[1, 2], [3, 4]]
    with pytest.raises(errors.ValueError, match="0-d"):
        rd.creator.np_array(np.float32(3.0))


def test_text_file_yields_lines_without_their_newline(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("first line\n\nthird\nno newline at the end", encoding="utf-8")
    lines = rd.creator.text_file(str(path))
    assert list(lines()) == ["first line", "", "third", "no newline at the end"]
    assert list(lines()) == list(lines())


# --- batch --------------------------------------------------------------------------------

def test_batch_keeps_a_short_last_batch_unless_drop_last():
    samples = from_list([(i, -i) for i in range(7)])
    sizes = [len(b) for b in batch(samples, 3)()]
    assert sizes == [3, 3, 1]
    assert [len(b) for b in batch(samples, 3, drop_last=True)()] == [3, 3]
    assert batch(samples, 7)().__next__() == [(i, -i) for i in range(7)]
    assert list(batch(from_list([]), 4)()) == []


def test_batch_size_must_be_a_positive_int():
    for bad in (0, -2, 2.5, "3", None, True):
        with pytest.raises(errors.ValueError, match="batch_size must be a positive int"):
            batch(from_list([1]), bad)
    # Python 3 turned v2 scripts' `BATCH / 2` into a float: an integral one is taken.
    assert [len(b) for b in batch(from_list([1, 2, 3]), 2.0)()] == [2, 1]
