"""Artifacts of a local store that travel with its results folder.

A local (SQLite) store records no absolute artifact path: its experiments keep their artifacts at
proxied locations, ``mlflow-artifacts:/<benchmark>``, which name a place relative to an artifact
root. ``mlflow server`` / ``mlflow ui`` resolves them against its ``--artifacts-destination``
(``results/mlartifacts``); :class:`ResultsClient` resolves them against the results folder it is
opened on. So a results folder copied or moved elsewhere writes only into itself, and a UI opened
on it shows its own files. (MLflow's own client resolves ``mlflow-artifacts:`` only through an
HTTP server; every artifact call of :class:`mlflow.MlflowClient`, ``log_table`` and ``log_image``
included, goes through the four methods overridden here.)
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from mlflow import MlflowClient
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

PROXIED = "mlflow-artifacts:"


def proxied_location(benchmark: str) -> str:
    """The artifact location of a local store's experiment: relative to the artifact root."""
    return f"{PROXIED}/{benchmark}"


class ResultsClient(MlflowClient):
    """The client of a local store: a run at a proxied location keeps its artifacts under ``root``;
    any other run (a store made with absolute locations) is MLflow's as usual."""

    def __init__(self, tracking_uri: str, root: Path):
        super().__init__(tracking_uri)
        self.root = root

    def local_repository(self, run_id: str) -> LocalArtifactRepository | None:
        """The run's artifact folder under ``root``, if its location is proxied."""
        uri = self.get_run(run_id).info.artifact_uri
        if not uri.startswith(PROXIED):
            return None
        return LocalArtifactRepository((self.root / urlparse(uri).path.lstrip("/")).as_uri())

    def log_artifact(self, run_id, local_path, artifact_path=None) -> None:
        if (repo := self.local_repository(run_id)) is None:
            return super().log_artifact(run_id, local_path, artifact_path)
        return repo.log_artifact(local_path, artifact_path)

    def log_artifacts(self, run_id, local_dir, artifact_path=None) -> None:
        if (repo := self.local_repository(run_id)) is None:
            return super().log_artifacts(run_id, local_dir, artifact_path)
        return repo.log_artifacts(local_dir, artifact_path)

    def list_artifacts(self, run_id, path=None):
        if (repo := self.local_repository(run_id)) is None:
            return super().list_artifacts(run_id, path)
        return repo.list_artifacts(path)

    def download_artifacts(self, run_id, path, dst_path=None):
        if (repo := self.local_repository(run_id)) is None:
            return super().download_artifacts(run_id, path, dst_path)
        return repo.download_artifacts(path, dst_path)


def artifact_repository(client: MlflowClient, run_id: str):
    """The run's artifact repository, for what the client has no call for (deleting artifacts)."""
    if isinstance(client, ResultsClient) and (repo := client.local_repository(run_id)) is not None:
        return repo
    return get_artifact_repository(client.get_run(run_id).info.artifact_uri, tracking_uri=client.tracking_uri)
