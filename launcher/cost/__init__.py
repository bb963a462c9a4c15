"""Money and time rules every part counts cost with (a low layer: numpy at most, no pandas, no
ledger): what an attempt cost (attempts: billed interval, price history, waste, split into
buckets), time windows and calendar months (window), checkpoint storage prices (storage).
launcher.ledger.attempt_cost describes the rules and adapts the reports' DataFrames to them;
the expected cost of an offer is pricing's (pricing.expected_cost)."""
