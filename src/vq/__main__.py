"""``python -m vq`` runs the command-line interface."""

from vq.cli.main import main

if __name__ == "__main__":
    main()
