"""Pure decision logic (adaptive batching, circuit breaker, retries, autoscaling).

Plain synchronous Python: a snapshot and `now` in, a decision out; no Ray, no HTTP.
"""
