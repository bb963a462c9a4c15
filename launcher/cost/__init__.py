"""Money and time rules every part counts cost with (a low layer: numpy at most, no pandas, no
ledger): time windows and calendar months (window), checkpoint storage prices (storage). The
attempt billing rules themselves are launcher.ledger.attempt_cost; the expected cost of an offer
is pricing.rank's."""
