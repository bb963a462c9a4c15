"""Prometheus metrics over the ledger: exporter (the collector), served by `launcher server` at
/metrics and by `launcher metrics serve` for a single user."""
