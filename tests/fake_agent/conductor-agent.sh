#!/bin/bash --norc
# A fake coding agent for the conductor's tests: acts by its role (SWITCHYARD_ROLE) as a real
# one would — commits on its branch in its clone and reports with the real `switchyard` CLI
# from its pane — then keeps reading its inbox, as an agent at its prompt would, for more work
# (a conflict to resolve). Files in FAKE_DIR say what the test wants:
#   plan.yaml      the planner's plan
#   reviews        how many reviews fail before one passes (default 0)
#   shared         engineers write their group into shared.txt, so parallel groups conflict
#   quit-<key>     the engineer of group <key> exits without committing anything
#   hold-<key>     the engineer of group <key> waits for a file go-<key> before it works
#   push-<key>     the engineer of group <key> first commits <key>-early.txt and sends it with
#                  `switchyard group push` (its work so far, nothing reported), then holds if told;
#                  started where that file is already in its clone, it notes its name in
#                  found-early-<key> instead
#   idle-<key>     the engineer of group <key> does nothing and never reports (idle at its prompt)
#   no-retry       reports are sent once, by the CLI alone (which keeps trying while the server
#                  is down), not in the retry loop below
#   (--resumed)    an engineer resumed after an interruption waits for Switchyard's word to go on,
#                  notes its name in went-on-<key>, and works (holding no more)
#   die-<key>      an engineer of group <key> resumed exits at once with status 1
#   limit-<key>    the engineer of group <key> first shows Codex's usage-limit message with a reset
#                  in that many seconds and waits (Switchyard suspends it); resumed, it works
set -u
sy=${SWITCHYARD_BIN:?}
dir=${FAKE_DIR:?}
# Its identity for every commit, without a git run to set it.
export GIT_AUTHOR_NAME="Fake Agent" GIT_AUTHOR_EMAIL=fake@example.com
export GIT_COMMITTER_NAME="Fake Agent" GIT_COMMITTER_EMAIL=fake@example.com
branch=${SWITCHYARD_BRANCH:-}
key=${branch##*/}
slug=${branch#group/}
slug=${slug%/*}
echo "fake $SWITCHYARD_AGENT ($SWITCHYARD_ROLE) on $branch"

# Reports, trying again while the server is down (it may be restarting).
. "$(dirname "$0")/retry.sh"

report_group() {
    if [ -e "$dir/no-retry" ]; then
        "$sy" group done --summary "group $key: $1"
    else
        retry "$sy" group done --summary "group $key: $1"
    fi
}

# Resolves a conflict with the wish's branch by keeping both sides' lines.
resolve() {
    git fetch --quiet origin
    if ! git merge --quiet --no-edit "origin/wish/$slug"; then
        git diff --name-only --diff-filter=U | while read -r file; do
            grep -v -e '^<<<<<<<' -e '^=======' -e '^>>>>>>>' "$file" | sort -u > "$file.resolved"
            mv "$file.resolved" "$file"
            git add "$file"
        done
        git commit --quiet --no-edit
    fi
    report_group "merged the wish's branch"
}

case "$SWITCHYARD_ROLE" in
planner)
    retry "$sy" wish plan --file "$dir/plan.yaml"
    ;;
engineer)
    [ -e "$dir/quit-$key" ] && exit 0
    if [ -e "$dir/idle-$key" ]; then
        echo "thinking it over"
        while true; do sleep 1; done
    fi
    if [ -e "$dir/push-$key" ]; then
        if [ -e "$key-early.txt" ]; then
            echo "$SWITCHYARD_AGENT" >> "$dir/found-early-$key"
        else
            echo "early work of $key" > "$key-early.txt"
            git add -A && git commit --quiet -m "group $key: early work"
            retry "$sy" group push
        fi
    fi
    if [ "${1:-}" = --resumed ]; then
        [ -e "$dir/die-$key" ] && exit 1
        # Resumed after an interruption (its provider's `resume` passes --resumed): it goes on
        # once Switchyard says so, as a real agent resumed at its prompt would.
        until "$sy" msg inbox --unread --mark-read 2>/dev/null | grep -q "Your session was interrupted"; do
            sleep 0.5
        done
        echo "$SWITCHYARD_AGENT" >> "$dir/went-on-$key"
    elif [ -e "$dir/hold-$key" ]; then
        while [ ! -e "$dir/go-$key" ]; do sleep 0.1; done
    fi
    if [ -e "$dir/limit-$key" ] && [ ! -e "$dir/limited-$key" ]; then
        touch "$dir/limited-$key"
        echo "■ You've hit your usage limit. Upgrade to Pro, or try again in $(cat "$dir/limit-$key") seconds."
        while true; do sleep 1; done
    fi
    echo "work of $key" > "$key.txt"
    [ -e "$dir/shared" ] && echo "line of $key" > shared.txt
    git add -A && git commit --quiet -m "group $key"
    report_group "wrote $key.txt"
    ;;
reviewer)
    failures=$(cat "$dir/reviews" 2>/dev/null || echo 0)
    failed=$(cat "$dir/reviews-failed" 2>/dev/null || echo 0)
    if [ "$failed" -lt "$failures" ]; then
        echo $((failed + 1)) > "$dir/reviews-failed"
        printf 'README.md:1 needs a line about the change\n' > notes.md
        "$sy" review fail --notes-file notes.md
    else
        retry "$sy" review pass
    fi
    ;;
fix)
    echo "fixed after review" >> README.md
    git add -A && git commit --quiet -m "fix the review's notes"
    retry "$sy" fix done --summary "added the line"
    ;;
esac

# At the prompt: read what Switchyard says, act on a conflict. Once a second: a real agent does
# not poll at all (messages are typed into its pane), and the conductor's benchmark should not
# count a fake's polling as Switchyard's time.
while true; do
    if "$sy" msg inbox --unread --mark-read 2>/dev/null | grep -q "Your branch conflicts with the wish's branch"; then
        resolve
    fi
    sleep 1
done
