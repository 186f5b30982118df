"""The normalized model: stop-reason tables, the aggregator, the truncation verdict."""
