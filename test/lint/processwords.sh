#!/usr/bin/env bash
# Fails, listing file:line, where a tracked file names the process that
# wrote it ("issue 10", "(issue 16 item 2)", "wave-2", "this session",
# "round 3", "finding 7", "before this change", "PR #12") instead of the
# behaviour meant: a comment or doc says what the code does and why; git log
# says who asked for it and when.
#
#   test/lint/processwords.sh [path...]    (default: every tracked file)
#
# PROCESSWORDS_EXCLUDE lists path prefixes to skip, separated by spaces.
#
# A reference split across two lines ("before issue" / "// 17") is found:
# each line is read with the next one's text, comment markers stripped.
# Terms of other trades are not the process and pass: "round trip",
# "round robin", a TLS or login "session" (only "this/that/previous/...
# session" is flagged, never "session" alone), and links to a dependency's
# tracker (github.com/o/r/issues/N, golang/go#N, go.dev/issue/N). This
# script (whose examples above would match), generated files, go.sum and
# fuzz corpora are skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$#" -gt 0 ]; then
	files=("$@")
else
	mapfile -t files < <(git ls-files 2>/dev/null || find . -type f -not -path './.git/*' | sed 's|^\./||')
fi

keep=()
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	case $f in
	test/lint/processwords.sh | go.sum | */go.sum | *.pb.go | */testdata/fuzz/* | *.png | *.jpg | *.gz) continue ;;
	esac
	skip=
	for p in ${PROCESSWORDS_EXCLUDE:-}; do
		case $f in "$p"*) skip=1 ;; esac
	done
	[ -z "$skip" ] && keep+=("$f")
done
[ "${#keep[@]}" -eq 0 ] && exit 0

perl -e '
	my $hits = 0;
	my $word = qr/issue|wave|round|session|sprint|iteration|finding|ticket|pull request/i;
	my $num  = qr/(?:$word)s?[ \t]*[-#]?[ \t]*\d+/i;
	my $this = qr/\b(?:this|that|previous|earlier|last|next|same) (?:issue|wave|session|round|sprint|iteration)\b|\b(?:before|after|since|until) (?:this|that) (?:change|commit|patch|fix)\b/i;
	FILE: for my $f (@ARGV) {
		open(my $fh, "<", $f) or die "$f: $!";
		my @l = <$fh>;
		close $fh;
		next FILE if @l && grep { /^\/\/ Code generated .* DO NOT EDIT\.$/ } @l[0 .. ($#l < 5 ? $#l : 5)];
		next FILE if grep { /\0/ } @l[0 .. ($#l < 5 ? $#l : 5)];
		for my $i (0 .. $#l) {
			my $cur = $l[$i];
			chomp $cur;
			my $next = $i < $#l ? $l[$i + 1] : "";
			chomp $next;
			$next =~ s{^\s*(?://|--|#|\*|;)?\s*}{};
			my $text = "$cur $next";
			# Terms of other trades and dependency trackers are not the
			# process: masked with as many characters, so offsets hold.
			$text =~ s{(\bround[- ]+(?:trips?|robin)\b|\S*github\.com/[^\s/]+/[^\s/]+/(?:issues|pull)/\d+\S*|\bgo\.dev/issues?/\d+|\b[\w.-]+/[\w.-]+#\d+)}{"_" x length($1)}gie;
			while ($text =~ /\b(?:$num)|$this|\bPRs? ?#?\d+/g) {
				next if $-[0] > length($cur);
				printf "%s:%d: %s\n", $f, $i + 1, $&;
				$hits++;
				last;
			}
		}
	}
	if ($hits) {
		print STDERR "$hits line(s) name the process that wrote them (issue N, wave N, this session, ...): say the behaviour meant instead\n";
		exit 1;
	}
' "${keep[@]}"
