"""Tell people what a reaper pass marked and removed: one message per pass, to a webhook (JSON
POST, e.g. a Slack/Teams incoming-webhook relay) and/or a command (JSON on stdin, e.g. a mailer).
A failing notification is reported and never stops or undoes the pass."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence

from launcher.reaper.policy import NotifyConfig


def message(pass_id: str, outcomes: Sequence) -> dict | None:
    """The pass's marks and actions, or None when there is nothing to say."""
    marked = [o.to_json() for o in outcomes if o.decision == "mark"]
    acted = [o.to_json() for o in outcomes if o.decision == "act"]
    if not marked and not acted:
        return None
    saving = sum(o["estimated_saving_usd"] or 0.0 for o in acted)
    text = f"gpu-launcher reap {pass_id}: {len(marked)} marked idle (acted on after the grace period), {len(acted)} removed"
    if acted:
        text += f", est. saving ${saving:,.2f}"
    return {"text": text, "pass_id": pass_id, "marked": marked, "acted": acted, "estimated_saving_usd": round(saving, 4)}


def send(config: NotifyConfig, msg: dict) -> list[str]:
    """Deliver `msg`; returns the errors (empty when every channel took it)."""
    errors: list[str] = []
    body = json.dumps(msg, default=str)
    if config.webhook_url:
        import httpx

        try:
            r = httpx.post(config.webhook_url, content=body, headers={"Content-Type": "application/json"}, timeout=config.timeout_s)
            if r.status_code >= 300:
                errors.append(f"notify webhook: HTTP {r.status_code}")
        except httpx.HTTPError as e:
            errors.append(f"notify webhook: {type(e).__name__}: {e}")
    if config.command:
        try:
            res = subprocess.run(config.command, shell=True, input=body, text=True, capture_output=True, timeout=config.timeout_s)
            if res.returncode != 0:
                errors.append(f"notify command exited {res.returncode}: {res.stderr.strip()[-200:]}")
        except subprocess.TimeoutExpired:
            errors.append(f"notify command timed out after {config.timeout_s:g}s")
    return errors
