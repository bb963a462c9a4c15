"""Money and time rules every part counts cost with (a low layer: no pandas, no ledger; numpy only
inside the vectorized functions): what an attempt cost (attempts: billed interval, price history,
waste, split into buckets; the same rule text on numpy arrays or on one attempt, scalar_xp), time
windows and calendar months (window), checkpoint storage prices (storage).
launcher.ledger.attempt_cost describes the rules and adapts the reports' DataFrames to them;
the expected cost of an offer is pricing's (pricing.expected_cost)."""
