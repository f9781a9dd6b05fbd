from models.ranking import runners_up


def test_runners_up_are_the_next_labels_by_probability_without_the_answer():
    labels = ["a", "b", "c", "d"]
    assert runners_up(labels, [0.1, 0.6, 0.05, 0.25]) == (("d", 0.25), ("a", 0.1))
    assert runners_up(labels, [0.1, 0.6, 0.05, 0.25], count=3) == (("d", 0.25), ("a", 0.1), ("c", 0.05))
    assert runners_up(["only"], [1.0]) == ()
