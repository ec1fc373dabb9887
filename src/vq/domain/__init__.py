"""Pure domain rules of vq: no I/O, no knowledge of the layers above."""
