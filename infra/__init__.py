"""Pulumi stacks per cluster (AWS, GCP), tagged per project. See the README section "Clusters as Pulumi stacks".

Public API (import the submodules; this package imports nothing heavy):

    infra.tags.build_tags(TagInput(...), now=None) -> dict[str, str]      # refuses missing tags
    infra.tags.to_gcp_labels(tags) / from_gcp_labels(labels) / gcp_label_filter(tag_filter)
    infra.spec.ClusterInfraSpec.from_offer(offer, num_nodes=, tags=, ssh_public_key=, ssh_allowed_cidr=, **overrides)
    infra.plan.resource_plan(spec) -> list[PlannedResource]              # no CLI, no credentials
    infra.plan.plan_document(spec, plan) -> dict                          # JSON for --dry-run --json
    infra.stacks.preview(spec) -> PreviewSummary                          # needs the Pulumi CLI
    infra.stacks.up(spec) -> StackOutputs   (.to_cluster_handle(cluster) -> ClusterHandle)
    infra.stacks.destroy(project, cluster) -> bool                        # idempotent
    infra.stacks.list_stacks() -> list[StackSummary]
    infra.naming.stack_name(project, cluster) -> str
"""
