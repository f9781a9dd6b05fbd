"""The generate-mode prompt: one instruction naming every label, then the ticket.

The model replica builds it as token ids (the instruction's ids are shared by every
ticket, so vLLM's prefix cache reuses them); the load suite's vLLM-server peer sends the
same text, so both pay for the same prompt.
"""

from __future__ import annotations

TICKET_SLOT = "\x00TICKET\x00"
DEFAULT_INSTRUCTION = (
    "You are a customer-service ticket router. Read the ticket and answer with exactly "
    "one intent label from this list: {labels}."
)


def instruction_text(template: str | None, labels: list[str]) -> str:
    """The model's own instruction (its metadata) or the default, with the labels filled in."""
    return (template or DEFAULT_INSTRUCTION).format(labels=", ".join(labels))


def plain_template(instruction: str) -> str:
    """The prompt of a model without a chat template; TICKET_SLOT marks the ticket."""
    return f"{instruction}\n\nTicket: {TICKET_SLOT}\nIntent: "


def plain_prompt(instruction: str, ticket: str) -> str:
    return plain_template(instruction).replace(TICKET_SLOT, ticket)
