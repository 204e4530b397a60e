"""The `.bot` language front end: parse, load (imports, includes, bundles), compile to IR, validate.

    from iterion.dsl import load_workflow
    result = load_workflow("review.bot")      # CompileResult(workflow, diagnostics, unit)
"""

from iterion.dsl.diagnostics import Diagnostic, Severity
from iterion.dsl.loader import load_source, load_workflow
from iterion.dsl.parser import parse
from iterion.dsl.unit import CompileResult, Unit, UnitFile

__all__ = ["CompileResult", "Diagnostic", "Severity", "Unit", "UnitFile", "load_source", "load_workflow", "parse"]
