"""Built-in tools: what a ``tool`` node's one-word ``command:`` names (docs/language.md, "Built-in
tools"). The names and the dispatch live in ``iterion.builtins.registry``; each tool's code in
its own module (workspace tools: claw's implementation, ``iterion.builtins.workspace``; PII
redaction: ``iterion.builtins.privacy``)."""
