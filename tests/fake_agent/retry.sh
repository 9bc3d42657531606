# Sourced by the fake agents: runs a command until it succeeds, for 30 s (the server may be
# restarting).
retry() {
    for _ in $(seq 60); do
        "$@" && return 0
        sleep 0.5
    done
    return 1
}
