"""Schemathesis hooks for tests/fuzz/run (loaded through SCHEMATHESIS_HOOKS).

The fuzzer's own admin token is out of its reach: a request that would revoke it (by id or by
name, as the stateful phase learns them from GET /tokens or GET /me) goes to a token that does not
exist instead, and is answered 404. Revoking it cut the run's authorization after 17 s, and every
later request was a 401 that tested nothing.
"""
import os
import sys
import uuid

import schemathesis

def normal(value):
    """A token's id or name as the server matches it: a UUID in any spelling, a name trimmed."""
    text = str(value).strip()
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text


OWN = {normal(os.environ.get(key, "")) for key in ("FUZZ_TOKEN_ID", "FUZZ_TOKEN_NAME")} - {""}


def names_own_token(value):
    return normal(value) in OWN


@schemathesis.hook
def before_call(ctx, case, kwargs):
    operation = case.operation
    if operation.method.upper() != "DELETE" or not operation.path.endswith("/tokens/{token}"):
        return
    params = case.path_parameters or {}
    if names_own_token(params.get("token", "")):
        print(f"fuzz hook: {operation.label} would revoke the fuzzer's own token; sent to an unknown one", file=sys.stderr)
        params["token"] = str(uuid.uuid4())
        case.path_parameters = params
