"""vq.services."""
