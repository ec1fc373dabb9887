"""vq.transport."""
