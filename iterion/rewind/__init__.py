"""``iterion rewind``: back a run up to an earlier node, restore the files it produced, replay.

* ``invalidation`` - THE invalidation rule (which outputs a rewind drops);
* ``promotion``    - a pivot inside a fan-out body moves to its outermost router;
* ``auto``         - ``--auto``'s pivot selection among the nodes an edit impacts;
* ``auto_detect``  - the recorded unit vs the unit on disk, through ``iterion.dsl.diff``;
* ``state_edit``   - the checkpoint and run-document mutation;
* ``files``        - the workspace restore (the mechanism's own: ``Versioning.restore``);
* ``worktree``     - rebuilding a worktree iterion released;
* ``rewind``       - the orchestration (``rewind_run``).
"""
