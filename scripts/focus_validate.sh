#!/usr/bin/env bash
# Check a FOCUS export with the FinOps Foundation's focus-validator (FOCUS 1.2, offline).
#   bash scripts/focus_validate.sh FILE.csv|FILE.parquet
# Creates .venv-focus (git ignores it; FOCUS_VENV overrides) with Python >= 3.12, which the
# validator needs, on first use. Exit 0 when no mandatory (-M) or conditional (-C) rule fails,
# 1 when some do (listed), 3 when no Python >= 3.12 can be found.
#
# Rules tied to a provider capability run only when the capability is declared
# (--applicability-criteria); FOCUS_APPLICABILITY overrides the list. Declared: what every row
# of our export has (account names, zones, regions, spot and on-demand pricing categories,
# resource ids and types, tags). Not declared: commitments, capacity reservations, sub-accounts,
# negotiated prices, currencies other than USD or virtual ones; nor, for rules of the validator
# that cannot hold on such data, USAGE_MEASUREMENT_SUPPORTED (its ConsumedQuantity rules read
# CommitmentDiscountStatus, a column for commitments), PUBLIC_PRICE_LIST_SUPPORTED (it also
# turns on the virtual-currency columns, whose rules name it OR VIRTUAL_CURRENCY_SUPPORTED) and
# UNIT_PRICING_SUPPORTED (SkuPriceId must reference a SKU price in the provider's own price list,
# an id the launcher does not know).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${FOCUS_VENV:-$ROOT/.venv-focus}
VALIDATOR=focus-validator==2.2.1
CRITERIA=${FOCUS_APPLICABILITY:-ACCOUNT_NAMING_SUPPORTED,AVAILABILITY_ZONE_SUPPORTED,MULTIPLE_PRICING_CATEGORIES_SUPPORTED,BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED,RESOURCE_TYPE_ASSIGNMENT_SUPPORTED,REGION_SUPPORTED,TAGGING_SUPPORTED}
NUMPY=numpy==2.2.6  # the validator pins numpy<2, but the pyarrow it pulls in needs NumPy 2
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 FILE.csv|FILE.parquet (an existing file)" >&2; exit 2; }
DATA=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")

ok_python() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
find_python() {
  # 3.12 first: on 3.13 the validator's numpy<2 pin has no wheel and would build from source
  local root=${PYENV_ROOT:-$HOME/.pyenv} c
  for c in ${FOCUS_PYTHON:-} python3.12 $(ls -d "$root"/versions/3.12* 2>/dev/null | sort -V | sed 's#$#/bin/python#') \
           python3.13 $(ls -d "$root"/versions/3.1[3-9]* 2>/dev/null | sort -V | sed 's#$#/bin/python#'); do
    if command -v "$c" >/dev/null 2>&1 && ok_python "$c"; then command -v "$c"; return; fi
  done
  if command -v uv >/dev/null; then
    uv python install 3.12 >/dev/null 2>&1 || true
    c=$(uv python find 3.12 2>/dev/null || true)
    if [ -n "$c" ] && ok_python "$c"; then echo "$c"; return; fi
  fi
  return 1
}

stamp="$VENV/.installed-$VALIDATOR-$NUMPY"
# one installer at a time: two checks started together would both rebuild the venv under the other
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock -w 1200 9 || { echo "waited 1200 s for another focus-validator install ($VENV.lock); giving up" >&2; exit 1; }
if [ ! -f "$stamp" ]; then
  PY=$(find_python) || { echo "focus-validator needs Python >= 3.12: none found (set FOCUS_PYTHON, or install one with pyenv or uv)" >&2; exit 3; }
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$VALIDATOR"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$NUMPY" 2>&1 | grep -v "dependency conflicts\|requires numpy\|dependency resolver" || true
  touch "$stamp"
fi
flock -u 9

RULES=$("$VENV/bin/python" -c 'import focus_validator, os; print(os.path.join(os.path.dirname(focus_validator.__file__), "rules"))')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# the validator reads the currency codes from this path relative to the working directory
mkdir -p "$WORK/focus_validator/rules"
cp "$RULES/currency_codes.csv" "$WORK/focus_validator/rules/"
(cd "$WORK" && "$VENV/bin/focus-validator" --data-file "$DATA" --validate-version 1.2 --block-download \
  --rule-set-path "$RULES" --applicability-criteria "$CRITERIA" > "$WORK/out.txt" 2>&1) || { cat "$WORK/out.txt" >&2; exit 1; }
"$VENV/bin/python" "$ROOT/scripts/focus_verdict.py" "$WORK/out.txt" "$RULES"
