"""The daemon's RPC handlers: small classes that receive their dependencies explicitly.

Each handler method takes its method's typed params (:mod:`vq.protocol.methods`) and
returns its typed result; :mod:`vq.daemon.routes` pairs them with their names. Every
mutation goes through the same service the CLI uses when no daemon runs (through
:mod:`vq.gateway`), so the two paths cannot drift apart; the daemon additionally
updates its index and wakes its loop.
"""
