"""The MLflow mirror of the result files (the files are the source of truth) and the sync that
fills in what live logging missed. Never part of a code version: it cannot change a result."""
