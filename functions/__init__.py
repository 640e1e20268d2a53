"""Azure Functions features, one Blueprint per module, registered in function_app.py."""
