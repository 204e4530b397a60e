"""USD prices per million tokens, for backends whose provider reports usage but not cost.

``$ITERION_MODEL_PRICES`` (JSON ``{"model": [input_per_million, output_per_million]}``) extends
or overrides the small built-in table; an unknown model costs 0 (tokens are still counted).
"""

from __future__ import annotations

import json
import os

PRICES_ENV = "ITERION_MODEL_PRICES"

# (input, output) USD per 1M tokens; longest matching prefix wins, so dated snapshots match.
_TABLE: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4": (1.00, 5.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}


def _table() -> dict[str, tuple[float, float]]:
    table = dict(_TABLE)
    raw = os.environ.get(PRICES_ENV)
    if raw:
        try:
            extra = json.loads(raw)
        except ValueError:
            raise ValueError(f"${PRICES_ENV} is not JSON; expected {{\"model\": [in_per_1M, out_per_1M]}}") from None
        for model, pair in extra.items():
            table[str(model)] = (float(pair[0]), float(pair[1]))
    return table


def price_for(model: str | None) -> tuple[float, float]:
    if not model:
        return (0.0, 0.0)
    table = _table()
    if model in table:
        return table[model]
    matches = [k for k in table if model.startswith(k)]
    return table[max(matches, key=len)] if matches else (0.0, 0.0)


def cost_usd(model: str | None, tokens_in: int, tokens_out: int) -> float:
    pin, pout = price_for(model)
    return (tokens_in * pin + tokens_out * pout) / 1_000_000
