"""Bitext's customer-service intents (`../shared/data/bitext_cs_8k`) in the bundled labels,
intent by intent, by the rules of docs/labels.md. Other people's text: the benchmarks
judge the served graph on it and the load tests send it; no model trains on it.

Plain Python: the Locust file imports it (through loadkit.mix) beside gevent.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
BITEXT = SHARED_DATA / "bitext_cs_8k" / "Bitext_Sample_Customer_Service_Training_Dataset.csv"

# Bitext intent -> the bundled labels a right answer may carry (the first is the one the
# load mix sends it as). One label each, except where Bitext's intent spans two of ours.
BITEXT_LABELS: dict[str, tuple[str, ...]] = {
    "track_order": ("order_status",),
    # "when will my item arrive" (one's own order: order_status) and "what are the delivery
    # periods" (delivery in general: shipping_options) are one Bitext intent.
    "delivery_period": ("order_status", "shipping_options"),
    "delivery_options": ("shipping_options",),
    "cancel_order": ("cancel_order",),
    "change_order": ("change_order",),
    "get_refund": ("refund_request",),
    # The refund policy is refund_request (boundary rule refund_return_policy).
    "check_refund_policy": ("refund_request",),
    "track_refund": ("track_refund",),
    "recover_password": ("password_reset",),
    # Problems while signing up are create_account (its "covers").
    "registration_problems": ("create_account",),
    "create_account": ("create_account",),
    "delete_account": ("delete_account",),
    "edit_account": ("update_account_info",),
    "payment_issue": ("payment_issue",),
    # Which payment methods are accepted is change_payment_method (rule payment_methods).
    "check_payment_methods": ("change_payment_method",),
    "check_invoice": ("invoice_request",),
    "get_invoice": ("invoice_request",),
    "change_shipping_address": ("shipping_address",),
    "set_up_shipping_address": ("shipping_address",),
    "complaint": ("complaint",),
    "contact_human_agent": ("human_agent",),
    # How to reach customer service is human_agent (its "covers").
    "contact_customer_service": ("human_agent",),
    # Mostly cancelling the newsletter; managing it is newsletter_unsubscribe's "covers".
    "newsletter_subscription": ("newsletter_unsubscribe",),
}
# Intents with no bundled label that are still shop business, so not out of scope either:
# left out of accuracy; their answers are reported apart (flagged or not).
UNMAPPED: dict[str, str] = {
    "place_order": "buying something: no label for placing an order",
    "review": "leaving a review, good or bad: feedback_positive is praise only",
    "switch_account": "switching between user profiles: no label",
    "check_cancellation_fee": "cancellation and termination fees: no label",
}


@dataclass(frozen=True)
class ExternalTicket:
    text: str
    intent: str  # the source's own intent
    accepted: tuple[str, ...]  # bundled labels that count as right; () for UNMAPPED intents
    flags: str  # Bitext's style tags (colloquial, typos, offensive...)


def load_bitext(path: Path = BITEXT) -> list[ExternalTicket]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    unknown = {r["intent"] for r in rows} - set(BITEXT_LABELS) - set(UNMAPPED)
    if unknown:
        raise ValueError(f"{path}: intents {sorted(unknown)} are neither mapped nor listed as unmapped")
    return [
        ExternalTicket(r["utterance"].strip(), r["intent"], BITEXT_LABELS.get(r["intent"], ()), r["flags"])
        for r in rows
    ]
