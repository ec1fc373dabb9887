"""Authentication and authorization of the web console and API (§7.2, §7.3, §10.4).

* ``principal`` — who is asking (:class:`Principal`) and what each kind may do.
* ``tokens`` — the shared admin bearer token in ``<config-root>/web-token`` (0600).
* ``accounts`` — console accounts in ``web-users.json`` (scrypt), roles viewer/operator/admin.
* ``sessions`` — HMAC-SHA256 signed session cookies and CSRF tokens.
* ``scoped`` — scoped agent tokens (hashed), their limits and daily quotas.
* ``guard`` — resolving a request to a :class:`Principal` and enforcing a need.
"""
