"""v2's reader decorators: functions that take readers and return a new reader.

A reader is a callable with no arguments that returns an iterator of samples; a sample is a
tuple (or list) of fields. Every decorator here returns such a callable and reads nothing
until it is called, except ``cache``, which keeps the first pass it reads.

Where v2 could hang or lose an error, these do not: ``buffered`` and ``xmap_readers`` run
the reader (and the mapper) in background threads, and an exception raised there is raised
again in the loop that consumes the samples; a consumer that stops early (``break``) makes
the threads stop within a fraction of a second instead of leaving them blocked forever.
"""
import itertools
import numbers
import queue
import random
import threading

from ... import errors

__all__ = ["map_readers", "buffered", "compose", "chain", "shuffle", "ComposeNotAligned",
           "firstn", "xmap_readers", "cache"]

# How often a blocked background thread looks whether its consumer has gone. Only the time a
# thread takes to notice an early stop depends on it, never the speed of a normal pass.
_POLL_S = 0.05


class ComposeNotAligned(errors.ValueError):
    """compose(check_alignment=True) met readers that yield different numbers of samples."""


def _positive_int(value, name, caller):
    # An integral float is taken: `BATCH / 2` was an int in the Python 2 of v2's scripts
    # and is a float (64.0) in Python 3.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise errors.ValueError(f"{caller}: {name} must be a positive int, got {value!r}")
    return int(value)


def map_readers(func, *readers):
    """A reader yielding ``func(s1, s2, ...)`` for the samples s1, s2, ... that the readers
    yield side by side; it ends with the shortest reader."""
    def reader():
        return map(func, *(r() for r in readers))
    return reader


def shuffle(reader, buf_size):
    """A reader that fills a buffer of ``buf_size`` samples, shuffles it with Python's
    ``random`` module (so ``random.seed`` makes the order reproducible, as in v2), yields it,
    and starts again; the last, partial buffer is shuffled and yielded too. Samples never
    move further than one buffer: shuffle the whole set with buf_size >= its length."""
    buf_size = _positive_int(buf_size, "buf_size", "shuffle")

    def data_reader():
        buf = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                random.shuffle(buf)
                yield from buf
                buf = []
        random.shuffle(buf)
        yield from buf
    return data_reader


def chain(*readers):
    """A reader yielding all samples of the first reader, then of the second, and so on."""
    def reader():
        return itertools.chain.from_iterable(r() for r in readers)
    return reader


def _as_fields(sample):
    # v2 flattens tuples only: a list sample stays one field, as it did there.
    return sample if isinstance(sample, tuple) else (sample,)


def compose(*readers, check_alignment=True):
    """A reader whose samples join the readers' samples side by side, tuples flattened:
    readers yielding ``(1, 2)``, ``3`` and ``(4, 5)`` give ``(1, 2, 3, 4, 5)``.

    With ``check_alignment`` (the default), a reader ending before the others raises
    ComposeNotAligned once the aligned samples have been yielded; with
    ``check_alignment=False`` the composed reader ends with the shortest one."""
    def reader():
        iterators = [r() for r in readers]
        if not check_alignment:
            for samples in zip(*iterators):
                yield sum(map(_as_fields, samples), ())
            return
        # A private sentinel marks an ended reader: v2 used None, so a reader that yielded
        # None as a sample looked unaligned.
        ended = object()
        for index, samples in enumerate(itertools.zip_longest(*iterators, fillvalue=ended)):
            short = [i for i, s in enumerate(samples) if s is ended]
            if short:
                raise ComposeNotAligned(
                    f"compose: reader(s) {short} ended after {index} samples while the other "
                    f"reader(s) had more; make them yield as many samples, or pass "
                    f"check_alignment=False to stop at the shortest")
            yield sum(map(_as_fields, samples), ())
    return reader


def firstn(reader, n):
    """A reader yielding at most the first ``n`` samples of ``reader``. Reads exactly n
    samples (v2 read one more, then dropped it) and then closes the reader's iterator so a
    file it holds open is released."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise errors.ValueError(f"firstn: n must be an int >= 0, got {n!r}")

    def firstn_reader():
        iterator = reader()
        try:
            yield from itertools.islice(iterator, n)
        finally:
            _close(iterator)
    return firstn_reader


def cache(reader):
    """A reader that reads ``reader`` once, on its first call, keeps every sample in memory,
    and replays them on every later call. (v2 read at decoration time; reading on the first
    call gives the same samples without doing I/O where the pipeline is only being built.)"""
    kept = []

    def cached_reader():
        if not kept:
            kept.append(tuple(reader()))
        return iter(kept[0])
    return cached_reader


# --- background threads -------------------------------------------------------------------

class _Failure:
    """An exception raised in a background thread, carried to the consumer through a queue."""

    def __init__(self, exc, where):
        self.exc = exc
        self.where = where

    def reraise(self):
        if hasattr(self.exc, "add_note"):  # Python 3.11+
            self.exc.add_note(f"(raised in {self.where}, a background thread; re-raised in "
                              f"the loop reading the samples)")
        raise self.exc


_END = object()  # compared with `is`: v2's `e != end` broke on numpy samples


def _close(iterator):
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


def _put(q, item, stop):
    """Put ``item`` into ``q``, waiting for room unless the consumer has stopped.
    Returns False when it stopped first."""
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            pass
    return False


def _get(q, stop):
    """The next item of ``q``, or _END once the consumer has stopped."""
    while not stop.is_set():
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            pass
    return _END


def _acquire(semaphore, stop):
    while not stop.is_set():
        if semaphore.acquire(timeout=_POLL_S):
            return True
    return False


def _start(target, args, name):
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def buffered(reader, size):
    """A reader that reads ``reader`` ahead in a background thread into a queue of up to
    ``size`` samples, so reading overlaps with the work done on each sample. Samples keep
    their order; an exception raised by the reader is raised again in the consuming loop."""
    size = _positive_int(size, "size", "buffered")

    def fill(iterator, q, stop):
        try:
            for sample in iterator:
                if not _put(q, sample, stop):
                    break
            else:
                _put(q, _END, stop)
        except BaseException as e:  # any failure must reach the consumer, or it waits forever
            _put(q, _Failure(e, "the reader given to buffered"), stop)
        finally:
            _close(iterator)

    def data_reader():
        q, stop = queue.Queue(maxsize=size), threading.Event()
        _start(fill, (reader(), q, stop), "hl.v2.reader.buffered")
        try:
            while True:
                item = q.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    item.reraise()
                yield item
        finally:
            stop.set()  # also on break / garbage collection: the thread then ends
    return data_reader


def xmap_readers(mapper, reader, process_num, buffer_size, order=False):
    """A reader yielding ``mapper(sample)`` for every sample of ``reader``, the mapper run
    by ``process_num`` threads (threads, as in v2, despite the name: it pays when the
    mapper releases the GIL, as numpy and I/O do). ``buffer_size`` bounds the queues
    between the reading thread, the mapping threads and the consumer.

    ``order=False`` yields results as they are ready; ``order=True`` yields them in the
    reader's order (v2 spun a busy loop for this; here the consumer reorders, and at most
    2 * buffer_size + process_num samples are in flight). An exception raised by the reader
    or the mapper is raised again in the consuming loop."""
    process_num = _positive_int(process_num, "process_num", "xmap_readers")
    buffer_size = _positive_int(buffer_size, "buffer_size", "xmap_readers")

    def read(iterator, in_q, in_flight, stop):
        # Every item is (index, sample or _Failure): a reader failure travels through the
        # mappers so that, with order=True, it comes after the samples read before it.
        index = 0
        try:
            for sample in iterator:
                if not (_acquire(in_flight, stop) and _put(in_q, (index, sample), stop)):
                    return
                index += 1
        except BaseException as e:
            if _acquire(in_flight, stop):
                _put(in_q, (index, _Failure(e, "the reader given to xmap_readers")), stop)
        finally:
            _close(iterator)
        for _ in range(process_num):
            _put(in_q, _END, stop)

    def map_worker(in_q, out_q, stop):
        while True:
            item = _get(in_q, stop)
            if item is _END:
                _put(out_q, _END, stop)
                return
            index, sample = item
            if not isinstance(sample, _Failure):
                try:
                    sample = mapper(sample)
                except BaseException as e:
                    sample = _Failure(e, "the mapper given to xmap_readers")
            if not _put(out_q, (index, sample), stop):
                return

    def results(out_q):
        """(index, result) pairs as the workers finish them, until every worker is done."""
        running = process_num
        while running:
            item = out_q.get()
            if item is _END:
                running -= 1
            else:
                yield item

    def xreader():
        in_q, out_q = queue.Queue(buffer_size), queue.Queue(buffer_size)
        stop = threading.Event()
        # Bounds the samples read but not yet yielded. Without order the queues already do;
        # with order it keeps the reordering dict small while one slow sample holds it up.
        in_flight = threading.Semaphore(2 * buffer_size + process_num)
        _start(read, (reader(), in_q, in_flight, stop), "hl.v2.reader.xmap-read")
        for i in range(process_num):
            _start(map_worker, (in_q, out_q, stop), f"hl.v2.reader.xmap-map-{i}")
        pairs = results(out_q)
        try:
            for result in _in_order(pairs) if order else (r for _, r in pairs):
                in_flight.release()
                if isinstance(result, _Failure):
                    result.reraise()
                yield result
        finally:
            stop.set()  # also on break / garbage collection: the threads then end
    return xreader


def _in_order(pairs):
    """The results of (index, result) pairs that arrive in any order, by index."""
    pending, next_index = {}, 0
    for index, result in pairs:
        pending[index] = result
        while next_index in pending:
            yield pending.pop(next_index)
            next_index += 1
