"""Schemathesis hooks for tests/fuzz/run (loaded through SCHEMATHESIS_HOOKS).

The fuzzer's own admin token is out of its reach: a request that would revoke it (by id or by
name, as the stateful phase learns them from GET /tokens or GET /me) goes to a token that does not
exist instead, and is answered 404. Revoking it cut the run's authorization after 17 s, and every
later request was a 401 that tested nothing.

Generated text holds no control characters but tab and newline, and an If-Match only printable
ASCII: the API refuses the rest everywhere (422 naming the field; 400 for a header that is not
ASCII), a rule no schema states field by field; tests/api/text_rules.rs holds it. Left in, every
text field of every operation answered 422 to "valid" data, and the run said nothing else.
"""
import os
import re
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


CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
NOT_PRINTABLE_ASCII = re.compile("[^\x20-\x7e]")


def plain(value):
    """`value` with every string (keys included) stripped of control characters."""
    if isinstance(value, str):
        return CONTROL.sub("", value)
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    return value


@schemathesis.hook
def before_call(ctx, case, kwargs):
    for part in ("body", "query", "path_parameters"):
        value = getattr(case, part, None)
        if isinstance(value, (str, list, dict)):
            setattr(case, part, plain(value))
    if case.headers and "If-Match" in case.headers:
        case.headers["If-Match"] = NOT_PRINTABLE_ASCII.sub("", str(case.headers["If-Match"]))
    operation = case.operation
    if operation.method.upper() != "DELETE" or not operation.path.endswith("/tokens/{token}"):
        return
    params = case.path_parameters or {}
    if names_own_token(params.get("token", "")):
        print(f"fuzz hook: {operation.label} would revoke the fuzzer's own token; sent to an unknown one", file=sys.stderr)
        params["token"] = str(uuid.uuid4())
        case.path_parameters = params
