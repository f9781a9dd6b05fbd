"""Personal data in ticket text, masked before a person or a file sees it: e-mail
addresses, payment card numbers (Luhn), IBANs (mod 97), Chinese resident identity
numbers (their check digit) and phone numbers. Order numbers stay: a reviewer needs them,
and a number after an order word ("order", "#", 订单, 注文...) is read as one.

Matching reads a copy of the text with full-width forms and other decimal digits folded
to ASCII, one character for one, so "４１１１ ..." and "ｊｏｅ＠ｅｘａｍｐｌｅ．ｃｏｍ" are
found, and the mask replaces the same span of the original."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

Kind = Literal["email", "card", "iban", "national_id", "phone"]
MASKS: dict[Kind, str] = {
    "email": "[email]",
    "card": "[card]",
    "iban": "[iban]",
    "national_id": "[id]",
    "phone": "[phone]",
}

# ASCII letters and digits as boundaries: Python's \w also matches CJK characters, which
# sit right beside numbers in Chinese and Japanese text ("电话13812345678").
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?(?![A-Za-z0-9])")
_CN_ID = re.compile(r"(?<![A-Za-z0-9])\d{17}[\dXx](?![A-Za-z0-9])")
# A run of digits with the separators people type in card and phone numbers.
_NUMBER = re.compile(r"(?<![A-Za-z0-9+])\+?\(?\d(?:[ \-.()]{0,2}\d)+(?![A-Za-z0-9])")
_ORDER_WORD = re.compile(
    r"(?:order|ord|ref|reference|invoice|tracking|parcel|package|shipment|ticket|case|no\.?|nr\.?|#|"
    r"订单|单号|编号|运单|快递|注文|番号|伝票|問い合わせ)[\s:：#号は的の]*$",
    re.IGNORECASE,
)
_DATE = re.compile(r"(?:19|20)\d{2}[-./]\d{1,2}[-./]\d{1,2}(?!\d)")
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


@dataclass(frozen=True)
class MaskedText:
    text: str
    kinds: tuple[Kind, ...]  # what was masked, in the order it appears


def fold(text: str) -> str:
    """Full-width ASCII forms and every decimal digit as ASCII, one character for one."""
    out = []
    for ch in text:
        code = ord(ch)
        if 0xFF01 <= code <= 0xFF5E:
            out.append(chr(code - 0xFEE0))
        elif code == 0x3000:
            out.append(" ")
        elif ch.isdecimal() and not ch.isascii():
            out.append(str(unicodedata.decimal(ch)))
        else:
            out.append(ch)
    return "".join(out)


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    compact = iban.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def cn_id_valid(number: str) -> bool:
    total = sum(int(d) * w for d, w in zip(number[:17], _CN_ID_WEIGHTS))
    return "10X98765432"[total % 11] == number[17].upper()


def _number_kind(folded: str, start: int, number: str) -> Kind | None:
    digits = re.sub(r"\D", "", number)
    if 13 <= len(digits) <= 19 and luhn_valid(digits):
        return "card"
    if _ORDER_WORD.search(folded[max(0, start - 24) : start]) or _DATE.match(number):
        return None
    separated = bool(re.search(r"[ \-.()]", number.strip("()")))
    if number.startswith("+") and 8 <= len(digits) <= 15:
        return "phone"
    if 9 <= len(digits) <= 12 and (separated or digits[0] == "0"):
        return "phone"
    if re.fullmatch(r"1[3-9]\d{9}", digits):  # a Chinese mobile number
        return "phone"
    return None


def mask_personal_data(text: str) -> MaskedText:
    folded = fold(text)
    spans: list[tuple[int, int, Kind]] = []
    # An IBAN-shaped token whose checksum fails is left as it is, not read again as a card
    # or phone number (its digits can pass Luhn by chance).
    claimed: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in claimed)

    def take(start: int, end: int, kind: Kind | None) -> None:
        claimed.append((start, end))
        if kind:
            spans.append((start, end, kind))

    for m in _EMAIL.finditer(folded):
        take(m.start(), m.end(), "email")
    for m in _IBAN.finditer(folded):
        if free(m.start(), m.end()):
            take(m.start(), m.end(), "iban" if iban_valid(m.group()) else None)
    for m in _CN_ID.finditer(folded):
        if free(m.start(), m.end()) and cn_id_valid(m.group()):
            take(m.start(), m.end(), "national_id")
    for m in _NUMBER.finditer(folded):
        kind = _number_kind(folded, m.start(), m.group())
        if kind and free(m.start(), m.end()):
            take(m.start(), m.end(), kind)
    spans.sort()
    parts, at = [], 0
    for start, end, kind in spans:
        parts += [text[at:start], MASKS[kind]]
        at = end
    parts.append(text[at:])
    return MaskedText("".join(parts), tuple(kind for _, _, kind in spans))
