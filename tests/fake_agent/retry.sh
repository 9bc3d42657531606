# Sourced by the fake agents: runs a command until it succeeds, for 2 minutes (the server may be
# restarting; on a loaded machine a restart after SIGKILL can take most of the minute the crash
# tests allow it, and a fake that gave up sooner left its group unreported for good).
retry() {
    for _ in $(seq 240); do
        "$@" && return 0
        sleep 0.5
    done
    return 1
}
