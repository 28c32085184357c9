"""The user tier (seed 000 section 2.2.1): accounts (the Service Manager's authentication),
each owner's pages (the Personal Information Roadmap: ACIs, notifications with what changed,
stored versions), profile management (URDs, sentinels) and a JSON API.

- ``accounts``  the account store: Argon2id passwords, API and feed tokens, logins, login attempts (SQLite)
- ``config``    the ``WEBRACE_WEB_*`` settings
- ``owners``    what an owner is shown (read side, no Flask)
- ``profile``   an owner's URDs and sentinels, validated as the commands validate (no Flask)
- ``auth``      who is asking and what they may see; sessions and CSRF
- ``app``       the Flask app; ``pages`` and ``api`` its views
- ``server``    waitress: ``serve`` in the foreground, ``start`` in a thread
"""
