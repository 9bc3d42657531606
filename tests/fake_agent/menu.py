#!/usr/bin/env python3
"""A fake agent that asks with a menu, as the agent CLIs' permission dialogs do: it asks for
bracketed paste, moves its highlight with the arrow keys, ignores pasted text (a pasted "3" picks
nothing), and Enter picks the highlighted option. It prints what was chosen and closes the menu;
a pasted line with "ask" opens it again."""
import os
import sys
import termios
import tty

OPTIONS = ["Yes", "Yes, and don't ask again for this command", "No, and tell the agent what to do differently (esc)"]


def draw(at, chosen, asking):
    out = "\x1b[2J\x1b[H"
    for line in chosen[-5:]:
        out += line + "\r\n"
    if not asking:
        os.write(1, (out + "\r\n> ").encode())
        return
    # Claude Code's dialog: a rule above it, its title, the command, the question.
    out += "\r\n" + "\u2500" * 60 + "\r\n Bash command\r\n\r\n   rm -rf build\r\n\r\n Do you want to proceed?\r\n"
    for i, label in enumerate(OPTIONS):
        out += (" \u276f " if i == at else "   ") + f"{i + 1}. {label}\r\n"
    out += "\r\n Esc to cancel\r\n"
    os.write(1, out.encode())


def main():
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    os.write(1, b"\x1b[?2004h")
    at, chosen, pending, pasting, pasted, asking = 0, [], b"", False, b"", True
    try:
        draw(at, chosen, asking)
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
                    if not asking and b"ask" in pasted:
                        asking, at = True, 0
                    pasted = b""
                elif pending.startswith(b"\x1b[200~"):
                    pending, pasting = pending[6:], True
                elif pending.startswith(b"\x1b[A"):
                    pending, at = pending[3:], max(0, at - 1)
                elif pending.startswith(b"\x1b[B"):
                    pending, at = pending[3:], min(len(OPTIONS) - 1, at + 1)
                elif pending[:1] in (b"\r", b"\n"):
                    pending = pending[1:]
                    if asking:
                        chosen.append(f"chose {at + 1}: {OPTIONS[at]}")
                        asking = False
                elif pending.startswith(b"\x1b") and len(pending) < 3:
                    break
                else:
                    pending = pending[1:]
            draw(at, chosen, asking)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


main()
