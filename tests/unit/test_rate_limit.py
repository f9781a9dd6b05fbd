import pytest
from pydantic import ValidationError

from policies.rate_limit import (
    ANONYMOUS,
    MAX_TEXTS_PER_USER,
    DuplicateConfig,
    RateLimitConfig,
    TierLimit,
    TokenBucket,
    UserLimits,
)


def test_token_bucket_burst_then_sustained_rate():
    bucket = TokenBucket(TierLimit(requests_per_s=2, burst_window_s=5), now=0.0)
    assert [bucket.take(0.0) for _ in range(10)] == [0.0] * 10  # capacity 2/s x 5 s
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.25) == pytest.approx(0.25)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(100.0) == 0.0
    assert bucket.tokens == pytest.approx(9.0)  # refill stops at capacity


def limits(**rate) -> UserLimits:
    return UserLimits(RateLimitConfig(**rate), DuplicateConfig(max_repeats=3, window_s=60))


def test_rate_limited_with_retry_after():
    lim = limits(
        tiers={ANONYMOUS: TierLimit(requests_per_s=1, burst_window_s=3), "standard": TierLimit(requests_per_s=1)}
    )
    results = [lim.admit("addr:1.2.3.4", ANONYMOUS, f"d{i}", now=10.0) for i in range(4)]
    assert [r.rule for r in results] == [None, None, None, "rate_limited"]
    assert results[-1].retry_after_s == 1
    assert lim.admit("addr:5.6.7.8", ANONYMOUS, "d0", now=10.0).rule is None  # others unaffected
    assert lim.admit("addr:1.2.3.4", ANONYMOUS, "d9", now=11.0).rule is None


def test_duplicates_in_window():
    lim = limits()
    assert [lim.admit("u", "standard", "same", now=t).rule for t in (0, 1, 2, 3)] == [None, None, None, "duplicate"]
    assert lim.admit("u", "standard", "other", now=4).rule is None
    assert lim.admit("v", "standard", "same", now=4).rule is None
    assert lim.admit("u", "standard", "same", now=60.5).rule is None  # the first copy left the window


def test_duplicate_memory_is_bounded():
    lim = limits(tiers={ANONYMOUS: TierLimit(requests_per_s=1), "standard": TierLimit(requests_per_s=10_000)})
    for i in range(MAX_TEXTS_PER_USER * 3):
        lim.admit("u", "standard", str(i), now=0.0)
    assert len(lim._users["u"].recent) == MAX_TEXTS_PER_USER


def test_least_recent_users_forgotten():
    lim = limits(max_tracked_users=2)
    for user in ("a", "b", "a", "c"):
        lim.admit(user, "standard", "x" + user, now=0.0)
    assert lim.tracked_users() == 2
    assert set(lim._users) == {"a", "c"}


def test_tiers():
    config = RateLimitConfig(user_tiers={"vip": "trusted"}, trust_tier_header=True)
    assert config.tier_of(None, "trusted") == ANONYMOUS
    assert config.tier_of("vip", None) == "trusted"
    assert config.tier_of("bob", None) == "standard"
    assert config.tier_of("bob", "trusted") == "trusted"
    assert config.tier_of("bob", "platinum") == "standard"
    assert RateLimitConfig().tier_of("bob", "trusted") == "standard"  # header ignored unless trusted


def test_unknown_tier_is_named():
    with pytest.raises(ValidationError, match="user_tiers.bob='gold' is not a tier"):
        RateLimitConfig(user_tiers={"bob": "gold"})
    with pytest.raises(ValidationError, match="must define 'anonymous'"):
        RateLimitConfig(tiers={"standard": TierLimit(requests_per_s=1)})


def test_a_tenant_bucket_limits_all_its_users_together():
    rate = RateLimitConfig(tenant_limit=TierLimit(requests_per_s=1, burst_window_s=3))
    lim = UserLimits(rate, DuplicateConfig())
    answers = [lim.admit(f"user:big/u{i}", "standard", f"d{i}", now=0.0, tenant="big").rule for i in range(5)]
    assert answers == [None, None, None, "rate_limited", "rate_limited"]  # 5 users, one bucket of 3
    assert lim.admit("user:small/u0", "standard", "d", now=0.0, tenant="small").rule is None
    assert lim.admit("user:big/u9", "standard", "d", now=0.0).rule is None  # no tenant: user bucket only
    assert lim.admit("user:big/u5", "standard", "d5", now=1.0, tenant="big").rule is None  # refilled one
