"""Per-user admission: a token bucket per user and tier, and a duplicate-text window.

One `UserLimits` must see all of a user's requests for its counts to be right; the
graph keeps it in a single actor (deployments/nodes/rate_limiter.py) that every anti-spam
replica asks.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

ANONYMOUS = "anonymous"
# Texts remembered per user for the duplicate window. A client that interleaves more
# distinct texts than this escapes the duplicate rule, but not its rate limit.
MAX_TEXTS_PER_USER = 256


class TierLimit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_s: float = Field(gt=0, description="sustained rate: the bucket refills at this many tokens per second")
    burst_window_s: float = Field(
        10.0, gt=0, description="bucket size in seconds of the sustained rate (capacity = rate x window)"
    )

    @property
    def capacity(self) -> float:
        return self.requests_per_s * self.burst_window_s


class RateLimitConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tiers: dict[str, TierLimit] = Field(
        default_factory=lambda: {
            ANONYMOUS: TierLimit(requests_per_s=10),
            "standard": TierLimit(requests_per_s=100),
            "trusted": TierLimit(requests_per_s=1000),
        },
        description="limits per tier; requests without user_id share one 'anonymous' bucket per client address",
    )
    default_tier: str = Field("standard", description="tier of a user_id not listed in user_tiers")
    user_tiers: dict[str, str] = Field(default_factory=dict, description="user_id -> tier")
    trust_tier_header: bool = Field(
        False,
        description="take the tier from the X-User-Tier header (only behind a gateway that sets it itself)",
    )
    max_tracked_users: int = Field(
        100_000, gt=0, description="users whose buckets are kept; the least recently seen are forgotten first"
    )
    tenant_limit: TierLimit | None = Field(
        None,
        description="one bucket per tenant shared by all its users, on top of theirs: a tenant's many users "
        "cannot take everyone's capacity; null: no tenant limit",
    )

    @model_validator(mode="after")
    def _known_tiers(self) -> RateLimitConfig:
        used = {"default_tier": self.default_tier, **{f"user_tiers.{u}": t for u, t in self.user_tiers.items()}}
        if ANONYMOUS not in self.tiers:
            raise ValueError(f"tiers must define {ANONYMOUS!r}; got {sorted(self.tiers)}")
        for where, tier in used.items():
            if tier not in self.tiers:
                raise ValueError(f"{where}={tier!r} is not a tier; tiers are {sorted(self.tiers)}")
        return self

    def tier_of(self, user_id: str | None, header_tier: str | None) -> str:
        if user_id is None:
            return ANONYMOUS
        if user_id in self.user_tiers:
            return self.user_tiers[user_id]
        if self.trust_tier_header and header_tier in self.tiers:
            return header_tier
        return self.default_tier


def user_key(user_id: str | None, tenant: str | None, client: str) -> str:
    """Whose bucket a request draws from: the user within its tenant, else the caller's address."""
    return f"user:{tenant or ''}/{user_id}" if user_id is not None else f"addr:{client}"


def text_digest(text: str) -> str:
    """What the duplicate window remembers instead of the text itself."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class DuplicateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_repeats: int = Field(5, gt=0, description="the same text from one user is accepted this many times per window")
    window_s: float = Field(60.0, gt=0, description="sliding window of the duplicate detector")


class TokenBucket:
    def __init__(self, limit: TierLimit, now: float):
        self.rate = limit.requests_per_s
        self.capacity = limit.capacity
        self.tokens = self.capacity
        self.updated = now

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one will be there."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


@dataclass
class _User:
    tier: str
    bucket: TokenBucket
    recent: deque[tuple[float, str]] = field(default_factory=deque)  # (time, text digest), oldest first


@dataclass(frozen=True)
class Admission:
    rule: str | None = None  # None: admitted; "rate_limited" or "duplicate"
    retry_after_s: int = 0  # rate_limited only


class UserLimits:
    def __init__(self, rate: RateLimitConfig, duplicates: DuplicateConfig):
        self._rate = rate
        self._dup = duplicates
        self._users: OrderedDict[str, _User] = OrderedDict()
        self._tenants: OrderedDict[str, TokenBucket] = OrderedDict()

    def admit(self, key: str, tier: str, digest: str, now: float, tenant: str | None = None) -> Admission:
        """`key` from user_key(), `digest` from text_digest(); `tenant` draws from the
        tenant's bucket too (tenant_limit)."""
        user = self._user(key, tier, now)
        wait_s = user.bucket.take(now)
        if wait_s > 0:
            return Admission("rate_limited", max(1, math.ceil(wait_s)))
        if tenant is not None and self._rate.tenant_limit is not None:
            if (wait_s := self._tenant(tenant, self._rate.tenant_limit, now).take(now)) > 0:
                return Admission("rate_limited", max(1, math.ceil(wait_s)))
        window_start = now - self._dup.window_s
        while user.recent and user.recent[0][0] <= window_start:
            user.recent.popleft()
        seen = sum(1 for _, d in user.recent if d == digest)
        if seen >= self._dup.max_repeats:
            return Admission("duplicate")
        user.recent.append((now, digest))
        if len(user.recent) > MAX_TEXTS_PER_USER:
            user.recent.popleft()
        return Admission()

    def _user(self, key: str, tier: str, now: float) -> _User:
        user = self._users.get(key)
        if user is None or user.tier != tier:
            user = _User(tier, TokenBucket(self._rate.tiers[tier], now))
            self._users[key] = user
            # A forgotten user comes back with a full bucket and an empty window, which
            # is also where an idle user would be; only very active users could gain.
            while len(self._users) > self._rate.max_tracked_users:
                self._users.popitem(last=False)
        self._users.move_to_end(key)
        return user

    def _tenant(self, tenant: str, limit: TierLimit, now: float) -> TokenBucket:
        bucket = self._tenants.get(tenant)
        if bucket is None:
            bucket = self._tenants[tenant] = TokenBucket(limit, now)
            while len(self._tenants) > self._rate.max_tracked_users:
                self._tenants.popitem(last=False)
        self._tenants.move_to_end(tenant)
        return bucket

    def tracked_users(self) -> int:
        return len(self._users)
