"""Test app: a timer whose run outlasts its one-second schedule."""

import json
import os
import threading
import time

import azure.functions as func

app = func.FunctionApp()
RECORD_FILE = os.environ.get("DEVHOST_TEST_RECORD", "")
_lock = threading.Lock()


@app.timer_trigger(arg_name="timer", schedule="* * * * * *", run_on_startup=True)
def overrunning(timer: func.TimerRequest) -> None:
    started = time.monotonic()
    time.sleep(float(os.environ.get("TIMER_SLEEP", "2.5")))
    with _lock, open(RECORD_FILE, "a", encoding="utf-8") as handle:
        handle.write(
            json.dumps(
                {
                    "function": "overrunning",
                    "past_due": timer.past_due,
                    "start": started,
                    "end": time.monotonic(),
                }
            )
            + "\n"
        )
