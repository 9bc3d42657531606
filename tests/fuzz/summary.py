"""Counts what a Schemathesis run sent and found, from its ndjson event log (argv[1])."""
import collections
import json
import os
import sys

statuses = collections.Counter()
failures = collections.Counter()
by_operation = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    event = json.loads(line)
    finished = event.get("ScenarioFinished")
    if not finished:
        continue
    label = finished["recorder"]["label"]
    for interaction in finished["recorder"].get("interactions", {}).values():
        response = interaction.get("response")
        status = response["status_code"] if response else "no response"
        statuses[status] += 1
        by_operation[label][status] += 1
    for checks in finished["recorder"].get("checks", {}).values():
        for check in checks:
            if check["status"] == "failure":
                failures[check["name"]] += 1
total = sum(statuses.values())
print(f"requests: {total}")
print("by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items(), key=lambda x: str(x[0]))))
print("failed checks: " + (", ".join(f"{c}: {n}" for c, n in failures.most_common()) or "none"))
if "-v" in sys.argv:
    for label, counts in sorted(by_operation.items()):
        print(f"  {label}: " + ", ".join(f"{s}: {n}" for s, n in sorted(counts.items(), key=lambda x: str(x[0]))))

# A run whose token stopped working answers 401/403 to nearly everything and finds nothing: its
# "no failures" means little. Some are expected (the ignored_auth check asks without the token).
refused = statuses[401] + statuses[403]
share = refused / total if total else 1.0
print(f"401/403 answers: {refused} of {total} ({share:.1%})")
limit = float(os.environ.get("FUZZ_MAX_AUTH_SHARE", "0.25"))
if share > limit:
    print(f"FAILED: more than {limit:.0%} of the answers refused the fuzzer's token; it tested little", file=sys.stderr)
    sys.exit(1)
