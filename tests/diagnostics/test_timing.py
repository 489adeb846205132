"""interleaved_medians: round-robin order and per-entry medians."""

from bcg.diagnostics.timing import interleaved_medians


def test_calls_are_interleaved_and_medians_returned():
    order = []
    fns = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    t = interleaved_medians(fns, repeats=3)
    assert order == ["a", "b"] * 3
    assert set(t) == {"a", "b"} and all(v >= 0.0 for v in t.values())
