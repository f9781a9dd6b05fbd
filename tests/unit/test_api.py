import pytest
from pydantic import ValidationError

from deployments.api import ApiError, ClassifyRequest, normalize_text


def test_nfkc_and_whitespace_are_normalized():
    assert normalize_text("  Ｒｅｆｕｎｄ\tplease\n\n now ", 100) == "Refund please now"


def test_control_and_format_characters_are_removed():
    # NUL and BEL become spaces; zero-width space and an RTL mark vanish.
    assert normalize_text("pass\x00word\x07 re\u200bset\u200f", 100) == "pass word reset"


@pytest.mark.parametrize("raw", ["", "   ", "\x00\x01\u200b", "\n\t\r"])
def test_empty_text_is_invalid_request(raw):
    with pytest.raises(ApiError) as e:
        normalize_text(raw, 100)
    assert (e.value.status, e.value.code) == (422, "invalid_request")


def test_text_at_the_limit_is_accepted_and_one_more_is_refused():
    assert len(normalize_text("a" * 100, 100)) == 100
    with pytest.raises(ApiError) as e:
        normalize_text("a" * 101, 100)
    assert (e.value.status, e.value.code) == (413, "input_too_long")


def test_huge_raw_text_is_refused_before_normalizing():
    with pytest.raises(ApiError) as e:
        normalize_text(" " * 1000, 100)  # would normalize to empty, but is refused on size first
    assert e.value.code == "input_too_long"


def test_error_body_and_retry_after_header():
    e = ApiError(503, "overloaded", "busy", retry_after_s=2)
    assert e.body() == {"error": {"code": "overloaded", "message": "busy"}}
    assert e.headers() == {"Retry-After": "2"}
    assert ApiError(422, "invalid_request", "x").headers() == {}


@pytest.mark.parametrize(
    "body",
    [{"text": 5}, {"text": None}, {}, {"text": "hi", "bogus": 1}, {"text": "hi", "user_id": 7}, {"text": ["a"]}],
)
def test_request_schema_refuses_wrong_types_and_unknown_fields(body):
    with pytest.raises(ValidationError):
        ClassifyRequest.model_validate(body)


def test_request_schema_accepts_optional_fields():
    r = ClassifyRequest.model_validate({"text": "hi", "user_id": "u", "tenant": "t", "ticket_id": "1", "lang": "en"})
    assert (r.user_id, r.tenant, r.lang) == ("u", "t", "en")
