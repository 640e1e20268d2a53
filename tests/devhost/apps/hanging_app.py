"""Test app whose import never ends, as with a blocking call at module level (a network call without a
timeout, ``input()``, a lock): it writes its process id where the test says, then sleeps."""

import os
import time
from pathlib import Path

import azure.functions as func

Path(os.environ["DEVHOST_TEST_PID_FILE"]).write_text(str(os.getpid()), encoding="utf-8")
time.sleep(3600)

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
