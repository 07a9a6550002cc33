"""Stage 4, storage: the run directory and its one owner (:mod:`interp.io.rundir`: lock,
validation, format versions, :func:`~interp.io.rundir.load_run`), the toolkit's one atomic file
writer, the weight and resume files and the plugin loader. Training writes through here; every
analysis and figure reads through here."""
