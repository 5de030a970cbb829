"""The policy contracts plugins and engines share: the decision input, the engine client a plugin asks the Handle
for (:mod:`.contract`), and the verdicts a policy plugin leaves for the audit trail (:mod:`.verdicts`). Engines live
in :mod:`kubesched.policy`; plugins never import them."""
