#!/usr/bin/env python3
# A custom agent as most agent CLIs are made: a script with a shebang, so tmux's
# `pane_current_command` names its interpreter (`python3`), never the script. It reads lines at
# its prompt; `run <argv…>` runs that command in the foreground as a shell with job control does
# (its own process group, given the terminal, taken back once it ends), then prompts again.
import os
import signal
import subprocess
import sys

tty = sys.stdin.fileno()
# Taking the terminal back from a background group would stop this process otherwise.
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
# A group of its own, holding the terminal, as a shell with job control makes at its start
# (under bubblewrap's pid namespace the pane's group is not even visible to take back).
try:
    os.setpgid(0, 0)
except OSError:
    pass  # already a session's leader: the pane's own group
os.tcsetpgrp(tty, os.getpgrp())


def in_foreground(argv):
    def child():
        os.setpgid(0, 0)
        os.tcsetpgrp(tty, os.getpgrp())

    proc = subprocess.Popen(argv, preexec_fn=child)
    try:
        # Both sides hand the terminal over, whichever runs first (as shells do).
        os.setpgid(proc.pid, proc.pid)
        os.tcsetpgrp(tty, proc.pid)
    except OSError:
        pass
    proc.wait()
    os.tcsetpgrp(tty, os.getpgrp())
    return proc.returncode


print("py agent ready", flush=True)
while True:
    sys.stdout.write("py> ")
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        break
    words = line.split()
    if words[:1] == ["run"] and len(words) > 1:
        code = in_foreground(words[1:])
        print(f"ran {' '.join(words[1:])}: {code}", flush=True)
    elif words:
        print(f"heard: {line.strip()}", flush=True)
