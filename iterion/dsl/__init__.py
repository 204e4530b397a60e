"""The `.bot` language front end: parse, load (imports, includes, bundles), compile to IR, validate.

    from iterion.dsl import load_workflow
    result = load_workflow("review.bot")      # CompileResult(workflow, diagnostics, unit)
    result = load_tree({"main.bot": text, "lib/x.bot": other}, "main.bot")   # sources in memory
"""

from iterion.dsl.diagnostics import Diagnostic, Severity
from iterion.dsl.loader import load_source, load_tree, load_workflow
from iterion.dsl.parser import parse
from iterion.dsl.unit import CompileResult, Unit, UnitFile, UnitRole

__all__ = ["CompileResult", "Diagnostic", "Severity", "Unit", "UnitFile", "UnitRole", "load_source", "load_tree",
           "load_workflow", "parse"]
