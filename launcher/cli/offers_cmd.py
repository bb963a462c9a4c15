"""Commands: offers (placeholder until implemented)."""
