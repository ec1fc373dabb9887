"""Running external commands: the only place vq does (never with a shell)."""
