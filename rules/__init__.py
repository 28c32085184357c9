"""Scout-style rules: per-document processors users write and configure (issue: Scout rules).

Nothing here yet; see the README's roadmap.
"""
