"""The pygit2 layer: boundary commits, refs, banks, reverts and workspace-checkpoint pushes.

Knows nothing of nodes, workflows or the CLI: node ids are opaque ref components.
"""
