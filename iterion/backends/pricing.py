"""USD cost of a model call, for backends whose provider reports usage but not cost.

Prices come from ``genai-prices`` (pydantic's maintained price data for OpenAI, Anthropic,
Google, Mistral, ... with dated prices, long-context tiers and cache prices), imported on the
first call that needs a price. ``$ITERION_MODEL_PRICES`` (JSON ``{"model": [input_per_million,
output_per_million]}``, optionally ``[in, out, cache_read, cache_write]``) overrides or extends it,
for a model the data does not know (a local or fine-tuned model) or a negotiated price.

An unknown model costs 0 and ``priced`` says so: a run with ``max_cost_usd`` warns at its start
that such a node's spending is counted in tokens only (``unpriced_warnings``).

Token counts: ``tokens_in`` is every input token, cache reads and writes included (OpenAI counts
them inside ``prompt_tokens``; the Anthropic wire adds them up); ``cache_read`` and
``cache_write`` say how many of them were cache hits and cache writes, priced at their own rate.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

PRICES_ENV = "ITERION_MODEL_PRICES"
_PROVIDER_PREFIXES = ("openai/", "anthropic/")


def _overrides() -> dict[str, tuple[float, ...]]:
    raw = os.environ.get(PRICES_ENV)
    if not raw:
        return {}
    try:
        extra = json.loads(raw)
        return {str(model): tuple(float(x) for x in prices) for model, prices in extra.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"${PRICES_ENV} is not JSON of the form {{\"model\": [in_per_1M, out_per_1M]}}") from None


def _bare(model: str) -> str:
    lowered = model.lower()
    for prefix in _PROVIDER_PREFIXES:
        if lowered.startswith(prefix):
            return model[len(prefix):]
    return model


@functools.lru_cache(maxsize=256)
def _known(model: str) -> bool:
    from genai_prices import Usage, calc_price  # ~1 s of import: only when a price is needed

    try:
        calc_price(Usage(input_tokens=1, output_tokens=1), model)
    except (LookupError, ValueError):
        return False
    return True


def priced(model: str | None) -> bool:
    """Is there a price for ``model`` (an override or the maintained data)?"""
    if not model:
        return False
    return model in _overrides() or _bare(model) in _overrides() or _known(_bare(model))


def cost_usd(model: str | None, tokens_in: int, tokens_out: int, *, cache_read: int = 0,
             cache_write: int = 0) -> float:
    """The call's cost in USD; 0.0 for a model without a price (see ``priced``)."""
    if not model or (tokens_in <= 0 and tokens_out <= 0):
        return 0.0
    table = _overrides()
    own = table.get(model) or table.get(_bare(model))
    if own is not None:
        pin, pout = own[0], own[1]
        pread = own[2] if len(own) > 2 else pin
        pwrite = own[3] if len(own) > 3 else pin
        plain = max(0, tokens_in - cache_read - cache_write)
        return (plain * pin + cache_read * pread + cache_write * pwrite + tokens_out * pout) / 1_000_000
    if not _known(_bare(model)):
        return 0.0
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out, cache_read_tokens=cache_read or None,
                  cache_write_tokens=cache_write or None)
    return float(calc_price(usage, _bare(model)).total_price)


# the backends whose cost iterion computes from tokens (claude_code's CLI reports its own cost;
# codex's reports none, so a cap cannot see it either)
_COMPUTED = ("claw", "openai", "codex")


def unpriced_warnings(nodes: Iterable[Any], backend_of: Callable[[Any], str], max_cost_usd: float,
                      model_of: Callable[[Any], str | None]) -> list[dict[str, Any]]:
    """For a run with a cost cap: one warning per LLM node whose model has no known price, so
    its spending reaches the cap as 0 and only ``max_tokens`` bounds it."""
    if not max_cost_usd:
        return []
    out: list[dict[str, Any]] = []
    for node in nodes:
        backend = backend_of(node)
        if backend not in _COMPUTED:
            continue
        model = model_of(node)
        if backend == "codex" or not priced(model):
            why = "the codex CLI reports no cost" if backend == "codex" else f"model {model or '(none)'} has no known price"
            out.append({"code": "MODEL_UNPRICED", "node": node.id, "model": model, "backend": backend,
                        "message": f"node {node.id}: {why}, so max_cost_usd (${max_cost_usd:g}) cannot see its "
                                   f"spending; only its tokens count (max_tokens). Set ${PRICES_ENV} to price it"})
    return out
