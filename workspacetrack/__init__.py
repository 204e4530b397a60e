"""Content-hashing tracker that versions in-place runs outside the operator's checkout.

The engine uses the ``Tracker`` facade; everything else is its machinery.
"""

from workspacetrack.capture import CaptureStats
from workspacetrack.changes import Change
from workspacetrack.errors import TrackError
from workspacetrack.models import Manifest, SnapshotRecord
from workspacetrack.restore import RestoreReport, Scope
from workspacetrack.tracker import DEFAULT_SIZE_CAP, Tracker

__all__ = ["DEFAULT_SIZE_CAP", "CaptureStats", "Change", "Manifest", "RestoreReport", "Scope",
           "SnapshotRecord", "TrackError", "Tracker"]
