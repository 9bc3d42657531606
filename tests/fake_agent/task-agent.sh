#!/bin/bash --norc
# A fake coding agent for standalone tasks and board skills: commits in its clone and reports
# with the real `switchyard` CLI from its pane, as a real one would. FAKE_DIR/mode says how:
#   done   commit, then `task done`
#   stop   never report: wait at the prompt; the first "Continue" makes it exit (its pane goes)
#   ask    `task ask`, then act on the answer that arrives as a message, commit, `task done`
#   screen ask on its screen with Codex's question dialog (question.py), and act on its answer
# A skill agent (SWITCHYARD_ROLE reviewer or qa) reports its skill done at once.
set -u
sy=${SWITCHYARD_BIN:?}
dir=${FAKE_DIR:?}
git config user.email fake@example.com
git config user.name "Fake Agent"
echo "fake $SWITCHYARD_AGENT ($SWITCHYARD_ROLE) on ${SWITCHYARD_BRANCH:-}"
echo "start" >> "$dir/starts-$SWITCHYARD_AGENT"

# Reports, trying again while the server is down (it may be restarting).
. "$(dirname "$0")/retry.sh"

# Waits for a message containing $1 in the inbox; prints it.
wait_for() {
    while true; do
        text=$("$sy" msg inbox --unread --mark-read 2>/dev/null)
        if printf '%s' "$text" | grep -q "$1"; then
            printf '%s\n' "$text"
            return 0
        fi
        sleep 0.3
    done
}

idle() {
    while true; do sleep 1; done
}

# Busy: the screen changes while it works, as a real agent's does.
busy() {
    (while true; do printf '.'; sleep 0.2; done) &
    spinner=$!
}
calm() {
    kill "$spinner" 2>/dev/null
    echo
}

if [ "$SWITCHYARD_ROLE" != engineer ]; then
    wait_for "Your assignment" > /dev/null
    busy
    retry "$sy" task done --result "reviewed: looks right"
    calm
    idle
fi

mode=$(cat "$dir/mode" 2>/dev/null || echo done)
case "$mode" in
done)
    wait_for "Your assignment" > /dev/null
    busy
    echo "the work" > work.txt
    git add -A && git commit --quiet -m "do the task"
    retry "$sy" task done --summary "wrote work.txt"
    calm
    ;;
stop)
    # Iteration 1: at the prompt without reporting. Iteration 2: exits. Iteration 3 (a new
    # pane): at the prompt again, never reporting.
    if [ "$(wc -l < "$dir/starts-$SWITCHYARD_AGENT")" -eq 1 ]; then
        wait_for "Continue" > /dev/null
        exit 0
    fi
    ;;
ask)
    wait_for "Your assignment" > /dev/null
    busy
    retry "$sy" task ask "Which colour?"
    calm
    answer=$(wait_for "Answer to your question" | grep -o 'colour-[a-z]*' | head -1)
    busy
    echo "$answer" > colour.txt
    git add -A && git commit --quiet -m "paint it $answer"
    retry "$sy" task done --result "painted $answer"
    calm
    ;;
screen)
    wait_for "Your assignment" > /dev/null
    # Asks on its screen with a menu that takes keys, as the CLIs' dialogs do.
    python3 "$(dirname "$0")/question.py" "$dir/answer-$SWITCHYARD_AGENT"
    answer=$(cat "$dir/answer-$SWITCHYARD_AGENT")
    busy
    echo "$answer" > choice.txt
    git add -A && git commit --quiet -m "answered: $answer"
    retry "$sy" task done --result "answered: $answer"
    calm
    ;;
esac
idle
