"""The price table behind ``rewind stats`` and ``rewind inspect`` (plain data): lookups by
family, user overrides by file and environment, clear errors for bad price files."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from rewind.collector.store.read.filters import parse_when
from rewind.collector.store.read.reader_usage import Usage
from rewind.replay.sources.cli_settings import ENV_PRICES
from rewind.replay.timetravel.stats import (
    PriceError,
    load_prices,
    summarise,
)


def test_dated_and_longer_names_are_priced_as_their_family():
    prices = load_prices(env={})
    assert prices.lookup("gpt-4o-2024-08-06")[0] == "gpt-4o"
    assert prices.lookup("gpt-4o-mini-2024-07-18")[0] == "gpt-4o-mini"
    assert prices.lookup("claude-3-5-sonnet-20241022")[0] == "claude-3-5-sonnet"
    assert prices.lookup("claude-sonnet-4-5-20250929")[0] == "claude-sonnet-4-5"
    assert prices.lookup("gpt-4o-audio-preview")[0] == "gpt-4o"
    assert prices.lookup("my-local-llama") is None
    assert prices.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)


def test_user_files_override_in_order(tmp_path):
    from_env = tmp_path / "env.json"
    from_env.write_text('{"models": {"gpt-4o": {"input": 1, "output": 1}, '
                        '"my-local-llama": {"input": 0, "output": 0}}}')
    from_flag = tmp_path / "flag.toml"
    from_flag.write_text('[models."gpt-4o"]\ninput = 2\noutput = 2\n')
    prices = load_prices(str(from_flag), env={ENV_PRICES: str(from_env)})
    assert prices.cost("gpt-4o", 1_000_000, 0) == pytest.approx(2)
    assert prices.cost("my-local-llama", 5, 5) == 0
    assert prices.sources == ["built-in", str(from_env), str(from_flag)]


def test_bad_price_files_say_what_is_wrong(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"models": {"gpt-4o": {"input": "cheap"}}}')
    with pytest.raises(PriceError, match="model 'gpt-4o' needs numeric 'input' and 'output'"):
        load_prices(str(broken), env={})
    with pytest.raises(PriceError, match="cannot be read"):
        load_prices(str(tmp_path / "missing.json"), env={})
    shapeless = tmp_path / "shapeless.json"
    shapeless.write_text("[]")
    with pytest.raises(PriceError, match="has no 'models' table"):
        load_prices(str(shapeless), env={})


def test_unpriced_models_are_reported_not_counted_free():
    usage = [Usage("svc", "gpt-4o-2024-08-06", 2, 1000, 100, 0, 5),
             Usage("svc", "my-local-llama", 3, 50, 50, 1, 5)]
    stats = summarise(usage, load_prices(env={}), by="service")
    assert stats.unpriced == ["my-local-llama"]
    assert stats.total.calls == 5 and stats.total.unpriced_calls == 3
    assert stats.total.cost == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)
    with pytest.raises(ValueError, match="not 'colour'"):
        summarise(usage, load_prices(env={}), by="colour")


def test_periods():
    now = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert parse_when("24h", now) == now - timedelta(hours=24)
    assert parse_when("7d", now) == now - timedelta(days=7)
    assert parse_when("now", now) == now
    assert parse_when("2025-02-01T00:00") == datetime(2025, 2, 1, tzinfo=timezone.utc)
    assert parse_when(None) is None
    with pytest.raises(ValueError, match="not a time: 'yesterday'"):
        parse_when("yesterday")


def test_cached_input_tokens_cost_their_own_price(tmp_path):
    prices = load_prices(env={})
    # gpt-4o: 1,000 input tokens of which 800 read from the cache, 100 output.
    cached = {"gen_ai.usage.input_tokens": "1000", "gen_ai.usage.output_tokens": "100",
              "gen_ai.usage.cache_read.input_tokens": "800"}
    assert prices.call_cost("gpt-4o", cached) == pytest.approx(
        (200 * 2.5 + 800 * 1.25 + 100 * 10) / 1e6)
    # claude-sonnet-4-5: the input total holds cache reads and writes, each at its price.
    anthropic = {"gen_ai.usage.input_tokens": "1500", "gen_ai.usage.output_tokens": "0",
                 "gen_ai.usage.cache_read.input_tokens": "1000",
                 "gen_ai.usage.cache_creation.input_tokens": "400"}
    assert prices.call_cost("claude-sonnet-4-5", anthropic) == pytest.approx(
        (100 * 3 + 1000 * 0.3 + 400 * 3.75) / 1e6)
    own = tmp_path / "own.json"
    own.write_text('{"models": {"my-llama": {"input": 1, "output": 1}}}')
    uncached = load_prices(str(own), env={})  # no cache price: cached tokens at input price
    assert uncached.call_cost("my-llama", cached) == pytest.approx(1100 / 1e6)
