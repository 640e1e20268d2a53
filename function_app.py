"""Azure Functions entry point (Python v2 programming model).

Kept thin on purpose: each feature lives in ``functions/`` and registers exactly one
``func.Blueprint`` here, e.g. ``app.register_functions(some_feature.bp)``. None exist yet.
"""

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
