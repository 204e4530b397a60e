"""`iterion lsp`: the `.bot` language server (stdio, pygls), one module per feature.

- ``analysis``: a document compiled through the same loader as `iterion validate` (the open
  buffers overlaid on the disk), and its index of declarations and references;
- ``positions``: the validator's 1-based line:column <-> LSP's 0-based UTF-16 positions;
- ``diagnostics``, ``hover``, ``navigation`` (definition, references), ``completion``,
  ``symbols``, ``formatting``: one LSP feature each, pure functions of an ``Analysis``;
- ``server``: the pygls server wiring them to the protocol.

Only ``server`` imports pygls; the others use lsprotocol's types, so each is testable alone.
"""
