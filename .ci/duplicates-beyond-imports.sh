#!/usr/bin/env bash
# duplicates-beyond-imports.sh [DIR]: the `duplicates` tool's pairs over the
# tracked and untracked, not ignored files of DIR (default: this checkout),
# with every Go import block blanked first. The tool passes over single
# import lines but reads the lines inside `import ( ... )` as code, so two
# files with the same imports pair up; blanking the block (its line count
# kept, so the line numbers printed are the real ones) leaves the pairs
# that share code. Not run by .ci/run: the tool is a developer's command.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
command -v duplicates >/dev/null || { echo "duplicates: not on PATH" >&2; exit 2; }
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cd "$src"
{ git ls-files; git ls-files --others --exclude-standard; } | sort -u | while IFS= read -r f; do
	[ -f "$f" ] || continue
	mkdir -p "$copy/$(dirname "$f")"
	cp "$f" "$copy/$f"
done
find "$copy" -name '*.go' -print0 | xargs -0 perl -0pi -e 's/^import \((.*?)^\)/"import (" . ("\n" x ($1 =~ tr#\n##)) . ")"/gsme'
cd "$copy"
duplicates --most 200 --seconds 120
