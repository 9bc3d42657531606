#!/usr/bin/env python3
"""A fake agent's question dialog, drawn as Codex draws one (tests/fixtures/screens/codex/
question.txt), that behaves as the CLIs' menus do: it asks for bracketed paste, moves its
highlight with the arrow keys, and Enter picks the highlighted option — a pasted "3" picks
nothing. Pasted text goes into its notes line instead (as Codex's notes, or Claude Code's "Type
something."), and Enter with notes answers in those words. Its brief, should it be typed into the
dialog (pasted with the Enter after it), is no answer: it is ignored. Writes the answer to the
file named by its argument ("option N" or "words: …") and exits."""
import os
import re
import sys
import termios
import time
import tty

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "screens", "codex", "question.txt")
OPTION = re.compile(r"^\s*(?:\u203a\s*)?(\d)\.\s(.*)$")


def main():
    lines = open(FIXTURE, encoding="utf-8").read().rstrip("\n").split("\n")
    options = [i for i, line in enumerate(lines) if OPTION.match(line)]
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)  # flushes what was typed before the dialog was drawn
    os.write(1, b"\x1b[?2004h")
    at, notes, pending, pasting, pasted, brief = 0, "", b"", False, b"", False

    def draw():
        out = "\x1b[2J\x1b[H"
        for i, line in enumerate(lines):
            if i in options:
                m = OPTION.match(line)
                line = ("  \u203a " if options.index(i) == at else "    ") + f"{m.group(1)}. {m.group(2)}"
            out += line + "\r\n"
        out += "\r\n  notes: " + notes
        os.write(1, out.encode())

    try:
        draw()
        while True:
            pending += os.read(fd, 1024)
            while pending:
                if pasting:
                    end = pending.find(b"\x1b[201~")
                    if end < 0:
                        pasted, pending = pasted + pending, b""
                        break
                    pasted += pending[:end]
                    pending, pasting = pending[end + 6 :], False
                    text = pasted.decode(errors="replace")
                    words = [w.strip() for w in text.splitlines() if w.strip()]
                    brief = "Your assignment" in text
                    if not brief:
                        notes = words[-1] if words else notes
                    pasted = b""
                elif pending.startswith(b"\x1b[200~"):
                    pending, pasting = pending[6:], True
                elif pending.startswith(b"\x1b[A"):
                    pending, at = pending[3:], max(0, at - 1)
                elif pending.startswith(b"\x1b[B"):
                    pending, at = pending[3:], min(len(options) - 1, at + 1)
                elif pending[:1] in (b"\r", b"\n") and brief:
                    pending, brief = pending[1:], False
                elif pending[:1] in (b"\r", b"\n"):
                    answer = f"words: {notes}" if notes else f"option {at + 1}"
                    with open(sys.argv[1], "w", encoding="utf-8") as f:
                        f.write(answer + "\n")
                    # The words leave the notes line as they are taken, as a TUI's input line
                    # empties on Enter, before the agent goes to work on them.
                    notes = ""
                    draw()
                    time.sleep(2)
                    return
                elif pending.startswith(b"\x1b") and len(pending) < 3:
                    break
                else:
                    pending = pending[1:]
            draw()
    finally:
        os.write(1, b"\x1b[?2004l\x1b[2J\x1b[H")
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


main()
