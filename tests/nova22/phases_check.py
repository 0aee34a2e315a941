"""Run by ``test_nova_path_bench.TestPhases`` in a process patched as
Nova's services are: prints the CPU seconds ``cloud.Phases`` charged to
each phase while a marked green thread spins, while the threads it
starts (``threading``, eventlet's green threads) spin, and while a pass
of one of grant_scheduler's loops spins."""

import nova.monkey_patch  # noqa: F401,I001 - first, as in every Nova service

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import eventlet  # noqa: E402

from grant_scheduler.nova import loop  # noqa: E402
from tests.nova22 import cloud  # noqa: E402

SPIN = 0.2


def spin():
    ended = time.process_time() + SPIN
    while time.process_time() < ended:
        pass


def main():
    phases = cloud.Phases()
    cloud._phase_loops(phases)
    phases.start()
    with phases("marked"):
        thread = threading.Thread(target=spin)
        thread.start()
        thread.join()
        eventlet.spawn(spin).wait()
        spin()
    unmarked = threading.Thread(target=spin)
    unmarked.start()
    unmarked.join()
    owner = threading.Event()  # any object a weak reference can hold
    loop.Loop(owner, lambda owner: spin(), 1.0, "spin")._tick()
    phases.stop()
    print(json.dumps({"spin": SPIN, "cpu": phases.cpu}))


if __name__ == "__main__":
    main()
