"""Test app: a timer whose run outlasts its one-second schedule."""

import os
import time

import azure.functions as func
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.timer_trigger(arg_name="timer", schedule="* * * * * *", run_on_startup=True)
def overrunning(timer: func.TimerRequest) -> None:
    started = time.monotonic()
    time.sleep(float(os.environ.get("TIMER_SLEEP", "2.5")))
    record("overrunning", past_due=timer.past_due, start=started, end=time.monotonic())
