"""Azure Functions entry point (Python v2 programming model).

Kept thin on purpose: each feature lives in ``functions/`` and registers exactly one ``func.Blueprint``
here; the logic lives in ``shared/``.
"""

import azure.functions as func

from app.bootstrap import provision_on_start
from app.runtime import environment
from app.telemetry import configure_telemetry
from functions import (
    fallback_router,
    handled_records,
    ops_api,
    provisioning_api,
    publishing_api,
    redrive,
    subscribers,
)

# Before any function runs: the SDK's providers when OTEL_EXPORTER_OTLP_* or
# APPLICATIONINSIGHTS_CONNECTION_STRING is set, none (the API's no-op) otherwise.
configure_telemetry(environment())
# BUSBAR_PROVISION_ON_START (on in Azure): the topology exists before the host starts any listener, which it
# does only after this import has indexed the functions (app/bootstrap.py, app/provision_on_start.py).
provision_on_start(environment())

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
# The triggers' entity paths come from the app settings as they are now (hierarchy prefix included).
app.register_functions(subscribers.blueprint(environment()))
app.register_functions(fallback_router.blueprint(environment()))
app.register_functions(provisioning_api.bp)
app.register_functions(publishing_api.bp)
app.register_functions(redrive.bp)
app.register_functions(handled_records.bp)
app.register_functions(ops_api.bp)
