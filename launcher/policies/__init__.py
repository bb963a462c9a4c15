"""Policies: where the next attempt runs (recovery) and spot vs on-demand vs wait (deadline).

Pure decision objects, registered by name. The same objects drive the controller and
`launcher simulate`.

- base: the interfaces (PlacementPolicy.decide(DecisionState), RecoveryPolicy.choose(RecoveryContext)).
- safety: deadline arithmetic in ticks/hours and the safety net every placement policy goes through.
- baselines: on-demand, greedy, uniform-progress (Can't Be Late, NSDI'24).
- deadline_aware: ours, deadline-aware (one zone) and multi-zone.
- registry: get_placement_policy(name, **params), names().
- recovery: same-offer, next-offer, on-demand, deadline-aware; get_recovery_policy, default_recovery_policy.
"""
