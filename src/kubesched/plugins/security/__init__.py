"""Security-audit plugins: the OPA policy gate at Filter and Permit, and ComplianceScore."""
