"""pydoc's documentation server (``python -m pydoc -p``) with an access log: pydoc's request
handler silences ``log_message``, so requests are logged here as ``http.server`` logs them, on
standard error. Run with the venv's Python: ``python pydoc_server.py PORT`` (stops at the end
of standard input, as pydoc's server does)."""

import http.server
import pydoc
import sys
import time


def log_request(self, code="-", size="-"):
    stamp = time.strftime("%d/%b/%Y %H:%M:%S")
    sys.stderr.write(f'{self.client_address[0]} - - [{stamp}] "{self.requestline}" {getattr(code, "value", code)} '
                     f"{size}\n")
    sys.stderr.flush()


http.server.BaseHTTPRequestHandler.log_request = log_request
pydoc.browse(int(sys.argv[1]), open_browser=False, hostname="127.0.0.1")
