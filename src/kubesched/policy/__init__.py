"""Policy engines behind one interface: embedded Rego (regorus; run in a worker process by
:mod:`kubesched.policy.worker` for the scheduler) and remote OPA (REST), plus the decision cache."""
