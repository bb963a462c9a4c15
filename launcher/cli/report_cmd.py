"""Commands: report (placeholder until implemented)."""
