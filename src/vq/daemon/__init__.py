"""vq.daemon."""
