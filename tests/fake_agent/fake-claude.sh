#!/bin/sh
# A fake Claude Code for the worker's tests: plays the screens of tests/fixtures/screens/claude/
# in the order of that directory's README, sending the hook Claude Code would send at each step
# through the real `switchyard hook`. It moves to the next step when a line arrives on stdin
# (the test types it through the API), so the test, not a timer, decides the pace.
#
# Environment: FAKE_SCREENS (the fixtures directory), SWITCHYARD_BIN (the switchyard binary),
# FAKE_RESET (what the usage-limit screen says about its reset, default "resets in 3 seconds"),
# plus SWITCHYARD_URL/AGENT/TOKEN, which the worker gives every pane.
# With the argument `resumed` (the provider's resume command) it starts again at step 1.

set -u
screens=${FAKE_SCREENS:?FAKE_SCREENS is not set}
bin=${SWITCHYARD_BIN:?SWITCHYARD_BIN is not set}
reset=${FAKE_RESET:-resets in 3 seconds}

# Typed lines are not echoed, as in Claude Code's own input handling of a dialog.
stty -echo 2>/dev/null

show() {
    printf '\033[H\033[2J\033[3J'
    cat "$screens/$1"
}

hook() {
    printf '{"session_id":"fake","transcript_path":"/tmp/fake.jsonl","cwd":"%s","hook_event_name":"%s"%s}' \
        "$PWD" "$1" "${2:-}" | "$bin" hook
}

next() {
    read -r _ || exit 0
}

show idle-v1-box.txt
hook SessionStart
next
hook UserPromptSubmit
show working.txt
next
hook PermissionRequest ',"tool_name":"Bash"'
show permission.txt
next
hook PostToolUse ',"tool_name":"Bash"'
show working-tool-running-v1-box.txt
next
hook PreToolUse ',"tool_name":"AskUserQuestion"'
show question.txt
next
hook PostToolUse ',"tool_name":"AskUserQuestion"'
show working-typed-do-you-want.txt
next
show idle.txt
hook Stop
next
printf '\033[H\033[2J\033[3J'
sed "s/resets 3pm (Europe\/Berlin)/$reset/" "$screens/usage_limit.txt"
hook Stop
# Claude Code stays at its prompt after a limit; the worker closes the window.
while :; do next; done
