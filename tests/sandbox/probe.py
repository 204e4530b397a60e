"""What the sandbox tests run inside a sandbox: ``connect PORT`` prints ``connected`` or
``refused <why>`` for 127.0.0.1:PORT and always exits 0; ``sleep MARKER`` sleeps for ten minutes
(MARKER in its command line lets the test find it from outside the PID namespace)."""

from __future__ import annotations

import socket
import sys
import time

if __name__ == "__main__":
    if sys.argv[1] == "connect":
        try:
            socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5).close()
            print("connected")
        except OSError as exc:
            print("refused", exc)
    elif sys.argv[1] == "sleep":
        time.sleep(600)
