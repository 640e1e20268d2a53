from azure_devtools.scenario_tests.exceptions import AzureTestError, ReservedResourceNameError

__all__ = ["AzureTestError", "ReservedResourceNameError"]
