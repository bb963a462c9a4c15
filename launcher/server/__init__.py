"""`launcher server`: controllers that outlive the laptop.

Any number of replicas share one ledger (PostgreSQL; SQLite for one server on one machine).
Each replica claims submitted runs through leases (ledger/leases.py), drives them with the same
controller `launch` uses, renews its leases with one statement per heartbeat, and adopts runs
whose owner died once their lease expires, continuing them as `launch --resume` does.

Modules: replica (claim/renew loop and controller threads), submission (what `launch --submit`
sends and how the server records it), auth (users, roles, hashed tokens), app (the HTTP API,
Starlette), client (the CLI's side, with failover between server URLs), settings (where the
CLI finds the server and its token), logs (log streaming by byte offsets).
"""
