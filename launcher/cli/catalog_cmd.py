"""Commands: catalog (placeholder until implemented)."""
