"""Storage: the run directory and its one owner (:mod:`interp.io.rundir`: lock, validation, format
versions, :func:`~interp.io.rundir.load_run`), the toolkit's one atomic file writer and the weight
and resume files. Training writes through here; every analysis and figure reads through here."""
