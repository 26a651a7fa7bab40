"""The numerical rules a record was made under.

The default steps and tolerances, the rounding bounds, the re-estimation, the path each input takes and the
observations a check makes are one set of rules (docs/tolerances.md), named by the version in which they last
changed: every new record says `"rules": RULES`. A change to them ships with a CHANGELOG.md entry and a version bump,
and moves RULES to that version; it never adds a second code path. A record made under earlier rules is replayed
under today's (core/ledger/replay_rules.py).

Records of 0.1.0 name a policy instead (`"policy": 1` to `7`; an executed record with neither field predates them and
was made by policy 1). The rules of 0.2.0 are policy 7's; those of 0.3.0 and 0.4.0 (CHANGELOG.md) followed.
"""

from __future__ import annotations

#: The version in which the rules of new checks last changed (package.json's version at that change).
RULES = "0.4.0"
#: The record field that names them.
FIELD = "rules"
#: The field 0.1.0's records name their policy in: accepted and not acted on.
LEGACY_FIELD = "policy"
#: The policy of 0.1.0 whose rules became those of 0.2.0, and the rules it names.
LAST_POLICY = 7
LAST_POLICY_RULES = "0.2.0"


def rules_of(record: dict) -> str:
    """The rules a completed record was made under: its `rules`, 0.2.0 for 0.1.0's last policy, else `policy N`
    (`policy 1` for an executed record that names neither, written before policies were numbered)."""
    if record.get(FIELD) is not None:
        return str(record[FIELD])
    policy = record.get(LEGACY_FIELD)
    if policy is None:
        return "policy 1"
    return LAST_POLICY_RULES if policy == LAST_POLICY and not isinstance(policy, bool) else f"policy {policy}"
