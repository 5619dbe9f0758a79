#!/usr/bin/env bash
# The README and docs/ hold together: every relative link points at a file
# of the repository (and a #fragment at one of its headings), every
# repository path a command or the layout table names exists, and the
# README stays a user's page (about 250 lines; measurements go to
# docs/results/).
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1
plan 4

docs=$(ls README.md docs/*.md docs/results/*.md test/softroce/README.md)

# GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'
slugs() {
    grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ //' | tr 'A-Z' 'a-z' |
        sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

bad=""
for f in $docs; do
    dir=$(dirname "$f")
    while read -r link; do
        target=${link%%#*} frag=""
        [[ $link == *"#"* ]] && frag=${link#*#}
        case "$target" in http*|mailto:*) continue ;; esac
        path=$dir/$target
        [ -n "$target" ] || path=$f
        if [ ! -e "$path" ]; then
            bad+="$f: $link (no $path)"$'\n'
        elif [ -n "$frag" ]; then
            md=$path
            [ -d "$md" ] && md=$md/README.md
            slugs "$md" | grep -qxF "$frag" || bad+="$f: $link (no heading #$frag in $md)"$'\n'
        fi
    done < <(grep -oE '\]\([^)]+\)' "$f" | sed -E 's/^\]\(//; s/\)$//')
done
[ -z "$bad" ]; ok $? "every relative link in README.md and docs/ resolves ($(echo $docs | wc -w) files)"
[ -z "$bad" ] || printf '%s' "$bad" | diag

# repository paths in the README's commands and tables, and in docs/
missing=""
for p in $(grep -ohE '`[^` ]*(npb-scripts|test|channel|ringbuf|zcopy|reg|docs)/[A-Za-z0-9_./{},-]*`' \
    README.md docs/*.md | tr -d '`' | sort -u); do
    p=${p%%[,)]}
    case "$p" in *'{'*) p=$(eval echo "$p") ;; esac
    for q in $p; do
        [ -e "$q" ] || [ -e "channel/$q" ] || missing+="$q "
    done
done
[ -z "$missing" ]; ok $? "every repository path the README and docs/ name exists"
[ -z "$missing" ] || echo "$missing" | diag

# the quick start: two commands, both in the tree and executable
qs=$(sed -n '/^## Quick start/,/^## /p' README.md | sed -n '/^```sh/,/^```/p' | grep -vE '^```' |
    awk '{print $1}')
n=0 notx=""
for c in $qs; do n=$((n + 1)); [ -x "$c" ] || notx+="$c "; done
[ "$n" -eq 2 ] && [ -z "$notx" ]
ok $? "the quick start is two executable commands ($(echo $qs))"

lines=$(wc -l < README.md)
[ "$lines" -le 300 ]; ok $? "README.md is a user's page: $lines lines (at most ~250-300)"
done_testing
