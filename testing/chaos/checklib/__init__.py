"""The pieces of testing/chaos/check.py, the history checker of the chaos harness.

history     reads a JSON-lines history into ops (invoke paired with completion), leases,
            abandons, nemesis windows and the final reads
report      a Check (violation counts and examples) and the text / JSON output
durability  G1 (nothing lost, nothing resurrected) and replica agreement
leases      G3 (no two live leases; no ack accepted on a superseded lease)
redelivery  G2 (abandoned leases are handed out again, in time)
figures     availability around each nemesis window, and op counts
"""
