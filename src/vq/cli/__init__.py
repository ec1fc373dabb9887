"""vq.cli."""
