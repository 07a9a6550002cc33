"""Stage 6, analysis of trained networks: the progress-measure registry and the probes behind it,
evaluation on the IC / IC2 / IW sets, the one transition detector, measures over a finished run's
checkpoints, length generalisation, grouping runs by config and the local learning coefficient.
Results are plain numbers and DataFrames; drawing them is :mod:`interp.viz`'s job."""
