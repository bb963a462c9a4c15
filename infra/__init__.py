"""Pulumi stacks per cluster (AWS, GCP), tagged per project. See the README section "Clusters as Pulumi stacks".

Public API (import the submodules; this package imports nothing heavy):

    infra.tags.build_tags(TagInput(...), now=None) -> dict[str, str]      # refuses missing tags
    infra.tags.run_tags(TagInput(...)) / cluster_tags(run_tags, cluster=, run_id=)   # a run's, a cluster's
    infra.tags.to_gcp_labels(tags) / from_gcp_labels(labels) / gcp_label_filter(tag_filter)
    infra.spec.ClusterInfraSpec.from_offer(offer, num_nodes=, tags=, ssh_public_key=, ssh_allowed_cidr=, **overrides)
    infra.plan.resource_plan(spec) -> list[PlannedResource]              # no CLI, no credentials
    infra.plan.plan_document(spec, plan) -> dict                          # JSON for --dry-run --json
    infra.stacks.preview(spec, state_home=) -> PreviewSummary             # needs the Pulumi CLI
    infra.stacks.up(spec, state_home=) -> StackOutputs                    # the caller makes its own handle
    infra.stacks.destroy(project, cluster, state_home=) -> bool           # idempotent
    infra.stacks.list_stacks(state_home) -> list[StackSummary]
    infra.naming.stack_name(project, cluster) -> str

Errors are `infra.errors.InfraError` subclasses; this package imports nothing from `launcher`.
"""
