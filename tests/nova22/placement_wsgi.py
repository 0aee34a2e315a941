"""Debian's placement service (the release Nova 22 ships with), served by
several worker processes on one port.

``python3 -m tests.nova22.placement_wsgi PORT WORKERS`` with
``OS_PLACEMENT_CONFIG_DIR`` naming the directory of its
``placement.conf``.  The parent binds the port and forks the workers;
each builds placement's own WSGI application
(``placement.wsgi.init_application``) and serves it with eventlet, as
Nova's own services serve their APIs.  SIGTERM stops them all.
"""

import os
import signal
import sys

import eventlet

eventlet.monkey_patch()

from eventlet import wsgi  # noqa: E402


class _Quiet:
    """eventlet's access log, dropped."""

    def write(self, data):
        pass


def _serve(sock):
    from placement import wsgi as placement_wsgi

    application = placement_wsgi.init_application()
    wsgi.server(sock, application, log=_Quiet(), max_size=256)


def main(argv):
    port, workers = int(argv[1]), int(argv[2])
    sock = eventlet.listen(("127.0.0.1", port), backlog=512)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _serve(sock)
            os._exit(0)
        children.append(pid)

    def stop(*args):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    for pid in children:
        while True:
            try:
                os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
