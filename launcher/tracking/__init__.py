"""Experiment tracking and lineage of launcher runs.

`session_for(job, ledger)` gives the controller its run observer: MLflow tracking when the spec
says `launcher: {tracking: mlflow}` or `MLFLOW_TRACKING_URI` is set (and the spec does not say
`tracking: off`), and in every case the job's results recorded in the ledger. Importing this
package never imports mlflow (only `launcher.tracking.mlflow_sink` does, when a run is tracked).
"""

from __future__ import annotations

import os

# Longest a controller waits, once the run ended, for the tracker to take what is left.
FLUSH_ENV = "LAUNCHER_TRACKING_FLUSH_S"



def tracking_uri_for(spec, environ=os.environ) -> str | None:
    asked = getattr(spec.launcher, "tracking", None)
    if asked == "off":
        return None
    uri = environ.get("MLFLOW_TRACKING_URI") or None
    if asked == "mlflow" and uri is None:
        from launcher import paths

        return f"sqlite:///{(paths.home() / 'mlflow.db').resolve()}"
    return uri


def session_for(job, ledger):
    from launcher.tracking.session import TrackingSession, recorded_tracking_uri

    uri = tracking_uri_for(job.spec)
    if uri is None and getattr(job.spec.launcher, "tracking", None) != "off":
        uri = recorded_tracking_uri(ledger, job.run_id)  # a resumed run keeps its tracker
    flush_s = float(os.environ.get(FLUSH_ENV) or 30.0)
    return TrackingSession(job, ledger, tracking_uri=uri, final_flush_s=flush_s)
