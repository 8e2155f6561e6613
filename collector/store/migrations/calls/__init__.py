"""Migrations of the LLM calls and what they cost: steps counted once, prices and costs, the
hourly usage rollup."""
