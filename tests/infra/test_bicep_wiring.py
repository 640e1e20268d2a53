"""A compiler-lite check of the module wiring (the Bicep compiler is not available here): main.bicep passes
every required parameter of each module and no unknown one, reads only outputs the modules declare, and
every declared parameter or variable is used."""

from __future__ import annotations

import re

from tests.infra.bicep_text import app_settings, nested_block
from tests.infra.infra_paths import templates

PARAM = re.compile(r"^param\s+(\w+)\s+\w+(\s*=.*)?$", re.M)
OUTPUT = re.compile(r"^output\s+(\w+)\s", re.M)
VAR = re.compile(r"^var\s+(\w+)\s*=", re.M)
MODULE = re.compile(r"^module\s+(\w+)\s+'([^']+)'\s*=\s*\{", re.M)


def params_of(text: str) -> dict[str, bool]:
    """Parameter name -> has a default."""
    return {name: bool(default) for name, default in PARAM.findall(text)}


def modules() -> dict[str, tuple[str, str]]:
    """Module symbol -> (module file relative to infra/, the module block's text)."""
    main = templates()["main.bicep"]
    found = {}
    for match in MODULE.finditer(main):
        found[match.group(1)] = (match.group(2), nested_block(main[match.start() :], "params"))
    return found


def test_every_module_gets_its_required_parameters_and_no_unknown_one() -> None:
    assert modules(), "main.bicep declares no modules"
    for symbol, (file, params_block) in modules().items():
        declared = params_of(templates()[file])
        passed = set(re.findall(r"(?m)^\s{4}(\w+)\s*:", params_block))
        required = {name for name, has_default in declared.items() if not has_default}
        assert sorted(required - passed) == [], f"module {symbol} ({file}) misses parameters"
        assert sorted(passed - set(declared)) == [], f"module {symbol} ({file}) gets unknown parameters"


def test_main_reads_only_outputs_the_modules_declare() -> None:
    main = templates()["main.bicep"]
    outputs = {symbol: set(OUTPUT.findall(templates()[file])) for symbol, (file, _) in modules().items()}
    for symbol, output in re.findall(r"\b(\w+)\.outputs\.(\w+)", main):
        assert symbol in outputs, f"{symbol} is not a module"
        assert output in outputs[symbol], f"{symbol}.outputs.{output} is not declared"


def test_every_parameter_and_variable_is_used() -> None:
    for file, text in templates().items():
        for name in [*params_of(text), *VAR.findall(text)]:
            uses = len(re.findall(rf"(?<![\w.']){re.escape(name)}\b", text))
            assert uses >= 2, f"{file}: {name} is declared but never used"


def test_bare_identifiers_in_app_settings_are_parameters_of_the_function_app_module() -> None:
    declared = params_of(templates()["modules/functionapp.bicep"])
    for entry in app_settings(templates()):
        if re.fullmatch(r"[A-Za-z]\w*", entry.value):
            assert entry.value in declared, f"{entry.name} = {entry.value}: not a parameter"
