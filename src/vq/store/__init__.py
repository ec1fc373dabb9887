"""On-disk state of vq: job specs, workspaces and the files inside them."""
