"""Roundup's WSGI application for the tracker at ``$ROUNDUP_TRACKER``, for gunicorn (roundup's own
server refuses to run as root, which CI and these sessions are)."""

import os

from roundup.cgi.wsgi_handler import RequestDispatcher

application = RequestDispatcher(os.environ["ROUNDUP_TRACKER"])
