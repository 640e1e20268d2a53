"""The namespace management API (ATOM over HTTPS) that ``ServiceBusAdministrationClient`` speaks."""
