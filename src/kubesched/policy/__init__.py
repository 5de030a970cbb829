"""Policy engines behind one interface: embedded Rego (regorus) and remote OPA (REST), plus the decision cache."""
