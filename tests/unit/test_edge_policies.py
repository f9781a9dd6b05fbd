import pytest

from deployments.config_base import PROJECT_ROOT
from models.artifacts import OUT_OF_SCOPE
from models.edge_classifier import EdgePrediction
from policies.cache import LruTtlCache
from policies.edge_route import TEMPLATE_VETO_CONFIDENCE, EdgeAnswer, edge_answer, fallback_answer
from policies.language import LanguageConfig, detect_language, dominant_script, primary_subtag
from policies.templates import Template, TemplateSet, _TemplateFile

CONFIG = LanguageConfig()


def fixed(language: str, probability: float):
    return lambda text: (language, probability)


def test_confident_identifier_wins_over_hint():
    d = detect_language("Wo ist meine Bestellung?", "en", CONFIG, fixed("de", 0.99))
    assert (d.language, d.supported, d.source) == ("de", False, "identifier")
    assert detect_language("where is my order", None, CONFIG, fixed("en", 0.95)).supported


def test_uncertain_identifier_falls_back_on_script_then_hint():
    assert detect_language("refund pls", None, CONFIG, fixed("da", 0.1)).language == "en"
    d = detect_language("Где мой заказ?", "en", CONFIG, fixed("ru", 0.47))
    assert (d.supported, d.source) == (False, "script")  # a hint cannot make Cyrillic English
    assert detect_language("注文", "ja", CONFIG, fixed("zh", 0.6)).language == "ja"
    assert detect_language("注文", None, CONFIG, fixed("zh", 0.6)).language == "zh"
    assert detect_language("ログイン", None, CONFIG, fixed("zh", 0.5)).language == "ja"
    assert detect_language("12345 🙂", "zh-Hans", CONFIG, fixed("en", 0.1)).language == "zh"
    assert detect_language("12345 🙂", None, CONFIG, fixed("en", 0.1)).source == "default"


def test_scripts_and_tags():
    assert dominant_script("") is None
    assert dominant_script("我的order") == "latin"
    assert dominant_script("注文したのに") == "kana"
    assert primary_subtag("en-US") == "en"
    assert LanguageConfig(supported=["EN", "ja-JP"]).supported == ["en", "ja"]


def test_lru_ttl_cache():
    cache = LruTtlCache(max_entries=2, ttl_s=10)
    cache.put("a", 1, now=0)
    cache.put("b", 2, now=1)
    assert cache.get("a", now=2) == 1  # a is now the most recent
    cache.put("c", 3, now=3)
    assert cache.get("b", now=3) is None and cache.evicted == 1
    assert cache.get("a", now=9.9) == 1
    assert cache.get("a", now=10) is None and cache.expired == 1
    with pytest.raises(ValueError):
        LruTtlCache(0, 1)


def test_lru_ttl_cache_bounded_in_bytes():
    cache = LruTtlCache(max_entries=100, ttl_s=10, max_bytes=10, size_of=lambda k, v: len(v))
    cache.put("a", "xxxx", now=0)
    cache.put("b", "yyyy", now=0)
    cache.put("a", "zz", now=1)  # a replaced entry gives its bytes back: 6 in all
    assert (cache.bytes, len(cache)) == (6, 2)
    cache.put("c", "wwwww", now=2)  # 11 > 10: the least recent (b) goes
    assert cache.get_stale("b") is None and cache.bytes == 7 and cache.evicted == 1
    cache.clear()
    assert cache.bytes == 0
    with pytest.raises(ValueError, match="go together"):
        LruTtlCache(10, 1, max_bytes=10)


def test_the_result_cache_keys_a_ticket_by_digest():
    from deployments.api import Ticket
    from deployments.nodes.result_cache import cache_entry_bytes, cache_key

    short = cache_key(Ticket(text="where is my order", request_id="r", tenant="acme"), "v1")
    long = cache_key(Ticket(text="where is my order " * 500, request_id="r", tenant="acme"), "v1")
    assert short != long and len(short[1]) == len(long[1]) == 16
    assert cache_entry_bytes(short, ("order_status", 0.9)) == cache_entry_bytes(long, ("order_status", 0.9))
    assert cache_key(Ticket(text="where is my order", request_id="r", tenant="globex"), "v1") != short


def test_bundled_templates():
    templates = TemplateSet.from_yaml(PROJECT_ROOT / "config" / "templates.yaml")
    assert templates.match("I forgot my password", "en").intent == "password_reset"
    assert templates.match("忘记密码了怎么办", "zh").intent == "password_reset"
    assert templates.match("パスワードを忘れてしまいました。", "ja").intent == "password_reset"
    assert templates.match("I forgot my password", "ja") is None  # patterns are per language
    assert templates.match("I did not forget my password", "en") is None
    assert templates.match("I forgot my password and want to delete my account", "en") is None
    assert templates.match("where is my order?", "en").answer_id == "kb-order-tracking"
    assert templates.match("I forgot my password " + "x" * 200, "en") is None


def test_bad_template_pattern_is_named():
    spec = _TemplateFile.model_validate(
        {"templates": [{"id": "t", "intent": "i", "answer_id": "a", "patterns": {"en": ["(unclosed"]}}]}
    )
    with pytest.raises(ValueError, match=r"bad pattern '\(unclosed'"):
        TemplateSet(spec)


def test_templates_never_answer_a_bundled_ticket_as_another_intent():
    """In-scope rows: a template either stays silent or names the row's own intent.
    Out-of-scope rows it still matches are listed: the edge router's pre-classifier veto
    must catch those (tests/integration/test_answers.py sends one)."""
    import csv

    from models.artifacts import OUT_OF_SCOPE
    from models.build import BUNDLED_DATA, OOS_EVAL

    templates = TemplateSet.from_yaml(PROJECT_ROOT / "config" / "templates.yaml")
    wrong, out_of_scope = [], []
    for path in (BUNDLED_DATA, OOS_EVAL):
        with open(path, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                match = templates.match(row["text"], row["lang"])
                if match is None or match.intent == row["label"]:
                    continue
                (out_of_scope if row["label"] == OUT_OF_SCOPE else wrong).append(row["text"])
    assert wrong == []
    # Shop words about other services (a router's password, a taxi app's receipts): the
    # bundled rows that teach the pre-classifier to veto them.
    assert len(out_of_scope) <= 5, out_of_scope


def test_the_edge_order_cache_then_template_then_a_sure_pre_classifier():
    template = Template("reset", "password_reset", "kb-1")
    sure = EdgePrediction("order_status", 0.95)
    edge = {"order_status", "password_reset"}
    assert edge_answer(("refund_request", 0.7), template, sure, "stable", edge, 0.8).route == "cache"
    assert edge_answer(None, template, sure, "stable", edge, 0.8) == EdgeAnswer(
        "template", "password_reset", 1.0, "kb-1"
    )
    assert edge_answer(None, None, sure, "stable", edge, 0.8).route == "edge_model"
    assert edge_answer(None, None, sure, "canary", edge, 0.8) is None  # the canary answers its own
    assert edge_answer(None, None, sure, "stable", edge, 0.96) is None  # below the language's gate
    assert edge_answer(None, None, EdgePrediction("complaint", 0.99), "stable", edge, 0.8) is None


def test_a_sure_out_of_scope_guess_vetoes_a_template_but_a_doubtful_one_does_not():
    template = Template("reset", "password_reset", "kb-1")
    sure = EdgePrediction(OUT_OF_SCOPE, TEMPLATE_VETO_CONFIDENCE)
    assert edge_answer(None, template, sure, "stable", {"password_reset"}, 0.8) is None
    doubtful = EdgePrediction(OUT_OF_SCOPE, TEMPLATE_VETO_CONFIDENCE - 0.01)
    assert edge_answer(None, template, doubtful, "stable", {"password_reset"}, 0.8).route == "template"


def test_the_fallback_order_stale_cache_then_degraded_guess_else_refuse():
    guess = EdgePrediction("order_status", 0.4)
    stale = fallback_answer("cache", ("refund_request", 0.9), guess)
    assert (stale.route, stale.label, stale.degraded) == ("cache", "refund_request", True)
    edge = fallback_answer("cache", None, guess)
    assert (edge.route, edge.label, edge.degraded) == ("degraded", "order_status", True)
    assert fallback_answer("degraded", ("refund_request", 0.9), guess).route == "degraded"
    assert fallback_answer("reject", ("refund_request", 0.9), guess) is None
    assert fallback_answer("degraded", None, None) is None


def test_edge_gates_never_fall_below_the_review_threshold():
    from policies.edge_route import edge_gates

    built = {"en": 0.49, "zh": 0.96, "*": 0.64}
    assert edge_gates(built, 0.78) == {"en": 0.78, "zh": 0.96, "*": 0.78}
    assert edge_gates(built, None) == built
