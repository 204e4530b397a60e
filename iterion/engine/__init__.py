"""The durable engine: executes a compiled ``iterion.ir.Workflow`` node by node.

Every node boundary is recorded twice: as a checkpoint in the run store (what a resume
restarts from) and as a workspace boundary through ``versioning`` (what a rewind restores).

Entry points (imported from their modules to keep this package import-light):

* ``iterion.engine.launch.launch_run(store, path, LaunchOptions(...)) -> RunResult``
* ``iterion.engine.resume.resume_run(store, run_id, ResumeOptions(...)) -> RunResult``
* ``iterion.engine.versioning.open_versioning(...)`` / ``versioning.open_run_versioning(store, doc)``
"""
