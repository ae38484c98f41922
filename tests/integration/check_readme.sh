#!/usr/bin/env bash
# README.md's "Using it" snippet is what a newcomer copies first: it must
# build cleanly (-Wall -Wextra -Werror) against roshm.h and link libroshm.
#   check_readme.sh SRC LIBDIR [SANITIZE]
# In a sanitizer build (SANITIZE not "none") libroshm is instrumented for
# the compiler that built it: the snippet is compiled there, linked only in
# the plain build.
set -u
src=$1 lib=$2 san=${3:-none}
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; exit 1; }
d=$(th_tmpdir readme)
trap 'th_rmdir "$d"' EXIT
# the first ```c block after "## Using it": includes at file scope, the rest in main()
python3 - "$src/README.md" "$d/snippet.c" <<'PY' || fail "no C snippet under '## Using it' in README.md"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'^## Using it\n```c\n(.*?)^```', text, re.S | re.M)
if not m:
    sys.exit(1)
lines = m.group(1).splitlines()
inc = [l for l in lines if l.startswith('#include')]
body = [l for l in lines if not l.startswith('#include')]
open(sys.argv[2], 'w').write('\n'.join(inc) + '\nint main(void)\n{\n' +
    '\n'.join('\t' + l for l in body) + '\n\treturn 0;\n}\n')
PY
link=(-L"$lib" -lroshm -o "$d/snippet")
[[ $san == none ]] || link=(-c -o "$d/snippet.o")
cc -std=gnu11 -Wall -Wextra -Werror -I"$src/client-lib/include" "$d/snippet.c" "${link[@]}" \
  2> "$d/err" || fail "README snippet: $(cat "$d/err")"
echo "check_readme: 1 passed, 0 failed"
