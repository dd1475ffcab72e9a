"""Rehearsal nodes: N namespaced hosts on this machine (:mod:`.nodes`) to run a whole cluster
POC against before the customer's cluster; ``pocforge rehearse`` drives them."""
