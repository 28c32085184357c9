"""Pushing ACIs and notifications to each owner's channels: the seed's Content-Distribution
Agents (seed 000, section 2.2.1).

- :mod:`~webrace.delivery.channels`: an owner's channels (Apprise URLs, checked by the policy and Apprise)
  and which events go to each; ``open_channels(settings)``.
- :mod:`~webrace.delivery.message`: one message per owner, channel and pass, bounded (pure).
- :mod:`~webrace.delivery.policy`: what the admin lets channels do (schemes, custom
  requests, internal hosts), checked when a channel is added and before each send.
- :mod:`~webrace.delivery.guard`: every connection a send makes checked after its name is
  resolved (public addresses and the allowed hosts only).
- :mod:`~webrace.delivery.send`: one send through Apprise, with a time limit, under the guard.
- :mod:`~webrace.delivery.agent`: the delivery pass (leases, retries with backoff, marks,
  acknowledging ACIs), run by ``scrapy deliver`` and by the crawl's extension.
- :mod:`~webrace.delivery.extension`: the crawl runs a pass after each round, in a thread.

The state (channels, what each was sent, retries, leases) is in the mode's delivery store
(:func:`webrace.backends.open_delivery_store`), channel URLs encrypted
(:mod:`webrace.backends.sealing`).
"""
