"""The anti-spam filter's own checks, in the order it runs them: this replica's count of
the user (a flood is refused before its texts cost the content rules any CPU), then the
content rules. A ticket passing both goes on to the shared rate limiter, whose answer
the caller waits for. One function, so that a benchmark screens as the filter does."""

from __future__ import annotations

from policies.rate_limit import Admission, UserLimits
from policies.spam import SpamRules


def screen_locally(
    limits: UserLimits,
    rules: SpamRules,
    text: str,
    key: str,
    tier: str,
    digest: str,
    now: float,
    tenant: str | None = None,
) -> tuple[Admission, str | None]:
    """(this replica's admission, the content rule refusing `text`); the rules are not
    read for a ticket the count already refuses."""
    admission = limits.admit(key, tier, digest, now, tenant)
    if admission.rule is not None:
        return admission, None
    return admission, rules.check(text)
