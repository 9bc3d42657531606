#!/usr/bin/env perl
# A fake Claude Code for the mailbox tests: it keeps an input line like a TUI (bracketed paste,
# typed keys, Ctrl-U clears it, Enter submits it) and logs every submitted prompt, byte for byte,
# so a test can tell whether a message arrived exactly once, in order, and in full. On each
# submit it sends the hooks Claude Code would (UserPromptSubmit with the prompt, then Stop)
# through the real `switchyard hook`, and draws Claude Code's screens around its input line.
#
# Environment: SWITCHYARD_BIN (the switchyard binary), FAKE_LOG (a directory: prompts go to
# FAKE_LOG/<agent>.log, one hex-encoded prompt a line; each hook's name goes to
# FAKE_LOG/<agent>.log.hooks once it has run), FAKE_TURN_MS (a turn's length, default
# 20; a prompt `work <N>ms` works N ms), FAKE_SUBMIT_HOLD (when set, Enter touches
# FAKE_LOG/<agent>.log.enter, then the prompt is held until FAKE_LOG/<agent>.log.go exists),
# FAKE_HOOKS (0: send no hooks, as an agent without them), FAKE_DRAW_MS (a TUI busy under load:
# it takes that long to take in a paste, and keys that arrive meanwhile are lost),
# FAKE_COUNT_PROMPTS (when set, the input line starts with the number of prompts taken, as a
# shell's numbered prompt does: after a turn it no longer reads as before it), plus
# SWITCHYARD_URL/AGENT/TOKEN_FILE, which the worker gives every pane.
use strict;
use warnings;

my $bin = $ENV{SWITCHYARD_BIN} or die "SWITCHYARD_BIN is not set\n";
my $agent = $ENV{SWITCHYARD_AGENT} || 'fake';
my $log = ($ENV{FAKE_LOG} or die "FAKE_LOG is not set\n") . "/$agent.log";
my $turn_ms = $ENV{FAKE_TURN_MS} // 20;
my $submit_hold = $ENV{FAKE_SUBMIT_HOLD} // '';
my $hooks = ($ENV{FAKE_HOOKS} // '1') ne '0';
my $draw_ms = $ENV{FAKE_DRAW_MS} // 0;
my $count_prompts = $ENV{FAKE_COUNT_PROMPTS} // '';

system('stty', 'raw', '-echo');
$| = 1;
# Ask for bracketed paste, as Claude Code does: a multi-line paste is one paste, not lines.
print "\e[?2004h";

my ($input, $prompts, $working) = ('', 0, 0);
my $rule = "\x{2500}" x 40;
binmode STDOUT, ':utf8';

sub draw {
    my $shown = $input;
    if ($shown =~ /[\n\r\e]/ || length($shown) > 60) {
        my $lines = ($shown =~ tr/\n//) + 1;
        $shown = "[Pasted text +$lines lines, " . length($input) . " bytes]";
    }
    $shown =~ s/[\x00-\x1f\x7f-\x{9f}]/?/g;
    my $busy = $working ? "\x{273b} Thinking\x{2026} (esc to interrupt)\r\n" : "\r\n";
    # The cursor ends on the input line, as a TUI waiting for input leaves it.
    my $prompt = $count_prompts ? "$prompts> " : "> ";
    print "\e[H\e[2J\x{23fa} fake agent $agent: $prompts prompts so far\r\n$busy\r\n$rule\r\n$prompt$shown";
}

sub json_string {
    my ($s) = @_;
    $s =~ s/(["\\])/\\$1/g;
    $s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord $1)/ge;
    return "\"$s\"";
}

sub hook {
    my ($name, $extra) = @_;
    return unless $hooks;
    my $json = sprintf('{"session_id":"fake","transcript_path":"/tmp/fake.jsonl","cwd":%s,"hook_event_name":"%s"%s}',
        json_string($ENV{PWD} // '/'), $name, $extra // '');
    open(my $h, '|-', $bin, 'hook') or return;
    binmode $h;
    print $h $json;
    close $h;
    # The hook has run (reached the server or given up): a test can wait for that.
    if (open(my $ran, '>>', "$log.hooks")) {
        print $ran "$name\n";
        close $ran;
    }
}

sub submit {
    my $prompt = $input;
    $input = '';
    if ($prompt eq '') {
        # An Enter with nothing typed: a bare Enter a real agent might act on. Logged for the
        # tests that must never see one.
        if (open(my $bare, '>>', "$log.bare")) {
            print $bare "bare Enter\n";
            close $bare;
        }
        return;
    }
    if ($submit_hold) {
        # Tell the test Enter arrived, then take the prompt only when it says so (after it
        # killed the server, say): no timing decides what the server sees.
        if (open(my $mark, '>>', "$log.enter")) {
            close $mark;
        }
        my $waited_ms = 0;
        while (!-e "$log.go" && $waited_ms < 120_000) {
            select(undef, undef, undef, 0.02);
            $waited_ms += 20;
        }
    }
    open(my $out, '>>', $log) or die "cannot open $log: $!\n";
    binmode $out;
    syswrite($out, unpack('H*', $prompt) . "\n");
    close $out;
    $prompts++;
    hook('UserPromptSubmit', ',"prompt":' . json_string($prompt));
    $working = 1;
    draw();
    # A message's first line names its sender; `work <N>ms` is its last.
    my $ms = $prompt =~ /^work (\d+)ms\z/m ? $1 : $turn_ms;
    select(undef, undef, undef, $ms / 1000);
    $working = 0;
    hook('Stop');
    # Last: whatever a hook printed (it reports failures on stderr) must not stay on the screen.
    draw();
}

hook('SessionStart');
draw();

my ($raw, $pasting) = ('', 0);
my ($open, $close) = ("\e[200~", "\e[201~");
while (1) {
    my $got = sysread(STDIN, my $chunk, 65536);
    last unless $got;
    $raw .= $chunk;
    while (length $raw) {
        if ($pasting) {
            my $end = index($raw, $close);
            if ($end < 0) {
                # Keep what could be the start of the closing marker for the next read.
                my $keep = length($raw) < 5 ? length($raw) : 5;
                $input .= substr($raw, 0, length($raw) - $keep);
                $raw = substr($raw, length($raw) - $keep);
                last;
            }
            $input .= substr($raw, 0, $end);
            $raw = substr($raw, $end + length $close);
            $pasting = 0;
            if ($draw_ms) {
                # Busy taking the paste in: whatever else arrives meanwhile is lost.
                select(undef, undef, undef, $draw_ms / 1000);
                my $pending = '';
                vec($pending, fileno(STDIN), 1) = 1;
                while (select(my $ready = $pending, undef, undef, 0)) {
                    sysread(STDIN, my $lost, 65536) or last;
                }
                $raw = '';
            }
            next;
        }
        if (substr($raw, 0, 1) eq "\e") {
            if (index($raw, $open) == 0) {
                $raw = substr($raw, length $open);
                $pasting = 1;
                next;
            }
            last if length($raw) < length($open) && index($open, $raw) == 0;
        }
        my $c = substr($raw, 0, 1, '');
        if ($c eq "\r") {
            submit();
        } elsif ($c eq "\x15") {
            $input = '';
        } elsif ($c eq "\x7f") {
            chop $input;
        } else {
            $input .= $c;
        }
    }
    draw();
}
