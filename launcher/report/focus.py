"""FinOps FOCUS column names (spec 1.x) and ours (prefixed `x_`), and the values we fill in.

FOCUS has no notion of experiments, runs or preemptions: those are `x_` columns. Amounts are
USD. We bill what we measured (no negotiated discounts or commitments), so EffectiveCost and
ContractedCost equal BilledCost; ListCost prices the same hours at the on-demand list price.
"""

from __future__ import annotations

# FOCUS columns we fill
BILLED_COST = "BilledCost"
EFFECTIVE_COST = "EffectiveCost"
LIST_COST = "ListCost"
CONTRACTED_COST = "ContractedCost"
BILLING_CURRENCY = "BillingCurrency"
CHARGE_CATEGORY = "ChargeCategory"
CHARGE_PERIOD_START = "ChargePeriodStart"
CHARGE_PERIOD_END = "ChargePeriodEnd"
PROVIDER_NAME = "ProviderName"
REGION_ID = "RegionId"
AVAILABILITY_ZONE = "AvailabilityZone"
RESOURCE_ID = "ResourceId"
RESOURCE_TYPE = "ResourceType"
SERVICE_CATEGORY = "ServiceCategory"
SKU_ID = "SkuId"
PRICING_CATEGORY = "PricingCategory"
PRICING_QUANTITY = "PricingQuantity"
PRICING_UNIT = "PricingUnit"
LIST_UNIT_PRICE = "ListUnitPrice"
TAGS = "Tags"

# ours
X_EXPERIMENT = "x_ExperimentId"
X_PROJECT = "x_ProjectId"
X_OWNER = "x_Owner"
X_COST_CENTER = "x_CostCenter"
X_RUN = "x_RunId"
X_ATTEMPT = "x_AttemptId"
X_INSTANCE_TYPE = "x_InstanceType"
X_ACCELERATOR = "x_Accelerator"
X_SPOT = "x_Spot"
X_UNIT_PRICE = "x_UnitPriceUsdPerHour"

MEASURES = (
    "x_ComputeCost",  # billed machine time
    "x_CheckpointStorageCost",  # estimate, see launcher/ledger/attempt_cost.py
    "x_SpotSavings",  # ListCost - BilledCost of compute
    "x_WastedCost",  # restart overhead + preemption loss + idle before teardown
    "x_RestartOverheadCost",
    "x_PreemptionLossCost",
    "x_IdleCost",
    "x_NodeHours",
    "x_GpuHours",
    "x_Preemptions",
    "x_Attempts",
    "x_Runs",
)

CURRENCY = "USD"

PROVIDER_NAMES = {
    "aws": "AWS",
    "gcp": "Google Cloud",
    "azure": "Microsoft",
    "lambda": "Lambda",
    "runpod": "RunPod",
    "local": "Local",
}


def provider_name(cloud: str) -> str:
    return PROVIDER_NAMES.get(cloud, cloud)


def pricing_category(spot: bool) -> str:
    """FOCUS PricingCategory: spot capacity is 'Dynamic', on-demand 'Standard'."""
    return "Dynamic" if spot else "Standard"
