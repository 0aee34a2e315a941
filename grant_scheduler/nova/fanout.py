"""Work on many items, a few at a time, in one scheduler process.

Placement is read node by node (a provider's usages, its inventories):
where a process has many such reads to make at once (its first sync, a
request's alternates), they are made side by side on threads, which are
green threads in Nova's services (eventlet patches ``threading``), so
that their round trips overlap.
"""

import threading

_DONE = object()


def each(items, work, at_once):
    """``work(item)`` for every item of ``items``, at most ``at_once`` at
    a time (the calling thread is one of them); returns once every call
    has returned.

    The first exception a call raises is raised here, after the calls
    already running have ended; the items not yet started are then left.
    """
    items = list(items)
    workers = max(1, min(at_once, len(items)))
    if workers == 1:
        for item in items:
            work(item)
        return
    pending = iter(items)
    lock = threading.Lock()
    failures = []

    def run():
        while True:
            with lock:
                item = _DONE if failures else next(pending, _DONE)
            if item is _DONE:
                return
            try:
                work(item)
            except BaseException as exc:  # noqa: BLE001 - raised below
                with lock:
                    failures.append(exc)
                return

    helpers = [
        threading.Thread(target=run, daemon=True) for _ in range(workers - 1)
    ]
    for helper in helpers:
        helper.start()
    run()
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
