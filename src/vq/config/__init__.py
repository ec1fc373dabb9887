"""Every reader of the configuration, from raw bytes up to the validated settings.

Importing the package costs nothing: this module imports no submodule, so the CLI's fast
paths load only what they name. The modules, from the bottom up:

- :mod:`vq.config.roots`, :mod:`vq.config.raw`, :mod:`vq.config.multi_user_root`,
  :mod:`vq.config.host_names`: stdlib only, for the CLI's fast paths (where the roots
  are, the bytes and TOML of one file, whether multi-user mode is on, which words name
  a host). Never pydantic.
- :mod:`vq.config.secrets`: secret references (``env:``/``file:``) and the audit of
  literal secrets.
- the pydantic models of each table: :mod:`vq.config.hosts`, :mod:`vq.config.programs`,
  :mod:`vq.config.web`, :mod:`vq.config.notifications`, :mod:`vq.config.multi_user`.
- :mod:`vq.config.settings`: the merged, validated :class:`~vq.config.settings.Settings`
  of the site and user files; :mod:`vq.config.report` and :mod:`vq.config.audit` show
  and check them.

The package sits below :mod:`vq.paths` (which resolves its roots here) and above the
pure layers; it reads files but knows nothing of jobs, the state or the daemon.
"""
