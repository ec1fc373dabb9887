"""vq — a durable job queue for research computing.

Importing ``vq`` has no side effects and imports nothing heavy.
"""

__version__ = "0.1.0"
