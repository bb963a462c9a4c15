"""Commands: infra (placeholder until implemented)."""
