"""hl.graph.recording.on_replay_each: consecutive registrations of one function become one
replay hook called with their items; anything registered in between keeps its place."""
from hl.graph import recording


def test_consecutive_registrations_group_and_keep_their_order():
    calls = []
    each = lambda items: calls.append(("each", list(items)))  # noqa: E731
    other = lambda items: calls.append(("other", list(items)))  # noqa: E731
    rec = recording.begin()
    try:
        recording.on_replay_each(each, "a")
        recording.on_replay_each(each, "b")
        recording.on_replay(lambda: calls.append(("plain", None)))
        recording.on_replay_each(each, "c")
        recording.on_replay_each(each, "c", once=True)  # already in this group: not again
        recording.on_replay_each(each, "c")             # without once: again
        recording.on_replay_each(other, "d")
    finally:
        recording.end()
    for fn in rec.replay_hooks:
        fn()
    assert calls == [("each", ["a", "b"]), ("plain", None), ("each", ["c", "c"]),
                     ("other", ["d"])]


def test_outside_a_recording_nothing_is_registered():
    recording.on_replay_each(lambda items: None, "x")
    assert recording.current() is None
