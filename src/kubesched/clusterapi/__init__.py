"""The member-cluster contracts cluster plugins program against (:mod:`.contract`): cluster state and its per-cycle
snapshot, and the two-phase commit's committer and ledger. Implemented by :mod:`kubesched.federation`; plugins never
import it."""
