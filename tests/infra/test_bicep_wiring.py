"""A compiler-lite check of the module wiring on pycep's syntax tree (the Bicep compiler is not available
here): main.bicep passes every required parameter of each module and no unknown one, reads only outputs the
modules declare, and every declared parameter or variable is used."""

from __future__ import annotations

from tests.infra.bicep_tree import (
    accessor_path,
    declarations,
    is_reference,
    modules,
    parameters,
    referenced_names,
)
from tests.infra.infra_paths import bicep_app_settings, templates


def test_every_module_gets_its_required_parameters_and_no_unknown_one() -> None:
    calls = modules(templates()["main.bicep"])
    assert calls, "main.bicep declares no modules"
    for call in calls.values():
        declared = parameters(templates()[call.path])
        required = {name for name, has_default in declared.items() if not has_default}
        assert sorted(required - set(call.params)) == [], (
            f"module {call.symbol} ({call.path}) misses parameters"
        )
        assert sorted(set(call.params) - set(declared)) == [], f"module {call.symbol} gets unknown parameters"


def _accessor_paths(value: object) -> list[list[str]]:
    """Every ``a.b.c`` chain inside ``value``."""
    found = []
    path = accessor_path(value) if isinstance(value, dict) else None
    if path is not None:
        found.append(path)
    elif isinstance(value, dict):
        for item in value.values():
            found += _accessor_paths(item)
    elif isinstance(value, list):
        for item in value:
            found += _accessor_paths(item)
    return found


def test_main_reads_only_outputs_the_modules_declare() -> None:
    main = templates()["main.bicep"]
    calls = modules(main)
    outputs = {symbol: set(templates()[call.path].get("outputs", {})) for symbol, call in calls.items()}
    read = [
        path for _, value in declarations(main) for path in _accessor_paths(value) if path[1:2] == ["outputs"]
    ]
    assert read, "main.bicep reads no module output"
    for symbol, _, output, *_ in read:
        assert symbol in outputs, f"{symbol} is not a module"
        assert output in outputs[symbol], f"{symbol}.outputs.{output} is not declared"


def test_every_parameter_and_variable_is_used() -> None:
    for file, tree in templates().items():
        used: set[str] = set()
        for _, value in declarations(tree):
            used |= referenced_names(value)
        declared = [*tree.get("parameters", {}), *tree.get("variables", {})]
        assert sorted(set(declared) - used) == [], f"{file}: declared but never used"


def test_bare_identifiers_in_app_settings_are_parameters_of_the_function_app_module() -> None:
    declared = parameters(templates()["modules/functionapp.bicep"])
    references = [entry for entry in bicep_app_settings() if is_reference(entry.value)]
    assert references, "no app setting takes a parameter"
    for entry in references:
        assert entry.value in declared, f"{entry.name} = {entry.value}: not a parameter"
