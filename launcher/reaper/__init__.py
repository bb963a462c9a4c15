"""The reaper: find idle managed GPU machines across providers and tear them down safely.

Shape borrowed from Cloud Custodian: a policy validated before anything runs; small registered
filters and actions; dry-run enforced once by the runner; mark-then-act with a dated tag.
"""
