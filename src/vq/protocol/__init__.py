"""The wire format shared by the client and the daemon. Pure and stdlib-only."""
