"""A TCP forwarder a test can cut, to make a database go away on cue.

``stop()`` closes the listening socket and every forwarded connection, so
open connections break and new ones are refused; ``start()`` listens again
on the same port.
"""

import socket
import threading

DEFAULT_PORTS = {"mysql": 3306, "postgresql": 5432}


def through(url):
    """A started ``TcpProxy`` to the server of database ``url`` (a
    SQLAlchemy URL object), and the same URL through it."""
    from grant_scheduler.db import sa_compat

    port = url.port or DEFAULT_PORTS[url.get_backend_name()]
    cut = TcpProxy(url.host, port).start()
    text = sa_compat.render_url(url, hide_password=False)
    via = "@127.0.0.1:%d/" % cut.port
    text = text.replace("@%s:%s/" % (url.host, port), via)
    return cut, text.replace("@%s/" % url.host, via)


class TcpProxy:
    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.port = None
        self._listener = None
        self._sockets = []
        self._lock = threading.Lock()

    def start(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port or 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(
            target=self._accept, args=(listener,), daemon=True
        ).start()
        return self

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink), daemon=True
                ).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self):
        if self._listener is not None:
            # NOTE: close() alone leaves a thread blocked in accept()
            # holding the socket: it would take one more connection.
            # shutdown() wakes it first.
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
