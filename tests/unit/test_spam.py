import csv
import random
import string

import pytest

from deployments.api import normalize_text
from deployments.config import AntiSpamConfig
from deployments.config_base import PROJECT_ROOT
from deployments.nodes.antispam import load_letter_pairs
from policies.adaptive import AdaptiveThreshold, AdaptiveThresholdConfig
from policies.rate_limit import UserLimits, text_digest
from policies.screening import screen_locally
from policies.spam import (
    LetterPairs,
    SpamRules,
    SpamRulesConfig,
    distinct_trigram_share,
    entropy_bits,
    random_share,
    repeat_ratio,
)

LETTERS = load_letter_pairs(AntiSpamConfig().reference_texts_file)
# A long real ticket: distinct bundled tickets one after the other.
with open(PROJECT_ROOT / "models" / "data" / "tickets.csv", encoding="utf-8") as f:
    LONG_TICKET = " ".join(row["text"] for row in csv.DictReader(f) if row["lang"] == "en")[:10_000]


def rules() -> SpamRules:
    return SpamRules(SpamRulesConfig(), LETTERS)


def check(text: str) -> str | None:
    return rules().check(normalize_text(text, 10_000))


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "?",
        "ok",
        "🙂",
        "🙂🙂🙂",
        "退款",
        "パスワード",
        "where is my order?",
        "Hellooooo, my package never arrived!!",
        "order 100000000 was charged twice",
        "Order #A1B2C3 has not shipped",
        "我的订单ABC123还没到，能帮我查一下吗",
        "アカウントにログインできません。help please",
        "Chcę anulować moje zamówienie",
        LONG_TICKET,
    ],
)
def test_legitimate_texts_pass(text):
    assert check(text) is None


def test_every_bundled_ticket_passes_the_rules_at_their_strictest():
    """Load tests draw from the bundled tickets, half of them with an order reference: one
    the content rules could refuse, once their thresholds have adapted to their strictest,
    ends as a 422 where the load test wants an answer."""
    default = SpamRulesConfig()
    strictest = default.model_copy(
        update={
            "repeat_ratio": default.repeat_ratio.model_copy(update={"initial": default.repeat_ratio.lower_bound}),
            "entropy_bits": default.entropy_bits.model_copy(update={"initial": default.entropy_bits.upper_bound}),
        }
    )
    with open(PROJECT_ROOT / "models" / "data" / "tickets.csv", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f)]
    refused = [
        (text, rule)
        for text in texts
        for variant in (text, f"{text} #Q12345")
        if (rule := SpamRules(strictest, LETTERS).check(normalize_text(variant, 10_000)))
    ]
    assert refused == []


@pytest.mark.parametrize(
    "text, rule",
    [
        ("aaaaaaaaaaaa", "repeated_chars"),
        ("!!!!!!!!!!!!!!!!", "repeated_chars"),
        ("heyyyyyyyyyyyyyyy", "repeated_chars"),
        ("buy now buy now buy now buy now", "repeated_words"),
        ("ha" * 20, "low_entropy"),
        ("I want a refund. " * 30, "repeated_words"),
        ("xkqzvbtrwplm", "random_string"),
        ("a8f7d6s5a4k3", "random_string"),
        ("qwrtzp lkjhgf mnbvcx", "random_string"),
        ("fol ewqu zibaj kwoe xupa", "random_string"),
    ],
)
def test_spam_rules_fire(text, rule):
    assert check(text) == rule


@pytest.mark.parametrize(
    "text",
    [
        # Found refused as random_string in an overload run: ids and brands inside real words.
        "请安排一位真人客服联系我,电话 186xxxx1234",
        "你觉得ChatGPT和你谁更聪明 #B28901",
        "my tracking 1Z999AA10123456784 is stuck",
    ],
)
def test_ids_and_brands_inside_real_tickets_pass(text):
    assert check(text) is None


# Found refused in a CI overload run (the load mix, 25,136 distinct tickets; all pass now).
SHORT_REAL = ["I want to talk to an agent", "can cats eat tuna from a can", "remove item from order"]
LATIN_IDS_IN_JAPANESE = "品番が違います。注文はABC-200なのに、届いたのはABC-100です。 #P31413"


def test_short_real_sentences_pass_once_the_entropy_floor_has_adapted_on_long_tickets():
    rules_ = rules()
    for i in range(0, len(LONG_TICKET) - 200, 5):  # ~2,000 windows: past min_samples
        rules_.check(LONG_TICKET[i : i + 200])  # ~4 bits each: the floor climbs to its upper bound
    assert rules_.thresholds()["entropy_bits"] > 3.2
    assert [rules_.check(t) for t in SHORT_REAL] == [None] * 3  # ~3.1 bits, under that floor
    # Short low-entropy spam still meets the fixed lower bound.
    assert rules_.check("hahahahahahahahahahahahaha") == "low_entropy"
    assert rules_.check("asdasdasdasdasdasdasdasd") == "low_entropy"


def test_latin_ids_in_a_japanese_ticket_are_not_read_as_random_letters():
    assert check(LATIN_IDS_IN_JAPANESE) is None
    assert check("品番 xkqzvb wqpdfg zzkvbn qwrtpl 違います") == "random_string"  # mostly mash: still caught


def test_features():
    assert repeat_ratio("aaaa") == (4, 1.0)
    assert repeat_ratio("a") == (1, 0.0)
    assert repeat_ratio("ab ab") == (4, 0.0)
    assert entropy_bits("") == 0.0
    assert entropy_bits("abab") == pytest.approx(1.0)
    assert random_share("hello world") == (10, 0.0)
    assert random_share("订单") == (0, 0.0)
    assert random_share("xkqzvbt ok") == (9, pytest.approx(7 / 9))
    assert distinct_trigram_share("a b a b a") == (5, 2 / 3)
    assert distinct_trigram_share("") == (0, 1.0)
    letters = LetterPairs(["the cat"])
    assert letters.mean_log_prob("123") == (0, 0.0)
    assert letters.mean_log_prob("the")[1] > letters.mean_log_prob("xqz")[1]


@pytest.mark.parametrize("alphabet", [string.ascii_lowercase + string.digits, string.ascii_lowercase + " " * 5])
def test_random_strings_are_mostly_caught(alphabet):
    rng = random.Random(0)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(20, 80))) for _ in range(500)]
    caught = sum(check(t) is not None for t in texts)
    assert caught / len(texts) > 0.95


def test_entropy_floor_adapts_within_bounds():
    config = AdaptiveThresholdConfig(
        initial=3.0,
        lower_bound=2.5,
        upper_bound=3.3,
        quantile=0.01,
        margin=0.1,
        min_samples=10,
        recompute_every_samples=10,
    )
    floor = AdaptiveThreshold(config, "floor")
    for _ in range(9):
        floor.observe(2.0)
    assert floor.value == 3.0  # not enough samples yet
    floor.observe(2.0)
    assert floor.value == 2.5  # follows legitimate traffic down, but only to the bound
    for _ in range(config.window_samples):
        floor.observe(4.5)
    assert floor.value == 3.3


def test_blocked_texts_do_not_move_thresholds():
    rules_ = rules()
    before = rules_.thresholds()
    for _ in range(5000):
        assert rules_.check("aaaaaaaaaaaaaaaaaaaa") == "repeated_chars"
    assert rules_.thresholds() == before


def test_bad_adaptive_bounds_are_named():
    with pytest.raises(ValueError, match="lower_bound <= initial <= upper_bound"):
        AdaptiveThresholdConfig(initial=5, lower_bound=2.5, upper_bound=3.3)


def test_rules_take_any_string_even_empty():
    # The ingress refuses empty texts before they get here; the rules must not crash anyway.
    assert rules().check("") is None
    assert rules().check(" ") is None


def test_screening_counts_the_user_first_and_reads_the_rules_only_for_admitted_tickets():
    config = AntiSpamConfig()
    one_per_s = config.rate_limit.model_copy(
        update={
            "tiers": {
                "anonymous": config.rate_limit.tiers["anonymous"].model_copy(
                    update={"requests_per_s": 1, "burst_window_s": 1}
                )
            }
        }
    )
    limits = UserLimits(one_per_s, config.duplicates)
    rules = SpamRules(config.rules, load_letter_pairs(config.reference_texts_file))
    spam = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    admission, rule = screen_locally(limits, rules, spam, "u", "anonymous", text_digest(spam), now=0.0)
    assert admission.rule is None and rule is not None  # counted, then refused by a content rule
    admission, rule = screen_locally(limits, rules, spam, "u", "anonymous", text_digest(spam + "!"), now=0.1)
    assert admission.rule == "rate_limited" and rule is None  # a flood never reaches the rules
