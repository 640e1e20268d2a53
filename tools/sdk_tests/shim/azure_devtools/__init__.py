"""Stand-in for azure-devtools (azure-sdk-tools), the parts the azure-servicebus test suites import."""
