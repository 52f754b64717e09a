#!/bin/sh
# Rebuilds data/corpus/english.txt from Debian 12's dict-devil (1.0-13.1) and dict-jargon
# (4.4.7-3.1): the dictzip-compressed texts with dictfmt's "00-database-*" tags and the trailing
# alphabet line removed. Both texts are in the public domain (see data/README.md).
# Usage: [DICTD_DIR=/usr/share/dictd] sh data/corpus/make_corpus.sh [OUT]
set -eu
dir=${DICTD_DIR:-/usr/share/dictd}
out=${1:-$(dirname "$0")/english.txt}
for name in devil jargon; do
  zcat "$dir/$name.dict.dz" | grep -v '^00-database' | sed '$d'
done >"$out"
