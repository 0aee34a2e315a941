"""Tell ``test_in_nova`` which of its classes pytest selected, so that it
can run them side by side.

``in_nova`` is not collected: each of its classes runs in a Nova-like
process of its own (``test_in_nova``), never in pytest's."""

collect_ignore = ["in_nova"]


def pytest_collection_finish(session):
    from tests.nova22 import test_in_nova

    test_in_nova.SELECTED[:] = [
        item.obj.in_nova
        for item in session.items
        if getattr(getattr(item, "obj", None), "in_nova", None)
    ]
