"""Handing a referee reward to a trainer: TRL (`referee.backends.trl`), verl
(`referee.backends.verl`), Prime Intellect's verifiers (`referee.backends.prime_verifiers`) and
any trainer over HTTP (`referee.backends.server`).

Each backend takes a `Reward` or a spec (path or mapping) and gives the trainer exactly the
number `referee score` prints for the same rollout. Only these modules import trl, verl, torch,
ray, verifiers or aiohttp, and only when they are used.
"""
